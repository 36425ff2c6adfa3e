r"""ConstOPTMech's reference formulation: every LP in one piece, as the paper writes it.

The paper's reduced LP for one penalty (:func:`paper_lp`, Imola et al., UAI 2022,
Theorem 1 proof) and the normalised fit by plain bisection on feasibility LPs
(:func:`parametric_lp`, :func:`bisection`; ``docs/proofs/constopt.md`` §5), in the
paper's variables ``(Y, M_free)``, each solved from scratch. The tests' oracle for the
fast formulation (:mod:`.fast`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from ...lp._solve import STATUS_NAMES, SolveResult, solve_lp
from ...lp.deadline import Deadline
from .cone import Cone, bound_rows, dense_rows, pair_rows, polish, ratios
from .stats import FitStats

__all__ = ["bisection", "feasibility_lp", "full_rows", "infeasible", "m_to_x", "paper_lp", "parametric_lp"]


def to_paper_variables(cone: Cone, a: sp.csr_matrix) -> sp.csr_matrix:
    """Rewrite rows over ``(Y, z)`` in the paper's variables ``(Y, M_free)``: z = M / g."""
    scale = np.concatenate([np.ones(cone.n), 1.0 / cone.g[cone.fu, cone.fw]])
    return sp.csr_matrix(a @ sp.diags(scale))


def full_rows(cone: Cone) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """Rows a(x), b(x) and every cone row (25), (26), (22) in the paper's variables."""
    ncols = cone.n + cone.nfree
    rows = sp.vstack([bound_rows(cone, ncols), pair_rows(cone, np.arange(len(cone.pi)), ncols)])
    return (
        to_paper_variables(cone, dense_rows(cone, True)),
        to_paper_variables(cone, dense_rows(cone, False)),
        to_paper_variables(cone, rows),
    )


def m_to_x(cone: Cone, xm: NDArray[np.float64]) -> NDArray[np.float64]:
    gf = cone.g[cone.fu, cone.fw]
    return np.concatenate([xm[: cone.n], xm[cone.n : cone.n + cone.nfree] / gf])


def paper_lp(cone: Cone, lam: float, deadline: Deadline, stats: FitStats) -> tuple[NDArray | None, SolveResult]:
    """The paper's reduced LP for one lambda, in one piece (the reference formulation)."""
    a, b, rows = full_rows(cone)
    nv = cone.n + cone.nfree
    k = np.ones((cone.n, 1))
    A = sp.vstack(
        [
            sp.hstack([a + lam * b, sp.csr_matrix(-k)]),  # (18)
            sp.hstack([b, sp.csr_matrix((cone.n, 1))]),  # (20)
            sp.hstack([rows, sp.csr_matrix((rows.shape[0], 1))]),  # (25), (26), (22)
        ],
        format="csr",
    )
    lo = np.concatenate([np.full(cone.n, -np.inf), np.ones(cone.n), np.full(rows.shape[0], -np.inf)])
    hi = np.concatenate([np.zeros(cone.n), np.full(cone.n, np.inf), np.zeros(rows.shape[0])])
    c = np.zeros(nv + 1)
    c[-1] = 1.0
    col_lo = np.concatenate([np.zeros(nv), [-np.inf]])
    r = solve_lp(c, A, lo, hi, col_lo, np.inf, time_limit=deadline.solve_limit())
    stats.record(r)
    stats.rows22 = max(stats.rows22, len(cone.pi))
    return (None if r.x is None else m_to_x(cone, r.x)), r


def feasibility_lp(cone: Cone, t: float, time_limit: float | None = None) -> SolveResult:
    r"""Is there :math:`x \in C` with :math:`b(x) \ge 1` and :math:`a(x) \le t\, b(x)`?

    The feasibility LP of the normalised fit, written plainly with every row (22);
    status 0 with a point, or infeasible (:func:`infeasible`) when no mechanism of the
    family has worst-case loss at most ``t``.
    """
    a, b, rows = full_rows(cone)
    nv = cone.n + cone.nfree
    A = sp.vstack([a - t * b, b, rows], format="csr")
    lo = np.concatenate([np.full(cone.n, -np.inf), np.ones(cone.n), np.full(rows.shape[0], -np.inf)])
    hi = np.concatenate([np.zeros(cone.n), np.full(cone.n, np.inf), np.zeros(rows.shape[0])])
    return solve_lp(np.zeros(nv), A, lo, hi, 0.0, np.inf, time_limit=time_limit)


def infeasible(r: SolveResult) -> bool:
    """HiGHS proved the LP infeasible (its presolve may say "infeasible or unbounded": with a
    zero objective, as in the feasibility LPs, unbounded is impossible)."""
    return r.status == 2 or r.model_status == "kUnboundedOrInfeasible"


def parametric_lp(cone: Cone, t: float, time_limit: float | None = None) -> SolveResult:
    r"""The plain LP :math:`F(t) = \min s` s.t. :math:`a(x) - t\, b(x) \le s`, :math:`\sum_u b_u(x) = n`.

    Every row (22) written out, variables ``(Y, M_free, s)``. :math:`F(t) > 0` iff no
    member of the family has worst-case loss at most t (``docs/proofs/constopt.md`` §5).
    Unlike the pure feasibility LP (:func:`feasibility_lp`), it is always feasible:
    HiGHS proves an optimum far more readily than it proves infeasibility far from the
    optimum (benchmarks/RESULTS.md#docstrings-constopt-reference-parametric-lp).
    """
    a, b, rows = full_rows(cone)
    n, nv = cone.n, cone.n + cone.nfree
    ones = sp.csr_matrix(np.ones((n, 1)))
    A = sp.vstack(
        [
            sp.hstack([a - t * b, -ones]),
            sp.hstack([sp.csr_matrix(b.sum(axis=0)), sp.csr_matrix((1, 1))]),
            sp.hstack([rows, sp.csr_matrix((rows.shape[0], 1))]),
        ],
        format="csr",
    )
    k = rows.shape[0]
    lo = np.concatenate([np.full(n, -np.inf), [float(n)], np.full(k, -np.inf)])
    hi = np.concatenate([np.zeros(n), [float(n)], np.zeros(k)])
    c = np.zeros(nv + 1)
    c[-1] = 1.0
    return solve_lp(c, A, lo, hi, np.concatenate([np.zeros(nv), [-np.inf]]), np.inf, time_limit=time_limit)


def bisection(
    cone: Cone, x0: NDArray[np.float64], deadline: Deadline, stats: FitStats, rtol: float
) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """Plain bisection on t, one cold-started plain LP per step (the reference normalised fit).

    Each step solves :func:`parametric_lp` at the middle of the bracket: a positive
    optimum raises the lower end, otherwise its solution (value at most the middle)
    lowers the upper end.
    """
    best_x, best_t = x0, float(ratios(cone, x0).max())
    lo, hi, status, its = 0.0, best_t, "certified", 0
    while hi - lo > rtol * hi:
        mid = (lo + hi) / 2
        r = parametric_lp(cone, mid, deadline.solve_limit())
        stats.record(r)
        its += 1
        if r.status != 0:
            status = STATUS_NAMES.get(r.status, "numerical/other")
            break
        xm, objective = r.optimum("constopt")
        if objective > 0:
            lo = mid
            continue
        x = polish(cone, m_to_x(cone, xm))
        t = float(ratios(cone, x).max())
        if t < best_t:
            best_x, best_t = x, t
        hi = min(mid, t)
    info = {
        "t": best_t,
        "lower_bound": lo if status == "certified" else None,
        "certified": status == "certified",
        "iterations": its,
        "status": status,
    }
    return best_x, info
