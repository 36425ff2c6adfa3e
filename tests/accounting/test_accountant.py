"""The in-memory Accountant (refuse, drop, reserve) and contribution bounding (uniform choice)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from metricdp.accounting.accountant import Accountant, bound_contributions
from metricdp.errors import BudgetExceededError, ValidationError


def test_refuse_spends_nothing() -> None:
    acc = Accountant(budget=1.0)
    acc.spend(["zed", "zed", "bob"], 0.4)
    with pytest.raises(BudgetExceededError) as info:
        acc.spend(["zed", "bob", "cy", "cy"], 0.4)  # zed would reach 1.2; bob 0.8, cy 0.8 fit
    assert (info.value.over, info.value.persons) == (1, 3)
    assert "zed" not in str(info.value)  # a person is never named
    assert acc.spent(["zed", "bob", "cy"]).tolist() == [0.8, 0.4, 0.0]
    acc.check(["bob", "cy"], 0.4)
    with pytest.raises(BudgetExceededError):
        acc.check(["zed"], 0.4)


def test_drop_grants_what_fits_by_hand() -> None:
    acc = Accountant(budget=1.0)
    acc.spend(["a"] * 7, 0.1)  # a has 0.3 left: 3 more values at 0.1
    g = acc.spend(["a"] * 5 + ["b"] * 2, 0.1, policy="drop")
    assert g.persons.tolist() == ["a", "b"]
    assert g.requested.tolist() == [5, 2] and g.granted.tolist() == [3, 2]
    assert (g.over, g.withheld) == (1, 2)
    assert acc.remaining(["a", "b"]).tolist() == [0.0, 0.8]
    # counts: distinct persons with a number of values each
    g = acc.spend(["b", "c"], 0.2, counts=[5, 1], policy="drop")
    assert g.granted.tolist() == [4, 1]
    assert acc.spent(["b", "c"]).tolist() == [1.0, 0.2]


def test_floor_of_budget_over_eps() -> None:
    # decimals as typed; an eps with more than 12 decimals is rounded up to the grid (1/3 fits twice in 1)
    for budget, eps in [(1.0, 0.1), (1.0, 0.3), (2.5, 0.5), (0.7, 0.1), (1.0, 0.333333333333), (3.0, 0.03)]:
        acc = Accountant(budget)
        g = acc.spend(["p"] * 100, eps, policy="drop")
        assert int(g.granted[0]) == math.floor(round(budget / eps, 9)), (budget, eps)


def test_reserve_rolls_back_on_error() -> None:
    acc = Accountant(budget=1.0)
    with pytest.raises(RuntimeError), acc.reserve(["a", "b"], 0.5):
        assert acc.spent(["a"]).tolist() == [0.5]
        raise RuntimeError("release failed")
    assert acc.spent(["a", "b"]).tolist() == [0.0, 0.0]
    with acc.reserve(["a", "b"], 0.5) as g:
        assert g.granted.tolist() == [1, 1]
    assert acc.spent(["a", "b"]).tolist() == [0.5, 0.5]


def test_integer_and_text_ids_are_one_person() -> None:
    acc = Accountant(budget=1.0)
    acc.spend(np.array([7, 8]), 0.5)
    acc.spend(["7"], 0.5)
    assert acc.spent(["7", "8"]).tolist() == [1.0, 0.5]
    with pytest.raises(ValidationError, match="integers or text"):
        acc.spend(np.array([1.5]), 0.1)
    with pytest.raises(ValidationError, match="integers or text"):
        acc.spend(np.array(["a", None], dtype=object), 0.1)


@pytest.mark.parametrize("bad", [None, float("nan"), 7.0, np.float64(2.5), True])
def test_a_float_or_none_id_anywhere_in_an_object_array_is_refused(bad: object) -> None:
    """Past the first thousand too: 7.0 would hash as "7.0", a second person beside 7 with a budget of its own."""
    acc = Accountant(budget=1.0)
    ids = np.array([*range(1500), bad], dtype=object)
    with pytest.raises(ValidationError, match=r"integers or text, got .* at position 1500"):
        acc.spend(ids, 0.1)
    assert acc.spent([7, "None", "nan", "7.0", "True"]).tolist() == [0.0] * 5


@given(st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=6), st.sampled_from([0.1, 0.3, 0.5]),
                          st.booleans()), max_size=12))
def test_matches_a_dictionary_oracle(ops: list[tuple[list[int], float, bool]]) -> None:
    budget = 1000  # in 1e-3 eps
    acc = Accountant(budget=1.0)
    spent = dict.fromkeys(range(4), 0)
    for persons, eps, drop in ops:
        step = round(eps * 1000)
        want = {p: persons.count(p) for p in set(persons)}
        fits = {p: (budget - spent[p]) // step for p in want}
        if not drop and any(want[p] > fits[p] for p in want):
            with pytest.raises(BudgetExceededError):
                acc.spend(persons, eps)
            continue
        acc.spend(persons, eps, policy="drop" if drop else "refuse")
        for p in want:
            spent[p] += min(want[p], fits[p]) * step
        assert np.allclose(acc.spent(list(range(4))), [spent[p] / 1000 for p in range(4)], rtol=0, atol=1e-12)
        assert (acc.remaining(list(range(4))) >= 0).all()


def test_bound_contributions_caps_and_keeps_order() -> None:
    ids = np.array(["a", "b", "a", "c", "a", "b", "a"])
    mask = bound_contributions(ids, 2)
    assert mask.dtype == bool and mask.shape == ids.shape
    kept = ids[mask]
    assert sorted(kept.tolist()) == ["a", "a", "b", "b", "c"]
    assert bound_contributions(ids, 0).sum() == 0
    assert bound_contributions(ids, 10).all()
    mask = bound_contributions(ids, np.array([1, 0, 1]))  # a: 1, b: 0, c: 1
    assert ids[mask].tolist().count("a") == 1 and "b" not in ids[mask] and "c" in ids[mask]
    with pytest.raises(ValidationError):
        bound_contributions(ids, -1)
    with pytest.raises(ValidationError):
        bound_contributions(ids, np.array([1, 2]))


def test_bound_contributions_is_uniform() -> None:
    """2,000 persons with 5 rows each keep 2: each of the C(5,2) = 10 subsets has probability 1/10."""
    persons, rows, k = 2000, 5, 2
    ids = np.repeat(np.arange(persons), rows)
    rng = np.random.default_rng(2026)
    perm = rng.permutation(ids.size)  # rows of a person scattered through the file
    mask = bound_contributions(ids[perm], k, rng=rng)
    kept = np.zeros(ids.size, dtype=bool)
    kept[perm] = mask
    chosen = kept.reshape(persons, rows)
    assert (chosen.sum(axis=1) == k).all()
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(rows), k))}
    codes = [subsets[tuple(np.flatnonzero(row))] for row in chosen]
    counts = np.bincount(codes, minlength=len(subsets))
    assert stats.chisquare(counts).pvalue > 1e-3
    # the first k rows (what a naive cap keeps) are not favoured
    assert counts[subsets[(0, 1)]] < persons / len(subsets) * 1.5


def test_bound_contributions_default_source_is_secure() -> None:
    ids = np.repeat(np.arange(500), 4)
    a, b = bound_contributions(ids, 1), bound_contributions(ids, 1)
    assert a.sum() == b.sum() == 500
    assert not np.array_equal(a, b)  # the OS source: two calls differ (probability 4**-500 of equality)


def test_grant_keep_mask_follows_the_grant() -> None:
    acc = Accountant(budget=0.3)
    ids = np.array(["a"] * 5 + ["b"] * 2)
    g = acc.spend(ids, 0.1, policy="drop")
    mask = g.keep_mask(ids, rng=1)
    assert ids[mask].tolist().count("a") == 3 and ids[mask].tolist().count("b") == 2
    with pytest.raises(ValidationError, match="does not cover"):
        g.keep_mask(np.array(["z"]))
