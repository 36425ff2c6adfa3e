"""Composition arithmetic, by hand on two or three persons."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.accounting.composition import (
    UNITS_PER_EPS,
    consistent_epsilon,
    joint_bound,
    parallel,
    per_person_epsilon,
    per_person_units,
    repeated,
    sequential,
    summarize,
    to_units,
)
from metricdp.errors import ValidationError


def test_per_person_by_hand() -> None:
    # ann: 3 rows at 0.5, 0.25, 0.25 -> 1.0; bob: 1 row at 2.0; cy: 2 rows at 0.1 -> 0.2
    ids = ["ann", "bob", "ann", "cy", "ann", "cy"]
    eps = [0.5, 2.0, 0.25, 0.1, 0.25, 0.1]
    persons, total = per_person_epsilon(ids, eps)
    assert persons.tolist() == ["ann", "bob", "cy"]
    assert total.tolist() == [1.0, 2.0, 0.2]
    persons, total = per_person_epsilon(np.array([7, 3, 7]), 0.3)
    assert persons.tolist() == [3, 7] and total.tolist() == [0.3, 0.6]


def test_decimal_sums_are_exact() -> None:
    # ten releases at 0.1 are exactly 1 (float summation gives 0.9999999999999999)
    assert sum([0.1] * 10) != 1.0
    assert sequential([0.1] * 10) == 1.0
    assert repeated(0.1, 10) == 1.0
    _, units = per_person_units(["a"] * 10, 0.1)
    assert int(units[0]) == to_units(1.0, budget=True) == UNITS_PER_EPS


def test_rounding_is_conservative() -> None:
    assert to_units(1e-12 * 1.5) == 2  # a release is rounded up
    assert to_units(1.5e-12, budget=True) == 1  # a budget down
    with pytest.raises(ValidationError, match="below the accounting grid"):
        to_units(1e-13, "budget", budget=True)
    for bad in (0.0, -1.0, float("nan"), float("inf"), True, "0.1"):
        with pytest.raises(ValidationError):
            to_units(bad)


def test_joint_bound_and_parallel_by_hand() -> None:
    # two values moved by 2 and 1 at eps 0.5 and 1.0: 0.5*2 + 1.0*1 = 2
    assert joint_bound([0.5, 1.0], [2.0, 1.0]) == 2.0
    # one value reported 3 times at 0.5, moved by 4: 3 * 0.5 * 4 = 6 = repeated(0.5, 3) * 4
    assert joint_bound([0.5] * 3, [4.0] * 3) == repeated(0.5, 3) * 4
    assert parallel([0.5, 1.0], [0.75], []) == 1.0
    assert parallel() == 0.0
    with pytest.raises(ValidationError):
        joint_bound([0.5], [1.0, 2.0])
    with pytest.raises(ValidationError):
        joint_bound([0.5], [-1.0])


def test_consistent_by_hand() -> None:
    # a: values 3, 3, 4 -> two distinct -> 2 * 0.5; b: 3 -> 0.5; c: 5, 5, 5 -> 0.5
    persons, eps = consistent_epsilon(["a", "a", "a", "b", "c", "c", "c"], [3, 3, 4, 3, 5, 5, 5], 0.5)
    assert persons.tolist() == ["a", "b", "c"] and eps.tolist() == [1.0, 0.5, 0.5]
    # per-row eps: a pair costs the eps of its first row
    _, eps = consistent_epsilon(["a", "a", "a"], [3, 3, 4], [0.25, 1.0, 0.5])
    assert eps.tolist() == [0.75]
    # points (2-D values) are compared whole
    _, eps = consistent_epsilon(["a", "a", "a"], [[0, 1], [0, 1], [1, 0]], 1.0)
    assert eps.tolist() == [2.0]


def test_summary_by_hand() -> None:
    s = summarize([0.5, 1.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 3.0])
    assert (s.persons, s.max, s.median, s.p90, s.p99) == (10, 3.0, 0.5, 1.5, 3.0)
    assert summarize([]).persons == 0


@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0.1, 0.25, 0.3, 1.0])), min_size=1, max_size=40))
def test_per_person_matches_a_dictionary(rows: list[tuple[int, float]]) -> None:
    ids = np.array([r[0] for r in rows])
    eps = np.array([r[1] for r in rows])
    expected: dict[int, int] = {}
    for p, e in rows:
        expected[p] = expected.get(p, 0) + to_units(e)
    persons, units = per_person_units(ids, eps)
    assert dict(zip(persons.tolist(), units.tolist(), strict=True)) == expected


def test_bad_inputs() -> None:
    with pytest.raises(ValidationError, match="one per row"):
        per_person_epsilon(["a", "b"], [0.1, 0.2, 0.3])
    with pytest.raises(ValidationError, match="row 1"):
        per_person_epsilon(["a", "b"], [0.1, float("nan")])
    with pytest.raises(ValidationError, match="one-dimensional"):
        per_person_epsilon([["a"]], 0.1)
