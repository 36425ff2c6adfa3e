"""Mechanism files: the one loader, which verifies a file from first principles.

A mechanism file is one ``.npz`` readable with ``numpy.load(path, allow_pickle=False)``
and no metricdp installed (written by :meth:`Mechanism.save`), holding

* ``matrix`` -- float64 (n, n), row-stochastic: ``matrix[u, v] = Pr[M(u) = v]``. For an
  exact family this *is* the mechanism (releases are drawn from it); for an estimated
  family (Madlib, the subsampled exponential mechanism) it is a Monte-Carlo estimate,
  for reports only: releases come from the family's true sampler, and third parties must
  not sample the stored estimate;
* ``distances`` -- float64 (n, n), the metric the mechanism protects;
* ``labels`` -- unicode strings (n,);
* ``metadata`` -- a 0-d unicode array of standard JSON with at least ``mechanism``,
  ``epsilon``, ``params``, ``metricdp_version`` (and ``lp`` when an LP was solved);
* optionally ``points`` -- float64 (n, dim), the coordinates, which true samplers of
  continuous mechanisms (Madlib) need;
* for a mechanism with a separate output set (:mod:`metricdp.outputs`; metadata
  ``"outputs": {"m": m, ...}``): ``matrix`` is (n, m), ``output_labels`` -- unicode
  (m,), ``output_distances`` -- float64 (n, m), the distances d(x, y) from every input to
  every output (what losses use; privacy is over ``distances`` only), and optionally
  ``output_points`` -- float64 (m, dim), the outputs' coordinates.

What the loader trusts: nothing. :func:`load_mechanism` checks, whatever the file says,

1. the arrays' shapes and types, the matrix row-stochastic, the distances a metric;
2. when the file stores points and a coordinate metric (euclidean, haversine, manhattan,
   chebyshev): the distances recomputed from them equal the stored ones to float rounding
   (a file cannot claim privacy against distances its own points contradict); with
   another metric (a graph, an elastic metric) the points are for display only; with
   ``mahalanobis`` the metadata records the public covariance (``space.covariance``, checked
   symmetric positive definite) and the distances are recomputed with it;
2b. infinite distances only with the claim ``space.policy_graph.components`` (a policy
   graph: an extended metric whose ``+inf`` entries separate exactly that many
   components, each a metric); the audit then covers the pairs at finite distance only;
3. the claimed epsilon finite and > 0;
4. exactness from the registry, never from the file: an exact family's matrix is always
   audited at the claimed epsilon; an estimated family's claimed epsilon must be at least
   the proven epsilon of its true sampler, re-derived from its stored parameters, which
   are validated like a builder's inputs;
5. with ``space=`` (``evaluate --space POINTS``), a trusted space the caller supplies: the
   labels must match and the matrix is audited against the trusted distances instead of
   the file's. Use it whenever the file comes from someone else: the stored distances are
   then not even consulted for privacy;
6. a separate output set: the metadata's ``m``, the labels (unique strings), the cross
   distances (finite, >= 0, (n, m)) and the matrix's shape agree; the family is one that
   takes outputs; with a coordinate metric and points stored for inputs and outputs, the
   cross distances recomputed from them equal the stored ones, and a coordinate metric
   claimed for the outputs is the space's and comes with the output points (cross
   distances only affect losses, but a file is never trusted for what it claims;
   ``precomputed`` cross distances, given without points, cannot be checked);
7. the audit of item 4 is the dense O(n^3) audit unless the metadata records the structure
   its builder proved (``structure``, versioned: :func:`~metricdp.audit_structured.structure_record`):
   then the structured proof it names is re-derived from the file's matrix, distances and
   points (:mod:`metricdp.mechanisms.file_structure`, O(n^2)), the record only selecting
   which; a file whose content does not have the claimed structure, or whose proof does
   not reach the claimed epsilon, is refused.
"""

from __future__ import annotations

