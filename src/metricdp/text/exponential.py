r"""The exact exponential mechanism over a large vocabulary, without a matrix.

For an input word x, release y with probability

.. math:: P(y \mid x) = \frac{w_x(y)}{\sum_{z \in W} w_x(z)}, \qquad
          w_x(y) = e^{-\varepsilon \min(\hat d(x,y), T)/2}

(McSherry and Talwar, FOCS 2007, Theorem 6; as an mDP mechanism: Chatzikokolakis et al.,
PETS 2013, Section 3; Imola et al., UAI 2022, Section 3.1), with :math:`\hat d` the text
samplers' one float distance (:func:`metricdp.text.ball.pair_distances`) and :math:`T =
1400/\varepsilon` (:func:`metricdp.sampling.clamp_distances`: no weight underflows to 0).
Privacy: for inputs x, x' and any y, the numerator changes by at most
:math:`e^{\varepsilon d(x,x')/2}` and the normaliser by at most :math:`e^{\varepsilon
d(x,x')/2}` (triangle inequality :math:`|d(x,y) - d(x',y)| \le d(x,x')`), so
:math:`P(y|x) \le e^{\varepsilon d(x,x')} P(y|x')`: eps-mDP for the Euclidean metric.

Sampling by a ball and exact rejection. Nearly all of a word's mass sits close to it, so no
400,000-entry table is built. Per distinct input word x (a batch of words shares one fast
pass over the vocabulary, :func:`metricdp.text.ball.ball`):

1. the ball :math:`N = \{y : \hat d(x,y) \le \rho\}` exactly, with its weights :math:`w_x(y)`;
2. a bound :math:`B \ge w_x(y)` for every y outside N (their :math:`\hat d > \rho`, so
   :math:`w_x(y) \le e^{-\varepsilon \min(\rho, T)/2}`, computed by the same operations; the
   bound is that float times :math:`1 + 2^{-40}`, covering any error of ``exp`` below 2**-41
   relative, rounded up to few enough mantissa bits that :math:`R = m B` is exact, with
   :math:`m = |W \setminus N|`);
3. an exact table (:class:`~metricdp.sampling.ExactTable`) over the entries
   :math:`(w_x(y))_{y \in N}` and :math:`R`.

A draw takes an entry of the table; an entry of N is the release. The entry R proposes a
word y uniform outside N (as TEM's bottom candidate), which is accepted with probability
exactly :math:`w_x(y) / B` (:func:`metricdp.text.ball.bernoulli_ratio`); a rejected proposal
starts the draw again. *Proof of the law*: with :math:`Z = \sum_{y\in N} w_x(y) + R`, one
round releases :math:`y \in N` with probability :math:`w_x(y)/Z` and :math:`y \notin N`
with probability :math:`\frac{R}{Z} \frac{1}{m} \frac{w_x(y)}{B} = w_x(y)/Z`; rounds are
independent, so the release is y with probability :math:`w_x(y) / \sum_z w_x(z)` exactly,
the law above. Nothing but random 64-bit words and integer comparisons decides (Mironov,
CCS 2012).

The radius: :math:`\rho = \min(\frac{2}{\varepsilon}(\ln n + \ln 64), \rho_K)`, so that
:math:`R \le e^{-\ln 64} = 1/64` of the word's own weight 1 when eps is large, and, at
small eps, :math:`\rho_K` (the median distance from a fixed set of words to their 2,048th
nearest word) keeps the ball a few thousand words while a round still accepts with
probability at least :math:`\sum_{N} w_x / Z`. Any radius gives the same law; it only sets
the cost. Tables (ball, weights, bound) are kept in a bounded LRU cache (``cache_bytes``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from .._threads import blas_threads
from .._validation import check_epsilon, check_int
from ..errors import ValidationError
from ..pointspace import PointSpace
from ..sampling import ExactTable, clamp_distances, uniform_below
from .ball import ball, bernoulli_ratio, kth_distance, pair_distances
from .base import TextMechanism, check_point_space

__all__ = [
    "CACHE_BYTES", "BallExponential", "CumulativeCache", "ExponentialText", "exponential_epsilon", "outside",
    "sample_tables",
]

#: Default bytes of cached tables (a ball of a few hundred words takes a few KB).
CACHE_BYTES = 256 * 2**20
_BATCH = 32  # distinct words per fast pass over the vocabulary
_SPARE = math.log(64.0)  # at large eps the far words' proposal mass is at most 1/64 of the word's own
_K = 2048  # the small-eps radius: the median distance to the K-th nearest word
_PROBES = 32  # words (evenly spaced in the vocabulary) whose K-th nearest distance is measured
_EXP_SLACK = 1.0 + 2.0**-40  # covers any error of exp below 2**-41 relative (numpy's is below 2**-52)
_LIMIT = 16_384  # words of a ball measured exactly at most (a smaller radius beyond)


def exponential_epsilon(epsilon: float, **_: object) -> float:
    """Proven mDP level of the exponential mechanism with score -d and eps/2 in the exponent: eps."""
    return check_epsilon(epsilon)


class CumulativeCache:
    """An LRU cache of per-word tables bounded in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = check_int(max_bytes, "cache_bytes", minimum=0)
        self._tables: OrderedDict[int, tuple[NDArray, ...]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, word: int) -> tuple[NDArray, ...] | None:
        table = self._tables.get(word)
        if table is None:
            self.misses += 1
            return None
        self.hits += 1
        self._tables.move_to_end(word)
        return table

    def put(self, word: int, table: tuple[NDArray, ...]) -> None:
        size = sum(a.nbytes for a in table)
        if size > self.max_bytes:
            return
        if word in self._tables:
            return
        self._tables[word] = table
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, old = self._tables.popitem(last=False)
            self._bytes -= sum(a.nbytes for a in old)


