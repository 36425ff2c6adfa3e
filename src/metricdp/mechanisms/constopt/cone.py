r"""The cone of ConstOPTMech's family at one LP level, and its rows (Imola et al., UAI 2022).

The fixed entries :math:`Y_w e^{-\ell d(u,w)}` and the free entries of the replacement
function span a cone (rows (22), (25), (26) of the paper's Theorem 1 proof, all
homogeneous): :class:`Cone` holds its coefficients, :func:`build_cone` computes them
(vectorised), and :func:`dense_rows`, :func:`bound_rows`, :func:`pair_rows` write its
rows for both formulations. :func:`ratios` are the element losses of the normalised
mechanism H and :func:`polish` makes rows (25), (26) exact after a solve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from ...lp._solve import LOG_CAP

__all__ = [
    "DROP_TOL",
    "Cone",
    "bound_rows",
    "build_cone",
    "dense_rows",
    "mechanism_rows",
    "pair_rows",
    "polish",
    "ratios",
]

#: Terms of the dense rows a(x), b(x) with a factor exp(-eps' d) below this are left out
#: (HiGHS's own ``small_matrix_value``): see :func:`dense_rows`.
DROP_TOL = 1e-9
_CHUNK = 1 << 22  # elements per temporary of the vectorised coefficient computations


@dataclass(frozen=True, eq=False)
class Cone:
    r"""Geometry of the reduced LP at the LP level ``level`` (:math:`\varepsilon'(1-\eta)`).

    Free entries ``f`` are ``(fu[f], fw[f])``, sorted by column then row. Variables are
    ``x = (Y, z)`` with the free entry scaled as :math:`M[u,w] = z_f e^{-\ell d(u,w)}`, so
    the exponential mechanism is ``Y = z = 1`` and every cone coefficient is a ratio to
    the fixed form (well scaled when ``I`` holds near pairs). Rows, with ``x`` the fixed
    entries of column ``w`` (:math:`x \notin I(w)`):

    * (25) :math:`z_f \le c^{25}_f Y_w`,
      :math:`\log c^{25}_f = \ell\,(d(u,w) + \min_x [d(u,x) - d(x,w)])`;
    * (26) :math:`c^{26}_f Y_w \le z_f`,
      :math:`\log c^{26}_f = \ell\,(d(u,w) - \min_x [d(x,w) + d(x,u)])`;
    * (22) :math:`z_i \le c^{22}_{ij} z_j` for free ``i = (u, w)``, ``j = (v, w)``,
      :math:`\log c^{22} = \ell\,(d(u,v) + d(u,w) - d(v,w))`.

    The (22) row of pair (i, j) is *implied* by (25) of i and (26) of j when
    :math:`c^{25}_i \le c^{22}_{ij} c^{26}_j`; without the cap that is
    ``m25[i] + m26[j] <= d(u, v)``, independent of the level.
    """

    d: NDArray[np.float64]
    level: float
    free: NDArray[np.bool_]
    fu: NDArray[np.intp]
    fw: NDArray[np.intp]
    g: NDArray[np.float64]  # exp(-level d)
    log25: NDArray[np.float64]  # +inf where the column has no fixed entry
    log26: NDArray[np.float64]  # -inf likewise
    pi: NDArray[np.intp]  # (22) pairs: free entries i, j of one column, i != j
    pj: NDArray[np.intp]
    log22: NDArray[np.float64]
    implied: NDArray[np.bool_]

    @property
    def n(self) -> int:
        return self.d.shape[0]

    @property
    def nfree(self) -> int:
        return len(self.fu)

    @property
    def bounded(self) -> NDArray[np.bool_]:
        """Free entries whose column has a fixed entry (only they get rows (25), (26))."""
        return np.isfinite(self.log25)

    def matrix(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """M_full of the variables ``x = (Y, z)`` (negatives from the solver clipped)."""
        x = np.maximum(x, 0.0)
        y, z = x[: self.n], x[self.n : self.n + self.nfree]
        m = self.g * y[None, :]
        m[self.fu, self.fw] = self.g[self.fu, self.fw] * z
        return m


def build_cone(d: NDArray[np.float64], free: NDArray[np.bool_], level: float) -> Cone:
    n = d.shape[0]
    fw, fu = np.nonzero(free.T)  # column-major: sorted by column w, then row u
    fu = fu.astype(np.intp)
    fw = fw.astype(np.intp)
    nf = len(fu)
    m25 = np.full(nf, np.inf)
    m26 = np.full(nf, np.inf)
    step = max(1, _CHUNK // n)
    for s in range(0, nf, step):
        u, w = fu[s : s + step], fw[s : s + step]
        excluded = free[:, w].T  # [k, x]: x is itself free in column w[k]: not a fixed entry
        dw = d[w]  # [k, x] = d(x, w)
        a = d[u] - dw  # d(u,x) - d(x,w)
        a[excluded] = np.inf
        m25[s : s + step] = a.min(axis=1)
        b = d[u] + dw  # d(x,u) + d(x,w)
        b[excluded] = np.inf
        m26[s : s + step] = b.min(axis=1)
    duw = d[fu, fw]
    with np.errstate(invalid="ignore"):
        log25 = np.minimum(level * (duw + m25), LOG_CAP)
        log26 = np.maximum(level * (duw - m26), -LOG_CAP)
    log25[~np.isfinite(m25)] = np.inf
    log26[~np.isfinite(m26)] = -np.inf

    # (22): all ordered pairs of distinct free entries of one column, built in one shot.
    size = np.bincount(fw, minlength=n)
    start = np.cumsum(size) - size
    per = size[fw]  # each free entry pairs with every entry of its column
    pi = np.repeat(np.arange(nf, dtype=np.intp), per)
    offset = np.arange(len(pi), dtype=np.intp) - np.repeat(np.cumsum(per) - per, per)
    pj = start[fw[pi]] + offset
    keep = pi != pj
    pi, pj = pi[keep], pj[keep]
    u, v, w = fu[pi], fu[pj], fw[pi]
    log22 = np.minimum(level * (d[u, v] + d[u, w] - d[v, w]), LOG_CAP)
    implied = log25[pi] <= log22 + log26[pj]  # False when the column has no fixed entry
    return Cone(d, level, free, fu, fw, np.exp(-level * d), log25, log26, pi, pj, log22, implied)


def dense_rows(cone: Cone, with_distance: bool) -> sp.csr_matrix:
    r"""Rows ``a_u(x)`` (``with_distance``) or ``b_u(x)`` over ``x = (Y, z)``, CSR (n, n + F).

    Terms whose factor :math:`e^{-\ell d(u,w)}` is below ``DROP_TOL`` are left out: HiGHS
    treats such coefficients as zero anyway (its ``small_matrix_value``), and leaving them
    out here keeps the LP that is solved the LP that is described. The LP's row sums are
    then lower bounds of the true ones (rows (20) only get stricter: privacy is untouched),
    and every loss reported is recomputed from the full matrix.
    """
    n, nf = cone.n, cone.nfree
    ru, cw = np.nonzero(~cone.free & (cone.g >= DROP_TOL))
    coef_y = cone.g[ru, cw]
    gf = cone.g[cone.fu, cone.fw]
    keep = np.flatnonzero(gf >= DROP_TOL)
    coef_z = gf[keep]
    if with_distance:
        coef_y = coef_y * cone.d[ru, cw]
        coef_z = coef_z * cone.d[cone.fu[keep], cone.fw[keep]]
    rows = np.concatenate([ru, cone.fu[keep]])
    cols = np.concatenate([cw, n + keep])
    return sp.csr_matrix((np.concatenate([coef_y, coef_z]), (rows, cols)), shape=(n, n + nf))


def bound_rows(cone: Cone, ncols: int) -> sp.csr_matrix:
    """Rows (25) then (26) of every bounded free entry, as ``A x <= 0`` over ``x = (Y, z, ...)``."""
    f = np.flatnonzero(cone.bounded)
    k = len(f)
    z, y = cone.n + f, cone.fw[f]
    rows = np.concatenate([np.arange(k), np.arange(k), k + np.arange(k), k + np.arange(k)])
    cols = np.concatenate([z, y, y, z])
    vals = np.concatenate([np.ones(k), -np.exp(cone.log25[f]), np.exp(cone.log26[f]), -np.ones(k)])
    return sp.csr_matrix((vals, (rows, cols)), shape=(2 * k, ncols))


def pair_rows(cone: Cone, pairs: NDArray[np.intp], ncols: int) -> sp.csr_matrix:
    """Rows (22) ``z_i - c22 z_j <= 0`` of the given pairs, over ``x = (Y, z, ...)``."""
    k = len(pairs)
    rows = np.concatenate([np.arange(k), np.arange(k)])
    cols = cone.n + np.concatenate([cone.pi[pairs], cone.pj[pairs]])
    vals = np.concatenate([np.ones(k), -np.exp(cone.log22[pairs])])
    return sp.csr_matrix((vals, (rows, cols)), shape=(k, ncols))


def mechanism_rows(m: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rows of a non-negative matrix normalised to sum 1 (the paper's H)."""
    return m / m.sum(axis=1, keepdims=True)


def ratios(cone: Cone, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Element losses of H = normalised M_full(x): a_u(x) / b_u(x)."""
    m = cone.matrix(x)
    return np.einsum("ij,ij->i", m, cone.d) / m.sum(axis=1)


def polish(cone: Cone, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Clip negatives and put every bounded z exactly inside its rows (25), (26).

    The LP meets those rows only to its tolerance; clipping makes them exact (the box
    is never empty: :math:`c^{26} \\le 1 \\le c^{25}`), which leaves the repair only the
    (22) residuals of the solver to absorb.
    """
    x = np.maximum(np.asarray(x, dtype=np.float64), 0.0).copy()
    n = cone.n
    f = np.flatnonzero(cone.bounded)
    yw = x[cone.fw[f]]
    z = x[n + f]
    x[n + f] = np.clip(z, np.exp(cone.log26[f]) * yw, np.exp(cone.log25[f]) * yw)
    return x
