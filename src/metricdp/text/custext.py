r"""CusText (Chen, Mo, Wang, Chen, Nie, Wang, Cui, "A Customized Text Sanitization Mechanism
with Differential Privacy", Findings of ACL 2023): the exponential mechanism inside small
output sets of near words.

**Output sets** (the paper's mapping function, Algorithm 1, with its code's "conservative"
strategy): take the words in order (here the vocabulary's order, by frequency for GloVe; the
paper takes the task corpus's frequency order); a word not yet mapped and its K - 1 nearest
words *not yet mapped* (Euclidean, ties to the smaller index) form one set, and every word of
the set is mapped to it; repeat until every word is mapped (the last set may be smaller).
The sets partition the vocabulary and are a fixed public function of it
(:func:`output_sets`); the nearest free words are found exactly by
:class:`.neighbours.FreeWords` (one float32 pass over the free words per set, the few pairs it
cannot separate ranked in float64), about :math:`n^2/(2K)` scored pairs in all.

**Mechanism** (the paper's sampling function, Eq. 4): for x in the set S, with
:math:`d_{max}(x) = \max_{y\in S} d(x, y)`, the normalised score :math:`u(x, y) = -d(x,y) /
d_{max}(x) \in [-1, 0]` (the code's min-max normalisation; :math:`d_{min}(x) = d(x,x) = 0`),
and

.. math:: P(y \mid x) = \frac{e^{\varepsilon u(x,y)/2}}{\sum_{z \in S} e^{\varepsilon u(x,z)/2}}, \quad y \in S,

drawn exactly (:class:`~metricdp.sampling.ExactTable` on the float weights). A set of one
word releases it.

*Proof* (the paper's Theorem 1). For x, x' in the same set S, every score lies in [-1, 0], so
each numerator moves by at most :math:`e^{\varepsilon/2}` and the normaliser by at most
:math:`e^{\varepsilon/2}`: :math:`P(y|x) \le e^{\varepsilon} P(y|x')`, pure eps-DP among the
words of S. Words of different sets have disjoint outputs: **no** indistinguishability across
sets. In mDP terms it is eps-mDP for :math:`d_S(x, x') = 1` within a set and infinity across
(``guarantee``); there is no finite level for the embedding distance.
"""

from __future__ import annotations

import hashlib
import weakref
from os import PathLike

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from .._threads import blas_threads
from .._validation import check_epsilon, check_int
from ..errors import ValidationError
from ..pointspace import PointSpace
from ..sampling import ExactTable
from .base import TextMechanism, check_point_space
from .disk_cache import cached
from .neighbours import FreeWords

__all__ = ["CusTextText", "custext_epsilon", "custext_weights", "output_sets", "set_members"]

_PAIR_BYTES = 32 * 2**20  # float64 differences of pairs computed at once by custext_weights
_BUILT: weakref.WeakKeyDictionary[PointSpace, dict[int, NDArray[np.intp]]] = weakref.WeakKeyDictionary()


def custext_epsilon(epsilon: float, **_: object) -> float:
    """Proven level of CusText among the words of one output set (module docstring): eps."""
    return check_epsilon(epsilon)


def output_sets(space: PointSpace, size: int = 20, *, cache_dir: str | PathLike[str] | None = None) -> NDArray[np.intp]:
    """The set of every word, shape (n,) of set numbers 0, 1, ... in order of creation (see the
    module docstring); members of a set are listed by :func:`set_members`. With ``cache_dir``,
    read from / stored in that directory (:mod:`.disk_cache`, entry ``custext-sets`` per
    vocabulary and ``size``; a file is read only when it is a partition into sets of ``size``
    words, the last one possibly smaller, numbered in order of creation)."""
    space = check_point_space(space)
    size = check_int(size, "size", minimum=1, maximum=space.n)
    built = _BUILT.setdefault(space, {})
    known = built.get(size)
    if known is None or cache_dir is not None:  # sets in memory are still stored in a cache_dir lacking them
        found = cached(cache_dir, "custext-sets", space, {"size": size},
                       lambda: {"group": _build_sets(space, size) if known is None else known},
                       lambda arrays: _check_sets(arrays, space.n, size), 8 * space.n)
        if known is None:
            known = found["group"].astype(np.intp)
            known.setflags(write=False)
            built[size] = known
    return known


def _build_sets(space: PointSpace, size: int) -> NDArray[np.intp]:
    n = space.n
    group = np.full(n, -1, dtype=np.intp)
    free = FreeWords(space)
    count, word = 0, 0
    with blas_threads(1):  # one small product per set: a thread pool costs more than it saves
        while free.left:  # sequential: each set depends on the words already mapped
            while group[word] >= 0:
                word += 1  # the first word not yet mapped
            free.take(word)
            near = free.nearest(word, size - 1)
            free.take(near)
            group[word] = count
            group[near] = count
            count += 1
    return group


def _check_sets(arrays: dict[str, NDArray], n: int, size: int) -> None:
    """What the guarantee needs of a partition read from a file: every set has ``size`` words (the last
    one at most), so no word is released from a smaller set than the mapping function makes."""
    group = arrays.get("group")
    if set(arrays) != {"group"} or group is None or group.dtype.kind != "i" or group.shape != (n,):
        raise ValidationError("not a table of output sets")
    if group.min() != 0:
        raise ValidationError("set numbers do not start at 0")
    counts = np.bincount(group)
    first = np.unique(group, return_index=True)[1]
    if (counts[:-1] != size).any() or not 1 <= counts[-1] <= size or (np.diff(first) <= 0).any():
        raise ValidationError(f"not a partition into sets of {size} words in order of creation")


