r"""The mechanism LP shared by OPTMech and SpannerMech (:mod:`metricdp.mechanisms.optimal`, ``.spanner``).

One concept: the LP of Bordenabe, Chatzikokolakis, Palamidessi (CCS 2014, Section 4) and
Imola et al. (UAI 2022, LP (1)) for a set of *allowed* ordered pairs whose privacy rows
are imposed, and how it is solved: the variables (:class:`MechanismLP`), the row-sum and
loss rows, the privacy rows built in one shot from index arrays, the three formulations
(full, constraint generation, interior point), the solve-then-repair step
(:func:`solve_and_repair`, returning the public :class:`LPSolution`) and the LP
statistics of ``info["lp"]`` (:func:`lp_info`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from .._progress import Progress, report
from ..errors import SolverTimeLimitError
from ..spaces import MetricSpace
from ._solve import LOG_CAP, LPModel, SolveResult, require_optimal
from .certificate import bound_from_duals
from .deadline import Deadline
from .pairs import COLLINEAR_TOL, implied_pairs, pair_blocks
from .polish import beyond_cap, finish
from .repair import repair
from .retry import OPTMECH, RetryPolicy, choose_eta
from .rowpool import ROWS_PER_OUTPUT, RowPool, most_violated
from .solution import LPSolution, RawSolution

__all__ = [
    "BOUND_OPTIONS",
    "COLLINEAR_TOL",
    "FULL_OPTIONS",
    "IPM_OPTIONS",
    "LP_OPTIONS",
    "TIEBREAK",
    "TIEBREAK_GAP",
    "VIOLATION_TOL",
    "WARM_OPTIONS",
    "LPSolution",
    "MechanismLP",
    "RawSolution",
    "choose_eta",
    "implied_pairs",
    "lp_info",
    "solve_and_repair",
    "solve_raw",
]

#: HiGHS options of every OPTMech/SpannerMech LP: tighter feasibility tolerances than
#: HiGHS's 1e-7 keep the fast and full formulations within 1e-6 of each other even when
#: entries are ~1e-4 (large eps * d).
LP_OPTIONS: Mapping[str, Any] = {
    "primal_feasibility_tolerance": 1e-9,
    "dual_feasibility_tolerance": 1e-9,
}

#: The reference (``full``) LP is solved tighter: with all n^2(n-1) rows at 1e-9, rows
#: between entries ~1e-6 (eps d ~ 10) are met so loosely that its optimum moved by 1.2e-6
#: relative (50 Gaussian points in 50-d, eps = 1); at 1e-10 it agrees with ``fast`` to 1e-12.
FULL_OPTIONS: Mapping[str, Any] = {
    "primal_feasibility_tolerance": 1e-10,
    "dual_feasibility_tolerance": 1e-10,
}

#: Options set after the first solve of constraint generation: Devex pricing in the dual
#: simplex instead of exact steepest edge, whose weights HiGHS recomputes from scratch after
#: every batch of added rows (a large share of each round on large spaces). Devex and Dantzig
#: pricing compare with mixed results on GloVe spaces; Devex stays.
#: The comparison: benchmarks/RESULTS.md#docstrings-lp-core-warm-options.
WARM_OPTIONS: Mapping[str, Any] = {"simplex_dual_edge_weight_strategy": 1}

#: A privacy row not yet in the model is added when violated by more than this (absolute,
#: in probability): the same accuracy as the solver's own row tolerance in the full LP
#: (a relative test, 1e-9 M[u,w], doubled the rows at n = 100, eps = 0.5, for no gain
#: against the full LP); the repair absorbs what remains.
VIOLATION_TOL = 1e-9


#: Weight of the tie-break of OPTMech's worst-case LP (:func:`_solve_fast`): the objective
#: is :math:`k + \delta \cdot \text{mean}_u \sum_w L[u,w] M[u,w]` until constraint
#: generation converges. Why: with the pure objective, k can be final early while every
#: later round still adds thousands of rows (the optimal face is large at small eps); the
#: tie-break chooses a point on that face whose rows settle in fewer rounds, with fewer
#: rows. Why this small: a small weight keeps the tie-broken point on the optimal face;
#: a larger one (1e-3) misses the bound at large eps, and where the tie-broken k misses
#: the pure LP's lower bound by more than :data:`TIEBREAK_GAP` the generation goes on
#: without the tie-break: the weight changes the speed, not the optimum returned.
#: The evidence: benchmarks/RESULTS.md#docstrings-lp-core-tiebreak.
TIEBREAK = 1e-6

#: Options of the bound solve after the tie-break (the pure objective restored, the basis
#: still primal feasible): primal simplex, which needs about a hundredth of the dual
#: simplex's iterations from that basis. The evidence: benchmarks/RESULTS.md#docstrings-lp-core-bound-options.
BOUND_OPTIONS: Mapping[str, Any] = {"simplex_strategy": 4}

#: Restored after a refused bound: dual simplex, HiGHS's default, for the re-solves.
_DUAL: Mapping[str, Any] = {"simplex_strategy": 1}

#: Largest relative excess of the tie-broken k over the lower bound of the pure LP on the
#: same rows for which the tie-broken solution is returned (:func:`_solve_fast`).
TIEBREAK_GAP = 1e-10


# ---------------------------------------------------------------------- LP pieces
@dataclass(frozen=True)
class MechanismLP:
    r"""The mechanism LP of OPTMech and SpannerMech: objective and fixed rows in x = (vec(X)[, k]).

    The matrix is :math:`M[u,w] = K[u,w]\, X[a(w),w] + X[u,w]` for u != a(w) and
    :math:`M[a(w),w] = X[a(w),w]`, with ``kernel`` K (:math:`K[a(w), w] = 1`) and
    :math:`X \ge 0`, X of shape (n, m) for n inputs and m outputs. ``anchor`` a(w) is an
    input per output (default: a(w) = w, the square case, where K has a unit diagonal).
    K[u, w] = [u = a(w)] is the plain formulation (X = M); :math:`K[u,w] = e^{-\ell\,
    \delta(u,a(w))}` is the *substituted* one (:func:`_solve_fast`).
    """

    n: int
    kernel: NDArray[np.float64]
    c: NDArray[np.float64]
    base: sp.csr_matrix
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    anchor: NDArray[np.intp] | None = None

    @property
    def m(self) -> int:
        """Number of outputs (columns of M)."""
        return int(self.kernel.shape[1])

    @property
    def anchors(self) -> NDArray[np.intp]:
        """a(w) for every output w (the identity when square)."""
        return np.arange(self.n) if self.anchor is None else self.anchor

    @property
    def nvar(self) -> int:
        return self.c.shape[0]

    def matrix(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """M from a solution x."""
        n, k = self.n, self.m
        xm = np.asarray(x)[: n * k].reshape(n, k)
        at = (self.anchors, np.arange(k))
        diag = xm[at].copy()
        m = self.kernel * diag[None, :] + xm
        m[at] = diag
        return m


def _coo_rows(
    rows: NDArray, cols: NDArray, vals: NDArray, shape: tuple[int, int]
) -> sp.csr_matrix:
    a = sp.csr_matrix((vals, (rows, cols)), shape=shape)
    a.eliminate_zeros()
    return a


def _base_model(
    loss: NDArray[np.float64], prior: NDArray[np.float64] | None, kernel: NDArray[np.float64] | None = None,
    anchor: NDArray[np.intp] | None = None,
) -> MechanismLP:
    r"""Row sums :math:`\sum_w M[u,w] = 1` and, for the worst case, loss rows
    :math:`\sum_w L[u,w] M[u,w] - k \le 0` (Imola et al., LP (1)); objective ``k``, or
    :math:`\sum_u \pi_u \sum_w L[u,w] M[u,w]` for a prior (Bordenabe et al., Sec. 4);
    written in the variables of :class:`MechanismLP` (built in one shot, 2m - 1 entries a row).
    ``loss`` is (n, m); ``anchor`` a(w) per output (None: the square a(w) = w).
    """
    n, nout = loss.shape
    a = np.arange(n) if anchor is None else anchor
    if kernel is None:  # the plain formulation: K[u, w] = [u = a(w)]
        k = np.eye(n) if anchor is None else (np.arange(n)[:, None] == a[None, :]).astype(np.float64)
    else:
        k = kernel
    worst = prior is None
    nvar = n * nout + (1 if worst else 0)
    u, w = np.divmod(np.arange(n * nout), nout)
    off = u != a[w]
    # M[u,w] = K[u,w] X[a(w),w] + X[u,w]: entries at X[a(w),w] (all u) and X[u,w] (u != a(w))
    rows = np.r_[u, u[off]]
    cols = np.r_[a[w] * nout + w, (u * nout + w)[off]]
    coef = np.r_[k[u, w], np.ones(int(off.sum()))]
    lcoef = coef * np.r_[loss[u, w], loss[u, w][off]]
    if prior is None:  # worst case
        base = _coo_rows(
            np.r_[rows, n + rows, n + np.arange(n)],
            np.r_[cols, cols, np.full(n, n * nout)],
            np.r_[coef, lcoef, -np.ones(n)],
            (2 * n, nvar),
        )
        lower = np.r_[np.ones(n), np.full(n, -np.inf)]
        upper = np.r_[np.ones(n), np.zeros(n)]
        c = np.zeros(nvar)
        c[-1] = 1.0
    else:
        base = _coo_rows(rows, cols, coef, (n, nvar))
        lower = upper = np.ones(n)
        c = np.bincount(cols, weights=lcoef * prior[rows], minlength=nvar).astype(np.float64)
    return MechanismLP(n, k, c, base, lower, upper, anchor)


def _privacy_rows(u: NDArray, v: NDArray, w: NDArray, factor: NDArray, model: MechanismLP) -> sp.csr_matrix:
    r"""Rows :math:`M[u,w] - f[u,v] M[v,w] \le 0` for the triples (u, v, w), in one shot.

    In the variables of :class:`MechanismLP`: coefficient :math:`K[u,w] - f[u,v] K[v,w]` on
    X[a(w),w], 1 on X[u,w] (u != a(w)) and :math:`-f[u,v]` on X[v,w] (v != a(w)).
    """
    n, t = model.m, len(u)  # n: the row length of X (outputs)
    k = model.kernel
    idx = np.arange(t)
    fu = factor[u, v]
    aw = model.anchors[w]
    mu, mv = u != aw, v != aw
    return _coo_rows(
        np.r_[idx, idx[mu], idx[mv]],
        np.r_[aw * n + w, (u * n + w)[mu], (v * n + w)[mv]],
        np.r_[k[u, w] - fu * k[v, w], np.ones(int(mu.sum())), -fu[mv]],
        (t, model.nvar),
    )


def _violated(
    p: NDArray[np.float64],
    factor: NDArray[np.float64],
    pu: NDArray[np.intp],
    pv: NDArray[np.intp],
    in_model: NDArray[np.bool_],
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(pair index, w) of every violated row of the allowed ordered pairs (pu, pv) not yet in
    the model, scanned in blocks of pairs (vectorised; only allowed pairs are touched)."""
    found_k: list[NDArray[np.intp]] = []
    found_w: list[NDArray[np.intp]] = []
    for start, stop in pair_blocks(len(pu), p.shape[1]):
        u, v = pu[start:stop], pv[start:stop]
        viol = p[u] - factor[u, v][:, None] * p[v]  # (pairs, w)
        kk, ww = np.nonzero((viol > VIOLATION_TOL) & ~in_model[start:stop])
        found_k.append(kk + start)
        found_w.append(ww)
    return np.concatenate(found_k), np.concatenate(found_w)


