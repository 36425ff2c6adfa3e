r"""Compiled table builds for the exact exponential-type text samplers (numba, the optional ``fast`` extra).

Per distinct input word, :class:`~metricdp.text.exponential.ExponentialText` turns one row of
the distance GEMM into weights :math:`e^{-\varepsilon\min(d, T)/2}` and then into the integer
prefix sums of :class:`~metricdp.sampling.ExactTable`. In numpy that is about fifteen passes
over the row (add, subtract, maximum, square root, minimum, multiply, exp, the table's
checks, sum, scale, floor, compare, cumulative sum, two copies into ``bytes``): at 400,000
words each pass is a few MB, and the passes, not the arithmetic, decided the cost. These
kernels fuse them, with the *same* IEEE operations in the same order, so the weights and the
tables are the numpy path's bit for bit (the tests compare them; the numpy path stays the
reference and runs when numba is absent):

* :func:`log_weights` -- ``(sq_x + sq_p) - G`` (G the GEMM tile ``2x . p``), ``max(., 0)``,
  ``sqrt``, 0 on the word itself, ``min(., T)``, times :math:`-\varepsilon/2`: exactly the
  element operations of :meth:`metricdp.pointspace.PointSpace.distances_from` and of
  :meth:`metricdp.text.exponential.ExponentialText.log_weights` (basic IEEE operations
  are correctly rounded, and numba contracts nothing into FMAs without ``fastmath``). The
  exponential itself stays numpy's ``exp`` (one call per cache-resident tile), so the float
  weights are numpy's whatever libm numba would have used.
* :func:`fill_row` -- :func:`metricdp.sampling._fill_block` for one row, fused: the scale
  :math:`\sigma` from the row's (numpy, pairwise) float sum, the floors
  :math:`\lfloor p_j 2^{-\sigma}\rfloor`, the truncation flag and the prefix sums, in one
  pass (the proof of the build is ``[fill-block]`` in ``docs/proofs/exact_sampling.md``;
  this is the same function of the row).

Without numba, ``KERNELS`` is None.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KERNELS"]

KERNELS: Any = None

try:  # pragma: no cover - exercised when numba is installed
    from .._ibu_kernels import njit
except ImportError:  # pragma: no cover
    njit = None

if njit is not None:  # pragma: no branch
    import math

    import numpy as np

    @njit(cache=True, nogil=True)
    def log_weights(
        g: Any, sq_rows: Any, sq_cols: Any, diag: Any, clamp: float, factor: float, out: Any, offset: int
    ) -> None:
        """``out[i, offset + j] <- factor * min(sqrt(max((sq_rows[i] + sq_cols[j]) - g[i, j], 0)), clamp)``,
        with distance 0 where ``j == diag[i]`` (``diag[i]`` outside the tile: none).

        Branch-free (``max``, ``min``), so the loop vectorises; the sign of a zero may differ
        from numpy's ``maximum`` here, and ``exp`` maps both zeros to 1.
        """
        rows, cols = g.shape
        for i in range(rows):
            a = sq_rows[i]
            for j in range(cols):
                out[i, offset + j] = min(math.sqrt(max((a + sq_cols[j]) - g[i, j], 0.0)), clamp) * factor
            k = diag[i]
            if 0 <= k < cols:
                out[i, offset + k] = 0.0 * factor

    @njit(cache=True, nogil=True)
    def fill_row(p: Any, total: float, precision: int, prefix: Any) -> tuple[int, bool, int]:
        """``prefix[1:]`` of row ``p`` (``prefix[0] = 0``); returns (sigma, truncated, status).

        status 0: built; 1: an entry is negative or NaN; 2: an entry is infinite; 3: the sum is
        not finite (the caller raises the error of :class:`~metricdp.sampling.ExactTable`).
        The usual case (the scale a normal power of two, precision <= 62) runs a branch-free
        loop: every scaled entry is below 2**(precision + 1) <= 2**63 (an entry is at
        most the float sum of non-negative entries), so the floor goes through int64.
        """
        n = p.shape[0]
        if not math.isfinite(total):
            for j in range(n):
                if not math.isfinite(p[j]):
                    return 0, False, 2
            return 0, False, 3
        _, top = math.frexp(total)
        sigma = top - precision
        safe = -1023 <= -sigma <= 1022
        acc = np.uint64(0)
        cut = False
        prefix[0] = 0
        if safe and precision <= 62:
            unit = math.ldexp(1.0, -sigma)
            down = sigma > 0
            bad = False
            for j in range(n):
                x = p[j]
                s = x * unit
                i = np.int64(s)  # exact floor: 0 <= s < 2**63 (a NaN or negative x is reported below)
                bad |= not x >= 0.0
                cut |= (np.float64(i) != s) | (down & (i == 0) & (x > 0.0))
                acc += np.uint64(i)
                prefix[j + 1] = acc
            if bad:
                return 0, False, 1
            return sigma, cut, 0
        unit = math.ldexp(1.0, -sigma) if safe else 1.0
        for j in range(n):
            x = p[j]
            if not x >= 0.0:
                return 0, False, 1
            s = x * unit if safe else math.ldexp(x, -sigma)
            u = np.uint64(s)
            if np.float64(u) != s or (sigma > 0 and u == 0 and x > 0.0):
                cut = True
            acc += u
            prefix[j + 1] = acc
        return sigma, cut, 0

    KERNELS = {"log_weights": log_weights, "fill_row": fill_row}
