"""The structured interior-point method (lp.ipm) and its exact finish, formulation block-ipm.

Oracles: the full LP written naively for scipy's linprog (test_optimal.naive_lp), the
constraint-generation path (formulation "fast"), hand-derived optima on two points, and
a dense solve of the Newton system the block solver factors by parts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from metricdp.errors import ResourceLimitError
from metricdp.lp.ipm import _LP, BLAS_THREADS, _Factor, _ratio, ipm_bytes, solve_ipm
from metricdp.lp.ipm_finish import seed_rows
from metricdp.lp.ipm_newton import REGULARISATION
from metricdp.mechanisms.optimal import optimal
from metricdp.outputs import OutputSet
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private
from tests.mechanisms.test_optimal import naive_lp

EPSILONS = (0.1, 0.5, 1.0, 3.0, 10.0)


def _space(seed: int, n: int) -> tuple[MetricSpace, np.ndarray]:
    g = np.random.default_rng(seed)
    s = MetricSpace.from_points(g.random((n, 2)))
    return s, np.asarray(s.distances, dtype=np.float64)


def _off(n: int) -> np.ndarray:
    return ~np.eye(n, dtype=bool)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("objective", ["worst", "expected"])
def test_ipm_objective_matches_the_full_lp(eps, objective):
    # random spaces n = 3..8 (two per eps): the raw interior point agrees with linprog
    i = EPSILONS.index(eps)
    for seed, n in ((i, 3 + i), (10 + i, 8 - i // 2)):
        _, d = _space(seed, n)
        prior = None if objective == "worst" else np.random.default_rng(seed).dirichlet(np.full(n, 0.5))
        want = naive_lp(d, eps, prior=prior)
        got = solve_ipm(d, eps, _off(n), d, prior, tol=1e-9)
        assert got.converged
        assert got.objective == pytest.approx(want, rel=1e-6, abs=1e-9)
        assert got.dual_objective == pytest.approx(want, rel=1e-6, abs=1e-9)
        assert np.allclose(got.matrix.sum(axis=1), 1.0, atol=1e-8)
        assert got.matrix.min() > 0  # interior


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("objective", ["worst", "expected"])
def test_block_ipm_finish_equals_constraint_generation(eps, objective):
    # the exact finish returns the same LP optimum as the existing path, to 1e-9, audited
    i = EPSILONS.index(eps)
    for seed, n in ((20 + i, 4 + i),):
        space, _ = _space(seed, n)
        prior = None if objective == "worst" else np.random.default_rng(seed).dirichlet(np.full(n, 0.5))
        fast = optimal(space, eps, objective=objective, prior=prior, formulation="fast")
        ipm = optimal(space, eps, objective=objective, prior=prior, formulation="block-ipm")
        assert ipm.info["lp"]["formulation"] == "block-ipm"
        assert ipm.info["lp"]["objective"] == pytest.approx(fast.info["lp"]["objective"], rel=1e-9, abs=1e-12)
        assert_private(ipm)


def test_two_points_by_hand():
    # M = [[1-a, a], [b, 1-b]], privacy 1-a <= e b, 1-b <= e a (e = exp(eps d)): the worst
    # loss d max(a, b) is least at a = b = 1/(1+e); with the prior (0.9, 0.1) the expected
    # loss 0.9 a d + 0.1 b d is least at the vertex a = 0, b = 1 (both release input 1):
    # 0.1 d, below the symmetric vertex's d/(1+e) = 0.269 d at eps d = 1.
    d, eps = 2.0, 0.5
    dist = np.array([[0.0, d], [d, 0.0]])
    e = math.exp(eps * d)
    worst = solve_ipm(dist, eps, _off(2), dist, None, tol=1e-10)
    assert worst.objective == pytest.approx(d / (1 + e), rel=1e-8)
    assert worst.matrix == pytest.approx(np.array([[e, 1.0], [1.0, e]]) / (1 + e), abs=1e-8)
    skew = solve_ipm(dist, eps, _off(2), dist, np.array([0.9, 0.1]), tol=1e-10)
    assert skew.objective == pytest.approx(0.1 * d, rel=1e-8)
    m = optimal(MetricSpace.from_distances(dist), eps, formulation="block-ipm")
    assert m.info["lp"]["objective"] == pytest.approx(d / (1 + math.exp(eps * (1 - m.info["lp"]["eta"]) * d)),
                                                      rel=1e-9)
    assert_private(m)


def test_structured_products_are_adjoint_and_the_block_solve_is_exact():
    # <G x, q> = <x, G^T q>, and the Schur-complement solve of the reduced Newton system
    # equals a dense solve of the same system (worst case: row sums, loss rows and t)
    g = np.random.default_rng(7)
    n = 5
    _, d = _space(7, n)
    allowed = _off(n)
    allowed[0, 3] = False  # a row left out
    for prior in (None, g.dirichlet(np.ones(n))):
        lp = _LP(d, 0.8, allowed, d, prior)
        x, q = g.random((n, n)), g.random((n, n, n)) * lp.mask
        assert np.sum(lp.gx(x) * q) == pytest.approx(np.sum(x * lp.gtz(q)), rel=1e-12)
        dd = g.random((n, n, n)) * lp.mask
        dx = g.random((n, n)) + 0.1
        dl = g.random(n) + 0.1 if prior is None else np.zeros(0)
        fac = _Factor(lp, dd, dx, dl)
        f, e, g4, g5 = g.normal(size=(n, n)), g.normal(size=n), g.normal(size=n), 0.3
        sx, sy, sq, st = fac.solve(f, e, g4 if prior is None else np.zeros(0), g5 if prior is None else 0.0)
        # dense H from the operator, then the KKT system of the reduced equations
        h = np.stack([fac.hop(np.eye(n * n)[i].reshape(n, n)).ravel() for i in range(n * n)], axis=1)
        ee = np.kron(np.eye(n), np.ones(n))  # row sums of vec(M) (row-major)
        if prior is None:
            lr = ee * lp.loss.ravel()[None, :]
            k = np.zeros((n * n + 2 * n + 1,) * 2)
            k[: n * n, : n * n] = h
            k[: n * n, n * n : n * n + n] = ee.T
            k[: n * n, n * n + n : n * n + 2 * n] = lr.T
            k[n * n : n * n + n, : n * n] = ee
            k[n * n + n : n * n + 2 * n, : n * n] = lr
            k[n * n + n : n * n + 2 * n, n * n + n : n * n + 2 * n] = -np.diag(1.0 / dl)
            k[n * n + n : n * n + 2 * n, -1] = -1.0
            k[-1, n * n + n : n * n + 2 * n] = 1.0
            sol = np.linalg.solve(k, np.r_[f.ravel(), e, g4, g5])
            assert sq == pytest.approx(sol[n * n + n : n * n + 2 * n], abs=1e-8)
            assert st == pytest.approx(sol[-1], abs=1e-8)
        else:
            k = np.block([[h, ee.T], [ee, np.zeros((n, n))]])
            sol = np.linalg.solve(k, np.r_[f.ravel(), e])
        assert sx.ravel() == pytest.approx(sol[: n * n], abs=1e-8)
        assert sy == pytest.approx(sol[n * n : n * n + n], abs=1e-8)
    assert REGULARISATION < 1e-10


def test_underflowing_rows_are_left_out_and_the_result_still_audits():
    # eps d up to ~2000: exp(-eps d) underflows to 0 for the far pairs (row -M[v,w] <= 0,
    # the bound M >= 0), nothing is capped, the interior point stays finite and the exact
    # finish audits at eps. The far pairs' rows allow ratios e^2000, so the optimum is
    # that of each near pair alone, d / (1 + e^(eps d)) (up to e^-2000)
    space = MetricSpace.from_points(np.array([[0.0], [1.0], [400.0], [401.0]]))
    d = np.asarray(space.distances, dtype=np.float64)
    lp = _LP(d, 5.0, _off(4), d, None)
    assert lp.a[0, 2] == 0.0 and lp.mask[0, 0, 2] == 0.0 and lp.a[0, 1] > 0
    got = solve_ipm(d, 5.0, _off(4), d, None, tol=1e-9)
    assert got.converged and np.isfinite(got.matrix).all()
    assert got.objective == pytest.approx(1.0 / (1.0 + math.exp(5.0)), rel=1e-7)
    m = optimal(space, 5.0, formulation="block-ipm")
    assert_private(m)


def test_separate_output_set():
    g = np.random.default_rng(11)
    space = MetricSpace.from_points(g.normal(size=(5, 2)))
    ys = OutputSet.from_points(space, g.normal(size=(3, 2)))
    for objective, prior in (("worst", None), ("expected", g.dirichlet(np.ones(5)))):
        fast = optimal(space, 1.0, outputs=ys, objective=objective, prior=prior)
        ipm = optimal(space, 1.0, outputs=ys, objective=objective, prior=prior, formulation="block-ipm")
        assert ipm.matrix.shape == (5, 3)
        assert ipm.info["lp"]["objective"] == pytest.approx(fast.info["lp"]["objective"], rel=1e-9, abs=1e-12)
        assert_private(ipm)


def test_progress_memory_check_and_seeds(monkeypatch):
    _, d = _space(3, 6)
    calls: list[tuple[int, int | None, str]] = []
    point = solve_ipm(d, 1.0, _off(6), d, None, progress=lambda *a: calls.append(a))
    assert [c[0] for c in calls] == list(range(point.iterations + 1))
    assert all(c[1] is not None and "interior point iteration" in c[2] for c in calls)
    pu, pv = np.nonzero(_off(6))
    seeds = seed_rows(point, pu, pv)
    assert seeds.shape == (len(pu), 6) and 0 < seeds.sum() < seeds.size
    assert ipm_bytes(400, 400) > 5e9  # n = 400 needs gigabytes: refused under a small limit
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "10kB")
    with pytest.raises(ResourceLimitError, match="interior-point method"):
        solve_ipm(d, 1.0, _off(6), d, None)


@pytest.mark.parametrize("eps", EPSILONS)
def test_block_ipm_fast_and_full_agree_and_audit(eps):
    # three paths to one LP optimum (the interior point + simplex finish, constraint
    # generation, every row at once) on random spaces, expected loss with a skewed prior
    # (the regime auto sends to block-ipm), all to 1e-9 and all audited at eps
    i = EPSILONS.index(eps)
    n = 5 + i % 2
    space, _ = _space(40 + i, n)
    prior = np.random.default_rng(40 + i).dirichlet(np.full(n, 0.5))
    forms = ("block-ipm", "fast", "full")
    got = {f: optimal(space, eps, objective="expected", prior=prior, formulation=f) for f in forms}
    ref = got["full"].info["lp"]["objective"]
    for f, mech in got.items():
        assert mech.info["lp"]["formulation"] == f
        assert mech.info["lp"]["objective"] == pytest.approx(ref, rel=1e-9, abs=1e-12), f
        assert_private(mech)


def test_step_to_the_boundary_by_hand():
    # v + a dv >= 0: the largest a in (0, 1] is min over dv < 0 of v / -dv (or 1)
    v = np.array([1.0, 2.0, 0.5])
    assert _ratio(v, np.array([-4.0, 1.0, -0.25])) == pytest.approx(0.25)  # 1 / 4 from the first entry
    assert _ratio(v, np.array([1.0, -1.0, 0.0])) == 1.0  # 2 / 1 > 1: a full step
    assert _ratio(v, np.array([-1.0, -1.0, -1.0])) == pytest.approx(0.5)  # the last entry binds
    assert _ratio(np.zeros(0), np.zeros(0)) == 1.0


def test_blas_threads_are_limited_while_the_method_runs(monkeypatch):
    # the interior point runs with BLAS_THREADS BLAS threads (threadpoolctl) and gives
    # the pools back afterwards; the iterates are the same whatever the thread count
    import threadpoolctl  # a core dependency
    seen: list[int] = []
    original = _Factor.__init__

    def spy(self, *args, **kwargs):
        seen.extend(p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas")
        original(self, *args, **kwargs)

    monkeypatch.setattr(_Factor, "__init__", spy)
    _, d = _space(5, 5)
    before = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    got = solve_ipm(d, 1.0, _off(5), d, None, tol=1e-9)
    assert seen and set(seen) == {BLAS_THREADS}
    assert [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"] == before
    monkeypatch.setattr("metricdp.lp.ipm.BLAS_THREADS", 2)
    again = solve_ipm(d, 1.0, _off(5), d, None, tol=1e-9)
    assert again.objective == pytest.approx(got.objective, rel=1e-12)



def test_auto_formulation_follows_the_measured_regimes():
    from metricdp.mechanisms.lp_plan import AUTO_BLOCK_IPM_MIN_N, auto_formulation

    n = AUTO_BLOCK_IPM_MIN_N
    assert auto_formulation(n, expected=True, square=True) == "block-ipm"
    assert auto_formulation(n - 1, expected=True, square=True) == "fast"
    assert auto_formulation(n, expected=True, square=False) == "fast"
    # the worst case stays on fast at every size (its tie-break: a lower mean row loss)
    assert {auto_formulation(k, expected=False, square=True) for k in (n, 100, 200, 400)} == {"fast"}
