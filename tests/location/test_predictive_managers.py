"""One budget manager per person (:class:`Managers`): each person's choices are their own class's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.accounting.composition import to_units
from metricdp.errors import ValidationError
from metricdp.location.predictive import (
    AdaptiveRate,
    AdaptiveTooThin,
    FixedSplit,
    Managers,
    predictive_step,
    release_traces,
)


@settings(max_examples=60, deadline=None)
@given(budgets=st.lists(st.floats(0.5, 500.0), min_size=1, max_size=5), horizon=st.integers(2, 3000),
       share=st.sampled_from([0.1, 0.2, 0.5]), tests=st.integers(0, 50), passed_share=st.floats(0.0, 1.0))
def test_each_persons_choice_is_their_adaptive_rates(budgets, horizon, share, tests, passed_share):
    """The oracle: AdaptiveRate(budget, horizon) of each person alone, at the same counters."""
    units = np.array([to_units(b, budget=True) for b in budgets])
    passed = int(tests * passed_share)
    try:
        alone = [AdaptiveRate(budget=b, horizon=horizon, threshold_km=1.0, test_share=share) for b in budgets]
    except ValidationError:
        with pytest.raises(AdaptiveTooThin):
            Managers.adaptive(units, np.full(units.size, horizon), threshold_km=1.0, test_share=share)
        return
    m = Managers.adaptive(units, np.full(units.size, horizon), threshold_km=1.0, test_share=share)
    k = units.size
    test, noise, km = m.choose(np.arange(k), np.full(k, tests), np.full(k, passed))
    for i, a in enumerate(alone):
        t1, n1 = a.split(np.array([tests]), np.array([passed]))
        assert (int(test[i]), int(noise[i])) == (int(t1[0]), int(n1[0]))
        assert int(m.first()[i]) == int(a.split(np.zeros(1, np.int64), np.zeros(1, np.int64))[1][0])
        assert int(m.most()[i]) == int(t1[0]) + int(a._ladder()[0].max())
    assert km.tolist() == [1.0] * k


def test_the_default_threshold_is_the_mean_displacement_of_the_smallest_rung():
    """Budget 10 over 10 fixes: rate 1, test 0.2, base 0.8: threshold 2 / 0.8 = 2.5 km."""
    m = Managers.adaptive(np.array([to_units(10.0)]), np.array([10]))
    assert m.threshold.tolist() == [2.5]


def test_a_fixed_split_for_many_persons_is_the_split_of_each():
    split = FixedSplit(eps_test=0.25, eps_noise=1.0, budget=1.0, threshold_km=3.0)
    m = Managers.fixed(split, 3)
    test, noise, km = m.choose(np.arange(3), np.array([0, 4, 9]), np.array([0, 4, 1]))
    assert test.tolist() == [to_units(0.25)] * 3 and noise.tolist() == [to_units(1.0)] * 3 and km.tolist() == [3.0] * 3


def test_a_budget_too_thin_for_its_horizon_names_the_person():
    with pytest.raises(AdaptiveTooThin, match="a budget of 1e-09 over 1000 fixes") as ex:
        Managers.adaptive(np.array([to_units(10.0), to_units(1e-9)]), np.array([10, 1000]))
    assert ex.value.index == 1
    with pytest.raises(ValidationError, match="test_share"):
        Managers.adaptive(np.array([to_units(10.0)]), np.array([10]), test_share=1.0)
    with pytest.raises(ValidationError, match="horizons >= 2"):
        Managers.adaptive(np.array([to_units(10.0)]), np.array([1]))


def test_persons_stepped_together_are_each_the_mechanism_alone():
    """Two persons with their own AdaptiveRate, stepped together by predictive_step, against release_traces of
    each alone: the same outcomes and spend (draws in the same order: one person per step here)."""
    rng = np.random.default_rng(5)
    pts = 48.85 + np.cumsum(rng.normal(0, 0.02, (2, 30, 2)), axis=1)
    budgets, horizon = [6.0, 40.0], [30, 30]
    m = Managers.adaptive(np.array([to_units(b, budget=True) for b in budgets]), np.array(horizon),
                          threshold_km=2.0)
    counts = np.zeros((5, 2), dtype=np.int64)
    last, has = np.full((2, 2), np.nan), np.zeros(2, dtype=bool)
    released, outcome = np.empty((60, 2)), np.empty(60, dtype=np.int8)
    flat = pts.reshape(-1, 2)
    source = np.random.default_rng(9)
    budget = np.array([to_units(b, budget=True) for b in budgets])
    for person in (0, 1):  # one person per call: the draws of person 0's trace come first
        for step in range(30):
            predictive_step(m, budget, source, np.array([person]), np.array([30 * person + step]), flat, counts,
                            last, has, released, outcome)
    source = np.random.default_rng(9)
    for person in (0, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alone = release_traces(["p"] * 30, np.arange(30), pts[person],
                                   AdaptiveRate(budget=budgets[person], horizon=30, threshold_km=2.0), rng=source)
        assert outcome[30 * person: 30 * (person + 1)].tolist() == alone.outcome.tolist()
        np.testing.assert_array_equal(released[30 * person: 30 * (person + 1)], alone.released)
        assert int(counts[0, person]) == int(alone.report.spent_units[0]) <= budget[person]
