r"""Finite metric spaces: points with a named metric, distance matrices, weighted graphs.

A :class:`MetricSpace` is immutable and validated on construction: the distance matrix
is symmetric, zero on the diagonal, positive off it and satisfies the triangle
inequality. Errors name the pair or triple that fails.

Coordinate metrics (:data:`METRICS`): ``euclidean``, ``haversine`` (km on (lat, lon)
degrees), ``manhattan``, ``chebyshev`` and ``angular`` -- the angle between two vectors
as a fraction of :math:`\pi`, :math:`\arccos(\cos(x, y))/\pi \in [0, 1]` (the great-circle
distance between their directions on the unit sphere, a metric; sentence, voice and LSH
embeddings). ``cosine`` (:math:`1 - \cos`) is refused with the reason: it is not a metric
(:data:`REFUSED_METRICS`). ``mahalanobis`` takes a public covariance :math:`\Sigma`
(:meth:`MetricSpace.from_points` ``covariance=``; :func:`estimate_covariance` from public
points): :math:`d(x, y) = \sqrt{(x - y)^\top \Sigma^{-1} (x - y)}`, the Euclidean distance
after whitening by the Cholesky factor, so a metric whenever :math:`\Sigma` is positive definite.
:data:`POINT_METRICS` is the one list of the metrics a POINTS file can be measured with
(the command line's ``--metric`` choices): :data:`METRICS` and ``mahalanobis``.

Policy graphs (:meth:`MetricSpace.from_graph` ``policy=True``; Blowfish policies, Cao et
al. 2020; Geo-Graph-Indistinguishability, Takagi et al. 2019): a disconnected graph gives
an *extended* metric, :math:`+\infty` between components (:func:`check_extended_metric`).
eps-mDP then constrains only the pairs at finite distance: the component a value lies in
is not protected (docs/proofs/policy_graphs.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:  # scipy is imported where it is used: `import metricdp.spaces` (every CLI command) stays cheap
    from scipy.spatial import cKDTree

from ._readonly import frozen
from ._resources import check_allocation
from ._validation import check_int, check_metric, check_number
from .audit import finite_components
from .errors import ValidationError

__all__ = [
    "EARTH_RADIUS_KM", "METRICS", "POINT_METRICS", "REFUSED_METRICS", "MetricSpace", "angular_distances",
    "check_covariance", "check_extended_metric", "check_metric_name", "check_space", "estimate_covariance",
    "haversine_km", "haversine_rows_km", "mahalanobis_distances", "pairwise_distances",
]

#: Mean Earth radius (IUGG), in kilometres.
EARTH_RADIUS_KM = 6371.0088

MetricName = Literal["euclidean", "haversine", "manhattan", "chebyshev", "angular"]
#: Metrics computed from coordinates alone.
METRICS: tuple[str, ...] = ("euclidean", "haversine", "manhattan", "chebyshev", "angular")
#: Metrics that also take a public parameter, with its name.
PARAMETRISED_METRICS: dict[str, str] = {"mahalanobis": "covariance"}
#: Every metric a POINTS file can be measured with: the one list (``build --metric``).
POINT_METRICS: tuple[str, ...] = (*METRICS, *PARAMETRISED_METRICS)
_CDIST = {"euclidean": "euclidean", "manhattan": "cityblock", "chebyshev": "chebyshev"}
#: Names that are not metrics, each with the reason and what to use instead.
REFUSED_METRICS = {
    "cosine": "1 - cos(x, y) is not a metric: it breaks the triangle inequality (x = (1, 0), y = (1, 1), "
              "z = (0, 1): d(x, z) = 1 > d(x, y) + d(y, z) = 2 - sqrt(2)); use 'angular', arccos(cos(x, y)) / pi, "
              "the metric of the same angles",
}


def check_metric_name(metric: object, *, extra: Sequence[str] = ()) -> str:
    """``metric`` when it is one of :data:`METRICS` (or ``extra``); else one error, with the
    reason for a name that is not a metric (:data:`REFUSED_METRICS`)."""
    if isinstance(metric, str) and (metric in METRICS or metric in extra):
        return metric
    if isinstance(metric, str) and metric.lower() in REFUSED_METRICS:
        raise ValidationError(f"metric {metric!r} is refused: {REFUSED_METRICS[metric.lower()]}")
    raise ValidationError(f"metric must be one of {', '.join((*METRICS, *extra))}, got {metric!r}")


def haversine_km(a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """Great-circle distances in km between rows of ``a`` and ``b`` ((lat, lon) in degrees)."""
    a = np.radians(np.asarray(a, dtype=np.float64))
    b = np.radians(np.asarray(b, dtype=np.float64))
    lat1, lon1 = a[:, :1], a[:, 1:2]
    lat2, lon2 = b[:, 0][None, :], b[:, 1][None, :]
    h = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def haversine_rows_km(a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """Great-circle distance in km from row i of ``a`` to row i of ``b`` ((lat, lon) in degrees, same shape).

    The same formula as :func:`haversine_km`, paired row by row instead of every row against every row.
    """
    la = np.radians(np.asarray(a, dtype=np.float64))
    lb = np.radians(np.asarray(b, dtype=np.float64))
    h = np.sin((lb[:, 0] - la[:, 0]) / 2) ** 2 + np.cos(la[:, 0]) * np.cos(lb[:, 0]) * np.sin(
        (lb[:, 1] - la[:, 1]) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def _directions(x: NDArray[np.float64], what: str) -> NDArray[np.float64]:
    norms = np.linalg.norm(x, axis=1)
    if not np.all(norms > 0):
        i = int(np.flatnonzero(~(norms > 0))[0])
        raise ValidationError(f"{what} row {i} is the zero vector: it has no direction (angular metric)")
    return x / norms[:, None]


def angular_distances(a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    r""":math:`\angle(x, y)/\pi` between rows of ``a`` and ``b`` (in [0, 1]).

    The angle of unit vectors u, v is :math:`2 \arctan2(\lVert u - v\rVert, \lVert u + v\rVert)`
    (Kahan): accurate for tiny and near-straight angles alike, where :math:`\arccos(u \cdot v)`
    loses half the digits. It is the geodesic distance on the unit sphere, a metric on directions
    (two positive multiples of one vector are the same direction: distance 0).

    >>> angular_distances([[1.0, 0.0]], [[0.0, 2.0], [-1.0, 0.0], [1.0, 1.0]]).round(12).tolist()
    [[0.5, 1.0, 0.25]]
    """
    u = _directions(np.atleast_2d(np.asarray(a, dtype=np.float64)), "points")
    v = _directions(np.atleast_2d(np.asarray(b, dtype=np.float64)), "points")
    from scipy.spatial.distance import cdist

    diff = cdist(u, v, "euclidean")
    add = cdist(u, -v, "euclidean")
    return np.asarray(2.0 * np.arctan2(diff, add) / np.pi, dtype=np.float64)


def check_covariance(covariance: ArrayLike, dim: int) -> NDArray[np.float64]:
    """The lower Cholesky factor L of a (dim, dim) symmetric positive definite covariance (Sigma = L L^T)."""
    try:
        c = np.asarray(covariance, dtype=np.float64)
    except (TypeError, ValueError) as ex:
        raise ValidationError(f"covariance must be a numeric (dim, dim) matrix: {ex}") from None
    if c.shape != (dim, dim):
        raise ValidationError(f"covariance must have shape ({dim}, {dim}) like the points' dimension, got {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValidationError("covariance must be finite")
    scale = float(np.max(np.abs(c))) or 1.0
    asym = np.abs(c - c.T)
    if asym.max() > 1e-12 * scale:
        i, j = (int(x) for x in np.unravel_index(int(np.argmax(asym)), asym.shape))
        raise ValidationError(f"covariance is not symmetric: entry ({i}, {j}) is {c[i, j]!r}, ({j}, {i}) is "
                              f"{c[j, i]!r}")
    from scipy.linalg import cholesky

    try:
        low = cholesky((c + c.T) / 2, lower=True)
    except np.linalg.LinAlgError:
        low = None
    if low is None or not np.all(np.diag(low) > 1e-12 * np.sqrt(scale)):
        smallest = float(np.linalg.eigvalsh((c + c.T) / 2).min())
        raise ValidationError(f"covariance is not positive definite (smallest eigenvalue {smallest:.3g}): "
                              "the Mahalanobis distance would be 0 between distinct points")
    return np.asarray(low, dtype=np.float64)


def estimate_covariance(public_points: ArrayLike) -> NDArray[np.float64]:
    """The sample covariance (ddof 1) of ``public_points`` (m, dim), m > dim.

    Privacy: the metric is part of the mechanism's definition and must not depend on the
    private data; estimate it only from public points (the space's own points, which
    are the public domain, or a public sample), never from the records being released.
    """
    x = np.asarray(public_points, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] <= x.shape[1]:
        raise ValidationError(f"estimating a covariance needs more points than dimensions, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValidationError("public points must be finite")
    return np.asarray(np.cov(x, rowvar=False, ddof=1).reshape(x.shape[1], x.shape[1]), dtype=np.float64)


def mahalanobis_distances(a: ArrayLike, b: ArrayLike, covariance: ArrayLike) -> NDArray[np.float64]:
    r""":math:`\sqrt{(x - y)^\top \Sigma^{-1} (x - y)}` between rows of ``a`` and ``b``.

    Computed as the Euclidean distance of the whitened points :math:`L^{-1}x`
    (:math:`\Sigma = L L^\top`, a triangular solve: no inverse is formed).

    >>> mahalanobis_distances([[0.0, 0.0]], [[2.0, 0.0], [0.0, 3.0]], [[4.0, 0.0], [0.0, 9.0]]).tolist()
    [[1.0, 1.0]]
    """
    x = np.atleast_2d(np.asarray(a, dtype=np.float64))
    y = np.atleast_2d(np.asarray(b, dtype=np.float64))
    low = check_covariance(covariance, x.shape[1])
    from scipy.linalg import solve_triangular
    from scipy.spatial.distance import cdist

    wx = solve_triangular(low, x.T, lower=True).T
    wy = solve_triangular(low, y.T, lower=True).T
    return np.asarray(cdist(wx, wy, "euclidean"), dtype=np.float64)


def pairwise_distances(a: ArrayLike, b: ArrayLike, metric: str) -> NDArray[np.float64]:
    """Distances between rows of ``a`` and rows of ``b`` under a named metric."""
    if metric == "haversine":
        return haversine_km(a, b)
    if metric == "angular":
        return angular_distances(a, b)
    check_metric_name(metric)
    from scipy.spatial.distance import cdist

    return cdist(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), _CDIST[metric])


def _labels(labels: Sequence[object] | None, n: int) -> tuple[str, ...]:
    if labels is None:
        return tuple(str(i) for i in range(n))
    out = tuple(str(x) for x in labels)
    if len(out) != n:
        raise ValidationError(f"labels has {len(out)} entries for {n} points")
    seen: dict[str, int] = {}
    for i, lab in enumerate(out):
        if lab in seen:
            raise ValidationError(f"label {lab!r} appears twice (rows {seen[lab]} and {i}); labels must be unique")
        seen[lab] = i
    return out


def _readonly(a: NDArray) -> NDArray:
    """Read-only for good: backed by immutable bytes, no array on its base chain can be made writable."""
    return frozen(a)


@dataclass(frozen=True, eq=False, repr=False)
class MetricSpace:
    """A validated finite metric space W = {w_1..w_n}.

    Use the constructors :meth:`from_points`, :meth:`from_distances`,
    :meth:`from_graph` and :meth:`grid` rather than the raw initialiser.

    Attributes
    ----------
    distances : ndarray of shape (n, n)
        The metric d, read-only.
    labels : tuple of str
        Unique labels of the points.
    metric : str
        ``euclidean``, ``haversine`` (km on (lat, lon) degrees), ``manhattan``,
        ``chebyshev``, ``precomputed`` or ``graph``.
    points : ndarray of shape (n, dim) or None
        Coordinates, when the space was built from points.
    cell : float or None
        Side of the cells when the space is a subset of a square lattice in the plane
        under the Euclidean metric (see :meth:`grid`); ``None`` otherwise.
    covariance : ndarray of shape (dim, dim) or None
        The public covariance of the ``mahalanobis`` metric (read-only), so that anyone
        can recompute the distances from the points.
    covariance_source : str or None
        Where that covariance came from, in words (``"given in cov.csv"``, ``"estimated
        from public.csv"``); recorded in mechanism files.
    """

    distances: NDArray[np.float64]
    labels: tuple[str, ...]
    metric: str = "precomputed"
    points: NDArray[np.float64] | None = None
    cell: float | None = None
    covariance: NDArray[np.float64] | None = None
    covariance_source: str | None = None
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {lab: i for i, lab in enumerate(self.labels)}
        if len(index) != len(self.labels):
            dup = next(lab for i, lab in enumerate(self.labels) if index[lab] != i)
            raise ValidationError(f"label {dup!r} appears more than once: labels must be unique")
        object.__setattr__(self, "_index", index)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_points(
        cls,
        points: ArrayLike,
        labels: Sequence[object] | None = None,
        metric: str = "euclidean",
        *,
        covariance: ArrayLike | None = None,
        covariance_source: str | None = None,
    ) -> MetricSpace:
        """Build from coordinates (n, dim) with a named metric.

        ``haversine`` takes columns (lat, lon) in degrees and gives kilometres;
        ``angular`` the angle between directions over pi (no zero vector);
        ``mahalanobis`` needs ``covariance``, a PUBLIC (dim, dim) positive definite matrix
        (given, or :func:`estimate_covariance` of public points: never of the private
        records). Distances computed from coordinates satisfy the metric axioms by
        construction, so only duplicate points (a zero distance off the diagonal; for
        ``angular``, two points in the same direction) are checked for.
        """
        check_metric_name(metric, extra=tuple(PARAMETRISED_METRICS))
        if (covariance is None) == (metric == "mahalanobis"):
            raise ValidationError("the mahalanobis metric needs a public covariance (covariance=)" if covariance is None
                                  else f"covariance is for the mahalanobis metric, not {metric!r}")
        try:
            x = np.asarray(points, dtype=np.float64)
        except (TypeError, ValueError) as ex:
            raise ValidationError(f"points must be a numeric 2-d array (n, dim): {ex}") from None
        if x.ndim != 2 or x.shape[0] < 2:
            raise ValidationError(f"points must be a 2-d array with at least 2 rows, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            i = int(np.argwhere(~np.isfinite(x))[0][0])
            raise ValidationError(f"points row {i} is not finite")
        if metric == "haversine":
            if x.shape[1] != 2:
                raise ValidationError(f"haversine needs two columns (lat, lon), got {x.shape[1]}")
            if (np.abs(x[:, 0]) > 90).any() or (np.abs(x[:, 1]) > 180).any():
                i = int(np.flatnonzero((np.abs(x[:, 0]) > 90) | (np.abs(x[:, 1]) > 180))[0])
                raise ValidationError(f"points row {i} is not a (lat, lon) in degrees: {x[i].tolist()}")
        labs = _labels(labels, x.shape[0])
        n = x.shape[0]
        # the distance matrix, its transpose-average and cdist's temporaries: 3 n x n arrays
        check_allocation(3 * 8.0 * n * n, f"{n:,} points ({8.0 * n * n / 1e9:.2g} GB for the distance matrix)")
        d = mahalanobis_distances(x, x, covariance) if covariance is not None else pairwise_distances(x, x, metric)
        np.fill_diagonal(d, 0.0)
        d = check_metric((d + d.T) / 2, name="distances", labels=labs, triangle=False)
        cov = None if covariance is None else _readonly(np.array(covariance, dtype=np.float64))
        return cls(_readonly(d), labs, metric, _readonly(x.copy()), _detect_cell(x, metric), cov,
                   None if cov is None else covariance_source)

    @classmethod
    def from_distances(cls, distances: ArrayLike, labels: Sequence[object] | None = None) -> MetricSpace:
        """Build from a precomputed distance matrix, checking every metric axiom."""
        d = np.asarray(distances)
        labs = _labels(labels, d.shape[0] if d.ndim == 2 else 0) if d.ndim == 2 else None
        d = check_metric(d, name="distances", labels=labs)
        return cls(_readonly(d), labs or _labels(None, d.shape[0]), "precomputed")

    @classmethod
    def from_graph(
        cls,
        edges: ArrayLike,
        weights: ArrayLike | None = None,
        n: int | None = None,
        labels: Sequence[object] | None = None,
        *,
        policy: bool = False,
    ) -> MetricSpace:
        r"""Shortest-path metric of an undirected weighted graph (road networks: Takagi et al. 2019).

        Parallel edges count once, with their shortest length (a road map may list two
        segments between one pair of junctions); a self-loop changes no shortest path. A
        graph of several connected components is refused naming them: points in different
        components would be infinitely far apart, and a finite mechanism on the whole space
        would not be :math:`\varepsilon`-mDP for any finite distance between them -- unless
        ``policy`` is True: the graph is then a *policy graph* (Cao et al. 2020), the
        distance between components is :math:`+\infty` and the mechanisms built on the
        space protect only the pairs connected in the graph (the component of a value is
        revealed; docs/proofs/policy_graphs.md).

        Parameters
        ----------
        edges : array of shape (m, 2)
            Pairs of node indices.
        weights : array of shape (m,), optional
            Positive edge lengths (1 when omitted).
        n : int, optional
            Number of nodes (default: largest index + 1).
        policy : bool
            Accept a disconnected graph (infinite distances between its components).
        """
        e = np.asarray(edges)
        if e.size == 0:
            raise ValidationError("edges is empty: a graph metric needs at least one edge")
        if e.ndim != 2 or e.shape[1] != 2 or not np.issubdtype(e.dtype, np.integer):
            raise ValidationError(f"edges must be an integer array of shape (m, 2), got {e.shape} {e.dtype}")
        w = np.ones(len(e)) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != (len(e),):
            raise ValidationError(f"weights must have shape ({len(e)},), got {w.shape}")
        if (w <= 0).any() or not np.all(np.isfinite(w)):
            i = int(np.flatnonzero((w <= 0) | ~np.isfinite(w))[0])
            raise ValidationError(
                f"edge {i} {tuple(int(x) for x in e[i])} has weight {float(w[i])!r}; "
                "weights must be finite and > 0"
            )
        size = int(e.max()) + 1 if n is None else check_int(n, "n", minimum=2)
        if e.min() < 0 or e.max() >= size:
            raise ValidationError(f"edges name a node outside 0..{size - 1}")
        labs = _labels(labels, size)
        a, b = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
        loop = a == b
        a, b, w = a[~loop], b[~loop], w[~loop]
        order = np.lexsort((w, b, a))  # per pair, the shortest first
        a, b, w = a[order], b[order], w[order]
        first = np.ones(len(a), dtype=bool)
        first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        from scipy.sparse import csgraph, csr_matrix

        g = csr_matrix((w[first], (a[first], b[first])), shape=(size, size))
        count, component = csgraph.connected_components(g, directed=False)
        if count > 1 and not policy:
            raise ValidationError(f"the graph is not connected: {_components(component, count, labs)}")
        d = csgraph.shortest_path(g, method="auto", directed=False)
        d = check_extended_metric(d, name="distances", labels=labs, triangle=False)
        return cls(_readonly(d), labs, "graph")

    @classmethod
    def grid(cls, rows: int, cols: int, cell: float = 1.0, labels: Sequence[object] | None = None) -> MetricSpace:
        """The centres of a rows x cols grid of square cells of side ``cell`` (Euclidean).

        Point ``i`` is at ``(i // cols, i % cols) * cell`` (x = column, y = row are
        swapped for nothing: the metric is symmetric in the axes).
        """
        rows = check_int(rows, "rows", minimum=1)
        cols = check_int(cols, "cols", minimum=1)
        if rows * cols < 2:
            raise ValidationError("a grid needs at least 2 cells")
        cell = check_number(cell, "cell", minimum=0, open_minimum=True)
        r, c = np.divmod(np.arange(rows * cols), cols)
        pts = np.column_stack([r, c]).astype(np.float64) * float(cell)
        space = cls.from_points(pts, labels, "euclidean")
        return space

    # ----------------------------------------------------------------- queries
    @property
    def n(self) -> int:
        """Number of points."""
        return len(self.labels)

    def __len__(self) -> int:
        return self.n

    @cached_property
    def d_min(self) -> float:
        """Smallest distance between two distinct points."""
        d = self.distances
        return float(np.min(d[~np.eye(self.n, dtype=bool)]))

    @cached_property
    def diameter(self) -> float:
        """Largest distance (``inf`` on a policy graph of several components)."""
        return float(self.distances.max())

    @cached_property
    def components(self) -> NDArray[np.intp]:
        """Component of every point, shape (n,): the classes of "at finite distance"
        (all 0 on a finite metric space; see :func:`metricdp.audit.finite_components`)."""
        _, comp = finite_components(self.distances)
        return _readonly(comp)

    @property
    def n_components(self) -> int:
        """Number of components (1 unless the space is a policy graph of several)."""
        return int(self.components.max()) + 1

    @property
    def policy(self) -> bool:
        """Whether some distance is infinite (a policy graph of several components): the
        pairs at infinite distance get no guarantee."""
        return self.n_components > 1

    def metadata(self) -> dict[str, object]:
        """What a mechanism file records of the space (JSON): metric, cell, n, and the public
        covariance of a Mahalanobis space or the components of a policy graph, so that a
        verifier can recompute and check the distances the privacy claim is about."""
        meta: dict[str, object] = {"metric": self.metric, "cell": self.cell, "n": self.n}
        if self.covariance is not None:
            meta["covariance"] = self.covariance.tolist()
            meta["covariance_source"] = self.covariance_source
        if self.policy:
            meta["policy_graph"] = {"components": self.n_components,
                                    "unprotected": "pairs in different components (infinite distance)"}
        return meta

    def index(self, labels: str | Sequence[str]) -> NDArray[np.intp]:
        """Indices of labels; the error names every label not in the space."""
        single = isinstance(labels, str) or not isinstance(labels, Iterable)
        items = [labels] if single else list(labels)
        missing = sorted({str(x) for x in items if str(x) not in self._index})
        if missing:
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            shown = ", ".join(repr(m) for m in missing[:10]) + more
            raise ValidationError(f"{len(missing)} value(s) not in the space's labels: {shown}")
        return np.array([self._index[str(x)] for x in items], dtype=np.intp)

    def neighbours(self, r: int) -> NDArray[np.intp]:
        """The r nearest neighbours of every point, itself excluded, shape (n, r).

        Ties are broken by the smaller index (stable sort), so the result is
        deterministic.
        """
        r = check_int(r, "r", minimum=0, maximum=self.n - 1)
        order = np.argsort(self.distances, axis=1, kind="stable")
        # The point itself is the unique zero of its row, hence first in the order.
        return np.ascontiguousarray(order[:, 1 : r + 1])

    def nearest(self, query: ArrayLike) -> NDArray[np.intp]:
        """Index of the nearest point of the space to each query coordinate (k-d tree)."""
        if self.points is None or self.metric not in ("euclidean",):
            raise ValidationError(f"nearest-point queries need a Euclidean space built from points, got {self.metric}")
        q = np.asarray(query, dtype=np.float64)
        _, idx = self._tree.query(q)
        return np.asarray(idx, dtype=np.intp)

    @cached_property
    def _tree(self) -> cKDTree:
        from scipy.spatial import cKDTree

        return cKDTree(self.points)

    def subspace(self, indices: ArrayLike) -> MetricSpace:
        """The sub-metric-space on the given indices (a metric stays a metric)."""
        idx = np.asarray(indices)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ValidationError(f"subspace indices must be a 1-d integer array, got {idx.dtype} shape {idx.shape}")
        if len(idx) < 2 or len(np.unique(idx)) != len(idx):
            raise ValidationError("subspace indices must be at least 2 distinct indices")
        if idx.min() < 0 or idx.max() >= self.n:
            bad = int(idx[(idx < 0) | (idx >= self.n)][0])
            raise ValidationError(f"subspace index {bad} is outside 0..{self.n - 1}")
        pts = None if self.points is None else _readonly(self.points[idx].copy())
        d = _readonly(self.distances[np.ix_(idx, idx)].copy())
        return MetricSpace(d, tuple(self.labels[i] for i in idx), self.metric, pts, self.cell, self.covariance,
                           self.covariance_source)

    def __repr__(self) -> str:
        extra = f", cell={self.cell}" if self.cell else ""
        extra += f", components={self.n_components}" if self.policy else ""
        return (
            f"MetricSpace(n={self.n}, metric={self.metric!r}, d_min={self.d_min:.6g}, "
            f"diameter={self.diameter:.6g}{extra})"
        )


def _components(component: NDArray[np.int32], count: int, labels: Sequence[str], show: int = 3) -> str:
    """The components of a disconnected graph, largest first, a few labels each."""
    sizes = np.bincount(component, minlength=count)
    parts = []
    for c in np.argsort(-sizes, kind="stable")[:show].tolist():
        members = np.flatnonzero(component == c)
        names = ", ".join(repr(labels[i]) for i in members[:5].tolist())
        parts.append(f"{{{names}{', ...' if len(members) > 5 else ''}}} ({len(members)} node(s))")
    more = f" and {count - show} more" if count > show else ""
    return (f"{count} components with no path between them: {'; '.join(parts)}{more}; add the missing edges or "
            "build one component at a time")


def check_extended_metric(
    distances: ArrayLike, name: str = "distances", labels: Sequence[str] | None = None, triangle: bool = True
) -> NDArray[np.float64]:
    """An extended metric d: X x X -> [0, +inf] (a policy graph), validated; float64.

    The infinite entries must be ``+inf`` (no NaN, no ``-inf``) and separate whole
    components: d(u, v) and d(v, w) finite imply d(u, w) finite, which the triangle
    inequality demands (:func:`metricdp.audit.finite_components` names a violating pair).
    The finite part is then checked as :func:`metricdp._validation.check_metric` checks a
    metric, on the matrix with every ``+inf`` replaced by the largest finite distance C:
    a triple with a cross-component pair (u, w) has another cross-component pair on its
    other side, C <= C + d >= C, and one with u, w in one component and v elsewhere has
    d(u, w) <= C <= 2C, so only the triples inside a component can fail, exactly as they
    would in that component alone. A finite matrix is checked exactly as before.
    """
    d = np.asarray(distances)
    if d.ndim != 2 or d.dtype == object or not np.issubdtype(d.dtype, np.number) or np.isfinite(d).all():
        return check_metric(d, name=name, labels=labels, triangle=triangle)
    d = d.astype(np.float64)
    bad = np.argwhere(~np.isfinite(d) & ~np.isposinf(d))
    if bad.size:
        return check_metric(d, name=name, labels=labels, triangle=triangle)  # names the NaN or -inf
    if d.shape[0] != d.shape[1]:
        return check_metric(d, name=name, labels=labels, triangle=triangle)  # names the shape
    if (np.diag(d) != 0).any():
        i = int(np.flatnonzero(np.diag(d) != 0)[0])
        who = repr(str(labels[i])) if labels is not None else str(i)
        raise ValidationError(f"{name} has a non-zero diagonal at {who}: {float(d[i, i])}")
    finite_components(d, name=name, labels=labels)
    finite = np.isfinite(d)
    cap = float(d[finite].max()) if finite.any() else 1.0
    checked = check_metric(np.where(finite, d, cap if cap > 0 else 1.0), name=name, labels=labels,
                           triangle=triangle)
    return np.where(finite, checked, np.inf)


#: Largest bounding box (in cells) a set of points may span and still count as a grid.
_MAX_GRID_CELLS = 1e8


def _detect_cell(x: NDArray[np.float64], metric: str) -> float | None:
    """The lattice step h when 2-d Euclidean points all lie on one square lattice h Z^2 + o."""
    if metric != "euclidean" or x.shape[1] != 2:
        return None
    steps = []
    for axis in range(2):
        u = np.unique(x[:, axis])
        if len(u) > 1:
            steps.append(np.min(np.diff(u)))
    if not steps:
        return None
    h = float(min(steps))
    if h <= 0:
        return None
    rel = (x - x.min(axis=0)) / h
    # a "lattice" whose bounding box dwarfs the points (one point moved by 1e-7 m on a 150 m grid
    # makes h = 1e-7 and a box of 10^20 cells) is not a grid: lattice mechanisms would allocate the box
    if float(np.prod(rel.max(axis=0) + 1.0)) > max(_MAX_GRID_CELLS, 16.0 * x.shape[0] ** 2):
        return None
    if np.all(np.abs(rel - np.round(rel)) <= 1e-9 * np.maximum(1.0, np.abs(rel))):
        return h
    return None


def check_space(space: object, name: str = "space") -> MetricSpace:
    """A :class:`MetricSpace` (the builders' first argument); anything else is a ValidationError."""
    if not isinstance(space, MetricSpace):
        raise ValidationError(f"{name} must be a MetricSpace, got {type(space).__name__}")
    return space
