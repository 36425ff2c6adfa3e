r"""Exact planar Laplace noise on a lattice: releases on coordinates with no floating point.

The continuous planar Laplace sampler (:func:`~metricdp.mechanisms.planar_laplace.sample_planar_laplace`)
is private only as an idealised real-valued mechanism: in floating point its releases can
carry an infinite privacy loss (Mironov, CCS 2012; ``docs/proofs/exact_sampling.md``,
section 4). This module releases on the lattice :math:`h\mathbb{Z}^2` instead, drawing the
lattice offset K with probability exactly

.. math:: \Pr[K = k] = \frac{e^{-\alpha \lVert k \rVert_2}}{\sum_{j \in \mathbb{Z}^2} e^{-\alpha \lVert j \rVert_2}},
          \qquad \alpha = \varepsilon h,

the discrete analogue of the planar Laplace density (Andres et al., CCS 2013, Section 4),
from random bits and integer/rational arithmetic only, in the manner of the discrete
samplers of Canonne, Kamath and Steinke (NeurIPS 2020, Section 5):

* a proposal with independent discrete Laplace coordinates
  :math:`Q(k) \propto e^{-\beta \lVert k \rVert_1}` (their Algorithm 2), with a rational
  :math:`\beta \le \alpha / \sqrt 2`;
* acceptance with probability :math:`e^{-\gamma(k)}`,
  :math:`\gamma(k) = \alpha \lVert k \rVert_2 - \beta \lVert k \rVert_1 \ge 0` (as
  :math:`\lVert k \rVert_1 \le \sqrt 2 \lVert k \rVert_2`), by their Bernoulli(exp(-gamma))
  algorithm (Algorithm 1), each Bernoulli(p) for the irrational p decided by comparing
  lazily drawn bits with rational bounds on p that tighten until the answer is certain.

Accepted k has probability :math:`\propto e^{-\beta\lVert k\rVert_1} e^{-\gamma(k)} =
e^{-\alpha\lVert k\rVert_2}`: exactly the law above. For lattice inputs x = h i, x' = h i'
the release x + hK satisfies, for every lattice point z,
:math:`\Pr[z \mid x] / \Pr[z \mid x'] = e^{\alpha(\lVert z/h - i'\rVert - \lVert z/h - i\rVert)}
\le e^{\varepsilon \lVert x - x' \rVert}`: exactly :math:`\varepsilon`-geo-indistinguishable
on the lattice, for the releases as they are computed (proof in
``docs/proofs/exact_sampling.md``, section 5). Inputs off the lattice are first rounded to
it, which costs at most :math:`\varepsilon h \sqrt 2` extra (stated there).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_rng, random_words
from .._validation import check_epsilon
from ..errors import ValidationError

__all__ = ["BitStream", "bernoulli_exp", "discrete_laplace", "lattice_laplace_offsets", "sample_lattice_laplace"]

#: ``bounds(m) -> (lo, hi)``: rationals with lo <= value * 2**m <= hi.
Bounds = Callable[[int], tuple[Fraction, Fraction]]
#: A rational just below 1/sqrt(2): beta = alpha * _INV_SQRT2_LOW <= alpha / sqrt(2).
_INV_SQRT2_LOW = Fraction(7071, 10000)
_MIN_ALPHA = Fraction(1, 10**9)  # the vectorised sampler's floor (lattice_batch.py)
_REFINE_BITS = 32  # bits added per refinement of a lazy comparison


class BitStream:
    """Random bits from a source's 64-bit words, handed out as Python integers."""

    def __init__(self, rng: RandomSource, chunk: int = 64) -> None:
        self.rng, self.chunk = rng, chunk
        self._words: list[int] = []

    def bits(self, k: int) -> int:
        """A uniform integer of ``k`` bits."""
        out, have = 0, 0
        while have < k:
            if not self._words:
                self._words = [int(w) for w in random_words(self.rng, self.chunk)]
            take = min(64, k - have)
            out = (out << take) | (self._words.pop() >> (64 - take))
            have += take
        return out

    def below(self, d: int) -> int:
        """A uniform integer in [0, d), by rejection on bit_length(d) bits."""
        k = max(1, (d - 1).bit_length())
        while True:
            u = self.bits(k)
            if u < d:
                return u

    def bernoulli(self, p: Fraction) -> bool:
        """True with probability p (rational in [0, 1])."""
        return self.below(p.denominator) < p.numerator


def _bernoulli_lazy(bits: BitStream, bounds: Bounds) -> bool:
    """True with probability p, given ``bounds(m) -> (lo, hi)`` with lo <= p * 2**m <= hi (rationals)
    whose width tends to 0. U is drawn bit block by bit block; U < p is decided once
    U's interval [j, j + 1) / 2**m lies below lo / 2**m or at or above hi / 2**m."""
    j, m = 0, 0
    while True:
        j = (j << _REFINE_BITS) | bits.bits(_REFINE_BITS)
        m += _REFINE_BITS
        lo, hi = bounds(m)
        if j + 1 <= lo:
            return True
        if j >= hi:
            return False


def bernoulli_exp(bits: BitStream, gamma_bounds: Bounds, upper: int) -> bool:
    r"""True with probability :math:`e^{-\gamma}` for :math:`0 \le \gamma \le` ``upper`` (an int).

    :math:`e^{-\gamma} = \prod_{i < N} e^{-\gamma/N}` with N = max(upper, 1), and each
    factor by Canonne, Kamath, Steinke (NeurIPS 2020) Algorithm 1: for
    :math:`0 \le g \le 1`, draw Bernoulli(g/k) for k = 1, 2, ... until one is 0; the
    count of successes is even with probability :math:`e^{-g}`.
    ``gamma_bounds(m)`` gives rationals (lo, hi) with lo <= gamma * 2**m <= hi.
    """
    n = max(1, int(upper))
    for _ in range(n):
        k = 1
        while True:
            kk = k  # Bernoulli(gamma / (n k))

            def piece(m: int, kk: int = kk) -> tuple[Fraction, Fraction]:
                lo, hi = gamma_bounds(m)
                return lo / (n * kk), hi / (n * kk)

            if not _bernoulli_lazy(bits, piece):
                break
            k += 1
        if k % 2 == 0:  # k - 1 successes: odd
            return False
    return True