import json
import zipfile
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from .._readonly import frozen
from .._resources import check_allocation
from .._validation import check_epsilon, check_metric, check_probability_vector, check_stochastic
from ..audit import audit, finite_components
from ..errors import ClaimError, MechanismFileError, PrivacyViolationError, ValidationError
from ..io import NPY_HEADER_ERRORS, check_npy_header
from ..outputs import OutputSet
from ..spaces import (
    METRICS,
    POINT_METRICS,
    MetricSpace,
    check_covariance,
    check_extended_metric,
    mahalanobis_distances,
    pairwise_distances,
)
from . import registry
from .base import _AUDITED, AUDIT_RTOL, Mechanism
from .file_structure import structured_audit

__all__ = ["load_mechanism"]

_REQUIRED = ("matrix", "distances", "labels", "metadata")
#: Optional members, the only others read: the inputs' coordinates and a separate output set.
_OPTIONAL = ("points", "output_labels", "output_distances", "output_points")
_TRIANGLE_CHECK_MAX_N = 2000
#: Relative tolerance between stored and recomputed distances: the stored ones were
#: computed by the same formulas, so they agree to a few ulps; 1e-9 leaves room for a
#: different BLAS and nothing for a tampered scale.
_DISTANCE_RTOL = 1e-9
_RESERVED = ("mechanism", "epsilon", "params", "metricdp_version", "exact", "space", "outputs", "structure")


#: Members a mechanism file may hold at most (it needs 8); the zip's directory is read
#: only after its end record says so, so a file of a million empty members costs nothing.
_MAX_MEMBERS = 64
_EOCD = b"PK\x05\x06"  # end of central directory record: its entry count is at offset 10


def _check_member_count(p: Path, fh: Any) -> None:
    """Refuse an archive whose end record declares more than :data:`_MAX_MEMBERS` entries
    (found as :mod:`zipfile` finds it: at the end, else the last one in the final 64 KiB)."""
    size = fh.seek(0, 2)
    fh.seek(max(0, size - (1 << 16) - 22))
    tail = fh.read()
    at = len(tail) - 22 if tail[-22:-18] == _EOCD else tail.rfind(_EOCD)
    if at < 0 or len(tail) < at + 22:
        return  # zipfile will refuse it
    total = int.from_bytes(tail[at + 10:at + 12], "little")
    if total > _MAX_MEMBERS:
        raise MechanismFileError(f"{p}: not a mechanism file ({total:,} members; a mechanism file has at most 8)")


def _read_members(p: Path, archive: zipfile.ZipFile) -> dict[str, np.ndarray]:
    """The arrays of the members named exactly ``KEY.npy`` for the keys of :data:`_REQUIRED`
    and :data:`_OPTIONAL`; nothing else is opened.

    Every header is vetted first (:func:`metricdp.io.check_npy_header`: no pickle, the
    declared size within the memory guard), then their total, and only then is any array
    read -- the allocation is the one the vetted header declared. A name that appears twice
    is refused (which copy would be read is the zip reader's choice, not the file's
    writer's); members under other names (``matrix`` without ``.npy``, ``x/matrix.npy``)
    are ignored unread, so they cannot make the loader allocate or parse anything.
    """
    infos: dict[str, zipfile.ZipInfo] = {}
    for info in archive.infolist():
        if info.filename in infos:
            raise MechanismFileError(f"{p}: not a mechanism file (member {info.filename} appears twice)")
        infos[info.filename] = info
    missing = [k for k in _REQUIRED if f"{k}.npy" not in infos]
    if missing:
        raise MechanismFileError(f"{p}: not a mechanism file (missing {', '.join(missing)})")
    keys = [k for k in (*_REQUIRED, *_OPTIONAL) if f"{k}.npy" in infos]
    total = 0.0
    for key in keys:
        with archive.open(infos[f"{key}.npy"]) as member:
            try:
                shape, dtype = check_npy_header(member, f"{p}: member {key}.npy")
            except ValidationError as ex:
                raise MechanismFileError(f"not a mechanism file: {ex}") from None
        total += float(np.prod(shape, dtype=np.float64)) * max(dtype.itemsize, 1)
    try:
        check_allocation(total, f"{p}: the {len(keys)} arrays of the mechanism file")
    except ValidationError as ex:
        raise MechanismFileError(f"not a mechanism file: {ex}") from None
    arrays = {}
    for key in keys:
        with archive.open(infos[f"{key}.npy"]) as member:
            arrays[key] = np.lib.format.read_array(member, allow_pickle=False)
    return arrays


