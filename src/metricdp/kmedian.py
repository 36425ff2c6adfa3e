r"""Private k-median: the subsampled exponential mechanism at work (Lantz, Boyd and Page,
AISec 2015, Section 5), with the baselines the paper compares it to.

Public points :math:`V` (n of them) with a metric, private points :math:`D` (s indices
into V), and k centres :math:`F \subset V`:

.. math:: \text{cost}_D(F) = \sum_{v \in D} \min_{f \in F} d(v, f).

The quality is :math:`q(D, F) = -\text{cost}_D(F)`, of sensitivity :math:`\Delta = \text{diam}(V)`:
replacing (or adding, or removing) one private point changes one term, which lies in
:math:`[0, \Delta]`, by at most :math:`\Delta`.

Methods (:data:`METHODS`), each reporting the total DP level it spends:

* ``random``: a uniform k-subset (looks at no data: 0);
* ``random-k++``: k-means++ seeding (Arthur and Vassilvitskii, SODA 2007) on V only (0);
* ``em``: the exponential mechanism over all C(n, k) subsets (refused with a
  :class:`~metricdp.errors.ResourceLimitError` beyond :data:`MAX_SUBSETS`);
* ``ssem``: the SSEM with m uniform k-subsets; ``ssem-auto``: m = ceil(6 k ln n), the
  number of local-search steps of Gupta et al.; ``ssem-k++``: the SSEM with m k-means++
  seedings on V as base (data-independent). EM and SSEM at exponent
  :math:`\varepsilon/(2\Delta)` are :math:`\varepsilon`-DP (:mod:`metricdp.mechanisms.selection`);
* ``gupta``: the private local search of Gupta, Ligett, McSherry, Roth and Talwar (SODA
  2010, Section 4.1, Algorithm 1 and Theorem 4.2): T = ceil(6 k ln n) swap steps, each
  an exponential mechanism over the k(n-k) swaps at exponent
  :math:`\varepsilon' = \varepsilon/(2\Delta(T+1))`, then one more over the T visited
  sets; T + 1 mechanisms, each :math:`2\varepsilon'\Delta`-DP, compose to :math:`\varepsilon`.

Non-private references: :func:`optimum` (enumeration when C(n, k) <= MAX_SUBSETS, else
the best of ``restarts`` runs of 1-swap local search, :func:`local_search`).

Every cost evaluation is one vectorised pass: a batch of b centre sets costs one
(s, b, k) gather or distance block, and every swap of a local-search step one pass over
the (s, n) private-to-public distances (Arya et al.'s swap identity below), never an
(n, n) matrix.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.distance import cdist

from ._progress import Progress, report
from ._random import RandomSource, check_rng
from ._validation import check_epsilon, check_int
from .errors import ResourceLimitError, SolverTimeLimitError, ValidationError
from .mechanisms.selection import exponent_for, exponential_choice, subsampled_exponential_mechanism

__all__ = [
    "MAX_SUBSETS",
    "METHODS",
    "KMedian",
    "KMedianResult",
    "auto_candidates",
    "gupta_steps",
    "kmeanspp",
    "kmedian",
    "local_search",
    "optimum",
    "subset_costs",
]

#: Largest C(n, k) that ``em`` and :func:`optimum` enumerate.
MAX_SUBSETS = 5_000_000
#: Largest (s, n) private-to-public matrix kept in memory (float64 elements, 256 MB).
MAX_CACHED = 32_000_000
_BLOCK = 4_000_000  # elements of a temporary (s, b, k) or (s, columns) block

METHODS = ("random", "random-k++", "em", "ssem", "ssem-auto", "ssem-k++", "gupta")


class KMedian:
    """A k-median instance: public points, private indices into them, k, the metric.

    Parameters
    ----------
    points : array (n, dim)
        Public points V.
    private : array of int (s,)
        Indices of the private points D in ``points`` (repeats allowed).
    k : int
        Number of centres, 1 <= k < n.
    metric : str
        Any metric name of :func:`scipy.spatial.distance.cdist` (default Euclidean).
    diameter : float, optional
        The sensitivity :math:`\\Delta`; computed as diam(V) when omitted (chunked, no
        (n, n) matrix). Must be at least diam(V) for the privacy claims to hold.
    """

    def __init__(self, points: ArrayLike, private: ArrayLike, k: int, *, metric: str = "euclidean",
                 diameter: float | None = None) -> None:
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim == 1:
            pts = pts[:, None]
        if pts.ndim != 2 or len(pts) < 2:
            raise ValidationError(f"points must be an (n, dim) array with n >= 2, got shape {pts.shape}")
        if not np.all(np.isfinite(pts)):
            raise ValidationError("points must be finite")
        self.points = pts
        self.n = len(pts)
        priv = np.asarray(private)
        if priv.ndim != 1 or len(priv) == 0 or not np.issubdtype(priv.dtype, np.integer):
            raise ValidationError(f"private must be a non-empty 1-d array of indices, got {priv!r:.80}")
        if priv.min() < 0 or priv.max() >= self.n:
            raise ValidationError(f"private indices must be in [0, {self.n}), got {int(priv.min())}..{int(priv.max())}")
        self.private = priv.astype(np.intp)
        self.s = len(priv)
        self.k = check_int(k, "k", minimum=1, maximum=self.n - 1)
        self.metric = metric
        self.diameter = _diameter(pts, metric) if diameter is None else check_epsilon(diameter, "diameter")
        self._dsv: NDArray[np.float64] | None = None

    def __repr__(self) -> str:
        return f"KMedian(n={self.n}, s={self.s}, k={self.k}, metric={self.metric!r}, diameter={self.diameter:.4g})"

    @property
    def sensitivity(self) -> float:
        """:math:`\\Delta q` of the quality -cost: the diameter."""
        return self.diameter

    def private_distances(self, columns: slice | NDArray[np.intp] | None = None) -> NDArray[np.float64]:
        """d(D, V[columns]), shape (s, len(columns)); the full (s, n) matrix is cached when small."""
        if self._dsv is None and self.s * self.n <= MAX_CACHED:
            self._dsv = cdist(self.points[self.private], self.points, self.metric)
        if self._dsv is not None:
            return self._dsv if columns is None else self._dsv[:, columns]
        cols = self.points if columns is None else self.points[columns]
        return cdist(self.points[self.private], cols, self.metric)

    def cost(self, centres: ArrayLike, data: ArrayLike | None = None) -> NDArray[np.float64] | float:
        """cost_D(F) for one centre set (k,) or a batch (b, k) of index arrays.

        ``data`` replaces the private indices (the quality's D; default this instance's).
        """
        f = np.asarray(centres)
        one = f.ndim == 1
        f = np.atleast_2d(f).astype(np.intp)
        if f.size and (f.min() < 0 or f.max() >= self.n):
            raise ValidationError(f"centre indices must be in [0, {self.n})")
        priv = self.private if data is None else np.asarray(data, dtype=np.intp)
        out = _costs(self, priv, f)
        return float(out[0]) if one else out


def _diameter(pts: NDArray[np.float64], metric: str) -> float:
    block = max(1, _BLOCK // len(pts))
    return float(max(cdist(pts[i:i + block], pts, metric).max() for i in range(0, len(pts), block)))


def _costs(problem: KMedian, priv: NDArray[np.intp], f: NDArray[np.intp]) -> NDArray[np.float64]:
    """Costs of the rows of f (b, k): one (s, b', k) block per b' rows, min over k, sum over D."""
    b, k = f.shape
    s = len(priv)
    out = np.empty(b)
    step = max(1, _BLOCK // max(1, s * k))
    same = priv is problem.private
    for i in range(0, b, step):
        rows = f[i:i + step]
        if same and (problem._dsv is not None or problem.s * problem.n <= MAX_CACHED):
            d = problem.private_distances()[:, rows]  # (s, b', k) gather
        else:
            d = cdist(problem.points[priv], problem.points[rows.ravel()], problem.metric).reshape(s, len(rows), k)
        out[i:i + step] = d.min(axis=2).sum(axis=0)
    return out


# ------------------------------------------------------------------ bases
def uniform_subsets(n: int, k: int, m: int, rng: RandomSource) -> NDArray[np.intp]:
    """m independent uniform k-subsets of range(n), shape (m, k): the k smallest of n uniforms.

    Blocked so that no more than ~4M uniforms are held at once.
    """
    out = np.empty((m, k), dtype=np.intp)
    step = max(1, _BLOCK // n)
    for i in range(0, m, step):
        u = np.asarray(rng.random((min(step, m - i), n)), dtype=np.float64)
        out[i:i + step] = np.sort(np.argpartition(u, k - 1, axis=1)[:, :k], axis=1)
    return out


def kmeanspp(points: NDArray[np.float64], k: int, m: int, rng: RandomSource, *, metric: str = "euclidean",
             power: float = 2.0) -> NDArray[np.intp]:
    """m independent k-means++ seedings of ``points`` (Arthur and Vassilvitskii, SODA 2007), shape (m, k).

    First centre uniform, each next one with probability proportional to the squared
    (``power``) distance to the nearest centre so far; all m seedings advance together
    (one (m, n) array per round, blocked over m). A seeding whose remaining weights are
    all zero (duplicate points) continues uniformly among the points not yet chosen.
    """
    n = len(points)
    out = np.empty((m, k), dtype=np.intp)
    step = max(1, _BLOCK // n)
    for i0 in range(0, m, step):
        r = min(step, m - i0)
        rows = np.arange(r)
        chosen = np.minimum((np.asarray(rng.random(r)) * n).astype(np.intp), n - 1)
        out[i0:i0 + r, 0] = chosen
        near = np.full((r, n), np.inf)
        taken = np.zeros((r, n), dtype=bool)
        for j in range(1, k):
            taken[rows, chosen] = True
            near = np.minimum(near, cdist(points[chosen], points, metric))
            w = np.where(taken, 0.0, near**power)
            flat = w.sum(axis=1) <= 0
            w[flat] = np.where(taken[flat], 0.0, 1.0)
            cum = np.cumsum(w, axis=1)
            v = np.asarray(rng.random(r), dtype=np.float64) * cum[:, -1]
            chosen = np.minimum((cum <= v[:, None]).sum(axis=1), n - 1)
            out[i0:i0 + r, j] = chosen
    return out


def auto_candidates(n: int, k: int) -> int:
    """m of ``ssem-auto``: ceil(6 k ln n) (Lantz et al., Section 5; Gupta et al.'s T)."""
    return max(1, math.ceil(6 * k * math.log(n)))


def gupta_steps(n: int, k: int) -> int:
    """T = ceil(6 k ln n), the swap steps of Gupta et al.'s Algorithm 1 (Theorem 4.2)."""
    return auto_candidates(n, k)


# ------------------------------------------------------------------ enumeration
def _subsets(n: int, k: int) -> NDArray[np.intp]:
    count = math.comb(n, k)
    if count > MAX_SUBSETS:
        raise ResourceLimitError(
            f"C({n}, {k}) = {count:,} centre sets exceed the enumeration limit {MAX_SUBSETS:,}; "
            "use ssem or ssem-auto (they never enumerate)"
        )
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), k)), dtype=np.intp,
                       count=count * k)
    return flat.reshape(count, k)


