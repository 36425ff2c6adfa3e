"""ConstOPTMech (Imola et al., UAI 2022, Algorithm 1) and its exact normalised fit.

Oracles: hand-derived values on 2-point and line spaces, OPTMech solved naively (dense
``scipy.optimize.linprog``), the paper's reduced LP written naively (dense, one Python
loop per row family) for the LP optima, the plain bisection (``formulation="full"``)
for the fractional program, and the naive audit of ``tests/helpers.py``.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from metricdp.errors import SolverError, ValidationError
from metricdp.mechanisms.lp.constopt import constopt
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, random_space

from .conftest import glove_space

co = importlib.import_module("metricdp.mechanisms.lp.constopt")
cone_mod = importlib.import_module("metricdp.mechanisms.lp.constopt.cone")
fast_mod = importlib.import_module("metricdp.mechanisms.lp.constopt.fast")
fit_mod = importlib.import_module("metricdp.mechanisms.lp.constopt.fit")
reference_mod = importlib.import_module("metricdp.mechanisms.lp.constopt.reference")
replacement_mod = importlib.import_module("metricdp.mechanisms.lp.constopt.replacement")


def em_matrix(d: np.ndarray, epsilon: float) -> np.ndarray:
    """The exponential mechanism at epsilon (inner epsilon / 2), closed form."""
    k = np.exp(-epsilon / 2 * d)
    return k / k.sum(axis=1, keepdims=True)


def loss(m: np.ndarray, d: np.ndarray) -> np.ndarray:
    return (m * d).sum(axis=1)


def quantile95(values: np.ndarray) -> float:
    return float(np.sort(values)[math.ceil(0.95 * len(values) - 1e-9) - 1])


def opt_worst_case(d: np.ndarray, epsilon: float) -> float:
    """OPTMech (worst case) by a dense linprog: variables M (row-major) and k."""
    n = len(d)
    nv = n * n + 1
    rows, rhs = [], []
    for u in range(n):  # sum_v d(u,v) M[u,v] - k <= 0
        r = np.zeros(nv)
        r[u * n : (u + 1) * n] = d[u]
        r[-1] = -1
        rows.append(r)
        rhs.append(0.0)
    for u in range(n):
        for v in range(n):
            if u == v:
                continue
            for w in range(n):  # M[u,w] - e^{eps d(u,v)} M[v,w] <= 0
                r = np.zeros(nv)
                r[u * n + w] = 1
                r[v * n + w] = -math.exp(epsilon * d[u, v])
                rows.append(r)
                rhs.append(0.0)
    eq = np.zeros((n, nv))
    for u in range(n):
        eq[u, u * n : (u + 1) * n] = 1
    c = np.zeros(nv)
    c[-1] = 1
    res = linprog(c, A_ub=np.array(rows), b_ub=rhs, A_eq=eq, b_eq=np.ones(n), bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def naive_paper_lp(d: np.ndarray, free: np.ndarray, level: float, lam: float) -> float:
    """The paper's reduced LP (Theorem 1 proof) written out naively, dense: optimum k."""
    n = len(d)
    pairs = [(u, w) for w in range(n) for u in range(n) if free[u, w]]
    index = {p: n + i for i, p in enumerate(pairs)}
    nv = n + len(pairs) + 1

    def entry(u: int, w: int) -> dict[int, float]:  # M_full[u, w] as a linear form
        return {index[(u, w)]: 1.0} if free[u, w] else {w: math.exp(-level * d[u, w])}

    rows, rhs = [], []

    def add(coefs: dict[int, float], b: float) -> None:
        r = np.zeros(nv)
        for j, val in coefs.items():
            r[j] += val
        rows.append(r)
        rhs.append(b)

    for w in range(n):
        eighteen: dict[int, float] = {nv - 1: -1.0}
        twenty: dict[int, float] = {}
        for v in range(n):
            for j, val in entry(w, v).items():
                eighteen[j] = eighteen.get(j, 0.0) + val * (d[w, v] + lam)
                twenty[j] = twenty.get(j, 0.0) - val
        add(eighteen, 0.0)  # (18)
        add(twenty, -1.0)  # (20): row sum >= 1
    for w in range(n):
        inside = [u for u in range(n) if free[u, w]]
        outside = [x for x in range(n) if not free[x, w]]
        for u in inside:
            for v in inside:
                if u != v:  # (22)
                    add({index[(u, w)]: 1.0, index[(v, w)]: -math.exp(level * d[u, v])}, 0.0)
            if outside:  # (25) and (26)
                hi = min(math.exp(level * (d[u, x] - d[x, w])) for x in outside)
                lo = max(math.exp(-level * (d[x, w] + d[x, u])) for x in outside)
                add({index[(u, w)]: 1.0, w: -hi}, 0.0)
                add({w: lo, index[(u, w)]: -1.0}, 0.0)
    c = np.zeros(nv)
    c[-1] = 1
    bounds = [(0, None)] * (nv - 1) + [(None, None)]
    res = linprog(c, A_ub=np.array(rows), b_ub=rhs, bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def black_hole(n: int) -> MetricSpace:
    """One point at distance 1 from n - 1 points that are within 1e-3 of each other."""
    x = np.linspace(0.0, 1e-3, n - 1)
    d = np.zeros((n, n))
    d[: n - 1, : n - 1] = np.abs(x[:, None] - x[None, :])
    d[-1, :-1] = d[:-1, -1] = 1.0
    return MetricSpace.from_distances(d)


# --------------------------------------------------------------------------- replacement
def test_nearest_neighbour_replacement_on_a_line() -> None:
    # positions 0, 1, 3, 7: nearest of 0 is 1; of 1 is 0 (d=1 < 2); of 3 is 1; of 7 is 3
    space = MetricSpace.from_points([[0.0], [1.0], [3.0], [7.0]])
    rows, cols = co.nearest_neighbour_replacement(space, 1)
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == [(0, 1), (1, 0), (2, 1), (3, 2)]
    rows, cols = co.nearest_neighbour_replacement(space, 2)
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == [
        (0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1), (3, 1), (3, 2)
    ]


def test_nearest_neighbour_ties_break_by_index() -> None:
    space = MetricSpace.from_points([[0.0], [-1.0], [1.0]])  # 1 and 2 tie for point 0
    rows, cols = co.nearest_neighbour_replacement(space, 1)
    assert cols[rows == 0].tolist() == [1]


def test_user_replacement_mask_and_pairs_agree() -> None:
    space = random_space(3, 7)
    rows, cols = co.nearest_neighbour_replacement(space, 2)
    mask = np.zeros((7, 7), dtype=bool)
    mask[rows, cols] = True
    a = constopt(space, 1.0, replacement=mask, fit="paper")
    b = constopt(space, 1.0, replacement=(rows, cols), fit="paper")
    c = constopt(space, 1.0, neighbours=2, fit="paper")
    assert np.array_equal(a.matrix, b.matrix) and np.array_equal(a.matrix, c.matrix)
    assert a.params["replacement"] == "user" and c.params["replacement"] == "nearest_neighbours"


def test_user_replacement_with_free_diagonal_and_free_column_is_private() -> None:
    space = random_space(4, 6)
    mask = np.zeros((6, 6), dtype=bool)
    mask[:, 0] = True  # column 0 entirely free: no fixed entry, no Y_0
    mask[2, 2] = mask[3, 4] = True  # a free diagonal entry
    for fit in ("paper", "normalised"):
        mech = constopt(space, 0.7, replacement=mask, fit=fit)
        assert_private(mech)
        assert mech.worst_case_loss() <= loss(em_matrix(space.distances, 0.7), space.distances).max() + 1e-9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"fit": "exact"}, "fit"),
        ({"formulation": "plain"}, "formulation"),
        ({"lambdas": [0.1, -1.0]}, "lambda"),
        ({"lambdas": [float("nan")]}, "lambda"),
        ({"lambdas": "abc"}, "lambdas"),
        ({"lambdas": [], "fit": "paper"}, "at least one lambda"),
        ({"quantile": 1.5}, "quantile"),
        ({"neighbours": 2.5}, "neighbours"),
        ({"neighbours": -1}, "neighbours"),
        ({"calibrate": "yes"}, "calibrate"),
        ({"time_limit": 0}, "time_limit"),
        ({"replacement": np.ones((5, 5))}, "boolean"),
        ({"replacement": np.ones((4, 4), dtype=bool)}, r"shape \(5, 5\)"),
        ({"replacement": ([0, 1], [1])}, "differ in length"),
        ({"replacement": ([0, 7], [1, 2])}, r"entry 1 = \(7, 2\)"),
        ({"replacement": ([0.5], [1.0])}, "integer"),
        ({"replacement": "nn"}, "replacement must be"),
    ],
)
def test_bad_arguments_name_the_culprit(kwargs: dict, match: str) -> None:
    space = random_space(0, 5)
    args = {"epsilon": 1.0, **kwargs}
    eps = args.pop("epsilon")
    with pytest.raises(ValidationError, match=match):
        constopt(space, eps, **args)


