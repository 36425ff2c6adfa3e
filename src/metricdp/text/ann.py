"""Optional approximate nearest-word indexes (faiss-cpu), for Madlib-style mechanisms.

Privacy is unaffected: the noisy vector is already eps-mDP, and any fixed function of
it (an exact or approximate nearest-word search that does not look at the input word)
is post-processing. Only utility changes: a query may return a word that is not the
nearest; :func:`recall_at_1` measures how often an index agrees with the exact search.

* :class:`IVFIndex` -- ``IndexIVFFlat``: k-means cells, ``nprobe`` cells searched. The
  default (1,024 cells, nprobe 8) trades a few per cent of recall@1 for speed against
  nprobe 16 on GloVe 400k (benchmarks/RESULTS.md#docstrings-text-ann). Trained on every 4th word (deterministic).
* :class:`HNSWIndex` -- ``IndexHNSWFlat``: a graph; slower to build than the IVF index
  and of lower recall at equal speed on the same queries (benchmarks/RESULTS.md#docstrings-text-ann).

Install with ``pip install 'metricdp[faiss-cpu]'``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._validation import check_int
from ..pointspace import PointSpace

__all__ = ["ANNIndex", "HNSWIndex", "IVFIndex", "make_index", "recall_at_1"]


class ANNIndex:
    """Common part: a faiss index over the centred float32 vectors of a :class:`PointSpace`."""

    kind = ""

    def __init__(self, space: PointSpace) -> None:
        self.space = space
        self.index: object = None

    def search(self, centred_queries: NDArray[np.float64]) -> NDArray[np.intp]:
        """Approximate nearest word to each query (in the space's centred coordinates)."""
        q = np.ascontiguousarray(centred_queries, dtype=np.float32)
        _, idx = self.index.search(q, 1)  # type: ignore[attr-defined]
        return idx[:, 0].astype(np.intp)


class IVFIndex(ANNIndex):
    """faiss ``IndexIVFFlat`` with ``nlist`` cells, ``nprobe`` searched per query."""

    kind = "ivf"

    def __init__(self, space: PointSpace, *, nlist: int = 1024, nprobe: int = 8) -> None:
        faiss = import_optional("faiss", "faiss-cpu")
        super().__init__(space)
        nlist = check_int(nlist, "nlist", minimum=1, maximum=space.n)
        x = np.ascontiguousarray(space.vectors, dtype=np.float32)
        quantizer = faiss.IndexFlatL2(space.dim)
        index = faiss.IndexIVFFlat(quantizer, space.dim, nlist)
        train = x[:: max(1, min(4, space.n // (40 * nlist) or 1))]
        index.train(train)
        index.add(x)
        index.nprobe = check_int(nprobe, "nprobe", minimum=1, maximum=nlist)
        self.index, self.quantizer = index, quantizer


class HNSWIndex(ANNIndex):
    """faiss ``IndexHNSWFlat`` (graph degree ``m``, beams ``ef_construction`` / ``ef_search``)."""

    kind = "hnsw"

    def __init__(self, space: PointSpace, *, m: int = 16, ef_construction: int = 40, ef_search: int = 64) -> None:
        faiss = import_optional("faiss", "faiss-cpu")
        super().__init__(space)
        index = faiss.IndexHNSWFlat(space.dim, check_int(m, "m", minimum=2))
        index.hnsw.efConstruction = check_int(ef_construction, "ef_construction", minimum=1)
        index.hnsw.efSearch = check_int(ef_search, "ef_search", minimum=1)
        index.add(np.ascontiguousarray(space.vectors, dtype=np.float32))
        self.index = index


def make_index(kind: str, space: PointSpace) -> ANNIndex:
    """``"ivf"`` or ``"hnsw"`` with the defaults above."""
    from ..errors import ValidationError

    if kind == "ivf":
        nlist = max(1, min(1024, space.n // 39))  # faiss wants >= 39 training points per cell
        return IVFIndex(space, nlist=nlist, nprobe=max(1, min(8, nlist // 2)))
    if kind == "hnsw":
        return HNSWIndex(space)
    raise ValidationError(f"index must be 'exact', 'ivf' or 'hnsw', got {kind!r}")


def recall_at_1(approx: NDArray[np.intp], exact: NDArray[np.intp]) -> float:
    """Fraction of queries where the approximate answer equals the exact one."""
    approx, exact = np.asarray(approx), np.asarray(exact)
    return float(np.mean(approx == exact)) if len(exact) else 1.0
