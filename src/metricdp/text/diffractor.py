r"""1-Diffractor (Meisenbacher, Chevli, Vladika, Matthes, "1-Diffractor: Efficient and
Utility-Preserving Text Obfuscation Leveraging Word-Level Metric Differential Privacy",
WPES 2024): geometric noise on a word's position in one-dimensional word lists.

**Lists** (the paper's Section 3.1, its code's ``Lists``): the vocabulary is ordered into a
list by a greedy nearest-neighbour chain in the embedding: start at a word, append it, move
to the *nearest word not yet in the list*, until every word is in. The paper starts each
list at a random word or at the words farthest from the origin ("outside" variants); here
list l starts at the word of the l-th largest norm (centred vectors, ties to the smaller
index), so the lists are a fixed, public function of the embedding (:func:`word_lists`).
Nearest is the Euclidean distance, ties to the smaller index, found exactly by
:class:`.neighbours.FreeWords` (its docstring: a float32 pass over the words left, the few it
cannot separate ranked in float64; about n^2/2 scored pairs per list).

**Mechanism** (the paper's Section 3.2, "geometric"): with :math:`\pi_l(x)` the position of
x in list l (N words) and K lists, pick a list l uniformly, draw Z with
:math:`\Pr[Z = z] \propto e^{-\varepsilon |z|}` on the integers (the two-sided geometric law,
exactly, from random bits: Canonne, Kamath and Steinke, NeurIPS 2020, Algorithm 2 with the
float eps read as the rational it is, vectorised by the exact tables of
:class:`metricdp.mechanisms.lattice_batch.Geometric`; at eps outside [1e-6, 1e3] one
:func:`metricdp.mechanisms.lattice_laplace.discrete_laplace` loop per token),
and release the word at position :math:`\min(\max(\pi_l(x) + Z, 0), N - 1)` of list l (the
truncated geometric mechanism of Ghosh, Roughgarden and Sundararajan, as the paper's code
runs it with diffprivlib's ``GeometricTruncated``).

*Proof* (list distance). For one list, :math:`\pi_l(x) + Z` is the geometric mechanism on
the integers: :math:`\Pr[\pi_l(x) + Z = k] / \Pr[\pi_l(x') + Z = k] = e^{\varepsilon(|k -
\pi_l(x')| - |k - \pi_l(x)|)} \le e^{\varepsilon |\pi_l(x) - \pi_l(x')|}`; clamping and
reading the list are post-processing. The uniform choice of the list makes the law the
mixture :math:`P(y|x) = \frac1K \sum_l P_l(y|x)`, and each term is at most
:math:`e^{\varepsilon d_L(x,x')} P_l(y|x')` with :math:`d_L(x,x') = \max_l |\pi_l(x) -
\pi_l(x')|`, so the release is :math:`\varepsilon`-mDP for :math:`d_L` (for K = 1, the
list distance of the paper's Theorem 1).

*Embedding distance.* Neighbours in a list are close in the embedding, but words close in
the embedding can be far apart in a list, so no bound in the Euclidean distance follows;
:func:`embedding_epsilon` computes the exact level on a set of words by the audit
(:func:`metricdp.audit.audit` on the rows of those words): on 300 GloVe words at eps 1 it
is tens of times eps (docs/text.md). The per-token epsilon this family reports is the one
for :math:`d_L` (``guarantee``).
"""

from __future__ import annotations

import weakref
from fractions import Fraction
from os import PathLike

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource
from .._threads import blas_threads
from .._validation import check_epsilon, check_int
from ..errors import ValidationError
from ..mechanisms.lattice_batch import Geometric
from ..mechanisms.lattice_laplace import BitStream, discrete_laplace
from ..pointspace import PointSpace
from ..sampling import uniform_below
from .base import TextMechanism, check_point_space
from .disk_cache import cached
from .neighbours import FreeWords

__all__ = ["DiffractorText", "diffractor_epsilon", "diffractor_matrix", "embedding_epsilon", "word_lists"]

