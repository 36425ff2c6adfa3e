"""Output-column generation for OPTMech's expected loss (lp/colgen.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ResourceLimitError, SolverTimeLimitError, ValidationError
from metricdp.lp import colgen
from metricdp.lp.colgen import cover, covers, laplace_screen, shortfall, start_outputs
from metricdp.lp.deadline import Deadline
from metricdp.mechanisms.optimal import optimal
from metricdp.outputs import OutputSet
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private

EPSILONS = (0.1, 0.5, 1.0, 3.0, 10.0)


def _grid(side: int) -> MetricSpace:
    pts = np.array([(i, j) for i in range(side) for j in range(side)], dtype=np.float64)
    return MetricSpace.from_distances(np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1)))


def random_distances(seed: int, n: int) -> np.ndarray:
    """The Euclidean distances of ``n`` standard normal points in the plane (seeded)."""
    pts = np.random.default_rng(seed).normal(size=(n, 2))
    return np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))


def random_pricing(seed: int, n: int, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """A pricing instance: the cone's factors e^(lam d) on :func:`random_distances` and a reduced-cost vector g
    of either sign (seeded)."""
    rng = np.random.default_rng(seed)
    return np.exp(lam * random_distances(seed, n)), rng.normal(size=n) + rng.uniform(-1, 2)


def _cone_min(g: np.ndarray, factor: np.ndarray) -> float:
    """min g.m over the cone {m >= 0: m_u <= f_uv m_v} with sum m = 1 (every row, scipy's HiGHS)."""
    n = g.size
    u, v = np.nonzero(~np.eye(n, dtype=bool))
    a = np.zeros((u.size, n))
    a[np.arange(u.size), u] = 1.0
    a[np.arange(u.size), v] = -factor[u, v]
    res = scipy.optimize.linprog(g, A_ub=a, b_ub=np.zeros(u.size), A_eq=np.ones((1, n)), b_eq=[1.0],
                                 bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("side", [3, 4])
@pytest.mark.parametrize("eps", EPSILONS)
def test_grids_with_priors_match_the_full_lp(side, eps):
    # the acceptance test of the brief: the full LP (every row at once) and column
    # generation agree to 1e-9 on grids with random Dirichlet(0.5) priors, and both audit
    space = _grid(side)
    prior = np.random.default_rng(side * 100 + int(eps * 10)).dirichlet(np.full(space.n, 0.5))
    got = {f: optimal(space, eps, objective="expected", prior=prior, formulation=f)
           for f in ("full", "column-generation")}
    ref = got["full"].info["lp"]["objective"]
    for f, mech in got.items():
        assert mech.info["lp"]["formulation"] == f and "fallback" not in mech.info["lp"]
        assert mech.info["lp"]["objective"] == pytest.approx(ref, rel=1e-9, abs=1e-12), f
        assert mech.info["loss"]["expected"] == pytest.approx(got["full"].info["loss"]["expected"], rel=1e-9,
                                                              abs=1e-12)
        assert_private(mech)


@pytest.mark.parametrize("eps", [0.3, 3.0])
def test_five_by_five_grid_and_random_points(eps):
    # a larger grid (few outputs carry mass) and a space with no collinear points
    for space in (_grid(5), MetricSpace.from_distances(random_distances(7, 12))):
        prior = np.random.default_rng(5).dirichlet(np.full(space.n, 0.5))
        ref = optimal(space, eps, objective="expected", prior=prior, formulation="full")
        cg = optimal(space, eps, objective="expected", prior=prior, formulation="column-generation")
        assert cg.info["lp"]["objective"] == pytest.approx(ref.info["lp"]["objective"], rel=1e-9, abs=1e-12)
        assert_private(cg)


def test_shortfall_by_hand():
    # two points at distance 1: a deficit of 1 at node 0 is covered by node 1 at the price
    # f = e^eps, so the surplus a covers a / f of it: shortfall max(0, 1 - a / f)
    f = math.exp(0.7)
    factor = np.array([[1.0, f], [f, 1.0]])
    assert shortfall(np.array([-1.0, f / 2]), factor) == pytest.approx(0.5, rel=1e-12)
    assert shortfall(np.array([-1.0, 2 * f]), factor) == 0.0
    assert shortfall(np.array([0.0, 3.0]), factor) == 0.0  # no deficit
    assert shortfall(np.array([-1.0, -2.0]), factor) == 3.0  # no surplus
    # the pricing value by hand: the cone's extreme columns are (1, e^-0.7) and (e^-0.7, 1)
    g = np.array([-1.0, f / 2])
    assert _cone_min(g, factor) == pytest.approx(min(g @ [1, 1 / f], g @ [1 / f, 1]) / (1 + 1 / f))
    assert _cone_min(g, factor) < 0


def test_pricing_stops_at_the_builds_time_limit():
    # the exact pricing's flow LPs run under the build's deadline: a clock past the limit
    # stops it with the typed error instead of pricing on (it once ignored the limit)
    rng = np.random.default_rng(3)
    factor = np.exp(1.0 * random_distances(3, 6))
    g = rng.normal(size=(6, 4)) - 0.5
    ticks = iter([0.0, 0.0, 10.0, 10.0, 10.0, 10.0, 10.0])
    with pytest.raises(SolverTimeLimitError, match="pricing"):
        covers(g, factor, deadline=Deadline(1.0, clock=lambda: next(ticks)))
    assert [c.shortfall for c in covers(g, factor, deadline=Deadline(60.0))] == [c.shortfall for c in covers(g, factor)]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 7), st.floats(0.05, 5.0))
