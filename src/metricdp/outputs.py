r"""A separate output set Y for a finite mechanism over a metric space X (survey eq. 5).

A square mechanism releases points of its own space (Y = X). A *rectangular* one
releases points of another finite set Y (a coarser release grid, points of interest):
its matrix is :math:`M[x, y] = \Pr[M(x) = y]`, shape (n, m), and its privacy is over X
only,

.. math:: M[u, y] \le e^{\varepsilon d(u, v)}\, M[v, y]
          \qquad \forall u, v \in X,\ \forall y \in Y,

so Y needs no metric of its own. What Y needs is its distances *to* X,
:math:`D[x, y] = d(x, y)` (n x m), which the losses use and which some builders (the
exponential mechanism) use for privacy too: those builders need the *cross triangle
inequality*

.. math:: |d(u, y) - d(v, y)| \le d(u, v) \qquad \forall u, v \in X,\ y \in Y,

true whenever X and Y are points of one metric space (:meth:`OutputSet.from_points`)
and checked by :func:`cross_triangle_violation` for a given matrix.

:class:`OutputSet` is immutable: unique labels, a read-only (n, m) matrix of finite,
non-negative cross distances, and optionally the coordinates of Y.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._readonly import frozen, is_frozen
from .errors import ValidationError
from .spaces import METRICS, MetricSpace, check_space, pairwise_distances

__all__ = ["CROSS_TRIANGLE_RTOL", "CrossViolation", "OutputSet", "check_outputs", "cross_triangle_violation"]

#: Relative slack of the cross triangle inequality: distances computed from points by the
#: same formula agree with the triangle inequality to a few ulps, far below 1e-9.
CROSS_TRIANGLE_RTOL = 1e-9

_BLOCK_ELEMENTS = 1 << 22  # elements per temporary of the triangle check


def _readonly(a: NDArray) -> NDArray:
    """Read-only for good (:func:`metricdp._readonly.frozen`)."""
    return frozen(a)


def _labels(labels: Sequence[object] | None, m: int) -> tuple[str, ...]:
    if labels is None:
        return tuple(f"y{j}" for j in range(m))
    if isinstance(labels, str):
        raise ValidationError("output labels must be a sequence of strings, not one string")
    out = tuple(str(x) for x in labels)
    if len(out) != m:
        raise ValidationError(f"output labels has {len(out)} entries for {m} outputs")
    seen: dict[str, int] = {}
    for j, lab in enumerate(out):
        if lab in seen:
            raise ValidationError(f"output label {lab!r} appears twice (outputs {seen[lab]} and {j}); labels must "
                                  "be unique")
        seen[lab] = j
    return out


def _cross(space: MetricSpace, cross: ArrayLike) -> NDArray[np.float64]:
    try:
        d = np.array(cross, dtype=np.float64)
    except (TypeError, ValueError) as ex:
        raise ValidationError(f"output distances must be a numeric (n, m) matrix: {ex}") from None
    if d.ndim != 2 or d.shape[0] != space.n or d.shape[1] < 1:
        raise ValidationError(f"output distances must have shape ({space.n}, m) with m >= 1 (one row per input), "
                              f"got {d.shape}")
    bad = np.argwhere(~np.isfinite(d) | (d < 0))
    if bad.size:
        i, j = (int(x) for x in bad[0])
        raise ValidationError(f"output distance ({i}, {j}) (input {space.labels[i]!r}) is {float(d[i, j])!r}; "
                              "distances must be finite and >= 0")
    return d


class CrossViolation(NamedTuple):
    """The worst pair of :func:`cross_triangle_violation`.

    ``ratio`` is :math:`|d(u,y) - d(v,y)| / d(u,v)` at the worst (u, v, y) (at most 1 when
    the cross distances are consistent with X's metric).
    """

    ratio: float
    u: int
    v: int
    y: int


def cross_triangle_violation(distances: ArrayLike, cross: ArrayLike) -> CrossViolation:
    r"""The largest :math:`|d(u,y) - d(v,y)| / d(u,v)` over u != v in X and y in Y.

    ``distances`` is X's metric (n, n), ``cross`` the (n, m) distances to Y. The cross
    triangle inequality holds when the ratio is at most ``1 + CROSS_TRIANGLE_RTOL``.
    Vectorised in blocks of input rows: for each u, :math:`\max_y |D[u,y] - D[v,y]|` is
    one (b, n, m) temporary of at most ``_BLOCK_ELEMENTS`` elements.

    Examples
    --------
    >>> d = [[0.0, 1.0], [1.0, 0.0]]
    >>> cross_triangle_violation(d, [[0.0, 2.0], [1.0, 1.0]]).ratio
    1.0
    >>> cross_triangle_violation(d, [[0.0, 3.0], [1.0, 1.0]])
    CrossViolation(ratio=2.0, u=0, v=1, y=1)
    """
    d = np.asarray(distances, dtype=np.float64)
    c = np.asarray(cross, dtype=np.float64)
    n, m = c.shape
    if d.shape != (n, n):
        raise ValidationError(f"distances must be ({n}, {n}) for {n} inputs, got {d.shape}")
    best = CrossViolation(0.0, 0, 0, 0)
    block = max(1, _BLOCK_ELEMENTS // max(1, n * m))
    off = ~np.eye(n, dtype=bool)
    for start in range(0, n, block):
        rows = c[start : start + block]
        gap = np.abs(rows[:, None, :] - c[None, :, :])  # (b, v, y)
        ys = np.argmax(gap, axis=2)
        worst = np.take_along_axis(gap, ys[:, :, None], axis=2)[:, :, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(off[start : start + block], worst / d[start : start + block], 0.0)
        ratio = np.nan_to_num(ratio, nan=np.inf)
        i, v = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        if ratio[i, v] > best.ratio:
            best = CrossViolation(float(ratio[i, v]), int(start + i), int(v), int(ys[i, v]))
    return best


@dataclass(frozen=True, eq=False, repr=False)
class OutputSet:
    """A finite output set Y of a mechanism over a space X, by its distances to X.

    Build with :meth:`from_points` or :meth:`from_distances`.

    Attributes
    ----------
    labels : tuple of str
        m unique labels of the outputs (what ``privatize`` releases).
    distances : ndarray of shape (n, m), read-only
        :math:`d(x, y)` for every input x of the space and output y: finite and >= 0.
    points : ndarray of shape (m, dim) or None, read-only
        Coordinates of the outputs, under the space's metric.
    metric : str
        The metric the cross distances came from (the space's for :meth:`from_points`,
        ``precomputed`` for a given matrix).
    """

    labels: tuple[str, ...]
    distances: NDArray[np.float64]
    points: NDArray[np.float64] | None = None
    metric: str = "precomputed"
    _index: dict[str, int] = field(init=False, repr=False, compare=False)
    #: (metric, input points) the cross distances were measured from (:meth:`from_points`), which
    #: :func:`check_outputs` compares with the space it is used on; None for given distances.
    _source: tuple[str, NDArray[np.float64]] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = _labels(self.labels, len(self.labels))
        d = np.asarray(self.distances)
        if d.ndim != 2 or d.shape[1] != len(labels) or d.shape[1] < 1:
            raise ValidationError(f"output distances have shape {d.shape}, expected (n, {len(labels)})")
        if d.dtype != np.float64 or not is_frozen(d):
            d = _readonly(np.array(d, dtype=np.float64))
        if not np.all(np.isfinite(d)) or (d < 0).any():
            i, j = (int(x) for x in np.argwhere(~np.isfinite(d) | (d < 0))[0])
            raise ValidationError(f"output distance ({i}, {j}) is {float(d[i, j])!r}; it must be finite and >= 0")
        if self.points is not None:
            p = np.asarray(self.points)
            if p.ndim != 2 or p.shape[0] != len(labels):
                raise ValidationError(f"output points have shape {p.shape}, expected ({len(labels)}, dim)")
            if p.dtype != np.float64 or not is_frozen(p):
                object.__setattr__(self, "points", _readonly(np.array(p, dtype=np.float64)))
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "distances", d)
        object.__setattr__(self, "_index", {lab: j for j, lab in enumerate(labels)})

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_points(
        cls, space: MetricSpace, points: ArrayLike, labels: Sequence[object] | None = None
    ) -> OutputSet:
        """Outputs at coordinates ``points`` (m, dim), measured with the space's own metric.

        The space must have points and a coordinate metric (euclidean, haversine,
        manhattan, chebyshev); the cross distances then satisfy the cross triangle
        inequality by construction (one metric on X and Y together).

        Examples
        --------
        >>> from metricdp.spaces import MetricSpace
        >>> x = MetricSpace.from_points([[0.0, 0.0], [0.0, 2.0]])
        >>> y = OutputSet.from_points(x, [[0.0, 1.0]], ["mid"])
        >>> y.m, y.distances.tolist()
        (1, [[1.0], [1.0]])
        """
        space = check_space(space)
        if space.points is None or space.metric not in METRICS:
            raise ValidationError(
                f"outputs given as points need a space built from points under a coordinate metric "
                f"({', '.join(METRICS)}); this space's metric is {space.metric!r}: give the cross distances instead"
            )
        try:
            y = np.array(points, dtype=np.float64)
        except (TypeError, ValueError) as ex:
            raise ValidationError(f"output points must be a numeric 2-d array (m, dim): {ex}") from None
        dim = space.points.shape[1]
        if y.ndim != 2 or y.shape[0] < 1 or y.shape[1] != dim:
            raise ValidationError(f"output points must have shape (m, {dim}) like the space's points, got {y.shape}")
        if not np.all(np.isfinite(y)):
            j = int(np.argwhere(~np.isfinite(y))[0][0])
            raise ValidationError(f"output point {j} is not finite")
        if space.metric == "haversine" and ((np.abs(y[:, 0]) > 90).any() or (np.abs(y[:, 1]) > 180).any()):
            j = int(np.flatnonzero((np.abs(y[:, 0]) > 90) | (np.abs(y[:, 1]) > 180))[0])
            raise ValidationError(f"output point {j} is not a (lat, lon) in degrees: {y[j].tolist()}")
        labs = _labels(labels, y.shape[0])
        cross = pairwise_distances(space.points, y, space.metric)
        out = cls(labs, _readonly(np.ascontiguousarray(cross)), _readonly(y), space.metric)
        object.__setattr__(out, "_source", (space.metric, space.points))
        return out

    @classmethod
    def from_distances(
        cls, space: MetricSpace, cross: ArrayLike, labels: Sequence[object] | None = None
    ) -> OutputSet:
        """Outputs given by their distances to the inputs: ``cross[x, y]``, shape (n, m).

        Entries must be finite and >= 0. The cross triangle inequality is *not* required
        here (OPTMech's privacy does not use it); builders that need it check it
        (:func:`cross_triangle_violation`).
        """
        space = check_space(space)
        d = _cross(space, cross)
        labs = _labels(labels, d.shape[1])
        return cls(labs, _readonly(d), None, "precomputed")

    # ----------------------------------------------------------------- queries
    @property
    def m(self) -> int:
        """Number of outputs."""
        return len(self.labels)

    @property
    def n(self) -> int:
        """Number of inputs the cross distances are for."""
        return int(self.distances.shape[0])

    def __len__(self) -> int:
        return self.m

    def index(self, labels: str | Sequence[str]) -> NDArray[np.intp]:
        """Indices of output labels; the error names every label that is not an output."""
        items = [labels] if isinstance(labels, str) else list(labels)
        missing = sorted({str(x) for x in items if str(x) not in self._index})
        if missing:
            raise ValidationError(f"{len(missing)} value(s) not among the output labels: "
                                  + ", ".join(repr(x) for x in missing[:10]))
        return np.array([self._index[str(x)] for x in items], dtype=np.intp)

    def triangle_violation(self, space: MetricSpace) -> CrossViolation:
        """:func:`cross_triangle_violation` of these cross distances against ``space``'s metric."""
        check_outputs(self, space)
        return cross_triangle_violation(space.distances, self.distances)

    def nearest_inputs(self) -> NDArray[np.intp]:
        """For each output y, the input nearest to it (smallest index among ties), shape (m,)."""
        return np.argmin(self.distances, axis=0).astype(np.intp)

    def __repr__(self) -> str:
        return f"OutputSet(m={self.m}, n={self.n}, metric={self.metric!r})"


def check_outputs(outputs: object, space: MetricSpace, name: str = "outputs") -> OutputSet | None:
    """None, or an :class:`OutputSet` whose cross distances are for ``space`` (a ValidationError otherwise)."""
    if outputs is None:
        return None
    if not isinstance(outputs, OutputSet):
        raise ValidationError(f"{name} must be an OutputSet (metricdp.outputs) or None, got {type(outputs).__name__}")
    if outputs.n != space.n:
        raise ValidationError(f"{name} have distances to {outputs.n} inputs, but the space has {space.n} points")
    if outputs._source is not None:  # measured from points: they must be this space's (O(n dim), no distances)
        metric, points = outputs._source
        if space.metric != metric:
            raise ValidationError(f"{name} were measured with the {metric} metric, but the space's is {space.metric}")
        if space.points is None or space.points.shape != points.shape or not np.array_equal(space.points, points):
            differ = np.ones(space.n, dtype=bool) if space.points is None or space.points.shape != points.shape \
                else (space.points != points).any(axis=1)
            u = int(np.argmax(differ))
            here = "no coordinates" if space.points is None else float(
                pairwise_distances(space.points[u : u + 1], outputs.points[:1], metric)[0, 0])  # type: ignore[index]
            raise ValidationError(
                f"{name} were measured from another space's points: output distance "
                f"d({space.labels[u]!r}, {outputs.labels[0]!r}) is {float(outputs.distances[u, 0])!r}, this space "
                f"gives {here!r}; build the outputs on this space (OutputSet.from_points(space, ...))"
            )
    return outputs
