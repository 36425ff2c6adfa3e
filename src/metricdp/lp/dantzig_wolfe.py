r"""Dantzig--Wolfe decomposition of OPTMech's expected-loss LP over its outputs: the ``dantzig-wolfe`` formulation.

One concept: the expected-loss LP (Bordenabe et al., CCS 2014, Sec. 4) is block-angular, one
block per output, linked only by the row sums; the decomposition keeps the links in a small
*master* LP and solves each block as a *pricing* problem of n variables.

**The structure** (as in :mod:`.colgen`). Write :math:`m_w = M[:, w]`,
:math:`c_w[u] = \pi_u L[u,w]`:

.. math::

    \min \sum_w c_w^\top m_w \quad\text{s.t.}\quad \sum_w m_w = \mathbf 1,\quad m_w \in C,
    \qquad C = \{m \ge 0 : m_u \le f_{uv}\, m_v\ \ \forall u \ne v\},

with :math:`f_{uv} = e^{\min(\lambda d(u,v),\, C_{\log})}`, the capped factors of
``core.solve_raw``. Every block has the *same* cone C; only its cost differs.

**The master** (Dantzig and Wolfe 1960). C is a cone, so each :math:`m_w` is a non-negative
combination of vectors of :math:`C \cap [0, 1]^n` (*rays*). Over a set J of columns
:math:`j = (w_j, r_j)`, :math:`r_j \in C \cap [0,1]^n`, the restricted master

.. math::

    \min_{\lambda \ge 0} \sum_j (c_{w_j}^\top r_j)\,\lambda_j \quad\text{s.t.}\quad
    \sum_j \lambda_j r_j = \mathbf 1

has n rows. Any feasible :math:`\lambda` gives a feasible M, :math:`m_w = \sum_{j: w_j = w}
\lambda_j r_j \in C`, of the same objective: the master's optimum bounds the LP's from
above. J starts with the uniform ray :math:`\mathbf 1` and the Laplace-shaped ray
:math:`e^{-\lambda d(\cdot, w)}` (capped: a capped metric is a metric, so it lies in C) of
every output; the uniform rays make the first master feasible.

**The bound** (Lagrangian; the dual view is Benders' decomposition of the same LP, Benders
1962, which Qiu 2024 applies to this LP over a partition of the secret set). For any
:math:`y \in \mathbb R^n` and :math:`g_w = c_w - y`, every feasible M has
:math:`\sum_w c_w^\top m_w = \sum_u y_u + \sum_w g_w^\top m_w \ge \sum_u y_u + \sum_w v_w(y)`,
:math:`v_w(y) = \min \{ g_w^\top m : m \in C \cap [0,1]^n \}` (entries of M are at most 1).
So :math:`LB(y) = \sum_u y_u + \sum_w v_w(y)` bounds the optimum from below for every y, and
any *relaxation* of the pricing problem (fewer rows: a smaller minimum) keeps it a bound.

**The pricing problem** (:func:`price`). With :math:`D = \{g < 0\}` and :math:`S = \{g > 0\}`,
the pricing LP on the variables of D and S with only the rows
:math:`m_k \le f_{kv} m_v` (k in D, v in S) is a relaxation of :math:`v_w` (it is the LP dual
of :mod:`.colgen`'s flow, which ships deficits to surpluses directly, and has its value).
Its solution is lifted into C by the *closure*

.. math::

    \tilde m_u = \min\bigl(1, \min_{v \in S} f_{uv} m_v\bigr)
    \quad (\tilde m = \mathbf 1 \text{ when } S = \emptyset),

a minimum of vectors of C (:math:`u \mapsto f_{uv}` is in C by the triangle inequality of
:math:`\log f`, and so is :math:`\mathbf 1`), hence in C. On S, :math:`\tilde m_v \le m_v`
(take v itself); on D, :math:`\tilde m_k \ge m_k` wherever the relaxation holds every row
(k, v), so :math:`g^\top \tilde m \le g^\top m`: with every (k, v) row the closure of an
optimal relaxed solution is an optimal ray. With fewer rows (the sparse stages: each deficit's
:data:`ARCS` surpluses of most reach, as :func:`.colgen.covers` does) the relaxed value is still
a valid bound and the closure a valid ray, only perhaps not the best one; a stage that finds
no improving ray is followed by the next, denser one, and the last has every row.

**Stabilisation** (Wentges 1997). Plain column generation oscillates: the master's duals jump
and most rays priced at them are useless (the "tailing-off" effect). The pricing is done at
:math:`\alpha \hat y + (1 - \alpha) y`, between the master's duals y and the duals
:math:`\hat y` of the best bound so far (:data:`SMOOTHING`); where that finds no improving
ray it is done again at y. The master's optimum and the best bound close in from both sides;
the method stops when they are within :data:`GAP_TOL` (relative).

**The certificate.** The last master's matrix is returned (repaired and audited by the
caller, as every formulation's). Its dual certificate: the cone-cover flows of
:func:`.colgen.covers` at :math:`\hat y` for every output, with :math:`\hat y` on the row
sums, form a full set of multipliers of the LP (as :mod:`.colgen`'s ``_full_solution``), so
the build carries the weak-duality bound of :mod:`.certificate` (``info["lp"]["dual_bound"]``).

References
----------
G. B. Dantzig, P. Wolfe. Decomposition principle for linear programs. Operations Research
8(1), 1960. J. F. Benders. Partitioning procedures for solving mixed-variables programming
problems. Numerische Mathematik 4, 1962. P. Wentges. Weighted Dantzig-Wolfe decomposition for
linear mixed-integer programming. International Transactions in Operational Research 4(2),
1997. C. Qiu. Enhancing scalability of metric differential privacy via secret dataset
partitioning and Benders decomposition. IJCAI 2024 (arXiv:2405.04344).
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from .._progress import Progress, report
from ..errors import ValidationError
from ._solve import LPModel, require_optimal, solve_lp
from .colgen import FULL_ARCS, Cover, covers
from .core import EXTERNAL_FORMULATIONS, FULL_OPTIONS, LP_OPTIONS, MechanismLP, RawSolution
from .deadline import Deadline

__all__ = ["ARCS", "GAP_TOL", "SMOOTHING", "Pricing", "closure", "dantzig_wolfe_bytes", "price", "solve_dantzig_wolfe"]

Array = NDArray[np.float64]

#: The method stops when the master's optimum is within ``GAP_TOL`` (relative) of the best
#: Lagrangian bound: a hundredth of the 1e-9 the library promises, for the certificate's own
#: rounding to spare.
GAP_TOL = 1e-11

#: Wentges' weight of the best-bound duals in the pricing point (module docstring). 0.5:
#: on a 6 x 6 grid (eps 0.3 per cell, Dirichlet(0.5) prior) 106 master solves against 151
#: unstabilised; 0.8 needed 150.
SMOOTHING = 0.5

#: A ray enters the master only if its reduced cost is below ``-ENTER_TOL`` times the sum of
#: the absolute values of its terms (:func:`_entering`): the master's dual feasibility
#: tolerance (:data:`~.core.FULL_OPTIONS`, 1e-10) with a margin.
ENTER_TOL = 1e-9

#: Surpluses per deficit in the sparse pricing stages (then 4 times as many, then all).
ARCS = 8

#: Most master solves (a safety net: each adds at least one improving column, so the method
#: terminates, but the deadline is the real limit).
MAX_ROUNDS = 100_000


def dantzig_wolfe_bytes(n: int) -> float:
    """Bytes the method needs for n points (estimate): a pricing LP of at most
    :data:`~.colgen.FULL_ARCS` rows (about 100 bytes each), the master's dense columns (the
    first 2 n and as many again added), and a few n x n arrays."""
    return 100.0 * FULL_ARCS + 8.0 * 4 * n * n + 8.0 * 12 * n * n


class Pricing(NamedTuple):
    """The pricing of some outputs at one dual vector (:func:`price`): ``bound`` a valid lower
    bound of each :math:`v_w`, ``rays`` (n, k) the closures, ``value`` :math:`g_w^\\top \\tilde m_w`."""

    bound: Array
    value: Array
    rays: Array


def closure(m_s: Array, surplus: NDArray[np.intp], factor: Array) -> Array:
    r""":math:`\tilde m_u = \min(1, \min_{v \in S} f_{uv} m_v)`: a vector of :math:`C \cap [0,1]^n`
    (module docstring); all ones when S is empty."""
    if surplus.size == 0:
        return np.ones(factor.shape[0])
    return np.minimum(1.0, (factor[:, surplus] * m_s[None, :]).min(axis=1))


def _arcs(g: Array, deficit: NDArray[np.intp], surplus: NDArray[np.intp], factor: Array,
          arcs: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Local (deficit, surplus) indices of the rows of one output's relaxed pricing LP: each
    deficit's ``arcs`` surpluses of most reach (surplus over factor), or every pair (0)."""
    nd, ns = deficit.size, surplus.size
    if 0 < arcs < ns:
        reach = g[surplus][None, :] / factor[np.ix_(deficit, surplus)]
        return np.repeat(np.arange(nd), arcs), np.argpartition(-reach, arcs - 1, axis=1)[:, :arcs].ravel()
    kk, vv = np.divmod(np.arange(nd * ns), ns)
    return kk, vv


