"""The two-pass exact search (text.nearest) gives PointSpace.argmin_quadratic's answer, ties included."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.mechanisms.madlib import madlib_polar, nearest_release
from metricdp.pointspace import PointSpace
from metricdp.text import nearest
from metricdp.text.madlib import MadlibText, noisy_release


@pytest.fixture
def small_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiles of a few points and blocks of a few queries: many blocks, several workers."""
    monkeypatch.setattr(nearest, "_TILE_BYTES", 4 * 7 * 5)
    monkeypatch.setattr(nearest, "_QUERIES", 7)
    monkeypatch.setattr(nearest, "_workers", lambda: 3)


def _space(seed: int, n: int, dim: int, dup: int) -> PointSpace:
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, dim))
    x[n - dup :] = x[:dup]  # duplicate vectors: exact ties, the smaller index must win
    return PointSpace.from_points(x)


@pytest.mark.usefixtures("small_tiles")
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 60), st.integers(1, 6), st.floats(0.05, 1e3), st.integers(0, 40))
def test_same_answer_as_one_pass(seed: int, n: int, dim: int, eps: float, queries: int) -> None:
    space = _space(seed, n, dim, n // 3)
    g = np.random.default_rng(seed + 1)
    idx = g.integers(0, n, queries)
    direction, gamma = madlib_polar(dim, eps, queries, g)
    one = nearest_release(space, idx, direction, gamma, eps)
    two = nearest_release(cast(PointSpace, nearest.TwoPassSearch(space)), idx, direction, gamma, eps)
    assert np.array_equal(one, two)


@pytest.mark.usefixtures("small_tiles")
def test_ties_go_to_the_smaller_index_and_limit_eps() -> None:
    # three copies of one point: every query nearest to it names index 0
    space = PointSpace.from_points([[0.0, 0.0], [0.0, 0.0], [5.0, 0.0], [0.0, 0.0]])
    idx = np.array([0, 1, 3, 2])
    direction = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [1.0, 0.0]])
    gamma = np.array([0.1, 0.1, 0.1, np.inf])  # r = inf: the word furthest along the direction
    out = nearest_release(cast(PointSpace, nearest.TwoPassSearch(space)), idx, direction, gamma, 1.0)
    assert out.tolist() == [0, 0, 0, 2]


def test_madlib_text_uses_it_and_keeps_its_law() -> None:
    space = _space(3, 200, 5, 10)
    g = np.random.default_rng(0)
    idx = g.integers(0, 200, 3000)
    direction, gamma = madlib_polar(5, 2.0, len(idx), g)
    assert np.array_equal(
        noisy_release(space, idx, direction, gamma, 2.0, None), nearest_release(space, idx, direction, gamma, 2.0)
    )
    assert np.array_equal(MadlibText(space, 2.0).sample(idx, rng=5), MadlibText(space, 2.0).sample(idx, rng=5))


def test_empty_batch() -> None:
    space = _space(0, 10, 3, 0)
    out = nearest.two_pass_argmin(space, np.empty(0), np.empty((0, 3)), lambda r, c: np.empty(0))
    assert out.shape == (0,)
