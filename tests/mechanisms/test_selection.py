"""Generic EM and SSEM for central DP (Lantz et al. AISec 2015): accounting, exact distributions, DP level."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from metricdp.audit import audit
from metricdp.errors import ResourceLimitError, ValidationError
from metricdp.mechanisms.selection import (
    candidates_for_accuracy,
    exponent_for,
    exponential_choice,
    exponential_mechanism,
    exponential_probabilities,
    privacy_of,
    subsampled_distribution,
    subsampled_exponential_mechanism,
)


def dp_level(rows: np.ndarray, hamming: np.ndarray) -> float:
    """Exact DP level of output distributions ``rows`` (one per dataset) under the dataset
    distance ``hamming`` (1 = neighbours), by :func:`metricdp.audit.audit`: the matrix is
    made square with all-zero columns (which constrain nothing) or with copies of row 0
    placed at a huge distance (whose pairs bound nothing above the real level)."""
    r, n = rows.shape
    size = max(r, n)
    mat = np.zeros((size, size))
    mat[:r, :n] = rows
    mat[r:, :n] = rows[0]
    dist = np.full((size, size), 1e9)
    dist[:r, :r] = hamming
    np.fill_diagonal(dist, 0.0)
    return audit(mat, dist).epsilon


def test_accounting_by_hand() -> None:
    assert privacy_of(0.25, 2.0) == 1.0
    assert exponent_for(1.0, 2.0) == 0.25
    for eps, delta in ((3.7, 1.3), (1.0, 1.891), (0.1, 3.0), (100.0, 1.9989)):
        assert eps * (1 - 1e-15) <= privacy_of(exponent_for(eps, delta), delta) <= eps
    with pytest.raises(ValidationError, match="exponent"):
        privacy_of(0.0, 1.0)
    with pytest.raises(ValidationError, match="sensitivity"):
        exponent_for(1.0, -1.0)


def _quality(data: np.ndarray, z: np.ndarray) -> np.ndarray:
    return -np.abs(z[:, 0] - data.sum())  # sensitivity 1 for data in [0, 1]^s


def test_mechanisms_report_the_total_epsilon() -> None:
    outs = np.arange(5.0)[:, None]
    data = np.array([0.3, 0.9])
    em = exponential_mechanism(data, _quality, outs, sensitivity=1.0, epsilon=0.8, rng=0)
    assert (em.epsilon, em.exponent, em.candidates) == (0.8, 0.4, 5)
    em2 = exponential_mechanism(data, _quality, outs, sensitivity=1.0, exponent=0.4, rng=0)
    assert em2.epsilon == 0.8 and em2.index == em.index

    def base(rng, m):
        return np.floor(np.asarray(rng.random(m)) * 5)[:, None]

    ss = subsampled_exponential_mechanism(data, _quality, base, 7, sensitivity=1.0, exponent=1.5, rng=1)
    assert (ss.epsilon, ss.exponent, ss.candidates) == (3.0, 1.5, 7)
    assert ss.quality == _quality(data, np.asarray(ss.output)[None, :])[0]
    with pytest.raises(ValidationError, match="exactly one"):
        exponential_mechanism(data, _quality, outs, sensitivity=1.0, epsilon=1.0, exponent=0.5)
    with pytest.raises(ValidationError, match="exactly one"):
        subsampled_exponential_mechanism(data, _quality, base, 3, sensitivity=1.0)
    with pytest.raises(ValidationError, match="one score per candidate"):
        exponential_mechanism(data, lambda d, z: np.zeros(2), outs, sensitivity=1.0, epsilon=1.0)
    with pytest.raises(ValidationError, match="base must return 3"):
        subsampled_exponential_mechanism(data, _quality, lambda r, m: np.zeros((2, 1)), 3, sensitivity=1.0,
                                          epsilon=1.0)


def test_choice_shifts_by_the_best_score() -> None:
    # scores far below float range of exp: still a valid distribution, the best wins
    assert int(exponential_choice([-1e6, -1e6 + 50, -1e6 + 10], 1.0, np.random.default_rng(0))) == 1
    rows = exponential_choice(np.array([[0.0, -1e300], [-1e300, 0.0]]), 1.0, np.random.default_rng(0))
    assert rows.tolist() == [0, 1]
    with pytest.raises(ValidationError, match="finite"):
        exponential_choice([0.0, np.nan], 1.0, np.random.default_rng(0))


def test_em_matches_its_distribution_chi_square() -> None:
    outs = np.arange(6.0)[:, None]
    data = np.array([0.5, 1.0, 1.0])  # sum 2.5
    exact = exponential_probabilities(_quality(data, outs), 0.7)
    rng = np.random.default_rng(2024)
    draws = [exponential_mechanism(data, _quality, outs, sensitivity=1.0, exponent=0.7, rng=rng).index
             for _ in range(4000)]
    counts = np.bincount(draws, minlength=6)
    assert stats.chisquare(counts, exact * len(draws)).pvalue > 1e-3


def brute_ssem(scores: np.ndarray, exponent: float, m: int, mu: np.ndarray) -> np.ndarray:
    """The SSEM's definition: a sum over every ordered candidate sequence."""
    out = np.zeros(len(scores))
    for seq in itertools.product(range(len(scores)), repeat=m):
        p = float(np.prod(mu[list(seq)]))
        w = np.exp(exponent * scores[list(seq)])
        for i, z in enumerate(seq):
            out[z] += p * w[i] / w.sum()
    return out