def test_space_must_be_a_metric_space() -> None:
    with pytest.raises(ValidationError, match="MetricSpace"):
        constopt(np.eye(3), 1.0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- hand-derived values
@pytest.mark.parametrize("fit", ["paper", "normalised"])
def test_two_points_equal_the_exponential_mechanism(fit: str) -> None:
    # n = 2, r = 1: column w has one free entry m in [Y_w e^{-eps'}, Y_w e^{eps'}] (rows
    # (25), (26)). Row 0 loses m01 / (Y0 + m01) >= rho e^{-eps'} / (1 + rho e^{-eps'}) with
    # rho = Y1/Y0, row 1 symmetrically; the max is smallest at rho = 1: 1 / (1 + e^{eps/2}),
    # the loss of the exponential mechanism at eps (and of OPTMech at eps/2).
    eps = 1.3
    space = MetricSpace.from_distances([[0.0, 2.0], [2.0, 0.0]])
    mech = constopt(space, eps, neighbours=1, fit=fit)
    assert mech.worst_case_loss() == pytest.approx(2.0 / (1.0 + math.exp(eps)), rel=1e-9)
    assert mech.info["winner"] == "exponential"  # a tie is resolved towards the closed form
    assert_private(mech)


def test_without_the_exponential_candidate_the_paper_fit_is_returned() -> None:
    # seed 1, eps 0.5, lambda 250: the paper fit loses to EM (measured 1.52 vs 1.68), so the
    # default returns EM; without the EM candidate the paper point itself comes back, private.
    space = MetricSpace.from_points(np.random.default_rng(1).normal(size=(8, 2)))
    kwargs = dict(neighbours=2, fit="paper", lambdas=(250.0,))
    default = constopt(space, 0.5, **kwargs)
    pure = constopt(space, 0.5, exponential_candidate=False, **kwargs)
    assert default.info["winner"] == "exponential"
    assert pure.info["winner"] == "paper" and pure.params["exponential_candidate"] is False
    assert pure.worst_case_loss() > default.worst_case_loss()
    assert pure.worst_case_loss() == pytest.approx(pure.info["losses"]["paper"]["250.0"], rel=1e-4)
    assert_private(pure)
    with pytest.raises(ValidationError, match="exponential_candidate"):
        constopt(space, 0.5, exponential_candidate="no")  # type: ignore[arg-type]


def test_a_failed_paper_lp_is_a_solver_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # measured on GloVe (n = 200, r = 3, eps 4, lambda 50): HiGHS calls the paper LP
    # unbounded; with EM left out there is nothing to return, and the error says why
    import dataclasses
    import importlib

    mod = importlib.import_module("metricdp.mechanisms.lp.constopt.fast")
    solve = mod.FastModel.paper

    def unbounded(self, lam):  # type: ignore[no-untyped-def]
        r = solve(self, lam)
        return dataclasses.replace(r, success=False, status=3, message="LP is unbounded", x=None, objective=None)

    monkeypatch.setattr(mod.FastModel, "paper", unbounded)
    space = MetricSpace.from_points(np.random.default_rng(1).normal(size=(8, 2)))
    with pytest.raises(SolverError, match=r"lambda 1\.0: LP is unbounded.*exponential_candidate=False"):
        constopt(space, 1.0, neighbours=2, fit="paper", lambdas=(1.0,), exponential_candidate=False)
    # with EM as a candidate, EM is not handed back in the fit's place either
    with pytest.raises(SolverError, match=r"lambda 1\.0: LP is unbounded.*not returned in its place silently"):
        constopt(space, 1.0, neighbours=2, fit="paper", lambdas=(1.0,))


def test_lp_counts_match_the_paper_on_a_line() -> None:
    # positions 0, 1, 3, 7, 15 (gaps double): the nearest neighbour of k >= 1 is k - 1, of 0
    # is 1. With r = 1: I(0) = {1}, I(1) = {0, 2}, I(2) = {3}, I(3) = {4}, I(4) = {}.
    space = MetricSpace.from_points([[0.0], [1.0], [3.0], [7.0], [15.0]])
    sizes = np.array([1, 2, 1, 1, 0])
    n = 5
    mech = constopt(space, 1.0, neighbours=1, fit="paper", lambdas=[0.1], formulation="full")
    lp = mech.info["lp"]
    expected = {
        "variables": n + int(sizes.sum()) + 1,  # Y, the free entries, k (Theorem 1)
        "free_entries": int(sizes.sum()),
        "rows_18": n,
        "rows_20": n,
        "rows_22": int((sizes * (sizes - 1)).sum()),  # ordered pairs within a column: 2
        "rows_25": int(sizes.sum()),  # every column has a fixed entry (its diagonal)
        "rows_26": int(sizes.sum()),
    }
    assert lp["paper_counts"] == expected
    # the full formulation solves exactly that LP
    assert lp["variables"] == expected["variables"]
    assert lp["constraints"] == 2 * n + expected["rows_22"] + 2 * expected["rows_25"]
    assert lp["lps_solved"] == 1


def test_lp_counts_follow_corollary_1_for_nearest_neighbours() -> None:
    # I_NN,r: sum_v |I(v)| = n r; (22) has sum_v |I(v)| (|I(v)| - 1) rows; |I(v)| counted
    # here independently of the library, from a plain argsort.
    space = random_space(11, 12, clustered=True)
    n, r = 12, 3
    order = np.argsort(space.distances, axis=1, kind="stable")[:, 1 : r + 1]
    sizes = np.bincount(order.ravel(), minlength=n)
    lp = constopt(space, 1.0, neighbours=r, fit="paper", lambdas=[0.1]).info["lp"]
    assert lp["paper_counts"]["variables"] == n + n * r + 1
    assert lp["paper_counts"]["rows_22"] == int((sizes * (sizes - 1)).sum())
    assert lp["paper_counts"]["rows_25"] == lp["paper_counts"]["rows_26"] == n * r
    # the fast model leaves out implied rows (22) and solves fewer
    assert lp["rows_22_solved"] <= lp["paper_counts"]["rows_22"] - lp["rows_22_implied"]


# --------------------------------------------------------------------------- oracles
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paper_lp_optimum_equals_the_naive_lp(seed: int) -> None:
    space = random_space(seed, 7, clustered=seed == 1)
    free = replacement_mod.free_mask(space, None, 2)
    for formulation in ("fast", "full"):
        mech = constopt(space, 1.0, neighbours=2, fit="paper", formulation=formulation)
        level = mech.info["lp_epsilon"]
        for lam, entry in mech.info["paper"].items():
            expected = naive_paper_lp(space.distances, free, level, float(lam))
            assert entry["objective"] == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("fit", ["paper", "normalised"])
def test_all_free_is_no_worse_than_optmech_at_half_epsilon(seed: int, fit: str) -> None:
    # r = n - 1: the optimal stochastic matrix at eps/2 is feasible (Y = its diagonal) and
    # normalising rows that sum to at least 1 only lowers the loss: normalised fit by
    # construction; paper fit since a_u / b_u <= a_u <= k - lambda b_u <= k - lambda <= OPT.
    # The LPs run at eps/2 (1 - eta) (tolerance repair), so compare with OPTMech there.
    n = 6
    space = random_space(seed, n, clustered=seed % 2 == 1)
    eps = 1.5
    mech = constopt(space, eps, neighbours=n - 1, fit=fit)
    level = mech.info["lp_epsilon"]
    assert eps / 2 * (1 - 1e-3) < level < eps / 2
    assert mech.worst_case_loss() <= opt_worst_case(space.distances, level) * (1 + 1e-7)
    assert_private(mech)


def test_black_hole_beats_the_exponential_mechanism() -> None:
    # Lemma 1 of the paper: EM sends the far point into the cluster (loss near 1), while the
    # LP can weight the far point's own column.
    space = black_hole(12)
    em = loss(em_matrix(space.distances, 1.0), space.distances)
    for fit in ("paper", "normalised"):
        mech = constopt(space, 1.0, neighbours=3, fit=fit)
        assert mech.worst_case_loss() < 0.9 * em.max()
        assert mech.info["winner"] != "exponential"
        assert_private(mech)


# --------------------------------------------------------------------------- properties
@settings(max_examples=30)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 8),
    eps=st.floats(0.2, 3.0),
    r=st.integers(0, 7),
    fit=st.sampled_from(["paper", "normalised"]),
    clustered=st.booleans(),
)
def test_audit_passes_and_never_worse_than_em(
    seed: int, n: int, eps: float, r: int, fit: str, clustered: bool
) -> None:
    space = random_space(seed, n, dim=3, clustered=clustered)
    mech = constopt(space, eps, neighbours=min(r, n - 1), fit=fit)
    assert_private(mech)
    assert mech.audit().epsilon <= eps * (1 + 1e-9)
    em = loss(em_matrix(space.distances, eps), space.distances).max()
    assert mech.worst_case_loss() <= em * (1 + 1e-12)


