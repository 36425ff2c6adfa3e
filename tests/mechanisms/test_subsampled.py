"""Subsampled exponential mechanism (Lantz et al. AISec 2015): exact enumeration, sampler, estimate."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from metricdp.errors import ValidationError
from metricdp.mechanisms.file import load_mechanism
from metricdp.mechanisms.subsampled import (
    subsampled_exponential,
    subsampled_exponential_exact,
    subsampled_exponential_sample,
)
from metricdp.spaces import MetricSpace
from tests.helpers import brute_force_epsilon, random_space


def brute_force_matrix(d: np.ndarray, eps: float, m: int, mu: np.ndarray) -> np.ndarray:
    """Sum over every ordered candidate sequence (n^m of them): the definition, naively."""
    n = len(d)
    out = np.zeros((n, n))
    for seq in itertools.product(range(n), repeat=m):
        p = float(np.prod(mu[list(seq)]))
        if p == 0:
            continue
        for x in range(n):
            w = np.exp(-eps * d[x, list(seq)] / 2)
            for i, z in enumerate(seq):
                out[x, z] += p * w[i] / w.sum()
    return out


def test_two_points_by_hand() -> None:
    # m = 2 uniform draws from {a, b}: {a,a} w.p. 1/4 releases a, {b,b} w.p. 1/4 releases
    # b, {a,b} w.p. 1/2 releases b w.p. w/(1+w), w = e^{-eps d/2}.
    eps, dist = 0.9, 2.0
    space = MetricSpace.from_distances([[0, dist], [dist, 0]])
    w = math.exp(-eps * dist / 2)
    p = 0.25 + 0.5 * w / (1 + w)
    expected = np.array([[1 - p, p], [p, 1 - p]])
    assert np.allclose(subsampled_exponential_exact(space, eps, 2), expected, rtol=1e-14)


def test_one_candidate_releases_the_base_distribution() -> None:
    space = random_space(4, 5)
    base = np.array([1.0, 0.0, 2.0, 3.0, 4.0])
    m = subsampled_exponential_exact(space, 3.0, 1, base)
    assert np.allclose(m, np.tile(base / base.sum(), (5, 1)), rtol=1e-14)


def test_enumeration_equals_the_sum_over_sequences() -> None:
    space = random_space(6, 4)
    base = np.array([0.5, 0.0, 0.3, 0.2])  # a zero weight: never a candidate
    got = subsampled_exponential_exact(space, 1.7, 3, base)
    assert np.allclose(got, brute_force_matrix(np.asarray(space.distances), 1.7, 3, base), rtol=1e-12, atol=0)
    assert np.all(got[:, 1] == 0)


@given(
    st.integers(0, 10_000),
    st.integers(2, 5),
    st.integers(1, 4),
    st.floats(0.05, 20.0),
    st.lists(st.floats(0.01, 1.0), min_size=5, max_size=5),
)
def test_exact_matrix_passes_the_audit(seed: int, n: int, m: int, scale: float, weights: list[float]) -> None:
    space = random_space(seed, n)
    eps = scale / space.diameter
    mat = subsampled_exponential_exact(space, eps, m, weights[:n])
    assert np.allclose(mat.sum(axis=1), 1.0, atol=1e-12)
    assert brute_force_epsilon(mat, np.asarray(space.distances)) <= eps * (1 + 1e-9)


def test_sampler_matches_the_enumerated_matrix() -> None:
    space = random_space(21, 5)
    eps = 2.0 / space.d_min
    base = [0.1, 0.3, 0.2, 0.25, 0.15]
    exact = subsampled_exponential_exact(space, eps, 3, base)
    draws = 20_000
    for row in range(5):
        out = subsampled_exponential_sample(space, np.full(draws, row), eps, 3, base, rng=100 + row)
        counts = np.bincount(out, minlength=5)
        assert stats.chisquare(counts, exact[row] * draws).pvalue > 0.001
    # the test has power: the full exponential mechanism is rejected
    em = np.exp(-eps * np.asarray(space.distances)[0] / 2)
    out = subsampled_exponential_sample(space, np.zeros(draws, dtype=int), eps, 3, base, rng=100)
    assert stats.chisquare(np.bincount(out, minlength=5), em / em.sum() * draws).pvalue < 1e-6


def test_estimate_is_flagged_and_samples_from_the_true_sampler(tmp_path) -> None:
    space = random_space(2, 6)
    base = [1.0, 2.0, 1.0, 1.0, 3.0, 2.0]
    mech = subsampled_exponential(space, 1.5, candidates=4, base=base, samples=4000, rng=0)
    assert mech.exact is False and mech.name == "subsampled-exponential"
    assert mech.params["base"] == pytest.approx(list(np.array(base) / 10.0))
    est = mech.info["estimate"]
    exact = subsampled_exponential_exact(space, 1.5, 4, base)
    assert np.all(np.abs(mech.matrix - exact).max(axis=1) <= est["row_half_width"])
    true_loss = (exact * np.asarray(space.distances)).sum(axis=1)
    assert np.all(np.abs(np.array(est["loss"]) - true_loss) <= est["loss_half_width"])
    idx = np.array([0, 5, 5, 2])
    expected = subsampled_exponential_sample(space, idx, 1.5, 4, base, rng=8)
    assert np.array_equal(mech.sample(idx, rng=8), expected)
    path = tmp_path / "sub.npz"
    mech.save(path)
    back = load_mechanism(path)
    assert np.array_equal(back.sample(idx, rng=8), expected)


def test_secure_default_rng() -> None:
    space = random_space(1, 5)
    out = subsampled_exponential_sample(space, np.arange(5), 1.0, 3)
    assert out.shape == (5,) and out.min() >= 0 and out.max() < 5
    assert subsampled_exponential(space, 1.0, candidates=2, samples=10).exact is False


def test_bad_input_names_the_culprit() -> None:
    space = random_space(1, 4)
    with pytest.raises(ValidationError, match="base must be 4"):
        subsampled_exponential_sample(space, [0], 1.0, 2, base=[1, 2, 3], rng=0)
    with pytest.raises(ValidationError, match="base weight 1"):
        subsampled_exponential_exact(space, 1.0, 2, base=[1, -2, 3, 1])
    with pytest.raises(ValidationError, match="all zero"):
        subsampled_exponential(space, 1.0, base=[0, 0, 0, 0])
    with pytest.raises(ValidationError, match="candidates"):
        subsampled_exponential_sample(space, [0], 1.0, 0, rng=0)
    with pytest.raises(ValidationError, match="multisets"):
        subsampled_exponential_exact(random_space(1, 60), 1.0, 10)


def test_exact_matrix_has_no_nan_at_huge_epsilon():
    # exp of a positive exponent for undrawn candidates once overflowed into inf * 0 = nan
    space = MetricSpace.from_points([[0.0], [1.0], [2.0]])
    m = subsampled_exponential_exact(space, 1500.0, 2)
    assert np.all(np.isfinite(m))
    assert np.allclose(m.sum(axis=1), 1.0)
    assert brute_force_epsilon(m, np.asarray(space.distances)) <= 1500.0 * (1 + 1e-9)