def test_subsampled_distribution_equals_the_definition() -> None:
    scores = np.array([0.0, -1.0, -0.3, -2.5])
    mu = np.array([0.4, 0.1, 0.0, 0.5])
    got = subsampled_distribution(scores, 1.3, 3, mu)
    assert np.allclose(got, brute_ssem(scores, 1.3, 3, mu / mu.sum()), rtol=1e-12, atol=1e-15)
    assert got[2] == 0.0 and got.sum() == pytest.approx(1.0, abs=1e-12)
    # m = 1 releases the base; m -> large approaches the EM with base mu
    assert np.allclose(subsampled_distribution(scores, 1.3, 1, mu), mu / mu.sum())
    with pytest.raises(ResourceLimitError):
        subsampled_distribution(np.zeros(60), 1.0, 12)


def test_ssem_sampler_matches_its_distribution_chi_square() -> None:
    outs = np.arange(5.0)
    data = np.array([0.2, 0.9])
    mu = np.array([0.1, 0.3, 0.2, 0.25, 0.15])
    cdf = np.cumsum(mu)

    def base(rng, m):
        return outs[np.searchsorted(cdf, np.asarray(rng.random(m)) * cdf[-1], side="right")][:, None]

    exact = subsampled_distribution(_quality(data, outs[:, None]), 0.9, 3, mu)
    rng = np.random.default_rng(7)
    draws = [int(subsampled_exponential_mechanism(data, _quality, base, 3, sensitivity=1.0, exponent=0.9,
                                                  rng=rng).output[0]) for _ in range(4000)]
    counts = np.bincount(draws, minlength=5)
    assert stats.chisquare(counts, exact * len(draws)).pvalue > 1e-3


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 4), st.floats(0.05, 3.0))
def test_ssem_is_2_eps_delta_dp_exactly(seed: int, m: int, exponent: float) -> None:
    """Every dataset of 2 points from 4 reals in [0, 1]; neighbours replace one point."""
    rng = np.random.default_rng(seed)
    values = rng.random(4)
    datasets = list(itertools.combinations(range(4), 2))
    hamming = np.array([[len(set(a) - set(b)) for b in datasets] for a in datasets], dtype=np.float64)
    outs = np.linspace(0.0, 2.0, 5)[:, None]
    mu = rng.random(5) + 0.05
    scores = np.array([_quality(values[list(d)], outs) for d in datasets])
    rows = subsampled_distribution(scores, exponent, m, mu)
    level = dp_level(rows, hamming)
    assert level <= privacy_of(exponent, 1.0) * (1 + 1e-9)
    em_level = dp_level(np.array([exponential_probabilities(s, exponent, mu) for s in scores]), hamming)
    assert em_level <= privacy_of(exponent, 1.0) * (1 + 1e-9)