def _read_arrays(p: Path) -> dict[str, np.ndarray]:
    if not p.is_file():
        raise MechanismFileError(f"{p}: no such file")
    try:
        # Not np.load: it leaks its handle when a zip is truncated, returns a bare array for a
        # .npy, tries pickle on anything else, and reads a member "matrix" (no suffix) in
        # place of "matrix.npy" -- unvetted.
        with p.open("rb") as fh:
            if not zipfile.is_zipfile(fh):
                raise MechanismFileError(f"{p}: not a mechanism file (not an .npz archive)")
            _check_member_count(p, fh)
            fh.seek(0)
            with zipfile.ZipFile(fh) as archive:
                return _read_members(p, archive)
    except MechanismFileError:
        raise
    except (ValueError, MemoryError) as ex:  # object arrays need pickle; truncated data
        raise MechanismFileError(f"{p}: not a mechanism file ({type(ex).__name__}: {ex})") from None
    except (*NPY_HEADER_ERRORS, zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError,
            NotImplementedError) as ex:  # NotImplementedError: an unsupported zip compression method
        raise MechanismFileError(f"{p}: not a readable .npz mechanism file ({type(ex).__name__}: {ex})") from None


def _metadata(p: Path, raw: np.ndarray) -> dict[str, Any]:
    if raw.dtype.kind != "U" or raw.ndim != 0:
        raise MechanismFileError(f"{p}: metadata must be a 0-d unicode array of JSON")

    def no_constants(token: str) -> Any:
        raise ValueError(f"non-standard JSON constant {token}")

    try:
        meta = json.loads(str(raw), parse_constant=no_constants)
    except (json.JSONDecodeError, ValueError, RecursionError) as ex:
        raise MechanismFileError(f"{p}: metadata is not JSON (standard JSON only: {ex})") from None
    if not isinstance(meta, dict) or not {"mechanism", "epsilon", "params"} <= meta.keys():
        raise MechanismFileError(f"{p}: metadata lacks mechanism, epsilon or params")
    if not isinstance(meta["mechanism"], str) or not isinstance(meta["params"], dict):
        raise MechanismFileError(f"{p}: metadata 'mechanism' must be a string and 'params' an object")
    if not isinstance(meta.get("space", {}), dict):
        raise MechanismFileError(f"{p}: metadata 'space' must be an object")
    return meta


def _float_array(p: Path, arrays: dict[str, np.ndarray], key: str, shape: tuple[int | None, ...]) -> np.ndarray:
    a = arrays[key]
    if a.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, a.shape, strict=False)):
        want = "(" + ", ".join("dim" if s is None else str(s) for s in shape) + ")"
        raise MechanismFileError(f"{p}: {key} has shape {a.shape}, expected {want} for {shape[0]} labels")
    if a.dtype.kind not in "fiu":
        raise MechanismFileError(f"{p}: {key} must be numeric, got dtype {a.dtype}")
    return a.astype(np.float64)