@settings(max_examples=20)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 9), eps=st.floats(0.3, 2.5), clustered=st.booleans())
def test_normalised_fit_is_never_worse_and_certified(seed: int, n: int, eps: float, clustered: bool) -> None:
    space = random_space(seed, n, dim=2, clustered=clustered)
    r = min(3, n - 1)
    paper = constopt(space, eps, neighbours=r, fit="paper")
    normalised = constopt(space, eps, neighbours=r)
    em = loss(em_matrix(space.distances, eps), space.distances).max()
    assert normalised.worst_case_loss() <= min(paper.worst_case_loss(), em) * (1 + 1e-12)
    # the bisection optimum: the final LP certified that no point of the family has
    # worst-case loss <= t (1 - tol); the plain feasibility LP agrees
    info = normalised.info["normalised"]
    assert info["certified"] and info["status"] == "certified"
    free = replacement_mod.free_mask(space, None, r)
    cone = cone_mod.build_cone(space.distances, free, normalised.info["lp_epsilon"])
    t = info["t"]
    assert reference_mod.infeasible(reference_mod.feasibility_lp(cone, t * (1 - fit_mod.FIT_RTOL)))
    assert reference_mod.feasibility_lp(cone, t * (1 + fit_mod.FIT_RTOL)).status == 0  # and t is attained


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_fast_and_full_formulations_agree(seed: int) -> None:
    space = random_space(seed, 10, clustered=seed % 2 == 0)
    for fit in ("paper", "normalised"):
        fast = constopt(space, 1.0, neighbours=3, fit=fit)
        full = constopt(space, 1.0, neighbours=3, fit=fit, formulation="full")
        for lam in fast.info["paper"]:  # the same LPs, solved to the same optimum
            assert fast.info["paper"][lam]["objective"] == pytest.approx(
                full.info["paper"][lam]["objective"], rel=1e-8
            )
        # equal or lower loss (up to the solvers' 1e-9 feasibility tolerance)
        assert fast.worst_case_loss() <= full.worst_case_loss() * (1 + 1e-8)
        assert fast.info["lp"]["lps_solved"] < full.info["lp"]["lps_solved"] or fit == "paper"


