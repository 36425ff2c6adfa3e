r"""A weak-duality lower bound for a paper-fit LP from any row multipliers (issue 37's certificate).

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

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

__all__ = ["lower_bound"]


def lower_bound(
    cost: NDArray[np.float64],
    a: sp.spmatrix | sp.sparray,
    row_lo: NDArray[np.float64],
    row_hi: NDArray[np.float64],
    box_lo: NDArray[np.float64],
    box_hi: NDArray[np.float64],
    row_dual: NDArray[np.float64],
) -> float:
    """The weak-duality bound of the module docstring (``-inf`` when none is finite).

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