def test_shortfall_is_an_exact_pricing_certificate(seed, n, lam):
    # oracle: the pricing LP over the cone with every row. The shortfall s certifies
    # min_{m in C, sum m = 1} g.m >= -s, and is 0 exactly when that minimum is >= 0
    factor, g = random_pricing(seed, n, lam)
    s = shortfall(g, factor)
    value = _cone_min(g, factor)
    assert value >= -s - 1e-9
    if s > 1e-9:
        assert value < 0
    if value < -1e-9:
        assert s > 0
    if s == 0.0:
        assert value >= -1e-9


def test_laplace_columns_lie_in_the_cone_and_screen():
    d = random_distances(3, 6)
    kernel = np.exp(-np.minimum(0.8 * d, 20.0))
    factor = np.exp(np.minimum(0.8 * d, 20.0))
    assert np.all(kernel[:, None, :] <= factor[:, :, None] * kernel[None, :, :] * (1 + 1e-12))
    g = np.zeros((6, 6))
    g[2, 2] = -1.0  # only output 2 has a deficit, at its own centre
    screen = laplace_screen(g, kernel)
    assert screen[2] == pytest.approx(-1.0 / kernel[:, 2].sum()) and np.all(np.delete(screen, 2) <= 0)


def test_start_outputs_by_hand():
    # a line of 3 points, loss = distance: the Laplace-shaped mechanism's outputs remapped
    # to the posterior median; with the prior on the ends, each end's own output stays there
    d = np.abs(np.subtract.outer(np.arange(3.0), np.arange(3.0)))
    kernel = np.exp(-1.0 * d)
    assert start_outputs(np.full(3, 1 / 3), d, kernel).tolist() == [0, 1, 2]
    # posterior of output 0 (by hand): joint pi_u M[u, 0] = (0.5/z0, 0, 0.5 e^-2/z2) with
    # z0 = z2 = 1 + e^-1 + e^-2: its median is input 0; output 1's joint is symmetric, so
    # its expected loss is 1 at 0, 1 and 2 alike, and argmin takes the first (0)
    prior = np.array([0.5, 0.0, 0.5])
    assert start_outputs(prior, d, kernel).tolist() == [0, 2]
    # a flat kernel (eps -> 0): one posterior for all outputs, one median
    assert start_outputs(np.array([0.1, 0.6, 0.3]), d, np.ones((3, 3))).tolist() == [1]


