r"""The exact finish of the structured interior-point method: the ``block-ipm`` formulation.

One concept: turn the interior point of :mod:`.ipm` into the same exact LP vertex that
constraint generation (``core._solve_fast``) returns, so that the repair, the audit and
every caller see no difference but time.

**Why not return the interior point.** An interior point meets the rows only to the
method's tolerance, is not a vertex, and its objective is certified only by its own
duality gap. The library's contract (the LP optimum to the simplex's tolerance, then the
repair proven at eps) is kept by finishing with the simplex.

**The finish** (:func:`solve_block_ipm`). The interior point tells which privacy rows
bind: at an optimal interior point with complementarity :math:`\mu`, a binding row has
slack :math:`s \approx \mu / z`, far below the slack of a non-binding one. The rows with
*relative* slack :math:`s_{uvw} / M[v,w] \le` :data:`SEED_SLACK` (scaled rows: the
relative slack is :math:`1 - e^{-\lambda d(u,v)} M[u,w]/M[v,w]`, the distance of the
pair's ratio from its bound), and for each input u and output w the :data:`SEED_TOP`
rows (u, v, w) of largest dual, seed the substituted LP of ``core._solve_fast`` (its
variables, its capped factors, the rows (a(w), v, w) as bounds). That LP is solved by the
dual simplex; then, as in constraint generation, every row still violated by more than
:data:`~.core.VIOLATION_TOL` is added and the LP re-solved warm, until none is.

Why the rows of largest dual: an output that the optimum leaves (almost) empty is kept
empty by the duals of its privacy rows. The interior point converges to the centre of the
dual optimal face, which spreads that certificate over every row of the column, so no row
of such a column looks near-active by its slack, and the generation then adds them
thousands at a time (79 rounds on the 8 x 8 grid). A basic certificate needs few rows per
(input, output); the largest duals are where the central one puts its weight.

The result is optimal for the full LP by the constraint-generation argument
(``core._solve_fast``): the seeds change only where the generation starts, never where
it stops, so a poor seed costs rounds, never correctness.

**The exponent cap.** The interior point solves the uncapped, scaled LP; the simplex
finish solves the same LP as ``fast``, whose factors are capped at
:data:`~._solve.LOG_CAP` (``core.solve_raw``). So the returned vertex is ``fast``'s optimum,
the capped one where :math:`\lambda d > 20` for some pair; solving that regime in scaled
form to the end needs the simplex to take scaled rows too (:mod:`.polish` does that after it,
on square spaces).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from .._progress import Progress, report
from ._solve import LPModel, require_optimal
from .core import (
    EXTERNAL_FORMULATIONS,
    LP_OPTIONS,
    WARM_OPTIONS,
    MechanismLP,
    RawSolution,
    _privacy_rows,
    _resolve,
    _violated,
)
from .deadline import Deadline
from .ipm import IPMResult, solve_ipm

__all__ = ["IPM_TOL", "SEED_SLACK", "SEED_TOP", "seed_rows", "solve_block_ipm"]

#: Relative slack below which a privacy row of the interior point seeds the simplex.
#: On the 6 x 6 grid (eps 0.3, Dirichlet(0.5) prior, interior point at 1e-8) the 258 rows
#: binding at the simplex's vertex in used columns all have relative slack <= 1e-2 (599
#: rows selected; 1e-4 missed 2 of them).
SEED_SLACK = 1e-2

#: Rows (u, ., w) of largest dual seeded per input u and output w: the certificates of the
#: outputs the optimum leaves (almost) empty (module docstring). Without them the simplex
#: needs tens of rounds and most of the rows on an 8 x 8 or 10 x 10 grid; one per (u, w)
#: finishes in a few rounds, two seed more rows and cost more simplex time than they save.
SEED_TOP = 1

#: Options of the re-solves after the first solve of the seeded LP (that one is HiGHS's
#: interior point with crossover, faster than the dual simplex on a large seeded LP): the
#: dual simplex, warm from the crossover's basis.
RESOLVE_OPTIONS = {"solver": "simplex", "simplex_strategy": 1}

#: Tolerance of the interior-point method before the finish (relative gap and residuals):
#: the seeds need the binding rows told apart, not the optimum's digits (the simplex
#: gives those). A looser gap (1e-2) leaves the simplex more rounds and rows to do; a
#: tighter one (1e-6) buys no fewer rounds. With the compiled passes (:mod:`._ipm_kernels`)
#: an iteration is cheap against a simplex round, so 3e-4, a little tighter than 1e-3, gives
#: the fastest whole builds, and 1e-4 no faster (benchmarks/RESULTS.md).
IPM_TOL = 3e-4


def seed_rows(point: IPMResult, pu: NDArray[np.intp], pv: NDArray[np.intp]) -> NDArray[np.bool_]:
    """(allowed pair, w): the rows that seed the simplex (see the module docstring).

    Row (u, v, w) is a seed when its relative slack at ``point`` is at most
    :data:`SEED_SLACK`, or when it is among the :data:`SEED_TOP` rows (u, ., w) of
    largest dual (ties and rows left out of the interior point's LP, dual 0, excluded).
    """
    m = point.matrix
    n = m.shape[0]
    rel = point.slack[:, pu, pv] / np.maximum(m.T[:, pv], 1e-300)  # (w, pair)
    seeds = rel <= SEED_SLACK
    index = np.full((n, n), -1, dtype=np.intp)
    index[pu, pv] = np.arange(len(pu))
    z = point.dual  # [w, u, v]
    top = min(SEED_TOP, n - 1)
    if top > 0:
        v = np.argpartition(-z, top - 1, axis=2)[:, :, :top]  # (w, u, top)
        u = np.arange(n)[None, :, None]
        k = index[u, v]
        ok = (k >= 0) & (np.take_along_axis(z, v, axis=2) > 0)
        seeds[np.nonzero(ok)[0], k[ok]] = True
    return np.ascontiguousarray(seeds.T)


def solve_block_ipm(
    model: MechanismLP,
    factor: NDArray[np.float64],
    allowed: NDArray[np.bool_],
    distances: NDArray[np.float64],
    level: float,
    loss: NDArray[np.float64],
    prior: NDArray[np.float64] | None,
    deadline: Deadline,
    what: str,
    progress: Progress | None = None,
    point: IPMResult | None = None,
) -> RawSolution:
    r"""The structured interior point (:func:`.ipm.solve_ipm` at ``level``; ``point``: one
    already solved to :data:`IPM_TOL` on this LP, e.g. by :mod:`.colgen`), then the
    seeded constraint generation on ``model`` (the substituted LP with the capped
    ``factor``; see the module docstring). Returns the simplex's vertex, as
    ``core._solve_fast`` does; ``rounds`` counts the simplex solves after the interior
    point and ``privacy_rows`` the rows in the final model."""
    if point is None:
        point = solve_ipm(distances, level, allowed, loss, prior, anchor=model.anchor, tol=IPM_TOL,
                          deadline=deadline, progress=progress, what=what)
    pu, pv = np.nonzero(allowed)
    in_model = pu[:, None] == model.anchors[None, :]  # rows (a(w), v, w) are bounds
    seeds = seed_rows(point, pu, pv) & ~in_model
    k, w = np.nonzero(seeds)
    in_model |= seeds
    a = sp.vstack([model.base, _privacy_rows(pu[k], pv[k], w, factor, model)], format="csr")
    lower = np.r_[model.lower, np.full(len(k), -np.inf)]
    upper = np.r_[model.upper, np.zeros(len(k))]
    report(progress, 0, None, f"{what}: interior point done ({point.iterations} iterations, objective "
           f"{point.objective:.10g}); simplex on {len(k):,} seeded privacy rows, {deadline.describe()}")
    lp = LPModel(method="ipm", options=LP_OPTIONS)  # HiGHS's interior point + crossover: a vertex
    result = lp.load(model.c, a, lower, upper, 0.0, np.inf, time_limit=deadline.require(what))
    x = require_optimal(result, what)
    lp.set_options({**RESOLVE_OPTIONS, **WARM_OPTIONS})  # re-solves: dual simplex from that basis
    rounds, rows, seconds, its = 1, len(k), point.seconds + result.seconds, result.iterations
    order = [(pu[k], pv[k], w)]  # the privacy rows in the model's order
    while True:
        p = model.matrix(x)
        kk, ww = _violated(p, factor, pu, pv, in_model)
        report(progress, rounds, None, f"{what}: simplex round {rounds}: {rows:,} privacy rows, objective "
               f"{result.objective:.10g}, {len(kk):,} violated, {deadline.describe()}")
        if len(kk) == 0:
            triples = (np.concatenate([o[0] for o in order]), np.concatenate([o[1] for o in order]),
                       np.concatenate([o[2] for o in order]))
            return RawSolution(p, result, rounds, rows, seconds, its, triples)
        order.append((pu[kk], pv[kk], ww))
        in_model[kk, ww] = True
        lp.add_rows(_privacy_rows(pu[kk], pv[kk], ww, factor, model), -np.inf, 0.0)
        result = _resolve(lp, deadline, what, result)
        x = require_optimal(result, what)
        rounds, rows, seconds, its = rounds + 1, rows + len(kk), seconds + result.seconds, its + result.iterations


EXTERNAL_FORMULATIONS["block-ipm"] = solve_block_ipm