def test_quantile_selects_by_the_quantile() -> None:
    space = random_space(5, 20, clustered=True)
    mech = constopt(space, 1.0, neighbours=3, fit="paper", quantile=0.9)
    losses = mech.info["losses"]
    best = min([losses["exponential"], *[v for v in losses["paper"].values() if v is not None]])
    assert losses["returned"] == pytest.approx(best, rel=1e-6)
    assert mech.quantile_loss(0.9) == pytest.approx(losses["returned"], rel=1e-9)


def test_no_free_entries_is_a_weighted_exponential_mechanism() -> None:
    space = random_space(6, 8, clustered=True)
    mech = constopt(space, 1.0, neighbours=0)
    assert mech.info["lp"]["paper_counts"]["free_entries"] == 0
    assert_private(mech)
    assert mech.worst_case_loss() <= loss(em_matrix(space.distances, 1.0), space.distances).max()


# --------------------------------------------------------------------------- calibration, limits
def test_calibrate_passes_the_audit_and_does_not_lose() -> None:
    space = random_space(8, 8, clustered=True)
    plain = constopt(space, 1.0, neighbours=3)
    cal = constopt(space, 1.0, neighbours=3, calibrate=True)
    assert_private(cal)
    assert cal.worst_case_loss() <= plain.worst_case_loss() * (1 + 1e-12)
    info = cal.info["calibration"]
    assert 0.5 <= info["inner_epsilon"] <= 1.0 and info["epsilon_audit"] <= 1.0
    assert cal.params["calibrate"] is True


