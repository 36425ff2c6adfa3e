"""FreeWords: the nearest free words in (squared distance, index) order, against an exact integer oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.pointspace import PointSpace
from metricdp.text.neighbours import FreeWords, squared_distances


def _symmetric(points: np.ndarray) -> np.ndarray:
    """The points and their opposites: integer coordinates of mean exactly 0, so that the centred
    vectors are the points themselves and every squared distance is exact."""
    return np.concatenate([points, -points])


def _oracle(points: np.ndarray, word: int, free: np.ndarray, k: int) -> list[int]:
    """Integer coordinates: every squared distance exact; ties to the smaller index."""
    d = ((points[free] - points[word]) ** 2).sum(axis=1)
    return free[np.lexsort((free, d))][:k].tolist()


def _walk_matches(points: np.ndarray, space: PointSpace, order: np.ndarray, k: int) -> None:
    free = FreeWords(space)
    left = np.ones(len(points), dtype=bool)
    for word in order.tolist():
        if not left[word]:
            continue
        free.take(word)
        left[word] = False
        got = free.nearest(word, k)
        assert got.tolist() == _oracle(points, word, np.flatnonzero(left), k)
        free.take(got)
        left[got] = False
    assert free.left == 0 and free.taken.all()


@pytest.mark.parametrize("k", [1, 3, 19])
def test_walk_on_a_grid_full_of_ties(k) -> None:
    # 600 points on a 7 x 7 x 7 integer grid: many equal distances and duplicate points; more words
    # than one scored block keeps, so the block is compacted along the walk
    g = np.random.default_rng(5)
    points = _symmetric(g.integers(-3, 4, size=(300, 3)))
    space = PointSpace.from_points(points + 1e8)  # far from the origin; the mean is exactly 1e8
    assert np.array_equal(space.vectors, points)
    _walk_matches(points, space, g.permutation(600), k)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_any_walk_takes_the_oracles_words(n, k, seed) -> None:
    g = np.random.default_rng(seed)
    points = _symmetric(g.integers(-3, 4, size=(n, 2)))
    _walk_matches(points, PointSpace.from_points(points), g.permutation(2 * n), k)


def test_vectors_beyond_float32_take_the_exact_pass() -> None:
    points = np.array([[0.0], [3e20], [1e20], [-2e20], [1e20]])
    free = FreeWords(PointSpace.from_points(points))
    free.take(0)
    assert free.nearest(0, 3).tolist() == [2, 4, 3]  # 1e20 twice (smaller index first), then -2e20


def test_squared_distances_do_not_depend_on_the_other_words() -> None:
    space = PointSpace.from_points(np.random.default_rng(1).normal(size=(50, 7)))
    alone = [squared_distances(space, 3, np.array([j]))[0] for j in range(50)]
    assert squared_distances(space, 3, np.arange(50)).tolist() == alone


def test_nothing_left() -> None:
    free = FreeWords(PointSpace.from_points([[0.0], [1.0]]))
    free.take(np.array([0, 1]))
    assert free.nearest(0, 5).tolist() == []
