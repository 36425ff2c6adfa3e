"""Losses: per element, worst case, inverted-CDF quantile, expected, uniform baseline."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp import MetricSpace, ValidationError
from metricdp.loss import (
    element_losses,
    expected_loss,
    quantile_loss,
    quantile_rank,
    uniform_losses,
    worst_case_loss,
)
from metricdp.mechanisms.base import Mechanism
from metricdp.mechanisms.exponential import exponential_matrix

D3 = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])  # points 0, 1, 3 on a line
M3 = np.array([[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.0, 0.5, 0.5]])
# L(M,u) = sum_v d(u,v) M[u,v]:
#   u=0: 1*0.3 + 3*0.2 = 0.9;  u=1: 1*0.1 + 2*0.1 = 0.3;  u=2: 3*0 + 2*0.5 = 1.0
L3 = np.array([0.9, 0.3, 1.0])


def test_element_losses_hand_computed():
    np.testing.assert_allclose(element_losses(M3, D3), L3, rtol=1e-15)


def test_worst_case_loss():
    assert worst_case_loss(M3, D3) == pytest.approx(1.0)


def test_expected_loss_uniform_and_prior():
    assert expected_loss(M3, D3) == pytest.approx(L3.mean())
    assert expected_loss(M3, D3, [0.5, 0.5, 0.0]) == pytest.approx(0.6)
    with pytest.raises(ValidationError, match="prior sums to"):
        expected_loss(M3, D3, [0.5, 0.2, 0.2])


def test_quantile_definition_inverted_cdf():
    # sorted losses 0.3, 0.9, 1.0 (n = 3): L_q is the ceil(3q)-th smallest
    assert quantile_loss(M3, D3, 1.0) == pytest.approx(1.0)  # q = 1 is the maximum
    assert quantile_loss(M3, D3, 2 / 3) == pytest.approx(0.9)  # ceil(2) = 2nd
    assert quantile_loss(M3, D3, 0.67) == pytest.approx(1.0)  # ceil(2.01) = 3rd
    assert quantile_loss(M3, D3, 0.34) == pytest.approx(0.9)  # ceil(1.02) = 2nd
    assert quantile_loss(M3, D3, 0.3) == pytest.approx(0.3)  # ceil(0.9) = 1st
    assert quantile_loss(M3, D3, 1e-9) == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("n", "q", "rank"),
    [
        (200, 0.95, 190),
        (100, 0.95, 95),
        (3, 1.0, 3),
        (3, 0.5, 2),
        (1000, 0.999, 999),
        (7, 1e-6, 1),
        (20, 0.951, 20),
    ],
)
def test_quantile_rank(n, q, rank):
    assert quantile_rank(n, q) == rank


@given(st.integers(1, 500), st.floats(0.001, 1.0))
def test_quantile_rank_is_ceil_qn(n, q):
    k = quantile_rank(n, q)
    assert 1 <= k <= n
    assert k >= q * n - 1e-9  # covers at least a q fraction (up to float rounding)
    assert k - 1 < q * n  # and is the smallest such count


def test_quantile_rejects_bad_q():
    with pytest.raises(ValidationError, match=r"quantile must be in \(0, 1\]"):
        quantile_loss(M3, D3, 0.0)


def test_uniform_losses_are_row_means():
    # releasing a uniformly random element of the 3 (itself included)
    np.testing.assert_allclose(uniform_losses(D3), [4 / 3, 1.0, 5 / 3])


def test_shape_mismatch():
    with pytest.raises(ValidationError, match="same non-empty 2-d shape"):
        element_losses(np.eye(2), D3)


def test_mechanism_methods_match_the_functions():
    # M3 is not private at any epsilon (a zero beside non-zeros), so a Mechanism wraps a private matrix
    m = exponential_matrix(D3, 1.0)
    mech = Mechanism.from_matrix(m, MetricSpace.from_distances(D3), 1.0, "test")
    np.testing.assert_allclose(mech.element_losses(), element_losses(m, D3))
    assert mech.worst_case_loss() == worst_case_loss(m, D3)
    assert mech.quantile_loss(0.5) == quantile_loss(m, D3, 0.5)
    assert mech.expected_loss() == expected_loss(m, D3)
    np.testing.assert_allclose(mech.uniform_losses(), uniform_losses(D3))
    with pytest.raises(ValidationError, match="quantile"):
        mech.quantile_loss(2.0)
