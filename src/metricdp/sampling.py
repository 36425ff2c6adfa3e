r"""Exact sampling from the rows of a finite mechanism, from random bits only.

Given a row :math:`p = (p_0, \dots, p_{n-1})` of non-negative float64 numbers (an audited
matrix row), :class:`ExactTable` draws output v with probability exactly

.. math:: \Pr[v] = \frac{p_v}{\sum_u p_u}

where the :math:`p_v` are read as the rational numbers the floats denote: no rounding,
no float uniform, nothing below :math:`2^{-53}` lost. This is the remedy for the
floating-point attacks on DP samplers (Mironov, "On significance of the least
significant bits for differential privacy", CCS 2012): the inverse-CDF sampler with
53-bit uniforms never draws outputs of probability below about :math:`2^{-53}` from some
inputs while it can from others, which makes a truncated geometric mechanism at
:math:`\varepsilon = 1` infinitely private-violating from n = 60 (``docs/proofs/exact_sampling.md``). The
method follows the discrete samplers of Canonne, Kamath and Steinke ("The discrete
Gaussian for differential privacy", NeurIPS 2020, Section 5): integer arithmetic on
random bits, never a float.

**Method** (proof in ``docs/proofs/exact_sampling.md``). Write every positive entry
exactly as :math:`p_j = m_j 2^{e_j}` (53-bit integer :math:`m_j`). With :math:`E` the
smallest :math:`e_j` of the row, the entries are the integers :math:`W_j = m_j
2^{e_j - E}`, their prefix sums :math:`C_0 = 0 \le C_1 \le \dots \le C_n = T`, and
drawing v is drawing an integer R uniform in :math:`[0, T)` and returning the k with
:math:`C_k \le R < C_{k+1}`. The table keeps, per row, a scale :math:`\sigma` and the
truncated prefix sums :math:`H_k = \sum_{j<k} \lfloor W_j 2^{E-\sigma} \rfloor` as
uint64 (at most ``precision`` bits), so that :math:`C_k / 2^{\sigma-E} \in [H_k, H_k +
k]` (exactly :math:`H_k` on rows of small dynamic range, where nothing is truncated).
A draw takes one 64-bit word, reduces it to X uniform in :math:`[0, N)`,
:math:`N = H_n + \kappa_n`, by rejection, and reads R's leading part :math:`\lfloor R /
2^{\sigma - E}\rfloor = X`. The largest b with :math:`H_b \le X` (vectorised binary search)
is the answer whenever :math:`H_b + \kappa_b \le X`; otherwise (probability below
:math:`n^2 2^{-\mathrm{precision}}`, about 1e-11 for n = 1,000) the draw is finished with
Python integers against the exact prefix sums, reading further words only while R's
interval still straddles a boundary (:meth:`ExactTable._finish`). R beyond T
(possible only when the row is truncated) rejects the whole draw, which is redrawn.

Cost: one table of ``n + 1`` uint64 per row (the size of the matrix), built in
vectorised numpy; a draw is one 64-bit word, one remainder and :math:`\lceil \log_2(n+1)
\rceil` vectorised gather-compare steps.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._random import RandomSource, random_words
from ._readonly import frozen
from .errors import ValidationError

__all__ = [
    "DISTANCE_EXPONENT_CAP", "PRECISION", "WORD_BITS", "ExactTable", "clamp_distances", "draw_exact", "sample_exact",
    "uniform_below",
]

#: Bits per random word (numpy uint64).
WORD_BITS = 64
#: Bits of the truncated prefix sums: N < 2**56 + n, so a word is rejected with
#: probability below 2**-8 and a draw is undecided with probability below n**2 / 2**56.
PRECISION = 56
_BLOCK_ELEMENTS = 1 << 21  # matrix entries per temporary block of the table build
_EXACT_ROW_CACHE = 256  # rows whose exact integer prefix sums are kept


@dataclass
class ExactTable:
    """Per-row tables for exact sampling (see the module docstring).

    Build with :meth:`from_matrix`; draw with :meth:`sample`.

    Attributes
    ----------
    matrix : ndarray (rows, n), read-only float64
        The rows, kept for the exact fallback.
    prefix : ndarray (rows, n + 1), uint64
        Truncated prefix sums :math:`H_k` in units of :math:`2^\\sigma`.
    scale : ndarray (rows,), int64
        The binary exponent :math:`\\sigma` of each row's unit.
    truncated : ndarray (rows,), bool
        Rows with an entry not a multiple of the unit (then :math:`\\kappa_k = k`, else 0).
    total : ndarray (rows,), uint64
        N: the range of the leading part X.
    limit : ndarray (rows,), uint64
        A word w is accepted when ``w <= limit`` (``limit + 1`` is the largest multiple of
        N not above ``2**word_bits``), and then ``X = w mod N``.
    word_bits : int
    """

    matrix: NDArray[np.float64]
    prefix: NDArray[np.uint64]
    scale: NDArray[np.int64]
    truncated: NDArray[np.bool_]
    total: NDArray[np.uint64]
    limit: NDArray[np.uint64]
    word_bits: int = WORD_BITS
    _exact_rows: dict[int, tuple[int, list[int]]] = field(default_factory=dict, repr=False)

    @property
    def n(self) -> int:
        return int(self.matrix.shape[1])

    def row(self, i: int) -> ExactTable:
        """The table of row ``i`` alone (views of this table's arrays, no copy)."""
        s = slice(i, i + 1)
        return ExactTable(self.matrix[s], self.prefix[s], self.scale[s], self.truncated[s], self.total[s],
                          self.limit[s], self.word_bits)

    @property
    def nbytes(self) -> int:
        """Memory of the table proper (the matrix it reads is not counted)."""
        return sum(a.nbytes for a in (self.prefix, self.scale, self.truncated, self.total, self.limit))

    # ------------------------------------------------------------------ build
    @classmethod
    def from_matrix(cls, matrix: ArrayLike, *, word_bits: int = WORD_BITS, precision: int = PRECISION) -> ExactTable:
        """Tables for every row of ``matrix`` (non-negative, finite, each row with a positive entry).

        ``word_bits`` and ``precision`` exist for the enumeration tests, which run the same
        code with words of a few bits; releases use the defaults.
        """
        m = np.asarray(matrix, dtype=np.float64)
        if m.ndim != 2 or m.shape[1] < 1:
            raise ValidationError(f"matrix must be 2-D with at least one column, got shape {m.shape}")
        if not (1 <= precision < word_bits <= 64):
            raise ValidationError(f"need 1 <= precision < word_bits <= 64, got {precision}, {word_bits}")
        # one pass: NaN and negative entries fail >= 0; an infinite entry is caught by its row sum (_fill_block)
        if not (m >= 0).all():
            raise ValidationError("matrix must be finite and non-negative to be sampled")
        rows, n = m.shape
        prefix = np.empty((rows, n + 1), dtype=np.uint64)
        prefix[:, 0] = 0
        scale = np.empty(rows, dtype=np.int64)
        truncated = np.empty(rows, dtype=bool)
        step = max(1, _BLOCK_ELEMENTS // n)
        with np.errstate(over="ignore"):
            for start in range(0, rows, step):
                sl = slice(start, start + step)
                scale[sl], truncated[sl] = _fill_block(m[sl], prefix[sl], precision)
        return cls.from_prefix(m, prefix, scale, truncated, word_bits=word_bits, precision=precision)

    @classmethod
    def from_prefix(
        cls, matrix: NDArray[np.float64], prefix: NDArray[np.uint64], scale: NDArray[np.int64],
        truncated: NDArray[np.bool_], *, word_bits: int = WORD_BITS, precision: int = PRECISION,
    ) -> ExactTable:
        """The table of rows whose prefix sums, scales and flags :func:`_fill_block` (or a
        compiled twin equal to it bit for bit) has built; the arrays are frozen (copied into
        ``bytes`` unless they already are)."""
        n = matrix.shape[1]
        total = prefix[:, n] + np.where(truncated, np.uint64(n), np.uint64(0))
        if (total == 0).any():
            row = int(np.argmax(total == 0))
            raise ValidationError(f"matrix row {row} has no positive entry: nothing to sample")
        words = 1 << word_bits
        if int(total.max()) > words:  # cannot happen with n < 2**precision (see _fill_block)
            raise ValidationError(f"rows of {n} entries need more than {word_bits}-bit words at precision {precision}")
        limit = np.array([(words // t) * t - 1 for t in total.tolist()], dtype=np.uint64)
        return cls(frozen(matrix), frozen(prefix), frozen(scale), frozen(truncated), frozen(total), frozen(limit),
                   word_bits)  # backed by bytes: no caller can make them writable

    # ------------------------------------------------------------------ draw
    def sample(self, rows: ArrayLike, rng: RandomSource, *, _rounds: int | None = None) -> NDArray[np.intp]:
        """One exact draw from each listed row (the words come from ``rng``, in order).

        ``_rounds`` (tests only) stops after that many attempts and marks the draws still
        rejected with -1: one attempt's outcome is what the enumeration tests weigh.
        """
        rows = np.asarray(rows, dtype=np.intp)
        out = np.empty(len(rows), dtype=np.intp)
        pending = np.arange(len(rows))
        n = self.n
        mask = np.uint64((1 << self.word_bits) - 1)
        rounds = 0
        while pending.size:
            if rounds == _rounds:
                out[pending] = -1
                break
            rounds += 1
            r = rows[pending]
            w = random_words(rng, len(pending))
            if self.word_bits < 64:
                w = w & mask
            accept = w <= self.limit[r]
            x = w % self.total[r]
            pos = self._search(r, x)
            edge = self.prefix[r, pos] + np.where(self.truncated[r], pos.astype(np.uint64), np.uint64(0))
            decided = accept & (pos < n) & (edge <= x)
            out[pending[decided]] = pos[decided]
            again = ~accept
            for i in np.flatnonzero(accept & ~decided):  # rare: finish with exact integers
                v = self._finish(int(r[i]), int(x[i]), rng)
                if v is None:
                    again[i] = True
                else:
                    out[pending[i]] = v
            pending = pending[again]
        return out

    def _search(self, r: NDArray[np.intp], x: NDArray[np.uint64]) -> NDArray[np.intp]:
        """Largest k in 0..n with prefix[r, k] <= x (prefix[r, 0] = 0), per draw.

        Branch-free binary search: the answer stays in [pos, pos + size).
        """
        flat = self.prefix.reshape(-1)
        base = r * (self.n + 1)
        pos = base.copy()  # absolute index into flat
        cand = np.empty_like(pos)
        size = self.n + 1
        while size > 1:
            half = size // 2
            np.add(pos, half, out=cand)
            np.copyto(pos, cand, where=flat.take(cand) <= x)
            size -= half
        pos -= base
        return pos

    def _exact_row(self, row: int) -> tuple[int, list[int]]:
        """(E, exact prefix sums C_0..C_n of the integers W_j = p_j / 2**E) of one row."""
        hit = self._exact_rows.get(row)
        if hit is not None:
            return hit
        p = self.matrix[row]
        mant, ex = np.frexp(p)
        mi = (mant * 2.0**53).astype(np.int64).tolist()
        e = (ex.astype(np.int64) - 53).tolist()
        low = min(ej for mj, ej in zip(mi, e, strict=True) if mj > 0)
        weights = (mj << (ej - low) if mj > 0 else 0 for mj, ej in zip(mi, e, strict=True))
        result = (low, list(itertools.accumulate(weights, initial=0)))
        if len(self._exact_rows) >= _EXACT_ROW_CACHE:
            self._exact_rows.pop(next(iter(self._exact_rows)))
        self._exact_rows[row] = result
        return result

    def _finish(self, row: int, x: int, rng: RandomSource) -> int | None:
        """Finish a draw whose leading part is x: the output, or None when R >= T (reject).

        R = x * 2**G + Z with Z uniform below 2**G, G = sigma - E (> 0 whenever a draw is
        undecided); Z's bits are read a word at a time, most significant first
        (:meth:`_refine`), only while R's interval [lo, lo + 2**left) still meets a
        boundary C_k in its interior (:meth:`_decide`).
        """
        low, _ = self._exact_row(row)
        left = int(self.scale[row]) - low
        lo = x << left
        mask = (1 << self.word_bits) - 1
        while (k := self._decide(row, lo, left)) is None:
            lo, left = self._refine(lo, left, int(random_words(rng, 1)[0]) & mask)
        return None if k == self.n else k

    def _decide(self, row: int, lo: int, left: int) -> int | None:
        """k when every R in [lo, lo + 2**left) has C_k <= R < C_{k+1}; n when all are >= T; else None."""
        _, cums = self._exact_row(row)
        k = bisect.bisect_right(cums, lo) - 1
        if k >= self.n:
            return self.n
        return k if lo + (1 << left) <= cums[k + 1] else None

    def _refine(self, lo: int, left: int, word: int) -> tuple[int, int]:
        """Append the next ``min(word_bits, left)`` bits of R (the word's leading bits)."""
        take = min(self.word_bits, left)
        left -= take
        return lo + ((word >> (self.word_bits - take)) << left), left


def _fill_block(p: NDArray[np.float64], prefix: NDArray[np.uint64], precision: int) -> tuple[NDArray, NDArray]:
    """Fill ``prefix[:, 1:]`` for the rows ``p``; return their scales and truncation flags.

    sigma = exponent(float sum) - precision, so every entry is below 2**(sigma + precision + 1)
    and the truncated sum H_n <= T / 2**sigma < 2**precision (1 + n 2**-52): with
    n < 2**precision, N = H_n + n fits a word of more than precision + 1 bits.

    The units ``p_j / 2**sigma`` are computed in float64 and floored: scaling by a power of
    two is exact whenever the result is at least the smallest normal float (it is below
    2**(precision + 1), so it never overflows), and an entry whose scaled value is below 1
    has ``H``-weight 0 whether or not the scaling rounded it, so
    ``floor(p_j 2**-sigma)`` is exactly the integer ``floor(W_j 2**(E - sigma))`` of the
    method, and an entry is truncated exactly when it is positive and its scaled value is
    not an integer or is below 1 (``[fill-block]`` in docs/proofs/exact_sampling.md).
    """
    sums = p.sum(axis=1)
    if not np.all(np.isfinite(sums)):
        if not np.isfinite(p).all():
            raise ValidationError("matrix must be finite and non-negative to be sampled")
        raise ValidationError("matrix rows must have a finite sum to be sampled")
    _, top = np.frexp(sums)
    sigma = top.astype(np.int64) - precision
    # 2**-sigma is a normal float for -1022 <= -sigma <= 1023 (a multiplication is then exact
    # up to underflow, see above); other rows go through ldexp
    safe = (sigma >= -1023) & (sigma <= 1022)
    scaled = p * np.exp2(-np.where(safe, sigma, 0).astype(np.float64))[:, None]
    if not safe.all():
        scaled[~safe] = np.ldexp(p[~safe], -sigma[~safe, None])
    units = scaled.astype(np.uint64)  # truncation: the floor of a non-negative float below 2**64
    cut = (units != scaled).any(axis=1)
    # an entry scaled below the smallest float's reach only when sigma > 0 (the row sum >= 2**precision)
    down = np.flatnonzero(sigma > 0)
    if down.size:
        cut[down] |= ((units[down] == 0) & (p[down] > 0)).any(axis=1)
    np.cumsum(units, axis=1, out=prefix[:, 1:])
    return sigma, cut


def _fill_block_reference(
    p: NDArray[np.float64], prefix: NDArray[np.uint64], precision: int
) -> tuple[NDArray, NDArray]:
    """:func:`_fill_block` by integer mantissa shifts (the test oracle)."""
    sums = p.sum(axis=1)
    if not np.all(np.isfinite(sums)):
        raise ValidationError("matrix rows must have a finite sum to be sampled")
    _, top = np.frexp(sums)
    sigma = top.astype(np.int64) - precision
    mant, ex = np.frexp(p)
    mi = (mant * 2.0**53).astype(np.uint64)  # exact: p = mi * 2**(ex - 53)
    shift = ex.astype(np.int64) - 53 - sigma[:, None]
    shift[mi == 0] = 0
    left = np.clip(shift, 0, 63).astype(np.uint64)
    right = np.clip(-shift, 0, 63).astype(np.uint64)
    h = np.where(shift >= 0, mi << left, mi >> right)
    cut = (shift < 0) & ((h << right) != mi)
    np.cumsum(h, axis=1, out=prefix[:, 1:])
    return sigma, cut.any(axis=1)


def sample_exact(matrix: ArrayLike, inputs: ArrayLike, rng: RandomSource) -> NDArray[np.intp]:
    """One exact draw from row ``inputs[i]`` of ``matrix`` per i (builds a one-off table).

    Examples
    --------
    >>> import numpy as np
    >>> from metricdp._random import check_rng
    >>> row = np.array([[0.5, 1e-300, 0.5]])
    >>> sample_exact(row, [0, 0, 0], check_rng(1)).tolist()
    [0, 2, 2]
    """
    idx = np.asarray(inputs, dtype=np.intp)
    m = np.asarray(matrix, dtype=np.float64)
    used = np.unique(idx)
    if used.size and (used[0] < 0 or used[-1] >= m.shape[0]):
        raise ValidationError(f"row index outside 0..{m.shape[0] - 1}")
    table = ExactTable.from_matrix(m[used])
    return table.sample(np.searchsorted(used, idx), rng)


#: The largest :math:`\varepsilon d / 2` that matrix-free exponential-type samplers put in an
#: exponent: distances are clamped at :math:`1400/\varepsilon` (:func:`clamp_distances`), so
#: every weight :math:`e^{-\varepsilon d/2}` is at least :math:`e^{-700} > 10^{-305}`, a normal
#: float, and none underflows to 0.
DISTANCE_EXPONENT_CAP = 700.0


def clamp_distances(d: ArrayLike, epsilon: float) -> NDArray[np.float64]:
    r""":math:`\min(d, 2C/\varepsilon)` with :math:`C` = :data:`DISTANCE_EXPONENT_CAP`.

    Privacy: the score :math:`-\min(d(x,z), T)` is 1-Lipschitz in x whenever :math:`-d(x,z)`
    is (a minimum with a constant), so an exponential mechanism on the clamped score keeps
    its :math:`\varepsilon`-mDP proof word for word; it differs from the unclamped one only
    for outputs of weight below :math:`e^{-700}` relative to an output at distance 0. Without
    the clamp such weights underflow to 0 for one input and not for a neighbour: an
    infinite privacy loss (Mironov, CCS 2012).
    """
    return np.minimum(np.asarray(d, dtype=np.float64), 2.0 * DISTANCE_EXPONENT_CAP / float(epsilon))


def draw_exact(weights: ArrayLike, rng: RandomSource) -> NDArray[np.intp]:
    """Row i's index drawn with probability exactly ``weights[i, j] / sum_j weights[i, j]`` (rationals).

    Random words and integer arithmetic only (:class:`ExactTable`); every row needs a
    positive entry.
    """
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    return ExactTable.from_matrix(w).sample(np.arange(w.shape[0]), rng)


def uniform_below(k: ArrayLike, rng: RandomSource) -> NDArray[np.intp]:
    """For each k (>= 1, < 2**63), an integer uniform on {0, ..., k-1}, exactly (64-bit words by rejection)."""
    kk = np.asarray(k, dtype=np.uint64)
    if kk.size and (kk.min() < 1):
        raise ValidationError("uniform_below needs k >= 1")
    out = np.empty(kk.shape, dtype=np.uint64)
    todo = np.arange(kk.size)
    flat_k = kk.reshape(-1)
    flat = out.reshape(-1)
    # accept a word w < floor(2^64 / k) * k; then w mod k is uniform
    limit = (np.uint64(2**64 - 1) // flat_k) * flat_k
    while todo.size:
        w = random_words(rng, todo.size)
        ok = w < limit[todo]
        flat[todo[ok]] = w[ok] % flat_k[todo[ok]]
        todo = todo[~ok]
    return out.astype(np.intp)
