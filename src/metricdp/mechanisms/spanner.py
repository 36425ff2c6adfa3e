r"""SpannerMech: the optimal mechanism with privacy imposed only along a spanner's edges.

Bordenabe, Chatzikokolakis, Palamidessi, "Optimal Geo-Indistinguishable Mechanisms for
Location Privacy", CCS 2014, Section 5: a t-spanner G of the space (graph distance
:math:`d_G(u,v) \le t\, d(u,v)`) lets the LP impose privacy on G's edges only, at
:math:`\varepsilon / t`; the path argument (proof in :func:`spanner`) gives
:math:`\varepsilon`-mDP for every pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.sparse.csgraph import shortest_path

from .._progress import Progress, report
from .._validation import check_epsilon
from ..errors import RepairError, ValidationError
from ..lp.core import LPSolution, RawSolution, choose_eta, lp_info, solve_and_repair, solve_raw
from ..lp.deadline import Deadline
from ..lp.repair import repair
from ..lp.retry import OPTMECH, SPANNER
from ..spaces import MetricSpace, check_space
from .base import Mechanism, certify
from .calibration import largest_passing
from .lp_plan import check_plan, plan_spanner
from .registry import declared

__all__ = ["Spanner", "greedy_spanner", "spanner"]

_SCAN = 4096  # sorted pairs examined per vectorised step of the greedy scan
_CALIBRATION_RTOL = 1e-3
#: ``formulation="auto"`` picks ``ipm`` from this many edge rows 2mn on (about n = 150 on
#: GloVe), where the interior point is the faster; below, ``fast`` (the comparison: see
#: :func:`spanner`, ``formulation``).
_IPM_FROM_ROWS = 100_000
_CALIBRATION_ITER = 8  # LP solves; the bracket [eps/t, eps] shrinks to ~1 % of eps


@dataclass(frozen=True, eq=False)
class Spanner:
    """A spanner of a finite metric space.

    Attributes
    ----------
    edges : ndarray of shape (m, 2), int
        Undirected edges (u, v) with u < v, in the order the greedy algorithm added them.
    weights : ndarray of shape (m,)
        ``d(u, v)`` of each edge.
    stretch : float
        The stretch t that was asked for.
    achieved_stretch : float
        :math:`\\max_{u \\ne v} d_G(u,v) / d(u,v)` of this graph (at most ``stretch``).
    """

    edges: NDArray[np.intp]
    weights: NDArray[np.float64]
    stretch: float
    achieved_stretch: float

    def __post_init__(self) -> None:
        for name in ("edges", "weights"):
            arr = np.array(getattr(self, name), copy=True)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def m(self) -> int:
        """Number of edges."""
        return int(self.edges.shape[0])

    def __repr__(self) -> str:
        return f"Spanner(m={self.m}, stretch={self.stretch:g}, achieved_stretch={self.achieved_stretch:.6g})"


def _check_stretch(stretch: object) -> float:
    try:
        t = float(stretch)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationError(f"stretch must be a number >= 1, got {stretch!r}") from None
    if not (math.isfinite(t) and t >= 1.0):
        raise ValidationError(f"stretch must be finite and >= 1, got {stretch!r}")
    return t


def greedy_spanner(space: MetricSpace, stretch: float = 3.0) -> Spanner:
    r"""The greedy t-spanner (Althöfer et al. 1993; used by Bordenabe et al., CCS 2014).

    Pairs are considered by increasing distance (ties by index, stable); the edge
    (u, v) is added when the current graph distance exceeds :math:`t\, d(u,v)`. Every
    pair then has :math:`d_G(u,v) \le t\, d(u,v)`: a skipped pair already had it, an
    added pair has :math:`d_G = d`, and graph distances only decrease afterwards. With
    :math:`t = 2k - 1` this is the classic (2k-1)-spanner (Althöfer et al. 1993; default k = 2).

    The all-pairs graph distance ``D`` is kept exact under each insertion of an edge
    (u, v) of weight w in O(n^2) vectorised work,
    :math:`D \leftarrow \min(D,\ D[:,u] + w + D[v,:],\ D[:,v] + w + D[u,:])`
    (a shortest path uses the new edge at most once), and the sorted pairs are scanned
    in vectorised chunks for the next one that violates the stretch, so Python loops
    only over added edges.

    Parameters
    ----------
    space : MetricSpace
    stretch : float, >= 1

    Returns
    -------
    Spanner

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> g = greedy_spanner(MetricSpace.grid(1, 4), stretch=1.0)   # a path: 3 edges
    >>> g.edges.tolist(), g.achieved_stretch
    ([[0, 1], [1, 2], [2, 3]], 1.0)
    """
    space = check_space(space)
    t = _check_stretch(stretch)
    d = space.distances
    n = space.n
    iu, iv = np.triu_indices(n, k=1)
    order = np.argsort(d[iu, iv], kind="stable")
    iu, iv = iu[order], iv[order]
    limit = t * d[iu, iv]
    dg = np.full((n, n), np.inf)
    np.fill_diagonal(dg, 0.0)
    edges: list[tuple[int, int]] = []
    pos = 0
    while pos < len(iu):
        stop = min(pos + _SCAN, len(iu))
        over = np.flatnonzero(dg[iu[pos:stop], iv[pos:stop]] > limit[pos:stop])
        if over.size == 0:
            pos = stop
            continue
        pos += int(over[0])
        u, v = int(iu[pos]), int(iv[pos])
        w = d[u, v]
        edges.append((u, v))
        via = np.minimum(dg[:, u, None] + w + dg[None, v, :], dg[:, v, None] + w + dg[None, u, :])
        np.minimum(dg, via, out=dg)
        pos += 1
    e = np.array(edges, dtype=np.intp).reshape(-1, 2)
    off = ~np.eye(n, dtype=bool)
    achieved = float(np.max(dg[off] / d[off]))
    return Spanner(e, d[e[:, 0], e[:, 1]], t, achieved)


@declared("spanner")
def spanner(
    space: MetricSpace,
    epsilon: float,
    *,
    stretch: float = 3.0,
    calibrate: bool = False,
    time_limit: float | None = None,
    formulation: str = "auto",
    progress: Progress | None = None,
) -> Mechanism:
    r"""SpannerMech: minimise worst-case loss with privacy rows on spanner edges only.

    The LP is OPTMech's (:func:`~metricdp.mechanisms.optimal.optimal`, worst case) with the
    privacy rows restricted to the edges (a, b) of :func:`greedy_spanner`, in both
    directions and for every output w:

    .. math:: M[a,w] \le e^{\lambda\, d(a,b)} M[b,w], \qquad
              \lambda = \varepsilon_1 / t^\ast,\ \ \varepsilon_1 = \varepsilon(1-\eta),

    with :math:`t^\ast \le t` the stretch the spanner achieves (the paper's
    :math:`\varepsilon/t` is the special case :math:`t^\ast = t`; the smaller :math:`t^\ast`
    only enlarges the feasible set, so the loss is never higher).

    **Proof of privacy.** For u, v, take a shortest path
    :math:`u = x_0, \dots, x_k = v` in G; its length is
    :math:`d_G(u,v) \le t^\ast d(u,v)`. Chaining the edge rows,

    .. math:: M[u,w] \le e^{\lambda \sum_i d(x_i, x_{i+1})} M[v,w]
              = e^{\lambda d_G(u,v)} M[v,w] \le e^{\varepsilon_1 d(u,v)} M[v,w].

    The LP is solved at :math:`\eta` by OPTMech's rule (:data:`metricdp.lp.retry.OPTMECH`,
    :math:`\varepsilon\eta d_{\max} = 10^{-10}`), so the returned loss is within about
    1e-10 relative of the LP's optimum at :math:`\varepsilon / t^\ast` (a margin of 1e-5
    would cost up to 5e-4; the calibration's steps keep it:
    :data:`metricdp.lp.retry.SPANNER`). The solver meets these rows only to its tolerance; the repair
    (:func:`~metricdp.lp.repair.repair`, at :math:`\varepsilon`) turns the solution
    into an exactly :math:`\varepsilon`-mDP matrix, and
    :func:`~metricdp.mechanisms.base.certify` audits it independently. Every
    ``formulation`` reaches the optimum of the LP with all edge rows (to the solver
    tolerance).

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
    stretch : float, >= 1
        Spanner stretch t (default 3, the 3-spanner, k = 2).
    calibrate : bool
        Also find by bisection (:func:`~metricdp.mechanisms.calibration.largest_passing`,
        relative tolerance 1e-3, at most 8 LP solves) the largest inner level :math:`\lambda \in
        [\varepsilon/t^\ast, \varepsilon]` whose repaired LP solution passes the exact
        audit at eps; the calibrated mechanism is returned only when its worst-case
        loss is no higher than the uncalibrated one. Both levels are recorded in
        ``info["calibration"]``.
    time_limit : float, optional
        Seconds for the whole build (:class:`~metricdp.lp.deadline.Deadline`): the spanner, every
        LP solve and every calibration step draw on one budget; on expiry a
        :class:`~metricdp.errors.SolverTimeLimitError` (status ``"limit"``). Earlier
        versions gave each LP its own limit.
    formulation : {"auto", "fast", "ipm", "full"}
        How the LP with all :math:`2mn` edge rows is solved. ``auto`` (default):
        ``ipm`` from 100,000 edge rows on, else ``fast`` (the choice is recorded in
        ``params["formulation"]``). ``fast``: the substitution of OPTMech's fast
        formulation, then constraint generation with the dual simplex (a vertex).
        ``ipm``: the same substituted LP with every edge row, one interior-point solve
        with crossover (a vertex, like the others: :data:`metricdp.lp.core.IPM_OPTIONS`). ``full``:
        the plain LP with every edge row, one simplex solve (the tests' reference).
        Timings on GloVe vocabularies: benchmarks/RESULTS.md#docstrings-spanner-formulation.
    progress : callable, optional
        ``progress(done, total, message)``: first the plan (model size, memory and a time
        scale: :func:`~metricdp.mechanisms.lp_plan.plan_spanner`), then every
        constraint-generation round or interior-point iteration (rows, LP objective, gap,
        time left) and every calibration step.

    Raises
    ------
    ResourceLimitError
        Before any LP, when the model with every edge row cannot fit the memory limit
        (:func:`~metricdp.mechanisms.lp_plan.check_plan`).

    Returns
    -------
    Mechanism
        ``name="spanner"``; ``params`` holds the stretch asked and achieved and the
        number of edges; ``info["spanner"]["edges"]`` lists the edges.

    References
    ----------
    Bordenabe, Chatzikokolakis, Palamidessi. Optimal Geo-Indistinguishable Mechanisms for
    Location Privacy. CCS 2014. Althöfer, Das, Dobkin, Joseph, Soares. On sparse spanners
    of weighted graphs. Discrete Comput. Geom. 1993.
    """
    deadline = Deadline(time_limit)
    space = check_space(space)
    epsilon = check_epsilon(epsilon)
    t = float(stretch)
    g = greedy_spanner(space, t)
    n = space.n
    if formulation == "auto":
        formulation = "ipm" if 2 * g.m * n >= _IPM_FROM_ROWS else "fast"
    plan = plan_spanner(n, g.m, formulation=formulation)  # before any LP: its size, memory and time
    check_plan(plan, "a larger stretch gives fewer edge rows")
    report(progress, 0, None, plan.summary())
    allowed = np.zeros((n, n), dtype=bool)
    allowed[g.edges[:, 0], g.edges[:, 1]] = True
    allowed |= allowed.T
    d = space.distances
    loss = np.asarray(d, dtype=np.float64)
    eta = choose_eta(epsilon, space.d_min, SPANNER)  # the calibration's steps
    level = epsilon / g.achieved_stretch

    dg = _graph_distances(n, g)

    def solve(lam: float) -> LPSolution:
        return solve_and_repair(
            space,
            epsilon,
            lam,
            allowed,
            loss,
            None,
            formulation=formulation,
            time_limit=deadline,
            what="spanner",
            graph_distances=dg,
            progress=progress,
            policy=OPTMECH,
        )

    solved = solve(level)
    matrix = solved.matrix
    calibration: dict[str, Any] | None = None
    if calibrate:
        cache: dict[float, LPSolution] = {level: solved}
        steps = [0]

        def build(lam: float) -> NDArray[np.float64]:
            if lam in cache:  # the proven level, already solved
                return cache[lam].matrix
            steps[0] += 1
            report(progress, steps[0], _CALIBRATION_ITER, f"spanner: calibration step {steps[0]}, level {lam:.6g}")
            last: list[RawSolution] = []

            def attempt(e: float) -> LPSolution:
                raw = solve_raw(space, lam, e, allowed, loss, None, formulation=formulation, time_limit=deadline,
                                what="spanner", graph_distances=dg, progress=progress)
                last[:] = [raw]
                out = repair(raw.matrix, d, epsilon, eta=e)
                return LPSolution(out, raw.result, raw.rounds, raw.privacy_rows, raw.solve_seconds, e, raw.iterations)

            try:
                cache[lam] = SPANNER.once().run(attempt, eta, progress=progress, what=f"spanner at level {lam:.6g}")
            except RepairError:
                # In the bisection a repair failure is an answer (lp/retry.py): this level
                # is too high; hand the audit the raw (clipped, normalised) LP solution; it
                # passes only if it is eps-mDP itself.
                clipped = np.maximum(last[-1].matrix, 0.0)
                return clipped / clipped.sum(axis=1, keepdims=True)
            return cache[lam].matrix

        cal = largest_passing(
            build, d, epsilon, level, epsilon, rtol=_CALIBRATION_RTOL, max_iter=_CALIBRATION_ITER
        )
        cal_loss = float(np.max(np.einsum("uv,uv->u", cal.matrix, d)))
        base_loss = float(np.max(np.einsum("uv,uv->u", matrix, d)))
        used = cal_loss <= base_loss
        calibration = {
            "calibrated": True,
            "inner_epsilon_proven": level,
            "inner_epsilon": cal.parameter,
            "epsilon_audit": cal.epsilon_audit,
            "iterations": cal.iterations,
            "worst_loss_uncalibrated": base_loss,
            "worst_loss_calibrated": cal_loss,
            "used": used,
        }
        if used:
            matrix = cal.matrix
            if cal.parameter in cache:
                solved = cache[cal.parameter]
    params = {
        "stretch": t,
        "achieved_stretch": g.achieved_stretch,
        "spanner_edges": g.m,
        "inner_epsilon": level if calibration is None or not calibration["used"] else calibration["inner_epsilon"],
        "calibrate": calibrate,
        "formulation": formulation,
    }
    info = {
        "lp": lp_info(solved, formulation, 2 * g.m * n),
        "spanner": {"edges": g.edges.tolist(), "achieved_stretch": g.achieved_stretch, "stretch": t},
        "calibration": calibration,
    }
    return certify(matrix, space, epsilon, "spanner", params, info)


def _graph_distances(n: int, g: Spanner) -> NDArray[np.float64]:
    """All-pairs shortest-path distances of the spanner (scipy's csgraph)."""
    adj = sp.csr_matrix((g.weights, (g.edges[:, 0], g.edges[:, 1])), shape=(n, n))
    return shortest_path(adj, directed=False)
