r"""A mechanism file's structured audit, re-derived on load from the file's own content.

Above :data:`~metricdp.audit_structured.DENSE_MAX_N` inputs the builders certify the
planar Laplace, the exponential mechanism and their Bayesian remaps with the structured
proofs of :mod:`metricdp.audit_structured` (O(n^2) work) instead of the dense O(n^3)
audit, and record which in the metadata's ``structure``
(:func:`~metricdp.audit_structured.structure_record`, versioned). :func:`structured_audit`
is what :func:`metricdp.mechanisms.file.load_mechanism` runs for such a file. The record
only *selects* a proof; nothing in it is trusted:

* ``lattice-chain`` (the planar Laplace): the record's lattice (each input's cell, one
  input per cell, filling the named box) is recomputed from the points of a Euclidean grid
  and must match; for cell centres under ``haversine`` it is taken as recorded, since the
  bound below does not depend on it being right (the projection that would check it lives
  in :mod:`metricdp.location`, above this layer). On a full rectangle the file's own rows
  are the box rows of the proof (their rows *are* the mechanism seen from every box cell);
  on a lattice clipped by a region, the rows of the cells a chain path can visit
  (:func:`~metricdp.audit_structured.chain_cells`) are re-integrated from the stored
  parameters (``inner_epsilon``), regrouped by the stored remap when there is one. The
  proof's bound holds for *any* positive box rows and any lattice coordinates
  (docs/proofs/structured_audit.md, section 4), so a wrong parameter, lattice or remap
  can only make the bound too large to pass, never unsound.
* ``kernel`` (the exponential mechanism): the distances must be a coordinate metric
  recomputed bit for bit from the points
  (:func:`~metricdp.mechanisms.exponential.proven_metric`); the kernel proof measures the
  matrix against :math:`e^{-\varepsilon' d/2}` at the stored inner epsilon, which enters a
  bound that holds for any value.
* ``post-processing`` (a Bayesian remap M' = M R): over a lattice, the lattice-chain proof
  is applied to M' itself (a regrouping of columns can only lower every step's log-ratio);
  over a kernel, the source M is recomputed from the distances and the stored inner
  epsilon, certified by the kernel proof, and M' is checked entry by entry to be its
  regrouping by the stored remap's targets
  (:func:`~metricdp.audit_structured.postprocessing_audit`).

Every defect -- an unknown version or proof, points that are not the claimed lattice, a
metric that is not proven, a bound above the claimed epsilon -- is one
:class:`~metricdp.errors.MechanismFileError` (a :class:`~metricdp.errors.ClaimError` when
the privacy claim fails) naming the file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._resources import check_allocation
from ..audit_structured import (
    STRUCTURE_VERSION,
    StructuredAudit,
    chain_cells,
    kernel_audit,
    lattice_chain_audit,
    postprocessing_audit,
)
from ..errors import ClaimError, MechanismFileError, ValidationError
from ..spaces import MetricSpace

__all__ = ["structured_audit"]

#: Largest step order a file may ask for: the proof is sound at any order, and the step
#: count grows as its square (48 steps at the builders' order 6, 176 at 12).
_MAX_ORDER = 12


def _refuse(p: Path, why: str) -> MechanismFileError:
    return MechanismFileError(f"{p}: metadata 'structure' does not match the file: {why}; refusing it")


def _version(p: Path, record: Any, where: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise MechanismFileError(f"{p}: metadata '{where}' must be an object, got {record!r}")
    version = record.get("version")
    if isinstance(version, bool) or version != STRUCTURE_VERSION:
        raise MechanismFileError(f"{p}: metadata '{where}' has version {version!r}; this metricdp reads version "
                                 f"{STRUCTURE_VERSION} only")
    return record


def _positive_number(p: Path, value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise _refuse(p, f"{what} must be a finite number > 0, got {value!r}")
    return float(value)


def _targets(p: Path, meta: dict[str, Any], k: int) -> NDArray[np.intp]:
    """The stored remap's targets (``remap.targets``): k integers in [0, k)."""
    raw = meta.get("remap", {}).get("targets") if isinstance(meta.get("remap"), dict) else None
    if not isinstance(raw, list) or len(raw) != k or not all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t < k for t in raw):
        raise _refuse(p, f"a post-processing proof needs the remap's targets: {k} integers in [0, {k})")
    return np.asarray(raw, dtype=np.intp)


_Lattice = tuple[NDArray[np.float64], float, NDArray[np.intp], NDArray[np.intp], int, int]