def _triples(allowed: NDArray[np.bool_], n: int) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """(u, v, w) of every privacy row of the allowed ordered pairs (u, v), for every output w."""
    pu, pv = np.nonzero(allowed)
    return np.repeat(pu, n), np.repeat(pv, n), np.tile(np.arange(n), len(pu))


def _solve_full(
    model: MechanismLP, factor: NDArray[np.float64], allowed: NDArray[np.bool_], deadline: Deadline, what: str
) -> RawSolution:
    """The plain LP (``model.kernel`` = I) with every allowed privacy row, in one solve."""
    u, v, w = _triples(allowed, model.m)
    a = sp.vstack([model.base, _privacy_rows(u, v, w, factor, model)], format="csr")
    lower = np.r_[model.lower, np.full(len(u), -np.inf)]
    upper = np.r_[model.upper, np.zeros(len(u))]
    result = LPModel(options=FULL_OPTIONS).load(
        model.c, a, lower, upper, 0.0, np.inf, time_limit=deadline.require(what)
    )
    x = require_optimal(result, what)
    return RawSolution(model.matrix(x), result, 1, len(u), result.seconds, result.iterations)


#: HiGHS options of the ``ipm`` formulation: the interior-point method (IPX) *with*
#: crossover, so the answer is a vertex of the LP, as for ``fast`` and ``full``. Why: the
#: interior optimum stops at IPX's relative gap, not at the optimum: on SpannerMech's LP
#: (random 30-point spaces, eps 1) it lies up to 1.5e-8 relative above the full LP's
#: optimum, against 1e-15 after crossover, and the builds must be exact to 1e-9. Crossover
#: costs about a third more time on large spaces; exactness is worth it.
IPM_OPTIONS: Mapping[str, Any] = {**LP_OPTIONS, "run_crossover": "on"}


