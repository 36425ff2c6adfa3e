r"""The exact exponential mechanism over a large vocabulary, without a matrix.

For an input word x, release y with probability

.. math:: P(y \mid x) = \frac{e^{-\varepsilon d(x,y)/2}}{\sum_{z \in W} e^{-\varepsilon d(x,z)/2}}

(McSherry and Talwar, FOCS 2007, Theorem 6; as an mDP mechanism: Chatzikokolakis et al.,
PETS 2013, Section 3; Imola et al., UAI 2022, Section 3.1). Privacy: for inputs x, x'
and any y, the numerator changes by at most :math:`e^{\varepsilon d(x,x')/2}` and the
normaliser by at most :math:`e^{\varepsilon d(x,x')/2}` (triangle inequality
:math:`|d(x,y) - d(x',y)| \le d(x,x')`), so
:math:`P(y|x) \le e^{\varepsilon d(x,x')} P(y|x')`: eps-mDP for the Euclidean metric.

Matrix-free sampling. Tokens are grouped by distinct input word; distinct words are
built in batches: one GEMM pass over the vocabulary per batch gives the n log-weights
:math:`-\varepsilon \min(d, T)/2` of each word (the word itself has d = 0, the largest
weight 1, so nothing overflows), their exponentials, and an exact integer table
(:class:`~metricdp.sampling.ExactTable`) that draws every token of that word with
probability exactly weight / sum of the row's float weights, from random words (no float
uniform: Mironov, CCS 2012). With numba (the ``fast`` extra) the distance -> weight ->
table passes are fused (:mod:`._kernels`) and equal the numpy build bit for bit (tested);
without it the numpy build runs. The tables of recently used words stay in a bounded LRU
cache (``cache_bytes``), so a repeated word costs one binary search.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from .._resources import usable_cpus
from .._validation import check_epsilon, check_int
from ..errors import ValidationError
from ..pointspace import PointSpace, check_memory
from ..sampling import PRECISION, ExactTable, clamp_distances
from ._kernels import KERNELS
from .base import TextMechanism, check_point_space

__all__ = ["CACHE_BYTES", "CumulativeCache", "ExponentialText", "exponential_epsilon", "sample_tables"]

#: Default bytes of cached tables (40 words of 400,000: 8 bytes of weight and 8 of prefix sum each).
CACHE_BYTES = 256 * 2**20
_TILE_ELEMENTS = 1 << 20  # GEMM tile (words x vocabulary columns) of the compiled build: 8 MiB
_BATCH_BYTES = 512 * 2**20  # log-weights of one batch of words (compiled build): 64 words of 400,000 at most
_MAX_BATCH = 64
_WORKERS = min(4, usable_cpus())


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


_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize  # (NULL, size): a new bytes object, not zero-filled
_new_bytes.restype = ctypes.py_object
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)


def _fresh_frozen(shape: tuple[int, ...], dtype: type) -> tuple[NDArray, NDArray]:
    """A new array backed by an immutable ``bytes`` (as :func:`metricdp._readonly.frozen` makes
    them) and a writable alias of the same memory, to fill it without a copy; its contents are
    undefined until the caller has written every element.

    The ``bytes`` object is fresh (more than one byte, so not one of CPython's shared
    singletons), nobody else holds it, and the caller drops the alias once the array is
    filled: from then on the read-only array is as frozen as one :func:`frozen` copied.
    """
    dt = np.dtype(dtype)
    size = int(np.prod(shape)) * dt.itemsize
    if size < 2:
        raise ValidationError("a fresh frozen buffer needs at least 2 bytes")
    data = _new_bytes(None, size)  # uninitialised: the caller writes every byte
    readonly = np.frombuffer(data, dtype=dt).reshape(shape)
    memory = memoryview((ctypes.c_char * size).from_address(readonly.ctypes.data)).cast("B")
    alias = np.frombuffer(memory, dtype=dt).reshape(shape)
    return alias, readonly


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
        self._kernels = KERNELS  # None: the numpy build (tests set it to compare the two)
        self._scratch: NDArray[np.float64] | None = None  # log-weights of a batch (compiled build), reused

    def log_weights(self, words: NDArray[np.intp]) -> NDArray[np.float64]:
        """:math:`-\\varepsilon \\min(d(x, \\cdot), T)/2` for each word x of ``words``, shape (k, n).

        Distances are clamped at :math:`T = 1400/\\varepsilon`
        (:func:`metricdp.sampling.clamp_distances`, where the clamp's privacy proof is): no
        weight underflows to 0, which would be an infinite privacy loss.
        """
        return -0.5 * self.epsilon * clamp_distances(self.space.distances_from(words), self.epsilon)

    def _make(self, words: NDArray[np.intp]) -> list[tuple[ExactTable, NDArray[np.float64]]]:
        """One exact table per word of ``words`` (with its weight row, so the cache counts what it holds)."""
        n = self.space.n
        check_memory(16.0 * len(words) * n, f"{len(words)} exact tables of {n:,} words")
        if self._kernels is not None and self.space.metric == "euclidean":
            return self._make_compiled(words)
        return self._make_reference(words)

    def _make_reference(self, words: NDArray[np.intp]) -> list[tuple[ExactTable, NDArray[np.float64]]]:
        """The numpy build (the reference the compiled one equals bit for bit)."""
        w = self.space.distances_from(words)
        # in place, the same arithmetic as log_weights: -eps/2 * min(d, 1400/eps), then exp
        np.minimum(w, clamp_distances(np.inf, self.epsilon), out=w)
        np.multiply(w, -0.5 * self.epsilon, out=w)
        np.exp(w, out=w)  # the word itself has weight exactly 1: no overflow, no all-zero row
        w.setflags(write=False)  # the table keeps it as it is (no copy)
        block = ExactTable.from_matrix(w)  # one vectorised build for the block
        tables = [block.row(i) for i in range(len(words))]
        return [(t, t.matrix) for t in tables]

    def _make_compiled(self, words: NDArray[np.intp]) -> list[tuple[ExactTable, NDArray[np.float64]]]:
        """The same tables by the fused kernels of :mod:`._kernels`, one word's arrays apart from another's.

        The GEMM runs over tiles of the vocabulary small enough to stay in cache while the
        distance -> log-weight kernel passes over them into a scratch block; per word, numpy's
        ``exp`` then writes the weights straight into the table's own ``bytes`` (no copy), numpy
        sums them (the pairwise sum :func:`metricdp.sampling._fill_block` takes) and one compiled
        pass writes the prefix sums, into ``bytes`` too.
        """
        kernels = self._kernels
        space = self.space
        n, k = space.n, len(words)
        vectors, sq = space.vectors, space.sqnorms
        x2 = 2.0 * vectors[words]  # as distances_from: 2 x, then the GEMM
        sq_rows = np.ascontiguousarray(sq[words])
        clamp = float(clamp_distances(np.inf, self.epsilon))
        if self._scratch is None or self._scratch.shape[0] < k:
            self._scratch = np.empty((k, n))
        logw = self._scratch[:k]
        step = max(1, _TILE_ELEMENTS // k)
        for start in range(0, n, step):
            stop = min(n, start + step)
            g = x2 @ vectors[start:stop].T
            kernels["log_weights"](g, sq_rows, sq[start:stop], words - start, clamp, -0.5 * self.epsilon, logw,
                                   start)

        def table(i: int) -> tuple[ExactTable, NDArray[np.float64]]:
            weights, weights_frozen = _fresh_frozen((1, n), np.float64)
            np.exp(logw[i], out=weights[0])
            prefix, prefix_frozen = _fresh_frozen((1, n + 1), np.uint64)
            sigma, cut, status = kernels["fill_row"](weights[0], float(weights[0].sum()), PRECISION, prefix[0])
            del weights, prefix  # the writable aliases end here
            if status:  # cannot happen: weights are exp of finite numbers <= 0, one of them 1
                raise ValidationError("matrix must be finite and non-negative to be sampled")
            built = ExactTable.from_prefix(weights_frozen, prefix_frozen, np.array([sigma], dtype=np.int64),
                                           np.array([cut]))
            return built, built.matrix

        if k == 1 or _WORKERS == 1:
            return [table(i) for i in range(k)]
        with ThreadPoolExecutor(min(_WORKERS, k)) as pool:  # exp, sum and fill_row release the GIL
            return list(pool.map(table, range(k)))

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        out = np.empty(len(inputs), dtype=np.intp)
        n = self.space.n

        def draw(table: tuple[ExactTable, NDArray[np.float64]], pos: NDArray) -> None:
            # exact: probability weight / sum of the row's float weights, from random words
            out[pos] = table[0].sample(np.zeros(len(pos), dtype=np.intp), rng)

        if self._kernels is not None:  # a batch of words shares each GEMM pass over the vocabulary
            batch = max(1, min(_MAX_BATCH, _BATCH_BYTES // (8 * n)))
        else:
            batch = self.space.block_size(n) or 1
        sample_tables(inputs, out, self._make, self.cache, draw, batch)
        return out
