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

import weakref

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from .._threads import blas_threads
from .._validation import check_epsilon, check_int
from ..pointspace import PointSpace
from ..sampling import ExactTable
from .base import TextMechanism, check_point_space
from .neighbours import FreeWords

__all__ = ["CusTextText", "custext_epsilon", "custext_weights", "output_sets", "set_members"]

_PAIR_BYTES = 32 * 2**20  # float64 differences of pairs computed at once by custext_weights
_BUILT: weakref.WeakKeyDictionary[PointSpace, dict[int, NDArray[np.intp]]] = weakref.WeakKeyDictionary()


def custext_epsilon(epsilon: float, **_: object) -> float:
    """Proven level of CusText among the words of one output set (module docstring): eps."""
    return check_epsilon(epsilon)


def output_sets(space: PointSpace, size: int = 20) -> NDArray[np.intp]:
    """The set of every word, shape (n,) of set numbers 0, 1, ... in order of creation (see the
    module docstring); members of a set are listed by :func:`set_members`."""
    space = check_point_space(space)
    size = check_int(size, "size", minimum=1, maximum=space.n)
    built = _BUILT.setdefault(space, {})
    if size in built:
        return built[size]
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
    group.setflags(write=False)
    built[size] = group
    return group


def set_members(group: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(members sorted by set then index, start of each set in it)."""
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(int(group.max()) + 1))
    return order, starts


def custext_weights(space: PointSpace, group: NDArray[np.intp], epsilon: float) -> tuple[NDArray, NDArray]:
    r"""(weights (n, K) of each word over its set's members, padded with 0; the members (n, K),
    padded with -1): :math:`e^{-\varepsilon d(x,y)/(2 d_{max}(x))}` in the order of the members.

    Sets by blocks, no loop per set: the members of each set fill a row of a (sets, K) table,
    padded with the set's first word (a copy of a member changes no maximum; its columns are
    dropped), and the distances of every pair of a row come from the float64 differences
    (:func:`.neighbours.squared_distances`'s arithmetic, then the square root).
    """
    epsilon = check_epsilon(epsilon)
    members, starts = set_members(group)
    sizes = np.diff(np.r_[starts, len(members)])
    width = int(sizes.max())
    owner = group[members]
    slot = np.arange(len(members)) - starts[owner]  # position of each member in its set
    table = np.repeat(members[starts][:, None], width, axis=1)
    table[owner, slot] = members
    w = np.empty((*table.shape, width))
    step = max(1, _PAIR_BYTES // (8 * width * width * space.dim))
    for a in range(0, len(table), step):  # blocks of sets: (sets, K, K, dim) differences
        v = space.vectors[table[a : a + step]]
        diff = v[:, :, None, :] - v[:, None, :, :]
        d = np.sqrt(np.einsum("sijt,sijt->sij", diff, diff))
        top = d.max(axis=2, keepdims=True)
        w[a : a + step] = np.exp(-0.5 * epsilon * np.divide(d, top, out=np.zeros_like(d), where=top > 0))
    inside = np.arange(width)[None, :] < sizes[owner][:, None]  # (members, K): a real member's column
    idx = np.full((space.n, width), -1, dtype=np.intp)
    weights = np.zeros((space.n, width))
    idx[members] = np.where(inside, table[owner], -1)
    weights[members] = np.where(inside, w[owner, slot], 0.0)
    return weights, idx


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

    Examples
    --------
    >>> space = PointSpace.from_points([[0.0], [1.0], [10.0], [11.0]], list("abcd"))
    >>> CusTextText(space, 1.0, size=2).group.tolist()
    [0, 0, 1, 1]
    """

    name = "custext"
    guarantee = "words of one output set (pure eps-DP inside a set, none across sets)"

    def __init__(self, space: PointSpace, epsilon: float, *, size: int = 20) -> None:
        space = check_point_space(space)
        epsilon = check_epsilon(epsilon)
        self.group = output_sets(space, size)
        weights, self.members = custext_weights(space, self.group, epsilon)
        self.members.setflags(write=False)
        self.table = ExactTable.from_matrix(weights)  # exact draws from the float weights
        super().__init__(space, epsilon, {"epsilon": epsilon, "size": int(size)})

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        k = self.table.sample(inputs, rng)
        return self.members[inputs, k].astype(np.intp)
