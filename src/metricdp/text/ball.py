r"""Exact balls of the vocabulary and exact rejection, for the exponential-type text samplers.

The exponential mechanism and TEM weigh every word y by :math:`e^{-\varepsilon \min(d(x,y),
\cdot)/2}`; on real text most of a word's mass sits in a small ball around it (at eps 10 over
GloVe's 400,000 words, 80 words within distance 3.4 for the median token). This module gives
the two pieces that let them sample from the ball and never build a 400,000-entry table:

* :func:`pair_distances` -- **the** distance of the text samplers: for paired rows x, y of the
  space's float64 centred vectors, :math:`\mathrm{fl}(\sqrt{\sum_i (x_i - y_i)^2})` with the
  sum taken in coordinate order (one IEEE operation after another, vectorised across pairs
  only), so a pair's distance is one fixed float whatever else is computed with it, whatever
  BLAS or CPU runs it, with or without the optional compiled kernels. It is symmetric and 0
  exactly on the diagonal. Its relative error against the real distance is below
  :math:`(\mathrm{dim} + 3) 2^{-53}` (Higham, *Accuracy and Stability of Numerical
  Algorithms*, 2002, Section 3.1).
* :func:`ball` -- for each word x and radius r, exactly the words with ``pair_distances(x, y)
  <= r``: one float32 GEMM pass over the vocabulary (the score :math:`\lVert y\rVert^2 - 2 x
  \cdot y` of :meth:`metricdp.pointspace.PointSpace.argmin_quadratic`'s fast pass) keeps the
  candidates whose score is within the pass's error bound
  (:func:`metricdp.pointspace._tolerance`, valid for any summation order) of
  :math:`r^2 (1 + 10^{-12}) - \lVert x\rVert^2`, and the candidates' :func:`pair_distances`
  decide. *Proof that no member is lost*: a member has :math:`\hat d \le r`, so its real
  squared distance is at most :math:`r^2 (1 + 10^{-12})` (the relative error above is far
  below :math:`10^{-12}`), its real score at most the threshold minus tolerance, and its
  float32 score at most the threshold. The ball is therefore a function of
  :func:`pair_distances` alone.
* :func:`bernoulli_ratio` -- an exact coin of probability a / b for floats 0 <= a <= b, from
  random 64-bit words only (the rejection step of :mod:`.exponential`).
"""

from __future__ import annotations

import weakref

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource, random_words
from ..errors import ValidationError
from ..pointspace import BLOCK_BYTES, PointSpace, _tolerance
from ..sampling import uniform_below

__all__ = ["ball", "bernoulli_ratio", "kth_distance", "pair_distances"]

_RELATIVE = 1e-12  # slack on r^2 covering pair_distances' rounding (below (dim + 3) 2**-53 relative)
_BLOCK_VALUES = 1 << 18  # coordinates of candidate pairs gathered at once (8 bytes each: in cache)
_PAIR_BLOCK = 1 << 12  # pairs measured at once by pair_distances
# the float32 vectors with their squared norms as a last column, per space (the fast pass's operand)
_FAST: weakref.WeakKeyDictionary[PointSpace, NDArray[np.float32]] = weakref.WeakKeyDictionary()


def pair_distances(space: PointSpace, a: NDArray[np.intp], b: NDArray[np.intp]) -> NDArray[np.float64]:
    """``d(a[i], b[i])`` for each i: the text samplers' one distance (see the module docstring).

    Euclidean: squared coordinate differences summed in coordinate order, then the square
    root; other metrics: :meth:`PointSpace.distances_from` of the pair's rows (scipy's
    ``cdist`` computes every pair by the same loop).

    Examples
    --------
    >>> s = PointSpace.from_points([[0.0, 0.0], [3.0, 4.0]])
    >>> pair_distances(s, np.array([0, 1, 1]), np.array([1, 0, 1])).tolist()
    [5.0, 5.0, 0.0]
    """
    a = np.asarray(a, dtype=np.intp)
    b = np.asarray(b, dtype=np.intp)
    if space.metric != "euclidean":
        out = np.empty(len(a))
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
            out[i] = space.distances_from([x], y, y + 1)[0, 0]
        return out
    v = space.vectors
    out = np.empty(len(a))
    for s in range(0, len(a), _PAIR_BLOCK):
        diff = np.subtract(v[a[s : s + _PAIR_BLOCK]], v[b[s : s + _PAIR_BLOCK]])  # (pairs, dim)
        np.multiply(diff, diff, out=diff)
        # accumulate is the sequential sum t = t + diff[:, i] from t = 0 (its documented definition):
        # coordinate order, the same float for a pair whatever else is computed
        np.sqrt(np.add.accumulate(diff, axis=1)[:, -1], out=out[s : s + _PAIR_BLOCK])
    return out