def set_members(group: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(members sorted by set then index, start of each set in it)."""
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(int(group.max()) + 1))
    return order, starts


def _layout(group: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.bool_]]:
    """(the members of each set in a (sets, K) table padded with its first word; each word's row of
    members (n, K), padded with -1; where a word's row holds a member (n, K))."""
    members, starts = set_members(group)
    sizes = np.diff(np.r_[starts, len(members)])
    width = int(sizes.max())
    owner = group[members]
    slot = np.arange(len(members)) - starts[owner]  # position of each member in its set
    table = np.repeat(members[starts][:, None], width, axis=1)
    table[owner, slot] = members
    inside = np.arange(width)[None, :] < sizes[group][:, None]
    idx = np.where(inside, table[group], -1)
    return table, idx, inside


def custext_weights(space: PointSpace, group: NDArray[np.intp], epsilon: float) -> tuple[NDArray, NDArray]:
    r"""(weights (n, K) of each word over its set's members, padded with 0; the members (n, K),
    padded with -1): :math:`e^{-\varepsilon d(x,y)/(2 d_{max}(x))}` in the order of the members,
    within :math:`[e^{-\varepsilon/2}, 1]` (the float values clipped to it: the proof's bounds
    hold for the weights drawn from), 1 at the word itself.

    Sets by blocks, no loop per set: the members of each set fill a row of a (sets, K) table,
    padded with the set's first word (a copy of a member changes no maximum; its columns are
    dropped), and the distances of every pair of a row come from the float64 differences.
    """
    epsilon = check_epsilon(epsilon)
    table, idx, inside = _layout(group)
    width = table.shape[1]
    w = np.empty((*table.shape, width))
    step = max(1, _PAIR_BYTES // (8 * width * width * space.dim))
    for a in range(0, len(table), step):  # blocks of sets: (sets, K, K, dim) differences
        v = space.vectors[table[a : a + step]]
        diff = v[:, :, None, :] - v[:, None, :, :]
        d = np.sqrt(np.einsum("sijt,sijt->sij", diff, diff))
        top = d.max(axis=2, keepdims=True)
        w[a : a + step] = np.exp(-0.5 * epsilon * np.divide(d, top, out=np.zeros_like(d), where=top > 0))
    np.clip(w, np.exp(-0.5 * epsilon), 1.0, out=w)
    members, starts = set_members(group)
    slot = np.arange(len(members)) - starts[group[members]]
    weights = np.zeros(idx.shape)
    weights[members] = np.where(inside[members], w[group[members], slot], 0.0)
    return weights, idx


def _check_weights(arrays: dict[str, NDArray], group: NDArray[np.intp], epsilon: float) -> None:
    """What the proof needs of weights read from a file: each word's weights on its set's members within
    [e^{-eps/2}, 1] (so every ratio of probabilities is at most e^eps), 1 at the word itself, 0 elsewhere."""
    _, idx, inside = _layout(group)
    w = arrays.get("weights")
    if set(arrays) != {"weights"} or w is None or w.dtype != np.float64 or w.shape != idx.shape:
        raise ValidationError("not a table of CusText weights")
    own = (idx == np.arange(len(group))[:, None]).argmax(axis=1)
    if (not ((w >= np.exp(-0.5 * epsilon)) & (w <= 1.0))[inside].all() or (w[~inside] != 0.0).any()
            or (w[np.arange(len(group)), own] != 1.0).any()):
        raise ValidationError(f"weights outside [e^(-eps/2), 1] at eps {epsilon!r}")


class CusTextText(TextMechanism):
    """CusText over a :class:`PointSpace` (see the module docstring).

    Parameters
    ----------
    space : PointSpace
        Euclidean vocabulary.
    epsilon : float
        The DP level among the words of one output set.
    size : int
        K, the words per output set (the paper's top_k; default 20).
    cache_dir : path, optional
        A directory (e.g. the embeddings' own) where the output sets (per vocabulary and K) and
        the weights (per vocabulary, K and eps) are kept and read back by the next mechanism
        (:mod:`.disk_cache`: a file is read only when its key, its checksum and the
        properties the proof needs hold; otherwise rebuilt). They are public functions of
        the vocabulary: no input text reaches them.

    Examples
    --------
    >>> space = PointSpace.from_points([[0.0], [1.0], [10.0], [11.0]], list("abcd"))
    >>> CusTextText(space, 1.0, size=2).group.tolist()
    [0, 0, 1, 1]
    """

    name = "custext"
    guarantee = "words of one output set (pure eps-DP inside a set, none across sets)"

    def __init__(self, space: PointSpace, epsilon: float, *, size: int = 20,
                 cache_dir: str | PathLike[str] | None = None) -> None:
        space = check_point_space(space)
        epsilon = check_epsilon(epsilon)
        self.group = output_sets(space, size, cache_dir=cache_dir)
        group = self.group
        key = {"size": int(size), "epsilon": repr(epsilon),  # the sets' own digest: new sets, new weights
               "sets": hashlib.sha256(group.astype("<i8").tobytes()).hexdigest()}
        weights = cached(cache_dir, "custext-weights", space, key,
                         lambda: {"weights": custext_weights(space, group, epsilon)[0]},
                         lambda arrays: _check_weights(arrays, group, epsilon), 8 * space.n * int(size))["weights"]
        self.members = _layout(group)[1]
        self.members.setflags(write=False)
        self.table = ExactTable.from_matrix(weights)  # exact draws from the float weights
        super().__init__(space, epsilon, {"epsilon": epsilon, "size": int(size)})

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        k = self.table.sample(inputs, rng)
        return self.members[inputs, k].astype(np.intp)