_TABLES = (1e-6, 1e3)  # eps for Geometric's tables (below: long table walks; above: the loop, as fast)
# lists already built per space (a per-token epsilon list builds one mechanism per epsilon over one space)
_BUILT: weakref.WeakKeyDictionary[PointSpace, dict[int, NDArray[np.intp]]] = weakref.WeakKeyDictionary()


def diffractor_epsilon(epsilon: float, **_: object) -> float:
    """Proven level of 1-Diffractor for the list distance :math:`d_L` (module docstring): eps."""
    return check_epsilon(epsilon)


def word_lists(space: PointSpace, count: int = 1, *, cache_dir: str | PathLike[str] | None = None) -> NDArray[np.intp]:
    """The ``count`` word lists of 1-Diffractor, shape (count, n): row l lists the word indices
    in list order (see the module docstring). With ``cache_dir``, read from / stored in that
    directory (:mod:`.disk_cache`, entry ``diffractor-lists`` per vocabulary and ``count``; a
    file is read only when each row is a permutation of the words starting at its word)."""
    space = check_point_space(space)
    count = check_int(count, "lists", minimum=1, maximum=space.n)
    built = _BUILT.setdefault(space, {})
    known = built.get(count)
    if known is None or cache_dir is not None:  # lists in memory are still stored in a cache_dir lacking them
        starts = np.argsort(-space.sqnorms, kind="stable")[:count]
        found = cached(cache_dir, "diffractor-lists", space, {"lists": count},
                       lambda: {"lists": _build_lists(space, starts) if known is None else known},
                       lambda arrays: _check_lists(arrays, starts, space.n), 8 * count * space.n)
        if known is None:
            known = found["lists"].astype(np.intp)
            known.setflags(write=False)
            built[count] = known
    return known


def _build_lists(space: PointSpace, starts: NDArray[np.intp]) -> NDArray[np.intp]:
    n = space.n
    lists = np.empty((len(starts), n), dtype=np.intp)
    with blas_threads(1):  # one small product per step: a thread pool costs more than it saves
        for li, first in enumerate(starts):
            free = FreeWords(space)
            word = int(first)
            for step in range(n):  # a chain: each word depends on the previous one
                lists[li, step] = word
                free.take(word)
                if step < n - 1:
                    word = int(free.nearest(word, 1)[0])
    return lists


def _check_lists(arrays: dict[str, NDArray], starts: NDArray[np.intp], n: int) -> None:
    """What a file must hold: each list a permutation of the words (every word has a position), from its
    start word (the guarantee holds for the list distance of any such lists)."""
    lists = arrays.get("lists")
    if set(arrays) != {"lists"} or lists is None or lists.dtype.kind != "i" or lists.shape != (len(starts), n):
        raise ValidationError("not a table of word lists")
    if not (np.sort(lists, axis=1) == np.arange(n)).all() or not np.array_equal(lists[:, 0], starts):
        raise ValidationError("not permutations of the words from their start words")


def _positions(lists: NDArray[np.intp]) -> NDArray[np.intp]:
    pos = np.empty_like(lists)
    rows = np.arange(lists.shape[0])[:, None]
    pos[rows, lists] = np.arange(lists.shape[1])[None, :]
    return pos


def diffractor_matrix(lists: ArrayLike, epsilon: float, rows: ArrayLike | None = None) -> NDArray[np.float64]:
    r"""The exact law of 1-Diffractor as a matrix (rows: the words ``rows``, all when None; columns:
    every word): :math:`P(y|x) = \frac1K\sum_l G(\pi_l(y) \mid \pi_l(x))` with the truncated
    geometric law :math:`G(j|i) = \frac{1-a}{1+a} a^{|j-i|}` inside, :math:`G(0|i) = a^i/(1+a)`,
    :math:`G(N-1|i) = a^{N-1-i}/(1+a)`, :math:`a = e^{-\varepsilon}`."""
    epsilon = check_epsilon(epsilon)
    lists = np.atleast_2d(np.asarray(lists, dtype=np.intp))
    n = lists.shape[1]
    pos = _positions(lists)
    words = np.arange(n) if rows is None else np.asarray(rows, dtype=np.intp)
    a = np.exp(-epsilon)
    out = np.zeros((len(words), n))
    j = np.arange(n)
    for li in range(lists.shape[0]):
        i = pos[li, words][:, None]
        g = (1 - a) / (1 + a) * a ** np.abs(j[None, :] - i)
        g[:, 0] = a ** i[:, 0] / (1 + a)
        g[:, n - 1] = a ** (n - 1 - i[:, 0]) / (1 + a)
        out += g[:, pos[li]]  # column y reads position pi_l(y)
    return out / lists.shape[0]


