r"""Output-column generation for OPTMech's expected loss: the ``column-generation`` formulation.

One concept: solve the expected-loss LP (Bordenabe et al., CCS 2014, Sec. 4) on a
*working set* W of outputs with the structured interior point, and add outputs only when
a pricing test shows they can lower the objective; the last working set is solved to an
exact vertex and every other output is priced exactly.

**The structure.** Write :math:`m_w = M[:, w]` and :math:`c_w[u] = \pi_u L[u,w]`. The LP is

.. math::

    \min \sum_w c_w^\top m_w \quad\text{s.t.}\quad \sum_w m_w = \mathbf 1,\quad m_w \in C,
    \qquad C = \{m \ge 0 : m_u \le f_{uv}\, m_v\ \ \forall u \ne v\},

every column in the *same* cone C (:math:`f_{uv} = e^{\min(\lambda d(u,v),\, C_{\log})}`,
the capped factors of ``core.solve_raw``). With a skewed prior the optimum releases few
outputs, so most columns are 0 and the LP restricted to W is small: the interior point
costs :math:`O(|W| n^3)` an iteration instead of :math:`O(n^4)`, and its memory is
:math:`|W| / n` of the full method's (:func:`.ipm.ipm_bytes`).

**Why the restricted optimum is the full optimum (the pricing test).** Let y be the duals
of the row sums of the restricted LP at its optimum and :math:`g_w = c_w - y`. For any
feasible M of the full LP, :math:`\sum_w c_w^\top m_w = \sum_u y_u + \sum_w g_w^\top m_w`.
If :math:`g_w + r_w \in C^*` (the dual cone) with :math:`r_w \ge 0`, then
:math:`g_w^\top m_w \ge -r_w^\top m_w \ge -\lVert r_w \rVert_1` (entries of M are at most
1), so every feasible M has objective at least :math:`\sum_u y_u - \sum_w \lVert r_w
\rVert_1`, and :math:`\sum_u y_u` is the restricted optimum (the privacy rows and bounds
have right side 0): when every :math:`r_w = 0` the restricted optimum *is* the full
optimum. The columns of W meet the test by the restricted LP's own dual feasibility.

**The exact test** (:func:`cover`). :math:`C = \{m \ge 0 : Am \le 0\}`, so :math:`C^* =
\{h : h \ge -A^\top z,\ z \ge 0\}`: with :math:`z_{kv}` on row (k, v),
:math:`h_k + \sum_v z_{kv} - \sum_u f_{uk} z_{uk} \ge 0` for all k. That is a transport:
a deficit :math:`-h_k > 0` at k is covered by :math:`z_{kv}` from node v, which pays
:math:`f_{kv} z_{kv}` out of its surplus :math:`h_v`. Because :math:`\log f` is a metric
(a capped metric is a metric), shipping directly beats any chain, so only deficit-to-surplus
pairs are needed: :math:`g \in C^*` iff the maximum flow

.. math::

    \max \sum_{k \in D, v \in S} T_{kv} \ \text{ s.t. }\ \sum_v T_{kv} \le -g_k\ (k \in D),
    \quad \sum_k f_{kv} T_{kv} \le g_v\ (v \in S),\quad T \ge 0

covers every deficit (D, S: the negative and positive entries of g). Its shortfall
:math:`s = \sum_{k \in D} (-g_k) - \text{flow}` is :math:`\lVert r \rVert_1` for the
residual deficits r, and :math:`s > 0` iff output w can improve the objective. *Any*
feasible flow gives a valid r (a larger one where it is not the maximum), so the flow is
first sought greedily, without an LP (:mod:`.greedy_cover`: on a 14 x 14 grid it covers
all but a few of the outputs it is asked about, and the pricing's CPU time drops from about
17 s to 0.3 s), then, for the outputs it leaves short, on the arcs from each deficit to its
:data:`NEAREST_ARCS` nearest surpluses (a small LP) and on every arc only where that
leaves a shortfall. The flow from HiGHS is
scaled down onto its capacities before the shortfall is read, so the certificate holds in
floating point, not only to HiGHS's tolerance.

**The certificate.** The flows are multipliers of the privacy rows of the outputs outside
W; with the restricted finish's duals they are a full set of multipliers for the LP, so
the build carries the weak-duality bound of :mod:`.certificate` like ``block-ipm``'s
(``info["lp"]["dual_bound"]``; :func:`_full_solution`).

**The rounds.** Each round solves the restricted LP by :func:`.ipm.solve_ipm` (all inputs,
the outputs W, every privacy row) to :data:`~.ipm_finish.IPM_TOL` and prices the other
outputs with its (approximate) row duals: the outputs of shortfall above
:data:`ROUND_TOL` (relative) join W, the best first (the greedy and sparse flows only: an output they
leave uncovered counts as improving). When none does, the last interior
point seeds the exact finish of :func:`.ipm_finish.solve_block_ipm` on W (a simplex vertex
of the restricted LP, the ``fast`` formulation's optimum on W) and every output outside W
is priced exactly with the vertex's duals; outputs of shortfall above :data:`PRICE_TOL`
(relative) start another round. Terminates: W only grows (at most n outputs).

**The first working set** (:func:`start_outputs`): the outputs the optimum is likely to
release, those of a cheap mechanism with the same kernel: every output y of the
Laplace-shaped mechanism :math:`M[u,y] \propto e^{-\lambda d(u,y)}` remapped to the output
w of least posterior expected loss, :math:`\arg\min_w \sum_u \pi_u M[u,y] L[u,w]`. On the
10 x 10 grid with its Dirichlet(0.5) prior these targets (5, 24 and 64 outputs at eps 0.1,
0.3 and 1) contain every output the optimum uses (4, 14 and 39).

The vertex returned is the restricted LP's simplex vertex, with the other columns 0: a
vertex of the full LP at its optimum, repaired and audited by the caller as ``fast``'s is.
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from .._progress import Progress, report
from .._resources import check_allocation
from ..errors import ValidationError
from ._solve import solve_lp
from .core import EXTERNAL_FORMULATIONS, LP_OPTIONS, MechanismLP, RawSolution, _base_model
from .deadline import Deadline
from .greedy_cover import greedy_flow
from .ipm import IPMResult, ipm_bytes, solve_ipm
from .ipm_finish import IPM_TOL, solve_block_ipm

__all__ = ["NEAREST_ARCS", "PRICE_TOL", "ROUND_TOL", "Cover", "colgen_bytes", "cover", "covers", "laplace_screen",
           "shortfall", "solve_colgen", "start_outputs"]

#: After the exact finish, an output joins W when its certified shortfall exceeds
#: ``PRICE_TOL * objective / n``: the lower bound of the module docstring is then within
#: ``PRICE_TOL`` relative of the restricted optimum, far inside the 1e-9 the library promises.
PRICE_TOL = 1e-11

#: In the interior-point rounds (approximate duals), an output joins W when its shortfall
#: exceeds ``ROUND_TOL * objective / n``. Outputs missed here are caught by the exact
#: pricing after the finish (at the price of another round), never lost.
ROUND_TOL = 1e-6

#: Arcs per deficit in the first, sparse flow of :func:`covers` (the surpluses of most reach).
NEAREST_ARCS = 8

#: Most arcs of one LP of the exact stage of :func:`covers` (every arc of the columns
#: still undecided): about 100 MB of HiGHS model a chunk.
FULL_ARCS = 1_000_000

#: Most outputs added per round, as a fraction of |W| (at least :data:`ADD_MIN`).
ADD_FRACTION = 0.5
ADD_MIN = 8

Array = NDArray[np.float64]


def colgen_bytes(n: int, outputs: int) -> float:
    """Bytes the method needs for n inputs and a working set of ``outputs`` outputs: the
    interior point on the working set (:func:`.ipm.ipm_bytes`) and a few n x n arrays."""
    return ipm_bytes(n, outputs) + 8.0 * 12 * n * n


class Cover(NamedTuple):
    """A feasible deficit-to-surplus flow for one output (:func:`cover`): ``flow`` on the
    rows (``deficit``, ``surplus``) and what it leaves uncovered (``shortfall``)."""

    shortfall: float
    deficit: NDArray[np.intp]
    surplus: NDArray[np.intp]
    flow: Array


class _Flow(NamedTuple):
    """One output's flow problem: deficits (needs), surpluses (caps), their factors (D, S)."""

    deficit: NDArray[np.intp]
    surplus: NDArray[np.intp]
    need: Array
    cap: Array
    f: Array


