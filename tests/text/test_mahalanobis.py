"""The Mahalanobis mechanism over a PointSpace (:mod:`metricdp.text.mahalanobis`) vs dense
brute-force references: elliptical noise from Madlib's polar sampler, nearest word by cdist."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from metricdp.errors import ValidationError
from metricdp.mechanisms.madlib import madlib_polar
from metricdp.text.madlib import MadlibText
from metricdp.text.mahalanobis import MahalanobisText, regularised_covariance


def test_mahalanobis_release_is_the_nearest_word_to_elliptical_noise(vocab) -> None:
    dense, points = vocab
    mech = MahalanobisText(points, 6.0, lam=0.5)
    s = regularised_covariance(points, 0.5)
    lam_min = float(np.linalg.eigvalsh(s).min())
    # proven Euclidean level: eps_r / sqrt(lambda_min(S)) <= eps
    assert mech.epsilon_r / math.sqrt(lam_min) <= 6.0 * (1 + 1e-9)
    assert np.isclose(np.trace(s), points.dim)
    inputs = np.arange(300).repeat(5)
    got = mech.sample(inputs, rng=12)
    direction, gamma = madlib_polar(points.dim, mech.epsilon_r, len(inputs), rng=12)
    w, v = np.linalg.eigh(s)
    noise = (gamma / mech.epsilon_r)[:, None] * (direction @ (v * np.sqrt(w)) @ v.T)
    pts = np.asarray(dense.points)
    assert np.array_equal(got, cdist(pts[inputs] + noise, pts).argmin(axis=1))


def test_lambda_zero_is_madlib_at_the_same_epsilon(vocab) -> None:
    _, points = vocab
    inputs = np.arange(300)
    a = MahalanobisText(points, 5.0, lam=0.0).sample(inputs, rng=1)
    b = MadlibText(points, 5.0 * (1 - 1e-9) ** 0.5).sample(inputs, rng=1)
    assert np.mean(a == b) > 0.99
    with pytest.raises(ValidationError, match="lam"):
        MahalanobisText(points, 1.0, lam=1.0)
    with pytest.raises(ValidationError, match="index"):
        MadlibText(points, 1.0, index="kd")
