"""Matrix-free exponential mechanism vs its exact matrix on 300 GloVe words (chi-square, audit)."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.audit import audit
from metricdp.errors import ValidationError
from metricdp.mechanisms.exponential import exponential_matrix
from metricdp.pointspace import PointSpace
from metricdp.text.exponential import ExponentialText, exponential_epsilon
from tests.text.conftest import chi_square_p

EPS = 1.5
WORDS = [0, 17, 250]


@pytest.mark.slow
def test_release_frequencies_match_the_exact_matrix(vocab) -> None:
    dense, points = vocab
    matrix = exponential_matrix(dense.distances, EPS)
    assert audit(matrix, dense.distances).satisfies(EPS, 1e-9)
    mech = ExponentialText(points, EPS)
    inputs = np.repeat(WORDS, 20_000)
    out = mech.sample(inputs, rng=2024)
    for w in WORDS:
        assert chi_square_p(out[inputs == w], matrix[w]) > 1e-3
    # power: the same releases are rejected against the matrix at 1.3 eps
    wrong = exponential_matrix(dense.distances, 1.3 * EPS)
    assert chi_square_p(out[inputs == 0], wrong[0]) < 1e-6


def test_cache_gives_the_same_law_and_is_bounded(vocab) -> None:
    _, points = vocab
    one = sum(a.nbytes for a in ExponentialText(points, EPS)._make(np.array([0]))[0])  # one word's table
    mech = ExponentialText(points, EPS, cache_bytes=2 * one)  # two tables
    a = mech.sample(np.arange(10), rng=1)
    b = mech.sample(np.arange(10), rng=1)  # the two most recent tables now come from the cache
    assert np.array_equal(a, b)
    assert mech.cache.hits >= 2 and mech.cache._bytes <= 2 * one


def test_high_epsilon_keeps_the_word_and_proven_epsilon() -> None:
    space = PointSpace.from_points([[0.0], [10.0], [20.0]])
    assert ExponentialText(space, 50.0).sample([0, 1, 2], rng=0).tolist() == [0, 1, 2]
    assert exponential_epsilon(2.5) == 2.5
    with pytest.raises(ValidationError):
        ExponentialText(space, -1.0)
    with pytest.raises(ValidationError, match="PointSpace"):
        ExponentialText(np.eye(2), 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("radius", [0.0, 2.0, 1e6])
def test_the_law_does_not_depend_on_the_ball(vocab, radius) -> None:
    # radius 0: every release but the word itself comes through the rejection step; 1e6: none does
    dense, points = vocab
    eps = 3.0
    matrix = exponential_matrix(dense.distances, eps)
    mech = ExponentialText(points, eps)
    mech._radius = radius
    inputs = np.repeat([5, 123], 15_000)
    out = mech.sample(inputs, rng=2024)
    for w in (5, 123):
        assert chi_square_p(out[inputs == w], matrix[w]) > 1e-3
    assert chi_square_p(out[inputs == 5], exponential_matrix(dense.distances, 1.3 * eps)[5]) < 1e-6


def test_rejection_draws_are_exact_on_an_enumerable_space() -> None:
    # three words on a line, ball {x}: the release law is e^{-eps d/2} normalised, to chi-square precision
    space = PointSpace.from_points([[0.0], [1.0], [2.0]])
    mech = ExponentialText(space, 2.0)
    mech._radius = 0.0
    w = np.exp(-np.array([0.0, 1.0, 2.0]))
    out = mech.sample(np.zeros(60_000, dtype=np.intp), rng=3)
    assert chi_square_p(out, w / w.sum()) > 1e-3
    table = mech.cache.get(0)
    assert table is not None and table[0].tolist() == [0] and table[2][0] >= np.exp(-0.0)  # ball {0}, bound >= 1


def test_the_weights_are_those_of_the_one_distance(vocab) -> None:
    from metricdp.text.ball import pair_distances

    _, points = vocab
    mech = ExponentialText(points, 2.0)
    lw = mech.log_weights(np.array([7]))
    d = pair_distances(points, np.full(points.n, 7), np.arange(points.n))
    assert np.array_equal(lw[0], -1.0 * d) and lw[0, 7] == 0.0