def _file_space(p: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> MetricSpace:
    labels = arrays["labels"]
    if labels.ndim != 1 or labels.dtype.kind != "U":
        raise MechanismFileError(f"{p}: labels must be a 1-d string array")
    n = len(labels)
    d = _float_array(p, arrays, "distances", (n, n))
    space_meta = meta.get("space") or {}
    policy = _policy_claim(p, space_meta)
    try:
        if policy is None:
            d = check_metric(d, labels=list(labels), triangle=n <= _TRIANGLE_CHECK_MAX_N)
        else:
            d = check_extended_metric(d, labels=list(labels), triangle=n <= _TRIANGLE_CHECK_MAX_N)
    except ValidationError as ex:
        hint = "" if policy is not None or np.isfinite(d).all() else (
            " (infinite distances need the metadata's space.policy_graph claim)")
        raise MechanismFileError(f"{p}: {ex}{hint}") from None
    if policy is not None:
        count, _ = finite_components(d)
        if count != policy:
            raise MechanismFileError(f"{p}: metadata claims a policy graph of {policy} components, but its distances "
                                     f"have {count}")
    metric = str(space_meta.get("metric", "precomputed"))
    points = None
    if "points" in arrays:
        points = _float_array(p, arrays, "points", (n, None))
        if not np.all(np.isfinite(points)):
            raise MechanismFileError(f"{p}: points are not all finite")
    covariance = _covariance_claim(p, space_meta, metric, points)
    if points is not None and metric in METRICS:
        recomputed = pairwise_distances(points, points, metric)
        np.fill_diagonal(recomputed, 0.0)
        _check_recomputed(p, "distance", d, recomputed, labels, labels, metric)
    elif points is not None and covariance is not None:  # mahalanobis: recomputed with the recorded covariance
        recomputed = mahalanobis_distances(points, points, covariance)
        np.fill_diagonal(recomputed, 0.0)
        _check_recomputed(p, "distance", d, recomputed, labels, labels, metric)
    elif metric in POINT_METRICS:
        raise MechanismFileError(f"{p}: metadata names the {metric} metric but the file stores no points")
    if points is not None:
        # with another metric (a graph, an elastic metric) the points are for display only:
        # the distances cannot be recomputed from them, so only a trusted space= pins them
        points = frozen(points)
    d = frozen(d)
    cell = space_meta.get("cell")
    try:
        cell_value = None if cell is None else check_epsilon(cell, "space.cell")
    except ValidationError as ex:
        raise MechanismFileError(f"{p}: {ex}") from None
    source = space_meta.get("covariance_source")
    return MetricSpace(d, tuple(str(x) for x in labels), metric, points, cell_value,
                       None if covariance is None else frozen(covariance),
                       None if covariance is None or not isinstance(source, str) else source)


def _policy_claim(p: Path, space_meta: dict[str, Any]) -> int | None:
    """The number of components a policy graph claims (``space.policy_graph.components``), or None."""
    claim = space_meta.get("policy_graph")
    if claim is None:
        return None
    count = claim.get("components") if isinstance(claim, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 2:
        raise MechanismFileError(f"{p}: metadata space.policy_graph must be an object with an integer "
                                 f"'components' >= 2, got {claim!r}")
    return count


def _covariance_claim(
    p: Path, space_meta: dict[str, Any], metric: str, points: np.ndarray | None
) -> np.ndarray | None:
    """The public covariance a ``mahalanobis`` file records (checked symmetric positive definite), or None."""
    raw = space_meta.get("covariance")
    if metric != "mahalanobis":
        if raw is not None:
            raise MechanismFileError(f"{p}: metadata records a covariance, which only the mahalanobis metric takes "
                                     f"(the file's metric is {metric!r})")
        return None
    if raw is None or points is None:
        raise MechanismFileError(f"{p}: a mahalanobis file must record its covariance and store its points, so that "
                                 "its distances can be recomputed")
    if not isinstance(raw, list) or not all(isinstance(r, list) and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in r) for r in raw):
        raise MechanismFileError(f"{p}: metadata space.covariance must be a list of rows of numbers")
    try:
        cov = np.array(raw, dtype=np.float64)
        check_covariance(cov, points.shape[1])
    except (ValidationError, ValueError) as ex:
        raise MechanismFileError(f"{p}: metadata space.covariance: {ex}") from None
    return cov


def _check_recomputed(
    p: Path, what: str, stored: np.ndarray, recomputed: np.ndarray, rows: Any, cols: Any, metric: str
) -> None:
    """Refuse a file whose stored distances differ from those its points give (a ClaimError)."""
    bad = np.abs(recomputed - stored) > _DISTANCE_RTOL * np.maximum(np.abs(recomputed), np.abs(stored))
    if bad.any():
        u, v = (int(x) for x in np.argwhere(bad)[0])
        raise ClaimError(
            f"{p}: stored {what} d({str(rows[u])!r}, {str(cols[v])!r}) = {float(stored[u, v])!r} differs from "
            f"the {float(recomputed[u, v])!r} the points give under the {metric} metric; refusing the file"
        )


def _file_outputs(p: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any], space: MetricSpace) -> OutputSet | None:
    """The file's separate output set, verified (item 6 of the module docstring), or None."""
    stored = [k for k in _OPTIONAL if k.startswith("output_") and k in arrays]
    declared = meta.get("outputs")
    if declared is None:
        if stored:
            raise MechanismFileError(f"{p}: stores {', '.join(stored)} but its metadata declares no outputs")
        return None
    if not isinstance(declared, dict) or isinstance(declared.get("m"), bool) or not isinstance(declared.get("m"), int):
        raise MechanismFileError(f"{p}: metadata 'outputs' must be an object with an integer 'm'")
    missing = [k for k in ("output_labels", "output_distances") if k not in arrays]
    if missing:
        raise MechanismFileError(f"{p}: metadata declares outputs but the file lacks {', '.join(missing)}")
    m = int(declared["m"])
    labels = arrays["output_labels"]
    if labels.ndim != 1 or labels.dtype.kind != "U" or len(labels) != m or m < 1:
        raise MechanismFileError(f"{p}: output_labels must be a 1-d string array of the declared m = {m} labels, "
                                 f"got shape {labels.shape} dtype {labels.dtype}")
    cross = _float_array(p, arrays, "output_distances", (space.n, m))
    points = None
    if "output_points" in arrays:
        dim = None if space.points is None else space.points.shape[1]
        points = _float_array(p, arrays, "output_points", (m, dim))
        if not np.all(np.isfinite(points)):
            raise MechanismFileError(f"{p}: output_points are not all finite")
    metric = str(declared.get("metric", "precomputed"))
    if metric not in (*METRICS, "precomputed"):
        raise MechanismFileError(f"{p}: metadata 'outputs' names an unknown metric {metric!r}")
    if metric != "precomputed":  # a coordinate metric is a claim: the space's, checked on the output points
        if space.metric in METRICS and metric != space.metric:
            raise MechanismFileError(f"{p}: metadata 'outputs' claims the {metric} metric, but the space's is "
                                     f"{space.metric}")
        if points is None:
            raise MechanismFileError(f"{p}: metadata 'outputs' claims the {metric} metric but the file stores no "
                                     "output_points to check the output distances against")
        if space.points is None or space.metric not in METRICS:
            metric = "precomputed"  # a trusted space without coordinates: nothing to check them on
    try:
        outputs = OutputSet(tuple(str(x) for x in labels), cross, points, metric)
    except ValidationError as ex:
        raise MechanismFileError(f"{p}: {ex}") from None
    if points is not None and space.points is not None and space.metric in METRICS:
        recomputed = pairwise_distances(space.points, points, space.metric)
        _check_recomputed(p, "output distance", cross, recomputed, space.labels, outputs.labels, space.metric)
    return outputs


