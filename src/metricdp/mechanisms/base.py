"""The :class:`Mechanism` every builder returns, and :func:`certify`, the gate every
builder passes its matrix through before returning it.

A :class:`Mechanism` cannot exist unaudited: constructing one with an exact matrix runs
the independent audit (:func:`metricdp.audit.audit`) and refuses a matrix that is not
``epsilon``-mDP; :func:`certify` (and :meth:`Mechanism.from_matrix`, its public face)
is that gate with a clear error. Whether a family is exact is not a claim the caller
makes: it comes from the registry (:mod:`metricdp.mechanisms.registry`). An estimated
family's ``epsilon`` must be at least the proven epsilon of its true sampler, derived
from its parameters.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from os import PathLike
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._jsonable import jsonable
from .._random import RandomSource, check_release_rng, check_rng
from .._readonly import frozen, is_frozen
from .._validation import check_epsilon, check_indices, check_quantile, check_stochastic
from .._version import __version__
from ..audit import AuditResult, audit, epsilon_tight
from ..audit_structured import StructuredAudit, structure_record
from ..errors import PrivacyViolationError, ValidationError
from ..io import atomic_write
from ..loss import element_losses, expected_loss, quantile_loss, uniform_losses
from ..outputs import OutputSet, check_outputs
from ..sampling import ExactTable
from ..spaces import MetricSpace
from . import registry

__all__ = ["AUDIT_RTOL", "Mechanism", "TrueSampler", "certify", "sample_from_matrix"]

#: Relative slack allowed between the audited epsilon and the requested one.
AUDIT_RTOL = 1e-9

#: A sampler that draws releases from the mechanism itself (not from an estimated
#: matrix): ``sampler(mechanism, input_indices, rng) -> output_indices``.
TrueSampler = Callable[["Mechanism", NDArray[np.intp], RandomSource], NDArray[np.intp]]

#: Passed by :func:`certify` after its own audit so that the constructor does not audit twice.
_AUDITED = object()


def _frozen(a: ArrayLike) -> NDArray[np.float64]:
    """A float64 copy that cannot be made writable again, by anyone (:func:`metricdp._readonly.frozen`)."""
    return frozen(a, np.float64)


def _frozen_space(space: MetricSpace) -> MetricSpace:
    """``space`` itself when its arrays are frozen (every constructor of
    :class:`~metricdp.spaces.MetricSpace` freezes them), else a copy whose are: the audit
    and every release must read distances nobody can edit afterwards."""
    points = space.points
    if is_frozen(space.distances) and (points is None or is_frozen(points)):
        return space
    return dataclasses.replace(space, distances=frozen(space.distances, np.float64),
                               points=None if points is None else frozen(points, np.float64))


def _check_audit(matrix: NDArray[np.float64], space: MetricSpace, epsilon: float, name: str) -> AuditResult:
    """The audit every exact matrix passes; a PrivacyViolationError naming the worst triple otherwise.

    The audit is over the inputs (the space's metric) whatever the outputs: for a
    rectangular (n, m) matrix the rows (u, v, y) for u, v in the space and every output y.
    """
    result = audit(matrix, space.distances, normalize=True)  # the rows the exact sampler realizes
    if not result.satisfies(epsilon, AUDIT_RTOL):
        u, v, w = result.witness or (-1, -1, -1)
        raise PrivacyViolationError(
            f"{name}: the matrix is only {result.epsilon:.12g}-mDP, not {epsilon:.12g}-mDP "
            f"(worst triple u={u}, v={v}, w={w}); refusing to return it"
        )
    return result


@dataclass(frozen=True, eq=False, repr=False)
class Mechanism:
    """A finite mechanism: a row-stochastic matrix over a metric space.

    ``matrix[u, v] = Pr[M(u) = v]``. The outputs are the space's own points (a square
    matrix) unless ``outputs`` gives a separate output set Y (:mod:`metricdp.outputs`):
    then ``matrix[u, y] = Pr[M(u) = y]`` has shape (n, m), privacy is over the space's
    metric only (M[u, y] <= exp(epsilon d(u, v)) M[v, y]), and losses use the
    cross distances ``outputs.distances`` (:attr:`loss_distances`). ``epsilon`` is the mDP guarantee: for an exact
    mechanism the builder has audited the matrix at it; for an estimated one
    (``exact=False``, Monte-Carlo) it is the proven guarantee of the true sampler.

    Attributes
    ----------
    matrix : ndarray of shape (n, n), or (n, m) with ``outputs``; read-only
    space : MetricSpace
    epsilon : float
    name : str
        Family name as the CLI spells it (``exponential``, ``krr``, ...).
    params : mapping
        Family parameters (derived ones included, e.g. the k-RR ``ldp_epsilon``).
    info : mapping
        Further metadata (LP statistics, Monte-Carlo sample sizes, calibration ...),
        JSON-serialisable.
    exact : bool
        False when ``matrix`` is a Monte-Carlo estimate of the true mechanism.
    outputs : OutputSet or None
        A separate output set (keyword only); None: the outputs are the space's points.
    """

    matrix: NDArray[np.float64]
    space: MetricSpace
    epsilon: float
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    exact: bool = True
    outputs: OutputSet | None = field(default=None, kw_only=True)
    _token: object = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.space, MetricSpace):
            raise ValidationError(f"space must be a MetricSpace, got {type(self.space).__name__}")
        if not isinstance(self.name, str) or not self.name:
            raise ValidationError(f"name must be a non-empty string, got {self.name!r}")
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "space", _frozen_space(self.space))
        outputs = check_outputs(self.outputs, self.space)
        matrix = check_stochastic(self.matrix, name=f"{self.name} matrix", square=outputs is None)
        shape = (self.space.n, self.space.n if outputs is None else outputs.m)
        if matrix.shape != shape:
            where = f"a space of {self.space.n} points" + ("" if outputs is None else f" and {outputs.m} outputs")
            raise ValidationError(f"matrix shape {matrix.shape} does not match {where}")
        if outputs is not None and not registry.supports_outputs(self.name):
            raise ValidationError(f"{self.name!r} is a family without a separate output set")
        object.__setattr__(self, "matrix", _frozen(matrix))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        info = dict(self.info)
        family = registry.FAMILIES.get(self.name)
        exact = True if family is None else family.exact
        if bool(self.exact) != exact:
            raise ValidationError(
                f"{self.name!r} is {'an exact' if exact else 'an estimated'} family; exact={self.exact!r} "
                "is not a claim a mechanism can make for itself"
            )
        if not exact:
            assert family is not None
            family.check_sampler_params(self.params)
            proven = family.proven_epsilon(self.params)
            if self.epsilon < proven * (1 - AUDIT_RTOL):
                raise PrivacyViolationError(
                    f"{self.name}: claims epsilon={self.epsilon!r} but its parameters give a sampler that is only "
                    f"proven {proven!r}-mDP"
                )
        elif self._token is not _AUDITED:  # the level recorded is the one audited here, whatever info said
            info.pop("audit_details", None)
            info.pop("structure", None)
            info.update(audit="dense", epsilon_audit=_check_audit(self.matrix, self.space, self.epsilon,
                                                                   self.name).epsilon)
        object.__setattr__(self, "info", MappingProxyType(info))
        object.__setattr__(self, "_token", None)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as the constructor's arguments: unpickling runs the constructor, so the audit again.

        (Dask and Spark ship mechanisms to workers this way; a pickle cannot carry an
        unaudited mechanism past the constructor.)
        """
        return (_restore, (np.asarray(self.matrix), self.space, self.epsilon, self.name, dict(self.params),
                           dict(self.info), self.exact, self.outputs))

    @classmethod
    def from_matrix(
        cls, matrix: ArrayLike, space: MetricSpace, epsilon: float, name: str = "custom",
        params: Mapping[str, Any] | None = None, *, outputs: OutputSet | None = None,
    ) -> Mechanism:
        """An audited mechanism from any row-stochastic matrix (see :func:`certify`).

        With ``outputs`` the matrix is (n, m): inputs the space's points, outputs those of
        the :class:`~metricdp.outputs.OutputSet`.
        """
        return certify(matrix, space, epsilon, name, params, outputs=outputs)

    # ----------------------------------------------------------------- basics
    @property
    def n(self) -> int:
        return self.space.n

    @property
    def labels(self) -> tuple[str, ...]:
        return self.space.labels

    @property
    def distances(self) -> NDArray[np.float64]:
        """The metric of the inputs (n, n): the distances privacy is stated in."""
        return self.space.distances

    @property
    def square(self) -> bool:
        """True when the outputs are the space's own points (no separate output set)."""
        return self.outputs is None

    @property
    def m(self) -> int:
        """Number of outputs (n for a square mechanism)."""
        return self.n if self.outputs is None else self.outputs.m

    @property
    def output_labels(self) -> tuple[str, ...]:
        """Labels of the outputs (the space's labels for a square mechanism)."""
        return self.labels if self.outputs is None else self.outputs.labels

    @property
    def loss_distances(self) -> NDArray[np.float64]:
        """d(x, y) from every input to every output, (n, m): the distances every loss is stated in."""
        return self.space.distances if self.outputs is None else self.outputs.distances

    def __repr__(self) -> str:
        kind = "" if self.exact else ", estimated"
        outs = "" if self.outputs is None else f", m={self.m}"
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items() if not isinstance(v, list | dict))
        return (f"Mechanism({self.name!r}, n={self.n}{outs}, epsilon={self.epsilon:.6g}{kind}"
                f"{', ' if params else ''}{params})")

    # ----------------------------------------------------------------- privacy and loss
    def audit(self) -> AuditResult:
        """Exact audited mDP level of the releases: the rows the exact sampler realizes (:mod:`metricdp.audit`)."""
        return audit(self.matrix, self.distances, normalize=True)

    def epsilon_tight(self, delta: float = 1e-3) -> float:
        """Smallest eps at which the matrix is (eps, delta)-mDP."""
        return epsilon_tight(self.matrix, self.distances, delta)

    def element_losses(self) -> NDArray[np.float64]:
        return element_losses(self.matrix, self.loss_distances)

    def worst_case_loss(self) -> float:
        return float(self.element_losses().max())

    def quantile_loss(self, q: float = 0.95) -> float:
        return quantile_loss(self.matrix, self.loss_distances, check_quantile(q))

    def expected_loss(self, prior: ArrayLike | None = None) -> float:
        return expected_loss(self.matrix, self.loss_distances, prior)

    def uniform_losses(self) -> NDArray[np.float64]:
        """Per-input loss of releasing a uniformly random output."""
        return uniform_losses(self.loss_distances)

    # ----------------------------------------------------------------- sampling
    @cached_property
    def _cdf(self) -> NDArray[np.float64]:
        return frozen(np.cumsum(self.matrix, axis=1))

    def sample(self, inputs: ArrayLike, rng: object = None, *, exact: bool = True) -> NDArray[np.intp]:
        """One release per input index.

        ``rng=None`` draws from the OS's secure source (right for real data); an int
        seed is reproducible (right for experiments, wrong for releases). Estimated
        mechanisms sample from their true sampler, never from the estimate.

        ``exact=True`` (the default) draws output v of input u with probability exactly
        ``matrix[u, v] / sum(matrix[u])`` (the floats read as rationals), from random bits
        (:mod:`metricdp.sampling`): the distribution :func:`certify` audited.
        ``exact=False`` is the float inverse-CDF sampler (:func:`sample_from_matrix`), a
        fast option for experiments only: it is NOT private (outputs of probability below
        about 2**-53 are never drawn from some inputs, so the realized matrix can fail the
        audit at any epsilon; Mironov, CCS 2012).
        """
        scalar = np.ndim(inputs) == 0
        idx = check_indices(inputs, self.n)
        source = check_rng(rng)
        if not self.exact:
            out = registry.get(self.name).true_sampler()(self, idx.astype(np.intp), source)
        elif exact:
            table = self.__dict__.get("_exact_table")  # built once, on the first exact draw
            if table is None:
                table = self.__dict__.setdefault("_exact_table", ExactTable.from_matrix(self.matrix))
            out = table.sample(idx.astype(np.intp), source)
        else:
            out = sample_from_matrix(self._cdf, idx.astype(np.intp), source)
        return out[0] if scalar else out

    def privatize(self, labels: Sequence[str], rng: object = None) -> list[str]:
        """Release an output label for each input label (labels not in the space are an error).

        The releases are output labels: the space's own for a square mechanism, the
        output set's otherwise.
        """
        if isinstance(labels, str):
            raise ValidationError("privatize takes a sequence of labels; wrap a single label in a list")
        source = check_release_rng(rng)  # a seeded or non-secure source warns: PrivacyLeakWarning
        out = self.sample(self.space.index(list(labels)), source)
        names = self.output_labels
        return [names[i] for i in out]

    # ----------------------------------------------------------------- files
    @property
    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "mechanism": self.name,
            "epsilon": self.epsilon,
            "params": dict(self.params),
            "metricdp_version": __version__,
            "exact": self.exact,
            "space": self.space.metadata(),
        }
        if self.outputs is not None:
            meta["outputs"] = {"m": self.m, "metric": self.outputs.metric}
        meta.update(dict(self.info))
        return meta

    def save(self, path: str | PathLike[str], *, inputs: Sequence[str | PathLike[str]] = ()) -> None:
        """Write a mechanism file atomically (format: :mod:`metricdp.mechanisms.file`).

        ``inputs`` are the files the caller read to build it: an output that resolves to
        one of them is refused (:func:`metricdp.io.atomic_write`).
        """
        arrays: dict[str, Any] = {
            "matrix": np.asarray(self.matrix, dtype=np.float64),
            "distances": np.asarray(self.space.distances, dtype=np.float64),
            "labels": np.array(self.labels, dtype=str),
            "metadata": np.array(json.dumps(jsonable(self.metadata), allow_nan=False)),
        }
        if self.space.points is not None:
            arrays["points"] = np.asarray(self.space.points, dtype=np.float64)
        if self.outputs is not None:
            arrays["output_labels"] = np.array(self.outputs.labels, dtype=str)
            arrays["output_distances"] = np.asarray(self.outputs.distances, dtype=np.float64)
            if self.outputs.points is not None:
                arrays["output_points"] = np.asarray(self.outputs.points, dtype=np.float64)
        with atomic_write(path, inputs=inputs) as fh:
            np.savez(fh, **arrays)


