r"""Elastic distinguishability metrics (Chatzikokolakis, Palamidessi, Stronati,
"Constructing elastic distinguishability metrics for location privacy", PoPETs 2015(2),
Sections 4-5).

Geo-indistinguishability with the Euclidean metric protects a point in the countryside
(few places within a km) as much as one downtown (hundreds), so either the city is
over-protected or the countryside under-protected. An *elastic* metric stretches dense
areas and shrinks sparse ones, so that every point's ball of distinguishability radius
l holds enough *privacy mass* (the weights: population, points of interest, check-ins).

Construction (the paper's greedy graph algorithm)
-------------------------------------------------
The metric is the shortest-path metric of a weighted graph G on the points, built in
passes. Each point x has a radius :math:`r_x` (0 at first) and visits the other points
in order of base distance. In every pass, every point x that is not finished

1. takes the mass of its current ball, :math:`m_x = \sum_{y : d_G(x,y) \le r_x} w_y`;
2. sets :math:`r_x \leftarrow \max(r_x, \rho(m_x))`, where :math:`\rho` is the radius a
   mass entitles a point to (the inverse of the paper's requirement function
   *req(l)*: the mass a ball of radius l must hold);
3. connects itself, by an edge of length :math:`r_x`, to the first point y in its order
   with :math:`d_G(x, y) > r_x`. x is finished when there is none, or when its ball
   already holds a fraction ``coverage`` of the total mass W (the paper's requirement
   saturates in the same way: beyond some radius nothing more is required).

A heavy neighbourhood earns a large radius fast, so its later edges are long (dense
areas are stretched); a light one keeps short edges (sparse areas shrink). With the
default :math:`\rho(m) = s\,(m/W)^{1/k}` (W the total mass, k = ``dimension``, s =
``scale``, by default half the base diameter), a uniform density on a disc of diameter
2s in dimension k = 2 gives back about the base metric: a ball of radius l holds mass
:math:`W l^2/s^2` there, so :math:`\rho` of it is l.

Departure from the paper's implementation: all points of a pass are updated together
from the distances at the start of the pass (the paper visits points one after the
other), so the result does not depend on the order of the points. The loop ends after
at most n - 1 passes: an edge (x, y) of length :math:`r_x` leaves
:math:`d_G(x, y) \le r_x` for good (distances only shrink, radii only grow), so each
pass moves every growing point forward in its order.

Connectivity: when all points are finished, each ball :math:`B(x, r_x)` holds more than
half of the mass W (``coverage`` > 1/2, or all points), so any two balls meet and
:math:`d_G(x, y) \le r_x + r_y`: every distance is finite.

Metric axioms: edge lengths are :math:`\rho(w_x) > 0` or larger, so :math:`d_G` is a
shortest-path metric of a connected undirected graph with positive lengths: symmetric,
zero exactly on the diagonal, and it satisfies the triangle inequality. The result is
checked like every :class:`~metricdp.spaces.MetricSpace` anyway.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import csgraph, csr_matrix

from ._progress import Progress
from ._validation import check_metric
from .errors import ValidationError
from .spaces import MetricSpace, check_space

__all__ = ["elastic_metric", "mass_radius"]

#: Largest n whose triangle inequality is re-checked after construction (O(n^3)).
_TRIANGLE_CHECK_MAX_N = 2000


Radius = Callable[[NDArray[np.float64]], NDArray[np.float64]]


def mass_radius(total: float, scale: float, dimension: float = 2.0) -> Radius:
    r"""The default :math:`\rho(m) = s (m / W)^{1/k}` as a vectorised function."""

    def rho(mass: NDArray[np.float64]) -> NDArray[np.float64]:
        return scale * (np.asarray(mass, dtype=np.float64) / total) ** (1.0 / dimension)

    return rho


def _check_weights(weights: ArrayLike, n: int) -> NDArray[np.float64]:
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,):
        raise ValidationError(f"weights must have shape ({n},), got {w.shape}")
    bad = ~np.isfinite(w) | (w <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"weights must be finite and > 0 (a point of no mass has no elastic radius); "
                              f"index {i} is {float(w[i])!r}")
    return w


def _graph(edges: NDArray[np.float64]) -> csr_matrix:
    """The finite entries of ``edges`` as a sparse graph (explicit entries only: no zero-length edges)."""
    i, j = np.nonzero(np.isfinite(edges))
    return csr_matrix((edges[i, j], (i, j)), shape=edges.shape)


def elastic_metric(
    space: MetricSpace,
    weights: ArrayLike,
    *,
    scale: float | None = None,
    dimension: float = 2.0,
    radius: Radius | None = None,
    coverage: float = 0.75,
    progress: Progress | None = None,
) -> MetricSpace:
    """The elastic metric of ``space`` for the privacy mass ``weights`` (see the module docstring).

    Parameters
    ----------
    space : MetricSpace
        The base space; its distances order each point's candidates.
    weights : array of shape (n,)
        Privacy mass of every point, > 0 (populations, check-in counts ...).
    scale : float, optional
        s of the default radius function (default: half the base diameter).
    dimension : float
        k of the default radius function (2 for places on a map).
    radius : callable, optional
        Replaces the default: maps an array of ball masses to radii, non-decreasing and
        finite, > 0 for every single weight.
    coverage : float in (0.5, 1]
        A point stops growing once its ball holds this fraction of the total mass
        (default 0.75; 1 grows every ball until it holds every point, slower).
    progress : Progress, optional
        Called once per pass as ``progress(pass, None, message)``.

    Returns
    -------
    MetricSpace
        ``metric="elastic"`` (``"elastic-haversine"`` when the base is haversine, so
        that its points are known to be (lat, lon)), the base labels and points;
        distances are in the base unit's scale (``scale``), not physical distances.

    Examples
    --------
    Points at 0, 1 and 3 on a line, weights 1, 1, 2 and the linear radius
    :math:`\\rho(m) = m` (scale 4 = W, dimension 1): pass 1 adds edges 0-1 (length 1) and
    2-1 (length 2), pass 2 adds 0-2 (length 2, point 0's ball of radius 1 holds mass 2),
    then every point is finished.

    >>> space = MetricSpace.from_distances([[0, 1, 3], [1, 0, 2], [3, 2, 0]])
    >>> elastic_metric(space, [1, 1, 2], scale=4, dimension=1).distances.tolist()
    [[0.0, 1.0, 2.0], [1.0, 0.0, 2.0], [2.0, 2.0, 0.0]]
    """
    space = check_space(space)
    n = space.n
    w = _check_weights(weights, n)
    if radius is None:
        s = space.diameter / 2.0 if scale is None else float(scale)
        if not (np.isfinite(s) and s > 0):
            raise ValidationError(f"scale must be finite and > 0, got {scale!r}")
        k = float(dimension)
        if not (np.isfinite(k) and k > 0):
            raise ValidationError(f"dimension must be finite and > 0, got {dimension!r}")
        rho = mass_radius(float(w.sum()), s, k)
    else:
        rho = radius
    try:
        cover = float(coverage)
    except (TypeError, ValueError):
        raise ValidationError(f"coverage must be a number in (0.5, 1], got {coverage!r}") from None
    if not (0.5 < cover <= 1.0):
        raise ValidationError(f"coverage must be in (0.5, 1] (balls of more than half the mass meet), got {coverage!r}")
    goal = cover * float(w.sum()) * (1 - 1e-12)
    base = np.asarray(space.distances)
    order = np.argsort(base, axis=1, kind="stable")[:, 1:]  # each point's others, nearest first
    edges = np.full((n, n), np.inf)  # upper triangle: edges[min(x, y), max(x, y)]
    r = np.zeros(n)
    rows = np.arange(n)
    passes = 0
    active = np.ones(n, dtype=bool)
    dist = np.where(np.eye(n) > 0, 0.0, np.inf)
    while True:
        src = rows[active]
        if np.isfinite(edges).any():
            dist[src] = csgraph.dijkstra(_graph(edges), directed=False, indices=src)
        mass = (dist[src] <= r[src, None]) @ w
        new = np.asarray(rho(mass), dtype=np.float64)
        if new.shape != src.shape or not np.all(np.isfinite(new)) or (new <= 0).any():
            raise ValidationError("radius must map ball masses to finite radii > 0")
        r[src] = np.maximum(r[src], new)
        far = np.take_along_axis(dist[src], order[src], axis=1) > r[src, None]
        grow = far.any(axis=1) & (mass < goal)
        active[src[~grow]] = False
        if not grow.any():
            break
        passes += 1
        x = src[grow]
        y = order[x, np.argmax(far[grow], axis=1)]
        # an undirected edge keeps the shorter of the lengths its two ends asked for
        np.minimum.at(edges, (np.minimum(x, y), np.maximum(x, y)), r[x])
        if progress is not None:
            progress(passes, None, f"elastic metric: pass {passes}, {int(grow.sum())} points growing")
    dist = csgraph.dijkstra(_graph(edges), directed=False)
    if not np.all(np.isfinite(dist)):  # pragma: no cover - balls of more than half the mass meet
        raise ValidationError("elastic metric: the graph is not connected")
    d = check_metric(dist, name="elastic distances", labels=space.labels, triangle=n <= _TRIANGLE_CHECK_MAX_N)
    d.setflags(write=False)
    pts = None if space.points is None else space.points
    metric = "elastic-haversine" if space.metric == "haversine" else "elastic"
    return MetricSpace(d, space.labels, metric, pts, None)
