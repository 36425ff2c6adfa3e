"""TEM: gamma as the paper, exact matrix audited, matrix-free frequencies vs the matrix."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metricdp.audit import audit
from metricdp.errors import ValidationError
from metricdp.text.tem import TEMText, tem_gamma, tem_matrix, tem_mechanism
from tests.text.conftest import chi_square_p


def test_gamma_is_the_papers() -> None:
    assert tem_gamma(2.0, 1000, 0.001) == pytest.approx(math.log(0.999 * 1000 / 0.001))
    with pytest.raises(ValidationError, match="beta"):
        tem_gamma(1.0, 10, 1.5)


@pytest.mark.parametrize(("eps", "gamma"), [(3.0, 3.0), (6.0, None)])
def test_frequencies_match_the_audited_matrix(vocab, eps: float, gamma: float | None) -> None:
    dense, points = vocab
    mech = TEMText(points, eps, gamma=gamma)
    certified = tem_mechanism(dense, eps, gamma=mech.gamma)  # audited by certify
    assert audit(certified.matrix, dense.distances).satisfies(eps, 1e-9)
    matrix = tem_matrix(dense.distances, eps, mech.gamma)
    assert np.allclose(matrix, certified.matrix)
    words = [0, 40, 299]
    inputs = np.repeat(words, 20_000)
    out = mech.sample(inputs, rng=77)
    for w in words:
        assert chi_square_p(out[inputs == w], matrix[w]) > 1e-3
    wrong = tem_matrix(dense.distances, eps, mech.gamma * 0.7)
    assert min(chi_square_p(out[inputs == w], wrong[w]) for w in words) < 1e-6


def test_bottom_branch_is_uniform_outside_the_ball(vocab) -> None:
    # gamma = 0: L_x = {x}; every other word is released with the same probability
    dense, points = vocab
    mech = TEMText(points, 1.0, gamma=0.0)
    out = mech.sample(np.full(30_000, 5), rng=3)
    probs = tem_matrix(dense.distances, 1.0, 0.0)[5]
    assert np.allclose(probs[np.arange(300) != 5], probs[0])
    assert chi_square_p(out, probs) > 1e-3


def test_bad_gamma() -> None:
    from metricdp.pointspace import PointSpace

    with pytest.raises(ValidationError, match="gamma"):
        TEMText(PointSpace.from_points([[0.0], [1.0]]), 1.0, gamma=-1.0)


@pytest.mark.parametrize("radius", [0.0, 1.0])
def test_frequencies_through_the_rejection_step(vocab, radius: float) -> None:
    # a ball smaller than gamma: the words between it and gamma come through exact rejection
    dense, points = vocab
    mech = TEMText(points, 3.0, gamma=3.0)
    mech._radius = radius
    matrix = tem_matrix(dense.distances, 3.0, 3.0)
    inputs = np.repeat([0, 40], 20_000)
    out = mech.sample(inputs, rng=2024)
    for w in (0, 40):
        assert chi_square_p(out[inputs == w], matrix[w]) > 1e-3