def sample_tables(
    inputs: NDArray[np.intp],
    out: NDArray[np.intp],
    make: object,
    cache: CumulativeCache,
    draw: object,
    batch: int,
) -> None:
    """Shared driver: group ``inputs`` by word, get or build each word's table, draw its tokens.

    ``make(word_block) -> list of tables`` builds tables for a block of distinct words;
    ``draw(table, positions)`` writes releases into ``out[positions]``.
    """
    order = np.argsort(inputs, kind="stable")
    uniq, starts, counts = np.unique(inputs[order], return_index=True, return_counts=True)
    # most frequent first, so they enter the cache first
    by_count = np.argsort(-counts, kind="stable")
    # Words are drawn strictly in by_count order whatever the cache holds, so a seeded run
    # gives the same releases with a cold or a warm cache (the draws consume a variable
    # number of random words: the order of the draws is the order of the stream).
    queue: list[tuple[int, Any]] = []
    missing: list[int] = []

    def flush() -> None:
        built = dict(zip(missing, make(uniq[missing]), strict=True)) if missing else {}  # type: ignore[operator]
        for k, table in queue:
            if table is None:
                table = built[k]
                cache.put(int(uniq[k]), table)
            draw(table, order[starts[k] : starts[k] + counts[k]])  # type: ignore[operator]
        queue.clear()
        missing.clear()

    for k in by_count:
        table = cache.get(int(uniq[k]))
        queue.append((int(k), table))
        if table is None:
            missing.append(int(k))
            if len(missing) == batch:
                flush()
    flush()



def outside(inside: NDArray[np.intp], j: NDArray[np.intp]) -> NDArray[np.intp]:
    """The j-th word (0-based, increasing index) not in ``inside`` (sorted, distinct), for each j.

    Examples
    --------
    >>> outside(np.array([1, 2, 5]), np.array([0, 1, 2, 3])).tolist()
    [0, 3, 4, 6]
    """
    return j + np.searchsorted(inside - np.arange(len(inside)), j, side="right")


def _round_up(bound: float, bits: int) -> float:
    """The smallest float >= ``bound`` with at most ``bits`` significant bits (exact: power-of-two scalings)."""
    mant, exp = math.frexp(bound)
    return math.ldexp(math.ceil(math.ldexp(mant, bits)), exp - bits)


