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

On a large M one core's pass runs at the speed one core streams memory; :class:`DenseTeam` shares
each pass between threads (the caller and up to one helper by default, ``IBU_THREADS`` in
:mod:`metricdp.estimation`), each over a contiguous block of rows with a private share of the next
expectation, the shares summed in block order. The helpers wait on locks between updates, never
spinning: on a shared machine an idle helper costs no CPU.

All flush an iterate below ``floor`` (:data:`metricdp.estimation.IBU_FLOOR`) to 0 after
normalising, as the numpy loop does.

Without numba, ``KERNELS`` is None and the numpy loop runs.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import numpy as np

from ._numba import njit

__all__ = ["KERNELS", "DenseTeam", "row_blocks"]

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

    @njit(cache=True, nogil=True, fastmath=_FAST)
    def ibu_start(p: Any, q: Any, m: Any, den: Any, ratio: Any) -> None:
        """The first expectation ``den = p @ m`` and its ratio ``q / den`` (0 where den is 0)."""
        _expectation(p, m, den)
        for y in range(den.size):
            ratio[y] = q[y] / den[y] if den[y] > 0 else 0.0

    @njit(cache=True, nogil=True, fastmath=_FAST)
    def ibu_block(p: Any, m: Any, ratio: Any, new: Any, nxt: Any) -> float:
        """One block's share of an update: :func:`ibu_dense`'s pass on rows ``m`` (``p``, ``new`` the same rows)."""
        return _pass(p, m, ratio, new, nxt)

    @njit(cache=True, nogil=True)
    def ibu_combine(
        p: Any, q: Any, new: Any, nxts: Any, totals: Any, den: Any, ratio: Any, tol: float, floor: float
    ) -> bool:
        """Close an update from the blocks' shares, summed in block order; True when it has converged."""
        total = 0.0
        for b in range(totals.size):
            total += totals[b]
        for y in range(den.size):
            s = 0.0
            for b in range(nxts.shape[0]):
                s += nxts[b, y]
            den[y] = s / total
            ratio[y] = q[y] / den[y] if den[y] > 0 else 0.0
        diff = 0.0
        for x in range(p.size):  # normalise, flush below the floor, measure the change (as _finish)
            v = new[x] / total
            v = v if v >= floor else 0.0
            diff += abs(v - p[x])
            p[x] = v
        return diff <= tol

    KERNELS = (ibu_krr, ibu_dense)


def row_blocks(n_rows: int, threads: int) -> tuple[int, ...]:
    """Where :class:`DenseTeam` cuts M's ``n_rows`` rows into ``threads`` blocks: the inner bounds, multiples of 4.

    The compiled pass takes rows four at a time, so a bound on a multiple of 4 leaves every block but
    the last without a remainder; the blocks differ by at most four rows.
    """
    return tuple(min(n_rows, 4 * round(n_rows * b / threads / 4)) for b in range(1, threads))


#: Doubles between two working vectors of a :class:`DenseTeam`, and before and after them all.
_GAP = 128


