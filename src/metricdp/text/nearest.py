r"""Exact nearest-word search for a batch of noisy queries in two passes (Madlib-style mechanisms).

Same contract and same answer as :meth:`metricdp.pointspace.PointSpace.argmin_quadratic`:
for each row k the point p minimising :math:`a_k\lVert p\rVert^2 - 2 p\cdot w_k` in the
space's centred coordinates, ranked exactly by the caller's float64 ``exact(rows, cols)``
among the candidates that the float32 pass cannot separate, ties to the smaller index.

Why this is faster. In 50 dimensions no geometric pruning helps (a noisy query is
about as far from every cluster of GloVe as from its nearest word: k-means balls of
1,024 or 4,096 cells leave 80-100 % of the vocabulary to scan at eps 1 to 20), so every
query costs one float32 GEMM row against the whole vocabulary; what can be saved is
everything around the GEMM. (1) Threads: OpenBLAS's threaded GEMM synchronises its
threads on every call, which dominates on small calls and on a shared machine; here each
worker thread runs single-threaded BLAS on its own blocks of queries (numpy releases the
GIL in ``matmul`` and reductions), one worker per core this process may use. (2) Tiles:
a tile of scores (queries x points) small enough to stay in cache, so the GEMM and the
``min`` that follows do not go through main memory. (3) Two passes: the one-pass search
compares every score of a block with the running minimum while that minimum still falls
(about :math:`H_B` of B blocks per row). Here pass 1 keeps only each tile's smallest
score per row; with the final smallest fast score :math:`m_k` known, pass 2 recomputes
only the (row, tile) pairs whose smallest score is within :math:`2\tau_k` of
:math:`m_k` -- about one tile per row -- and refines their candidates exactly.

Proof that the answer is the one-pass answer. Let :math:`\tau_k` bound the float32
error of any evaluation of the score (:func:`metricdp.pointspace._tolerance`: Higham's
bound holds for any summation order, so for pass 1 and pass 2 alike), :math:`t` the true
score and :math:`p_m` the point where pass 1 saw :math:`m_k`. For every exact minimiser
:math:`p^*`: :math:`f_1(p^*) \le t(p^*) + \tau \le t(p_m) + \tau \le m_k + 2\tau`, so its
block is recomputed, and :math:`f_2(p^*) \le t(p^*) + \tau \le t(p_m) + \tau \le m_k + 2\tau`,
so it is a candidate. Both searches therefore rank a candidate set that contains every
exact minimiser by the same exact values with the same tie rule: the same index.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from .._resources import usable_cpus
from .._threads import blas_threads
from ..pointspace import PointSpace, _tolerance

__all__ = ["TwoPassSearch", "two_pass_argmin"]

_QUERIES = 512  # queries per pass-1 block
_TILE_BYTES = 2 * 2**20  # float32 scores per tile (queries x points): stays in cache
_MAX_PAIRS = 1 << 20  # candidate pairs refined at once (pairs x dim x 8 bytes)


def two_pass_argmin(
    space: PointSpace,
    a: NDArray[np.float64],
    w: NDArray[np.float64],
    exact: Callable[[NDArray[np.intp], NDArray[np.intp]], NDArray[np.float64]],
) -> NDArray[np.intp]:
    """The minimiser per row of :math:`a\\lVert p\\rVert^2 - 2p\\cdot w` (module docstring)."""
    a = np.asarray(a, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    out = np.empty(len(w), dtype=np.intp)
    space._v32  # noqa: B018  (built once here, not by the workers)

    def run(s: int) -> None:
        out[s : s + _QUERIES] = _block(space, a[s : s + _QUERIES], w[s : s + _QUERIES], exact, s)

    starts = range(0, len(w), _QUERIES)
    workers = min(len(starts), _workers())
    with blas_threads(1):
        if workers <= 1:
            for s in starts:
                run(s)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(run, starts))
    return out


def _workers() -> int:
    """Cores this process may use (each worker runs one BLAS thread)."""
    return usable_cpus()


def _block(space: PointSpace, a: NDArray, w: NDArray, exact: Callable, offset: int) -> NDArray[np.intp]:
    k, n = len(w), space.n
    coef = np.ascontiguousarray(np.column_stack([-2.0 * w, a]), dtype=np.float32)  # (k, dim+1)
    tol = _tolerance(a, w, float(space.sqnorms.max()), space.radius_max, space.dim)
    v32 = space._v32
    step = max(1, min(n, _TILE_BYTES // (4 * max(1, k))))
    starts = range(0, n, step)
    low = np.empty((k, len(starts)), dtype=np.float32)
    for b, start in enumerate(starts):  # pass 1: each block's smallest fast score per row
        np.min(coef @ v32[start : start + step].T, axis=1, out=low[:, b])
    thr = low.min(axis=1).astype(np.float64) + 2.0 * tol
    # compared in float32: the threshold rounded up, so no candidate is lost
    thr32 = np.nextafter(thr.astype(np.float32), np.float32(np.inf))
    hit_rows, hit_blocks = np.nonzero(low <= thr32[:, None])
    order = np.argsort(hit_blocks, kind="stable")
    hit_rows, hit_blocks = hit_rows[order], hit_blocks[order]
    bounds = np.searchsorted(hit_blocks, np.arange(len(starts) + 1))
    rows_all, cols_all = [], []
    for blk in np.flatnonzero(np.diff(bounds)):  # pass 2: the few tiles that hold a candidate
        rws = hit_rows[bounds[blk] : bounds[blk + 1]]
        lo = int(blk) * step
        scores = coef[rws] @ v32[lo : lo + step].T
        r, c = np.nonzero(scores <= thr32[rws, None])
        rows_all.append(rws[r])
        cols_all.append(c + lo)
    rows = np.concatenate(rows_all) if rows_all else np.empty(0, dtype=np.intp)
    cols = np.concatenate(cols_all) if cols_all else np.empty(0, dtype=np.intp)
    best_val = np.full(k, np.inf)
    best_idx = np.full(k, n, dtype=np.intp)
    for c0 in range(0, len(rows), _MAX_PAIRS):
        r, c = rows[c0 : c0 + _MAX_PAIRS], cols[c0 : c0 + _MAX_PAIRS]
        vals = exact(r + offset, c)
        order = np.lexsort((c, vals, r))
        r, c, vals = r[order], c[order], vals[order]
        first = np.ones(len(r), dtype=bool)
        first[1:] = r[1:] != r[:-1]
        r, c, vals = r[first], c[first], vals[first]
        better = (vals < best_val[r]) | ((vals == best_val[r]) & (c < best_idx[r]))
        best_val[r[better]] = vals[better]
        best_idx[r[better]] = c[better]
    return best_idx


class TwoPassSearch:
    """A :class:`PointSpace` seen through :func:`two_pass_argmin` (what
    :func:`metricdp.mechanisms.madlib.nearest_release` reads: ``vectors`` and ``argmin_quadratic``)."""

    def __init__(self, space: PointSpace) -> None:
        self.space = space
        self.vectors = space.vectors

    def argmin_quadratic(
        self,
        a: NDArray[np.float64],
        w: NDArray[np.float64],
        exact: Callable[[NDArray[np.intp], NDArray[np.intp]], NDArray[np.float64]],
    ) -> NDArray[np.intp]:
        return two_pass_argmin(self.space, a, w, exact)
