r"""k-RR, optimized unary encoding, subset selection and Hadamard response.

Notation: k categories, :math:`E = e^{\varepsilon}` (the float), reports as described per
oracle. Each proof shows :math:`\Pr[R(x) = r] \le E \cdot \Pr[R(x') = r]` for all
categories :math:`x \ne x'` and reports r: eps-LDP, i.e. eps-mDP under the discrete metric
(:func:`~metricdp.ldp._base.discrete_metric`).

References
----------
.. [1] T. Wang, J. Blocki, N. Li, S. Jha. "Locally differentially private protocols for
   frequency estimation". USENIX Security 2017 (k-RR as "direct encoding", OUE).
.. [2] T. Wang, N. Li, S. Jha et al. "Mutual information optimally local private discrete
   distribution estimation". arXiv:1607.08025, 2016; M. Ye, A. Barg. "Optimal schemes for
   discrete distribution estimation under locally differential privacy". IEEE Trans.
   Inf. Theory 64(8), 2018 (subset selection).
.. [3] J. Acharya, Z. Sun, H. Zhang. "Hadamard response: estimating distributions
   privately, efficiently, and with little communication". AISTATS 2019.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, random_words
from .._validation import check_int
from ..errors import ValidationError
from ..sampling import uniform_below
from ._base import FrequencyOracle, chunks, coins

__all__ = ["GRR", "OUE", "HadamardResponse", "SubsetSelection"]



#: Users of one block of subset-selection reports: at least _SS_MIN_USERS (each of Floyd's
#: steps is a few numpy calls over the block, so few users a block make the calls' overhead
#: dominate), else as many as fit in _SS_CHUNK_CELLS cells (the block's random reads stay in cache).
_SS_MIN_USERS = 2048
_SS_CHUNK_CELLS = 1 << 22


class GRR(FrequencyOracle):
    r"""Generalized randomized response (k-RR, "direct encoding"): report one category.

    :math:`\Pr[R(x) = y] = E/(E + k - 1)` for y = x and :math:`1/(E + k - 1)` otherwise:
    reports r supports v iff r = v, so :math:`p^* = E/(E+k-1)`, :math:`q^* = 1/(E+k-1)`.

    **Proof of eps-LDP.** Every column holds the weights E (at its own row) and 1
    (elsewhere) over the common total :math:`E + k - 1`, so any ratio of two entries of a
    column is E, 1 or 1/E.

    The support channel equals the full channel (:meth:`matrix`), which is
    :func:`metricdp.mechanisms.krr.krr_matrix` up to rounding.
    """

    name = "grr"

    @property
    def p_star(self) -> float:
        return self.e_eps / (self.e_eps + self.k - 1)

    @property
    def q_star(self) -> float:
        return 1.0 / (self.e_eps + self.k - 1)

    def matrix(self) -> NDArray[np.float64]:
        self._check_matrix_size(self.k)
        return self.channel()

    def report_index(self, reports: ArrayLike) -> NDArray[np.int64]:
        return np.asarray(reports, dtype=np.int64)

    def _draw(self, x: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        # keep with weights (k - 1 : E); otherwise uniform over the k - 1 others
        keep = coins(self.k - 1.0, self.e_eps, x.size, rng)
        other = uniform_below(np.full(x.size, self.k - 1), rng)
        other += other >= x
        return np.where(keep, x, other).astype(np.intp)

    def support(self, reports: ArrayLike) -> NDArray[np.float64]:
        r = np.asarray(reports)
        return np.bincount(r.astype(np.intp), minlength=self.k).astype(np.float64)


def _pack_bits(bits: NDArray[np.uint8]) -> NDArray[np.int64]:
    """Rows of bits (column j has weight 2**j) as integers (k <= 62)."""
    return (bits.astype(np.int64) << np.arange(bits.shape[1], dtype=np.int64)).sum(axis=1)


class OUE(FrequencyOracle):
    r"""Optimized unary encoding (Wang et al. [1]_ Section 4.4): a k-bit vector per user.

    Encode x as the one-hot vector :math:`e_x`; report bit j independently: the 1 at
    position x stays 1 with probability :math:`p = 1/2`; every 0 becomes 1 with probability
    :math:`q = 1/(E + 1)` (coin weights ``(E, 1)``). A report supports v when its bit v is
    1: :math:`p^* = 1/2`, :math:`q^* = q`. Reports are uint8 arrays of shape (n, k).

    **Proof of eps-LDP.** :math:`\Pr[R(x) = B] = \prod_j \Pr[B_j \mid (e_x)_j]`, and
    :math:`e_x, e_{x'}` differ only at positions x and x', so

    .. math::

        \frac{\Pr[R(x)=B]}{\Pr[R(x')=B]}
        = \frac{\Pr[B_x \mid 1]\,\Pr[B_{x'} \mid 0]}{\Pr[B_x \mid 0]\,\Pr[B_{x'} \mid 1]}
        \le \frac{p}{q} \cdot \frac{1-q}{1-p} = \frac{1/2 \cdot E/(E+1)}{1/(E+1) \cdot 1/2} = E,

    the maximum being at :math:`B_x = 1, B_{x'} = 0` (each factor is
    :math:`\max(p/q, (1-p)/(1-q))` times :math:`\max((1-q)/(1-p), q/p)`, and
    :math:`p = 1/2 \ge q`).

    :meth:`matrix` (columns: the :math:`2^k` bit vectors, bit j of the column index is
    :math:`B_j`) exists for k <= 16.
    """

    name = "oue"

    @property
    def p_star(self) -> float:
        return 0.5

    @property
    def q_star(self) -> float:
        return 1.0 / (self.e_eps + 1.0)

    def matrix(self) -> NDArray[np.float64]:
        if self.k > 16:
            raise ValidationError(f"oue: the full channel over 2^{self.k} bit vectors is too large (k <= 16)")
        cols = np.arange(2**self.k, dtype=np.int64)
        bits = (cols[None, :] >> np.arange(self.k, dtype=np.int64)[:, None]) & 1  # (k, 2^k): bit j of column
        q = self.q_star
        p0 = np.where(bits == 1, q, 1.0 - q)  # bit j given a 0 there
        log0 = np.log(p0).sum(axis=0)  # every position 0
        # row x: position x is a 1 (probability 1/2 either way) instead of a 0
        return np.exp(log0[None, :] - np.log(p0) + math.log(0.5))

    def report_index(self, reports: ArrayLike) -> NDArray[np.int64]:
        return _pack_bits(np.asarray(reports, dtype=np.uint8))

    def _draw(self, x: NDArray[np.intp], rng: RandomSource) -> NDArray[np.uint8]:
        n, k = x.size, self.k
        out = np.empty((n, k), dtype=np.uint8)
        for start in chunks(n, k):
            xs = x[start:start + _chunk_len(n, k, start)]
            block = coins(self.e_eps, 1.0, xs.size * k, rng).reshape(xs.size, k)
            block[np.arange(xs.size), xs] = coins(1.0, 1.0, xs.size, rng)
            out[start:start + xs.size] = block
        return out

    def support(self, reports: ArrayLike) -> NDArray[np.float64]:
        b = np.asarray(reports)
        if b.ndim != 2 or b.shape[1] != self.k:
            raise ValidationError(f"oue reports must have shape (n, {self.k}), got {b.shape}")
        return b.sum(axis=0, dtype=np.float64)


def _chunk_len(n: int, k: int, start: int) -> int:
    step = chunks(n, k).step
    return min(step, n - start)


def optimal_subset_size(k: int, e_eps: float) -> int:
    r"""Subset size d minimising the estimate's variance, among :math:`\lfloor k/(E+1) \rfloor`
    and :math:`\lceil k/(E+1) \rceil` clamped to [1, k-1] (Wang et al. 2016 [2]_: the optimum is
    :math:`k/(E+1)`)."""
    base = k / (e_eps + 1.0)
    cands = {min(k - 1, max(1, math.floor(base))), min(k - 1, max(1, math.ceil(base)))}
    return min(sorted(cands), key=lambda d: SubsetSelection(k, math.log(e_eps), d=d).variance(1))


class SubsetSelection(FrequencyOracle):
    r"""Subset selection (d-SS; Wang et al. 2016, Ye and Barg 2018 [2]_): report d categories.

    :math:`\Pr[R(x) = S] = E/Z` if :math:`x \in S` and :math:`1/Z` if not, for every
    d-subset S, with :math:`Z = \binom{k-1}{d-1} E + \binom{k-1}{d}`. Sampled in two
    steps: include x with probability :math:`dE/(dE + k - d)` (coin weights
    ``(k - d, d E)``; it is :math:`\binom{k-1}{d-1}E/Z`), then complete with a uniform
    subset of the k-1 other categories of size d-1 (x included) or d (x left out). A report
    (uint8 indicator rows, shape (n, k)) supports v when :math:`v \in S`:
    :math:`p^* = dE/(dE+k-d)`, :math:`q^* = p^*\frac{d-1}{k-1} + (1-p^*)\frac{d}{k-1}`.
    d defaults to :func:`optimal_subset_size`.

    **Proof of eps-LDP.** Every :math:`\Pr[R(x)=S]` is E/Z or 1/Z with Z independent of x,
    so any ratio is E, 1 or 1/E.

    **The uniform subset, exactly.** Floyd's algorithm (Bentley and Floyd, "Programming
    pearls: a sample of brilliance", CACM 30(9), 1987) over the k-1 other categories,
    numbered 0..k-2: for j = k-1-m, ..., k-2 draw t uniform on {0..j} and add t to S, or j
    if t is already in S. By induction S is a uniform subset of {0..j} of size
    j-(k-1-m)+1 after step j (each such set arises from exactly |S| (t, previous set)
    pairs, each of probability :math:`1/\binom{j}{|S|-1} \cdot 1/(j+1)`), so a uniform
    m-subset at the end; other i is category i, or i + 1 from x on. Each step is one
    vectorised draw for all users of a block, and its uniform integer is exact: a 32-bit
    word w is accepted when :math:`w < \lfloor 2^{32}/(j+1) \rfloor (j+1)` and gives
    w mod (j+1) (:func:`_below`). About four bytes of the secure source per
    category reported, where a 64-bit key per category and two sorts took k words a user.
    """

    name = "ss"

    def __init__(self, k: int, epsilon: float, *, d: int | None = None) -> None:
        super().__init__(k, epsilon)
        self.d = optimal_subset_size(self.k, self.e_eps) if d is None else check_int(d, "d", 1, self.k - 1)

    @property
    def params(self) -> dict[str, Any]:
        return {"d": self.d}

    @property
    def p_star(self) -> float:
        return self.d * self.e_eps / (self.d * self.e_eps + self.k - self.d)

    @property
    def q_star(self) -> float:
        p, d, k = self.p_star, self.d, self.k
        return p * (d - 1) / (k - 1) + (1 - p) * d / (k - 1)

    def matrix(self) -> NDArray[np.float64]:
        if self.k > 16:
            raise ValidationError(f"ss: the full channel over the 2^{self.k} subsets is too large (k <= 16)")
        cols = np.arange(2**self.k, dtype=np.int64)
        bits = (cols[None, :] >> np.arange(self.k, dtype=np.int64)[:, None]) & 1
        size_ok = bits.sum(axis=0) == self.d
        z = math.comb(self.k - 1, self.d - 1) * self.e_eps + math.comb(self.k - 1, self.d)
        return np.where(size_ok[None, :], np.where(bits == 1, self.e_eps, 1.0) / z, 0.0)

    def report_index(self, reports: ArrayLike) -> NDArray[np.int64]:
        return _pack_bits(np.asarray(reports, dtype=np.uint8))

    def _draw(self, x: NDArray[np.intp], rng: RandomSource) -> NDArray[np.uint8]:
        n, k, d = x.size, self.k, self.d
        out = np.empty((n, k), dtype=np.uint8)
        include = coins(k - d, d * self.e_eps, n, rng)
        step = max(_SS_MIN_USERS, _SS_CHUNK_CELLS // k)
        for start in range(0, n, step):
            xs, inc = x[start:start + step], include[start:start + step]
            out[start:start + xs.size] = _floyd_subsets(k, d, xs, inc, rng)
        return out

    def support(self, reports: ArrayLike) -> NDArray[np.float64]:
        b = np.asarray(reports)
        if b.ndim != 2 or b.shape[1] != self.k:
            raise ValidationError(f"ss reports must have shape (n, {self.k}), got {b.shape}")
        return b.sum(axis=0, dtype=np.float64)


def _floyd_subsets(
    k: int, d: int, xs: NDArray[np.intp], inc: NDArray[np.bool_], rng: RandomSource
) -> NDArray[np.uint8]:
    """Subset-selection reports of one block of users: x's bit from ``inc``, then d - inc uniform
    others by Floyd's algorithm (:class:`SubsetSelection`), one vectorised step per j."""
    rows = xs.size
    flat = np.zeros(rows * k, dtype=np.uint8)
    base = np.arange(rows, dtype=np.intp) * k
    late = np.flatnonzero(~inc)  # m = d without x, d - 1 with it: the latter skip the first step
    words = random_words(rng, -(-d * rows // 2)).view(np.uint32)[:d * rows].reshape(d, rows)
    for s, j in enumerate(range(k - 1 - d, k - 1)):
        t = _below(words[s], j + 1, rng)
        b, xw = (base, xs) if s else (base[late], xs[late])
        if s == 0:
            t = t[late]
        pos = b + t + (t >= xw)  # the t-th other category
        flat[np.where(flat[pos] == 1, b + j + (j >= xw), pos)] = 1
    block = flat.reshape(rows, k)
    block[np.arange(rows), xs] = inc
    return block


def _below(w: NDArray[np.uint32], bound: int, rng: RandomSource) -> NDArray[np.intp]:
    """Uniform integers on {0..bound-1} from uniform 32-bit words w, exactly: a word at or above
    the largest multiple of bound below 2**32 is replaced by a fresh one (rejection), the rest
    taken mod bound."""
    limit = (2**32 // bound) * bound
    v: NDArray[np.intp] = w.astype(np.intp)
    bad = np.flatnonzero(v >= limit)
    while bad.size:  # probability below bound / 2**32 per word
        v[bad] = random_words(rng, bad.size) >> np.uint64(32)
        bad = bad[v[bad] >= limit]
    return v % bound


def _parity(v: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.bitwise_count(v).astype(np.int64) & 1


class HadamardResponse(FrequencyOracle):
    r"""Hadamard response (Acharya, Sun, Zhang [3]_, the high-privacy form): report one of K indices.

    K is the smallest power of two above k; category x is row x + 1 of the Sylvester
    Hadamard matrix :math:`H_K[i, j] = (-1)^{\mathrm{popcount}(i \wedge j)}` and
    :math:`C_x = \{y : H_K[x+1, y] = +1\}` (K/2 indices). The report is uniform on
    :math:`C_x` with probability :math:`E/(E+1)` and uniform on its complement otherwise:

    .. math:: \Pr[R(x) = y] = \frac{2}{K}\cdot\frac{E \text{ if } y \in C_x \text{ else } 1}{E + 1}.

    A report y supports v when :math:`y \in C_v`: :math:`p^* = E/(E+1)` and, as two
    distinct non-constant rows of :math:`H_K` agree on exactly half the columns and
    :math:`|C_x \cap C_v| = K/4`, :math:`q^* = 1/2`.

    **Proof of eps-LDP.** Every entry is :math:`2E/(K(E+1))` or :math:`2/(K(E+1))`: any
    ratio is E, 1 or 1/E.

    **Sampling, exactly.** Draw z uniform on [0, K) and the coin "in :math:`C_x`" (weights
    ``(1, E)``); if the parity of :math:`z \wedge (x+1)` disagrees with the coin, flip the
    lowest set bit of x + 1 in z. The flip is a bijection between :math:`C_x` and its
    complement, so z is uniform on the chosen half.

    Support counts come from the report histogram by the fast Walsh-Hadamard transform:
    :math:`s_v = (N + (H_K c)_{v+1})/2`.
    """

    name = "hr"

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon)
        self.K = 1 << int(self.k).bit_length()  # smallest power of two > k

    @property
    def p_star(self) -> float:
        return self.e_eps / (self.e_eps + 1.0)

    @property
    def q_star(self) -> float:
        return 0.5

    def matrix(self) -> NDArray[np.float64]:
        self._check_matrix_size(self.K)
        rows = np.arange(1, self.k + 1, dtype=np.int64)[:, None]
        cols = np.arange(self.K, dtype=np.int64)[None, :]
        inside = _parity(rows & cols) == 0
        return np.where(inside, self.e_eps, 1.0) * (2.0 / (self.K * (self.e_eps + 1.0)))

    def report_index(self, reports: ArrayLike) -> NDArray[np.int64]:
        return np.asarray(reports, dtype=np.int64)

    def _draw(self, x: NDArray[np.intp], rng: RandomSource) -> NDArray[np.int64]:
        z = uniform_below(np.full(x.size, self.K), rng).astype(np.int64)
        inside = coins(1.0, self.e_eps, x.size, rng)
        row = x.astype(np.int64) + 1
        wrong = (_parity(z & row) == 0) != inside
        return np.where(wrong, z ^ (row & -row), z)

    def support(self, reports: ArrayLike) -> NDArray[np.float64]:
        r = np.asarray(reports)
        if r.ndim != 1 or (r.size and (r.min() < 0 or r.max() >= self.K)):
            raise ValidationError(f"hr reports must be a 1-d array of indices in 0..{self.K - 1}")
        h = np.bincount(r.astype(np.intp), minlength=self.K).astype(np.float64)
        size = 1
        while size < self.K:  # in-place fast Walsh-Hadamard transform, one vectorised stage per bit
            h = h.reshape(-1, 2, size)
            h = np.concatenate([h[:, 0] + h[:, 1], h[:, 0] - h[:, 1]], axis=1).reshape(-1)
            size *= 2
        return (r.size + h[1:self.k + 1]) / 2.0
