"""The tolerance repair: exact privacy from approximate LP solutions (docs/proofs/lp_repair.md)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import PrivacyViolationError, ValidationError
from metricdp.lp.repair import envelope, repair, repair_free
from tests.helpers import brute_force_epsilon, random_space

core = importlib.import_module("metricdp.lp.core")


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
        (np.ones((2, 3)), np.zeros((2, 3)), 0.1, "shape"),  # (n, m) matrices are fine; d must be (n, n)
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


# --------------------------------------------------------------------------- repair_free
cone_mod = importlib.import_module("metricdp.mechanisms.constopt.cone")
fast_mod = importlib.import_module("metricdp.mechanisms.constopt.fast")
replacement_mod = importlib.import_module("metricdp.mechanisms.constopt.replacement")
stats_mod = importlib.import_module("metricdp.mechanisms.constopt.stats")
Deadline = importlib.import_module("metricdp.lp.deadline").Deadline


def constopt_point(space, r: int, eps: float, eta: float, noise: float, seed: int):
    """A ConstOPTMech paper-LP solution at the LP level, as a solver returns it, then polished."""
    free = replacement_mod.free_mask(space, None, r)
    cone = cone_mod.build_cone(space.distances, free, eps / 2 * (1 - eta))
    model = fast_mod.FastModel(cone, Deadline(None), stats_mod.FitStats())
    x = model.point(model.paper(0.1).x)
    g = np.random.default_rng(seed)
    x = x * (1 + noise * g.standard_normal(x.shape))  # solver-sized errors, rows (22) included
    x[cone.n :][g.random(cone.nfree) < 0.2] = 0.0  # and exact zeros among the free entries
    return cone, cone_mod.polish(cone, x)


def test_repair_free_by_hand():
    # a line 0 - 1 - 2, column 1 fixed at row 1 (Y = 1), free at rows 0 and 2, level 0.5
    d = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    m = np.exp(-0.5 * d)
    m[0, 1], m[2, 1] = 0.0, 0.9  # (22) violated: 0.9 > e^{0.5 * 2} * 0
    h = repair_free(m, d, 0.5, 1.0 + 1e-6, rows=[0, 2], cols=[1, 1])
    e = np.exp(-0.5 * d)
    e[0, 1], e[2, 1] = 0.9 * np.exp(-1.0), 0.9  # M[0,1] lifted by its free partner only
    np.testing.assert_allclose(h, e / e.sum(axis=1, keepdims=True), rtol=1e-15)
    assert brute_force_epsilon(h, d) <= 1.0 + 1e-6


@settings(max_examples=15)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 9),
    r=st.integers(1, 8),
    eps=st.floats(0.2, 3.0),
    noise=st.sampled_from([0.0, 1e-9, 1e-6]),
)
def test_repair_free_is_private_and_no_worse_than_the_envelope_repair(seed, n, r, eps, noise):
    space = random_space(seed, n, clustered=seed % 2 == 0)
    d = space.distances
    eta = 1e-3
    cone, x = constopt_point(space, min(r, n - 1), eps, eta, noise, seed)
    m = cone.matrix(x)
    fast = repair_free(m, d, cone.level, eps, rows=cone.fu, cols=cone.fw)
    np.testing.assert_array_equal(m, cone.matrix(x))  # the input is left alone
    assert brute_force_epsilon(fast, d) <= eps * (1 + 1e-12)
    np.testing.assert_allclose(fast.sum(axis=1), 1.0, atol=1e-12)
    # it only lifts free entries: E = H * s_E equals M on the fixed entries, s_E read off
    # each row's largest fixed entry
    fixed = ~cone.free & (m > 0)
    w0 = np.argmax(np.where(fixed, m, -1.0), axis=1)
    rows = np.arange(n)
    e = fast * (m[rows, w0] / fast[rows, w0])[:, None]
    np.testing.assert_allclose(e[fixed], m[fixed], rtol=1e-12)
    assert (e[cone.fu, cone.fw] >= m[cone.fu, cone.fw] * (1 - 1e-12)).all()
    # against the O(n^3) envelope repair of H: the same loss to the size of the lift
    try:
        old = repair(m / m.sum(axis=1, keepdims=True), d, eps, eta=eta)
    except PrivacyViolationError:
        return  # the envelope repair's spread check refused; repair_free needs none
    lf, lo = (fast * d).sum(axis=1), (old * d).sum(axis=1)
    assert lf.max() <= lo.max() * (1 + 20 * noise) + 1e-12


def test_repair_free_needs_its_precondition():
    # the fixed entries of column 0 break privacy at level 0.5; repair_free does not look
    # at them (the caller's precondition) and the result is not private: the test can fail
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    m = np.array([[1.0, 0.5], [0.01, 0.5]])
    h = repair_free(m, d, 0.5, 1.0 + 1e-6, rows=np.array([], dtype=int), cols=np.array([], dtype=int))
    assert brute_force_epsilon(h, d) > 1.1


def test_repair_free_refusals():
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    none = np.array([], dtype=int)
    with pytest.raises(PrivacyViolationError, match="rounding reserve"):
        repair_free(np.ones((2, 2)), d, 0.5, 1.0, rows=none, cols=none)  # no margin at all
    with pytest.raises(PrivacyViolationError, match="all zero"):
        repair_free(np.array([[1.0, 1.0], [0.0, 0.0]]), d, 0.5, 1.1, rows=none, cols=none)
    with pytest.raises(PrivacyViolationError, match="subnormal"):
        repair_free(np.array([[1.0, 1e-310], [1.0, 1e-310]]), d, 0.5, 1.1, rows=none, cols=none)
    with pytest.raises(ValidationError, match="finite"):
        repair_free(np.array([[np.inf, 1.0], [1.0, 1.0]]), d, 0.5, 1.1, rows=none, cols=none)
    with pytest.raises(ValidationError, match=r"0\.\.1"):
        repair_free(np.ones((2, 2)), d, 0.5, 1.1, rows=[2], cols=[0])
    with pytest.raises(ValidationError, match="shape"):
        repair_free(np.ones((2, 2)), np.zeros((3, 3)), 0.5, 1.1, rows=none, cols=none)
