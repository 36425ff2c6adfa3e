r"""A certified lower bound on the OPTMech LP optimum: how far from optimal a build is.

Every OPTMech result should be within 1e-9 relative of the *exact* LP optimum.
Comparing with the reference (``full``) build does not show that: the reference is itself
a floating-point solve, off by more than that at some eps (benchmarks/RESULTS.md). Weak
duality does. For the LP

.. math::

    \min_x c^\top x \quad\text{s.t.}\quad A_{eq} x = b_{eq},\ A_{ub} x \le b_{ub},\
    l \le x \le h

and *any* multipliers :math:`y_{eq}` (free) and :math:`y_{ub} \le 0`, every feasible x has

.. math::

    c^\top x \;\ge\; c^\top x + y_{ub}^\top (b_{ub} - A_{ub} x) + y_{eq}^\top (b_{eq} - A_{eq} x)
    \;=\; y_{eq}^\top b_{eq} + y_{ub}^\top b_{ub} + r^\top x
    \;\ge\; y_{eq}^\top b_{eq} + y_{ub}^\top b_{ub} + \sum_j \min(r_j l_j, r_j h_j),

with :math:`r = c - A_{eq}^\top y_{eq} - A_{ub}^\top y_{ub}` (the first step: each added
term is >= 0 on the feasible set). The right-hand side is a lower bound on the optimum
whatever the multipliers are, so the solver's accuracy does not enter its validity, only
its tightness. (Float rounding in evaluating it is of order 1e-15 relative; sums are
taken with :func:`math.fsum`.)

The LP bounded here is OPTMech's (Imola et al., UAI 2022, LP (1); Bordenabe et al., CCS
2014, Sec. 4) at exactly eps, in the plain variables M (plus k for the worst case), with
the valid bounds :math:`0 \le M \le 1` and :math:`0 \le k \le \max L`, and with only a
subset S of its privacy rows: the rows that the returned matrix nearly meets with
equality (:func:`near_binding`). Dropping rows relaxes the LP, so the bound holds for the
full LP; S is chosen so that the relaxation has (nearly) the same optimum, which makes
the bound tight. The multipliers come from one HiGHS dual-simplex solve of that relaxed
LP, warm-started as violated rows are added (HiGHS through
:class:`~metricdp.lp._solve.LPModel`; its accuracy affects how tight the bound
is, never whether it holds).

``gap = (loss of the returned mechanism - bound) / bound`` is then an upper bound on how
far the mechanism is from the exact optimum at eps (it is audited eps-mDP, hence feasible
for the full LP).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from ._solve import LPModel
from .pairs import pair_blocks

__all__ = [
    "Bound",
    "LPProblem",
    "bound_from_duals",
    "bound_from_multipliers",
    "lower_bound",
    "near_binding",
    "optmech_lp",
    "ranged_bound",
]

#: Exponents above this are clipped when writing factors e^{eps d} (rows with such factors
#: never bind in a mechanism with non-negligible entries; clipping a row makes it stricter,
#: i.e. the LP *more* constrained, so such a row is left out of S instead: see near_binding).
_EXP_MAX = 700.0
#: Tight tolerances: they make the bound tight, not valid (it is valid for any multipliers).
_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


@dataclass(frozen=True)
class LPProblem:
    """``min c x  s.t.  a_eq x = b_eq,  a_ub x <= b_ub,  lower <= x <= upper`` (all finite bounds).

    ``simplex`` = n > 0 says more: the first n * n variables are n rows of a row-stochastic
    matrix (lower bounds 0, the equality rows are exactly their row sums = 1), which
    :func:`bound_from_multipliers` uses to choose the equality multipliers optimally.
    """

    c: NDArray[np.float64]
    a_eq: sp.csr_matrix
    b_eq: NDArray[np.float64]
    a_ub: sp.csr_matrix
    b_ub: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    simplex: int = 0


@dataclass(frozen=True)
class Bound:
    """A certified lower bound ``value`` on the LP optimum (see the module docstring)."""

    value: float
    privacy_rows: int
    seconds: float
    status: str


Triples = tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]


def _scan(
    x: NDArray[np.float64], d: NDArray[np.float64], epsilon: float,
    select: Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.bool_]],
) -> Triples:
    """Triples (u, v, w), u != v, where ``select(x[u], e^{eps d(u,v)} x[v])`` holds, in blocks of pairs."""
    n = x.shape[0]
    pu, pv = np.nonzero(~np.eye(n, dtype=bool) & (epsilon * d < _EXP_MAX))
    us, vs, ws = [], [], []
    for start, stop in pair_blocks(len(pu), x.shape[1]):
        u, v = pu[start:stop], pv[start:stop]
        k, w = np.nonzero(select(x[u], np.exp(epsilon * d[u, v])[:, None] * x[v]))
        us.append(u[k])
        vs.append(v[k])
        ws.append(w)
    return np.concatenate(us), np.concatenate(vs), np.concatenate(ws)


def near_binding(matrix: ArrayLike, distances: ArrayLike, epsilon: float, rtol: float = 1e-6) -> Triples:
    r"""Triples (u, v, w), u != v, with :math:`M[u,w] \ge (1 - \text{rtol})\, e^{\varepsilon d(u,v)} M[v,w] > 0`."""
    return _scan(np.asarray(matrix, dtype=np.float64), np.asarray(distances, dtype=np.float64), epsilon,
                 lambda xu, rhs: (xu >= (1.0 - rtol) * rhs) & (rhs > 0))


def _privacy_rows(
    d: NDArray[np.float64], epsilon: float, rows: Triples, nvar: int,
) -> sp.csr_matrix:
    r"""Rows :math:`e^{-\varepsilon d(u,v)} M[u,w] - M[v,w] \le 0` (the privacy row divided by its
    factor, so that every coefficient is in (0, 1]: HiGHS refuses coefficients above 1e15)."""
    u, v, w = rows
    n, t = d.shape[0], len(u)
    idx = np.arange(t)
    return sp.csr_matrix(
        (np.r_[np.exp(-epsilon * d[u, v]), -np.ones(t)], (np.r_[idx, idx], np.r_[u * n + w, v * n + w])),
        shape=(t, nvar),
    )


def optmech_lp(
    distances: ArrayLike,
    epsilon: float,
    rows: Triples,
    *,
    loss: ArrayLike | None = None,
    prior: ArrayLike | None = None,
    cap: float | None = None,
) -> LPProblem:
    r"""OPTMech's LP at ``epsilon`` in the plain variables (vec(M)[, k]) with the privacy rows ``rows``.

    Worst case (``prior=None``): minimise k, rows :math:`\sum_w L[u,w] M[u,w] - k \le 0`;
    expected: minimise :math:`\sum_u \pi_u \sum_w L[u,w] M[u,w]`. Row sums equal 1;
    privacy rows :math:`e^{-\varepsilon d(u,v)} M[u,w] - M[v,w] \le 0` (scaled; same rows).

    ``cap`` U, any number **at least the LP's optimum** (e.g. the loss of a feasible
    mechanism, with a margin): the LP restricted to objective <= U, which has the same
    optimum, so a lower bound for it is one for the LP. There every loss term is at most U,
    which bounds each variable: :math:`M[u,w] \le U / (w_u L[u,w])` (:math:`w_u` = 1 in
    the worst case, :math:`\pi_u` in the expected one) and :math:`k \le U`; these bounds
    (clipped to 1 and to max L) make :func:`bound_from_multipliers` tighter where a
    multiplier's error would otherwise be charged a whole unit of mass (an entry the
    optimum holds at 1e-11, but the relaxation may fill).
    """
    d = np.asarray(distances, dtype=np.float64)
    n = d.shape[0]
    big_l = d if loss is None else np.asarray(loss, dtype=np.float64)
    worst = prior is None
    nvar = n * n + (1 if worst else 0)
    priv = _privacy_rows(d, epsilon, rows, nvar)
    cells = np.arange(n * n)
    a_eq = sp.csr_matrix((np.ones(n * n), (cells // n, cells)), shape=(n, nvar))
    if worst:
        loss_rows = sp.csr_matrix(
            (np.r_[big_l.ravel(), -np.ones(n)], (np.r_[cells // n, np.arange(n)], np.r_[cells, np.full(n, n * n)])),
            shape=(n, nvar),
        )
        a_ub = sp.vstack([loss_rows, priv], format="csr")
        c = np.zeros(nvar)
        c[-1] = 1.0
        weight = np.ones(n)
        upper = np.r_[np.ones(n * n), big_l.max() if cap is None else min(big_l.max(), cap)]
    else:
        weight = np.asarray(prior, dtype=np.float64)
        a_ub = priv
        c = (weight[:, None] * big_l).ravel()
        upper = np.ones(n * n)
    if cap is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = cap / (weight[:, None] * big_l)
        upper[: n * n] = np.minimum(1.0, np.nan_to_num(bound, nan=1.0, posinf=1.0)).ravel()
    return LPProblem(c, a_eq, np.ones(n), a_ub, np.zeros(a_ub.shape[0]), np.zeros(nvar), upper, simplex=n)


def ranged_bound(
    cost: NDArray[np.float64],
    a: sp.spmatrix | sp.sparray,
    row_lo: NDArray[np.float64],
    row_hi: NDArray[np.float64],
    box_lo: NDArray[np.float64],
    box_hi: NDArray[np.float64],
    row_dual: NDArray[np.float64],
) -> float:
    r"""A weak-duality lower bound of :math:`\min c^\top x` s.t. ``row_lo <= A x <= row_hi``,
    ``box_lo <= x <= box_hi`` from any ``row_dual`` y (``-inf`` when none is finite): with y
    clipped to the sign its finite row bound allows and :math:`r = c - A^\top y`,
    :math:`c^\top x \ge \sum_i \min(y_i L_i, y_i U_i) + \sum_j \min(r_j l_j, r_j u_j)`
    (Neumaier and Shcherbina 2004).

    ``box_lo``, ``box_hi``: column bounds containing some optimal solution (the LP's own
    where finite). Summed exactly (``math.fsum``): the terms cancel to the optimum, and
    a rounded sum would lose digits at large eps.
    """
    y = np.asarray(row_dual, dtype=np.float64)
    y = np.where((y > 0) & ~np.isfinite(row_lo), 0.0, y)
    y = np.where((y < 0) & ~np.isfinite(row_hi), 0.0, y)
    rows = np.where(y > 0, y * np.where(np.isfinite(row_lo), row_lo, 0.0),
                    y * np.where(np.isfinite(row_hi), row_hi, 0.0))
    r = np.asarray(cost, dtype=np.float64) - sp.csc_matrix(a).T @ y
    with np.errstate(invalid="ignore"):  # 0 * inf: a zero reduced cost contributes 0
        cols = np.where(r > 0, r * box_lo, np.where(r < 0, r * box_hi, 0.0))
    if not np.all(np.isfinite(cols)) or not np.all(np.isfinite(rows)):
        return -np.inf
    return float(math.fsum(np.concatenate([rows, cols]).tolist()))


def bound_from_multipliers(problem: LPProblem, y_eq: ArrayLike, y_ub: ArrayLike) -> float:
    r"""The weak-duality bound of the module docstring for any multipliers (``y_ub`` clipped to <= 0).

    When ``problem.simplex`` = n (the OPTMech LP: n rows M[u, .] with :math:`M \ge 0`,
    :math:`\sum_w M[u,w] = 1`), ``y_eq`` is ignored and the row sums are kept as constraints
    instead of being dualised: with :math:`r = c - A_{ub}^\top y_{ub}`, every feasible x has
    :math:`\sum_w r_{uw} M[u,w] \ge \min_w r_{uw}` (a convex combination), so

    .. math:: c^\top x \ge y_{ub}^\top b_{ub} + \sum_u \min_w r_{uw}
              + \sum_{j \ge n^2} \min(r_j l_j, r_j h_j).

    That is the bound of the best :math:`y_{eq}` for these :math:`y_{ub}`
    (:math:`y_u = \min_w r_{uw}`), so it is never below the general one: an error of the
    solver's row-sum duals, and reduced costs a little negative in many columns of a row
    (each costs its own amount in the general bound, only the most negative one here), no
    longer loosen the certificate. With upper bounds :math:`M[u,w] \le h_{uw}` below 1
    (``optmech_lp``'s ``cap``) the row's minimum is that of a fractional knapsack,
    :math:`\min \{\sum_w r_{uw} m_w : \sum_w m_w = 1,\ 0 \le m \le h_u\}`, which the
    greedy fill in increasing :math:`r_{uw}` attains (exchange argument); a row whose bounds
    sum below 1 keeps :math:`\min_w r_{uw}` (a weaker bound, never an invalid one).
    """
    ye = np.asarray(y_eq, dtype=np.float64)
    yu = np.minimum(np.asarray(y_ub, dtype=np.float64), 0.0)
    n = problem.simplex
    if n:
        r = problem.c - problem.a_ub.T @ yu
        rm, h = r[: n * n].reshape(n, n), problem.upper[: n * n].reshape(n, n)
        order = np.argsort(rm, axis=1)
        rs, hs = np.take_along_axis(rm, order, axis=1), np.take_along_axis(h, order, axis=1)
        take = np.clip(1.0 - (np.cumsum(hs, axis=1) - hs), 0.0, hs)  # the greedy fill
        take[h.sum(axis=1) < 1.0] = np.eye(1, n)[0]  # bounds that do not fill the row: min_w r
        rest = np.minimum(r[n * n:] * problem.lower[n * n:], r[n * n:] * problem.upper[n * n:])
        return math.fsum(np.r_[yu * problem.b_ub, (rs * take).ravel(), rest].tolist())
    return ranged_bound(problem.c, sp.vstack([problem.a_eq, problem.a_ub]),
                        np.r_[problem.b_eq, np.full(len(problem.b_ub), -np.inf)], np.r_[problem.b_eq, problem.b_ub],
                        problem.lower, problem.upper, np.r_[ye, yu])


def bound_from_duals(
    distances: ArrayLike, epsilon: float, rows: Triples, row_dual: ArrayLike, col_dual: ArrayLike,
    factor: ArrayLike, *, loss: ArrayLike | None = None, prior: ArrayLike | None = None, cap: float | None = None,
) -> float:
    r"""The weak-duality bound at ``epsilon`` from the duals of a solve of the *substituted*
    square LP (``core._solve_fast``'s variables X; the ``block-ipm`` finish), in milliseconds.

    That LP's rows are the row sums (and, worst case, the loss rows), then the privacy
    rows ``rows`` = (u, v, w) written :math:`M[u,w] - f[u,v] M[v,w] \le 0` (``factor``
    f, the solve's level and exponent cap), and its bounds :math:`X[x,w] \ge 0`
    (x != w) are the privacy rows (w, x, w) in scaled form, :math:`K[x,w] M[w,w] - M[x,w]
    \le 0`. The substitution changes columns, not rows, so each row keeps its dual: the
    multiplier of the scaled privacy row (u, v, w) of :func:`optmech_lp` is the row's dual
    times f[u, v], that of (w, x, w) is minus the reduced cost of X[x, w] (HiGHS's signs:
    reduced costs ``c - A^T row_dual``). :func:`bound_from_multipliers` then evaluates the
    bound for the LP at exactly ``epsilon`` with those rows (a relaxation: the rows left
    out only loosen it), so the solve's level, its exponent cap and its tolerances decide
    how tight the bound is, never whether it holds.
    """
    d = np.asarray(distances, dtype=np.float64)
    n = d.shape[0]
    y = np.asarray(row_dual, dtype=np.float64)
    z = np.asarray(col_dual, dtype=np.float64)
    f = np.asarray(factor, dtype=np.float64)
    u, v, w = rows
    base = n if prior is not None else 2 * n
    xs, ws = np.nonzero(~np.eye(n, dtype=bool))  # bound X[x, w] >= 0: row (w, x, w)
    every = (np.r_[u, ws], np.r_[v, xs], np.r_[w, ws])
    problem = optmech_lp(d, epsilon, every, loss=loss, prior=prior, cap=cap)
    y_ub = np.r_[y[n:base], y[base:] * f[u, v], -z[xs * n + ws]]
    return bound_from_multipliers(problem, y[:n], y_ub)


def _violated(x: NDArray[np.float64], distances: NDArray[np.float64], epsilon: float, tol: float) -> Triples:
    """Privacy rows (u, v, w) of the full LP at eps that ``x`` (an n x n matrix) violates by more than ``tol``."""
    return _scan(x, distances, epsilon, lambda xu, rhs: xu - rhs > tol)


def lower_bound(
    distances: ArrayLike,
    epsilon: float,
    matrix: ArrayLike,
    *,
    loss: ArrayLike | None = None,
    prior: ArrayLike | None = None,
    rtol: float = 1e-6,
    time_limit: float | None = None,
    max_rounds: int = 50,
) -> Bound:
    """A certified lower bound on OPTMech's LP optimum at ``epsilon``, tight near ``matrix``'s active set.

    ``matrix`` (an eps-mDP mechanism, e.g. a build to be judged) only chooses the privacy
    rows the relaxed LP starts with (:func:`near_binding`); the rows that the relaxed
    optimum then violates are added and the LP solved again (at most ``max_rounds``
    times, within ``time_limit`` seconds), because columns that ``matrix`` leaves at zero
    bind through rows that look slack there. Each round's bound is valid whatever the rows
    are; the best one is returned. Two passes, each with half the time: the LP scaled by
    ``matrix`` (every column by its entry, every row to a largest coefficient of 1:
    HiGHS's tolerances are absolute, and entries of 1e-14 beside 1 are otherwise resolved
    only to 1e-10) and the LP as it is; the larger bound is returned (both are valid).
    ``status`` is HiGHS's last; ``value`` is ``-inf`` when no solve returned multipliers.
    """
    t0 = time.perf_counter()
    d = np.asarray(distances, dtype=np.float64)
    m = np.asarray(matrix, dtype=np.float64)
    problem = optmech_lp(d, epsilon, near_binding(m, d, epsilon, rtol), loss=loss, prior=prior)
    passes = [
        _bound_pass(problem, d, epsilon, m, loss, prior,
                    None if time_limit is None else time_limit / 2, max_rounds, scaled)
        for scaled in (True, False)
    ]
    best = max(passes, key=lambda b: b.value)
    return Bound(best.value, best.privacy_rows, time.perf_counter() - t0, best.status)


def _bound_pass(
    problem: LPProblem, d: NDArray[np.float64], epsilon: float, m: NDArray[np.float64], loss: ArrayLike | None,
    prior: ArrayLike | None, time_limit: float | None, max_rounds: int, scaled: bool,
) -> Bound:
    """One pass of :func:`lower_bound` from its starting LP ``problem``, scaled by ``m`` or as it is."""
    t0 = time.perf_counter()
    n = d.shape[0]
    nvar = problem.c.shape[0]
    # multipliers of the scaled LP map back exactly: y = r y' / sigma
    col = np.ones(nvar)
    if scaled:
        col[: n * n] = np.where(m.ravel() > 0, m.ravel(), 1.0)
    if scaled and prior is None:
        col[-1] = max(float(np.einsum("uw,uw->u", m, d if loss is None else np.asarray(loss)).max()), 1e-300)
    cs = problem.c * col
    sigma = 1.0 / np.abs(cs).max() if scaled else 1.0

    def scale_rows(a: sp.csr_matrix) -> tuple[sp.csr_matrix, NDArray[np.float64]]:
        a = sp.csr_matrix(a @ sp.diags(col))
        if not scaled:
            return a, np.ones(a.shape[0])
        r = 1.0 / np.maximum(abs(a).max(axis=1).toarray().ravel(), 1e-300)
        return sp.csr_matrix(sp.diags(r) @ a), r

    model = LPModel(method="simplex", options=_OPTIONS)
    a, rscale = scale_rows(sp.vstack([problem.a_eq, problem.a_ub], format="csr"))
    lo = np.r_[problem.b_eq, np.full(len(problem.b_ub), -np.inf)] * rscale
    hi = np.r_[problem.b_eq, problem.b_ub] * rscale
    neq = problem.a_eq.shape[0]

    def left() -> float | None:
        return None if time_limit is None else max(0.0, time_limit - (time.perf_counter() - t0))

    result = model.load(sigma * cs, a, lo, hi, problem.lower / col, problem.upper / col, time_limit=left())
    best: float = -math.inf
    added: list[sp.csr_matrix] = []
    for _ in range(max_rounds):
        if result.row_dual is not None:
            if added:
                more = sp.vstack(added, format="csr")
                problem = LPProblem(problem.c, problem.a_eq, problem.b_eq,
                                    sp.vstack([problem.a_ub, more], format="csr"),
                                    np.r_[problem.b_ub, np.zeros(more.shape[0])], problem.lower, problem.upper,
                                    problem.simplex)
                added = []
            y = rscale * result.row_dual / sigma
            best = max(best, bound_from_multipliers(problem, y[:neq], y[neq:]))
        if result.x is None or not result.success:
            break
        x = col[: n * n] * np.asarray(result.x[: n * n])
        viol = _violated(x.reshape(n, n), d, epsilon, 1e-12)
        if len(viol[0]) == 0 or (time_limit is not None and left() == 0):
            break
        new = _privacy_rows(d, epsilon, viol, nvar)
        added.append(new)
        new_scaled, r = scale_rows(new)
        rscale = np.r_[rscale, r]
        model.add_rows(new_scaled, -np.inf, 0.0)
        result = model.resolve(time_limit=left())
    return Bound(best, problem.a_ub.shape[0] - (n if prior is None else 0), time.perf_counter() - t0,
                 result.message)
