"""largest_passing: bisection on the exact audit, returning only passing matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.audit import audit_epsilon
from metricdp.errors import ValidationError
from metricdp.mechanisms.calibration import Calibration, largest_passing
from metricdp.mechanisms.exponential import exponential_matrix
from tests.helpers import brute_force_epsilon, random_space

D2 = np.array([[0.0, 1.0], [1.0, 0.0]])


def binary(p: float) -> np.ndarray:
    """Randomized response on two points at distance 1: audited level exactly p."""
    q = 1.0 / (1.0 + math.exp(p))
    return np.array([[1 - q, q], [q, 1 - q]])


def test_finds_the_threshold_of_a_known_family():
    cal = largest_passing(binary, D2, 0.7, 0.1, 2.0, rtol=1e-9)
    assert isinstance(cal, Calibration)
    assert cal.parameter == pytest.approx(0.7, rel=1e-8)
    # no slack: the returned matrix passes at epsilon itself, not epsilon * (1 + 1e-9)
    assert cal.epsilon_audit <= 0.7
    assert cal.epsilon_audit == audit_epsilon(cal.matrix, D2)
    np.testing.assert_array_equal(cal.matrix, binary(cal.parameter))
    assert 3 <= cal.iterations <= 60


def test_hi_passing_is_returned_at_once():
    cal = largest_passing(binary, D2, 0.7, 0.1, 0.5)
    assert (cal.parameter, cal.iterations) == (0.5, 2)
    assert cal.epsilon_audit == pytest.approx(0.5)


def test_lo_equal_hi():
    cal = largest_passing(binary, D2, 0.7, 0.3, 0.3)
    assert (cal.parameter, cal.iterations) == (0.3, 1)


def test_lo_failing_is_a_clear_error():
    with pytest.raises(ValidationError, match=r"lower end lo=1\.0 does not pass the audit"):
        largest_passing(binary, D2, 0.7, 1.0, 2.0)


def test_max_iter_bounds_the_number_of_builds():
    calls: list[float] = []

    def build(p: float) -> np.ndarray:
        calls.append(p)
        return binary(p)

    cal = largest_passing(build, D2, 0.7, 0.1, 2.0, rtol=1e-15, max_iter=5)
    assert len(calls) == cal.iterations == 5
    assert cal.parameter in calls and cal.epsilon_audit <= 0.7


def test_non_monotone_family_only_returns_passing_matrices():
    """Audited level passes on [0, 0.3] and [0.9, 1.0] only: whatever is returned passes."""
    calls: dict[float, float] = {}

    def build(p: float) -> np.ndarray:
        level = p if p <= 0.3 or p >= 0.9 else 5.0
        calls[p] = level
        return binary(level)

    cal = largest_passing(build, D2, 1.0, 0.1, 1.5)
    assert cal.parameter in calls
    assert calls[cal.parameter] <= 1.0
    assert brute_force_epsilon(cal.matrix, D2) <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"lo": 2.0, "hi": 1.0}, "lo must be <= hi"),
        ({"lo": float("nan")}, "lo must be finite"),
        ({"hi": float("inf")}, "hi must be finite"),
        ({"rtol": 0.0}, "rtol"),
        ({"max_iter": 1}, "max_iter"),
        ({"max_iter": 2.5}, "max_iter"),
    ],
)
def test_bad_arguments_name_the_culprit(kwargs, match):
    args = {"epsilon": 0.7, "lo": 0.1, "hi": 2.0} | kwargs
    eps, lo, hi = args.pop("epsilon"), args.pop("lo"), args.pop("hi")
    with pytest.raises(ValidationError, match=match):
        largest_passing(binary, D2, eps, lo, hi, **args)


def test_build_returning_a_non_stochastic_matrix_is_refused():
    with pytest.raises(ValidationError, match=r"build\(0\.1\)"):
        largest_passing(lambda p: 2 * binary(p), D2, 0.7, 0.1, 2.0)
    with pytest.raises(ValidationError, match="shape"):
        largest_passing(lambda p: np.eye(3), D2, 0.7, 0.1, 2.0)


@given(seed=st.integers(0, 10_000), n=st.integers(3, 12), eps=st.floats(0.1, 3.0))
def test_exponential_family_on_random_spaces(seed, n, eps):
    space = random_space(seed, n, dim=3)
    d = space.distances
    cal = largest_passing(lambda p: exponential_matrix(d, p), d, eps, eps, 2 * eps, rtol=1e-4)
    assert eps <= cal.parameter <= 2 * eps
    assert brute_force_epsilon(cal.matrix, d) <= eps * (1 + 1e-12)
    assert cal.epsilon_audit <= eps
    if cal.parameter < 2 * eps:  # the bracket above it fails: a bit larger does not pass
        bigger = min(2 * eps, cal.parameter * (1 + 2e-4) + 1e-12)
        assert audit_epsilon(exponential_matrix(d, bigger), d) > eps