def _solve_ipm(
    model: MechanismLP, factor: NDArray[np.float64], allowed: NDArray[np.bool_], deadline: Deadline, what: str
) -> RawSolution:
    """The substituted LP (``model.kernel``) with every allowed privacy row, in one
    interior-point solve followed by crossover (a vertex: :data:`IPM_OPTIONS`).

    Same LP as :func:`_solve_fast` at convergence: all rows are present from the start,
    and the rows (w, v, w), which the substitution turns into bounds, are left out.
    """
    u, v, w = _triples(allowed, model.m)
    keep = u != model.anchors[w]
    u, v, w = u[keep], v[keep], w[keep]
    a = sp.vstack([model.base, _privacy_rows(u, v, w, factor, model)], format="csr")
    lower = np.r_[model.lower, np.full(len(u), -np.inf)]
    upper = np.r_[model.upper, np.zeros(len(u))]
    result = LPModel(method="ipm", options=IPM_OPTIONS).load(
        model.c, a, lower, upper, 0.0, np.inf, time_limit=deadline.require(what)
    )
    x = require_optimal(result, what)
    return RawSolution(model.matrix(x), result, 1, len(u), result.seconds, result.iterations)


def _solve_fast(
    model: MechanismLP,
    factor: NDArray[np.float64],
    allowed: NDArray[np.bool_],
    deadline: Deadline,
    what: str,
    progress: Progress | None = None,
    tiebreak: NDArray[np.float64] | None = None,
    per_output: int | None = None,
    drop: bool = False,
) -> RawSolution:
    r"""The same LP by substitution and constraint generation; same optimum.

    **Substitution.** With the model's kernel K (OPTMech: :math:`K[u,w] = e^{-\ell
    d(u,w)}`; SpannerMech: :math:`e^{-\ell d_G(u,w)}`, d_G the graph distance; :math:`\ell`
    the LP's level), write :math:`M[u,w] = K[u,w] X[w,w] + X[u,w]` (u != w), :math:`M[w,w] =
    X[w,w]`, :math:`X \ge 0`. The map X -> M is a bijection between :math:`X \ge 0` and
    the matrices :math:`M \ge 0` with :math:`M[u,w] \ge K[u,w] M[w,w]` for all u, w. Those
    are exactly the privacy rows (w, u, w) of OPTMech, and for SpannerMech they are
    implied by the edge rows (chain them along a shortest path from w to u). So the LP
    in X has the same feasible set and optimum, and n(n-1) of its privacy rows (most of
    the binding ones, in practice: benchmarks/RESULTS.md#docstrings-lp-core-solve-fast) are now bounds, which cost
    the simplex nothing.

    **A separate output set** (outputs w of Y, not points of the space; the model's
    ``anchor``): each output w has an anchor input a(w) (OPTMech: the input nearest to
    w), and :math:`M[u,w] = K[u,w] X[a(w),w] + X[u,w]` (u != a(w)), :math:`M[a(w),w] =
    X[a(w),w]`, with :math:`K[u,w] = e^{-\ell d(u, a(w))}`. The same argument holds:
    X -> M is a bijection between :math:`X \ge 0` and the M >= 0 with
    :math:`M[u,w] \ge e^{-\ell d(u,a(w))} M[a(w),w]` for all u (invert by
    :math:`X[a(w),w] = M[a(w),w]`, :math:`X[u,w] = M[u,w] - K[u,w] M[a(w),w]`), and that
    inequality *is* the privacy row :math:`M[a(w),w] \le e^{\ell d(a(w),u)} M[u,w]` of the
    ordered input pair (a(w), u) at output w, a row of the LP (privacy over the inputs, for
    every output). So the substituted LP has the same feasible set and optimum; the rows
    (a(w), v, w) become bounds. The square case is a(w) = w.

    **Constraint generation.** Start with no privacy rows; solve; scan all allowed
    triples (vectorised, blocked) and add every row violated by more than
    :data:`VIOLATION_TOL`; re-solve warm-started (dual simplex from the previous basis,
    Devex pricing); stop when none is violated. The last optimum is optimal for a
    relaxation of the full LP and feasible for it up to the tolerance, hence optimal for
    it (to the tolerance of a direct solve).

    **Tie-break (worst case).** The objective k alone has a large face of optima (only
    the worst row's loss counts), and the dual simplex wanders across it, each vertex
    violating rows not yet in the model (on large spaces at small eps, k can be final after
    a few rounds and thousands of new rows a round follow until a time-out). With ``tiebreak`` (a cost vector
    :math:`t \ge 0`, :data:`TIEBREAK` times the mean row loss) the rounds minimise
    :math:`c^\top x + t^\top x` instead, which picks one point of that face. On
    convergence its solution :math:`x_t` meets every row (to the tolerance), so its
    :math:`k_t` is at least the full LP's optimum :math:`k^*`. The pure objective is then
    restored and re-solved on the same rows (warm, primal simplex: :data:`BOUND_OPTIONS`): a relaxation of the
    full LP, so its optimum :math:`k_{lb} \le k^*`. If :math:`k_t \le k_{lb}(1 +`
    :data:`TIEBREAK_GAP`), then :math:`k^* \le k_t \le k^*(1 + \tau)`: :math:`x_t` is
    optimal to :math:`\tau` and returned. Otherwise (a weight above the lexicographic
    threshold) the generation goes on from the pure LP's solution, as without a
    tie-break; either way the result is the full LP's optimum.

    **Row pool** (``per_output``, OPTMech's worst case): a round adds at most ``per_output``
    violated rows per output column and rows slack for a few rounds leave the model
    (:mod:`.rowpool`: the rules, and why the optimum and termination are unchanged).

    ``progress`` is called after every round with the rows in the model, the simplex
    iterations so far, the LP objective and the time left.
    """
    lp = LPModel(options=LP_OPTIONS)
    empty = sp.csr_matrix((0, model.nvar))
    a = sp.vstack([model.base, empty], format="csr")
    cost = model.c if tiebreak is None else model.c + tiebreak
    result = lp.load(cost, a, model.lower, model.upper, 0.0, np.inf, time_limit=deadline.require(what))
    x = require_optimal(result, what)
    lp.set_options(WARM_OPTIONS)
    pu, pv = np.nonzero(allowed)
    # (allowed pair, w); rows (a(w), v, w) are bounds after the substitution
    pool = RowPool(pu, pv, pu[:, None] == model.anchors[None, :], model.base.shape[0])
    rounds, seconds, its = 1, result.seconds, result.iterations

    while True:
        report(
            progress,
            rounds,
            None,
            f"{what}: round {rounds}: {len(pool):,} privacy rows, {its:,} simplex iterations, objective "
            f"{result.objective:.10g}, {deadline.describe()}",
        )
        p = model.matrix(x)
        k, w = _violated(p, factor, pu, pv, pool.in_model)
        if len(k) == 0 and tiebreak is None:
            return RawSolution(p, result, rounds, len(pool), seconds, its, pool.triples())
        if len(k) == 0:  # the tie-broken LP converged: compare with the pure LP's bound
            lp.change_costs(model.c)
            lp.set_options(BOUND_OPTIONS)
            k_t, tied = float(model.c @ x), result
            result = _resolve(lp, deadline, what, result)
            lp.set_options(_DUAL)
            x = require_optimal(result, what)
            seconds, its, tiebreak = seconds + result.seconds, its + result.iterations, None
            bound = float(result.objective if result.objective is not None else np.nan)
            if k_t - bound <= TIEBREAK_GAP * abs(bound):  # the pure LP's duals certify (same rows)
                tied = dataclasses.replace(tied, objective=k_t, row_dual=result.row_dual, col_dual=result.col_dual)
                return RawSolution(p, tied, rounds, len(pool), seconds, its, pool.triples())
            continue  # above the lexicographic threshold: plain generation from here
        if per_output is not None:  # the row pool's rules (rowpool.py)
            k, w = most_violated(p, factor, pu, pv, k, w, per_output)
            if drop and result.row_dual is not None:
                pool.drop_slack(lp, result.row_dual, p, factor)
        pool.add(k, w)
        lp.add_rows(_privacy_rows(pu[k], pv[k], w, factor, model), -np.inf, 0.0)
        result = _resolve(lp, deadline, what, result)
        x = require_optimal(result, what)
        rounds, seconds, its = rounds + 1, seconds + result.seconds, its + result.iterations


