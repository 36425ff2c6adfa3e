"""Dantzig-Wolfe decomposition of OPTMech's expected loss (lp/dantzig_wolfe.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.audit import audit
from metricdp.errors import SolverTimeLimitError, ValidationError
from metricdp.lp.dantzig_wolfe import closure, price
from metricdp.lp.deadline import Deadline
from metricdp.mechanisms.optimal import optimal
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private
from tests.lp.exact_lp import exact_optimum
from tests.lp.test_exact import small_space

EPSILONS = (0.1, 1.0, 10.0)


def _box_min(g: np.ndarray, factor: np.ndarray) -> float:
    """min g.m over {m >= 0: m_u <= f_uv m_v, m <= 1}, every row (scipy's HiGHS): the oracle.
    Rows divided by their factor (coefficients in (0, 1]: HiGHS loses rows with e^19 in them)."""
    n = g.size
    u, v = np.nonzero(~np.eye(n, dtype=bool))
    a = np.zeros((u.size, n))
    a[np.arange(u.size), u] = 1.0 / factor[u, v]
    a[np.arange(u.size), v] = -1.0
    res = scipy.optimize.linprog(g, A_ub=a, b_ub=np.zeros(u.size), bounds=(0, 1), method="highs",
                                 options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0
    return float(res.fun)


def _factor(seed: int, n: int, eps: float) -> np.ndarray:
    return np.exp(eps * np.asarray(small_space(seed, n).distances))


def _in_cone(m: np.ndarray, factor: np.ndarray) -> bool:
    return bool(np.all(m[:, None] <= factor * m[None, :] * (1 + 1e-12)) and np.all((m >= 0) & (m <= 1)))


def test_pricing_by_hand():
    # two points at distance 1, g = (-1, a): the ray (1, 1/f) costs a / f - 1 (m_0 = 1 is
    # the most the box allows, m_1 >= m_0 / f the least the row allows); a > f: 0 (the zero ray)
    f = math.exp(0.7)
    factor = np.array([[1.0, f], [f, 1.0]])
    for a in (0.5, 1.0, 3.0):
        p = price(np.array([[-1.0], [a]]), factor)
        want = min(0.0, a / f - 1.0)
        assert p.value[0] == pytest.approx(want, abs=1e-12)
        assert p.bound[0] <= want + 1e-12


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 7), eps=st.sampled_from(EPSILONS),
       arcs=st.sampled_from([0, 1, 2]))
def test_pricing_brackets_the_cone_minimum(seed, n, eps, arcs):
    # the bound is below the exact minimum and the closure's value above it; with every
    # deficit-surplus row (arcs 0) both are the minimum (module docstring's lemma)
    factor = _factor(seed, n, eps)
    g = np.random.default_rng(seed).normal(size=(n, 3))
    p = price(g, factor, arcs)
    for i in range(3):
        want = _box_min(g[:, i], factor)
        assert p.bound[i] <= want + 1e-9  # the oracle's own accuracy: entries of 1e-9 at e^19
        assert p.value[i] >= want - 1e-9
        assert _in_cone(p.rays[:, i], factor)
        if arcs == 0:
            assert p.value[i] == pytest.approx(want, abs=1e-8)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8), eps=st.sampled_from(EPSILONS))
def test_closure_lies_in_the_cone(seed, n, eps):
    rng = np.random.default_rng(seed)
    factor = _factor(seed, n, eps)
    surplus = np.flatnonzero(rng.random(n) < 0.5)
    m = closure(rng.random(surplus.size), surplus, factor)
    assert _in_cone(m, factor)
    assert np.all(m[surplus] <= 1.0)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("side", [3, 4])
def test_grids_with_priors_match_the_full_lp(side, eps):
    space = MetricSpace.grid(side, side, cell=1.0)
    prior = np.random.default_rng(side * 100 + int(eps * 10)).dirichlet(np.full(space.n, 0.5))
    ref = optimal(space, eps, objective="expected", prior=prior, formulation="full")
    dw = optimal(space, eps, objective="expected", prior=prior, formulation="dantzig-wolfe")
    lp = dw.info["lp"]
    assert lp["formulation"] == "dantzig-wolfe" and "fallback" not in lp
    assert lp["objective"] == pytest.approx(ref.info["lp"]["objective"], rel=1e-9, abs=1e-12)
    assert dw.info["loss"]["expected"] == pytest.approx(ref.info["loss"]["expected"], rel=1e-9, abs=1e-12)
    # the build's own certificate: within 1e-9 of its loss, and a lower bound of it
    assert lp["dual_bound"] <= dw.info["loss"]["expected"] * (1 + 1e-12)
    assert dw.info["loss"]["expected"] - lp["dual_bound"] <= 1e-9 * lp["dual_bound"]
    assert_private(dw)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_spaces_match_the_full_lp(seed, eps):
    space = small_space(seed, 7)
    prior = np.random.default_rng(seed).dirichlet(np.full(space.n, 0.5))
    ref = optimal(space, eps, objective="expected", prior=prior, formulation="full")
    dw = optimal(space, eps, objective="expected", prior=prior, formulation="dantzig-wolfe")
    tol = 2e-6 if eps >= 10 else 1e-9  # the plain full LP's own accuracy there (tests/lp/test_exact.py)
    assert dw.info["lp"]["objective"] == pytest.approx(ref.info["lp"]["objective"], rel=tol, abs=1e-12)
    assert_private(dw)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("n", [4, 6, 8])
def test_matches_the_exact_rational_optimum(n, eps):
    seed = 100 * n + int(10 * eps)
    s = small_space(seed, n)
    prior = np.random.default_rng(seed).dirichlet(np.full(n, 0.5))
    exact = float(exact_optimum(s.distances, eps, prior=prior).value)
    m = optimal(s, eps, objective="expected", prior=prior, formulation="dantzig-wolfe")
    got = m.expected_loss(prior)
    assert got >= exact * (1 - 1e-12)
    assert got <= exact * (1 + 1e-10), (got - exact) / exact
    assert m.info["lp"]["dual_bound"] <= exact * (1 + 1e-12)
    assert audit(m.matrix, s.distances).epsilon <= eps * (1 + 1e-12)


def test_needs_the_expected_objective_on_a_square_space():
    space = MetricSpace.grid(2, 2, cell=1.0)
    with pytest.raises(ValidationError, match="dantzig-wolfe"):
        optimal(space, 1.0, formulation="dantzig-wolfe")


def test_pricing_keeps_the_deadline():
    # a build whose time is up stops at the next pricing solve with the typed time-out
    ticks = iter([0.0, 5.0, 5.0, 5.0])
    deadline = Deadline(1.0, clock=lambda: next(ticks))
    factor = _factor(3, 4, 1.0)
    with pytest.raises(SolverTimeLimitError, match="decomposition pricing") as info:
        price(-np.ones((4, 2)) + np.eye(4)[:, :2] * 3.0, factor, 0, deadline, "optimal")
    assert info.value.status == "limit"
