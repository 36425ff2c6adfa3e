r"""The common shape of a local frequency oracle: reports, support counts, channels, estimates.

Every oracle here is a randomizer :math:`R` from the categories :math:`\{0, \dots, k-1\}`
to a report space, and a *support* relation: report r supports category v. All of them
are "pure" in the sense of Wang, Blocki, Li, Jha (USENIX Security 2017, Section 4.1):

.. math::

    \Pr[R(v) \text{ supports } v] = p^*, \qquad
    \Pr[R(x) \text{ supports } v] = q^* \quad (x \ne v),

so the support count :math:`s_v` of N reports from a population with frequencies
:math:`\pi` has :math:`E[s_v] = N(q^* + (p^* - q^*)\pi_v)`. Two estimators follow:

* :meth:`FrequencyOracle.estimate` -- Wang et al.'s unbiased estimate
  :math:`\hat\pi_v = (s_v/N - q^*)/(p^* - q^*)` (entries may be negative);
* the **support channel** :meth:`FrequencyOracle.channel` -- the k x k stochastic matrix
  :math:`C[x, v] = \Pr[R(x) \text{ supports } v] / (p^* + (k-1) q^*)`, i.e.
  :math:`C = a I + b J` with :math:`a = (p^*-q^*)/Z`, :math:`b = q^*/Z`,
  :math:`Z = p^* + (k-1)q^*`. Since :math:`E[s]/\sum_v E[s_v] = \pi C` exactly, the
  library's :func:`~metricdp.estimation.ibu` and
  :func:`~metricdp.estimation.matrix_inversion` applied to the support counts and C are
  consistent estimators of :math:`\pi` (IBU maximises the multinomial pseudo-likelihood
  of the normalised support counts; for k-RR and Hadamard response, whose reports are
  single indices, the full channel :meth:`FrequencyOracle.matrix` gives the exact
  likelihood too). This is how the report spaces too large for a matrix (OUE's
  :math:`2^k` bit vectors, OLH's hash triples) reach the estimators.

**Privacy.** LDP is mDP under the discrete metric (distance 1 between any two distinct
categories), as for k-RR (:mod:`metricdp.mechanisms.krr`): each oracle's docstring proves
:math:`\Pr[R(x) = r] \le e^{\varepsilon} \Pr[R(x') = r]` for every report r, and on small
domains the tests audit :meth:`FrequencyOracle.matrix` with :func:`metricdp.audit.audit`.

**Randomness.** Every coin is drawn exactly from random bytes and, rarely, 64-bit words
(:func:`coins`; uniform integers by :func:`metricdp.sampling.uniform_below`): a biased coin with weights
:math:`(w_0, w_1)` (floats read as the rationals they denote) comes up 1 with probability
exactly :math:`w_1/(w_0+w_1)`, the value the audited matrix is built from (to rounding).
:meth:`FrequencyOracle.privatize` uses the OS's secure source by default and warns
(:class:`~metricdp.errors.PrivacyLeakWarning`) for any other; :meth:`FrequencyOracle.sample`
is the experiment entry point (no warning), as :meth:`metricdp.mechanisms.base.Mechanism.sample`
is.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_release_rng, check_rng, random_words
from .._validation import check_epsilon, check_int
from ..errors import ValidationError

__all__ = ["MATRIX_MAX_CELLS", "FrequencyOracle", "coins", "discrete_metric", "random_bytes", "word_coins"]

#: Largest full channel :meth:`FrequencyOracle.matrix` builds (cells); it exists for
#: audits and law tests on small domains.
MATRIX_MAX_CELLS = 4_000_000
#: Users processed together by the samplers and support counters that need a (users, k)
#: work array: bounds it to 2**22 cells (32 MiB of words).
_CHUNK_CELLS = 1 << 22
_TWO_64 = 2**64


def coins(w0: float, w1: float, count: int, rng: RandomSource) -> NDArray[np.bool_]:
    r"""``count`` independent coins, each True with probability exactly ``w1 / (w0 + w1)`` (rationals).

    With :math:`p` that rational (the floats read exactly, :class:`fractions.Fraction`) and
    :math:`t = \lfloor 256 p \rfloor`, a uniform random byte B gives True when
    :math:`B < t`, False when :math:`B > t`; on :math:`B = t` (probability 1/256) the coin
    is finished with the fractional part :math:`f = 256p - t` by :func:`word_coins`. So
    :math:`\Pr[\text{True}] = t/256 + f/256 = p`, from about one byte per coin instead of
    a 64-bit word: the release of the unary-encoding and subset-selection oracles, a coin
    per category per user, reads an eighth of the OS's random bytes it read a word at a time.
    """
    if not (w0 >= 0 and w1 >= 0 and w0 + w1 > 0 and math.isfinite(w0) and math.isfinite(w1)):
        raise ValidationError(f"coin weights must be finite, >= 0 and not both 0, got ({w0!r}, {w1!r})")
    n = int(count)
    p = Fraction(w1) / (Fraction(w0) + Fraction(w1))
    if p == 1 or p == 0:
        return np.full(n, p == 1)
    scaled = p * 256
    t = math.floor(scaled)
    b = random_bytes(rng, n)
    out = b < np.uint8(t)
    tie = np.flatnonzero(b == np.uint8(t))
    if tie.size:
        out[tie] = word_coins(scaled - t, tie.size, rng)
    return out


def word_coins(p: Fraction, count: int, rng: RandomSource) -> NDArray[np.bool_]:
    r"""``count`` coins, each True with probability exactly ``p`` (a rational in [0, 1)), a word at a time.

    With :math:`t = \lfloor 2^{64} p \rfloor`, a uniform 64-bit word W gives True when
    :math:`W < t`, False when :math:`W > t`; on :math:`W = t` (probability :math:`2^{-64}`)
    the coin is finished by :func:`_finish_coin` with the fractional part
    :math:`f = 2^{64}p - t`. So :math:`\Pr[\text{True}] = t/2^{64} + f/2^{64} = p`.
    """
    scaled = p * _TWO_64
    t = math.floor(scaled)
    words = random_words(rng, int(count))
    out = words < np.uint64(t)
    for i in np.flatnonzero(words == np.uint64(t)):  # probability 2**-64 per coin
        out[i] = _finish_coin(scaled - t, rng)
    return out


def random_bytes(rng: RandomSource, count: int) -> NDArray[np.uint8]:
    """``count`` independent uniform bytes: the bytes of :func:`~metricdp._random.random_words`."""
    n = int(count)
    return random_words(rng, -(-n // 8)).view(np.uint8)[:n]


def _finish_coin(frac: Fraction, rng: RandomSource) -> bool:
    """True with probability exactly ``frac`` (in [0, 1)): the same comparison, word after word."""
    while True:
        scaled = frac * _TWO_64
        t = math.floor(scaled)
        w = int(random_words(rng, 1)[0])
        if w != t:
            return w < t
        frac = scaled - t


def discrete_metric(k: int) -> NDArray[np.float64]:
    """The discrete metric on k categories: LDP is mDP under it."""
    return 1.0 - np.eye(k)


def chunks(n: int, k: int) -> range:
    """Start offsets of user chunks of at most ``_CHUNK_CELLS`` cells of width k."""
    return range(0, n, max(1, _CHUNK_CELLS // max(1, k)))


class FrequencyOracle(ABC):
    """An eps-LDP frequency oracle on categories 0..k-1 (see the module docstring)."""

    #: Short name, used in memo scopes and reprs.
    name: str = ""

    def __init__(self, k: int, epsilon: float) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.epsilon = check_epsilon(epsilon)
        #: :math:`e^\varepsilon` as the float every weight is built from.
        self.e_eps = math.exp(self.epsilon)
        if not math.isfinite(self.e_eps):
            raise ValidationError(f"epsilon {self.epsilon!r} is too large: e^epsilon overflows")

    # ------------------------------------------------------------------ law
    @property
    @abstractmethod
    def p_star(self) -> float:
        """Probability that a report supports the true category."""

    @property
    @abstractmethod
    def q_star(self) -> float:
        """Probability that a report supports a given other category."""

    @abstractmethod
    def matrix(self) -> NDArray[np.float64]:
        """The full channel: ``matrix[x, j] = Pr[report with index j | x]`` (small domains only)."""

    @abstractmethod
    def report_index(self, reports: ArrayLike) -> NDArray[np.int64]:
        """The column of :meth:`matrix` of each report."""

    @abstractmethod
    def _draw(self, x: NDArray[np.intp], rng: RandomSource) -> NDArray[Any]:
        """One report per category in ``x`` (validated)."""

    @abstractmethod
    def support(self, reports: ArrayLike) -> NDArray[np.float64]:
        """Support counts :math:`s_v`: the number of reports supporting each category (shape (k,))."""

    @property
    def params(self) -> dict[str, Any]:
        """Parameters beyond k and eps that define the law (they enter the memo scope)."""
        return {}

    def _check_matrix_size(self, columns: int) -> None:
        if self.k * columns > MATRIX_MAX_CELLS:
            raise ValidationError(
                f"{self.name}: the full channel has {self.k} x {columns} cells (more than {MATRIX_MAX_CELLS}); "
                "use the support channel (channel()) instead"
            )

    # ------------------------------------------------------------------ sampling
    def check_values(self, values: ArrayLike) -> NDArray[np.intp]:
        """Category indices 0..k-1 as a 1-d intp array (one error naming the first bad one)."""
        x = np.asarray(values)
        if x.ndim != 1 or not (np.issubdtype(x.dtype, np.integer) or x.size == 0):
            raise ValidationError(f"values must be a 1-d array of category indices, got {x.dtype} {x.shape}")
        if x.size and (x.min() < 0 or x.max() >= self.k):
            bad = int(x[(x < 0) | (x >= self.k)][0])
            raise ValidationError(f"value {bad} is not a category index in 0..{self.k - 1}")
        return x.astype(np.intp)

    def sample(self, values: ArrayLike, rng: object = None) -> NDArray[Any]:
        """One report per value (experiments: a seed gives reproducible reports, no warning)."""
        return self._draw(self.check_values(values), check_rng(rng))

    def privatize(self, values: ArrayLike, rng: object = None) -> NDArray[Any]:
        """One report per value for release: the secure source unless told otherwise (then a warning)."""
        source = check_release_rng(rng)
        return self._draw(self.check_values(values), source)

    # ------------------------------------------------------------------ estimation
    def channel(self) -> NDArray[np.float64]:
        """The k x k support channel :math:`a I + b J` (module docstring), for IBU and inversion."""
        z = self.p_star + (self.k - 1) * self.q_star
        c = np.full((self.k, self.k), self.q_star / z)
        np.fill_diagonal(c, self.p_star / z)
        return c

    def estimate(self, support: ArrayLike, n: int) -> NDArray[np.float64]:
        r"""Wang et al.'s unbiased estimate :math:`(s_v/N - q^*)/(p^* - q^*)` from support counts of N reports.

        With confidence intervals: :func:`metricdp.intervals.oracle_intervals`.
        """
        s = np.asarray(support, dtype=np.float64)
        if s.shape != (self.k,):
            raise ValidationError(f"support must have shape ({self.k},), got {s.shape}")
        return self.estimate_of(s, n)

    def estimate_of(self, support: ArrayLike, n: int) -> NDArray[np.float64]:
        """:meth:`estimate` for the support counts of any categories (a candidate list), in their order."""
        s = np.asarray(support, dtype=np.float64)
        n = check_int(n, "n", minimum=1)
        return (s / n - self.q_star) / (self.p_star - self.q_star)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        r"""Variance of :meth:`estimate` for a category of true frequency f over N reports.

        :math:`\frac{q^*(1-q^*)}{N(p^*-q^*)^2} + \frac{f(1-p^*-q^*)}{N(p^*-q^*)}` (Wang et
        al. 2017, Theorem 2; the support indicators of distinct users are independent).
        """
        p, q = self.p_star, self.q_star
        return q * (1 - q) / (n * (p - q) ** 2) + frequency * (1 - p - q) / (n * (p - q))

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}(k={self.k}, epsilon={self.epsilon!r}{extra})"

    @property
    def scope(self) -> str:
        """Memo scope: a memoized report is reused only by an oracle with the same law."""
        extra = "".join(f",{k}={v!r}" for k, v in sorted(self.params.items()))
        return f"ldp:{self.name}:k={self.k},eps={self.epsilon!r}{extra}"
