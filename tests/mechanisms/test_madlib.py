"""Madlib (Feyisetan et al. WSDM 2020): noise law, nearest-word release, Monte-Carlo estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import cdist

from metricdp.errors import ValidationError
from metricdp.mechanisms.file import load_mechanism
from metricdp.mechanisms.madlib import madlib, madlib_noise, madlib_sample
from metricdp.spaces import MetricSpace
from tests.helpers import random_space


@pytest.mark.parametrize(("dim", "eps"), [(1, 2.0), (3, 0.5), (50, 10.0)])
def test_noise_norm_is_gamma(dim: int, eps: float) -> None:
    z = madlib_noise(dim, eps, 20_000, rng=11)
    norms = np.linalg.norm(z, axis=1)
    assert stats.kstest(norms, stats.gamma(a=dim, scale=1 / eps).cdf).pvalue > 0.01
    # the test has power: a shape off by one is rejected
    assert stats.kstest(norms, stats.gamma(a=dim + 1, scale=1 / eps).cdf).pvalue < 1e-6


def test_noise_direction_is_uniform_on_the_sphere() -> None:
    z = madlib_noise(3, 1.0, 20_000, rng=3)
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    # Archimedes: each coordinate of a uniform point on S^2 is uniform on [-1, 1]
    for k in range(3):
        assert stats.kstest(u[:, k], stats.uniform(-1, 2).cdf).pvalue > 0.01
    angle = np.arctan2(*madlib_noise(2, 1.0, 20_000, rng=4).T[::-1])
    assert stats.kstest(angle, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 0.01


@pytest.mark.parametrize("dim", [2, 50])  # k-d tree path and BLAS path
def test_release_is_the_word_nearest_to_the_noisy_vector(dim: int) -> None:
    space = random_space(5, 40, dim=dim)
    inputs = np.arange(40).repeat(25)
    got = madlib_sample(space, inputs, 0.8, rng=99)
    pts = np.asarray(space.points)
    noisy = pts[inputs] + madlib_noise(dim, 0.8, len(inputs), rng=99)  # the same draws
    assert np.array_equal(got, cdist(noisy, pts).argmin(axis=1))


def test_estimate_on_two_points_matches_the_exact_probability() -> None:
    # In 1-d the noise is Laplace(1/eps); M(0) = 1 iff z > 1/2: probability e^{-eps/2} / 2.
    eps = 1.3
    space = MetricSpace.from_points([[0.0], [1.0]])
    mech = madlib(space, eps, samples=40_000, rng=2)
    p = math.exp(-eps / 2) / 2
    est = mech.info["estimate"]
    assert abs(mech.matrix[0, 1] - p) <= est["row_half_width"][0]
    assert abs(mech.matrix[0, 1] - p) < 0.01  # and the half-width is not vacuous
    assert abs(est["loss"][0] - p) <= est["loss_half_width"][0] < 0.03
    assert np.allclose(mech.matrix.sum(axis=1), 1.0)


def test_mechanism_is_flagged_as_an_estimate_and_samples_from_the_true_sampler(tmp_path) -> None:
    space = random_space(8, 12, dim=4)
    mech = madlib(space, 2.0, samples=300, rng=1)
    assert mech.exact is False and mech.name == "madlib" and mech.epsilon == 2.0
    est = mech.info["estimate"]
    assert est["samples_per_row"] == 300 and est["confidence"] == 0.95
    assert len(est["row_half_width"]) == len(est["loss_half_width"]) == 12
    idx = np.array([0, 3, 3, 11])
    assert np.array_equal(mech.sample(idx, rng=5), madlib_sample(space, idx, 2.0, rng=5))
    path = tmp_path / "madlib.npz"
    mech.save(path)
    back = load_mechanism(path)
    assert back.exact is False and back.info["estimate"]["samples_per_row"] == 300
    assert np.array_equal(back.sample(idx, rng=5), madlib_sample(space, idx, 2.0, rng=5))


def test_secure_default_rng() -> None:
    space = random_space(0, 6, dim=3)
    out = madlib_sample(space, np.arange(6), 1.0)
    assert out.shape == (6,) and out.min() >= 0 and out.max() < 6
    assert madlib_noise(4, 1.0, 5).shape == (5, 4)
    assert madlib(space, 1.0, samples=20).exact is False


def test_bad_input_names_the_culprit() -> None:
    no_points = MetricSpace.from_distances([[0, 1], [1, 0]])
    with pytest.raises(ValidationError, match="points"):
        madlib(no_points, 1.0)
    manhattan = MetricSpace.from_points([[0.0, 0.0], [1.0, 1.0]], metric="manhattan")
    with pytest.raises(ValidationError, match="manhattan"):
        madlib_sample(manhattan, [0], 1.0, rng=0)
    space = random_space(0, 3)
    with pytest.raises(ValidationError, match="samples"):
        madlib(space, 1.0, samples=1)
    with pytest.raises(ValidationError, match="epsilon"):
        madlib(space, -1.0)
    with pytest.raises(ValidationError, match="index 3"):
        madlib_sample(space, [3], 1.0, rng=0)
