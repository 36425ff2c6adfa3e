r"""A point space: labels, vectors and a metric, and no distance matrix.

:class:`~metricdp.spaces.MetricSpace` stores the dense n x n distances (8 n^2 bytes:
1.3 TB for the 400,000 GloVe words). :class:`PointSpace` keeps only the n x dim
vectors and computes distances to a block of points when asked, in blocks whose size
is bounded (:data:`BLOCK_BYTES`), so memory is O(n dim + block) whatever n is.

Exactness. The vectors are stored *centred* (the mean subtracted; Euclidean,
Manhattan and Chebyshev distances are translation invariant), so coordinates offset by
1e8 lose nothing to cancellation. Nearest-neighbour queries are exact to the float64
precision of a directly computed distance: a fast float32 BLAS pass scores every point
with :math:`a\lVert p\rVert^2 - 2 p\cdot w`; a rigorous bound ``tol`` on its rounding
error (:func:`_tolerance`) keeps every point whose fast score is within ``2 tol`` of the
block's smallest, which provably contains the true minimiser (if :math:`p^*` is the true
one and :math:`\hat p` the fast one, :math:`\tilde s(p^*) \le s(p^*) + tol \le s(\hat p)
+ tol \le \tilde s(\hat p) + 2 tol`); those few are ranked by float64 differences
:math:`\lVert q - p\rVert^2` (no cancellation), ties to the smaller index.

Memory. Every allocation proportional to n^2 or to a user-sized block is checked first
(:func:`check_memory`, which is :func:`metricdp._resources.check_allocation`, the one
memory guard and its one parser of ``METRICDP_MEMORY_LIMIT``); a refusal is a
:class:`~metricdp.errors.ResourceLimitError` naming the size and the limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._resources import check_allocation as check_memory
from ._resources import memory_limit
from ._validation import check_int
from .errors import ValidationError
from .spaces import MetricSpace, check_metric_name, pairwise_distances

__all__ = ["BLOCK_BYTES", "PointSpace", "check_memory", "memory_limit"]

#: Bytes of one block of distances or scores (queries x points).
BLOCK_BYTES = 64 * 2**20
_U32 = 2.0**-24  # unit roundoff of float32
_QUERY_BLOCK = 512  # queries per BLAS block
_MAX_PAIRS = 1 << 20  # candidate pairs refined at once (pairs x dim x 8 bytes)


def _readonly(a: NDArray) -> NDArray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False, repr=False)
class PointSpace:
    """Points with a named metric, distances computed on demand (no n x n matrix).

    Build with :meth:`from_points` or :meth:`from_embeddings`.

    Attributes
    ----------
    labels : tuple of str
        Unique labels (words).
    vectors : ndarray of shape (n, dim)
        float64 coordinates *centred* on ``centre`` (read-only).
    metric : str
        ``euclidean``, ``manhattan``, ``chebyshev`` or ``haversine`` (not centred).
    centre : ndarray of shape (dim,)
        What was subtracted from the input coordinates.

    Examples
    --------
    >>> s = PointSpace.from_points([[1e8, 0.0], [1e8 + 1.0, 0.0], [1e8, 2.0]], ["a", "b", "c"])
    >>> s.nearest([[1e8 + 0.9, 0.1]]).tolist()
    [1]
    >>> s.distances_from([0], 0, 3).round(6).tolist()
    [[0.0, 1.0, 2.0]]
    """

    labels: tuple[str, ...]
    vectors: NDArray[np.float64]
    metric: str
    centre: NDArray[np.float64]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {lab: i for i, lab in enumerate(self.labels)})

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_points(
        cls, points: ArrayLike, labels: Sequence[object] | None = None, metric: str = "euclidean"
    ) -> PointSpace:
        """Points (n, dim) and unique labels; duplicate points are allowed (a word may
        share another's vector) but every query then names the smaller index."""
        check_metric_name(metric)
        try:
            x = np.asarray(points)
        except (TypeError, ValueError) as ex:
            raise ValidationError(f"points must be a numeric 2-d array (n, dim): {ex}") from None
        if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
            raise ValidationError(f"points must be a 2-d array with at least 2 rows, got shape {x.shape}")
        if not np.issubdtype(x.dtype, np.number):
            raise ValidationError(f"points must be numeric, got dtype {x.dtype}")
        check_memory(8.0 * x.size * 2, f"{x.shape[0]:,} x {x.shape[1]} float64 vectors (and a float32 copy)")
        x = np.array(x, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            i = int(np.argwhere(~np.isfinite(x))[0][0])
            raise ValidationError(f"points row {i} is not finite")
        if metric == "haversine":
            if x.shape[1] != 2 or (np.abs(x[:, 0]) > 90).any() or (np.abs(x[:, 1]) > 180).any():
                raise ValidationError("haversine needs (lat, lon) columns in degrees")
            centre = np.zeros(x.shape[1])
        else:
            centre = x.mean(axis=0)
            x -= centre
        if labels is None:
            labs = tuple(str(i) for i in range(x.shape[0]))
        else:
            labs = tuple(str(v) for v in labels)
            if len(labs) != x.shape[0]:
                raise ValidationError(f"labels has {len(labs)} entries for {x.shape[0]} points")
            if len(set(labs)) != len(labs):
                seen: dict[str, int] = {}
                for i, lab in enumerate(labs):
                    if lab in seen:
                        raise ValidationError(f"label {lab!r} appears twice (rows {seen[lab]} and {i})")
                    seen[lab] = i
        return cls(labs, _readonly(x), metric, _readonly(centre))

    @classmethod
    def from_embeddings(cls, embeddings: object, size: int | None = None) -> PointSpace:
        """The first ``size`` words (all when None) of an :class:`~metricdp.data.embeddings.Embeddings`
        (files are sorted by frequency, so these are the most frequent), Euclidean."""
        words = embeddings.words  # type: ignore[attr-defined]
        vectors = embeddings.vectors  # type: ignore[attr-defined]
        n = len(words) if size is None else check_int(size, "size", minimum=2, maximum=len(words))
        return cls.from_points(vectors[:n], words[:n], "euclidean")

    # ----------------------------------------------------------------- basics
    @property
    def n(self) -> int:
        return len(self.labels)

    def __len__(self) -> int:
        return self.n

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def points(self) -> NDArray[np.float64]:
        """The coordinates as given (centre added back; a new array)."""
        return self.vectors + self.centre

    @cached_property
    def sqnorms(self) -> NDArray[np.float64]:
        """Squared norms of the centred vectors."""
        return _readonly(np.einsum("ij,ij->i", self.vectors, self.vectors))

    @cached_property
    def _v32(self) -> NDArray[np.float32]:
        """float32 copy of the centred vectors, augmented by the squared norms (fast pass)."""
        return _readonly(np.ascontiguousarray(np.column_stack([self.vectors, self.sqnorms]), dtype=np.float32))

    @cached_property
    def radius_max(self) -> float:
        """Largest norm of a centred vector."""
        return float(np.sqrt(self.sqnorms.max()))

    def memory_bytes(self, rows: int, cols: int, itemsize: int = 8) -> int:
        """Bytes of a rows x cols block of distances."""
        return int(rows) * int(cols) * int(itemsize)

    def index(self, labels: str | Iterable[str]) -> NDArray[np.intp]:
        """Indices of labels; the error names the labels not in the space."""
        items = [labels] if isinstance(labels, str) else list(labels)
        missing = sorted({str(x) for x in items if str(x) not in self._index})
        if missing:
            shown = ", ".join(repr(m) for m in missing[:10]) + (
                f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            )
            raise ValidationError(f"{len(missing)} value(s) not in the space's labels: {shown}")
        return np.array([self._index[str(x)] for x in items], dtype=np.intp)

    def get(self, label: str, default: int = -1) -> int:
        """Index of ``label`` or ``default``."""
        return self._index.get(label, default)

    def __repr__(self) -> str:
        return f"PointSpace(n={self.n}, dim={self.dim}, metric={self.metric!r})"

    # ----------------------------------------------------------------- distances
    def _check_indices(self, indices: ArrayLike) -> NDArray[np.intp]:
        idx = np.asarray(indices)
        if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
            raise ValidationError(f"indices must be a 1-d integer array, got {idx.dtype} of shape {idx.shape}")
        idx = idx.astype(np.intp)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            bad = int(idx[(idx < 0) | (idx >= self.n)][0])
            raise ValidationError(f"index {bad} is outside 0..{self.n - 1}")
        return idx

    def distances_from(self, indices: ArrayLike, start: int = 0, stop: int | None = None) -> NDArray[np.float64]:
        """Distances from the points ``indices`` to the points ``start:stop``, shape (k, stop-start).

        Euclidean: :math:`\\sqrt{\\max(0, |x|^2 + |p|^2 - 2 x\\cdot p)}` by float64 BLAS on
        centred vectors (absolute error about 1e-15 R^2 / d), exactly 0 on the diagonal.
        Other metrics: :func:`scipy.spatial.distance.cdist`. The block is checked against
        the memory limit first.
        """
        idx = self._check_indices(indices)
        stop = self.n if stop is None else int(stop)
        if not 0 <= start <= stop <= self.n:
            raise ValidationError(f"block {start}:{stop} is outside 0..{self.n}")
        check_memory(8.0 * len(idx) * (stop - start), f"{len(idx):,} x {stop - start:,} distances")
        x = self.vectors[idx]
        block = self.vectors[start:stop]
        if self.metric != "euclidean":
            return pairwise_distances(x, block, self.metric)
        # |x|^2 + |p|^2 - 2 x.p, evaluated in that order in place (one k x block temporary)
        d2 = (2.0 * x) @ block.T  # = 2 (x @ block.T) bit for bit: scaling by 2 is exact in every product and sum
        np.subtract(np.add(self.sqnorms[idx][:, None], self.sqnorms[start:stop][None, :]), d2, out=d2)
        np.maximum(d2, 0.0, out=d2)
        d = np.sqrt(d2, out=d2)
        rows = np.flatnonzero((idx >= start) & (idx < stop))
        d[rows, idx[rows] - start] = 0.0
        return d

    def within(self, indices: ArrayLike, r: float) -> list[tuple[NDArray[np.intp], NDArray[np.float64]]]:
        """For each point of ``indices``: the indices (increasing) and distances of the points with
        ``distances_from(...) <= r``, exactly as :meth:`distances_from` computes them.

        Euclidean: the squared distances of a block are compared with a threshold a little above
        :math:`r^2` first, and the square roots taken only for the survivors. The prefilter keeps
        every point the exact test keeps: a correctly rounded square root :math:`\\mathrm{fl}(\\sqrt
        y) \\le r` implies :math:`\\sqrt y < r (1 + 2^{-52})`, so :math:`y < r^2 (1 + 3 \\cdot
        2^{-52})`, below the threshold :math:`(r (1 + 10^{-12}))^2`; survivors then take the
        same elementwise operations as :meth:`distances_from` and the same test.
        """
        idx = self._check_indices(indices)
        r = float(r)
        if not r >= 0:
            raise ValidationError(f"radius must be >= 0, got {r!r}")
        if self.metric != "euclidean":
            found = []
            for i in idx:
                hit, dist = self.radius(int(i), r)
                found.append((hit, dist))
            return found
        check_memory(8.0 * len(idx) * self.n, f"{len(idx):,} x {self.n:,} distances")
        d2 = (2.0 * self.vectors[idx]) @ self.vectors.T
        np.subtract(np.add(self.sqnorms[idx][:, None], self.sqnorms[None, :]), d2, out=d2)
        d2[np.arange(len(idx)), idx] = 0.0  # the point itself: distance exactly 0, as distances_from sets it
        wide = (r * (1.0 + 1e-12)) ** 2
        found = []
        for row in d2:  # one pass per query point (a block holds few)
            cand = np.flatnonzero(row <= wide)
            dist = np.sqrt(np.maximum(row[cand], 0.0))
            keep = dist <= r
            found.append((cand[keep].astype(np.intp), dist[keep]))
        return found

    def block_size(self, rows: int) -> int:
        """Points per block so that ``rows`` x block float64 fit in :data:`BLOCK_BYTES`."""
        return max(1, min(self.n, BLOCK_BYTES // (8 * max(1, int(rows)))))

    def blocks(self, indices: ArrayLike) -> Iterator[tuple[int, int, NDArray[np.float64]]]:
        """``(start, stop, distances_from(indices, start, stop))`` over the whole space."""
        idx = self._check_indices(indices)
        step = self.block_size(len(idx))
        for start in range(0, self.n, step):
            stop = min(self.n, start + step)
            yield start, stop, self.distances_from(idx, start, stop)

    def radius(self, index: int, r: float) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """Indices (increasing) and distances of the points within distance ``r`` of point ``index``."""
        r = float(r)
        if not r >= 0:
            raise ValidationError(f"radius must be >= 0, got {r!r}")
        found_i, found_d = [], []
        for start, _, d in self.blocks([int(index)]):
            hit = np.flatnonzero(d[0] <= r)
            found_i.append(hit + start)
            found_d.append(d[0, hit])
        return np.concatenate(found_i).astype(np.intp), np.concatenate(found_d)

    def to_metric_space(self, indices: ArrayLike | None = None) -> MetricSpace:
        """The dense :class:`MetricSpace` on ``indices`` (all points when None), memory checked."""
        idx = np.arange(self.n) if indices is None else self._check_indices(indices)
        check_memory(8.0 * len(idx) ** 2 * 3, f"{len(idx):,} x {len(idx):,} distances")
        return MetricSpace.from_points(self.vectors[idx], [self.labels[i] for i in idx], self.metric)

    # ----------------------------------------------------------------- nearest neighbours
    def nearest(self, queries: ArrayLike) -> NDArray[np.intp]:
        """Exact index of the nearest point to each query (coordinates as given, not centred).

        Ties go to the smaller index. Euclidean: the certified two-pass search of the
        module docstring; other metrics: blocked :func:`cdist` argmin.
        """
        q = np.asarray(queries, dtype=np.float64)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValidationError(f"queries must have shape (k, {self.dim}), got {q.shape}")
        if not np.all(np.isfinite(q)):
            raise ValidationError("queries must be finite")
        qc = q - self.centre
        if self.metric != "euclidean":
            return self._nearest_cdist(qc)

        def exact(rows: NDArray[np.intp], cols: NDArray[np.intp]) -> NDArray[np.float64]:
            diff = qc[rows] - self.vectors[cols]
            return np.einsum("ij,ij->i", diff, diff)

        return self.argmin_quadratic(np.ones(len(qc)), qc, exact)

    def _nearest_cdist(self, qc: NDArray[np.float64]) -> NDArray[np.intp]:
        best = np.full(len(qc), np.inf)
        arg = np.zeros(len(qc), dtype=np.intp)
        for a in range(0, len(qc), _QUERY_BLOCK):
            q = qc[a : a + _QUERY_BLOCK]
            step = self.block_size(len(q))
            for start in range(0, self.n, step):
                d = pairwise_distances(q, self.vectors[start : start + step], self.metric)
                j = d.argmin(axis=1)
                v = d[np.arange(len(q)), j]
                better = v < best[a : a + len(q)]
                best[a : a + len(q)][better] = v[better]
                arg[a : a + len(q)][better] = j[better] + start
        return arg

    def argmin_quadratic(
        self,
        a: NDArray[np.float64],
        w: NDArray[np.float64],
        exact: Callable[[NDArray[np.intp], NDArray[np.intp]], NDArray[np.float64]],
    ) -> NDArray[np.intp]:
        r"""For each row k: the point p minimising :math:`a_k\lVert p\rVert^2 - 2 p\cdot w_k` (centred).

        ``exact(rows, cols)`` must return, in float64 and without cancellation, a value
        that differs from :math:`a_k\lVert p\rVert^2 - 2 p\cdot w_k` by a constant per row
        (e.g. :math:`\lVert q_k - p\rVert^2`); it ranks the candidates that the float32
        pass cannot separate. ``a >= 0``. Ties go to the smaller index.
        """
        a = np.asarray(a, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        out = np.empty(len(w), dtype=np.intp)
        for s in range(0, len(w), _QUERY_BLOCK):
            out[s : s + _QUERY_BLOCK] = self._argmin_block(a[s : s + _QUERY_BLOCK], w[s : s + _QUERY_BLOCK], exact, s)
        return out

    def _argmin_block(self, a: NDArray, w: NDArray, exact: Callable, offset: int) -> NDArray[np.intp]:
        k = len(w)
        coef = np.ascontiguousarray(np.column_stack([-2.0 * w, a]), dtype=np.float32)  # (k, dim+1)
        tol = _tolerance(a, w, float(self.sqnorms.max()), self.radius_max, self.dim)
        best_val = np.full(k, np.inf)
        best_idx = np.full(k, self.n, dtype=np.intp)
        step = max(1, min(self.n, BLOCK_BYTES // (4 * max(1, k))))
        v32 = self._v32
        running = np.full(k, np.inf)  # smallest fast score seen so far, per row
        for start in range(0, self.n, step):
            scores = coef @ v32[start : start + step].T  # (k, B) float32
            low = scores.min(axis=1).astype(np.float64)
            np.minimum(running, low, out=running)
            # The true minimiser's fast score is <= (final smallest) + 2 tol <= running + 2 tol,
            # so a block whose smallest fast score exceeds running + 2 tol holds no candidate.
            live = np.flatnonzero(low <= running + 2.0 * tol)
            if live.size == 0:
                continue
            thr = running[live] + 2.0 * tol[live]
            # compared in float32: the threshold rounded up, so no candidate is lost
            thr32 = np.nextafter(thr.astype(np.float32), np.float32(np.inf))
            sub = scores[live] if live.size < k else scores
            rows, cols = np.nonzero(sub <= thr32[:, None])
            rows = live[rows]
            for c0 in range(0, len(rows), _MAX_PAIRS):
                r, c = rows[c0 : c0 + _MAX_PAIRS], cols[c0 : c0 + _MAX_PAIRS] + start
                vals = exact(r + offset, c)
                order = np.lexsort((c, vals, r))
                r, c, vals = r[order], c[order], vals[order]
                first = np.ones(len(r), dtype=bool)
                first[1:] = r[1:] != r[:-1]
                r, c, vals = r[first], c[first], vals[first]
                better = (vals < best_val[r]) | ((vals == best_val[r]) & (c < best_idx[r]))
                best_val[r[better]] = vals[better]
                best_idx[r[better]] = c[better]
        return best_idx


def _tolerance(a: NDArray, w: NDArray, sq_max: float, r_max: float, dim: int) -> NDArray[np.float64]:
    r"""A bound on the float32 pass's error in :math:`a\lVert p\rVert^2 - 2 p\cdot w`.

    The pass computes :math:`\sum_i c_i v_i` over dim+1 terms (c = (-2w, a) and
    v = (p, |p|^2), each rounded to float32: relative error 2^-24 each, 2^-23 for the
    product's inputs) in float32 (at most (dim+1) 2^-24 relative to the sum of absolute
    terms, any summation order, Higham Thm 3.1): in total at most
    :math:`(dim + 4) 2^{-24} (1 + (dim+4)2^{-24}) (a |p|^2 + 2 |w||p|)`, bounded with
    |p| <= r_max. Doubled for safety; the threshold itself is computed in float64.
    """
    wn = np.sqrt(np.einsum("ij,ij->i", w, w))
    scale = a * sq_max + 2.0 * wn * r_max
    return 2.0 * (dim + 4) * _U32 * (1 + (dim + 4) * _U32) * scale + np.finfo(np.float32).tiny
