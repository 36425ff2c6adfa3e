r"""The ordered pairs of the mechanism LP's privacy rows: which follow from others, and how they are scanned.

:func:`implied_pairs` finds the ordered pairs whose rows the chains through a point between
them already impose, so the constraint generation (``core._solve_fast``) never scans them.
:func:`pair_blocks` cuts the pairs into the blocks every row scan goes through (the violation
scan of the constraint generation and of the scaled finish, the certificate's near-binding
scan, the repair's spread check): an (pairs, width) temporary of at most :data:`SCAN_ELEMENTS`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from ._solve import LOG_CAP

__all__ = ["COLLINEAR_TOL", "SCAN_ELEMENTS", "implied_pairs", "pair_blocks"]

#: Elements of one temporary of a row scan (pairs x width): 32 MiB of float64, a few in flight.
SCAN_ELEMENTS = 1 << 22

#: Relative slack of the collinearity test of :func:`implied_pairs`.
COLLINEAR_TOL = 1e-12


def pair_blocks(count: int, width: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` over ``count`` pairs (or rows), so that a block times ``width`` stays within
    :data:`SCAN_ELEMENTS` (at least one pair a block)."""
    block = max(1, SCAN_ELEMENTS // max(width, 1))
    for start in range(0, count, block):
        yield start, min(start + block, count)


def implied_pairs(distances: NDArray[np.float64], level: float) -> NDArray[np.bool_]:
    r"""Ordered pairs (u, v) whose privacy rows follow from shorter ones.

    Pair (u, v) is *implied* when some :math:`m \notin \{u, v\}` lies between them:
    :math:`d(u,m) + d(m,v) \le d(u,v)\,(1 + \tau)`, :math:`\tau` = :data:`COLLINEAR_TOL`
    (collinear cells of a grid, points on a shortest path). Then the rows (u, m, w) and
    (m, v, w) give :math:`M[u,w] \le e^{\ell d(u,m)} M[m,w] \le e^{\ell (d(u,m)+d(m,v))}
    M[v,w] \le e^{\ell d(u,v)(1+\tau)} M[v,w]`: row (u, v, w) up to a factor
    :math:`e^{\ell d \tau}`, i.e. an absolute slack of at most :math:`\ell d\tau \le
    20\tau` in probability, far below the :data:`VIOLATION_TOL` the constraint generation
    already accepts (and the repair and the audit still check every pair). (u, m) and
    (m, v) are strictly shorter (d(m, v) > 0, d(u, m) > 0), so by induction on the
    distance every implied row follows from the rows of non-implied pairs; the chains
    multiply the slack by at most n, still far below the tolerance. Only pairs with
    :math:`\ell d(u,v) < ` :data:`LOG_CAP` are dropped: a capped row is stricter than
    its chain (:func:`solve_raw`). O(n^3) work, one vectorised n x n step per u.
    """
    d = np.asarray(distances, dtype=np.float64)
    n = d.shape[0]
    out = np.zeros((n, n), dtype=bool)
    big = np.inf
    for u in range(n):
        via = d[u][:, None] + d  # via[m, v] = d(u, m) + d(m, v)
        via[u] = big  # m = u
        np.fill_diagonal(via, big)  # m = v
        out[u] = via.min(axis=0) <= d[u] * (1.0 + COLLINEAR_TOL)
    out[np.arange(n), np.arange(n)] = False
    return out & (level * d < LOG_CAP)
