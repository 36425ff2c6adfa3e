r"""Compiled IBU loops (numba, the optional ``fast`` extra): one row's whole iteration in one call.

:func:`metricdp.estimation.ibu` spends about a dozen numpy calls per update; on k = 100
categories each call's overhead outweighs the arithmetic, and multi-freq-ldpy's numba IBU
was faster per update (benchmarks/RESULTS.md, "IBU against multi-freq-ldpy"). These kernels run the same
update, the same stopping rule and the same 0/0 convention as the numpy loop in
``estimation.py`` (which stays the reference the tests compare them with, to 1e-12), for
one row of counts at a time:

* :func:`ibu_krr` -- for :math:`M = aI + bJ`: :math:`(pM)_y = a p_y + b\sum p` and
  :math:`(rM^T)_x = a r_x + b \sum r`, O(k) per update;
* :func:`ibu_dense` -- any channel, two BLAS matrix-vector products (``np.dot``) on the
  observed outputs.

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
    def _finish(p: Any, new: Any, tol: float) -> tuple[Any, bool]:
        total = new.sum()
        diff = 0.0
        for i in range(new.size):
            new[i] /= total
            diff += abs(new[i] - p[i])
        return new, diff <= tol

    @njit(cache=True, nogil=True)
    def ibu_krr(p: Any, q: Any, a: float, b: float, tol: float, max_iter: int) -> tuple[Any, int, bool]:
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
            new, done = _finish(p, new, tol)
            p, new = new, p
            if done:
                return p, it, True
        return p, max_iter, False

    @njit(cache=True, nogil=True)
    def ibu_dense(p: Any, q: Any, m: Any, tol: float, max_iter: int) -> tuple[Any, int, bool]:
        n_in, n_out = m.shape
        ratio = np.empty(n_out)
        new = np.empty(n_in)
        for it in range(1, max_iter + 1):
            den = np.dot(p, m)  # one matrix for both products: half the memory traffic of m and m.T
            for y in range(n_out):
                ratio[y] = q[y] / den[y] if den[y] > 0 else 0.0
            back = np.dot(m, ratio)
            for x in range(n_in):
                new[x] = p[x] * back[x]
            new, done = _finish(p, new, tol)
            p, new = new, p
            if done:
                return p, it, True
        return p, max_iter, False

    KERNELS = (ibu_krr, ibu_dense)
