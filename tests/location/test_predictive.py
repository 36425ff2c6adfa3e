"""The predictive mechanism: budget arithmetic by hand, the ratio bound on enumerated tiny
traces, the samplers' laws (fixed seeds), chunking and hostile input."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.location.predictive import (
    EXHAUSTED,
    FRESH,
    PASSED,
    AdaptiveRate,
    FixedSplit,
    PredictiveReleaser,
    pass_probability,
    release_traces,
)
from metricdp.mechanisms.planar_laplace import planar_laplace_radius_cdf
from metricdp.spaces import haversine_rows_km

PARIS = np.array([48.8566, 2.3522])
KM_LAT = 1.0 / 111.19492664455873  # degrees of latitude per km on the haversine sphere


def north(km: float | np.ndarray) -> np.ndarray:
    """Points ``km`` north of PARIS."""
    km = np.atleast_1d(np.asarray(km, dtype=np.float64))
    return np.column_stack([PARIS[0] + km * KM_LAT, np.full(km.size, PARIS[1])])


def run(persons, times, latlon, manager, seed=0, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return release_traces(persons, times, latlon, manager, rng=seed, **kw)


# ------------------------------------------------------------------ budget arithmetic by hand
def test_fixed_split_spends_by_hand_when_every_test_passes():
    # eps_N = 2, eps_theta = 0.5, budget 5; the person stays put, threshold 1000 km: every test passes
    # (failure probability e^-20 / 2 each). Step 1 fresh: 2 (left 3); a test needs 0.5 + 2 = 2.5 left:
    # step 2 tests (left 2.5), step 3 tests (left 2.0), then 2.0 < 2.5: the prediction, untested, for free.
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=1000.0)
    r = run([1] * 6, np.arange(6), north(np.zeros(6)), m)
    assert r.outcome.tolist() == [FRESH, PASSED, PASSED, EXHAUSTED, EXHAUSTED, EXHAUSTED]
    p = r.report.person(1)
    assert (p.eps_spent, p.fresh, p.reused, p.tests, p.passed) == (3.0, 1, 5, 2, 2)
    assert (r.released == r.released[0]).all()  # a prediction is the last release itself, bit for bit


def test_fixed_split_spends_by_hand_when_every_test_fails():
    # threshold 0 and 1000 km jumps: each test fails (pass probability e^-20 / 2).
    # Step 1: 2 (left 3); step 2: test 0.5 + fresh 2 (left 0.5); then nothing affordable.
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=0.0)
    r = run([1] * 4, np.arange(4), north([0.0, 1000.0, 2000.0, 3000.0]), m)
    assert r.outcome.tolist() == [FRESH, FRESH, EXHAUSTED, EXHAUSTED]
    p = r.report.person(1)
    assert (p.eps_spent, p.fresh, p.reused, p.tests, p.passed) == (4.5, 2, 2, 1, 0)
    assert (r.released[2:] == r.released[1]).all()


def test_adaptive_rate_by_hand():
    # budget 10 over 10 fixes: rate 1, test 0.2, base 0.8; rungs 0.8 * 2^(k/4).
    m = AdaptiveRate(budget=10.0, horizon=10, threshold_km=1.0)
    test, noise = m.split(np.array([0, 2, 2, 6]), np.array([0, 0, 2, 5]))
    assert (test == 200_000_000_000).all()
    # boosts (t + 2)/(t + 1 - passed): 2 -> k 4; 4/3 -> k 1; 4 -> k 8; 8/2 = 4 -> k 8
    expect = [math.floor(800_000_000_000 * 2 ** (k / 4)) for k in (4, 1, 8, 8)]
    assert noise.tolist() == expect


def test_adaptive_rate_first_release_and_cap():
    # every test passes (threshold 1000 km): the first release costs 2 x base = 1.6, then 0.2 per test;
    # after t passes eps_N is the rung of boost t + 2, and a test needs 0.2 + that rung left:
    m = AdaptiveRate(budget=10.0, horizon=10, threshold_km=1000.0)
    r = run([3] * 60, np.arange(60), north(np.zeros(60)), m)
    p = r.report.person(3)
    assert r.outcome[0] == FRESH and p.fresh == 1 and p.passed == p.tests
    assert p.eps_spent == pytest.approx(1.6 + 0.2 * p.tests, abs=1e-12)
    rung = [0.8 * 2 ** (min(16, math.floor(4 * math.log2(t + 2) + 1e-9)) / 4) for t in range(60)]
    left = [10.0 - 1.6 - 0.2 * t for t in range(60)]
    expect = next(t for t in range(60) if left[t] < 0.2 + rung[t] - 1e-12)
    assert p.tests == expect and (r.outcome[1 + expect:] == EXHAUSTED).all()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 30.0), min_size=1, max_size=25), st.sampled_from(["fixed", "adaptive"]),
       st.integers(0, 99))
def test_spend_never_exceeds_the_budget_and_adds_up(steps_km, kind, seed):
    m = (FixedSplit(eps_test=0.3, eps_noise=1.0, budget=4.0, threshold_km=2.0) if kind == "fixed"
         else AdaptiveRate(budget=4.0, horizon=8, threshold_km=2.0))
    n = len(steps_km)
    r = run([5] * n, np.arange(n), north(np.cumsum(steps_km)), m, seed=seed)
    p = r.report.person(5)
    assert p.eps_spent <= 4.0 + 1e-12
    assert p.fresh + p.reused == n and p.passed <= p.tests
    assert p.fresh == int((r.outcome == FRESH).sum()) and p.passed == int((r.outcome == PASSED).sum())
    if kind == "fixed":
        assert r.report.spent_units[0] == p.tests * 300_000_000_000 + p.fresh * 1_000_000_000_000
    # an EXHAUSTED row never comes before a tested one: once too little is left, it stays so (fixed split)
    if kind == "fixed" and (r.outcome == EXHAUSTED).any():
        assert (r.outcome[int(np.argmax(r.outcome == EXHAUSTED)):] == EXHAUSTED).all()


# ------------------------------------------------------------------ the proof's bound, enumerated
def _density(trace, outcomes, outputs, eps_t, eps_n, l_km):
    """Density of an output history given an input trace: the mechanism's law written out.

    ``outcomes[i]`` is FRESH or PASSED; ``outputs[i]`` the release (for PASSED the previous
    one). The planar Laplace density is eps^2/(2 pi) e^{-eps d} (its normaliser does not
    depend on the input, so it is the same for every trace)."""
    dens = 1.0
    for i, (x, o, z) in enumerate(zip(trace, outcomes, outputs, strict=True)):
        if i > 0:
            q = float(pass_probability(haversine_rows_km(x[None], outputs[i - 1][None]), l_km, eps_t)[0])
            dens *= q if o == PASSED else 1.0 - q
        if o == FRESH:
            dens *= eps_n**2 / (2 * math.pi) * math.exp(-eps_n * float(haversine_rows_km(x[None], z[None])[0]))
    return dens


def test_ratio_bound_on_enumerated_three_step_traces():
    # inputs on 3 points, outputs on 3 candidate points, every outcome sequence: the log-ratio of
    # densities is at most sum_i (eps_t [tested] + eps_n [fresh]) d(x_i, x'_i) (docs/proofs/predictive.md)
    eps_t, eps_n, l_km = 0.7, 1.3, 0.5
    points = north([0.0, 0.4, 1.5])
    cands = north([-0.3, 0.2, 2.0])
    worst = -np.inf
    for outcomes in itertools.product([FRESH, PASSED], repeat=2):
        outcomes = (FRESH, *outcomes)
        fresh_steps = [i for i, o in enumerate(outcomes) if o == FRESH]
        for fresh_z in itertools.product(range(3), repeat=len(fresh_steps)):
            outputs, zs = [], iter(fresh_z)
            for o in outcomes:
                outputs.append(cands[next(zs)] if o == FRESH else outputs[-1])
            dens = {tr: _density(points[list(tr)], outcomes, outputs, eps_t, eps_n, l_km)
                    for tr in itertools.product(range(3), repeat=3)}
            for a, b in itertools.product(dens, repeat=2):
                d = haversine_rows_km(points[list(a)], points[list(b)])
                bound = sum((eps_t * (i > 0) + eps_n * (o == FRESH)) * d[i] for i, o in enumerate(outcomes))
                ratio = math.log(dens[a] / dens[b])
                assert ratio <= bound + 1e-9, (outcomes, fresh_z, a, b)
                worst = max(worst, ratio - bound)
    assert worst > -1e-6  # the bound is reached (same fix, or the test's and the noise's extremes)


def test_pass_probability_is_eps_lipschitz_and_clamped():
    d = np.linspace(0.0, 80.0, 4001)
    for eps in (0.25, 1.0, 4.0):
        logq = np.log(pass_probability(d, 3.0, eps))
        log1mq = np.log1p(-pass_probability(d, 3.0, eps))
        step = d[1] - d[0]
        assert np.abs(np.diff(logq)).max() <= eps * step * (1 + 1e-9)
        assert np.abs(np.diff(log1mq)).max() <= eps * step * (1 + 1e-9)
        q = pass_probability(d, 3.0, eps)
        assert q.min() >= 0.5 * math.exp(-20) * (1 - 1e-12) and 1 - q.max() >= 0.5 * math.exp(-20) * (1 - 1e-9)


# ------------------------------------------------------------------ the samplers' laws (fixed seeds)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fresh_releases_follow_the_planar_laplace_radius(seed):
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=50.0, threshold_km=0.0)
    n_persons = 3000
    ids = np.repeat(np.arange(n_persons), 3)
    walk = north(np.tile([0.0, 200.0, 400.0], n_persons))  # far apart: the tests fail, every row is fresh
    r = run(ids, np.tile(np.arange(3), n_persons), walk, m, seed=seed)
    assert (r.outcome == FRESH).all()
    radius = haversine_rows_km(walk, r.released)
    assert stats.kstest(radius, lambda x: planar_laplace_radius_cdf(x, 2.0)).pvalue > 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_test_outcomes_follow_pass_probability(seed):
    # step 2's prediction is step 1's release, known after the fact: the passes are independent
    # Bernoullis of known means pass_probability(d(x2, z1)); their sum is checked by a z-test.
    m = FixedSplit(eps_test=0.8, eps_noise=1.0, budget=10.0, threshold_km=1.5)
    n_persons = 20000
    ids = np.repeat(np.arange(n_persons), 2)
    x2 = north(np.full(n_persons, 0.7))
    pts = np.empty((2 * n_persons, 2))
    pts[0::2], pts[1::2] = north(np.zeros(n_persons)), x2
    r = run(ids, np.tile([0, 1], n_persons), pts, m, seed=seed)
    q = pass_probability(haversine_rows_km(x2, r.released[0::2]), 1.5, 0.8)
    passes = (r.outcome[1::2] == PASSED).sum()
    z = (passes - q.sum()) / math.sqrt((q * (1 - q)).sum())
    assert abs(z) < 4.5
    assert 0.2 < q.mean() < 0.8  # both outcomes exercised


# ------------------------------------------------------------------ chunks, order, randomness
def test_chunks_carry_the_person_and_its_budget():
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=1000.0)
    ids = np.repeat([1, 2, 3], [6, 1, 4])
    pts = north(np.zeros(ids.size))
    times = np.concatenate([np.arange(6), [0], np.arange(4)])
    whole = run(ids, times, pts, m)
    for chunk in (1, 2, 5):
        split = run(ids, times, pts, m, chunk_rows=chunk)
        assert split.outcome.tolist() == whole.outcome.tolist()  # every test passes: outcomes are fixed
        assert split.report.persons.tolist() == [1, 2, 3]
        assert split.report.spent_units.tolist() == whole.report.spent_units.tolist()


def test_rows_in_any_order_are_released_in_time_order():
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=1000.0)
    r = run(["b", "a", "b", "a"], [5, 9, 1, 2], north(np.zeros(4)), m)
    assert r.outcome.tolist() == [PASSED, PASSED, FRESH, FRESH]
    assert r.report.persons.tolist() == ["a", "b"]


def test_datetime_times_order_the_rows():
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=1000.0)
    times = np.array(["2026-01-02T10:00", "2026-01-01T09:00", "2026-01-01T09:30"], dtype="datetime64[m]")
    r = run([1, 1, 1], times, north(np.zeros(3)), m)
    assert r.outcome.tolist() == [PASSED, FRESH, PASSED]


def test_unsorted_chunks_are_refused_naming_the_row():
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=1.0)
    rel = PredictiveReleaser(m)
    with pytest.raises(ValidationError, match=r"data row 3: person 1 .* rows must be sorted"):
        rel.release([1, 2, 1], [0, 0, 1], north(np.zeros(3)))
    with pytest.raises(ValidationError, match=r"data row 2: person 1 at time 0.0"):
        rel.release([1, 1], [3, 0], north(np.zeros(2)))
    rel.release([1, 2], [0, 0], north(np.zeros(2)))
    with pytest.raises(ValidationError, match=r"data row 3: person 1 .* comes after person 2"):
        rel.release([1], [1], north([0.0]))  # person 1 again: it would get a second budget
    rel.close()
    with pytest.raises(ValidationError, match="person 2"):
        rel.release([2], [5], north([0.0]))  # closed persons stay closed


def test_bad_rows_are_refused_before_any_draw():
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=1.0)
    with pytest.raises(ValidationError, match=r"data row 2: \(95.0, 2.0\)"):
        release_traces([1, 1], [0, 1], [[48.0, 2.0], [95.0, 2.0]], m)
    with pytest.raises(ValidationError, match="times row 1 is not finite"):
        release_traces([1, 1], [0, np.nan], north([0.0, 0.0]), m)
    with pytest.raises(ValidationError, match="persons must be integers or text"):
        release_traces([1.0, 2.0], [0, 1], north([0.0, 0.0]), m)
    with pytest.raises(ValidationError, match="latlon must be one"):
        release_traces([1, 1], [0, 1], north([0.0]), m)


@pytest.mark.parametrize("kwargs, match", [
    (dict(eps_test=0.0, eps_noise=1.0, budget=5.0, threshold_km=1.0), "eps_test"),
    (dict(eps_test=0.1, eps_noise=1.0, budget=0.5, threshold_km=1.0), "below one fresh release"),
    (dict(eps_test=0.1, eps_noise=1.0, budget=5.0, threshold_km=-1.0), "threshold_km"),
    (dict(eps_test=0.1, eps_noise=1e-6, budget=5.0, threshold_km=1.0), "half the Earth"),
])
def test_fixed_split_refuses_bad_parameters(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        FixedSplit(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(budget=5.0, horizon=1, threshold_km=1.0), "horizon"),
    (dict(budget=5.0, horizon=10, threshold_km=1.0, test_share=1.0), "test_share"),
    (dict(budget=1e-11, horizon=10, threshold_km=1.0), "no eps for the test"),
    (dict(budget=1e-5, horizon=10, threshold_km=1.0), "half the Earth"),
])
def test_adaptive_rate_refuses_bad_parameters(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        AdaptiveRate(**kwargs)


def test_secure_source_by_default_and_a_warning_for_seeds():
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        release_traces([1, 1], [0, 1], north([0.0, 0.1]), m)  # no warning
    with pytest.warns(PrivacyLeakWarning, match="seed 4"):
        release_traces([1, 1], [0, 1], north([0.0, 0.1]), m, rng=4)


class _FailingSource:
    """Uniforms until ``good`` of them were drawn, then a value outside [0, 1)."""

    def __init__(self, good: int) -> None:
        self.left = good

    def random(self, size=None):
        n = int(np.prod(size)) if size is not None else 1
        self.left -= n
        out = np.full(n, 0.5 if self.left >= 0 else 2.0)
        return out.reshape(size) if size is not None else out[0]


def test_a_chunk_that_fails_while_drawing_ends_the_release():
    m = FixedSplit(eps_test=0.5, eps_noise=2.0, budget=5.0, threshold_km=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        rel = PredictiveReleaser(m, rng=_FailingSource(8))
    with pytest.raises(ValidationError, match="outside"):
        rel.release([1, 1, 2, 2], [0, 1, 0, 1], north(np.zeros(4)))
    with pytest.raises(ValidationError, match="an earlier chunk failed"):
        rel.release([3], [0], north([0.0]))