def embedding_epsilon(mechanism: DiffractorText, words: ArrayLike) -> float:
    """The exact mDP level of ``mechanism`` for the Euclidean distance among ``words`` (the audit of
    its law's rows for those words, all outputs), a lower bound of its level on the whole vocabulary."""
    from ..audit import audit

    idx = np.unique(np.asarray(words, dtype=np.intp))
    if idx.size < 2:
        raise ValidationError("embedding_epsilon needs at least 2 distinct words")
    matrix = diffractor_matrix(mechanism.lists, mechanism.epsilon, idx)
    d = mechanism.space.distances_from(idx)[:, idx]
    return float(audit(matrix, d).epsilon)


class DiffractorText(TextMechanism):
    """1-Diffractor over a :class:`PointSpace` (see the module docstring).

    Parameters
    ----------
    space : PointSpace
        Euclidean vocabulary (the lists are built from it).
    epsilon : float
        The mDP level for the list distance.
    lists : int
        Number of lists K (default 1).
    cache_dir : path, optional
        A directory (e.g. the embeddings' own) where the lists (per vocabulary and K) are kept
        and read back by the next mechanism (:mod:`.disk_cache`); they are public functions of
        the vocabulary: no input text reaches them.

    Examples
    --------
    >>> space = PointSpace.from_points([[0.0], [1.0], [3.0], [7.0]], list("abcd"))
    >>> DiffractorText(space, 1.0).lists.tolist()
    [[3, 2, 1, 0]]
    """

    name = "diffractor"
    guarantee = "list position (1-Diffractor's d_L), not the Euclidean distance"

    def __init__(self, space: PointSpace, epsilon: float, *, lists: int = 1,
                 cache_dir: str | PathLike[str] | None = None) -> None:
        space = check_point_space(space)
        epsilon = check_epsilon(epsilon)
        self.lists = word_lists(space, lists, cache_dir=cache_dir)  # read-only, shared over this space
        self.positions = _positions(self.lists)
        self.positions.setflags(write=False)
        self._beta = Fraction(epsilon)  # the float eps, exactly
        # numpy counts the table walk (a few passes per draw, as fast as the compiled kernel here):
        # no numba start for a release that needs nothing else compiled
        self._geometric = Geometric(self._beta, compiled=False) if _TABLES[0] <= epsilon <= _TABLES[1] else None
        super().__init__(space, epsilon, {"epsilon": epsilon, "lists": int(lists)})

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        count, n = self.lists.shape
        which = uniform_below(np.full(len(inputs), count), rng) if count > 1 else np.zeros(len(inputs), np.intp)
        # exact draws of the two-sided geometric law e^{-eps |z|}: the vectorised tables of
        # metricdp.mechanisms.lattice_batch.Geometric, or one Canonne-Kamath-Steinke loop each at extreme eps;
        # an offset beyond +-n lands on the same end of the list after the clip below, so bounding it
        # there first changes no release
        if self._geometric is not None:
            noise = np.clip(self._geometric.laplace(len(inputs), rng), -n, n)
        else:
            bits = BitStream(rng)
            noise = np.fromiter((max(-n, min(n, discrete_laplace(bits, self._beta))) for _ in range(len(inputs))),
                                dtype=np.int64, count=len(inputs))
        pos = np.clip(self.positions[which, inputs] + noise, 0, n - 1)
        return self.lists[which, pos].astype(np.intp)