def _restore(
    matrix: NDArray[np.float64], space: MetricSpace, epsilon: float, name: str, params: dict[str, Any],
    info: dict[str, Any], exact: bool, outputs: OutputSet | None = None,
) -> Mechanism:
    """The unpickler of :meth:`Mechanism.__reduce__`: the public, auditing constructor."""
    return Mechanism(matrix, space, epsilon, name, params, info, exact=exact, outputs=outputs)


def sample_from_matrix(cdf: NDArray[np.float64], inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
    """Inverse-CDF sampling, one uniform per input, grouped by input row: NOT private.

    The fast float path (``Mechanism.sample(..., exact=False)``) for experiments. Its
    realized distribution is the matrix rounded to the 2**-53 grid of the uniforms, which
    can give an output zero probability from one input and a positive one from another
    (Mironov, CCS 2012); releases use :class:`metricdp.sampling.ExactTable`.

    ``u * cdf[row, -1]`` scales the uniform by the row's own float sum, so every
    output j is drawn with probability (cdf[j] - cdf[j-1]) / cdf[-1] up to the 2**-53
    grid of the uniforms: no mass is moved to the last column by rounding.
    """
    n = cdf.shape[1]
    u = np.asarray(rng.random(len(inputs)), dtype=np.float64)
    out = np.empty(len(inputs), dtype=np.intp)
    order = np.argsort(inputs, kind="stable")
    rows, starts = np.unique(inputs[order], return_index=True)
    bounds = np.append(starts, len(inputs))
    for row, a, b in zip(rows, bounds[:-1], bounds[1:], strict=True):
        pos = order[a:b]
        c = cdf[row]
        out[pos] = np.minimum(np.searchsorted(c, u[pos] * c[-1], side="right"), n - 1)
    return out


def certify(
    matrix: ArrayLike,
    space: MetricSpace,
    epsilon: float,
    name: str,
    params: Mapping[str, Any] | None = None,
    info: Mapping[str, Any] | None = None,
    *,
    outputs: OutputSet | None = None,
    proof: StructuredAudit | None = None,
) -> Mechanism:
    """The gate of every exact builder: validate, audit independently, then wrap.

    Raises :class:`~metricdp.errors.PrivacyViolationError` when the audited level
    exceeds ``epsilon`` by more than ``AUDIT_RTOL`` relative, instead of returning a
    matrix that is not exactly eps-mDP. With ``outputs`` (a separate output set) the
    matrix is (n, m) and is audited over the space's metric for every output.

    ``proof`` (:mod:`metricdp.audit_structured`) replaces the dense O(n^3) audit with a
    structured bound the caller computed from this very matrix: its ``epsilon`` is an upper
    bound of the exact level and is held to the same ``AUDIT_RTOL``. ``info["audit"]``
    records which audit was used (``dense`` or the proof's method) and
    ``info["epsilon_audit"]`` the level it established (an exact mechanism's info always
    holds the level of its own audit: the constructor audits and records it otherwise).
    With a proof, ``info["structure"]`` records the structure it used
    (:func:`~metricdp.audit_structured.structure_record`), which the mechanism file keeps and
    its loader re-derives from the file's content.
    """
    epsilon = check_epsilon(epsilon)
    if not isinstance(space, MetricSpace):
        raise ValidationError(f"space must be a MetricSpace, got {type(space).__name__}")
    outs = check_outputs(outputs, space)
    m = check_stochastic(matrix, name=f"{name} matrix", square=outs is None)
    shape = (space.n, space.n if outs is None else outs.m)
    if m.shape != shape:
        raise ValidationError(f"{name} matrix has shape {m.shape}, expected {shape}")
    extra = dict(info or {})
    extra.pop("audit_details", None)  # a source mechanism's proof is not this matrix's
    source = extra.pop("structure", None)  # ... but a regrouping's proof records its source's structure
    if proof is None:
        extra["audit"] = "dense"
        extra["epsilon_audit"] = _check_audit(m, space, epsilon, name).epsilon
    else:
        if not proof.satisfies(epsilon, AUDIT_RTOL):
            raise PrivacyViolationError(
                f"{name}: the {proof.method} bound of the level is {proof.epsilon:.12g}, above {epsilon:.12g}; "
                "refusing to return the matrix"
            )
        extra["audit"] = proof.method
        extra["audit_details"] = dict(proof.details)
        extra["structure"] = structure_record(proof, source if proof.method == "post-processing" else None)
        extra["epsilon_audit"] = proof.epsilon
    return Mechanism(m, space, epsilon, name, dict(params or {}), extra, exact=True, outputs=outs, _token=_AUDITED)