def test_time_limit_without_any_optimal_lp_is_a_solver_error() -> None:
    space = random_space(9, 120, dim=5)
    for fit in ("paper", "normalised"):
        with pytest.raises(SolverError, match="no LP reached optimality") as err:
            constopt(space, 1.0, fit=fit, time_limit=1e-6)
        assert err.value.status == "limit"
    with pytest.raises(SolverError, match="no LP reached optimality"):
        constopt(space, 1.0, lambdas=[], time_limit=1e-6)


def test_huge_epsilon_times_diameter_is_refused() -> None:
    space = MetricSpace.from_points([[0.0], [1.0], [800.0]])
    with pytest.raises(ValidationError, match="underflows"):
        constopt(space, 1.0)


# --------------------------------------------------------------------------- GloVe acceptance
@pytest.mark.slow
def test_glove_200_beats_the_exponential_mechanism_with_both_fits(glove200: MetricSpace) -> None:
    d = glove200.distances
    em = loss(em_matrix(d, 1.0), d)
    paper = constopt(glove200, 1.0, neighbours=10, fit="paper")
    normalised = constopt(glove200, 1.0, neighbours=10)
    for mech in (paper, normalised):
        assert mech.audit().epsilon <= 1.0
        assert mech.worst_case_loss() < em.max()
        assert mech.quantile_loss(0.95) < quantile95(em)
    assert normalised.worst_case_loss() <= paper.worst_case_loss()
    # the solver returns exact zeros (whole columns with Y_w = 0); the result is private anyway
    assert (normalised.matrix.max(axis=0) == 0).any()
    assert normalised.info["normalised"]["certified"]