def _problem(g: Array, factor: Array, floor: float) -> tuple[_Flow, float]:
    """The flow problem of one output's column g (module docstring), without the deficits
    below ``floor`` (returned as their sum: they stay uncovered, in the shortfall)."""
    deficit, surplus = np.flatnonzero(g < -floor), np.flatnonzero(g > 0)
    left = float(-g[(g < 0) & (g >= -floor)].sum())
    return _Flow(deficit, surplus, -g[deficit], g[surplus], factor[np.ix_(deficit, surplus)]), left


def _arcs(p: _Flow, nearest: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(deficit, surplus) local indices of the arcs: each deficit's ``nearest`` surpluses
    of most capacity per unit shipped (cap / f), or every pair when ``nearest`` is 0 or at
    least the surpluses."""
    nd, ns = p.f.shape
    if 0 < nearest < ns:
        reach = p.cap[None, :] / p.f
        return np.repeat(np.arange(nd), nearest), np.argpartition(-reach, nearest - 1, axis=1)[:, :nearest].ravel()
    kk, vv = np.divmod(np.arange(nd * ns), ns)
    return kk, vv


def _flows(problems: list[_Flow], nearest: int, time_limit: float | None = None) -> list[Cover]:
    """The maximum flows of several outputs in one HiGHS solve (their rows and arcs are
    disjoint blocks), each scaled onto its capacities so that it is feasible in floating
    point; an output whose flow HiGHS does not return (also when ``time_limit`` cuts the
    solve) keeps its whole need as shortfall."""
    arcs = [_arcs(p, nearest) for p in problems]
    sizes = np.array([p.need.size + p.cap.size for p in problems])
    row0 = np.r_[0, np.cumsum(sizes)[:-1]]
    rows = np.concatenate([np.r_[r + kk, r + p.need.size + vv] for p, (kk, vv), r in zip(problems, arcs, row0,
                                                                                           strict=True)])
    counts = np.array([kk.size for kk, _ in arcs])
    col0 = np.r_[0, np.cumsum(counts)[:-1]]
    cols = np.concatenate([np.r_[c + np.arange(kk.size), c + np.arange(kk.size)]
                           for (kk, _), c in zip(arcs, col0, strict=True)])
    fa = [p.f[kk, vv] for p, (kk, vv) in zip(problems, arcs, strict=True)]
    vals = np.concatenate([np.r_[np.ones(f.size), f] for f in fa])
    t = int(counts.sum())
    a = sp.csr_matrix((vals, (rows, cols)), shape=(int(sizes.sum()), t))
    upper = np.concatenate([np.r_[p.need, p.cap] for p in problems])
    result = solve_lp(-np.ones(t), a, -np.inf, upper, 0.0, np.inf, time_limit=time_limit, options=LP_OPTIONS)
    out = []
    for p, (kk, vv), f, c in zip(problems, arcs, fa, col0, strict=True):
        if result.x is None:
            out.append(Cover(float(p.need.sum()), p.deficit[:0], p.surplus[:0], np.zeros(0)))
            continue
        x = fit(kk, vv, result.x[c: c + kk.size], p.need, p.cap, f)
        keep = x > 0
        out.append(Cover(float(max(0.0, p.need.sum() - x.sum())), p.deficit[kk[keep]], p.surplus[vv[keep]],
                         x[keep]))
    return out


def fit(kk: NDArray[np.intp], vv: NDArray[np.intp], x: Array, need: Array, cap: Array, f: Array) -> Array:
    """The flow ``x`` on the arcs (deficit ``kk``, surplus ``vv``) of factors ``f``, clipped at 0
    and scaled down onto the needs and then the capacities, so that it is feasible in floating
    point whatever the accuracy of the solver that found it."""
    x = np.maximum(x, 0.0)
    sent = np.bincount(kk, weights=x, minlength=need.size)
    x *= np.minimum(1.0, need / np.maximum(sent, 1e-300))[kk]
    used = np.bincount(vv, weights=f * x, minlength=cap.size)
    x *= np.minimum(1.0, cap / np.maximum(used, 1e-300))[vv]
    return x


def _greedy_cover(g: Array, factor: Array, order: NDArray[np.intp], floor: float, left: float) -> Cover:
    """The greedy flow of :mod:`.greedy_cover` for one column ``g``, fitted (:func:`fit`), as a
    cover; ``left``: the need of the deficits below ``floor``, counted in the shortfall."""
    kk, vv, t = greedy_flow(g, floor, order, factor)
    need = np.where(g < -floor, -g, 0.0)
    x = fit(kk, vv, t, need, np.maximum(g, 0.0), factor[kk, vv])
    keep = x > 0
    return Cover(float(max(0.0, need.sum() - x.sum())) + left, kk[keep], vv[keep], x[keep])


def covers(g: Array, factor: Array, tol: float = 0.0, nearest: int = NEAREST_ARCS, *,
           exact: bool = True, deadline: Deadline | None = None, what: str = "pricing") -> list[Cover]:
    r"""For every column of ``g`` (n, k), a flow certifying :math:`g + r \in C^*` with
    :math:`\lVert r \rVert_1` = its shortfall (module docstring): 0 iff the column is in
    :math:`C^*`, up to the flow's accuracy.

    First the greedy flow of :mod:`.greedy_cover` for every column (no LP); for the columns
    it leaves with more than ``tol``, on the arcs to each deficit's ``nearest`` surpluses (by
    capacity per unit shipped), all those columns in one LP; for the columns left with more than ``tol``, on 4 and
    then 16 times as many; then (``exact``) on every arc, in LPs of at most
    :data:`FULL_ARCS` arcs. Deficits below ``tol / (2 n)`` are left uncovered (counted in
    the shortfall, at most ``tol / 2`` in all): with a skewed prior most inputs have tiny
    deficits, which would otherwise dominate the flows' size. Any feasible flow's
    shortfall is a valid bound, so a sparse flow is only ever pessimistic (an output
    counted as improving that is not), never wrong.

    ``deadline`` (the build's): every flow LP gets only the time left, and the next one
    raises :class:`~metricdp.errors.SolverTimeLimitError` once it has run out, so the
    exact pricing of a large working set cannot overrun the build's ``time_limit``.
    """
    deadline = Deadline(None) if deadline is None else deadline
    floor = 0.5 * tol / max(g.shape[0], 1)  # deficits below it: at most tol / 2 in all, left uncovered
    split = [_problem(g[:, i], factor, floor) for i in range(g.shape[1])]
    problems, left = [p for p, _ in split], np.array([a for _, a in split])
    order = np.argsort(factor, axis=1, kind="stable")  # row k: the points by increasing f[k, .]
    best = [_greedy_cover(g[:, i], factor, order, floor, a) for i, a in enumerate(left)]
    stages = [nearest, 4 * nearest, 16 * nearest] if nearest > 0 else []
    for k in [*stages, *([0] if exact else [])]:
        todo = [i for i, (p, b) in enumerate(zip(problems, best, strict=True))
                if b.shortfall > tol and p.need.size and p.cap.size]
        if not todo:
            break
        if k == 0:  # every arc: in chunks of at most FULL_ARCS arcs
            sizes = np.array([problems[i].f.size for i in todo])
            chunks = np.split(np.array(todo), np.flatnonzero(np.diff(np.cumsum(sizes) // FULL_ARCS)) + 1)
        else:
            chunks = [np.array(todo)]
        for chunk in chunks:
            limit = deadline.require(what)
            for i, c in zip(chunk, _flows([problems[i] for i in chunk], k, limit), strict=True):
                if c.shortfall + left[i] < best[i].shortfall:
                    best[i] = c._replace(shortfall=c.shortfall + left[i])
    deadline.require(what)  # a flow cut by the limit is no cover: the build stops with the typed error
    return best


def cover(g: Array, factor: Array, tol: float = 0.0, nearest: int = NEAREST_ARCS) -> Cover:
    """:func:`covers` of one column ``g`` (n,)."""
    return covers(g[:, None], factor, tol, nearest)[0]


def shortfall(g: Array, factor: Array) -> float:
    r""":math:`\lVert r \rVert_1 \ge 0` with :math:`g + r \in C^*`, 0 iff :math:`g \in C^*`
    (the exact test of the module docstring; every arc)."""
    return cover(g, factor, nearest=0).shortfall


def laplace_screen(g: Array, kernel: Array) -> Array:
    r""":math:`g_w^\top \ell_w / \mathbf 1^\top \ell_w` for every output w (columns of ``g``):
    negative proves w improving (:math:`\ell_w` = ``kernel[:, w]`` lies in C)."""
    return np.einsum("uw,uw->w", g, kernel) / kernel.sum(axis=0)


def start_outputs(prior: Array, loss: Array, kernel: Array) -> NDArray[np.intp]:
    r"""The first working set (module docstring): the outputs that the Laplace-shaped
    mechanism :math:`M[u,y] \propto` ``kernel[u, y]``, remapped to least posterior expected
    ``loss``, releases. Two matrix products."""
    m = kernel / kernel.sum(axis=1, keepdims=True)
    joint = prior[:, None] * m  # (u, y)
    return np.unique(np.argmin(joint.T @ loss, axis=1)).astype(np.intp)


def _price(g: Array, kernel: Array, factor: Array, tol: float, exact: bool, deadline: Deadline,
           what: str) -> tuple[Array, list[Cover]]:
    """Shortfalls of the outputs whose columns are ``g`` (n, k), and their flows. The
    Laplace screen decides the outputs it proves improving without a flow; ``exact``:
    :func:`covers` tries every arc before it counts an output as improving."""
    screen = laplace_screen(g, kernel)
    found = covers(g[:, screen >= -tol], factor, tol, exact=exact, deadline=deadline, what=f"{what}: pricing")
    it = iter(found)
    out = [Cover(np.inf, np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0)) if screen[i] < -tol
           else next(it) for i in range(g.shape[1])]
    return np.array([c.shortfall for c in out]), out


def _grow(outputs: NDArray[np.intp], candidates: NDArray[np.intp], s: Array, tol: float) -> NDArray[np.intp]:
    """W with the improving candidates (shortfall above ``tol``) added, the largest first."""
    order = np.argsort(-s, kind="stable")[: int((s > tol).sum())]
    add = candidates[order[: max(ADD_MIN, int(ADD_FRACTION * outputs.size))]]
    return np.union1d(outputs, add).astype(np.intp)


def _full_solution(raw: RawSolution, outputs: NDArray[np.intp], n: int, out: NDArray[np.intp],
                   covers: list[Cover]) -> RawSolution:
    """The restricted finish as a solution of the square LP: M with the other columns 0,
    the rows and duals mapped to the square substituted LP's order (for the certificate),
    the flows of the pricing appended as privacy rows of the other outputs (dual -flow:
    HiGHS's sign of a binding upper row)."""
    k = outputs.size
    matrix = np.zeros((n, n))
    matrix[:, outputs] = raw.matrix
    res = raw.result
    u, v, j = raw.rows if raw.rows is not None else (np.zeros(0, np.intp),) * 3
    fu = [c.deficit for c in covers]
    fv = [c.surplus for c in covers]
    fw = [np.full(c.flow.size, w, np.intp) for c, w in zip(covers, out, strict=True)]
    rows = (np.concatenate([u, *fu]), np.concatenate([v, *fv]), np.concatenate([outputs[j], *fw]))
    ux, jx = np.divmod(np.arange(n * k), k)  # restricted X[u, j] -> square X[u, outputs[j]]
    full = ux * n + outputs[jx]

    def widen(a: Array | None) -> Array | None:
        if a is None:
            return None
        wide = np.zeros(n * n)
        wide[full] = np.asarray(a)[: n * k]
        return wide

    row_dual = None if res.row_dual is None else np.r_[np.asarray(res.row_dual)[: n + u.size],
                                                       -np.concatenate([np.zeros(0), *(c.flow for c in covers)])]
    result = dataclasses.replace(res, x=widen(res.x), col_dual=widen(res.col_dual), row_dual=row_dual)
    return RawSolution(matrix, result, raw.rounds, raw.privacy_rows, raw.solve_seconds, raw.iterations, rows)


def solve_colgen(
    model: MechanismLP,
    factor: Array,
    allowed: NDArray[np.bool_],
    distances: Array,
    level: float,
    loss: Array,
    prior: Array | None,
    deadline: Deadline,
    what: str,
    progress: Progress | None = None,
) -> RawSolution:
    r"""The expected-loss LP by output-column generation over the structured interior point
    (module docstring); the same optimum as ``core._solve_fast`` on the allowed pairs. The
    pricing reads every ordered pair's ``factor``: the pairs OPTMech leaves out are implied
    by chains to within :data:`~.pairs.COLLINEAR_TOL` (:func:`~.pairs.implied_pairs`), so the
    cone C is the LP's.
    ``model`` (the square substituted LP) gives the kernel; ``level`` is the LP's
    :math:`\lambda`, carried by ``factor`` and ``model.kernel``. ``rounds`` counts the
    simplex solves of the finishes, ``privacy_rows`` the rows of the last finish."""
    n = distances.shape[0]
    if prior is None or model.anchor is not None or loss.shape != (n, n):
        raise ValidationError("the column-generation formulation needs the expected objective on a square space")
    kernel = model.kernel
    outputs = start_outputs(prior, loss, kernel)
    check_allocation(colgen_bytes(n, outputs.size), f"{what}: column generation for n = {n} "
                                                    f"from {outputs.size} outputs")
    cost = prior[:, None] * loss  # c_w[u] = pi_u L[u, w]
    rounds, seconds, t_price, t0 = 0, 0.0, 0.0, time.perf_counter()  # t_price: CPU seconds
    point: IPMResult | None = None
    while True:
        rounds += 1
        sub = loss[:, outputs]
        if point is None:
            point = solve_ipm(distances, level, allowed, sub, prior, anchor=outputs, tol=IPM_TOL,
                              deadline=deadline, progress=progress, what=what)
            seconds += point.seconds
            out = np.setdiff1d(np.arange(n), outputs)
            objective = point.objective
            tol = ROUND_TOL * abs(objective) / n
            tp = time.process_time()
            s, _ = _price(cost[:, out] + point.row_dual[:, None], kernel[:, out], factor, tol, exact=False,
                          deadline=deadline, what=what)
            t_price += time.process_time() - tp
            grow = bool((s > tol).any())
            report(progress, rounds, None, f"{what}: column round {rounds} (interior point, {point.iterations} "
                   f"iterations): {outputs.size} outputs, objective {objective:.10g}, "
                   f"{int((s > tol).sum())} improving (pricing {t_price:.1f} s CPU, "
                   f"{time.perf_counter() - t0:.1f} s in all), {deadline.describe()}")
            if grow:
                outputs, point = _grow(outputs, out, s, tol), None
                continue
        model_r = _base_model(sub, prior, kernel[:, outputs], outputs)
        raw = solve_block_ipm(model_r, factor, allowed, distances, level, sub, prior, deadline, what, progress,
                              point=point)
        seconds += raw.solve_seconds - point.seconds
        out = np.setdiff1d(np.arange(n), outputs)
        objective = float(raw.result.objective if raw.result.objective is not None else np.nan)
        tol = PRICE_TOL * abs(objective) / n
        tp = time.process_time()
        y = np.asarray(raw.result.row_dual)[:n] if raw.result.row_dual is not None else np.full(n, np.nan)
        s, flows = _price(cost[:, out] - y[:, None], kernel[:, out], factor, tol, exact=True, deadline=deadline,
                          what=what)
        t_price += time.process_time() - tp
        report(progress, rounds, None, f"{what}: column round {rounds} (exact finish, {raw.rounds} simplex "
               f"rounds): {outputs.size} outputs, objective {objective:.12g}, {int((s > tol).sum())} improving, "
               f"pricing gap {_gap(s, objective):.1e} (pricing {t_price:.1f} s CPU, {time.perf_counter() - t0:.1f} s "
               f"in all), {deadline.describe()}")
        if not (s > tol).any():
            full = _full_solution(raw, outputs, n, out, flows)
            return full._replace(rounds=rounds, solve_seconds=seconds)
        outputs, point = _grow(outputs, out, s, tol), None


def _gap(s: Array, objective: float) -> float:
    """The pricing gap: the bound's distance below the restricted optimum, relative."""
    return float(s.sum()) / max(abs(objective), 1e-300)


EXTERNAL_FORMULATIONS["column-generation"] = solve_colgen
