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
  takes to set one). The rows go four at a time, and the dot products of the next four in
  the same loop as the current four's share: from 1,000 categories M no longer fits the
  core's caches and the pass runs at the speed memory streams it, which a row at a time
  (a reduction, then a second loop over the row) does not reach.

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

    # Rows of M in blocks of four: a block's ratio and next-expectation loads serve four rows, its
    # four dot products run as independent sums, and the next block's dot products share the pass
    # that adds this block's share, so that the stream of M from memory never waits on the adds.
    # Reassociation and contraction let the sums run in SIMD lanes with fused multiply-adds; no
    # flag that assumes finite or non-NaN values, so the comparisons with 0 keep their meaning.
    _FAST = {"reassoc", "nsz", "contract"}

    @njit(cache=True, nogil=True, fastmath=_FAST, inline="always")
    def _dots(m: Any, x: int, ratio: Any) -> tuple[float, float, float, float]:
        m0, m1, m2, m3 = m[x], m[x + 1], m[x + 2], m[x + 3]
        s0 = s1 = s2 = s3 = 0.0
        for y in range(ratio.size):
            r = ratio[y]
            s0 += m0[y] * r
            s1 += m1[y] * r
            s2 += m2[y] * r
            s3 += m3[y] * r
        return s0, s1, s2, s3

    @njit(cache=True, nogil=True, fastmath=_FAST, inline="always")
    def _expectation(p: Any, m: Any, den: Any) -> None:
        """``den = p @ m``, four rows a pass over ``den``."""
        n_in, n_out = m.shape
        den[:] = 0.0
        full = n_in - n_in % 4
        for x in range(0, full, 4):
            p0, p1, p2, p3 = p[x], p[x + 1], p[x + 2], p[x + 3]
            m0, m1, m2, m3 = m[x], m[x + 1], m[x + 2], m[x + 3]
            for y in range(n_out):
                den[y] += p0 * m0[y] + p1 * m1[y] + p2 * m2[y] + p3 * m3[y]
        for x in range(full, n_in):
            px, mx = p[x], m[x]
            for y in range(n_out):
                den[y] += px * mx[y]

    @njit(cache=True, nogil=True, fastmath=_FAST, inline="always")
    def _pass(p: Any, m: Any, ratio: Any, new: Any, nxt: Any) -> float:
        """One pass over m: ``new = p * (m @ ratio)`` and ``nxt = new @ m``; returns ``new.sum()``."""
        n_in, n_out = m.shape
        full = n_in - n_in % 4
        nxt[:] = 0.0
        total = 0.0
        if full:
            s0, s1, s2, s3 = _dots(m, 0, ratio)
        for x in range(0, full, 4):
            w0, w1, w2, w3 = p[x] * s0, p[x + 1] * s1, p[x + 2] * s2, p[x + 3] * s3
            new[x], new[x + 1], new[x + 2], new[x + 3] = w0, w1, w2, w3
            total += w0
            total += w1
            total += w2
            total += w3
            a0, a1, a2, a3 = m[x], m[x + 1], m[x + 2], m[x + 3]
            if x + 4 < full:  # this block's share and the next block's dot products, one pass
                m0, m1, m2, m3 = m[x + 4], m[x + 5], m[x + 6], m[x + 7]
                s0 = s1 = s2 = s3 = 0.0
                for y in range(n_out):
                    r = ratio[y]
                    s0 += m0[y] * r
                    s1 += m1[y] * r
                    s2 += m2[y] * r
                    s3 += m3[y] * r
                    nxt[y] += w0 * a0[y] + w1 * a1[y] + w2 * a2[y] + w3 * a3[y]
            else:
                for y in range(n_out):
                    nxt[y] += w0 * a0[y] + w1 * a1[y] + w2 * a2[y] + w3 * a3[y]
        for x in range(full, n_in):  # the last n_in % 4 rows, one at a time
            mx = m[x]
            s = 0.0
            for y in range(n_out):
                s += mx[y] * ratio[y]
            w = p[x] * s
            new[x] = w
            total += w
            for y in range(n_out):
                nxt[y] += w * mx[y]
        return total

    @njit(cache=True, nogil=True, fastmath=_FAST)
    def ibu_dense(p: Any, q: Any, m: Any, tol: float, floor: float, max_iter: int) -> tuple[Any, int, bool]:
        n_in, n_out = m.shape
        ratio = np.empty(n_out)
        new = np.empty(n_in)
        den = np.empty(n_out)
        nxt = np.empty(n_out)
        _expectation(p, m, den)  # the first expectation, p @ m
        for it in range(1, max_iter + 1):
            for y in range(n_out):
                ratio[y] = q[y] / den[y] if den[y] > 0 else 0.0
            total = _pass(p, m, ratio, new, nxt)
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