def test_glove_sampler_is_deterministic_and_clustered() -> None:
    a, b = glove_space(30, seed=3), glove_space(30, seed=3)
    assert a.labels == b.labels and len(set(a.labels)) == 30
    assert a.labels != glove_space(30, seed=4).labels


def test_a_failed_spread_check_is_retried_at_a_larger_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    from metricdp.errors import RepairError

    # the reference formulation's envelope repair has the spread check (the fast one's
    # repair_free needs none: Theorem 2 bounds the row sums)
    space = random_space(12, 8, clustered=True)
    plain = constopt(space, 1.0, neighbours=3, formulation="full")
    calls: list[float] = []
    real = fit_mod.repair

    def flaky(matrix: np.ndarray, distances: np.ndarray, epsilon: float, *, eta: float) -> np.ndarray:
        calls.append(eta)
        if len(calls) == 1:
            raise RepairError("repair: row sums after the envelope spread by a factor ...", retryable=True)
        return real(matrix, distances, epsilon, eta=eta)

    monkeypatch.setattr(fit_mod, "repair", flaky)
    mech = constopt(space, 1.0, neighbours=3, formulation="full")
    assert calls[1] == pytest.approx(100 * calls[0]) and mech.info["eta"] == calls[1]
    assert_private(mech)
    assert mech.worst_case_loss() == pytest.approx(plain.worst_case_loss(), rel=1e-2)  # LP at a lower level