class BallExponential(TextMechanism):
    """The exact sampler of the module docstring for the weights :math:`e^{-\\varepsilon \\min(\\hat d, c)/2}`.

    ``cap`` c: :math:`T = 1400/\\varepsilon` for the exponential mechanism, TEM's truncation
    radius for TEM (:mod:`.tem`). Subclasses set the name, the parameters and the cap.
    """

    def __init__(self, space: PointSpace, epsilon: float, params: dict[str, Any], cap: float, cache_bytes: int) -> None:
        super().__init__(space, epsilon, params)
        self.cap = float(cap)
        self.cache = CumulativeCache(cache_bytes)
        self._radius: float | None = None

    def _weights(self, distances: NDArray[np.float64]) -> NDArray[np.float64]:
        """:math:`e^{-\\varepsilon \\min(d, c)/2}`, the one arithmetic of every weight (a new array)."""
        return np.exp(np.multiply(np.minimum(distances, self.cap), -0.5 * self.epsilon))

    def log_weights(self, words: NDArray[np.intp]) -> NDArray[np.float64]:
        """:math:`-\\varepsilon \\min(\\hat d(x, \\cdot), c)/2` for each word x of ``words``, shape (k, n).

        The sampler draws from the exponentials of these rows exactly (a reference: it never
        computes a whole row).
        """
        n = self.space.n
        every = np.arange(n, dtype=np.intp)
        rows = [pair_distances(self.space, np.full(n, int(x), dtype=np.intp), every) for x in np.atleast_1d(words)]
        return np.multiply(np.minimum(np.array(rows).reshape(-1, n), self.cap), -0.5 * self.epsilon)

    def ball_radius(self) -> float:
        """The ball's radius (module docstring): it sets the cost only, never the law."""
        if self._radius is None:
            space = self.space
            large_eps = 2.0 / self.epsilon * (math.log(space.n) + _SPARE)
            k = min(_K, space.n - 1)
            small_eps = large_eps
            if k >= 1:
                # a fixed public choice of words: the radius depends on the vocabulary and eps only
                probes = np.unique(np.linspace(0, space.n - 1, min(_PROBES, space.n)).astype(np.intp))
                small_eps = float(np.median(kth_distance(space, probes, k)))
            self._radius = min(large_eps, small_eps, self.cap)
        return self._radius

    def _make(self, words: NDArray[np.intp]) -> list[tuple[NDArray[np.intp], ExactTable, NDArray[np.float64]]]:
        """One (ball, exact table, bound) per word of ``words`` (module docstring, steps 1-3)."""
        n = self.space.n
        bits = 52 - n.bit_length()  # B with so few bits that m * B is exact (m < 2**n.bit_length())
        out = []
        for inside, dist, rho in ball(self.space, words, self.ball_radius(), limit=_LIMIT):
            bound = _round_up(float(self._weights(np.array([rho]))[0]) * _EXP_SLACK, bits)
            m = n - len(inside)
            row = np.empty((1, len(inside) + (m > 0)))
            row[0, : len(inside)] = self._weights(dist)
            if m:
                row[0, -1] = m * bound
            row.setflags(write=False)
            out.append((inside.astype(np.intp), ExactTable.from_matrix(row), np.array([bound])))
        return out

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        out = np.empty(len(inputs), dtype=np.intp)
        n = self.space.n

        def draw(table: tuple[NDArray[np.intp], ExactTable, NDArray[np.float64]], pos: NDArray) -> None:
            inside, exact, bound = table
            x = int(inputs[pos[0]])
            todo = np.arange(len(pos))
            while todo.size:  # one round per pass (module docstring); a rejected proposal draws again
                k = exact.sample(np.zeros(todo.size, dtype=np.intp), rng)
                hit = k < len(inside)
                out[pos[todo[hit]]] = inside[k[hit]]
                todo = todo[~hit]
                if not todo.size:
                    break
                y = outside(inside, uniform_below(np.full(todo.size, n - len(inside)), rng))
                w = self._weights(pair_distances(self.space, np.full(todo.size, x, dtype=np.intp), y))
                if np.any(w > bound[0]):  # cannot happen: every word outside the ball has d > rho
                    raise ValidationError(f"a weight outside the ball exceeds its bound ({w.max()!r} > {bound[0]!r})")
                accept = bernoulli_ratio(w, np.full(todo.size, bound[0]), rng)
                out[pos[todo[accept]]] = y[accept]
                todo = todo[~accept]

        with blas_threads(1):  # small products (a ball's pass, the radius): a thread pool costs more than it saves
            sample_tables(inputs, out, self._make, self.cache, draw, _BATCH)
        return out


class ExponentialText(BallExponential):
    """The exponential mechanism, exact, over a :class:`PointSpace` (see the module docstring).

    Parameters
    ----------
    space : PointSpace
        Euclidean vocabulary.
    epsilon : float
        The mDP level (weights :math:`e^{-\\varepsilon d/2}`).
    cache_bytes : int
        Bytes of per-word tables (ball, weights, bound) kept between calls.

    Examples
    --------
    >>> space = PointSpace.from_points([[0.0], [1.0], [3.0]], ["a", "b", "c"])
    >>> mech = ExponentialText(space, 2.0)
    >>> sorted(set(mech.sample([0] * 50, rng=1).tolist())) == [0, 1, 2]
    True
    """

    name = "exponential"

    def __init__(self, space: PointSpace, epsilon: float, *, cache_bytes: int = CACHE_BYTES) -> None:
        space = check_point_space(space)
        epsilon = check_epsilon(epsilon)
        # T = 1400/eps (metricdp.sampling.clamp_distances, where the clamp's privacy proof is): no
        # weight underflows to 0, which would be an infinite privacy loss
        super().__init__(space, epsilon, {"epsilon": epsilon}, float(clamp_distances(np.inf, epsilon)), cache_bytes)
