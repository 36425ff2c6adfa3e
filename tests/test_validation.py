"""Argument checks: each names the argument and the culprit, and returns the clean value."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp import ValidationError
from metricdp._validation import (
    check_delta,
    check_epsilon,
    check_int,
    check_metric,
    check_probability_vector,
    check_quantile,
    check_stochastic,
    check_triangle_inequality,
)


def test_check_epsilon():
    assert check_epsilon(0.5) == 0.5
    assert check_epsilon(np.float32(2)) == 2.0
    assert isinstance(check_epsilon(1), float)
    for bad in (0, -1.0, np.inf, np.nan):
        with pytest.raises(ValidationError, match="eps_x must be finite and > 0"):
            check_epsilon(bad, "eps_x")
    for bad in ("x", None, [1.0]):
        with pytest.raises(ValidationError, match="eps_x must be a number"):
            check_epsilon(bad, "eps_x")


def test_check_delta():
    assert check_delta(0) == 0.0
    assert check_delta(0.999) == 0.999
    for bad in (1.0, -1e-12, np.nan):
        with pytest.raises(ValidationError, match=r"delta must be in \[0, 1\)"):
            check_delta(bad)
    with pytest.raises(ValidationError, match="delta must be a number"):
        check_delta("small")


def test_check_quantile():
    assert check_quantile(1) == 1.0
    for bad in (0.0, 1.5, -0.1, np.nan):
        with pytest.raises(ValidationError, match=r"quantile must be in \(0, 1\]"):
            check_quantile(bad)


def test_check_int():
    assert check_int(np.int64(3), "k") == 3
    assert check_int(4.0, "k") == 4
    assert check_int(5, "k", minimum=5, maximum=5) == 5
    with pytest.raises(ValidationError, match=r"k must be an integer, got 2\.5"):
        check_int(2.5, "k")
    with pytest.raises(ValidationError, match="k must be an integer, got True"):
        check_int(True, "k")
    with pytest.raises(ValidationError, match="k must be >= 1, got 0"):
        check_int(0, "k", minimum=1)
    with pytest.raises(ValidationError, match="k must be <= 9, got 10"):
        check_int(10, "k", maximum=9)


def test_check_metric_returns_symmetric_float64_copy():
    d = np.array([[0, 1], [1, 0]], dtype=np.int32)
    out = check_metric(d)
    assert out.dtype == np.float64
    assert out is not d
    out[0, 1] = 5
    assert d[0, 1] == 1


def test_check_metric_without_triangle():
    d = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 1.0], [5.0, 1.0, 0.0]])
    check_metric(d, triangle=False)  # does not raise
    with pytest.raises(ValidationError, match="triangle"):
        check_metric(d)


def test_messages_show_plain_numbers():
    # numpy 2 reprs (np.float64(2.0)) must not leak into user-facing messages
    with pytest.raises(ValidationError) as info:
        check_metric(np.array([[0.0, 1.0], [2.0, 0.0]]), labels=np.array(["a", "b"]))
    assert "np." not in str(info.value)
    assert "('a', 'b')" in str(info.value)


def test_triangle_tolerance_is_relative():
    # d(0,2) exceeds d(0,1) + d(1,2) by 1e-12 relative: rounding, not a violation
    d = np.array([[0.0, 1.0, 2.0 * (1 + 1e-12)], [1.0, 0.0, 1.0], [2.0 * (1 + 1e-12), 1.0, 0.0]])
    check_triangle_inequality(d)
    d[0, 2] = d[2, 0] = 2.0 * (1 + 1e-6)
    with pytest.raises(ValidationError, match="i=0, k=1, j=2"):
        check_triangle_inequality(d)


@pytest.mark.parametrize(
    ("matrix", "pattern"),
    [
        (np.ones((2, 3)) / 3, r"square matrix, got shape \(2, 3\)"),
        ([[0.5, np.nan], [0.5, 0.5]], r"not finite at \(0, 1\)"),
        ([[1.5, -0.5], [0.5, 0.5]], r"negative probability at \(0, 1\): -0.5$"),
        ([[0.5, 0.5], [0.5, 0.4]], r"row 1 of M sums to 0.9, not 1"),
        ([[0.5, 0.5], [-np.inf, np.inf]], r"not finite at \(1, 0\)"),
        ([[1e308, 1e308], [0.5, 0.5]], r"row 0 of M sums to inf"),  # finite entries, an overflowing sum
        ([[0.5, 0.5], [1.0, -0.0]], None),  # a negative zero is no negative probability
        (np.array([["a"]], dtype=object), "numeric matrix"),
    ],
)
def test_check_stochastic(matrix, pattern):
    if pattern is None:
        assert check_stochastic(matrix, name="M").shape == (2, 2)
        return
    with pytest.raises(ValidationError, match=pattern):
        check_stochastic(matrix, name="M")


def test_check_stochastic_tolerance():
    m = np.array([[0.5, 0.5 + 5e-10], [0.5, 0.5]])
    assert check_stochastic(m) is not None
    with pytest.raises(ValidationError, match="row 0"):
        check_stochastic(m, atol=1e-10)


def test_check_probability_vector():
    np.testing.assert_array_equal(check_probability_vector([0.25, 0.75], 2), [0.25, 0.75])
    with pytest.raises(ValidationError, match=r"prior must have shape \(3,\), got \(2,\)"):
        check_probability_vector([0.5, 0.5], 3)
    with pytest.raises(ValidationError, match=r"prior is negative at index 1: -0\.5$"):
        check_probability_vector([1.5, -0.5], 2)
    with pytest.raises(ValidationError, match="prior is not finite at index 0"):
        check_probability_vector([np.nan, 1.0], 2)
    with pytest.raises(ValidationError, match=r"prior sums to 0\.5, not 1"):
        check_probability_vector([0.25, 0.25], 2)