@pytest.mark.parametrize("fit", ["paper", "normalised"])
def test_negligible_terms_are_dropped_without_touching_privacy(fit: str) -> None:
    # a grid at a large epsilon: exp(-eps' d) < 1e-9 beyond about two cells
    space = MetricSpace.grid(5, 5)
    mech = constopt(space, 20.0, neighbours=4, fit=fit)
    assert mech.info["lp"]["dropped_terms"] > 0
    assert_private(mech)
    assert mech.worst_case_loss() <= loss(em_matrix(space.distances, 20.0), space.distances).max() * (1 + 1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_column_generation_reaches_the_full_lp_optimum(seed: int) -> None:
    # n = 60: the fast model starts from 20 outputs and prices the others in
    space = random_space(seed, 60, dim=3, clustered=seed == 1)
    fast = constopt(space, 1.0, neighbours=4)
    full = constopt(space, 1.0, neighbours=4, formulation="full")
    assert fast.info["lp"]["outputs_in_model"] < 60 <= full.info["lp"]["outputs_in_model"]
    for lam, entry in fast.info["paper"].items():
        assert entry["objective"] == pytest.approx(full.info["paper"][lam]["objective"], rel=1e-7)
    assert fast.worst_case_loss() <= full.worst_case_loss() * (1 + 1e-7)
    assert fast.info["normalised"]["certified"] and full.info["normalised"]["certified"]


@pytest.mark.parametrize("fit", ["paper", "normalised"])
def test_fast_formulation_repairs_without_the_cubic_envelope(monkeypatch: pytest.MonkeyPatch, fit: str) -> None:
    # repair_free lifts only the free entries (O(n^2)); the O(n^3) envelope is never run
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the O(n^3) envelope repair was called")

    space = black_hole(12)
    full = constopt(space, 1.0, neighbours=3, fit=fit, formulation="full")  # envelope repair on H
    monkeypatch.setattr(fit_mod, "repair", boom)
    mech = constopt(space, 1.0, neighbours=3, fit=fit)
    assert mech.info["winner"] == fit
    assert_private(mech)
    assert mech.worst_case_loss() <= full.worst_case_loss() * (1 + 1e-8)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 3.0, 10.0])
def test_fast_equal_or_better_across_epsilon(epsilon: float) -> None:
    """Issue 27: across the privacy range the fast paper fit is as good as the reference
    (equal or lower worst-case loss), and both pass the naive audit."""
    space = random_space(int(epsilon * 10), 9)
    fast = constopt(space, epsilon, neighbours=3, fit="paper")
    full = constopt(space, epsilon, neighbours=3, fit="paper", formulation="full")
    assert fast.worst_case_loss() <= full.worst_case_loss() * (1 + 1e-8)
    for mech in (fast, full):
        assert_private(mech)


