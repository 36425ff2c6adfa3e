r"""The nearest words not yet taken: one order and one search for the walks over a vocabulary.

1-Diffractor's lists (:mod:`.diffractor`) and CusText's output sets (:mod:`.custext`) both walk
the vocabulary by "the nearest words not yet taken"; :class:`FreeWords` gives them one order,
one tie rule and one search.

**The order.** Word j is nearer to word i than word j' when :math:`(\delta(i, j), j) <
(\delta(i, j'), j')`, with :math:`\delta(i, j) = \sum_t (v_{it} - v_{jt})^2` the squared
Euclidean distance of the centred float64 vectors, each difference rounded once (no
cancellation), summed in float64 (:func:`squared_distances`): ties go to the smaller index,
and the value of :math:`\delta(i, j)` does not depend on which other pairs are computed with
it (a BLAS ``|x|^2 + |p|^2 - 2 x.p`` does: its rounding changes with the shapes of the
product).

**The search** (:meth:`FreeWords.nearest`): one float32 product scores every free word j for
the word i, :math:`f_j \approx \lVert p_j\rVert^2 - 2 v_i \cdot p_j = \delta(i, j) - \lVert
v_i\rVert^2`; the words with :math:`f_j \le f_{(k)} + 2\tau_i + 2e_i` (:math:`f_{(k)}` the k-th
smallest fast score) are the candidates, ranked by the exact :math:`(\delta, j)`. Taken words
leave the scored block once they are a quarter of it, so a walk over n words scores a little
more than :math:`n^2/2` pairs in all, not :math:`n^2`.

*Proof that the search returns the k first free words of the order.* Let :math:`\tau_i` bound
the float32 error of every score (:func:`metricdp.pointspace._tolerance`, Higham's bound, any
summation order) and :math:`e_i = (dim + 2) 2^{-53} (\lVert v_i\rVert + r_{max})^2` the error of
the computed :math:`\hat\delta(i, \cdot)` (each difference is rounded once, so each square and
the sum carry a relative error below :math:`(dim + 2) 2^{-53}`, and :math:`\delta \le
(\lVert v_i\rVert + r_{max})^2`). The k words of the smallest fast scores have true scores at
most :math:`f_{(k)} + \tau_i`, so at least k free words have :math:`\hat\delta - \lVert
v_i\rVert^2 \le f_{(k)} + \tau_i + e_i`, and so does every word of the answer (the k first by
:math:`(\hat\delta, j)`); each has true score at most :math:`f_{(k)} + \tau_i + 2e_i` and fast
score at most :math:`f_{(k)} + 2\tau_i + 2e_i`: a candidate. The candidates are ranked by
:math:`(\hat\delta, j)`, the order itself. Where a score could leave the float32 range
(:math:`4 r_{max}^2 \ge 10^{37}`) every free word is a candidate.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..pointspace import PointSpace, _tolerance

__all__ = ["FreeWords", "squared_distances"]

_U64 = 2.0**-53  # unit roundoff of float64
_FLOAT32_SAFE = 1e37  # scores of magnitude below this stay finite in float32 (largest: 3.4e38)
_COMPACT = 256  # a scored block this small keeps its taken words (scoring them costs less than a copy)


def squared_distances(space: PointSpace, word: int, others: NDArray[np.intp]) -> NDArray[np.float64]:
    r""":math:`\delta(word, j)` for each j of ``others`` (the module's order; float64, no
    cancellation; each value is the same whatever the other words)."""
    diff = space.vectors[others] - space.vectors[int(word)]
    diff *= diff
    return diff.sum(axis=1)


class FreeWords:
    """The words of a vocabulary not yet taken by a walk, and the nearest of them to a word.

    Parameters
    ----------
    space : PointSpace
        Euclidean vocabulary; every word starts free.

    Examples
    --------
    >>> space = PointSpace.from_points([[0.0], [1.0], [3.0], [1.0]])
    >>> free = FreeWords(space)
    >>> free.take([0])
    >>> free.nearest(0, 2).tolist()  # words 1 and 3 tie at distance 1: the smaller index first
    [1, 3]
    """

    def __init__(self, space: PointSpace) -> None:
        self.space = space
        n = space.n
        self.left = n
        self.taken = np.zeros(n, dtype=bool)
        x = space.vectors
        # every term and partial sum of a score is below 4 r_max^2: within float32 below this, else exact passes
        self._exact = not 4.0 * space.radius_max**2 < _FLOAT32_SAFE
        with np.errstate(over="ignore"):
            self._coef = np.column_stack([-2.0 * x, np.ones(n)]).astype(np.float32)  # word i's scores: coef_i @ v32.T
            v32 = space._v32
        tau = _tolerance(np.ones(n), x, float(space.sqnorms.max()), space.radius_max, space.dim)
        reach = np.sqrt(space.sqnorms) + space.radius_max
        self._margin = 2.0 * tau + 2.0 * (space.dim + 2) * _U64 * (1.0 + 1e-6) * reach * reach
        self._active = np.arange(n)  # the words scored (free ones and those taken since the last compaction)
        self._block = np.ascontiguousarray(v32.T)  # (dim + 1, active)
        self._penalty = np.zeros(n, dtype=np.float32)  # +inf at the taken words of the block
        self._where = np.arange(n)  # position of each word in the block (-1: left it)

    def take(self, words: NDArray[np.intp] | int) -> None:
        """Mark ``words`` (free ones: an index array or one index) as taken."""
        self.taken[words] = True
        self._penalty[self._where[words]] = np.inf
        self.left -= int(np.size(words))
        if len(self._active) > _COMPACT and 4 * self.left < 3 * len(self._active):
            keep = np.flatnonzero(~self.taken[self._active])
            self._where[self._active] = -1
            self._active = self._active[keep]
            self._where[self._active] = np.arange(len(keep))
            self._block = np.ascontiguousarray(self._block[:, keep])
            self._penalty = np.zeros(len(keep), dtype=np.float32)

    def nearest(self, word: int, k: int) -> NDArray[np.intp]:
        """The ``min(k, left)`` free words nearest to ``word``, nearest first (the module's order);
        ``word`` itself is one of them unless taken."""
        k = min(int(k), self.left)
        if k <= 0:
            return np.empty(0, dtype=np.intp)
        if self._exact:  # scores beyond float32: every free word, exactly
            cand = np.flatnonzero(~self.taken)
        else:
            scores = self._coef[word] @ self._block
            scores += self._penalty
            kth = scores.min() if k == 1 else np.partition(scores, k - 1)[k - 1]
            thr = np.float64(kth) + self._margin[word]  # compared in float64: the threshold is not rounded
            cand = self._active[(scores <= thr).nonzero()[0]]
        if k == 1 == len(cand):
            return cand
        d = squared_distances(self.space, word, cand)
        if k == 1:
            return cand[[int(np.argmin(d))]]  # the first minimum: the smaller index (cand is increasing)
        return cand[np.lexsort((cand, d))[:k]]
