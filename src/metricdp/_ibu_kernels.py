r"""Compiled IBU loops (numba, the optional ``fast`` extra): one row's whole iteration in one call.

:func:`metricdp.estimation.ibu` spends about a dozen numpy calls per update; on k = 100
categories each call's overhead outweighs the arithmetic, and multi-freq-ldpy's numba IBU
was faster per update (benchmarks/RESULTS.md, "IBU against multi-freq-ldpy"). These kernels run the same
update, the same stopping rule and the same 0/0 convention as the numpy loop in
``estimation.py`` (which stays the reference the tests compare them with, to 1e-12), for
one row of counts at a time:

* :func:`ibu_krr` -- for :math:`M = aI + bJ`: :math:`(pM)_y = a p_y + b\sum p` and
  :math:`(rM^T)_x = a r_x + b \sum r`, O(k) per update;
* :func:`ibu_dense` -- any channel, in **one pass over M per update** and without BLAS. The
  update needs :math:`b = M r` (r the ratio of observed to expected frequencies) and then
  the next expectation :math:`\pi_{t+1} M`; as :math:`\pi_{t+1}(x) = \pi_t(x) b_x / Z`
  with :math:`Z = \sum_x \pi_t(x) b_x`, row x of M gives :math:`b_x` (a dot product) and,
  while it is in cache, adds :math:`\pi_t(x) b_x M[x, \cdot]` to the unnormalised next
  expectation, which is divided by Z once the pass is done (the product is linear). Two
  BLAS matrix-vector products read M twice per update; this reads it once, on one thread,
  so the dense update needs no bound on BLAS threads (nor the millisecond threadpoolctl
  takes to set one).

Both flush an iterate below ``floor`` (:data:`metricdp.estimation.IBU_FLOOR`) to 0 after
normalising, as the numpy loop does.

Without numba, ``KERNELS`` is None and the numpy loop runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._numba import njit

__all__ = ["KERNELS"]

KERNELS: Any = None


if njit is not None:  # pragma: no branch

    @njit(cache=True, nogil=True)
    def _finish(p: Any, new: Any, tol: float, floor: float) -> tuple[Any, bool]:
        total = new.sum()
        diff = 0.0
        for i in range(new.size):
            v = new[i] / total
            new[i] = v if v >= floor else 0.0
            diff += abs(new[i] - p[i])
        return new, diff <= tol

    @njit(cache=True, nogil=True)
    def ibu_krr(p: Any, q: Any, a: float, b: float, tol: float, floor: float, max_iter: int) -> tuple[Any, int, bool]:
        n = p.size
        ratio = np.empty(n)
        new = np.empty(n)
        for it in range(1, max_iter + 1):
            s = p.sum()
            rsum = 0.0
            for y in range(n):
                den = a * p[y] + b * s
                r = q[y] / den if (q[y] > 0 and den > 0) else 0.0
                ratio[y] = r
                rsum += r
            for x in range(n):
                new[x] = p[x] * (a * ratio[x] + b * rsum)
            new, done = _finish(p, new, tol, floor)
            p, new = new, p
            if done:
                return p, it, True
        return p, max_iter, False

    # reassociation and contraction let the row sums run in SIMD lanes with fused multiply-adds; no
    # flag that assumes finite or non-NaN values, so the comparisons with 0 keep their meaning
    @njit(cache=True, nogil=True, fastmath={"reassoc", "nsz", "contract"})
    def ibu_dense(p: Any, q: Any, m: Any, tol: float, floor: float, max_iter: int) -> tuple[Any, int, bool]:
        n_in, n_out = m.shape
        ratio = np.empty(n_out)
        new = np.empty(n_in)
        den = np.zeros(n_out)
        nxt = np.empty(n_out)
        for x in range(n_in):  # the first expectation, p @ m
            if p[x] != 0.0:
                for y in range(n_out):
                    den[y] += p[x] * m[x, y]
        for it in range(1, max_iter + 1):
            for y in range(n_out):
                ratio[y] = q[y] / den[y] if den[y] > 0 else 0.0
            nxt[:] = 0.0
            total = 0.0
            for x in range(n_in):  # one pass: b_x, then row x's share of the next expectation
                s = 0.0
                for y in range(n_out):
                    s += m[x, y] * ratio[y]
                w = p[x] * s
                new[x] = w
                total += w
                if w != 0.0:
                    for y in range(n_out):
                        nxt[y] += w * m[x, y]
            for y in range(n_out):
                den[y] = nxt[y] / total
            diff = 0.0
            for x in range(n_in):  # normalise, flush below the floor, measure the change (as _finish)
                v = new[x] / total
                v = v if v >= floor else 0.0
                diff += abs(v - p[x])
                p[x] = v
            if diff <= tol:
                return p, it, True
        return p, max_iter, False

    KERNELS = (ibu_krr, ibu_dense)
