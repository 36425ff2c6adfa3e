r"""Exact lattice planar Laplace, vectorised over rows: the same law as the bit-by-bit sampler, fast.

:class:`LatticeSampler` draws :math:`K \in \mathbb{Z}^2` with

.. math:: \Pr[K = k] = \frac{e^{-\alpha \lVert k \rVert_2}}{\sum_{j \in \mathbb{Z}^2} e^{-\alpha \lVert j \rVert_2}}

*exactly* (the law of :mod:`metricdp.mechanisms.lattice_laplace`), for many rows at once
with numpy. The algorithm is that module's: independent discrete Laplace proposals
:math:`Q(k) \propto e^{-\beta \lVert k \rVert_1}` with a dyadic :math:`\beta \le \alpha/\sqrt 2`,
accepted with probability :math:`e^{-\gamma(k)}`,
:math:`\gamma(k) = \alpha\lVert k\rVert_2 - \beta\lVert k\rVert_1 \ge 0`. Only the way each
comparison "U < t" with a uniform U in [0, 1) and an irrational threshold t is decided
changes (``docs/proofs/lattice_points.md``, sections 1-3):

* U is a real uniform read lazily: its first 64 bits are a word W, so
  :math:`U 2^{64} \in [W, W + 1)`;
* t is known through integer bounds :math:`L \le t\,2^{64} \le H`. If W < L then U < t;
  if W >= H then U >= t; those are *certain*, whatever the later bits of U;
* only when L <= W < H (probability at most (H - L) / 2^64 per comparison) are more bits of
  U drawn and t bounded in exact rational arithmetic (:func:`exp_neg_bounds`) until the
  answer is certain -- the bit-by-bit sampler's rule, run on the rare rows.

The geometric magnitudes compare W with a table of :math:`\lfloor q^g 2^{64}\rfloor`,
:math:`q = e^{-\beta}`, built once in exact integer interval arithmetic (so H = L + 1 and
the undecided case is W equal to a table entry: probability :math:`\le 2^{-48}` per
draw). The acceptance threshold :math:`e^{-\gamma}` is evaluated per row in float64 by
:func:`exp_neg_float` whose relative error is proved below :math:`2^{-42}`
(``docs/proofs/lattice_points.md``, section 2); the bounds are widened by :math:`2^{-32}`,
so a proof slack of :math:`2^{10}` separates the float error from the decision.

References: Canonne, Kamath, Steinke, *The discrete Gaussian for differential privacy*,
NeurIPS 2020, Algorithms 1-2 (discrete Laplace, Bernoulli(exp(-gamma)));
Andres et al., *Geo-indistinguishability*, CCS 2013, Section 4; Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., Section 5.1 (Horner's rule error bound).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource, random_words
from ..errors import ValidationError
from ._kernel_loader import LAZY, lattice_kernels

__all__ = ["Geometric", "LatticeSampler", "exp_neg_bounds", "exp_neg_float", "lazy_less"]

_KERNELS: Any = LAZY  # the compiled loops, loaded at first use (None: numpy)

#: ``bounds(m) -> (lo, hi)``: integers with lo <= t * 2**m <= hi for a threshold t in (0, 1].
IntBounds = Callable[[int], tuple[int, int]]

_P = 256  # bits of the fixed-point interval arithmetic that builds the tables
_TABLE_CAP = 1 << 16  # entries per geometric table (512 KiB)
_TAIL = 40.0  # a table covers P[G >= N] >= e^-40; beyond, memorylessness redraws
_REFINE = 32  # bits added to a lazy uniform per refinement
_MARGIN = 2.0**-32  # relative widening of the float acceptance bounds (the proved error is < 2**-42)
_GAMMA_REL = 2.0**-48  # |gamma_hat - gamma| <= _GAMMA_REL * (alpha r + beta l1) (proof, section 2)
_BIG = 1 << 31  # coordinates from here on take the exact path (q = a^2 + b^2 must fit int64)
_GAMMA_CAP = 60.0  # e^-gamma * 2**64 < 1 beyond: decided by W = 0 or not
_TWO64 = 2.0**64
_LN2 = math.log(2.0)
#: Horner coefficients 1/i! for i = 0..16 of e^f, f in [-2**-40, ln 2 + 2**-40].
_COEF = [1.0 / math.factorial(i) for i in range(17)]
_MIN_ALPHA = Fraction(1, 10**9)


# ------------------------------------------------------------------------- exact bounds
def exp_neg_bounds(x: Fraction, bits: int) -> tuple[int, int]:
    r"""Integers (lo, hi) with :math:`lo \le e^{-x} 2^{bits} \le hi` and hi - lo <= 4, for rational x >= 0.

    :class:`decimal.Decimal` division and ``exp`` are correctly rounded (Python docs,
    ``decimal``: "The result is correctly rounded"), so at ``prec`` digits the computed
    :math:`\hat e` satisfies :math:`|\hat e - e^{-x}| \le \rho\, e^{-x}` with
    :math:`\rho = 2(1 + x)\,10^{1-prec}`; the widening by that relative amount is exact
    (Fractions).

    >>> lo, hi = exp_neg_bounds(Fraction(1), 20)
    >>> lo <= math.exp(-1) * 2**20 <= hi
    True
    """
    if x < 0:
        raise ValidationError(f"x must be >= 0, got {x}")
    if x == 0:
        return 1 << bits, 1 << bits
    mag = math.log10(2.0 + 2.0 * float(x))
    prec = int(bits * 0.30103 + mag) + 8
    ctx = decimal.Context(prec=prec, rounding=decimal.ROUND_HALF_EVEN, Emin=-(10**9), Emax=10**9)
    d = ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))
    e = Fraction(ctx.exp(-d))
    rho = Fraction(2) * (1 + x) * Fraction(1, 10 ** (prec - 1))
    scaled = e * (1 << bits)
    lo = math.floor(scaled * (1 - rho))
    hi = math.ceil(scaled * (1 + rho))
    return max(lo, 0), hi


class LazyUniform:
    """A real uniform U in [0, 1) read lazily: after m bits, :math:`U 2^m \\in [j, j + 1)`."""

    def __init__(self, first: int, words: Callable[[int], NDArray[np.uint64]]) -> None:
        self.j, self.m, self._words = int(first), 64, words

    def less(self, bounds: IntBounds) -> bool:
        """Whether U < t, for t given by ``bounds(m) -> (lo, hi)``, lo <= t 2^m <= hi, exact in the limit."""
        while True:
            lo, hi = bounds(self.m)
            if self.j + 1 <= lo:
                return True
            if self.j >= hi:
                return False
            self.j = (self.j << _REFINE) | (int(self._words(1)[0]) >> (64 - _REFINE))
            self.m += _REFINE


def lazy_less(first: int, bounds: IntBounds, words: Callable[[int], NDArray[np.uint64]]) -> bool:
    """U < t for a lazy uniform whose first 64 bits are ``first`` (one comparison)."""
    return LazyUniform(first, words).less(bounds)


# ------------------------------------------------------------------ float exp with a bound
def exp_neg_float(x: NDArray[np.float64]) -> NDArray[np.float64]:
    r""":math:`e^{-x}` for float64 x in [0, 60], with relative error below :math:`2^{-42}` (proved).

    Only IEEE-754 correctly rounded operations (+, -, *, /) and exact scaling by powers of
    two: :math:`x = k \ln 2 + f`, :math:`e^{-x} = 2^{-k} / e^{f}`, :math:`e^{f}` by Horner's
    rule on the degree-16 Taylor polynomial (``docs/proofs/lattice_points.md``, section 2).
    ``np.exp`` is not used: its error is known only empirically, not documented as bounded.

    >>> float(abs(exp_neg_float(np.array([3.0]))[0] / math.exp(-3.0) - 1)) < 2**-42
    True
    """
    k = np.floor(x / _LN2)
    f = x - k * _LN2
    p = np.full_like(f, _COEF[-1])
    for c in _COEF[-2::-1]:
        p = p * f + c
    return np.ldexp(1.0 / p, -k.astype(np.int64))


# ------------------------------------------------------------------------ geometric tables
def _power_bounds(ql: int, qh: int, count: int) -> tuple[list[int], list[int]]:
    """L_g <= q^g 2^P <= H_g for g = 1..count, from ql <= q 2^P <= qh (round down / up)."""
    lows, highs = [ql], [qh]
    lo, hi = ql, qh
    for _ in range(count - 1):
        lo = (lo * ql) >> _P
        hi = -((-hi * qh) >> _P)
        lows.append(lo)
        highs.append(hi)
    return lows, highs


class _Level:
    """C = #{g in 1..N : U < t_g} for decreasing thresholds t_g, decided by a table of floor(t_g 2^64).

    A float guess of C (``mode`` 0: ``ceil(-ln U / p1) - 1``; 1: ``ceil(-ln(U(1 - p2) + p2) / p1) - 1``)
    only picks which two table entries to compare; a row whose guess is not confirmed by
    the integer comparisons ``table[C - 1] > W > table[C]`` is counted by binary search, and
    a row whose W equals an entry decides that threshold exactly (``exact(g)`` bounds t_g at
    any precision). The compiled kernel (``_lattice_kernels.level_count``) makes the same
    decisions.
    """

    def __init__(self, floors: list[int], exact: Callable[[int], IntBounds], mode: int, p1: float,
                 p2: float = 0.0, compiled: bool = True) -> None:
        self.size = len(floors)
        self.compiled = compiled
        self.desc = np.array(floors, dtype=np.uint64)  # floor(t_g 2^64), g = 1..N: non-increasing
        self.asc = self.desc[::-1].copy()
        self.exact, self.mode, self.p1, self.p2 = exact, mode, p1, p2

    def _guess(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        inner = u if self.mode == 0 else u * (1.0 - self.p2) + self.p2
        return np.ceil(-np.log(inner) / self.p1) - 1.0

    def certain(self, w: NDArray[np.uint64]) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        """(number of entries > W, whether W equals an entry) per row: numpy."""
        u = (w.astype(np.float64) + 0.5) * 2.0**-64
        c = np.clip(np.nan_to_num(self._guess(u), nan=0.0, posinf=self.size), 0, self.size).astype(np.int64)
        above = np.where(c > 0, self.desc[np.maximum(c - 1, 0)] > w, True)  # W < F_c: U < t_c
        below = np.where(c < self.size, self.desc[np.minimum(c, self.size - 1)] < w, True)  # W > F_{c+1}
        eq = np.zeros(len(w), dtype=bool)
        miss = np.flatnonzero(~(above & below))
        if len(miss):
            wm = w[miss]
            right = np.searchsorted(self.asc, wm, side="right")
            c[miss] = self.size - right
            eq[miss] = np.searchsorted(self.asc, wm, side="left") < right
        return c, eq

    def count(self, w: NDArray[np.uint64], words: Callable[[int], NDArray[np.uint64]]) -> NDArray[np.int64]:
        kernels = lattice_kernels(_KERNELS) if self.compiled else None
        if kernels is not None:
            c, eq = kernels["level_count"](w, self.desc, self.mode, self.p1, self.p2)
        else:
            c, eq = self.certain(w)
        for i in np.flatnonzero(eq):  # W equals entries: decide those thresholds exactly, in order
            wi = w[i]
            n_eq = int(np.searchsorted(self.asc, wi, side="right") - np.searchsorted(self.asc, wi, side="left"))
            lazy = LazyUniform(int(wi), words)
            for _ in range(n_eq):
                if not lazy.less(self.exact(int(c[i]) + 1)):
                    break
                c[i] += 1
        return c


def _floors(lows: list[int], highs: list[int], exact: Callable[[int], IntBounds]) -> list[int]:
    """floor(t_g 2^64) from P-bit bounds, resolved exactly where the bounds straddle an integer."""
    out = []
    shift = _P - 64
    for g, (lo, hi) in enumerate(zip(lows, highs, strict=True), start=1):
        a, b = lo >> shift, hi >> shift
        m = 64
        while a != b:  # t 2^64 is irrational: more bits separate it from the integer between
            m += 64
            lo2, hi2 = exact(g)(m)
            a, b = lo2 >> (m - 64), hi2 >> (m - 64)
        out.append(a)
    return out


class Geometric:
    r"""Exact draws of G with :math:`\Pr[G \ge g] = e^{-\beta g}` (g = 0, 1, ...), by rows, for a dyadic beta > 0.

    The geometric half of :class:`LatticeSampler` (its proposals' magnitudes, the tables of the
    module docstring), on its own: :meth:`laplace` turns it into the two-sided geometric
    (discrete Laplace) law :math:`\Pr[Z = z] \propto e^{-\beta |z|}` as CKS Algorithm 2 does
    (a sign bit; a negative zero is drawn again).

    Parameters
    ----------
    beta : Fraction
        A positive float's value (dyadic: exact in float and in rational arithmetic); a draw
        takes about 1 / (65,536 beta) table passes when beta is below 1/65,536.
    compiled : bool
        Count with the compiled kernel where numba is installed (True), or always with numpy
        (False: the same decisions, and no numba start in a process that needs nothing else
        compiled).
    """

    def __init__(self, beta: Fraction, *, compiled: bool = True) -> None:
        beta = Fraction(beta)
        b = float(beta)
        if Fraction(b) != beta or not b > 0:
            raise ValidationError(f"beta must be a positive float's value, got {beta}")
        self.beta = beta  # a float: exact in both worlds
        self.beta_f = b
        n = 1 if _TAIL / b <= _TABLE_CAP else min(_TABLE_CAP, math.ceil(1.0 / b))
        self.block = n  # G = n M + R, M ~ Geometric(q^n), R in 0..n-1 (memorylessness)
        rho_x = self.beta * n
        n_m = max(1, min(_TABLE_CAP, math.ceil(_TAIL / float(rho_x))))
        rl, rh = exp_neg_bounds(rho_x, _P)
        lows, highs = _power_bounds(rl, rh, n_m)
        # U < rho^m  <=>  m < -ln U / (beta n)
        self._m = _Level(_floors(lows, highs, self._exact_power), self._exact_power, 0, b * n, compiled=compiled)
        self._r: _Level | None = None
        if n > 1:
            ql, qh = exp_neg_bounds(self.beta, _P)
            lows, highs = _power_bounds(ql, qh, n)  # q^1..q^n
            nl, nh = lows[-1], highs[-1]
            one = 1 << _P
            s_lo = [((lo - nh) << _P) // (one - nl) for lo in lows[:-1]]
            s_hi = [-((-(hi - nl) << _P) // (one - nh)) for hi in highs[:-1]]
            # U < S_r  <=>  r < -ln(U (1 - q^n) + q^n) / beta
            self._r = _Level(_floors(s_lo, s_hi, self._exact_rest), self._exact_rest, 1, b, math.exp(-b * n),
                             compiled)

    # exact threshold bounds (rare path) ------------------------------------------------
    def _exact_power(self, m: int) -> IntBounds:
        x = self.beta * self.block * m  # t_m = rho^m = e^{-beta n m}
        return lambda bits: exp_neg_bounds(x, bits)

    def _exact_rest(self, r: int) -> IntBounds:
        n, beta = self.block, self.beta

        def bounds(bits: int) -> tuple[int, int]:  # (q^r - q^n) / (1 - q^n)
            extra = bits + 16
            al, ah = exp_neg_bounds(beta * r, extra)
            bl, bh = exp_neg_bounds(beta * n, extra)
            one = 1 << extra
            return ((al - bh) << bits) // (one - bl), -((-(ah - bl) << bits) // (one - bh))

        return bounds

    # sampling ----------------------------------------------------------------------------
    def _geometric(self, size: int, words: Callable[[int], NDArray[np.uint64]]) -> NDArray[np.int64]:
        """``size`` draws of G with P[G >= g] = e^{-beta g}."""
        out = np.zeros(size, dtype=np.int64)
        todo = np.arange(size)
        while len(todo):
            c = self._m.count(words(len(todo)), words)
            out[todo] += c * self.block
            todo = todo[c == self._m.size]  # M >= N: memoryless, draw again and add
        if self._r is not None:
            out += self._r.count(words(size), words)
        return out

    def laplace(self, size: int, rng: RandomSource) -> NDArray[np.int64]:
        """``size`` exact draws of Z with :math:`\\Pr[Z = z] \\propto e^{-\beta |z|}` on the integers.

        >>> z = Geometric(Fraction(1)).laplace(1000, np.random.default_rng(0))
        >>> z.shape, z.dtype
        ((1000,), dtype('int64'))
        """

        def words(count: int) -> NDArray[np.uint64]:
            return random_words(rng, count)

        out = np.empty(size, dtype=np.int64)
        todo = np.arange(size)
        while len(todo):
            mag = self._geometric(len(todo), words)
            neg = (words(len(todo)) & np.uint64(1)).astype(bool)
            ok = ~(neg & (mag == 0))  # CKS Algorithm 2: a negative zero is drawn again
            out[todo[ok]] = np.where(neg, -mag, mag)[ok]
            todo = todo[~ok]
        return out

class LatticeSampler(Geometric):
    r"""Exact draws of :math:`K \in \mathbb{Z}^2`, :math:`\Pr[K = k] \propto e^{-\alpha\lVert k\rVert_2}`, by rows.

    Parameters
    ----------
    alpha : Fraction
        :math:`\alpha = \varepsilon h > 0` (epsilon per unit times the lattice step).

    Examples
    --------
    >>> s = LatticeSampler(Fraction(1, 2))
    >>> k = s.offsets(1000, np.random.default_rng(0))
    >>> k.shape, k.dtype
    ((1000, 2), dtype('int64'))
    """

    def __init__(self, alpha: Fraction) -> None:
        alpha = Fraction(alpha)
        if not alpha > 0:
            raise ValidationError(f"alpha must be > 0, got {alpha}")
        if alpha < _MIN_ALPHA:
            raise ValidationError(f"alpha = {float(alpha):.3g} is below {float(_MIN_ALPHA):g}: use a larger cell")
        self.alpha = alpha
        self.alpha_f = float(alpha)
        b = float(alpha) * 0.7071067811865475 * (1.0 - 2.0**-30)
        while 2 * Fraction(b) ** 2 > alpha**2:  # beta <= alpha / sqrt(2), exactly
            b *= 1.0 - 2.0**-30
        super().__init__(Fraction(b))

    def _exact_accept(self, q: int, l1: int) -> IntBounds:
        a_num, a_den, beta = self.alpha.numerator, self.alpha.denominator, self.beta

        def bounds(bits: int) -> tuple[int, int]:  # e^{-gamma}, gamma = alpha sqrt(q) - beta l1
            p = bits + 16
            root = math.isqrt(a_num * a_num * q << (2 * p))
            g_lo = Fraction(root, a_den << p) - beta * l1
            g_hi = Fraction(root + 1, a_den << p) - beta * l1
            return exp_neg_bounds(max(g_hi, Fraction(0)), bits)[0], exp_neg_bounds(max(g_lo, Fraction(0)), bits)[1]

        return bounds

    def offsets(self, size: int, rng: RandomSource) -> NDArray[np.int64]:
        """``size`` exact draws of K, shape (size, 2)."""

        def words(count: int) -> NDArray[np.uint64]:
            return random_words(rng, count)

        out = np.empty((size, 2), dtype=np.int64)
        todo = np.arange(size)
        while len(todo):
            k = len(todo)
            mag_a, mag_b = self._geometric(k, words), self._geometric(k, words)
            signs = words(k)
            neg_a = (signs & np.uint64(1)).astype(bool)
            neg_b = (signs & np.uint64(2)).astype(bool)
            # discrete Laplace per axis: a negative zero is rejected (CKS Algorithm 2)
            ok = ~(neg_a & (mag_a == 0)) & ~(neg_b & (mag_b == 0))
            a = np.where(neg_a, -mag_a, mag_a)
            b = np.where(neg_b, -mag_b, mag_b)
            ok &= self._accept(a, b, words(k), words)
            done = todo[ok]
            out[done, 0], out[done, 1] = a[ok], b[ok]
            todo = todo[~ok]
        return out

    def _accept(self, a: NDArray[np.int64], b: NDArray[np.int64], w: NDArray[np.uint64],
                words: Callable[[int], NDArray[np.uint64]]) -> NDArray[np.bool_]:
        """Bernoulli(e^{-gamma(a, b)}) per row whose uniform starts with the word ``w``: exact.

        Float bounds y <= e^{-gamma} <= z (``docs/proofs/lattice_points.md``, section 2) give
        integer bounds floor(y 2^64 (1 - 2^-32)) <= t 2^64 <= ceil(z 2^64 (1 + 2^-32)); rows
        between them, and rows with a coordinate of 2^31 or more, are decided exactly.
        """
        kernels = lattice_kernels(_KERNELS)
        if kernels is not None:
            accept, unsure = kernels["accept"](a, b, w, self.alpha_f, self.beta_f, kernels["coef"])
        else:
            accept, unsure = self._accept_float(a, b, w)
        for i in np.flatnonzero(unsure):
            ai, bi = int(a[i]), int(b[i])
            accept[i] = lazy_less(int(w[i]), self._exact_accept(ai * ai + bi * bi, abs(ai) + abs(bi)), words)
        return accept

    def _accept_float(self, a: NDArray[np.int64], b: NDArray[np.int64], w: NDArray[np.uint64]) -> tuple[
        NDArray[np.bool_], NDArray[np.bool_]
    ]:
        """(accepted for certain, undecided) per row from the float bounds: numpy."""
        big = (np.abs(a) >= _BIG) | (np.abs(b) >= _BIG)
        sa, sb = np.where(big, 0, a), np.where(big, 0, b)
        q = sa * sa + sb * sb  # < 2^63: exact
        l1 = (np.abs(sa) + np.abs(sb)).astype(np.float64)  # < 2^33: exact
        ar = self.alpha_f * np.sqrt(q.astype(np.float64))
        bl = self.beta_f * l1
        gamma = ar - bl
        err = _GAMMA_REL * (ar + bl)  # >= 4 |gamma_hat - gamma|
        top = gamma + err  # >= gamma >= 0
        y = exp_neg_float(np.clip(top, 0.0, _GAMMA_CAP))
        # e^-gamma >= e^-top >= y (1 - 2^-42); e^-gamma <= e^-(top - 2 err) <= y (1 + 2^-42)(1 + 4 err)
        lo_int = np.where(top <= _GAMMA_CAP, np.floor(y * _TWO64 * (1.0 - _MARGIN)), 0.0).astype(np.uint64)
        hi = np.ceil(y * _TWO64 * ((1.0 + 4.0 * err) * (1.0 + _MARGIN)))
        big |= err > 0.25
        can_reject = hi < _TWO64
        hi_int = np.where(can_reject, hi, 0.0).astype(np.uint64)
        accept = (w < lo_int) | (q == 0)  # W + 1 <= lo <= t 2^64; gamma(0) = 0
        reject = can_reject & (w >= hi_int) & (q != 0)  # W >= hi >= t 2^64
        unsure = big | ~(accept | reject)
        return accept & ~big, unsure