@pytest.mark.parametrize(("epsilon", "seed"), [(0.5, 0), (3.0, 0), (3.0, 1)])
def test_sides_seeds_and_dense_regime_reach_the_full_lp_optimum(epsilon: float, seed: int) -> None:
    """Issue 27: n = 60, so the fast model prices blocks in (and, at eps = 3 on seed 0,
    switches to every block at once); every lambda's LP optimum equals the reference's
    (measured <= 3e-14 relative) and the returned loss is equal or lower."""
    space = random_space(seed, 60, dim=3, clustered=seed == 1)
    fast = constopt(space, epsilon, neighbours=4, fit="paper")
    full = constopt(space, epsilon, neighbours=4, fit="paper", formulation="full")
    for lam, entry in fast.info["paper"].items():
        assert entry["objective"] == pytest.approx(full.info["paper"][lam]["objective"], rel=1e-9)
    assert fast.worst_case_loss() <= full.worst_case_loss() * (1 + 1e-8)
    if (epsilon, seed) == (3.0, 0):
        assert fast.info["lp"]["outputs_in_model"] == 60  # the dense regime
    else:
        assert fast.info["lp"]["outputs_in_model"] < 60
    assert_private(fast)


def _fast_model(space: MetricSpace, epsilon: float, neighbours: int):  # type: ignore[no-untyped-def]
    from metricdp.mechanisms.lp.constopt.cone import build_cone
    from metricdp.mechanisms.lp.constopt.fast import FastModel
    from metricdp.mechanisms.lp.constopt.replacement import free_mask
    from metricdp.mechanisms.lp.constopt.stats import FitStats
    from metricdp.mechanisms.lp.deadline import Deadline

    cone = build_cone(space.distances, free_mask(space, None, neighbours), epsilon / 2)
    return FastModel(cone, Deadline(None), FitStats())


def test_fast_model_seeds_the_next_lambda_with_its_blocks_and_sides() -> None:
    space = random_space(2, 60, dim=3)
    model = _fast_model(space, 1.0, 4)
    r = model.paper(0.001)
    assert model.present.all()  # the dense regime: the only one that seeds the next lambda
    assert r.status == 0 and model.seed is not None
    blocks, up = model.seed
    x = model.point(r.x)
    used = np.flatnonzero(x[: space.n] > 0)
    assert set(used.tolist()) <= set(blocks.tolist())
    assert not up[~model.cone.bounded].any()
    # an entry is on the upper side iff the optimum put it nearer its row (25)
    f = np.flatnonzero(model.cone.bounded & (x[model.cone.fw] > 0))
    y = x[model.cone.fw[f]]
    nearer = x[space.n + f] - model.c26[f] * y > 0.5 * model.width[f] * y
    assert np.array_equal(up[f], nearer)
    model.paper(0.1)  # a fresh model on the seed: it starts from every seeded block
    assert model.present[blocks].all()
    # both sides describe the same point: T maps the model's variables back to (Y, z)
    z = model.point(model.lp.highs.getSolution().col_value)[space.n :]  # type: ignore[union-attr]
    yw = model.point(model.lp.highs.getSolution().col_value)[model.cone.fw]  # type: ignore[union-attr]
    b = model.cone.bounded
    assert np.all(z[b] >= model.c26[b] * yw[b] * (1 - 1e-7) - 1e-9)
    assert np.all(z[b] <= model.c25[b] * yw[b] * (1 + 1e-7) + 1e-9)


def test_fast_model_scales_only_moderate_rooms_and_normalises_rows_22() -> None:
    space = random_space(5, 30, dim=2)
    moderate = _fast_model(space, 1.0, 4)
    assert moderate.scaled
    capped = _fast_model(space, 80.0 / space.diameter, 4)  # eps' d beyond LOG_CAP: rooms e^20
    assert not capped.scaled
    pairs = np.flatnonzero(~moderate.cone.implied)
    rows = moderate._pairs(pairs)
    assert rows.shape[0] == len(pairs) > 0
    assert np.allclose(abs(rows).max(axis=1).toarray().ravel(), 1.0)
