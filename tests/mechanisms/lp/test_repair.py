"""The tolerance repair: exact privacy from approximate LP solutions (docs/proofs/lp_repair.md)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import PrivacyViolationError, ValidationError
from metricdp.mechanisms.lp import repair
from metricdp.mechanisms.lp.repair import envelope
from tests.helpers import brute_force_epsilon, random_space

core = importlib.import_module("metricdp.mechanisms.lp.optimal")


def lp_solution(space, eps1: float) -> np.ndarray:
    """The raw (unrepaired) OPTMech LP solution at eps1."""
    n = space.n
    p, *_ = core.solve_raw(
        space, eps1, 0.0 + 1e-300, ~np.eye(n, dtype=bool), space.distances, None,
        formulation="fast", time_limit=None, what="test",
    )
    return p


def test_two_points_by_hand():
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    h = repair(p, d, 1.0, eta=0.5)
    # eps1 = 0.5: envelope column 0 = (1, max(.5, e^-.5)), column 1 = (.5 e^-.5, .5)
    e = np.exp(-0.5)
    env = np.array([[1.0, 0.5 * e], [e, 0.5]])
    np.testing.assert_allclose(h, env / env.sum(axis=1, keepdims=True), rtol=1e-15)
    assert brute_force_epsilon(h, d) <= 1.0


def test_envelope_matches_naive_definition(rng):
    d = random_space(3, 9).distances
    p = rng.random((9, 9)) * (rng.random((9, 9)) < 0.6)
    got = envelope(p, d, 0.7)
    naive = np.array([[max(p[v, w] * np.exp(-0.7 * d[u, v]) for v in range(9)) for w in range(9)] for u in range(9)])
    np.testing.assert_allclose(got, naive, rtol=1e-15, atol=0)
    assert (got >= p).all()


def test_zero_column_stays_zero():
    d = random_space(1, 3).distances
    p = np.array([[0.7, 0.0, 0.3], [0.6, 0.0, 0.4], [0.5, 0.0, 0.5]])  # output 1 is never used
    h = repair(p, d, 2.0, eta=0.5)
    assert (h[:, 1] == 0).all() and (h[:, [0, 2]] > 0).all()
    assert brute_force_epsilon(h, d) <= 2.0 * (1 + 1e-12)


def test_zero_column_from_the_lp():
    # 2 points, expected loss under the prior (0.1, 0.9): the optimum is the constant
    # mechanism (everything to output 1), so column 0 is exactly zero.
    space = random_space(0, 2)
    p, *_ = core.solve_raw(
        space, 1.0, 1e-6, ~np.eye(2, dtype=bool), space.distances, np.array([0.1, 0.9]),
        formulation="full", time_limit=None, what="test",
    )
    h = repair(p, space.distances, 1.0, eta=1e-6)
    np.testing.assert_array_equal(h, [[0.0, 1.0], [0.0, 1.0]])


def test_exact_zeros_and_near_violations_are_repaired(rng):
    space = random_space(2, 8)
    d = space.distances
    eps, eta = 6.0, 1e-4
    p = lp_solution(space, eps * (1 - eta))
    # What a solver returns at its tolerance: tiny entries as exact zeros or -1e-12,
    # others off by ~1e-9 relative, some privacy rows slightly violated.
    p = p * (1 + 1e-9 * rng.standard_normal(p.shape))
    small = np.argwhere(p < 1e-6)
    assert len(small) >= 4
    p[tuple(small[: len(small) // 2].T)] = 0.0
    p[tuple(small[len(small) // 2 :].T)] = -1e-12
    assert brute_force_epsilon(np.maximum(p, 0), d) == np.inf  # the input is not private at all
    h = repair(p, d, eps, eta=eta)
    assert brute_force_epsilon(h, d) <= eps * (1 + 1e-12)
    np.testing.assert_allclose(h.sum(axis=1), 1.0, atol=1e-12)
    assert (h > 0).all()  # every zero was lifted by the envelope
    # the repair moves entries only by about the size of what was zeroed
    assert np.abs(h - np.maximum(p, 0)).max() < 1e-6


def test_spread_failure_raises():
    d = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.5], [3.0, 2.5, 0.0]])
    p = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(PrivacyViolationError, match="spread"):
        repair(p, d, 1.0, eta=1e-3)
    h = repair(p, d, 1.0, eta=0.9)  # a wide margin makes the same input repairable
    assert brute_force_epsilon(h, d) <= 1.0 * (1 + 1e-12)


def test_underflow_is_refused():
    d = np.array([[0.0, 2000.0], [2000.0, 0.0]])
    with pytest.raises(PrivacyViolationError, match="underflow"):
        repair(np.eye(2), d, 1.0, eta=0.5)  # exp(-1000) == 0.0


def test_subnormal_is_refused():
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    p = np.array([[1.0, 1e-310], [1.0, 1e-310]])  # column 1 stays subnormal
    with pytest.raises(PrivacyViolationError, match="subnormal"):
        repair(p, d, 1.0, eta=0.5)


@pytest.mark.parametrize(
    ("p", "d", "eta", "match"),
    [
        (np.eye(2), np.zeros((3, 3)), 0.1, "shape"),
        (np.ones((2, 3)), np.zeros((2, 3)), 0.1, "square"),
        (np.array([[np.nan, 1.0], [1.0, 0.0]]), np.ones((2, 2)) - np.eye(2), 0.1, "finite"),
        (np.zeros((2, 2)), np.ones((2, 2)) - np.eye(2), 0.1, "all zero"),
        (np.eye(2), np.ones((2, 2)) - np.eye(2), 0.0, "eta"),
        (np.eye(2), np.ones((2, 2)) - np.eye(2), 1.0, "eta"),
    ],
)
def test_validation(p, d, eta, match):
    with pytest.raises(ValidationError, match=match):
        repair(p, d, 1.0, eta=eta)


def test_epsilon_validation():
    with pytest.raises(ValidationError, match="epsilon"):
        repair(np.eye(2), np.ones((2, 2)) - np.eye(2), 0.0, eta=0.1)


@settings(max_examples=15)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 7),
    eps=st.floats(0.2, 3.0),
    noise=st.sampled_from([0.0, 1e-10, 1e-8]),
)
def test_repaired_lp_solutions_are_private(seed, n, eps, noise):
    space = random_space(seed, n)
    d = space.distances
    eta = 1e-3
    g = np.random.default_rng(seed)
    p = lp_solution(space, eps * (1 - eta))
    p = p * (1 + noise * g.standard_normal(p.shape))
    try:
        h = repair(p, d, eps, eta=eta)
    except PrivacyViolationError:
        # allowed only when the spread really exceeds the margin: re-check by hand
        env = envelope(np.maximum(p, 0), d, eps * (1 - eta))
        s = np.log(env.sum(axis=1))
        off = ~np.eye(n, dtype=bool)
        assert (s[None, :] - s[:, None] > eps * eta * d - 1e-13)[off].any()
        return
    assert brute_force_epsilon(h, d) <= eps * (1 + 1e-12)
    np.testing.assert_allclose(h.sum(axis=1), 1.0, atol=1e-12)
    # H is E / s with E >= P: H * s dominates the clipped input
    env = envelope(np.maximum(p, 0), d, eps * (1 - eta))
    np.testing.assert_allclose(h * env.sum(axis=1, keepdims=True), env, rtol=1e-14)
    assert (env >= np.maximum(p, 0)).all()
