"""Compiled step check of the lattice-chain audit (numba, the optional ``fast`` extra).

:func:`metricdp.audit_structured.lattice_chain_audit` needs, for each lattice step
(a, b), the largest :math:`|\\log B[r, c, w] - \\log B[r + a, c + b, w]|` over every pair of
cells of the rectangle that both have a row (``index >= 0``) and every output w. The numpy
loop makes a temporary of each chunk of differences and reduces it twice; :func:`step_gap`
reads each pair of rows once and keeps the running maximum: the same float subtractions and
the same maximum, so the same result to the bit (the tests compare the two). Without numba,
``KERNELS`` is None and the numpy loop runs.
"""

from __future__ import annotations

from typing import Any

from ._numba import njit

__all__ = ["KERNELS"]

KERNELS: Any = None


if njit is not None:  # pragma: no branch

    @njit(cache=True, nogil=True)
    def step_gap(log_rows: Any, index: Any, a: int, b: int) -> float:
        n_rows, n_cols = index.shape
        k = log_rows.shape[1]
        worst = 0.0
        for r in range(n_rows - a):
            for c in range(max(0, -b), n_cols - max(0, b)):
                i = index[r, c]
                j = index[r + a, c + b]
                if i < 0 or j < 0:  # a box cell without a row
                    continue
                p = log_rows[i]
                q = log_rows[j]
                for w in range(k):
                    g = abs(p[w] - q[w])
                    if g > worst:
                        worst = g
        return worst

    class _Kernels:
        step_gap = staticmethod(step_gap)

    KERNELS = _Kernels()
