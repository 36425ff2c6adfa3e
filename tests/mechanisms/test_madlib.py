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


# ----------------------------------------------------------------- exact at any eps / offset
def _brute_force(
    points: np.ndarray, inputs: np.ndarray, direction: np.ndarray, gamma: np.ndarray, eps: float
) -> np.ndarray:
    """Reference: 80-bit long double distances to x + (G/eps) v over all points."""
    p = points.astype(np.longdouble)
    q = p[inputs] + (gamma.astype(np.longdouble) / np.longdouble(eps))[:, None] * direction.astype(np.longdouble)
    return np.array([np.argmin(((p - row) ** 2).sum(axis=1)) for row in q])


def test_large_offsets_do_not_collapse_the_releases() -> None:
    from metricdp.mechanisms.madlib import madlib_polar

    g = np.random.default_rng(0)
    pts = g.normal(size=(60, 10)) + 1e8
    space = MetricSpace.from_points(pts)
    inputs = np.arange(60).repeat(10)
    got = madlib_sample(space, inputs, 1.5, rng=7)
    direction, gamma = madlib_polar(10, 1.5, len(inputs), rng=7)
    assert np.array_equal(got, _brute_force(pts, inputs, direction, gamma, 1.5))
    assert len(np.unique(got)) > 30  # bff3a6d: one word for every input


@pytest.mark.parametrize("eps", [1e-25, 1e-160, 1e-300, 5e-324])
def test_tiny_epsilon_releases_the_word_furthest_along_the_noise(eps: float) -> None:
    # r = G/eps >= 1e24 times the diameter: the nearest word to x + r v is the one maximising
    # v.p (ties by |x-p|^2/r, negligible); bff3a6d released index 0 (or n, out of range).
    from metricdp.mechanisms.madlib import madlib_polar

    pts = np.random.default_rng(1).normal(size=(40, 5)) + 3e7
    space = MetricSpace.from_points(pts)
    inputs = np.arange(40).repeat(5)
    got = madlib_sample(space, inputs, eps, rng=3)
    direction, _ = madlib_polar(5, eps, len(inputs), rng=3)
    centred = pts - pts.mean(axis=0)
    assert np.array_equal(got, np.argmax(direction @ centred.T, axis=1))
    assert got.max() < 40 and len(np.unique(got)) > 5


@pytest.mark.parametrize("eps", [1e12, 1e300, 1.7e308])
def test_huge_epsilon_releases_the_input(eps: float) -> None:
    space = random_space(2, 30, dim=4)
    inputs = np.arange(30).repeat(3)
    assert np.array_equal(madlib_sample(space, inputs, eps, rng=4), inputs)


def test_moderate_epsilon_matches_brute_force_in_50_dimensions() -> None:
    from metricdp.mechanisms.madlib import madlib_polar

    pts = np.random.default_rng(5).normal(size=(300, 50)) * 0.3 - 2e6
    space = MetricSpace.from_points(pts)
    inputs = np.arange(300)
    for eps in (0.5, 20.0, 200.0):
        got = madlib_sample(space, inputs, eps, rng=11)
        direction, gamma = madlib_polar(50, eps, len(inputs), rng=11)
        assert np.array_equal(got, _brute_force(pts, inputs, direction, gamma, eps))


def test_noise_vectors_that_overflow_are_refused() -> None:
    with pytest.raises(ValidationError, match="too small"):
        madlib_noise(3, 1e-320, 5, rng=0)
