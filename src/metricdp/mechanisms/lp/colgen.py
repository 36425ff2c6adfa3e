r"""Output-column generation for OPTMech's expected loss: the ``column-generation`` formulation.

One concept: solve the expected-loss LP (Bordenabe et al., CCS 2014, Sec. 4) on a
*working set* W of outputs, and add outputs only when an exact pricing test proves they
can lower the objective (issue 37, item 3).

**The structure.** Write :math:`m_w = M[:, w]` and :math:`c_w[u] = \pi_u L[u,w]`. The LP is

.. math::

    \min \sum_w c_w^\top m_w \quad\text{s.t.}\quad \sum_w m_w = \mathbf 1,\quad m_w \in C,
    \qquad C = \{m \ge 0 : m_u \le f_{uv}\, m_v\ \ \forall u \ne v\},

every column in the *same* cone C (:math:`f_{uv} = e^{\min(\lambda d(u,v),\, C_{\log})}`,
the capped factors of ``core.solve_raw``). With a skewed prior the optimum releases few
outputs, so most columns are 0 and a restricted LP on W is small.

**Why the restricted optimum is the full optimum (the pricing test).** Let y be the duals
of the row sums of the restricted LP at its optimum and :math:`g_w = c_w - y`. For any
feasible M of the full LP, :math:`\sum_w c_w^\top m_w = \sum_u y_u + \sum_w g_w^\top m_w`.
If :math:`g_w + s_w \mathbf 1 \in C^*` (the dual cone) with :math:`s_w \ge 0`, then
:math:`g_w^\top m_w \ge -s_w \mathbf 1^\top m_w`, and since the total mass is
:math:`\sum_w \mathbf 1^\top m_w = n`, every feasible M has objective at least
:math:`\sum_u y_u - n \max_w s_w`. That is a certified lower bound on the full optimum,
and :math:`\sum_u y_u` is the restricted optimum (the privacy rows and bounds have right
side 0): when every :math:`s_w = 0` the restricted optimum *is* the full optimum. The
columns of W meet the test by the restricted LP's own dual feasibility.

**The exact test** (:func:`shortfall`). :math:`C = \{m \ge 0 : Am \le 0\}`, so :math:`C^* =
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
:math:`s = \sum_{k \in D} (-g_k) - \text{flow}` gives :math:`g + r \in C^*` for the
residual deficits r (:math:`\sum r = s`), hence :math:`g + s\mathbf 1 \in C^*` (C is in the
orthant, so adding a non-negative vector stays in :math:`C^*`): exactly the :math:`s_w`
above, and :math:`s_w > 0` iff output w can improve the objective. The flow from HiGHS is
scaled down onto its capacities before the shortfall is read, so the certificate holds in
floating point, not only to HiGHS's tolerance. A small LP per output (deficits are the
inputs near w), run only when the cheap screens below decide nothing.

**Cheap screens.** :math:`g_w \ge 0`: no deficit, :math:`s_w = 0`. The Laplace-shaped
column centred at w, :math:`\ell_w[u] = e^{-\min(\lambda d(u,w), C_{\log})}`, lies in C
(the capped distance is a metric); :math:`g_w^\top \ell_w < 0` proves w improving without
an LP (one matrix product for all outputs). A round that finds improving outputs by the
screen adds the best of them and skips the LPs (partial pricing); the exact LPs run only
when the screen finds none, so the last round (the proof) prices every output exactly.

**The restricted LP** is the substituted LP of ``core._solve_fast`` (the rows
(w, v, w) as bounds), held in one HiGHS model: outputs join as new variable blocks
(:meth:`.LPModel.add_cols`, basis kept), privacy rows join by constraint generation over
*every* ordered pair (so the cone C above is the LP's cone, with no implied-pair slack),
:data:`ROWS_PER_INPUT` rows per input and column a round (:func:`worst_rows`), each
re-solve warm. The generation stops only when no row is violated by more than
:data:`~.core.VIOLATION_TOL`, so the restricted optimum is exact as ``core._solve_fast``'s.
Terminates: W only grows (at most n outputs), and each W has finitely many rows.

The vertex returned is the restricted LP's simplex vertex, with the other columns 0: a
vertex of the full LP at its optimum, repaired and audited by the caller as ``fast``'s is.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from ..._progress import Progress, report
from ..._resources import check_allocation
from ...errors import SolverNumericalError, ValidationError
from ._solve import LPModel, SolveResult, require_optimal, solve_lp
from .core import EXTERNAL_FORMULATIONS, LP_OPTIONS, VIOLATION_TOL, WARM_OPTIONS, MechanismLP, RawSolution, _resolve
from .deadline import Deadline

__all__ = ["PRICE_TOL", "colgen_bytes", "laplace_screen", "shortfall", "solve_colgen", "start_outputs"]

#: An output joins W when its certified shortfall exceeds ``PRICE_TOL * objective / n``:
#: then the lower bound of the module docstring is within ``PRICE_TOL`` relative of the
#: restricted optimum, far inside the 1e-9 the library promises.
PRICE_TOL = 1e-11

#: Privacy rows added per input and column a round (those of largest ratio: :func:`worst_rows`).
ROWS_PER_INPUT = 3

#: Size of the first working set, as a fraction of n (:func:`start_outputs`).
START_FRACTION = 0.25

#: Most outputs added per round, as a fraction of |W| (at least :data:`ADD_MIN`).
ADD_FRACTION = 0.5
ADD_MIN = 8


def colgen_bytes(n: int) -> float:
    """Bytes the method needs beyond HiGHS's model (n x n float arrays and the n^3 row mask)."""
    return 8.0 * 12 * n * n + 1.0 * n * n * n