def test_dp_check_detects_a_data_dependent_base() -> None:
    """Negative control: a base that looks at the data breaks Theorem 4's argument."""
    values = np.array([0.0, 1.0, 0.0])
    datasets = [(0,), (1,), (2,)]
    hamming = 1.0 - np.eye(3)
    outs = np.array([[0.0], [1.0]])
    rows = []
    for d in datasets:  # base puts 0.99 of its mass on the output next to the data
        mu = np.where(np.abs(outs[:, 0] - values[list(d)].sum()) < 0.5, 0.99, 0.01)
        rows.append(subsampled_distribution(_quality(values[list(d)], outs), 0.1, 1, mu))
    assert dp_level(np.array(rows), hamming) > privacy_of(0.1, 1.0) * 10


def test_candidates_for_accuracy() -> None:
    a = candidates_for_accuracy(2.0, exponent=1.0)
    assert a.candidates == math.ceil(math.exp(2.0) / 2) and math.isnan(a.bound)
    b = candidates_for_accuracy(2.0, exponent=1.0, good_mass=0.2)
    assert b.em_bound == pytest.approx(math.exp(-2.0) / 0.2)
    assert b.bound == pytest.approx(0.8**4 + 2 * 4 / 5 * math.exp(-2.0) / 0.2)
    c = candidates_for_accuracy(3.0, exponent=2.0, good_mass=0.05, failure=0.2)
    assert c.bound <= 0.2
    assert candidates_for_accuracy(3.0, exponent=2.0, good_mass=0.05).candidates <= c.candidates
    with pytest.raises(ValidationError, match="no m reaches"):
        candidates_for_accuracy(0.1, exponent=1.0, good_mass=0.1, failure=0.01)
    with pytest.raises(ValidationError, match="good_mass"):
        candidates_for_accuracy(1.0, exponent=1.0, failure=0.1)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6), st.floats(0.2, 5.0), st.floats(0.05, 1.5))
def test_accuracy_bound_holds_on_exact_distributions(seed: int, m: int, exponent: float, t: float) -> None:
    rng = np.random.default_rng(seed)
    scores = -rng.random(6) * 3
    mu = rng.random(6) + 0.01
    mu /= mu.sum()
    good = mu[scores >= scores.max() - t].sum()
    dist = subsampled_distribution(scores, exponent, m, mu)
    bad = dist[scores <= scores.max() - 2 * t].sum()
    bound = (1 - good) ** m + 2 * m / (m + 1) * math.exp(-exponent * t) / good
    assert bad <= bound + 1e-12


def test_log_domain_choice_is_exact_by_chi_square_and_never_underflows():
    # review: weights below e^-745 underflowed to 0 (an unbounded loss between neighbours)
    from fractions import Fraction  # noqa: F401  (the sampler's arithmetic)

    from scipy import stats

    from metricdp.mechanisms.lattice_laplace import BitStream
    from metricdp.mechanisms.selection import _log_domain_choice

    logw = np.array([0.0, -0.5, -1.0, -2.5])
    bits = BitStream(np.random.default_rng(11))
    draws = np.array([_log_domain_choice(logw, bits) for _ in range(20_000)])
    p = np.exp(logw) / np.exp(logw).sum()
    assert stats.chisquare(np.bincount(draws, minlength=4), p * len(draws)).pvalue > 1e-3
    # a candidate 10,000 nats below the best keeps a positive (if unobservable) weight: the
    # rows that deep take this path, and the best is what comes out
    rng = np.random.default_rng(0)
    picks = exponential_choice(np.array([[0.0, -1e4, -0.1]] * 50), 1.0, rng)
    assert set(picks.tolist()) <= {0, 2}
