r"""The exact vertex of a simplex basis: its primal point, duals and reduced costs to rounding.

One concept. A solver's optimal basis determines one vertex and one dual solution, but
the solver reports both only to its tolerances (HiGHS: 1e-10 on rows and reduced costs,
absolute, in its own scaling), which is 1e-10 relative of an objective of O(1) and far
worse where the LP's entries span many orders of magnitude (the scaled finish of
:mod:`.polish`). Solving the basis's own square system again, here, gives both to rounding.

For :math:`\min c^\top x` s.t. :math:`\ell_r \le A x \le u_r`, :math:`\ell_c \le x \le u_c`
and a basis (basic columns B, basic rows; every other column and row at one of its bounds,
HiGHS's status codes), with N the nonbasic rows (:math:`|N| = |B|`, the basis matrix
:math:`A_{N,B}` square and non-singular):

* the vertex: nonbasic columns at their bound, and :math:`A_{N,B}\, x_B = b_N - A_{N,\bar
  B}\, x_{\bar B}` with :math:`b_N` the bound each nonbasic row sits at;
* the duals: :math:`y_i = 0` on basic rows and zero reduced costs on the basic columns,
  :math:`A_{N,B}^\top y_N = c_B`; the reduced costs :math:`r = c - A^\top y`.

Both systems share one sparse LU (SuperLU via scipy) and are refined (iterative refinement,
residuals in ``np.longdouble``): the results are exact for the basis to about the rounding
of float64 times the growth of the refinement, not to the solver's tolerances. When the
basis is optimal, that primal point is the LP's optimum and the duals certify it (their
weak-duality bound equals its objective up to rounding): :func:`.certificate.bound_from_duals`
is then tight. Nothing here is trusted: the point is repaired and audited by the caller
and the bound is valid for any multipliers.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

__all__ = ["REFINE", "Vertex", "vertex"]

#: Rounds of iterative refinement (the second already changes nothing at GloVe n = 100).
REFINE = 3
_BASIC, _UPPER = 1, 2  # HiGHS's HighsBasisStatus codes (0 lower, 1 basic, 2 upper, 3 zero)


class Vertex(NamedTuple):
    """The basis's primal point ``x``, row duals ``y`` and reduced costs ``r`` (float64)."""

    x: NDArray[np.float64]
    y: NDArray[np.float64]
    r: NDArray[np.float64]


def _at_bound(status: NDArray[np.int8], lower: NDArray[np.float64], upper: NDArray[np.float64]) -> NDArray[np.float64]:
    """The value of each nonbasic variable or row: its upper bound when so marked, else its
    lower bound, 0 for a free one (HiGHS's kZero); basic entries get 0."""
    out = np.where(status == _UPPER, upper, lower)
    return np.where((status == _BASIC) | ~np.isfinite(out), 0.0, out)


def vertex(
    c: ArrayLike, a: sp.spmatrix | sp.sparray, row_lower: ArrayLike, row_upper: ArrayLike, col_lower: ArrayLike,
    col_upper: ArrayLike, col_status: NDArray[np.int8], row_status: NDArray[np.int8], refine: int = REFINE,
) -> Vertex | None:
    """The vertex and duals of the basis (``col_status``, ``row_status``) of the LP, solved to
    rounding (module docstring); ``None`` when the basis is not square or is singular."""
    from scipy.sparse.linalg import splu

    cost = np.asarray(c, dtype=np.float64)
    acsr = sp.csr_matrix(a, dtype=np.float64)
    m, nvar = acsr.shape
    cs, rs = np.asarray(col_status), np.asarray(row_status)
    basic = np.flatnonzero(cs == _BASIC)
    nonbasic_rows = np.flatnonzero(rs != _BASIC)
    if len(basic) != len(nonbasic_rows) or len(cs) != nvar or len(rs) != m:
        return None
    x = _at_bound(cs, np.broadcast_to(np.asarray(col_lower, dtype=np.float64), (nvar,)),
                  np.broadcast_to(np.asarray(col_upper, dtype=np.float64), (nvar,))).astype(np.longdouble)
    b_rows = _at_bound(rs, np.broadcast_to(np.asarray(row_lower, dtype=np.float64), (m,)),
                       np.broadcast_to(np.asarray(row_upper, dtype=np.float64), (m,)))
    y = np.zeros(m, dtype=np.longdouble)
    if len(basic):
        sub = acsr[nonbasic_rows]
        big = sp.csc_matrix(sub[:, basic])
        try:
            lu = splu(big)
        except RuntimeError:  # exactly singular
            return None
        sub_l, big_l = sub.astype(np.longdouble), big.astype(np.longdouble)
        rhs = b_rows[nonbasic_rows].astype(np.longdouble)
        cb = cost[basic].astype(np.longdouble)
        xb = np.zeros(len(basic), dtype=np.longdouble)
        yn = np.zeros(len(basic), dtype=np.longdouble)
        for _ in range(refine + 1):
            x[basic] = xb
            res_p = rhs - sub_l @ x  # A_NB x_B = b_N - A_N,nonbasic x_nonbasic
            res_d = cb - big_l.T @ yn
            if not (np.all(np.isfinite(res_p)) and np.all(np.isfinite(res_d))):
                return None
            xb += lu.solve(np.asarray(res_p, dtype=np.float64))
            yn += lu.solve(np.asarray(res_d, dtype=np.float64), trans="T")
        x[basic] = xb
        y[nonbasic_rows] = yn
    r = cost.astype(np.longdouble) - acsr.T.astype(np.longdouble) @ y
    out = Vertex(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), np.asarray(r, dtype=np.float64))
    if not all(np.all(np.isfinite(v)) for v in out):
        return None
    return out