def _distances_from(space: PointSpace, x: int, ys: NDArray[np.intp]) -> NDArray[np.float64]:
    """``pair_distances(space, [x] * len(ys), ys)``, the same floats, x's coordinates read once.

    With column-major vectors (:meth:`PointSpace.from_embeddings`), a block of the words' columns
    is gathered in one call and every coordinate of the pairs goes through the operations of
    :func:`pair_distances` in the same order, so each distance is the same float.
    """
    v = space.vectors
    if space.metric != "euclidean" or not v.flags.f_contiguous:
        return pair_distances(space, np.full(len(ys), x, dtype=np.intp), ys)
    columns = v.T  # (dim, n), C-contiguous
    mine = columns[:, x : x + 1]
    out = np.zeros(len(ys))
    step = max(1, _BLOCK_VALUES // space.dim)
    for s in range(0, len(ys), step):
        diff = np.take(columns, ys[s : s + step], axis=1)  # (dim, pairs)
        np.subtract(mine, diff, out=diff)
        np.multiply(diff, diff, out=diff)
        acc = out[s : s + step]
        for i in range(space.dim):  # coordinate order, as pair_distances
            np.add(acc, diff[i], out=acc)
        np.sqrt(acc, out=acc)
    return out


def _fast(space: PointSpace) -> NDArray[np.float32]:
    found = _FAST.get(space)
    if found is None:
        found = np.empty((space.n, space.dim + 1), dtype=np.float32)  # each float64 rounded once, as a cast
        found[:, :-1] = space.vectors
        found[:, -1] = space.sqnorms
        found.setflags(write=False)
        _FAST[space] = found
    return found


def ball(
    space: PointSpace, words: NDArray[np.intp], radius: NDArray[np.float64] | float, *, limit: int | None = None
) -> list[tuple[NDArray[np.intp], NDArray[np.float64], float]]:
    """For each word x of ``words``: the indices (increasing) and :func:`pair_distances` of the
    words y with ``pair_distances(x, y) <= r``, and r.

    r is ``radius`` (one, or one per word) or, where the fast pass finds more than ``limit``
    candidates, a smaller radius at which it finds about ``limit`` (a word in a dense region
    of the vocabulary); the ball is exact at the r returned.

    Examples
    --------
    >>> s = PointSpace.from_points([[0.0], [1.0], [2.5], [9.0]])
    >>> [(i.tolist(), d.tolist(), r) for i, d, r in ball(s, np.array([1, 3]), 1.5)]
    [([0, 1, 2], [1.0, 0.0, 1.5], 1.5), ([3], [0.0], 1.5)]
    """
    words = np.asarray(words, dtype=np.intp)
    r = np.broadcast_to(np.asarray(radius, dtype=np.float64), words.shape).copy()
    if not np.all(r >= 0):
        raise ValidationError(f"a ball's radius must be >= 0, got {r.min()!r}")
    k, n = len(words), space.n
    if space.metric != "euclidean":  # no fast pass: every distance, pair by pair
        every = np.arange(n, dtype=np.intp)
        found = []
        for x, rad in zip(words.tolist(), r.tolist(), strict=True):
            d = pair_distances(space, np.full(n, x, dtype=np.intp), every)
            hit = np.flatnonzero(d <= rad)
            found.append((hit, d[hit], rad))
        return found
    x = space.vectors[words]
    sqx = space.sqnorms[words]
    coef = np.ascontiguousarray(np.column_stack([-2.0 * x, np.ones(k)]), dtype=np.float32)
    tol = _tolerance(np.ones(k), x, float(space.sqnorms.max()), space.radius_max, space.dim)

    def threshold(rad: NDArray[np.float64], rows: slice | NDArray[np.intp]) -> NDArray[np.float32]:
        # the fast score of every member is at most this (module docstring), rounded up: nothing lost
        with np.errstate(over="ignore"):  # a radius beyond float32: every word is a candidate
            thr = np.minimum(rad * rad * (1.0 + _RELATIVE) - sqx[rows] + tol[rows], np.finfo(np.float32).max)
            return np.nextafter(thr.astype(np.float32), np.float32(np.inf))

    thr32 = threshold(r, slice(None))
    fast = _fast(space)
    rows: list[NDArray[np.intp]] = []
    cols: list[NDArray[np.intp]] = []
    vals: list[NDArray[np.float32]] = []
    step = max(1, min(n, BLOCK_BYTES // (8 * max(1, k))))
    for start in range(0, n, step):
        scores = fast[start : start + step] @ coef.T  # (step, k) float32
        flat = np.flatnonzero(scores <= thr32)  # a 1-d index: cheaper than a 2-d nonzero
        rows.append(flat % k)
        cols.append(flat // k + start)
        vals.append(scores.reshape(-1)[flat])
    row = np.concatenate(rows).astype(np.intp)
    col = np.concatenate(cols).astype(np.intp)
    val = np.concatenate(vals)
    if limit is not None:
        counts = np.bincount(row, minlength=k)
        for i in np.flatnonzero(counts > limit).tolist():  # too many: the radius of about `limit` candidates
            mine = row == i
            s_l = float(np.partition(val[mine], limit - 1)[limit - 1])
            r[i] = np.sqrt(max(0.0, s_l + sqx[i] - 2.0 * tol[i]) / (1.0 + _RELATIVE))
            # every member at the new radius was a candidate at the old one (a lower threshold)
            drop = mine & (val > threshold(r[i : i + 1], slice(i, i + 1))[0])
            row, col, val = row[~drop], col[~drop], val[~drop]
    order = np.argsort(row, kind="stable")  # by word, then index (each block's columns come in order)
    row, col = row[order], col[order]
    bounds = np.searchsorted(row, np.arange(k + 1))
    dist = np.empty(len(row))
    for i in range(k):
        dist[bounds[i] : bounds[i + 1]] = _distances_from(space, int(words[i]), col[bounds[i] : bounds[i + 1]])
    keep = dist <= r[row]
    row, col, dist = row[keep], col[keep], dist[keep]
    bounds = np.searchsorted(row, np.arange(k + 1))
    return [(col[bounds[i] : bounds[i + 1]], dist[bounds[i] : bounds[i + 1]], float(r[i])) for i in range(k)]


def kth_distance(space: PointSpace, words: NDArray[np.intp], k: int) -> NDArray[np.float64]:
    """About the distance from each word of ``words`` to its k-th nearest word (itself the 0-th), by the
    float32 pass alone: a size for a ball, not a distance any law reads."""
    words = np.asarray(words, dtype=np.intp)
    k = min(int(k), space.n - 1)
    coef = np.ascontiguousarray(np.column_stack([-2.0 * space.vectors[words], np.ones(len(words))]), dtype=np.float32)
    scores = coef @ _fast(space).T  # float32 (len(words), n)
    # adding a row's constant in float64 is monotone: the k-th smallest d2 is the k-th smallest score's
    kth = np.partition(scores, k, axis=1)[:, k].astype(np.float64) + space.sqnorms[words]
    return np.sqrt(np.maximum(kth, 0.0))


def _bernoulli_power(t: NDArray[np.int64], rng: RandomSource) -> NDArray[np.bool_]:
    """For each t >= 0, True with probability exactly 2**-t: t random bits, all zero."""
    out = np.ones(len(t), dtype=bool)
    left = t.astype(np.int64).copy()
    todo = np.flatnonzero(left > 0)
    while todo.size:
        w = random_words(rng, todo.size)
        take = np.minimum(left[todo], 64)
        zero = (w >> (np.uint64(64) - take.astype(np.uint64))) == 0  # its leading `take` (1..64) bits
        out[todo[~zero]] = False
        left[todo] -= take
        todo = todo[zero & (left[todo] > 0)]
    return out


def bernoulli_ratio(a: NDArray[np.float64], b: NDArray[np.float64], rng: RandomSource) -> NDArray[np.bool_]:
    r"""For each i, True with probability exactly ``a[i] / b[i]`` (the floats read as rationals), 0 <= a <= b, b > 0.

    *Method.* Write :math:`a = A 2^{e_a}`, :math:`b = B 2^{e_b}` with 53-bit integers
    :math:`2^{52} \le A, B < 2^{53}` (``frexp``); :math:`a \le b` gives :math:`s = e_b - e_a
    \ge 0`. For s = 0, :math:`a/b = A/B \le 1`: a uniform integer below B is below A. For
    :math:`s \ge 1`, :math:`a/b = \frac{A}{2B} 2^{-(s-1)}` with :math:`A < 2B`: the product of two
    independent coins, one uniform integer below 2B compared with A and s - 1 random bits all
    zero. Every step is an exact integer event on uniform 64-bit words
    (:func:`metricdp.sampling.uniform_below`), so the probability is the rational a / b.

    Examples
    --------
    >>> from metricdp._random import check_rng
    >>> bool(bernoulli_ratio(np.array([0.0, 1.0]), np.array([1.0, 1.0]), check_rng(0)).tolist() == [False, True])
    True
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not (np.all(a >= 0) and np.all(b > 0) and np.all(a <= b) and np.all(np.isfinite(b))):
        raise ValidationError("bernoulli_ratio needs finite 0 <= a <= b with b > 0")
    out = np.zeros(len(a), dtype=bool)
    live = np.flatnonzero(a > 0)
    if live.size == 0:
        return out
    ma, ea = np.frexp(a[live])
    mb, eb = np.frexp(b[live])
    big_a = (ma * 2.0**53).astype(np.uint64)  # exact: 2**52 <= A < 2**53
    big_b = (mb * 2.0**53).astype(np.uint64)
    s = (eb - ea).astype(np.int64)
    below = np.where(s == 0, big_b, big_b * np.uint64(2))  # < 2**54
    coin = uniform_below(below.astype(np.int64), rng).astype(np.uint64) < big_a
    power = _bernoulli_power(np.maximum(s - 1, 0), rng)
    out[live] = coin & power
    return out