def test_sparse_cover_is_valid_and_falls_back_to_every_arc(monkeypatch):
    # deficit 1 at 0; surpluses at 1 (price e) and 2 (price e^2), each able to pay for
    # half of it: one nearest arc leaves a shortfall of 0.5 that every arc removes
    # (the greedy flow, which would cover it first, finds nothing here)
    none = (np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0))
    monkeypatch.setattr(colgen, "greedy_flow", lambda *a: none)
    d = np.abs(np.subtract.outer(np.arange(3.0), np.arange(3.0)))
    factor = np.exp(d)
    g = np.array([-1.0, 0.5 * math.e, 0.5 * math.e**2])
    c = cover(g, factor, tol=0.0, nearest=1)
    assert c.shortfall <= 1e-12
    assert sorted(c.surplus.tolist()) == [1, 2]
    # the flow is feasible: caps of the deficit and of the surpluses (with their prices)
    assert np.bincount(c.deficit, weights=c.flow, minlength=3)[0] <= 1.0
    used = np.bincount(c.surplus, weights=factor[c.deficit, c.surplus] * c.flow, minlength=3)
    assert np.all(used[1:] <= g[1:] * (1 + 1e-12))
    # with a tolerance the sparse flow (shortfall 0.5) is accepted as it is
    assert cover(g, factor, tol=0.6, nearest=1).shortfall == pytest.approx(0.5, rel=1e-9)


def test_refusals_progress_and_memory(monkeypatch):
    space = _grid(3)
    with pytest.raises(ValidationError, match="expected objective on a square space"):
        optimal(space, 1.0, formulation="column-generation")
    pts = MetricSpace.from_points(np.random.default_rng(2).normal(size=(4, 2)))
    with pytest.raises(ValidationError, match="expected objective on a square space"):
        optimal(pts, 1.0, objective="expected", formulation="column-generation",
                outputs=OutputSet.from_points(pts, [[0.0, 0.0], [1.0, 1.0]]))
    calls: list[str] = []
    optimal(space, 1.0, objective="expected", formulation="column-generation", progress=lambda *a: calls.append(a[2]))
    assert calls and "exact finish" in calls[-1] and "0 improving" in calls[-1]
    # memory: the interior point on k of n outputs needs k / n of the full method's
    assert colgen.colgen_bytes(400, 100) == pytest.approx(colgen.ipm_bytes(400, 100) + 96 * 400**2)
    assert colgen.colgen_bytes(400, 400) > 7e9
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "2kB")
    with pytest.raises(ResourceLimitError, match="column generation"):
        optimal(space, 1.0, objective="expected", formulation="column-generation")


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("n", [4, 8])
def test_exact_rational_optimum(n, eps):
    # against the exact rational optimum of the full LP (tests/lp/exact_lp.py):
    # never below it (the result is private) and within 1e-10 relative above it
    from tests.lp.exact_lp import exact_optimum
    from tests.lp.test_exact import small_space

    seed = 100 * n + int(10 * eps)
    s = small_space(seed, n)
    prior = np.random.default_rng(seed).dirichlet(np.full(n, 0.5))
    exact = float(exact_optimum(s.distances, eps, prior=prior).value)
    m = optimal(s, eps, objective="expected", prior=prior, formulation="column-generation")
    got = m.expected_loss(prior)
    assert exact * (1 - 1e-12) <= got <= exact * (1 + 1e-10), (got - exact) / exact
    assert_private(m)


def test_bench_lp_runs_the_formulation():
    # `metricdp bench lp --formulations column-generation` (its --quick size)
    from metricdp.experiments.bench_lp import run_bench

    rows = run_bench([9], ["optimal-expected"], ["full", "column-generation"], epsilons=[0.5], data="grid",
                     time_limit=60, certify=60)
    assert [r.formulation for r in rows] == ["full", "column-generation"]
    for r in rows:
        assert r.status == "ok", r.message
        assert r.epsilon_audit <= r.epsilon * (1 + 1e-9)
    assert rows[1].objective == pytest.approx(rows[0].objective, rel=1e-9)


