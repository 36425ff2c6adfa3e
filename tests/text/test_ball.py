"""The text samplers' one distance, exact balls against brute force, and the exact coin a / b."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from metricdp._random import check_rng
from metricdp.errors import ValidationError
from metricdp.pointspace import PointSpace
from metricdp.text.ball import _bernoulli_power, ball, bernoulli_ratio, kth_distance, pair_distances


def test_pair_distances_by_hand_symmetric_and_zero_on_the_diagonal() -> None:
    space = PointSpace.from_points([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    a, b = np.array([0, 1, 2, 1]), np.array([1, 0, 0, 1])
    assert pair_distances(space, a, b).tolist() == [5.0, 5.0, 10.0, 0.0]
    g = np.random.default_rng(0)
    big = PointSpace.from_points(g.normal(size=(50, 9)) * 3 + 1e4)
    i, j = g.integers(0, 50, 200), g.integers(0, 50, 200)
    d = pair_distances(big, i, j)
    assert np.array_equal(d, pair_distances(big, j, i))
    assert np.allclose(d, np.linalg.norm(big.vectors[i] - big.vectors[j], axis=1), rtol=1e-13, atol=0)


def test_a_pair_has_one_distance_whatever_is_computed_with_it() -> None:
    g = np.random.default_rng(1)
    space = PointSpace.from_points(g.normal(size=(100, 50)))
    alone = pair_distances(space, np.array([3]), np.array([77]))
    among = pair_distances(space, np.full(100, 3), np.arange(100))
    assert alone[0] == among[77]


def _one_by_one(space: PointSpace, x: int, y: int) -> float:
    """The distance of the module docstring, one Python float operation after another."""
    acc = 0.0
    for p, q in zip(space.vectors[x].tolist(), space.vectors[y].tolist(), strict=True):
        acc += (p - q) * (p - q)
    return float(np.sqrt(acc))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_distances_are_the_coordinate_order_sum_in_either_memory_layout(seed) -> None:
    # column-major vectors (PointSpace.from_embeddings) take a faster path: the same floats
    g = np.random.default_rng(seed)
    n, dim = int(g.integers(2, 300)), int(g.integers(1, 60))
    pts = g.normal(size=(n, dim)) * float(g.choice([1e-3, 1.0, 1e3])) + float(g.choice([0.0, 1e4]))
    rows, cols = PointSpace.from_points(pts), PointSpace.from_points(np.asfortranarray(pts))
    assert rows.vectors.flags.c_contiguous and cols.vectors.flags.f_contiguous
    i, j = g.integers(0, n, 100), g.integers(0, n, 100)
    words = g.choice(n, size=min(5, n), replace=False).astype(np.intp)
    for space in (rows, cols):  # (the centring's sum may differ with the layout: each space its own oracle)
        assert pair_distances(space, i, j).tolist() == [_one_by_one(space, a, b) for a, b in zip(i, j, strict=True)]
        for (idx, dist, _), x in zip(ball(space, words, 1e300), words, strict=True):
            assert np.array_equal(idx, np.arange(n))
            assert dist.tolist() == [_one_by_one(space, int(x), y) for y in range(n)]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1e-3, 1.0, 1e3]), st.integers(1, 7))
def test_ball_is_exactly_the_brute_force_ball(seed, scale, k) -> None:
    g = np.random.default_rng(seed)
    n = int(g.integers(2, 400))
    pts = g.normal(size=(n, int(g.integers(1, 12)))) * scale + g.choice([0.0, 1e4]) * scale
    space = PointSpace.from_points(pts)
    words = g.choice(n, size=min(k, n), replace=False).astype(np.intp)
    every = np.arange(n)
    rows = [pair_distances(space, np.full(n, x), every) for x in words]
    # radii on the boundary (an exact distance of the word) and between
    radius = np.array([row[int(g.integers(0, n))] * float(g.choice([1.0, 0.5, 2.0])) for row in rows])
    for (idx, dist, used), row, r in zip(ball(space, words, radius), rows, radius, strict=True):
        assert used == r
        want = np.flatnonzero(row <= r)
        assert np.array_equal(idx, want)
        assert np.array_equal(dist, row[want])


def test_ball_of_radius_zero_and_of_every_word() -> None:
    space = PointSpace.from_points([[0.0], [1.0], [1.0], [5.0]])
    assert [i.tolist() for i, _, _ in ball(space, np.array([1, 3]), 0.0)] == [[1, 2], [3]]
    assert [i.tolist() for i, _, _ in ball(space, np.array([0]), 1e300)] == [[0, 1, 2, 3]]
    with pytest.raises(ValidationError, match="radius"):
        ball(space, np.array([0]), -1.0)


def test_kth_distance_is_about_the_kth_nearest() -> None:
    space = PointSpace.from_points(np.arange(10.0)[:, None])
    assert np.allclose(kth_distance(space, np.array([0, 5]), 3), [3.0, 2.0], atol=1e-5)


class _Words:
    """A source of chosen 64-bit words (the enumeration tests read exactly these)."""

    def __init__(self, words: list[int]) -> None:
        self._words = list(words)

    def words(self, count: int) -> np.ndarray:
        out, self._words = self._words[:count], self._words[count:]
        return np.array(out, dtype=np.uint64)


@pytest.mark.parametrize("t", [1, 3, 64])
def test_power_coin_is_true_for_exactly_the_words_with_t_leading_zeros(t) -> None:
    # enumerate the leading min(t, 8) bits: exactly the all-zero prefix is True
    bits = min(t, 8)
    hits = []
    for prefix in range(2**bits):
        word = prefix << (64 - bits)
        hits.append(bool(_bernoulli_power(np.array([t]), _Words([word]))[0]))
    assert hits == [True] + [False] * (2**bits - 1)
    assert _bernoulli_power(np.array([0]), _Words([]))[0]  # 2**0 = 1: no word read


def test_power_coin_beyond_one_word_reads_the_next() -> None:
    assert _bernoulli_power(np.array([70]), _Words([0, 0]))[0]
    assert not _bernoulli_power(np.array([70]), _Words([0, 1 << 58]))[0]  # bit 70 from the top: the 6th of word 2
    assert _bernoulli_power(np.array([70]), _Words([0, 1 << 57]))[0]


@pytest.mark.parametrize(("a", "b"), [(1.0, 3.0), (0.3, 0.7), (2.0**-3 * 0.9, 1.0), (5e-3, 1e-2), (1.0, 1.0)])
def test_coin_frequency_is_a_over_b(a, b) -> None:
    n = 40_000
    hits = int(bernoulli_ratio(np.full(n, a), np.full(n, b), check_rng(2024)).sum())
    assert stats.binomtest(hits, n, a / b).pvalue > 1e-3 if a < b else hits == n


def test_coin_of_a_tiny_ratio_and_bad_arguments() -> None:
    rng = check_rng(5)
    assert not bernoulli_ratio(np.array([1e-300, 0.0]), np.array([1.0, 1.0]), rng).any()
    with pytest.raises(ValidationError, match="a <= b"):
        bernoulli_ratio(np.array([2.0]), np.array([1.0]), rng)


def test_a_ball_over_the_limit_is_exact_at_the_smaller_radius_it_returns() -> None:
    g = np.random.default_rng(4)
    space = PointSpace.from_points(g.normal(size=(500, 6)))
    words = np.array([0, 9])
    (idx, dist, r), (idx2, _, r2) = ball(space, words, 100.0, limit=40)
    assert r < 100.0 and r2 < 100.0 and 0 < len(idx) <= 60
    row = pair_distances(space, np.full(500, 0), np.arange(500))
    assert np.array_equal(idx, np.flatnonzero(row <= r)) and np.array_equal(dist, row[idx])
    row2 = pair_distances(space, np.full(500, 9), np.arange(500))
    assert np.array_equal(idx2, np.flatnonzero(row2 <= r2))