def _lattice(p: Path, own: MetricSpace, record: dict[str, Any]) -> _Lattice:
    """The lattice of the proof: the inputs' coordinates in its plane (n, 2), the cell side h, each
    input's (row, col) and the box size.

    Euclidean grid points (``space.cell``): recomputed from the points, and the record's cells
    must be the same. Cell centres under ``haversine``: the record's cells and side, which
    cannot be checked against the points without the projection of :mod:`metricdp.location`
    and need not be -- the proof is sound for any cells (docs/proofs/structured_audit.md,
    section 4); they must only be a lattice of one input per cell that fills its box.
    """
    box, cells, h = record.get("box"), record.get("cells"), record.get("cell")
    if not (isinstance(box, list) and len(box) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                                                             for x in box)):
        raise _refuse(p, f"the lattice's box must be 2 integers >= 1, got {box!r}")
    if not (isinstance(cells, list) and len(cells) == own.n and all(
            isinstance(x, int) and not isinstance(x, bool) for x in cells)):
        raise _refuse(p, f"the lattice-chain record must list the cell of each of the {own.n} inputs")
    n_rows, n_cols = box
    try:
        check_allocation(24.0 * n_rows * n_cols, f"{p}: the lattice's box of {n_rows:,} x {n_cols:,} cells")
    except ValidationError as ex:
        raise _refuse(p, str(ex)) from None
    claimed = np.asarray(cells, dtype=np.intp)
    if claimed.min() < 0 or claimed.max() >= n_rows * n_cols or np.unique(claimed).size != own.n:
        raise _refuse(p, f"the inputs' cells must be {own.n} distinct cells of the {n_rows} x {n_cols} box")
    rows, cols = np.divmod(claimed, n_cols)
    if rows.min() != 0 or cols.min() != 0 or rows.max() != n_rows - 1 or cols.max() != n_cols - 1:
        raise _refuse(p, f"the inputs' cells do not span the {n_rows} x {n_cols} box")
    if own.metric == "euclidean" and own.cell is not None and own.points is not None and own.points.shape[1] == 2:
        pts, h = np.asarray(own.points), float(own.cell)
        ij = np.rint((pts - pts.min(axis=0)) / h).astype(np.intp)
        if not (np.array_equal(ij[:, 0], rows) and np.array_equal(ij[:, 1], cols)):
            u = int(np.flatnonzero((ij[:, 0] != rows) | (ij[:, 1] != cols))[0])
            raise _refuse(p, f"input {own.labels[u]!r} lies in lattice cell {ij[u].tolist()} of its points, not "
                             f"{[int(rows[u]), int(cols[u])]}")
        return pts, h, rows, cols, n_rows, n_cols
    h = _positive_number(p, h, "the lattice's cell")
    return np.column_stack([rows, cols]) * h, h, rows, cols, n_rows, n_cols


def _lattice_proof(
    p: Path, record: dict[str, Any], matrix: NDArray[np.float64], audit_space: MetricSpace, own: MetricSpace,
    meta: dict[str, Any], targets: NDArray[np.intp] | None,
) -> StructuredAudit:
    order = record.get("order")
    if isinstance(order, bool) or not isinstance(order, int) or not 1 <= order <= _MAX_ORDER:
        raise _refuse(p, f"the lattice-chain order must be an integer in [1, {_MAX_ORDER}], got {order!r}")
    plane, cell, rows, cols, n_rows, n_cols = _lattice(p, own, record)
    # outputs no input reaches constrain nothing (the cells a remap sends no release to)
    used: NDArray[np.bool_] = np.asarray(matrix.any(axis=0))
    sub = matrix if used.all() else matrix[:, used]
    if not np.all(sub > 0):
        u, w = (int(x) for x in np.argwhere(sub <= 0)[0])
        raise ClaimError(f"{p}: output {int(np.flatnonzero(used)[w])} is impossible from input {u} and possible "
                         "from another: its level is infinite; refusing the file")
    cells = rows * n_cols + cols
    if n_rows * n_cols == own.n:  # a full rectangle: the rows themselves are the box rows, each at its cell
        box, box_cells = sub, cells
    else:  # clipped by a region: the empty cells' rows re-integrated from the stored parameters
        box, box_cells = _clipped_box(p, plane, meta, targets, used, cells, sub, (n_rows, n_cols))
    try:
        return lattice_chain_audit(sub, audit_space.distances, box, (n_rows, n_cols), rows, cols, cell, order=order,
                                   box_cells=box_cells)
    except ValidationError as ex:
        raise _refuse(p, str(ex)) from None


