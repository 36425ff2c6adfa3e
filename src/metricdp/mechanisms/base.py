"""The :class:`Mechanism` every builder returns, and :func:`certify`, the gate every
builder passes its matrix through before returning it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from os import PathLike
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_rng
from .._validation import check_epsilon, check_indices, check_quantile, check_stochastic
from ..audit import AuditResult, audit, epsilon_tight
from ..errors import PrivacyViolationError, ValidationError
from ..loss import element_losses, expected_loss, quantile_loss, uniform_losses
from ..sampling import ExactTable
from ..spaces import MetricSpace

__all__ = ["AUDIT_RTOL", "Mechanism", "TrueSampler", "certify", "register_sampler", "sample_from_matrix"]

#: Relative slack allowed between the audited epsilon and the requested one.
AUDIT_RTOL = 1e-9

#: A sampler that draws releases from the mechanism itself (not from an estimated
#: matrix): ``sampler(mechanism, input_indices, rng) -> output_indices``.
TrueSampler = Callable[["Mechanism", NDArray[np.intp], RandomSource], NDArray[np.intp]]
_SAMPLERS: dict[str, TrueSampler] = {}


def register_sampler(name: str) -> Callable[[TrueSampler], TrueSampler]:
    """Register the true sampler of a mechanism family whose matrix is only estimated."""

    def deco(fn: TrueSampler) -> TrueSampler:
        _SAMPLERS[name] = fn
        return fn

    return deco


def _frozen(a: ArrayLike) -> NDArray[np.float64]:
    out = np.array(a, dtype=np.float64, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False, repr=False)
class Mechanism:
    """A finite mechanism: a row-stochastic matrix over a metric space.

    ``matrix[u, v] = Pr[M(u) = v]``. ``epsilon`` is the mDP guarantee: for an exact
    mechanism the builder has audited the matrix at it; for an estimated one
    (``exact=False``, Monte-Carlo) it is the proven guarantee of the true sampler.

    Attributes
    ----------
    matrix : ndarray of shape (n, n), read-only
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
    """

    matrix: NDArray[np.float64]
    space: MetricSpace
    epsilon: float
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    exact: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix", _frozen(self.matrix))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "info", MappingProxyType(dict(self.info)))
        if self.matrix.shape != (self.space.n, self.space.n):
            raise ValidationError(f"matrix shape {self.matrix.shape} does not match a space of {self.space.n} points")

    # ----------------------------------------------------------------- basics
    @property
    def n(self) -> int:
        return self.space.n

    @property
    def labels(self) -> tuple[str, ...]:
        return self.space.labels

    @property
    def distances(self) -> NDArray[np.float64]:
        return self.space.distances

    def __repr__(self) -> str:
        kind = "" if self.exact else ", estimated"
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items() if not isinstance(v, list | dict))
        return f"Mechanism({self.name!r}, n={self.n}, epsilon={self.epsilon:.6g}{kind}{', ' if params else ''}{params})"

    # ----------------------------------------------------------------- privacy and loss
    def audit(self) -> AuditResult:
        """Exact audited mDP level of the matrix (see :mod:`metricdp.audit`)."""
        return audit(self.matrix, self.distances)

    def epsilon_tight(self, delta: float = 1e-3) -> float:
        """Smallest eps at which the matrix is (eps, delta)-mDP."""
        return epsilon_tight(self.matrix, self.distances, delta)

    def element_losses(self) -> NDArray[np.float64]:
        return element_losses(self.matrix, self.distances)

    def worst_case_loss(self) -> float:
        return float(self.element_losses().max())

    def quantile_loss(self, q: float = 0.95) -> float:
        return quantile_loss(self.matrix, self.distances, check_quantile(q))

    def expected_loss(self, prior: ArrayLike | None = None) -> float:
        return expected_loss(self.matrix, self.distances, prior)

    def uniform_losses(self) -> NDArray[np.float64]:
        return uniform_losses(self.distances)

    # ----------------------------------------------------------------- sampling
    @cached_property
    def _cdf(self) -> NDArray[np.float64]:
        return np.cumsum(self.matrix, axis=1)

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
        audit at any epsilon; issue 22).
        """
        scalar = np.ndim(inputs) == 0
        idx = check_indices(inputs, self.n)
        source = check_rng(rng)
        if not self.exact:
            if self.name not in _SAMPLERS:
                raise ValidationError(f"no true sampler registered for estimated mechanism {self.name!r}")
            out = _SAMPLERS[self.name](self, idx.astype(np.intp), source)
        elif exact:
            table = self.__dict__.get("_exact_table")  # built once, on the first exact draw
            if table is None:
                table = self.__dict__.setdefault("_exact_table", ExactTable.from_matrix(self.matrix))
            out = table.sample(idx.astype(np.intp), source)
        else:
            out = sample_from_matrix(self._cdf, idx.astype(np.intp), source)
        return out[0] if scalar else out

    def privatize(self, labels: Sequence[str], rng: object = None) -> list[str]:
        """Release a label for each input label (labels not in the space are an error)."""
        if isinstance(labels, str):
            raise ValidationError("privatize takes a sequence of labels; wrap a single label in a list")
        out = self.sample(self.space.index(list(labels)), rng)
        return [self.labels[i] for i in out]

    # ----------------------------------------------------------------- files
    @property
    def metadata(self) -> dict[str, Any]:
        from .. import __version__

        meta: dict[str, Any] = {
            "mechanism": self.name,
            "epsilon": self.epsilon,
            "params": dict(self.params),
            "metricdp_version": __version__,
            "exact": self.exact,
            "space": {"metric": self.space.metric, "cell": self.space.cell, "n": self.n},
        }
        meta.update(dict(self.info))
        return meta

    def save(self, path: str | PathLike[str]) -> None:
        """Write a mechanism file (see :func:`metricdp.io.save_mechanism`)."""
        from ..io import save_mechanism

        save_mechanism(self, path)

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Mechanism:
        """Read a mechanism file (see :func:`metricdp.io.load_mechanism`)."""
        from ..io import load_mechanism

        return load_mechanism(path)


def sample_from_matrix(cdf: NDArray[np.float64], inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
    """Inverse-CDF sampling, one uniform per input, grouped by input row: NOT private.

    The fast float path (``Mechanism.sample(..., exact=False)``) for experiments. Its
    realized distribution is the matrix rounded to the 2**-53 grid of the uniforms, which
    can give an output zero probability from one input and a positive one from another
    (Mironov, CCS 2012; issue 22); releases use :class:`metricdp.sampling.ExactTable`.

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
) -> Mechanism:
    """The gate of every exact builder: validate, audit independently, then wrap.

    Raises :class:`~metricdp.errors.PrivacyViolationError` when the audited level
    exceeds ``epsilon`` by more than ``AUDIT_RTOL`` relative, instead of returning a
    matrix that is not exactly eps-mDP.
    """
    epsilon = check_epsilon(epsilon)
    m = check_stochastic(matrix, name=f"{name} matrix")
    result = audit(m, space.distances, normalize=True)  # the rows the exact sampler realizes
    if not result.satisfies(epsilon, AUDIT_RTOL):
        u, v, w = result.witness or (-1, -1, -1)
        raise PrivacyViolationError(
            f"{name}: the built matrix is only {result.epsilon:.12g}-mDP, not {epsilon:.12g}-mDP "
            f"(worst triple u={u}, v={v}, w={w}); refusing to return it"
        )
    extra = dict(info or {})
    extra.setdefault("epsilon_audit", result.epsilon)
    return Mechanism(m, space, epsilon, name, dict(params or {}), extra, exact=True)
