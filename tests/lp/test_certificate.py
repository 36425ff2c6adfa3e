"""The certified lower bound on OPTMech's LP optimum (weak duality)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.experiments.bench_lp import run_bench
from metricdp.lp.certificate import (
    bound_from_duals,
    bound_from_multipliers,
    lower_bound,
    near_binding,
    optmech_lp,
)
from metricdp.mechanisms.exponential import exponential
from metricdp.mechanisms.optimal import optimal
from metricdp.spaces import MetricSpace


def _two_points(eps: float) -> tuple[MetricSpace, float]:
    # hand-derived: the optimal 2-point mechanism keeps with p = e^eps / (1 + e^eps), loss 1 - p
    return MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]]), 1.0 / (1.0 + math.exp(eps))


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_two_points_bound_is_the_hand_optimum(eps: float) -> None:
    space, opt = _two_points(eps)
    m = optimal(space, eps)
    b = lower_bound(space.distances, eps, m.matrix)
    assert b.value <= opt * (1 + 1e-12)
    assert b.value == pytest.approx(opt, rel=1e-9)
    # from a far-from-optimal matrix (the exponential mechanism) the bound still converges
    em = exponential(space, eps)
    assert lower_bound(space.distances, eps, em.matrix).value == pytest.approx(opt, rel=1e-9)


def test_near_binding_rows_of_a_hand_matrix() -> None:
    eps = math.log(2.0)
    m = np.array([[2 / 3, 1 / 3], [1 / 3, 2 / 3]])  # rows (0, 1, 0) and (1, 0, 1) bind
    u, v, w = near_binding(m, [[0.0, 1.0], [1.0, 0.0]], eps)
    assert sorted(zip(u.tolist(), v.tolist(), w.tolist(), strict=True)) == [(0, 1, 0), (1, 0, 1)]


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 5),
    eps=st.sampled_from([0.1, 0.5, 1.0, 3.0]),
    seed=st.integers(0, 10_000),
    worst=st.booleans(),
)
def test_any_multipliers_give_a_valid_bound(n: int, eps: float, seed: int, worst: bool) -> None:
    """Weak duality: random (even absurd) multipliers never bound above a private mechanism's loss."""
    rng = np.random.default_rng(seed)
    space = MetricSpace.from_points(rng.normal(size=(n, 2)))
    prior = None if worst else rng.dirichlet(np.ones(n))
    m = optimal(space, eps) if worst else optimal(space, eps, objective="expected", prior=prior)
    loss = m.worst_case_loss() if worst else m.expected_loss(prior)
    rows = near_binding(m.matrix, space.distances, eps)
    problem = optmech_lp(space.distances, eps, rows, prior=prior)
    for scale in (0.01, 1.0, 100.0):
        y_eq = rng.normal(scale=scale, size=problem.a_eq.shape[0])
        y_ub = rng.normal(scale=scale, size=problem.a_ub.shape[0])
        assert bound_from_multipliers(problem, y_eq, y_ub) <= loss * (1 + 1e-12) + 1e-15
    b = lower_bound(space.distances, eps, m.matrix, prior=prior)
    assert b.value <= loss * (1 + 1e-12) + 1e-15
    assert (loss - b.value) <= 1e-8 * max(loss, 1e-12)  # the builder is near-optimal here


@pytest.mark.slow
def test_bench_certified_gap_column() -> None:
    rows = run_bench([8], ["optimal"], ["fast"], data="gaussian", time_limit=60, certify=30.0)
    (row,) = rows
    assert row.status == "ok", row.message
    assert row.certified_gap is not None and 0 <= row.certified_gap < 1e-7
    assert row.extra["bound"] <= row.objective


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("objective", ["worst", "expected"])
def test_block_ipm_dual_bound_is_valid_and_tight(eps: float, objective: str) -> None:
    # the bound from the block-ipm build's own duals (info["lp"]["dual_bound"]) is below the
    # full LP's optimum at eps (valid: weak duality) and within 1e-8 of it (tight); the
    # build's loss is above it (an audited mechanism is feasible)
    g = np.random.default_rng(int(eps * 10))
    n = 5
    space = MetricSpace.from_points(g.random((n, 2)))
    prior = g.dirichlet(np.full(n, 0.5)) if objective == "expected" else None
    m = optimal(space, eps, objective=objective, prior=prior, formulation="block-ipm")
    bound = m.info["lp"]["dual_bound"]
    full = optimal(space, eps, objective=objective, prior=prior, formulation="full")
    want = lower_bound(space.distances, eps, full.matrix, prior=prior).value  # the certificate LP's bound
    loss = m.info["loss"][objective]
    assert bound <= loss * (1 + 1e-12)
    assert bound <= full.info["loss"][objective] * (1 + 1e-12)
    assert bound == pytest.approx(want, rel=1e-8)


