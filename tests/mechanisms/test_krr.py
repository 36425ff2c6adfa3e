"""k-ary randomized response (the flat mechanism of Alvim et al., CSF 2018)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.mechanisms.file import load_mechanism
from metricdp.mechanisms.krr import krr, krr_matrix
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, brute_force_epsilon, random_space

# 4 points: d_min = 0.5 (between 0 and 1).
D4 = np.array(
    [
        [0.0, 0.5, 2.0, 2.0],
        [0.5, 0.0, 1.5, 2.0],
        [2.0, 1.5, 0.0, 1.0],
        [2.0, 2.0, 1.0, 0.0],
    ]
)


def space4() -> MetricSpace:
    return MetricSpace.from_distances(D4)


def test_hand_computed_from_the_mdp_guarantee():
    m = krr(space4(), 2.0)  # a = eps * d_min = 1
    e = math.e
    diag, off = e / (3 + e), 1 / (3 + e)
    expected = np.full((4, 4), off)
    np.fill_diagonal(expected, diag)
    np.testing.assert_allclose(m.matrix, expected, rtol=1e-15)
    assert m.name == "krr" and m.epsilon == 2.0
    assert m.params["ldp_epsilon"] == 1.0 and m.params["d_min"] == 0.5
    # tight: the pair at d_min attains exactly a / d_min
    assert m.info["epsilon_audit"] == pytest.approx(2.0, rel=1e-12)
    assert_private(m)


def test_hand_computed_from_the_ldp_parameter():
    m = krr(space4(), ldp_epsilon=math.log(5.0))  # e^a = 5: diag 5/8, off 1/8
    np.testing.assert_allclose(np.diag(m.matrix), 5 / 8, rtol=1e-15)
    np.testing.assert_allclose(m.matrix[0, 1:], 1 / 8, rtol=1e-15)
    assert m.epsilon == pytest.approx(math.log(5.0) / 0.5, rel=1e-15)
    assert m.params["ldp_epsilon"] == math.log(5.0)
    assert_private(m)


@given(seed=st.integers(0, 10_000), n=st.integers(2, 10), eps=st.floats(0.01, 5.0))
def test_both_parametrisations_pass_the_audit_tightly(seed, n, eps):
    space = random_space(seed, n, dim=2)
    for m in (krr(space, eps), krr(space, ldp_epsilon=eps)):
        got = brute_force_epsilon(np.asarray(m.matrix), np.asarray(space.distances))
        assert got <= m.epsilon * (1 + 1e-9)
        assert got == pytest.approx(m.params["ldp_epsilon"] / space.d_min, rel=1e-9)
    assert krr(space, eps).params["ldp_epsilon"] == pytest.approx(eps * space.d_min)
    assert krr(space, ldp_epsilon=eps).epsilon == pytest.approx(eps / space.d_min)


def test_large_parameter_does_not_overflow():
    m = krr_matrix(5, 700.0)
    assert np.all(np.isfinite(m)) and m[0, 0] == 1.0 and m[0, 1] > 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of epsilon"),
        ({"epsilon": 1.0, "ldp_epsilon": 1.0}, "exactly one of epsilon"),
        ({"epsilon": 0.0}, "epsilon must be finite and > 0"),
        ({"epsilon": -1.0}, "epsilon must be finite and > 0"),
        ({"ldp_epsilon": 0.0}, "'ldp_epsilon' must be finite and > 0"),
        ({"ldp_epsilon": float("inf")}, "'ldp_epsilon' must be finite and > 0"),
        ({"ldp_epsilon": "big"}, "'ldp_epsilon' must be a number"),
    ],
)
def test_bad_parameters_name_the_culprit(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        krr(space4(), **kwargs)


def test_underflow_is_a_clear_error():
    with pytest.raises(ValidationError, match="underflows"):
        krr(space4(), ldp_epsilon=800.0)


def test_file_round_trip(tmp_path):
    m = krr(space4(), ldp_epsilon=1.0)
    m.save(tmp_path / "k.npz")
    back = load_mechanism(tmp_path / "k.npz")
    assert back.epsilon == m.epsilon and dict(back.params) == dict(m.params)