def _resolve(lp: LPModel, deadline: Deadline, what: str, last: SolveResult) -> SolveResult:
    """Re-solve warm within the deadline; a time-out carries the last optimal result."""
    try:
        return lp.resolve(time_limit=deadline.require(what))
    except SolverTimeLimitError as exc:
        exc.result = last
        raise


#: Formulations whose solvers live in modules that build on this one (and so cannot be
#: imported from it without a cycle): name -> solver, registered by the module at import.
#: ``block-ipm``: :func:`.ipm_finish.solve_block_ipm` (:mod:`metricdp.mechanisms.optimal` imports it).
EXTERNAL_FORMULATIONS: dict[str, Callable[..., RawSolution]] = {}


def solve_raw(
    space: MetricSpace,
    level: float,
    eta: float,
    allowed: NDArray[np.bool_],
    loss: NDArray[np.float64],
    prior: NDArray[np.float64] | None,
    *,
    formulation: str,
    time_limit: float | Deadline | None,
    what: str,
    graph_distances: NDArray[np.float64] | None = None,
    progress: Progress | None = None,
    anchor: NDArray[np.intp] | None = None,
    tiebreak: float = 0.0,
) -> RawSolution:
    r"""The unrepaired LP solution with privacy rows at :math:`\text{level}\,(1-\eta)`.

    ``formulation``: ``full`` (:func:`_solve_full`), ``fast`` (:func:`_solve_fast`) or
    ``ipm`` (:func:`_solve_ipm`). ``graph_distances`` (SpannerMech): the distances whose
    kernel the ``fast`` and ``ipm`` formulations substitute (default: the metric itself).
    ``anchor`` (a separate output set: ``loss`` is (n, m)): the input a(w) of each output
    that the substitution pivots on (:func:`_solve_fast`); None: square, a(w) = w.
    ``tiebreak`` (worst case, ``fast`` only): the weight of the mean row loss in the
    tie-break of :func:`_solve_fast` (0: none; OPTMech uses :data:`TIEBREAK`).

    **Capped factors.** Every exponent :math:`\lambda d` is capped at :data:`LOG_CAP`:
    row (u, v) reads :math:`M[u,w] \le e^{\min(\lambda d(u,v),\, C)} M[v,w]` and the
    kernel is :math:`e^{-\min(\lambda d, C)}`. A capped row is *stricter* than the
    privacy row, so privacy is untouched (and the repair and audit still check it). It
    changes the optimum only where :math:`\lambda d > C` for some pair, and by little:
    mixing an optimum :math:`M^*` of the uncapped LP with the uniform matrix,
    :math:`(1-\delta) M^* + \delta J/n` with :math:`\delta = n e^{-C}`, meets every
    capped row (each entry is then at least :math:`e^{-C}`) and every privacy row (both
    matrices do, and the rows are linear), at a loss at most
    :math:`\delta \max d` above :math:`M^*`'s. Without the cap, ratios such as
    :math:`e^{43}` (eps = 0.3 per km over 140 km of a geolocation space) make HiGHS
    scale rows so that it reports "optimal" for solutions that violate them by 0.7
    in probability, which no repair can absorb. Where a factor was capped,
    :func:`solve_and_repair` then re-solves uncapped in scaled form (:mod:`.polish`).

    ``time_limit``: a :class:`~.deadline.Deadline` (or seconds, starting now) shared by
    every solve.
    """
    deadline = Deadline.of(time_limit)
    lam = level * (1.0 - eta)
    factor = np.exp(np.minimum(lam * space.distances, LOG_CAP))
    if formulation == "full":
        return _solve_full(_base_model(loss, prior, None, anchor), factor, allowed, deadline, what)
    kernel = np.exp(-np.minimum(lam * (space.distances if graph_distances is None else graph_distances), LOG_CAP))
    if anchor is not None:
        kernel = kernel[:, anchor]  # K[u, w] = e^{-lam d(u, a(w))}
    if formulation == "ipm":
        return _solve_ipm(_base_model(loss, prior, kernel, anchor), factor, allowed, deadline, what)
    solver = EXTERNAL_FORMULATIONS.get(formulation)
    if solver is not None:
        return solver(_base_model(loss, prior, kernel, anchor), factor, allowed, space.distances, lam,
                      loss, prior, deadline, what, progress)
    extra = None
    if tiebreak > 0 and prior is None:
        n = loss.shape[0]
        extra = tiebreak * np.r_[_base_model(loss, np.full(n, 1.0 / n), kernel, anchor).c, 0.0]
    per_output = ROWS_PER_OUTPUT if prior is None and graph_distances is None else None  # OPTMech, worst case
    drop = per_output is not None and bool((lam * space.distances < LOG_CAP).all())  # rowpool.DROP_AFTER
    return _solve_fast(_base_model(loss, prior, kernel, anchor), factor, allowed, deadline, what, progress, extra,
                       per_output, drop)