def _check_estimated_params(p: Path, family: registry.Family, params: dict[str, Any], space: MetricSpace) -> None:
    """An estimated family's stored parameters validated as the builder validates its inputs."""
    try:
        family.check_sampler_params(params)
        for key, value in params.items():
            param = next((q for q in family.params if q.name == key), None)
            if param is not None and param.kind == "vector" and value is not None:
                checked = param.check(value, family.name)
                check_probability_vector(np.asarray(checked) / max(float(np.sum(checked)), 1e-300), space.n, key)
    except ValidationError as ex:
        raise MechanismFileError(f"{p}: {ex}") from None
    if family.name == "madlib" and (space.points is None or space.metric != "euclidean"):
        raise MechanismFileError(f"{p}: madlib needs the Euclidean points of its space")


def load_mechanism(path: str | PathLike[str], *, space: MetricSpace | None = None) -> Mechanism:
    """Read a mechanism file and verify it from first principles (see the module docstring).

    Parameters
    ----------
    path : path of the ``.npz`` file
    space : MetricSpace, optional
        A trusted space: its labels must equal the file's, and the matrix is audited
        against its distances (the file's distances and points are then only checked for
        consistency, never used for privacy).

    Raises
    ------
    MechanismFileError
        Any defect of the file; :class:`ClaimError` (also a PrivacyViolationError) when
        the file's privacy claim does not hold.
    """
    p = Path(path)
    arrays = _read_arrays(p)
    meta = _metadata(p, arrays["metadata"])
    file_space = own_space = _file_space(p, arrays, meta)
    if space is not None:
        if not isinstance(space, MetricSpace):
            raise ValidationError(f"space must be a MetricSpace, got {type(space).__name__}")
        if space.labels != file_space.labels:
            diff = next((i for i, (a, b) in enumerate(zip(space.labels, file_space.labels, strict=False)) if a != b),
                        min(space.n, file_space.n))
            raise ClaimError(f"{p}: its labels differ from the trusted space's (first at position {diff})")
        file_space = space
    n = file_space.n
    outputs = _file_outputs(p, arrays, meta, file_space)
    matrix = _float_array(p, arrays, "matrix", (n, n if outputs is None else outputs.m))
    if isinstance(meta["epsilon"], bool) or not isinstance(meta["epsilon"], int | float):
        raise MechanismFileError(f"{p}: epsilon must be a JSON number, got {meta['epsilon']!r}")
    try:
        matrix = check_stochastic(matrix, name="matrix", square=outputs is None)
        epsilon = check_epsilon(meta["epsilon"], "epsilon")
    except ValidationError as ex:
        raise MechanismFileError(f"{p}: {ex}") from None
    name = meta["mechanism"]
    if outputs is not None and not registry.supports_outputs(name):
        raise MechanismFileError(f"{p}: declares a separate output set, which {name!r} mechanisms never have")
    family = registry.FAMILIES.get(name)
    exact = True if family is None else family.exact
    if "exact" in meta and meta["exact"] is not exact:
        raise MechanismFileError(
            f"{p}: claims exact={meta['exact']!r}, but {name!r} is {'an exact' if exact else 'an estimated'} family"
        )
    if family is not None and not exact:
        _check_estimated_params(p, family, meta["params"], file_space)
    info = {k: v for k, v in meta.items() if k not in _RESERVED}
    token = None
    info.pop("audit_details", None)  # the level recorded is the one audited here (certify's rule)
    if exact and "structure" in meta:  # the structured proof the file names, re-derived from its content
        proof, record = structured_audit(p, meta["structure"], matrix, file_space, own_space, meta, epsilon,
                                         AUDIT_RTOL)
        token = _AUDITED
        info.update(audit=proof.method, audit_details=dict(proof.details), structure=record,
                    epsilon_audit=proof.epsilon)
    elif exact:
        result = audit(matrix, file_space.distances, normalize=True)  # what the exact sampler realizes
        if not result.satisfies(epsilon, AUDIT_RTOL):
            raise ClaimError(
                f"{p}: claims epsilon={epsilon!r} but its matrix is only {result.epsilon!r}-mDP "
                f"(triple u, v, w = {result.witness}); refusing to use it"
            )
        token = _AUDITED
        info.update(audit="dense", epsilon_audit=result.epsilon)
    try:
        return Mechanism(matrix, file_space, epsilon, name, meta["params"], info, exact=exact, outputs=outputs,
                         _token=token)
    except PrivacyViolationError as ex:
        raise ClaimError(f"{p}: claims epsilon={epsilon!r}, which does not hold: {ex}") from None
    except ValidationError as ex:
        raise MechanismFileError(f"{p}: metadata does not describe a mechanism ({ex})") from None
