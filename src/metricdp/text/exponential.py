r"""The exact exponential mechanism over a large vocabulary, without a matrix.

For an input word x, release y with probability

.. math:: P(y \mid x) = \frac{e^{-\varepsilon d(x,y)/2}}{\sum_{z \in W} e^{-\varepsilon d(x,z)/2}}

(McSherry and Talwar, FOCS 2007, Theorem 6; as an mDP mechanism: Chatzikokolakis et al.,
PETS 2013, Section 3; Imola et al., UAI 2022, Section 3.1). Privacy: for inputs x, x'
and any y, the numerator changes by at most :math:`e^{\varepsilon d(x,x')/2}` and the
normaliser by at most :math:`e^{\varepsilon d(x,x')/2}` (triangle inequality
:math:`|d(x,y) - d(x',y)| \le d(x,x')`), so
:math:`P(y|x) \le e^{\varepsilon d(x,x')} P(y|x')`: eps-mDP for the Euclidean metric.

Matrix-free sampling. Tokens are grouped by distinct input word; per distinct word one
pass over the vocabulary in blocks computes the n log-weights :math:`-\varepsilon d/2`
(the word itself has d = 0, the largest weight 1, so nothing overflows), their
cumulative sums, and draws every token of that word by inverse CDF (one uniform each,
scaled by the table's own float total: exact up to the 2^-53 grid of the uniforms, the
floating-point caveat of Mironov, CCS 2012, shared by every float sampler). The tables
of recently used words stay in a bounded LRU cache (``cache_bytes``), so a repeated word
costs one binary search.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from .._validation import check_epsilon, check_int
from ..pointspace import PointSpace, check_memory
from ..sampling import ExactTable, clamp_distances
from .base import TextMechanism, check_point_space

__all__ = ["CACHE_BYTES", "CumulativeCache", "ExponentialText", "exponential_epsilon", "sample_tables"]

#: Default bytes of cached cumulative tables (80 tables of 400,000 words).
CACHE_BYTES = 256 * 2**20


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


class ExponentialText(TextMechanism):
    """The exponential mechanism, exact, over a :class:`PointSpace` (see the module docstring).

    Parameters
    ----------
    space : PointSpace
        Euclidean vocabulary.
    epsilon : float
        The mDP level (weights :math:`e^{-\\varepsilon d/2}`).
    cache_bytes : int
        Bytes of cumulative tables kept between calls (8 n bytes per word).

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
        super().__init__(space, epsilon, {"epsilon": epsilon})
        self.cache = CumulativeCache(cache_bytes)

    def log_weights(self, words: NDArray[np.intp]) -> NDArray[np.float64]:
        """:math:`-\\varepsilon \\min(d(x, \\cdot), T)/2` for each word x of ``words``, shape (k, n).

        Distances are clamped at :math:`T = 1400/\\varepsilon`
        (:func:`metricdp.sampling.clamp_distances`, where the clamp's privacy proof is): no
        weight underflows to 0, which would be an infinite privacy loss.
        """
        return -0.5 * self.epsilon * clamp_distances(self.space.distances_from(words), self.epsilon)

    def _make(self, words: NDArray[np.intp]) -> list[tuple[ExactTable, NDArray[np.float64]]]:
        n = self.space.n
        check_memory(8.0 * len(words) * n, f"{len(words)} exact tables of {n:,} words")
        w = self.space.distances_from(words)
        # in place, the same arithmetic as log_weights: -eps/2 * min(d, 1400/eps), then exp
        np.minimum(w, clamp_distances(np.inf, self.epsilon), out=w)
        np.multiply(w, -0.5 * self.epsilon, out=w)
        np.exp(w, out=w)  # the word itself has weight exactly 1: no overflow, no all-zero row
        w.setflags(write=False)  # the table keeps it as it is (no copy)
        block = ExactTable.from_matrix(w)  # one vectorised build for the block
        tables = [block.row(i) for i in range(len(words))]
        return [(t, t.matrix) for t in tables]  # the row too, so the cache counts what it holds

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        out = np.empty(len(inputs), dtype=np.intp)
        n = self.space.n

        def draw(table: tuple[ExactTable, NDArray[np.float64]], pos: NDArray) -> None:
            # exact: probability weight / sum of the row's float weights, from random words
            out[pos] = table[0].sample(np.zeros(len(pos), dtype=np.intp), rng)

        sample_tables(inputs, out, self._make, self.cache, draw, self.space.block_size(n) or 1)
        return out
