r"""Weak-duality lower bounds for the paper-fit LPs from any row multipliers (the fit's certificate):
:func:`paper_bound` for a :class:`~.fast.FastModel` solve, through
:func:`metricdp.lp.certificate.ranged_bound` (any LP with ranged rows and a box).

For :math:`\min c^\top x` s.t. :math:`L \le Ax \le U`, :math:`l \le x \le u`, and any
row multipliers :math:`y`, every feasible x has

.. math:: c^\top x = y^\top (Ax) + r^\top x, \qquad r = c - A^\top y,

so with :math:`y_i` clipped to the sign its finite row bound allows (:math:`y_i > 0`
needs :math:`L_i > -\infty`, :math:`y_i < 0` needs :math:`U_i < \infty`),

.. math:: c^\top x \ \ge\ \sum_i \min(y_i L_i, y_i U_i) + \sum_j \min(r_j l_j, r_j u_j),

whatever the quality of y (Neumaier and Shcherbina 2004). The columns' bounds here may be a
*box* that some optimal solution lies in, rather than the LP's own (possibly infinite)
bounds: the bound is then a lower bound of the optimum, which is all a certificate needs.
A negative :math:`r_j` on a column without a finite upper box (or a positive one without a
finite lower box) makes the bound :math:`-\infty`: no certificate. From the duals of an
optimal basis, :math:`r` is the solver's reduced cost up to its dual tolerance, and the
bound is within that tolerance times the box of the optimum.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from ...lp._solve import SolveResult
from ...lp.certificate import ranged_bound

if TYPE_CHECKING:
    from .fast import FastModel

__all__ = ["paper_bound"]


def paper_bound(model: FastModel, r: SolveResult) -> float:
    r"""A certified lower bound of the paper LP's optimum (every block, every row) from
    the duals of ``r``, this model's last paper solve (weak duality, as in
    :func:`metricdp.lp.certificate.ranged_bound`).

    The Lagrangian keeps the duals of the dense rows, the objective rows and the rows
    (22) in the model (the rows (22) not in it get 0), and minimises exactly over each
    block's band :math:`c^{26}_f Y_w \le z_f \le c^{25}_f Y_w` (rows (25), (26): their own
    duals are not needed) within a box: a block contributes
    :math:`Y_w \min(0, \rho_w)` at most, with :math:`\rho_w` the pricing's reduced cost
    of its best direction (:meth:`FastModel._price`), at :math:`Y_w` up to its box; an entry of a
    column without fixed entry :math:`\min(0, r_f)` times its box. So neither absent
    blocks nor the dual tolerance on a free entry's reduced cost leaves the bound
    unboxed. Unscaled rooms (up to e^20) make that band sum cancel badly, so each block
    also gets the Lagrangian that keeps its rows (25)'s duals, with every variable in its
    box (an e within its room times the box of its Y), and the larger of the two counts
    (the Lagrangian separates by block, so the mixed multipliers are one valid choice).
    The box: some optimal solution has :math:`s = \text{OPT} \le \bar k`, with
    :math:`\bar k` twice the larger of the solve's objective and the worst row of its
    point, hence :math:`A_u \le \bar k`, :math:`B_u \le \bar k/\lambda`,
    :math:`0 \le s \le \bar k`; a(x) and b(x) have nonnegative coefficients over (Y, z)
    and :math:`z \ge c^{26} Y`, so each Y or z is at most :math:`\bar k` over its largest
    coefficient in a, and :math:`\bar k/\lambda` over its largest in b.
    ``-inf`` when the duals give none (a negative reduced cost on an unboxed variable,
    e.g. a diagonal entry at :math:`\lambda = 0`).
    """
    if r.status != 0 or r.row_dual is None or r.x is None or model.lam is None or model.kind != "paper":
        return -np.inf
    cone, n, lam = model.cone, model.cone.n, float(model.lam)
    fb, fw = model.fb, cone.fw
    p = model.point(r.x)
    a, b = model.dza @ p, model.dzb @ p
    worst = float((a + lam * b).max() / b.min()) if b.min() > 0 else np.inf
    kbar = 2.0 * max(worst if np.isfinite(worst) else 0.0, float(r.objective or 0.0))
    kb = kbar / lam if lam > 0 else np.inf
    lower = sp.csr_matrix((model.c26[fb], (fb, fw[fb])), shape=(cone.nfree, n))  # z >= c26 Y

    def most(d: sp.csc_matrix) -> NDArray[np.float64]:
        ycoef = sp.csc_matrix(d[:, :n] + d[:, n:] @ lower).max(axis=0).toarray().ravel()
        return np.concatenate([ycoef, sp.csc_matrix(d[:, n:]).max(axis=0).toarray().ravel()])

    with np.errstate(divide="ignore"):
        box = np.minimum(kbar / most(model.dza), kb / most(model.dzb))  # over (Y, z)
    cost, mat, row_lo, row_hi, col_lo, _ = model._model().arrays()
    full = np.asarray(r.row_dual, dtype=np.float64)
    y = full.copy()
    if model.rows25:
        y[np.concatenate(model.rows25)] = 0.0
    wscale = np.where(cone.bounded, model.ratio25, 0.0)  # e's variable in [0, wscale Y]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a nan box is no box
        ebox = np.where(cone.bounded, wscale * box[fw], box[n:])
        zbox = box[n:] / model.escale  # lower side: e <= z
        ebox = np.where(cone.bounded & ~model.up & ~np.isnan(zbox), np.minimum(ebox, zbox), ebox)
        ebox = np.where(np.isnan(ebox), np.inf, ebox)
    missing = np.flatnonzero(model.hcol < 0)
    da, db = model._dense(missing)
    have = model.hcol >= 0
    aux_lo = np.concatenate([col_lo[: 2 * n], [0.0]])
    aux_hi = np.concatenate([np.full(n, kbar), np.full(n, kb), [kbar]])
    blocks = []
    for dual in (y, full):  # rows (25) dropped (band) or kept (boxes): the better one per block
        rh = cost - mat.T @ dual
        rx = np.zeros(model.nx)
        rx[have] = rh[model.hcol[have]]
        rx[missing] = -(da.T @ dual[:n] + db.T @ dual[n : 2 * n])  # absent: no row (25) or (22)
        re = rx[n:]
        with np.errstate(invalid="ignore", over="ignore"):
            if dual is y:
                rho = rx[:n] + np.bincount(fw, weights=np.minimum(0.0, re * wscale), minlength=n)
                term = np.where(rho < 0, rho * box[:n], 0.0) + np.bincount(
                    fw, weights=np.where(~cone.bounded & (re < 0), re * box[n:], 0.0), minlength=n)
            else:
                term = np.where(rx[:n] < 0, rx[:n] * box[:n], 0.0) + np.bincount(
                    fw, weights=np.where(re < 0, re * ebox, 0.0), minlength=n)
        blocks.append(np.where(np.isnan(term), -np.inf, term))
    # rows: every row is <= 0 or = 0 but the free normalisation row; the same in both
    rows = ranged_bound(np.zeros(0), sp.csc_matrix((len(y), 0)), row_lo, row_hi, np.zeros(0), np.zeros(0), y)
    aux = (cost - mat.T @ y)[: 2 * n + 1]  # A, B, s touch no row (25)
    with np.errstate(invalid="ignore"):
        aux_term = np.where(aux > 0, aux * aux_lo, np.where(aux < 0, aux * aux_hi, 0.0))
    terms = np.concatenate([[rows], aux_term, np.maximum(blocks[0], blocks[1])])
    if not np.all(np.isfinite(terms)):
        return -np.inf
    return float(math.fsum(terms.tolist()))