def solve_and_repair(
    space: MetricSpace,
    epsilon: float,
    level: float,
    allowed: NDArray[np.bool_],
    loss: NDArray[np.float64],
    prior: NDArray[np.float64] | None,
    *,
    formulation: str,
    time_limit: float | Deadline | None,
    what: str,
    eta: float | None = None,
    graph_distances: NDArray[np.float64] | None = None,
    progress: Progress | None = None,
    policy: RetryPolicy = OPTMECH,
    anchor: NDArray[np.intp] | None = None,
    tiebreak: float = 0.0,
) -> LPSolution:
    r"""Solve the LP at :math:`\varepsilon(1-\eta)` and :func:`~.repair.repair` it at eps.

    ``level`` scales the privacy rows: row (u, v) reads
    :math:`M[u,w] \le e^{\text{level}\,(1-\eta)\, d(u,v)} M[v,w]` (``level = epsilon``
    for OPTMech, ``epsilon / stretch`` for SpannerMech). When the repair's spread check
    fails (a retryable :class:`~metricdp.errors.RepairError`), the LP is solved again at
    a larger :math:`\eta` (``policy``, default :data:`.retry.OPTMECH`); the repair never returns a matrix it
    has not proven :math:`\varepsilon`-mDP. ``time_limit`` (a
    :class:`~.deadline.Deadline`, or seconds from now) covers all solves together.
    ``anchor``: a separate output set (``loss`` (n, m); :func:`solve_raw`).
    ``tiebreak``: as :func:`solve_raw`.

    When the solve reports its privacy rows (the ``block-ipm`` finish, square, OPTMech's
    ``level == epsilon``), ``info["dual_bound"]`` is a certified lower bound on the LP
    optimum at exactly eps from that solve's duals
    (:func:`~.certificate.bound_from_duals`): ``(loss - bound) / bound`` bounds how far
    the returned mechanism is from optimal.

    Where the solve capped a factor (:func:`.polish.beyond_cap`; square spaces), the LP is
    solved again uncapped in scaled form (:func:`.polish.finish`) and the repaired
    candidate of smaller loss is returned; ``info["polish"]`` records which and why.
    """
    deadline = Deadline.of(time_limit)
    first = choose_eta(epsilon, space.d_min, policy, space.diameter) if eta is None else eta

    def attempt(eta: float) -> LPSolution:
        raw = solve_raw(
            space,
            level,
            eta,
            allowed,
            loss,
            prior,
            formulation=formulation,
            time_limit=deadline,
            what=what,
            graph_distances=graph_distances,
            progress=progress,
            anchor=anchor,
            tiebreak=tiebreak,
        )
        info: dict[str, Any] = {}
        result = raw.result
        lam = level * (1.0 - eta)
        if anchor is None and beyond_cap(lam, space.distances, allowed, graph_distances):  # polish.py
            matrix, objective, info["polish"] = finish(raw.matrix, space.distances, epsilon, eta, lam, allowed,
                                                       loss, prior, deadline, what, certify=level == epsilon,
                                                       retry=fallback is not None and eta < fallback)
            if objective is not None:
                result = dataclasses.replace(result, objective=objective)
        else:
            matrix = repair(raw.matrix, space.distances, epsilon, eta=eta)
        if raw.rows is not None and anchor is None and level == epsilon and raw.result.row_dual is not None \
                and raw.result.col_dual is not None:
            factor = np.exp(np.minimum(lam * space.distances, LOG_CAP))
            info["dual_bound"] = bound_from_duals(space.distances, epsilon, raw.rows, raw.result.row_dual,
                                                  raw.result.col_dual, factor, loss=loss, prior=prior)
        polished = info.get("polish", {}).pop("dual_bound", None)
        if polished is not None:
            info["dual_bound"] = max(polished, info.get("dual_bound", -np.inf))
        return LPSolution(matrix, result, raw.rounds, raw.privacy_rows, raw.solve_seconds, eta, raw.iterations,
                          info)

    fallback = policy.initial(epsilon, space.d_min) if eta is None else None  # the d_min rule's eta
    return policy.run(attempt, first, progress=progress, what=what, fallback=fallback)


def lp_info(solved: LPSolution, formulation: str, full_rows: int) -> dict[str, Any]:
    """``info["lp"]``: SolveResult.stats() plus rounds, formulation and repair data."""
    stats = solved.result.stats()
    stats.update(
        solve_seconds=solved.solve_seconds,
        rounds=solved.rounds,
        formulation=formulation,
        privacy_rows=solved.privacy_rows,
        privacy_rows_full=full_rows,
        objective=solved.result.objective,
        eta=solved.eta,
        simplex_iterations=solved.iterations,
    )
    stats.update(solved.info)
    return stats