def price(g: Array, factor: Array, arcs: int = 0, deadline: Deadline | None = None,
          what: str = "dantzig-wolfe") -> Pricing:
    r"""Price the columns of ``g`` (n, k): for each, a valid lower bound of
    :math:`\min\{g^\top m : m \in C \cap [0,1]^n\}` and the closure of the relaxed optimum
    (module docstring), the relaxed LPs of many columns in one HiGHS solve (disjoint blocks,
    at most :data:`~.colgen.FULL_ARCS` rows a solve).
    ``arcs``: surpluses per deficit (0: every deficit-surplus row, the exact value).
    ``deadline``: each solve gets the time left (on expiry the typed error of
    :func:`~._solve.require_optimal`).

    Examples
    --------
    Two points with :math:`f = e` between them and :math:`g = (-1, 2)`: the ray
    :math:`(1, 1/e)` costs :math:`2/e - 1`; with :math:`g = (-1, 3)` no ray improves (0).

    >>> import numpy as np
    >>> f = np.array([[1.0, np.e], [np.e, 1.0]])
    >>> p = price(np.array([[-1.0, -1.0], [2.0, 3.0]]), f)
    >>> np.round(p.value, 9).tolist(), np.round(p.rays[:, 0], 9).tolist()
    ([-0.264241118, 0.0], [1.0, 0.367879441])
    """
    neg, pos = (g < 0).sum(axis=0), (g > 0).sum(axis=0)
    rows = neg * (pos if arcs == 0 else np.minimum(pos, arcs))
    chunks = np.split(np.arange(g.shape[1]), np.flatnonzero(np.diff(np.cumsum(rows) // FULL_ARCS)) + 1)
    clock = Deadline.of(deadline)
    parts = [_price_chunk(g[:, c], factor, arcs, clock, what) for c in chunks if c.size]
    if not parts:
        return Pricing(np.zeros(0), np.zeros(0), np.zeros((g.shape[0], 0)))
    return Pricing(np.concatenate([p.bound for p in parts]), np.concatenate([p.value for p in parts]),
                   np.hstack([p.rays for p in parts]))


def _price_chunk(g: Array, factor: Array, arcs: int, deadline: Deadline, what: str) -> Pricing:
    """:func:`price` of the columns of ``g`` in one HiGHS solve."""
    n, k = g.shape
    blocks = []
    rows, cols, vals, costs = [], [], [], []
    nvar = nrow = 0
    for i in range(k):
        deficit, surplus = np.flatnonzero(g[:, i] < 0), np.flatnonzero(g[:, i] > 0)
        blocks.append((deficit, surplus, nvar))
        if deficit.size == 0:
            continue
        if surplus.size:
            kk, vv = _arcs(g[:, i], deficit, surplus, factor, arcs)
            r = nrow + np.arange(kk.size)
            rows += [r, r]
            cols += [nvar + kk, nvar + deficit.size + vv]
            vals += [np.ones(kk.size), -factor[deficit[kk], surplus[vv]]]
            nrow += kk.size
        costs.append(np.r_[g[deficit, i], g[surplus, i]])
        nvar += deficit.size + surplus.size
    bound, value, rays = np.zeros(k), np.zeros(k), np.zeros((n, k))
    if nvar == 0:
        return Pricing(bound, value, rays)
    a = sp.csr_matrix((np.concatenate(vals) if vals else np.zeros(0),
                       (np.concatenate(rows) if rows else np.zeros(0, np.intp),
                        np.concatenate(cols) if cols else np.zeros(0, np.intp))), shape=(nrow, nvar))
    result = solve_lp(np.concatenate(costs), a, -np.inf, 0.0, 0.0, 1.0, options=LP_OPTIONS,
                      time_limit=deadline.require(f"{what}: decomposition pricing"))
    x = require_optimal(result, f"{what}: decomposition pricing")
    # a bound of each block's relaxed minimum valid whatever HiGHS's accuracy: weak duality
    # with the row duals clipped to their sign, reduced costs charged at the box [0, 1]
    z = np.minimum(np.asarray(result.row_dual, dtype=np.float64), 0.0)
    reduced = np.concatenate(costs) - a.T @ z
    low = np.minimum(reduced, 0.0)  # a variable in [0, 1] contributes at least min(r, 0)
    var_block = np.zeros(nvar, np.intp)
    for i, (deficit, surplus, start) in enumerate(blocks):
        if deficit.size:  # a block without deficits has no variables (its minimum is 0)
            var_block[start: start + deficit.size + surplus.size] = i
    # rows have right-hand side 0, so the bound is the sum of the clipped reduced costs
    bound = np.bincount(var_block, weights=low, minlength=k).astype(np.float64)
    for i, (deficit, surplus, start) in enumerate(blocks):
        if deficit.size == 0:
            continue
        m_s = np.clip(x[start + deficit.size: start + deficit.size + surplus.size], 0.0, 1.0)
        ray = closure(m_s, surplus, factor)
        rays[:, i] = ray
        value[i] = float(g[:, i] @ ray)
    return Pricing(bound, value, rays)


class _Master:
    """The restricted master LP: n row sums, one column per (output, ray)."""

    def __init__(self, cost: Array, rays: Array, outputs: NDArray[np.intp], deadline: Deadline, what: str):
        self.cost_matrix = cost  # c_w[u] = pi_u L[u, w], (n, m)
        self.rays: list[Array] = [rays]
        self.outputs: list[NDArray[np.intp]] = [outputs]
        self.lp = LPModel(options=FULL_OPTIONS)
        self.deadline, self.what = deadline, what
        n = cost.shape[0]
        self.result = self.lp.load(self._costs(rays, outputs), sp.csc_matrix(rays), np.ones(n), np.ones(n), 0.0,
                                   np.inf, time_limit=deadline.require(what))
        self._check()
        self.seconds = self.result.seconds

    def _costs(self, rays: Array, outputs: NDArray[np.intp]) -> Array:
        return np.einsum("uj,uj->j", self.cost_matrix[:, outputs], rays)

    def _check(self) -> None:
        require_optimal(self.result, f"{self.what}: decomposition master")

    def add(self, rays: Array, outputs: NDArray[np.intp]) -> None:
        self.rays.append(rays)
        self.outputs.append(outputs)
        self.lp.add_cols(self._costs(rays, outputs), 0.0, np.inf, sp.csc_matrix(rays))
        self.result = self.lp.resolve(time_limit=self.deadline.require(self.what))
        self._check()
        self.seconds += self.result.seconds

    @property
    def objective(self) -> float:
        return float(self.result.objective if self.result.objective is not None else np.nan)

    @property
    def duals(self) -> Array:
        return np.asarray(self.result.row_dual, dtype=np.float64)

    def matrix(self, m: int) -> Array:
        """M with :math:`m_w = \\sum_{j: w_j = w} \\lambda_j r_j` (the master's solution)."""
        lam = np.asarray(self.result.x, dtype=np.float64)
        rays, outputs = np.hstack(self.rays), np.concatenate(self.outputs)
        out = np.zeros((rays.shape[0], m))
        used = lam > 0
        np.add.at(out.T, outputs[used], (rays[:, used] * lam[used]).T)
        return out

    @property
    def columns(self) -> int:
        return self.lp.num_cols


def _entering(cost: Array, y: Array, rays: Array, tol: float) -> NDArray[np.intp]:
    r"""The rays (columns of ``rays``, one per output) whose reduced cost at the master's duals
    y, :math:`(c_w - y)^\top r`, is below ``-tol`` and below :data:`ENTER_TOL` times the
    scale of its terms: a column that improves the master by less than the master's own dual
    tolerance would enter and change nothing, again and again."""
    reduced = np.einsum("uj,uj->j", cost - y[None, :].T, rays)
    scale = np.einsum("uj,uj->j", np.abs(cost) + np.abs(y)[:, None], rays)
    return np.flatnonzero((reduced < -tol) & (reduced < -ENTER_TOL * scale))


def solve_dantzig_wolfe(
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
    r"""The expected-loss LP by Dantzig--Wolfe decomposition over the outputs (module
    docstring): the master's optimum within :data:`GAP_TOL` of the Lagrangian bound, then
    the cone-cover certificate at the best bound's duals. The cone is every ordered pair's
    (``factor``): the pairs OPTMech leaves out are implied by chains to within
    :data:`~.pairs.COLLINEAR_TOL`, as for :mod:`.colgen`. ``rounds`` counts the master
    solves, ``privacy_rows`` the rows of the certificate's flows."""
    n = distances.shape[0]
    if prior is None or model.anchor is not None or loss.shape != (n, n):
        raise ValidationError("the dantzig-wolfe formulation needs the expected objective on a square space")
    del allowed  # the cone is every pair's (docstring)
    cost = prior[:, None] * loss
    start = np.hstack([np.ones((n, n)), model.kernel])
    master = _Master(cost, start, np.r_[np.arange(n), np.arange(n)], deadline, what)
    best, y_best = -np.inf, master.duals
    t0, t_price, rounds = time.perf_counter(), 0.0, 1
    everyone = np.arange(n)
    while True:
        objective = master.objective
        tol = GAP_TOL * abs(objective) / n
        y = master.duals
        found = np.zeros(0, np.intp)
        p: Pricing | None = None
        tp = time.process_time()
        for point in ((SMOOTHING * y_best + (1.0 - SMOOTHING) * y,) if np.isfinite(best) else ()) + (y,):
            for arcs in (ARCS, 4 * ARCS, 0):
                g = cost - point[None, :].T
                p = price(g, factor, arcs, deadline, what)
                bound = float(point.sum() + p.bound.sum())
                if bound > best:
                    best, y_best = bound, point.copy()
                # a column enters only if it improves the master (reduced cost at y < 0):
                # a ray found at the smoothed point that does not is a mis-pricing
                found = _entering(cost, y, p.rays, tol)
                if found.size or objective - best <= GAP_TOL * abs(objective):
                    break
            if found.size or objective - best <= GAP_TOL * abs(objective):
                break
        t_price += time.process_time() - tp
        gap = (objective - best) / max(abs(objective), 1e-300)
        report(progress, rounds, None, f"{what}: decomposition round {rounds}: {master.columns:,} columns, "
               f"objective {objective:.12g}, bound {best:.12g}, gap {gap:.1e}, {found.size} improving (pricing "
               f"{t_price:.1f} s CPU, {time.perf_counter() - t0:.1f} s in all), {deadline.describe()}")
        if gap <= GAP_TOL or found.size == 0 or rounds >= MAX_ROUNDS:
            break
        assert p is not None
        master.add(p.rays[:, found], everyone[found])
        rounds += 1
    return _solution(master, cost, factor, y_best, rounds, n, objective, deadline, what)


def _solution(master: _Master, cost: Array, factor: Array, y: Array, rounds: int, n: int, objective: float,
              deadline: Deadline, what: str) -> RawSolution:
    """The master's matrix with the certificate of the module docstring: rows and duals in
    the square substituted LP's order (row sums, then the flows' privacy rows with dual
    -flow, HiGHS's sign of a binding upper row; reduced costs 0)."""
    deadline.require(what)
    matrix = master.matrix(n)
    flows: list[Cover] = covers(cost - y[None, :].T, factor, 1e-2 * GAP_TOL * abs(objective) / n,
                                deadline=deadline, what=f"{what}: certificate")
    fu = [c.deficit for c in flows]
    fv = [c.surplus for c in flows]
    fw = [np.full(c.flow.size, w, np.intp) for w, c in enumerate(flows)]
    triples = (np.concatenate(fu), np.concatenate(fv), np.concatenate(fw))
    row_dual = np.r_[y, -np.concatenate([c.flow for c in flows])]
    res = master.result
    result = dataclasses.replace(res, objective=objective, row_dual=row_dual, col_dual=np.zeros(n * n),
                                 x=matrix.ravel())
    return RawSolution(matrix, result, rounds, int(triples[0].size), master.seconds, res.iterations, triples)


EXTERNAL_FORMULATIONS["dantzig-wolfe"] = solve_dantzig_wolfe