@pytest.mark.parametrize("eps", [0.3, 3.0])
def test_a_poor_first_working_set_grows_to_the_full_optimum(monkeypatch, eps):
    # one output to start with (the worst: a corner, far from the prior's mass): the
    # pricing must add the outputs the optimum uses, in interior-point rounds and/or after
    # an exact finish, and reach the full LP's optimum
    space = _grid(4)
    prior = np.random.default_rng(11).dirichlet(np.full(space.n, 0.5))
    corner = int(np.argmax(space.distances @ prior))
    monkeypatch.setattr(colgen, "start_outputs", lambda *a: np.array([corner], dtype=np.intp))
    calls: list[str] = []
    cg = optimal(space, eps, objective="expected", prior=prior, formulation="column-generation",
                 progress=lambda *a: calls.append(a[2]))
    ref = optimal(space, eps, objective="expected", prior=prior, formulation="full")
    assert cg.info["lp"]["objective"] == pytest.approx(ref.info["lp"]["objective"], rel=1e-9, abs=1e-12)
    rounds = [c for c in calls if "column round" in c]
    assert "1 outputs" in rounds[0] and "0 improving" not in rounds[0]
    assert cg.info["lp"]["rounds"] >= 2
    assert_private(cg)


@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_the_build_carries_a_certified_bound(eps):
    # the restricted finish's duals and the pricing flows are multipliers of the full LP:
    # a lower bound on its optimum within 1e-9 of the objective (weak duality), and never
    # above the full LP's optimum
    space = _grid(5)
    prior = np.random.default_rng(3).dirichlet(np.full(space.n, 0.5))
    cg = optimal(space, eps, objective="expected", prior=prior, formulation="column-generation")
    ref = optimal(space, eps, objective="expected", prior=prior, formulation="full")
    bound = cg.info["lp"]["dual_bound"]
    loss = cg.expected_loss(prior)
    assert bound <= ref.expected_loss(prior) * (1 + 1e-12)
    assert 0 <= (loss - bound) / bound <= 1e-9
    # fewer outputs than the space has: the method's point
    assert (cg.matrix.sum(axis=0) > 0).sum() < space.n


def test_tiny_deficits_are_left_in_the_shortfall():
    # a deficit below tol / (2 n) is not shipped but counted: the shortfall stays a bound
    d = np.abs(np.subtract.outer(np.arange(3.0), np.arange(3.0)))
    factor = np.exp(d)
    g = np.array([-1e-12, -1.0, 10.0])
    c = cover(g, factor, tol=1e-9)
    assert c.shortfall == pytest.approx(1e-12, rel=1e-6, abs=1e-15)  # node 1 covered, node 0 left
    assert 0 not in c.deficit.tolist()
    assert cover(g, factor, tol=0.0).shortfall <= 1e-15  # tol 0: every deficit shipped


def test_six_by_six_grid_matches_the_full_lp():
    # the size where the expected loss's optimum first leaves most outputs empty at a small eps
    # (few columns in the working set) and the finish's seeded simplex has thousands of rows
    space = _grid(6)
    prior = np.random.default_rng(6).dirichlet(np.full(space.n, 0.5))
    ref = optimal(space, 0.3, objective="expected", prior=prior, formulation="full")
    cg = optimal(space, 0.3, objective="expected", prior=prior, formulation="column-generation")
    assert cg.info["lp"]["formulation"] == "column-generation" and "fallback" not in cg.info["lp"]
    assert cg.info["lp"]["objective"] == pytest.approx(ref.info["lp"]["objective"], rel=1e-9, abs=1e-12)
    assert cg.info["lp"]["dual_bound"] <= cg.info["lp"]["objective"]
    assert cg.info["lp"]["objective"] - cg.info["lp"]["dual_bound"] <= 1e-9 * cg.info["lp"]["objective"]
    assert_private(cg)