def subset_costs(problem: KMedian) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Every k-subset (C(n, k), k) and its cost; ResourceLimitError beyond MAX_SUBSETS."""
    subsets = _subsets(problem.n, problem.k)
    return subsets, np.asarray(problem.cost(subsets))


# ------------------------------------------------------------------ local search
def _nearest_two(dist: NDArray[np.float64]) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    """Per row of d(D, F) (s, k): index of the nearest centre, its distance, the second distance."""
    a = np.argmin(dist, axis=1)
    d1 = dist[np.arange(len(dist)), a]
    if dist.shape[1] == 1:
        return a, d1, np.full(len(dist), np.inf)
    masked = dist.copy()
    masked[np.arange(len(dist)), a] = np.inf
    return a, d1, masked.min(axis=1)


def swap_costs(problem: KMedian, centres: NDArray[np.intp]) -> NDArray[np.float64]:
    r"""cost(F - f_x + y) for every x < k and every y < n, shape (k, n).

    With :math:`a(v)` the nearest centre of v, :math:`d_1, d_2` its nearest and second
    distances: removing :math:`f_x` leaves v at :math:`d_1` unless :math:`a(v) = x`, then
    :math:`d_2`; so

    .. math::

        \text{cost}(F - f_x + y) = \sum_v \min(d_1(v), d(v,y))
            + \sum_{v: a(v)=x} [\min(d_2(v), d(v,y)) - \min(d_1(v), d(v,y))],

    one pass over the (s, n) distances (in column blocks) and one (k, s) x (s, n) product.
    Entries with y in F are meaningless (not swaps) and left to the caller to drop.
    """
    a, d1, d2 = _nearest_two(problem.private_distances(centres))
    onehot = np.zeros((problem.k, problem.s))
    onehot[a, np.arange(problem.s)] = 1.0
    out = np.empty((problem.k, problem.n))
    step = max(1, _BLOCK // problem.s)
    for c in range(0, problem.n, step):
        cols = slice(c, min(problem.n, c + step))
        dv = problem.private_distances(cols)
        near = np.minimum(d1[:, None], dv)
        out[:, cols] = near.sum(axis=0)[None, :] + onehot @ (np.minimum(d2[:, None], dv) - near)
    return out


def _swap_pairs(problem: KMedian, centres: NDArray[np.intp]) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Costs of the k(n-k) swaps (flattened) and the columns y not in F."""
    outside = np.setdiff1d(np.arange(problem.n), centres)
    return swap_costs(problem, centres)[:, outside].ravel(), outside