def _clipped_box(
    p: Path, plane: NDArray[np.float64], meta: dict[str, Any], targets: NDArray[np.intp] | None,
    used: NDArray[np.bool_], cells: NDArray[np.intp], sub: NDArray[np.float64], shape: tuple[int, int],
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Box rows of a lattice subset and their cells: the planar Laplace integrated at the stored inner
    epsilon from every box cell a chain path can visit (regrouped by ``targets``), with the inputs' own
    cells holding the file's rows."""
    from .planar_laplace import CHAIN_ORDER, box_rows

    params = meta.get("params", {})
    if not str(meta.get("mechanism", "")).startswith("planar-laplace"):
        raise _refuse(p, "a lattice clipped by a region is proven through the planar Laplace's box rows, and this "
                         f"file's mechanism is {meta.get('mechanism')!r}")
    inner = _positive_number(p, params.get("inner_epsilon"), "params.inner_epsilon")
    rows, cols = np.divmod(cells, shape[1])
    if int(chain_cells(rows, cols, shape, CHAIN_ORDER).sum()) > 2 * len(cells):  # the builder's rule
        raise _refuse(p, "the cells a chain path can visit are more than twice the inputs: no builder proves that")
    box, box_cells = box_rows(MetricSpace.from_points(plane, metric="euclidean"), inner)
    if targets is not None:
        regrouped = np.zeros_like(box)
        np.add.at(regrouped.T, targets, box.T)
        box = regrouped
    box = box[:, used]
    position = np.full(shape[0] * shape[1], -1, dtype=np.intp)
    position[box_cells] = np.arange(len(box_cells))
    box[position[cells]] = sub  # the inputs' cells are among the chain's (lattice_chain_audit checks it)
    return box, box_cells


def _kernel_inner(p: Path, record: dict[str, Any], audit_space: MetricSpace) -> float:
    """The kernel's inner epsilon, once the audit space's distances are a proven metric."""
    from .exponential import proven_metric

    inner = _positive_number(p, record.get("inner_epsilon"), "the kernel's inner_epsilon")
    if not proven_metric(audit_space):
        raise _refuse(p, "a kernel proof needs distances recomputed bit for bit from the points under the "
                         f"euclidean, manhattan or haversine metric, and these ({audit_space.metric}) are not")
    return inner


def structured_audit(
    p: Path, record: Any, matrix: NDArray[np.float64], audit_space: MetricSpace, own: MetricSpace,
    meta: dict[str, Any], epsilon: float, rtol: float,
) -> tuple[StructuredAudit, dict[str, Any]]:
    """The structured proof ``record`` names, re-derived from the file's content and held to ``epsilon``.

    ``audit_space`` is the space privacy is audited on (the file's, or a trusted one);
    ``own`` the file's own space, whose points fix the lattice. Returns the proof, whose
    ``epsilon`` is within ``rtol`` of ``epsilon``, and the record rebuilt from the figures
    the proof re-derived; raises MechanismFileError (ClaimError for a failed privacy claim)
    otherwise.
    """
    record = _version(p, record, "structure")
    method = record.get("proof")
    if matrix.shape[0] != matrix.shape[1]:
        raise _refuse(p, "the structured proofs cover square mechanisms only, and this one has a separate output set")
    clean: dict[str, Any] = {"version": STRUCTURE_VERSION, "proof": method}
    if method == "lattice-chain":
        proof = _lattice_proof(p, record, matrix, audit_space, own, meta, None)
        clean.update(_lattice_record(proof))
    elif method == "kernel":
        inner = _kernel_inner(p, record, audit_space)
        proof = kernel_audit(matrix, audit_space.distances, inner)
        clean.update(inner_epsilon=inner)
    elif method == "post-processing":
        base = _version(p, record.get("base"), "structure.base")
        targets = _targets(p, meta, matrix.shape[1])
        if base.get("proof") == "lattice-chain":  # the chain bounds M' = M R directly
            proof = _lattice_proof(p, base, matrix, audit_space, own, meta, targets)
            proof = StructuredAudit(proof.epsilon, proof.method, {**proof.details, "remapped": True}, proof.record)
            clean["base"] = _lattice_record(proof)
        elif base.get("proof") == "kernel":
            from .exponential import exponential_matrix

            inner = _kernel_inner(p, base, audit_space)
            source = exponential_matrix(audit_space.distances, inner)
            source_proof = kernel_audit(source, audit_space.distances, inner)
            proof = postprocessing_audit(matrix, audit_space.distances, source, source_proof.epsilon, targets)
            clean["base"] = {"version": STRUCTURE_VERSION, "proof": "kernel", "inner_epsilon": inner}
        else:
            raise _refuse(p, f"post-processing of a {base.get('proof')!r} proof is not one this metricdp re-derives")
    else:
        raise _refuse(p, f"unknown proof {method!r} (known: lattice-chain, kernel, post-processing)")
    if not proof.satisfies(epsilon, rtol):
        raise ClaimError(f"{p}: claims epsilon={epsilon!r} but the {proof.method} bound of its matrix is "
                         f"{proof.epsilon!r}; refusing the file")
    return proof, clean


def _lattice_record(proof: StructuredAudit) -> dict[str, Any]:
    return {"version": STRUCTURE_VERSION, "proof": "lattice-chain", "order": proof.details["order"],
            "box": list(proof.details["box"]), **proof.record}