@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("objective", ["worst", "expected"])
def test_fast_dual_bound_is_valid_and_tight(eps: float, objective: str) -> None:
    # constraint generation records its rows, so its own duals certify it too (after the
    # worst case's tie-break: the pure LP's duals on the same rows); the row sums are kept as
    # constraints (bound_from_multipliers' simplex mode), so the bound is within 1e-9
    g = np.random.default_rng(int(eps * 10) + 7)
    n = 6
    space = MetricSpace.from_points(g.random((n, 2)))
    prior = g.dirichlet(np.full(n, 0.5)) if objective == "expected" else None
    m = optimal(space, eps, objective=objective, prior=prior, formulation="fast")
    bound = m.info["lp"]["dual_bound"]
    loss = m.info["loss"][objective]
    full = optimal(space, eps, objective=objective, prior=prior, formulation="full")
    assert bound <= full.info["loss"][objective] * (1 + 1e-12)  # valid: below a feasible point's loss
    assert loss - bound <= 1e-9 * bound  # tight: the build certified within 1e-9


def test_simplex_mode_is_never_below_the_general_bound() -> None:
    # keeping the row sums as constraints = the best row-sum multipliers for the given y_ub
    space = MetricSpace.from_points(np.random.default_rng(1).normal(size=(4, 2)))
    m = optimal(space, 1.0)
    problem = optmech_lp(space.distances, 1.0, near_binding(m.matrix, space.distances, 1.0))
    general = dataclasses.replace(problem, simplex=0)
    g = np.random.default_rng(2)
    for _ in range(20):
        y_eq, y_ub = g.normal(size=problem.a_eq.shape[0]), -np.abs(g.normal(size=problem.a_ub.shape[0]))
        ours = bound_from_multipliers(problem, y_eq, y_ub)
        assert ours >= bound_from_multipliers(general, y_eq, y_ub) - 1e-12
        assert ours <= m.worst_case_loss() * (1 + 1e-12) + 1e-15


def test_dual_bound_holds_for_any_duals() -> None:
    # weak duality whatever the multipliers: random duals give a bound below the optimum
    space, opt = _two_points(1.0)
    d = np.asarray(space.distances, dtype=np.float64)
    rows = (np.array([0, 1]), np.array([1, 0]), np.array([1, 0]))
    g = np.random.default_rng(3)
    for _ in range(20):
        b = bound_from_duals(d, 1.0, rows, g.normal(size=6), g.normal(size=4), np.exp(d), prior=None)
        assert b <= opt * (1 + 1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 5), worst=st.booleans())
def test_capped_bound_is_valid_for_any_multipliers(seed: int, n: int, worst: bool) -> None:
    # cap U >= the optimum (here: a private mechanism's loss, the least U allowed): the entry
    # bounds M <= U / (w L) keep weak duality; random multipliers never exceed the loss
    g = np.random.default_rng(seed)
    space = MetricSpace.from_points(g.normal(size=(n, 2)))
    eps = float(g.choice([0.5, 2.0, 8.0]))
    prior = None if worst else g.dirichlet(np.ones(n))
    m = optimal(space, eps) if worst else optimal(space, eps, objective="expected", prior=prior)
    loss = m.worst_case_loss() if worst else m.expected_loss(prior)
    problem = optmech_lp(space.distances, eps, near_binding(m.matrix, space.distances, eps), prior=prior, cap=loss)
    assert np.all(problem.upper[: n * n] <= 1.0)
    for scale in (0.01, 1.0, 100.0):
        y_ub = g.normal(scale=scale, size=problem.a_ub.shape[0])
        assert bound_from_multipliers(problem, np.zeros(n), y_ub) <= loss * (1 + 1e-12) + 1e-15


def test_capped_rows_are_a_fractional_knapsack() -> None:
    # the bounded row minimum min {r . m : sum m = 1, 0 <= m <= h} of bound_from_multipliers
    # against scipy's LP on each row (the oracle), for random reduced costs and bounds
    from scipy.optimize import linprog

    g = np.random.default_rng(5)
    n = 5
    space = MetricSpace.from_points(g.normal(size=(n, 2)))
    for trial in range(10):
        problem = optmech_lp(space.distances, 1.0, (np.array([0]), np.array([1]), np.array([2])), prior=np.ones(n) / n,
                             cap=float(g.uniform(0.05, 2.0)))
        h = problem.upper.reshape(n, n)
        y_ub = -np.abs(g.normal(size=problem.a_ub.shape[0]))
        r = (problem.c - problem.a_ub.T @ y_ub).reshape(n, n)
        want = 0.0
        for u in range(n):
            if h[u].sum() < 1.0:
                want += r[u].min()
                continue
            res = linprog(r[u], A_eq=np.ones((1, n)), b_eq=[1.0], bounds=list(zip(np.zeros(n), h[u], strict=True)))
            want += res.fun
        got = bound_from_multipliers(problem, np.zeros(n), y_ub)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-14), trial
        # never below the uncapped bound (the bounds only cut the relaxation)
        uncapped = dataclasses.replace(problem, upper=np.ones_like(problem.upper))
        assert got >= bound_from_multipliers(uncapped, np.zeros(n), y_ub) - 1e-15