def local_search(problem: KMedian, start: ArrayLike, *, max_steps: int = 1000) -> tuple[NDArray[np.intp], float, int]:
    """Best-improvement 1-swap local search from ``start``; (centres, cost, swaps made).

    Stops when no swap lowers the cost by more than 1e-12 of it, or after ``max_steps``.
    """
    f = np.array(start, dtype=np.intp)
    cost = float(problem.cost(f))
    for step in range(max_steps):
        costs, outside = _swap_pairs(problem, f)
        best = int(np.argmin(costs))
        if not costs[best] < cost - 1e-12 * max(1.0, cost):
            return np.sort(f), cost, step
        f[best // len(outside)] = outside[best % len(outside)]
        cost = float(problem.cost(f))
    return np.sort(f), cost, max_steps


def optimum(problem: KMedian, *, restarts: int = 10, rng: object = None) -> tuple[NDArray[np.intp], float, str]:
    """The non-private reference: (centres, cost, how).

    ``how`` is ``"enumeration"`` (the exact optimum) when C(n, k) <= MAX_SUBSETS, else
    ``"local-search"``: the best of ``restarts`` best-improvement 1-swap local searches,
    each from a k-means++ seeding of the private points (non-private, on purpose).
    """
    if math.comb(problem.n, problem.k) <= MAX_SUBSETS:
        subsets, costs = subset_costs(problem)
        i = int(np.argmin(costs))
        return subsets[i], float(costs[i]), "enumeration"
    source = check_rng(rng)
    restarts = check_int(restarts, "restarts", minimum=1)
    uniq = np.unique(problem.private)
    starts = uniq[kmeanspp(problem.points[uniq], min(problem.k, len(uniq)), restarts, source, metric=problem.metric)]
    runs = []
    for st in starts:
        if len(st) < problem.k:  # fewer distinct private points than k: pad with public ones
            st = np.concatenate([st, np.setdiff1d(np.arange(problem.n), st)[: problem.k - len(st)]])
        f, c, _ = local_search(problem, st)
        runs.append((c, f))
    c, f = min(runs, key=lambda run: run[0])
    return f, c, "local-search"


# ------------------------------------------------------------------ private methods
@dataclass(frozen=True)
class KMedianResult:
    """The centres a method chose, their cost and what the method spent.

    ``epsilon`` is the total DP level the release satisfies (0 for data-independent
    methods); ``evaluations`` counts centre sets whose cost was computed;
    ``candidates`` is m (SSEM), C(n, k) (EM), T (gupta) or 0.
    """

    method: str
    centres: NDArray[np.intp]
    cost: float
    epsilon: float
    evaluations: int
    candidates: int
    seconds: float
    info: dict[str, Any] = field(default_factory=dict)


def kmedian(
    problem: KMedian,
    method: str,
    epsilon: float | None = None,
    *,
    candidates: int | None = None,
    time_limit: float | None = None,
    subsets: tuple[NDArray[np.intp], NDArray[np.float64]] | None = None,
    rng: object = None,
    progress: Progress | None = None,
) -> KMedianResult:
    """Run one k-median method of :data:`METHODS` at total DP level ``epsilon``.

    Parameters
    ----------
    problem : KMedian
    method : str
        One of :data:`METHODS`.
    epsilon : float
        Total DP level (required by the private methods, ignored by ``random*``).
    candidates : int, optional
        m of ``ssem`` and ``ssem-k++`` (required there); ``ssem-auto`` sets its own.
    time_limit : float, optional
        Seconds for ``gupta``; beyond it a :class:`~metricdp.errors.SolverTimeLimitError`
        whose ``result`` holds the steps done (nothing is released).
    subsets : (subsets, costs), optional
        :func:`subset_costs` computed before (``em``), to share it across eps.
    rng : None, int or Generator
        ``None`` draws from the OS's secure source.

    Examples
    --------
    >>> pts = np.random.default_rng(0).random((40, 2))
    >>> prob = KMedian(pts, np.arange(0, 40, 3), 2)
    >>> res = kmedian(prob, "ssem-auto", 1.0, rng=0)
    >>> res.epsilon, res.candidates
    (1.0, 45)
    """
    if not isinstance(problem, KMedian):
        raise ValidationError(f"problem must be a KMedian, got {type(problem).__name__}")
    if method not in METHODS:
        raise ValidationError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    source = check_rng(rng)
    n, k = problem.n, problem.k
    t0 = time.perf_counter()
    if method == "random":
        f = uniform_subsets(n, k, 1, source)[0]
        return _result(problem, method, f, 0.0, 0, 0, t0)
    if method == "random-k++":
        f = np.sort(kmeanspp(problem.points, k, 1, source, metric=problem.metric)[0])
        return _result(problem, method, f, 0.0, 0, 0, t0)
    eps = check_epsilon(epsilon)
    delta = problem.sensitivity
    if method == "em":
        subs, costs = subset_costs(problem) if subsets is None else subsets
        i = int(exponential_choice(-costs, exponent_for(eps, delta), source))
        return _result(problem, method, subs[i], eps, len(subs), len(subs), t0)
    if method == "gupta":
        return _gupta(problem, eps, source, time_limit, progress, t0)
    if method == "ssem-auto":
        m = auto_candidates(n, k)
    else:
        if candidates is None:
            raise ValidationError(f"{method} needs candidates (m); ssem-auto chooses m = ceil(6 k ln n)")
        m = check_int(candidates, "candidates", minimum=1)
    if method == "ssem-k++":
        def base(r: RandomSource, mm: int) -> NDArray[np.intp]:
            return np.sort(kmeanspp(problem.points, k, mm, r, metric=problem.metric), axis=1)
    else:
        def base(r: RandomSource, mm: int) -> NDArray[np.intp]:
            return uniform_subsets(n, k, mm, r)

    def quality(data: NDArray[np.intp], cand: NDArray[np.intp]) -> NDArray[np.float64]:
        return -np.asarray(problem.cost(cand, data))

    sel = subsampled_exponential_mechanism(problem.private, quality, base, m, sensitivity=delta, epsilon=eps,
                                           rng=source)
    return _result(problem, method, np.asarray(sel.output), sel.epsilon, m, m, t0, cost=-sel.quality)


def _result(problem: KMedian, method: str, f: NDArray[np.intp], eps: float, evals: int, cand: int, t0: float,
            cost: float | None = None, **info: Any) -> KMedianResult:
    seconds = time.perf_counter() - t0
    c = float(problem.cost(f)) if cost is None else float(cost)
    return KMedianResult(method, np.asarray(f, dtype=np.intp), c, eps, evals, cand, seconds, info)


def _gupta(problem: KMedian, eps: float, rng: RandomSource, time_limit: float | None, progress: Progress | None,
           t0: float) -> KMedianResult:
    """Gupta et al. (SODA 2010), Algorithm 1: T private swaps, then a private pick among the T sets."""
    n, k = problem.n, problem.k
    steps = gupta_steps(n, k)
    exponent = exponent_for(eps, problem.sensitivity * (steps + 1))  # T + 1 mechanisms at 2 exponent Delta each
    f = uniform_subsets(n, k, 1, rng)[0]  # F_1: arbitrary (here uniform, data-independent)
    visited = np.empty((steps, k), dtype=np.intp)
    for i in range(steps):
        visited[i] = f
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            raise SolverTimeLimitError(
                f"gupta: time limit {time_limit:g} s reached after {i} of {steps} swap steps",
                status="limit", result={"steps": i, "of": steps, "seconds": time.perf_counter() - t0},
            )
        costs, outside = _swap_pairs(problem, f)
        j = int(exponential_choice(-costs, exponent, rng))
        f = f.copy()
        f[j // len(outside)] = outside[j % len(outside)]
        report(progress, i + 1, steps, f"gupta: swap {i + 1} of {steps}")
    # Algorithm 1 picks among F_1..F_T (the last swap's result F_{T+1} is not a candidate)
    vcost = np.asarray(problem.cost(visited))
    j = int(exponential_choice(-vcost, exponent, rng))
    evals = steps * k * (n - k) + steps
    return _result(problem, "gupta", np.sort(visited[j]), 2.0 * exponent * (problem.sensitivity * (steps + 1)),
                   evals, steps, t0, cost=float(vcost[j]), exponent=exponent)
