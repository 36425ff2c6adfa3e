"""Private k-median (Lantz et al. AISec 2015, Section 5): costs, accounting, exact distributions, references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import metricdp.kmedian as km
from metricdp.errors import ResourceLimitError, SolverTimeLimitError, ValidationError
from metricdp.kmedian import (
    KMedian,
    auto_candidates,
    gupta_steps,
    kmeanspp,
    kmedian,
    local_search,
    optimum,
    subset_costs,
    swap_costs,
)
from metricdp.mechanisms.selection import exponent_for, exponential_probabilities, subsampled_distribution
from tests.mechanisms.test_selection import dp_level


def disc(seed: int, n: int, s: int, k: int) -> KMedian:
    rng = np.random.default_rng(seed)
    r, th = np.sqrt(rng.random(n)), 2 * np.pi * rng.random(n)
    return KMedian(np.column_stack([r * np.cos(th), r * np.sin(th)]), rng.choice(n, s, replace=False), k)


def test_cost_by_hand() -> None:
    # V = {0, 1, 3, 7} on a line, D = {0, 3, 7}
    p = KMedian([0.0, 1.0, 3.0, 7.0], [0, 2, 3], 2)
    assert p.diameter == 7.0 and p.sensitivity == 7.0
    assert p.cost([1, 3]) == 1 + 2 + 0
    assert p.cost(np.array([[0, 2], [2, 3], [0, 3]])).tolist() == [4.0, 3.0, 3.0]
    assert p.cost([0, 2], data=[3]) == 4.0


def test_cost_without_the_cached_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    p = disc(1, 30, 9, 3)
    f = np.array([[0, 5, 9], [1, 2, 3]])
    cached = p.cost(f)
    monkeypatch.setattr(km, "MAX_CACHED", 0)
    q = KMedian(p.points, p.private, 3)
    assert q._dsv is None and np.allclose(q.cost(f), cached, rtol=1e-14)
    assert q._dsv is None  # nothing (s, n) kept when over the limit


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="k must be <= 3"):
        KMedian(np.zeros((4, 2)), [0, 1], 4)
    with pytest.raises(ValidationError, match="private indices"):
        KMedian(np.zeros((4, 2)), [0, 9], 2)
    with pytest.raises(ValidationError, match="finite"):
        KMedian([[0.0], [np.inf]], [0], 1)
    p = disc(0, 10, 3, 2)
    with pytest.raises(ValidationError, match="method must be one of"):
        kmedian(p, "kmeans", 1.0)
    with pytest.raises(ValidationError, match="needs candidates"):
        kmedian(p, "ssem", 1.0)
    with pytest.raises(ValidationError, match="epsilon"):
        kmedian(p, "em", None)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3))
def test_sensitivity_is_the_diameter(seed: int, k: int) -> None:
    """Replacing one private point moves every cost by at most diam(V)."""
    p = disc(seed, 12, 4, k)
    rng = np.random.default_rng(seed)
    f = np.array(list(itertools.combinations(range(12), k)))
    other = p.private.copy()
    other[rng.integers(4)] = rng.integers(12)
    assert np.max(np.abs(p.cost(f) - p.cost(f, data=other))) <= p.sensitivity * (1 + 1e-12)


def test_swap_costs_by_brute_force() -> None:
    for k in (1, 2, 4):
        p = disc(k, 20, 7, k)
        f = np.arange(0, 3 * k, 3)
        brute = np.array([[p.cost(np.r_[np.delete(f, x), y]) for y in range(20)] for x in range(k)])
        assert np.allclose(swap_costs(p, f), brute, rtol=1e-13, atol=1e-13)


def test_accounting_of_every_method() -> None:
    p = disc(3, 40, 12, 3)
    eps = 0.7
    t = gupta_steps(40, 3)
    assert t == auto_candidates(40, 3) == math.ceil(18 * math.log(40))
    for method in km.METHODS:
        res = kmedian(p, method, eps, candidates=5, rng=1)
        assert res.method == method and len(set(res.centres.tolist())) == 3
        assert res.cost == pytest.approx(p.cost(res.centres), rel=1e-12)
        if method.startswith("random"):
            assert res.epsilon == 0.0 and res.evaluations == 0
        else:
            assert res.epsilon == pytest.approx(eps, rel=1e-14) and res.epsilon <= eps
    assert kmedian(p, "ssem", eps, candidates=5, rng=1).candidates == 5
    assert kmedian(p, "ssem-auto", eps, rng=1).candidates == t
    em = kmedian(p, "em", eps, rng=1)
    assert em.candidates == math.comb(40, 3)
    g = kmedian(p, "gupta", eps, rng=1)
    assert g.info["exponent"] == pytest.approx(eps / (2 * p.sensitivity * (t + 1)), rel=1e-14)
    assert g.evaluations == t * 3 * 37 + t and g.candidates == t


def test_em_refuses_large_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(km, "MAX_SUBSETS", 100)
    p = disc(0, 20, 5, 3)  # C(20, 3) = 1140
    with pytest.raises(ResourceLimitError, match="C\\(20, 3\\) = 1,140"):
        kmedian(p, "em", 1.0, rng=0)
    assert kmedian(p, "ssem-auto", 1.0, rng=0).epsilon == pytest.approx(1.0, rel=1e-15)  # never enumerates


def test_gupta_time_limit() -> None:
    with pytest.raises(SolverTimeLimitError) as info:
        kmedian(disc(0, 60, 20, 4), "gupta", 1.0, time_limit=1e-9, rng=0)
    assert info.value.result["of"] == gupta_steps(60, 4) and info.value.result["steps"] < gupta_steps(60, 4)


def _index(subsets: np.ndarray, f: np.ndarray) -> int:
    return int(np.flatnonzero((subsets == np.sort(f)).all(axis=1))[0])


@pytest.mark.slow
def test_em_matches_its_exact_distribution_chi_square() -> None:
    p = disc(5, 7, 4, 2)
    subsets, costs = subset_costs(p)
    eps = 3.0
    exact = exponential_probabilities(-costs, exponent_for(eps, p.sensitivity))
    rng = np.random.default_rng(11)
    draws = [_index(subsets, kmedian(p, "em", eps, subsets=(subsets, costs), rng=rng).centres) for _ in range(3000)]
    counts = np.bincount(draws, minlength=len(subsets))
    assert stats.chisquare(counts, exact * len(draws)).pvalue > 1e-3


@pytest.mark.slow
def test_ssem_matches_its_exact_distribution_chi_square() -> None:
    p = disc(6, 6, 4, 2)
    subsets, costs = subset_costs(p)  # uniform k-subsets = the uniform base over this list
    eps, m = 4.0, 3
    exact = subsampled_distribution(-costs, exponent_for(eps, p.sensitivity), m)
    rng = np.random.default_rng(12)
    draws = [_index(subsets, kmedian(p, "ssem", eps, candidates=m, rng=rng).centres) for _ in range(3000)]
    counts = np.bincount(draws, minlength=len(subsets))
    assert stats.chisquare(counts, exact * len(draws)).pvalue > 1e-3


def test_ssem_kmedian_is_eps_dp_on_every_neighbouring_pair() -> None:
    """V = 5 points, D every 2-subset, k = 2 (10 outputs), m = 3: the exact SSEM level."""
    rng = np.random.default_rng(4)
    pts = rng.random((5, 2))
    datasets = list(itertools.combinations(range(5), 2))
    hamming = np.array([[len(set(a) - set(b)) for b in datasets] for a in datasets], dtype=np.float64)
    eps = 1.5
    levels = []
    for m in (1, 3):
        rows = []
        for d in datasets:
            p = KMedian(pts, np.array(d), 2)
            _, costs = subset_costs(p)
            rows.append(subsampled_distribution(-costs, exponent_for(eps, p.sensitivity), m))
        levels.append(dp_level(np.array(rows), hamming))
    assert levels[0] == 0.0  # m = 1 releases the data-independent base
    assert 0.0 < levels[1] <= eps * (1 + 1e-9)


def test_kmeanspp_second_centre_chi_square() -> None:
    pts = np.array([[0.0], [1.0], [3.0], [6.0]])
    rng = np.random.default_rng(3)
    seeds = kmeanspp(pts, 2, 8000, rng)
    assert np.all(seeds[:, 0] != seeds[:, 1])
    first = seeds[:, 0] == 0
    assert stats.chisquare(np.bincount(seeds[:, 0], minlength=4)).pvalue > 1e-3
    sq = np.array([1.0, 9.0, 36.0])  # from point 0: squared distances to 1, 3, 6
    counts = np.bincount(seeds[first, 1], minlength=4)[1:]
    assert stats.chisquare(counts, sq / sq.sum() * first.sum()).pvalue > 1e-3


def test_kmeanspp_with_duplicates_still_gives_k_distinct_indices() -> None:
    pts = np.zeros((5, 2))
    seeds = kmeanspp(pts, 4, 50, np.random.default_rng(0))
    assert all(len(set(row)) == 4 for row in seeds.tolist())


def test_references_find_the_enumerated_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(8):
        p = disc(seed, 25, 9, 3)
        _, costs = subset_costs(p)
        f, c, how = optimum(p)
        assert how == "enumeration" and c == costs.min() and p.cost(f) == c
    monkeypatch.setattr(km, "MAX_SUBSETS", 10)
    for seed in range(8):
        p = disc(seed, 25, 9, 3)
        f, c, how = optimum(p, rng=seed)
        assert how == "local-search"
        with monkeypatch.context() as mp:
            mp.setattr(km, "MAX_SUBSETS", 5_000_000)
            assert c == pytest.approx(subset_costs(p)[1].min(), rel=1e-12)


def test_local_search_is_a_local_optimum() -> None:
    p = disc(2, 50, 15, 4)
    f, c, steps = local_search(p, np.arange(4))
    assert steps > 0 and c == pytest.approx(p.cost(f))
    sc = swap_costs(p, f)
    outside = np.setdiff1d(np.arange(50), f)
    assert sc[:, outside].min() >= c - 1e-9


def test_large_v_without_an_n_by_n_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(km, "MAX_CACHED", 0)  # force the blocked path: nothing (s, n) either
    p = disc(0, 10_000, 40, 8)
    res = kmedian(p, "ssem-auto", 1.0, rng=0)
    assert res.candidates == auto_candidates(10_000, 8) and p._dsv is None