def bernoulli_exp_minus(bits: BitStream, g: Fraction) -> bool:
    """Bernoulli(exp(-g)) for a rational g >= 0 (exact bounds)."""
    return bernoulli_exp(bits, lambda m: (g * 2**m, g * 2**m), math.ceil(g))


def discrete_laplace(bits: BitStream, beta: Fraction) -> int:
    r"""One draw with :math:`\Pr[x] \propto e^{-\beta |x|}` on the integers (beta > 0 rational).

    Canonne, Kamath, Steinke (NeurIPS 2020) Algorithm 2 with scale t/s = 1/beta.
    """
    s, t = beta.numerator, beta.denominator  # exp(-|x| s / t)
    while True:
        u = bits.below(t)
        if not bernoulli_exp_minus(bits, Fraction(u, t)):
            continue
        v = 0
        while bernoulli_exp_minus(bits, Fraction(1)):
            v += 1
        y = (u + t * v) // s
        negative = bits.bits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def lattice_laplace_offsets(alpha: Fraction, size: int, rng: RandomSource) -> NDArray[np.int64]:
    r"""``size`` exact draws of :math:`K \in \mathbb{Z}^2` with :math:`\Pr[K=k] \propto e^{-\alpha\lVert k\rVert_2}`.

    Bit by bit in Python integers: the reference (test oracle) of the vectorised
    :class:`~metricdp.mechanisms.lattice_batch.LatticeSampler`, which releases use.
    """
    if not alpha > 0:
        raise ValidationError(f"alpha must be > 0, got {alpha}")
    beta = alpha * _INV_SQRT2_LOW
    a_num, a_den = alpha.numerator, alpha.denominator
    bits = BitStream(rng)
    out = np.empty((size, 2), dtype=np.int64)
    for i in range(size):
        while True:
            a, b = discrete_laplace(bits, beta), discrete_laplace(bits, beta)
            q, l1 = a * a + b * b, abs(a) + abs(b)
            if q == 0:
                break  # gamma(0) = 0: always accepted

            def gamma_bounds(m: int, q: int = q, l1: int = l1) -> tuple[Fraction, Fraction]:
                # alpha sqrt(q) 2**m = sqrt(a_num^2 q 4^m) / a_den, floor(sqrt) by isqrt
                root = math.isqrt(a_num * a_num * q << (2 * m))
                exact = root * root == a_num * a_num * q << (2 * m)
                shift = beta * l1 * 2**m
                return Fraction(root, a_den) - shift, Fraction(root + (0 if exact else 1), a_den) - shift

            upper = math.ceil(alpha * (math.isqrt(q) + 1))  # >= alpha sqrt(q) >= gamma
            if bernoulli_exp(bits, gamma_bounds, upper):
                break
        out[i] = (a, b)
    return out


def sample_lattice_laplace(
    xy: ArrayLike, epsilon: float, cell: float, rng: object = None
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    r"""Exact planar Laplace releases on the lattice :math:`h\mathbb{Z}^2` (h = ``cell``).

    Each input is rounded to its nearest lattice point h i (ties to even), and the release is
    h (i + K) with K drawn exactly (module docstring). Returns the released coordinates
    (float64, the exact lattice point times h) and the released lattice indices (int64),
    which are what the guarantee is about: :math:`\varepsilon`-geo-indistinguishable between
    lattice inputs, and between any inputs x, x' with level
    :math:`\varepsilon(\lVert x - x'\rVert + h\sqrt 2)` (rounding moves each by <= h/sqrt(2)).

    Examples
    --------
    >>> xy, idx = sample_lattice_laplace([[0.0, 0.0], [10.0, 0.0]], 0.5, 1.0, rng=3)
    >>> idx.shape, bool(np.all(xy == idx * 1.0))
    ((2, 2), True)
    """
    epsilon = check_epsilon(epsilon)
    if not (isinstance(cell, int | float) and math.isfinite(cell) and cell > 0):
        raise ValidationError(f"cell must be a positive finite number, got {cell!r}")
    points = np.atleast_2d(np.asarray(xy, dtype=np.float64))
    if points.ndim != 2 or points.shape[1] != 2 or not np.all(np.isfinite(points)):
        raise ValidationError(f"xy must be finite points of shape (k, 2), got shape {np.shape(xy)}")
    grid = np.rint(points / cell)
    if np.abs(grid).max(initial=0.0) > 2.0**52:
        raise ValidationError("xy / cell exceeds 2**52: the lattice indices would not be exact")
    alpha = Fraction(epsilon) * Fraction(float(cell))
    if alpha < _MIN_ALPHA:  # offsets of order 1/alpha must stay far inside int64
        raise ValidationError(f"epsilon * cell = {float(alpha):.3g} is below {float(_MIN_ALPHA):g}: use a larger cell")
    from .lattice_batch import LatticeSampler  # the same law, vectorised (lattice_laplace_offsets is its oracle)

    offsets = LatticeSampler(alpha).offsets(len(points), check_rng(rng))
    released = grid.astype(np.int64) + offsets
    return (released * float(cell)).astype(np.float64), released.astype(np.int64)