def _padded(n: int) -> int:
    """``n`` doubles rounded up to whole 64-byte lines, plus :data:`_GAP`."""
    return -(-n // 8) * 8 + _GAP


def _apart(sizes: tuple[int, ...]) -> list[Any]:
    """Zeroed vectors of ``sizes`` doubles in one buffer, each on a 64-byte line and :data:`_GAP` doubles apart.

    The compiled loops run their sums in SIMD lanes when the vectors they store to and read from
    lie far enough apart (a check on the addresses), one at a time otherwise: the same sum in
    another order, other last bits. Fixed gaps, also from any other allocation, fix the choice.
    """
    buf = np.zeros(_GAP + sum(_padded(n) for n in sizes) + 8)
    start = (-buf.ctypes.data % 64) // 8 + _GAP
    out = []
    for n in sizes:
        out.append(buf[start : start + n])
        start += _padded(n)
    return out


class _Helper:
    """A thread that runs one block's share of each update when told, and sleeps between updates.

    It waits on a lock (a futex: no spinning, no CPU while idle) for its turn and releases another when
    its share is done; the compiled kernel it runs releases the GIL.
    """

    def __init__(self, block: tuple[Any, Any, Any, Any], ratio: Any, totals: Any, index: int) -> None:
        self._block, self._ratio, self._totals, self._index = block, ratio, totals, index
        self._go, self._done = threading.Lock(), threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._busy = self._stop = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="metricdp-ibu", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            self._go.acquire()
            if self._stop:
                return
            try:
                p, m, new, nxt = self._block
                self._totals[self._index] = ibu_block(p, m, self._ratio, new, nxt)
            except BaseException as e:  # pragma: no cover - the kernel raises nothing on checked inputs
                self._error = e
            finally:
                self._done.release()

    def start(self) -> None:
        self._busy = True
        self._go.release()

    def wait(self) -> None:
        self._done.acquire()
        self._busy = False
        if self._error is not None:  # pragma: no cover
            raise self._error

    def close(self) -> None:
        if self._busy:  # the caller stopped mid-update (an interrupt): let the share finish first
            self._done.acquire()
            self._busy = False
        self._stop = True
        self._go.release()
        self._thread.join()


class DenseTeam:
    r"""A dense IBU whose pass over M is shared by ``len(bounds) + 1`` threads: the caller and helpers.

    M's rows are cut into contiguous blocks at ``bounds`` (:func:`row_blocks`). In each update every
    block's thread computes its rows' new weights :math:`\pi_t(x) b_x` and a private share
    :math:`\sum_{x \in B} \pi_t(x) b_x M[x, \cdot]` of the next expectation (:func:`ibu_block`, the
    pass of :func:`ibu_dense` on its rows); the caller runs the first block itself, then sums the
    shares in block order, normalises and tests convergence (:func:`ibu_combine`). The product is
    linear, so the sum of the shares is the single pass's next expectation; only the order of the
    additions differs, and it is fixed by the bounds: the same bounds give the same bits on any run
    (:func:`_apart` fixes where the working vectors lie). With no bounds it is :func:`ibu_dense`'s
    update on the caller's thread, to the last bits of a sum.

    The helpers start once per team and block on a lock between updates (no spinning: an idle
    helper costs no CPU); use the team as a context manager so that they stop.
    """

    def __init__(self, m: Any, bounds: tuple[int, ...] = ()) -> None:
        n_in, n_out = m.shape
        cuts = (0, *bounds, n_in)
        if any(a > b for a, b in itertools.pairwise(cuts)):
            raise ValueError(f"block bounds must be non-decreasing within 0..{n_in}, got {bounds}")
        self._m = m
        blocks = len(cuts) - 1
        self._p, self._new, self._den, self._ratio, shares = _apart((n_in, n_in, n_out, n_out, blocks * _padded(n_out)))
        self._nxts = shares.reshape(blocks, _padded(n_out))[:, :n_out]
        self._totals = np.zeros(blocks)
        self._blocks = [
            (self._p[a:b], m[a:b], self._new[a:b], self._nxts[i]) for i, (a, b) in enumerate(itertools.pairwise(cuts))
        ]
        self._helpers: list[_Helper] = []
        try:
            for i in range(1, len(self._blocks)):
                self._helpers.append(_Helper(self._blocks[i], self._ratio, self._totals, i))
        except BaseException:  # a thread that cannot start: stop those that did
            self.close()
            raise

    def __enter__(self) -> DenseTeam:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the helpers (each after its current share, if any)."""
        while self._helpers:
            self._helpers.pop().close()

    def run(self, p: Any, q: Any, tol: float, floor: float, max_iter: int) -> tuple[Any, int, bool]:
        """:func:`ibu_dense`'s loop from the iterate ``p`` (not modified): the estimate, updates, converged."""
        self._p[:] = p
        ibu_start(self._p, q, self._m, self._den, self._ratio)
        p0, m0, new0, nxt0 = self._blocks[0]
        for it in range(1, max_iter + 1):
            for h in self._helpers:
                h.start()
            self._totals[0] = ibu_block(p0, m0, self._ratio, new0, nxt0)
            for h in self._helpers:
                h.wait()
            if ibu_combine(self._p, q, self._new, self._nxts, self._totals, self._den, self._ratio, tol, floor):
                return self._p.copy(), it, True
        return self._p.copy(), max_iter, False