def shortfall(g: NDArray[np.float64], factor: NDArray[np.float64]) -> float:
    r""":math:`s \ge 0` with :math:`g + s\mathbf 1 \in C^*`, 0 iff :math:`g \in C^*` (module docstring).

    The maximum deficit-to-surplus flow by HiGHS, scaled onto its capacities, so the
    returned s is certified in floating point (a tolerance of the solver can only make it
    larger).
    """
    deficit = np.flatnonzero(g < 0)
    if deficit.size == 0:
        return 0.0
    need = -g[deficit]
    surplus = np.flatnonzero(g > 0)
    if surplus.size == 0:
        return float(need.sum())
    nd, ns = deficit.size, surplus.size
    f = factor[np.ix_(deficit, surplus)]  # (D, S)
    k = np.arange(nd * ns)
    rows = np.r_[k // ns, nd + k % ns]
    a = sp.csr_matrix((np.r_[np.ones(nd * ns), f.ravel()], (rows, np.r_[k, k])), shape=(nd + ns, nd * ns))
    result = solve_lp(-np.ones(nd * ns), a, -np.inf, np.r_[need, g[surplus]], 0.0, np.inf, options=LP_OPTIONS)
    if result.x is None:  # numerical trouble: no certificate, so the output counts as improving
        return float(need.sum())
    t = np.maximum(result.x.reshape(nd, ns), 0.0)
    t *= np.minimum(1.0, need / np.maximum(t.sum(axis=1), 1e-300))[:, None]
    used = (f * t).sum(axis=0)
    t *= np.minimum(1.0, g[surplus] / np.maximum(used, 1e-300))[None, :]
    return float(max(0.0, need.sum() - t.sum()))


def laplace_screen(g: NDArray[np.float64], kernel: NDArray[np.float64]) -> NDArray[np.float64]:
    r""":math:`g_w^\top \ell_w / \mathbf 1^\top \ell_w` for every output w (columns of ``g``):
    negative proves w improving (:math:`\ell_w` = ``kernel[:, w]`` lies in C)."""
    return np.einsum("uw,uw->w", g, kernel) / kernel.sum(axis=0)


def worst_rows(p: NDArray[np.float64], factor: NDArray[np.float64], log_factor: NDArray[np.float64],
               in_model: list[NDArray[np.bool_]]) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    r"""(u, v, j): for every input u and column j of ``p``, of the privacy rows (u, v) not in
    the model (``in_model[j]``) and violated by more than :data:`~.core.VIOLATION_TOL`
    (absolute, in probability, as ``core._violated``), the one of largest log-ratio
    :math:`\log p_{uj} - \log p_{vj} - \log f_{uv}`; marks them in ``in_model``.

    One row per (u, j) a round instead of every violated row: the rows of a column's
    cone that bind are few (about one per input), and the row of largest ratio implies
    the others along its chain. A (u, j) with any violated row gets one, so the
    generation stops only when no row is violated (exact as ``core._solve_fast``).
    Vectorised per column (an n x n pass each).
    """
    n, k = p.shape
    logp = np.log(np.maximum(p, 1e-300))
    us, vs, js = [], [], []
    u = np.arange(n)
    for j in range(k):
        hit = (p[:, j][:, None] - factor * p[:, j][None, :] > VIOLATION_TOL) & ~in_model[j]
        rows = np.flatnonzero(hit.any(axis=1))
        if rows.size == 0:
            continue
        ratio = np.where(hit[rows], logp[rows, j][:, None] - logp[:, j][None, :] - log_factor[rows], -np.inf)
        top = min(ROWS_PER_INPUT, n - 1)
        v = np.argpartition(-ratio, top - 1, axis=1)[:, :top]  # (rows, top)
        ok = np.isfinite(np.take_along_axis(ratio, v, axis=1))
        uu = np.broadcast_to(u[rows][:, None], v.shape)[ok]
        v = v[ok]
        in_model[j][uu, v] = True
        us.append(uu)
        vs.append(v)
        js.append(np.full(uu.size, j))
    if not us:
        return (np.zeros(0, np.intp),) * 3
    return np.concatenate(us), np.concatenate(vs), np.concatenate(js)


def start_outputs(prior: NDArray[np.float64], distances: NDArray[np.float64], size: int) -> NDArray[np.intp]:
    """A first working set: ``size`` outputs by a greedy k-median on the prior (each next
    output the one that lowers :math:`\\sum_u \\pi_u \\min_{w \\in W} d(u, w)` most),
    which is where the optimum of a small eps puts its mass. Vectorised per pick."""
    n = prior.shape[0]
    size = max(1, min(size, n))
    near = np.full(n, np.inf)
    chosen: list[int] = []
    for _ in range(size):
        cost = (prior[:, None] * np.minimum(near[:, None], distances)).sum(axis=0)
        cost[chosen] = np.inf
        w = int(np.argmin(cost))
        chosen.append(w)
        near = np.minimum(near, distances[:, w])
    return np.array(sorted(chosen), dtype=np.intp)


class _Restricted:
    """The restricted LP in one HiGHS model: variable block j holds X[:, W[j]] (n entries)."""

    def __init__(self, n: int, cost: NDArray[np.float64], kernel: NDArray[np.float64],
                 factor: NDArray[np.float64]) -> None:
        self.n, self.cost, self.kernel, self.factor = n, cost, kernel, factor
        self.outputs: list[int] = []
        self.lp = LPModel(options=LP_OPTIONS)

    def block(self, w: int) -> tuple[NDArray[np.float64], sp.csc_matrix]:
        """Costs and row-sum entries of output w's variables X[u, w] (u = 0..n-1)."""
        n, k = self.n, self.kernel
        c = self.cost[:, w].copy()  # pi_u L[u, w] on X[u, w], u != w
        c[w] = float(self.cost[:, w] @ k[:, w])  # X[w, w] enters every M[u, w] with K[u, w]
        rows = np.r_[np.arange(n), np.delete(np.arange(n), w)]
        cols = np.r_[np.full(n, w), np.delete(np.arange(n), w)]
        vals = np.r_[k[:, w], np.ones(n - 1)]
        return c, sp.csc_matrix((vals, (rows, cols)), shape=(n, n))

    def load(self, outputs: NDArray[np.intp], time_limit: float | None) -> SolveResult:
        blocks = [self.block(int(w)) for w in outputs]
        self.outputs = [int(w) for w in outputs]
        a = sp.hstack([b[1] for b in blocks], format="csr")
        return self.lp.load(np.concatenate([b[0] for b in blocks]), a, 1.0, 1.0, 0.0, np.inf,
                            time_limit=time_limit)

    def add_outputs(self, outputs: NDArray[np.intp]) -> None:
        blocks = [self.block(int(w)) for w in outputs]
        extra = self.lp.num_rows - self.n  # privacy rows: the new variables are 0 in them
        a = sp.vstack([sp.hstack([b[1] for b in blocks]), sp.csc_matrix((extra, self.n * len(blocks)))], format="csc")
        self.lp.add_cols(np.concatenate([b[0] for b in blocks]), 0.0, np.inf, a)
        self.outputs += [int(w) for w in outputs]

    def matrix(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """M[:, W] (n, |W|) from the variables."""
        n, w = self.n, np.array(self.outputs)
        xm = x.reshape(len(w), n).T  # xm[u, j] = X[u, W[j]]
        diag = xm[w, np.arange(len(w))]
        m = self.kernel[:, w] * diag[None, :] + xm
        m[w, np.arange(len(w))] = diag
        return m

    def privacy_rows(self, u: NDArray[np.intp], v: NDArray[np.intp], j: NDArray[np.intp]) -> sp.csr_matrix:
        r"""Rows :math:`M[u,w] - f_{uv} M[v,w] \le 0`, w = W[j], u != w (``core._privacy_rows``'s
        coefficients in this model's variable order)."""
        n, k, t = self.n, self.kernel, len(u)
        w = np.array(self.outputs)[j]
        fu = self.factor[u, v]
        idx = np.arange(t)
        mv = v != w
        return sp.csr_matrix(
            (np.r_[k[u, w] - fu * k[v, w], np.ones(t), -fu[mv]],
             (np.r_[idx, idx, idx[mv]], np.r_[j * n + w, j * n + u, (j * n + v)[mv]])),
            shape=(t, len(self.outputs) * n),
        )


def solve_colgen(
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
) -> RawSolution:
    r"""The expected-loss LP by output-column generation (module docstring); the same
    optimum as ``core._solve_fast`` on every ordered pair. ``model`` gives the substitution
    kernel; ``allowed`` is widened to every ordered pair (the pricing's cone).
    ``level`` (the LP's :math:`\lambda`) is carried by ``factor`` and ``model.kernel``.
    ``rounds`` counts the simplex solves, ``privacy_rows`` the rows of the final model."""
    n = distances.shape[0]
    if prior is None or model.anchor is not None or loss.shape != (n, n):
        raise ValidationError("the column-generation formulation needs the expected objective on a square space")
    check_allocation(colgen_bytes(n), f"{what}: column generation for n = {n}")
    kernel = model.kernel
    cost = prior[:, None] * loss  # c_w[u] = pi_u L[u, w]
    log_factor = np.log(factor)
    rows_of = np.eye(n, dtype=bool)  # rows (w, v, w) of output w are bounds
    tol_scale = PRICE_TOL / n
    master = _Restricted(n, cost, kernel, factor)
    start = start_outputs(prior, distances, max(ADD_MIN, int(np.ceil(START_FRACTION * n))))
    result = master.load(start, deadline.require(what))
    x = require_optimal(result, what)
    master.lp.set_options(WARM_OPTIONS)
    in_model = [rows_of[:, w][:, None] & np.ones(n, dtype=bool)[None, :] for w in start]
    rounds, rows, seconds, its, priced = 1, 0, result.seconds, result.iterations, 0
    t_price = 0.0
    while True:
        p = master.matrix(x)
        ru, rv, rj = worst_rows(p, factor, log_factor, in_model)
        objective = float(result.objective if result.objective is not None else np.nan)
        if len(ru) == 0:  # restricted LP converged: price the outputs outside W
            t0 = time.perf_counter()
            row_dual = result.row_dual
            if row_dual is None:  # status 0 always carries duals
                raise SolverNumericalError(f"{what}: the restricted LP returned no duals", status="no duals")
            y = np.asarray(row_dual[:n])  # HiGHS: sum_u y_u = objective (c = A^T y + reduced costs)
            out = np.setdiff1d(np.arange(n), master.outputs)
            g = cost[:, out] - y[:, None]
            screen = laplace_screen(g, kernel[:, out])
            tol = tol_scale * abs(objective)
            better = screen < -tol
            bound = None
            if better.any():
                order = np.argsort(screen)[: int(better.sum())]
            else:
                s = np.array([shortfall(g[:, i], factor) for i in range(out.size)])
                priced += out.size
                bound = objective - n * float(s.max(initial=0.0))
                order = np.argsort(-s)[: int((s > tol).sum())]
            t_price += time.perf_counter() - t0
            report(progress, rounds, None, f"{what}: column round {rounds}: {len(master.outputs)} outputs, "
                   f"{rows:,} privacy rows, objective {objective:.12g}"
                   + (f", bound {bound:.12g}" if bound is not None else "")
                   + f", {order.size} improving (pricing {t_price:.1f} s, {priced} exact; simplex {seconds:.1f} s), "
                   f"{deadline.describe()}")
            if order.size == 0:
                w_all = np.array(master.outputs)
                full = np.zeros((n, n))
                full[:, w_all] = p
                return RawSolution(full, result, rounds, rows, seconds, its)
            add = out[order[: max(ADD_MIN, int(ADD_FRACTION * len(master.outputs)))]]
            master.add_outputs(add)
            in_model += [rows_of[:, w][:, None] & np.ones(n, dtype=bool)[None, :] for w in add]
        else:
            report(progress, rounds, None, f"{what}: row round {rounds}: {len(master.outputs)} outputs, {rows:,} "
                   f"privacy rows, objective {objective:.12g}, {len(ru):,} violated, {deadline.describe()}")
            master.lp.add_rows(master.privacy_rows(ru, rv, rj), -np.inf, 0.0)
            rows += len(ru)
        result = _resolve(master.lp, deadline, what, result)
        x = require_optimal(result, what)
        rounds, seconds, its = rounds + 1, seconds + result.seconds, its + result.iterations


EXTERNAL_FORMULATIONS["column-generation"] = solve_colgen
