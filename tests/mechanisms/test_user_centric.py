"""user-centric: Shokri's optimal strategy, against hand-computed optima, an independent
linprog formulation, and the mechanisms it must beat at equal quality loss."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from metricdp.adversary import adversary_error
from metricdp.audit import audit_epsilon
from metricdp.errors import InfeasibleError, ValidationError
from metricdp.mechanisms import build
from metricdp.mechanisms.user_centric import user_centric
from metricdp.spaces import MetricSpace

TWO = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
LINE3 = MetricSpace.from_points([[0.0], [1.0], [2.0]])


@pytest.mark.parametrize(("quality", "expected"), [(0.25, 0.25), (0.4, 0.4), (0.7, 0.5)])
def test_two_points_uniform_prior_hand_optimum(quality: float, expected: float) -> None:
    # AE <= quality loss (the adversary may guess the output) and AE <= 1/2 (guessing blind);
    # K = [[1-a, a], [a, 1-a]] with a = min(Q, 1/2) attains min(Q, 1/2) and is 2-mDP once
    # a >= 1 / (1 + e^2) = 0.119.
    m = user_centric(TWO, 2.0, quality=quality)
    assert m.info["adversary_error"] == pytest.approx(expected, abs=1e-8)
    assert m.info["quality_loss"] <= quality + 1e-8
    assert audit_epsilon(m.matrix, TWO.distances) <= 2.0


def test_two_points_below_the_eps_optimal_loss_is_infeasible() -> None:
    # the least expected loss of a 2-mDP mechanism on two points is 1 / (1 + e^2) = 0.1192
    with pytest.raises(InfeasibleError, match=r"no .*-mDP mechanism has expected quality loss <= 0\.1"):
        user_centric(TWO, 2.0, quality=0.1)
    assert user_centric(TWO, 2.0, quality=1 / (1 + math.e**2) + 1e-6).info["adversary_error"] > 0.119


def test_three_points_large_quality_reaches_the_blind_guess() -> None:
    # with Q beyond the prior-only error the optimum is that error: min_z sum_x pi(x) |x - z| = 2/3 (z = 1)
    m = user_centric(LINE3, 1.0, quality=5.0)
    assert m.info["adversary_error"] == pytest.approx(2 / 3, abs=1e-8)
    assert m.info["certificate"]["adversary_error_bound"] == pytest.approx(2 / 3, abs=1e-7)


def test_skewed_prior_two_points() -> None:
    # prior (0.8, 0.2): blind guess errs with probability 0.2, so AE* = min(Q, 0.2)
    for q, want in ((0.1, 0.1), (0.5, 0.2)):
        m = user_centric(TWO, 3.0, quality=q, prior=[0.8, 0.2])
        assert m.info["adversary_error"] == pytest.approx(want, abs=1e-8)


def _reference(d: np.ndarray, pi: np.ndarray, quality: float, eps: float) -> float:
    """The LP of the module docstring, written independently (dense, scipy linprog)."""
    n = len(pi)
    nv = n * n + n
    c = np.r_[np.zeros(n * n), -np.ones(n)]
    a_eq = np.zeros((n, nv))
    for x in range(n):
        a_eq[x, x * n:(x + 1) * n] = 1.0
    rows = []
    for w in range(n):
        for xh in range(n):
            r = np.zeros(nv)
            r[n * n + w] = 1.0
            for x in range(n):
                r[x * n + w] -= pi[x] * d[x, xh]
            rows.append(r)
    q = np.zeros(nv)
    for x in range(n):
        for w in range(n):
            q[x * n + w] = pi[x] * d[x, w]
    rows.append(q)
    b = [0.0] * (n * n) + [quality]
    for x in range(n):
        for xp in range(n):
            if x != xp:
                for w in range(n):
                    r = np.zeros(nv)
                    r[x * n + w] = 1.0
                    r[xp * n + w] = -math.exp(eps * d[x, xp])
                    rows.append(r)
                    b.append(0.0)
    res = linprog(c, A_ub=np.array(rows), b_ub=b, A_eq=a_eq, b_eq=np.ones(n),
                  bounds=[(0, None)] * (n * n) + [(None, None)] * n, method="highs")
    assert res.status == 0, res.message
    return float(-res.fun)


@pytest.mark.parametrize("seed", range(6))
def test_matches_an_independent_linprog_formulation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    space = MetricSpace.from_points(rng.uniform(0, 3, size=(n, 2)))
    pi = rng.dirichlet(np.full(n, 0.7))
    eps = float(rng.uniform(0.3, 3.0))
    q = build("exponential", space, eps).expected_loss(pi) * float(rng.uniform(0.7, 1.5))  # feasible: >= OPT's
    q = max(q, build("optimal", space, eps, objective="expected", prior=pi).expected_loss(pi) * 1.001)
    m = user_centric(space, eps, quality=q, prior=pi)
    want = _reference(space.distances, pi, q, eps)
    assert m.info["adversary_error"] == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert adversary_error(m.matrix, space.distances, pi).expected_error == pytest.approx(want, rel=1e-6, abs=1e-9)
    cert = m.info["certificate"]
    assert cert["adversary_error_bound"] >= want - 1e-9  # an upper bound on the optimum (weak duality)
    assert cert["gap"] <= 1e-6
    assert audit_epsilon(m.matrix, space.distances) <= eps


GRID = MetricSpace.grid(3, 3, cell=1.0)
PRIOR = np.random.default_rng(3).dirichlet(np.full(GRID.n, 0.5))


#: The benchmark's grid (benchmarks/bench_calibrate.py: 20 x 20 cells of 250 m, Dirichlet(0.5) prior) at 4 x 4.
CELLS = MetricSpace.grid(4, 4, cell=250.0)
CELLS_PRIOR = np.random.default_rng(0).dirichlet(np.full(CELLS.n, 0.5))
#: Certified to: the relative gap of the returned matrix to the LP's weak-duality bound.
CERTIFIED = 1e-9


@pytest.mark.parametrize(("rival", "params"), [
    ("exponential", {}), ("planar-laplace", {}), ("optimal", {}),
    ("optimal", {"objective": "expected", "prior": CELLS_PRIOR}),
], ids=["exponential", "planar-laplace", "optimal", "optimal-expected"])
@pytest.mark.parametrize("eps_per_cell", [0.6, 1.5])
def test_beats_every_eps_mdp_mechanism_at_its_own_quality_loss(rival: str, params: dict, eps_per_cell: float) -> None:
    """At the rival's eps and expected loss Q, user-centric's adversary error is no lower, certified to 1e-9.

    The rival is eps-mDP with expected loss exactly Q: a feasible point of the LP, so its AE is at most the
    LP's optimum, which is at most the certificate's bound (weak duality, for any duals). The returned matrix
    is within ``gap`` (relative) of that bound, so its AE >= rival's - gap * bound.
    """
    eps = eps_per_cell / 250.0
    other = build(rival, CELLS, eps, **params)
    q = other.expected_loss(CELLS_PRIOR)
    theirs = adversary_error(other.matrix, CELLS.distances, CELLS_PRIOR).expected_error
    ours = user_centric(CELLS, eps, quality=q, prior=CELLS_PRIOR)
    bound, gap = ours.info["certificate"]["adversary_error_bound"], ours.info["certificate"]["gap"]
    achieved = adversary_error(ours.matrix, CELLS.distances, CELLS_PRIOR).expected_error
    assert bound >= theirs * (1 - 1e-12)  # weak duality holds for the rival too (float rounding only)
    assert 0.0 <= gap <= CERTIFIED
    assert achieved >= theirs - CERTIFIED * bound
    assert ours.expected_loss(CELLS_PRIOR) <= q * (1 + CERTIFIED)  # at the rival's quality loss, not above it
    assert audit_epsilon(ours.matrix, CELLS.distances) <= eps
    if params.get("objective") != "expected":  # OPTMech (expected) sits at the least Q: there the two tie
        assert achieved > theirs * 1.01  # strictly better: the comparison is not vacuous


def test_without_epsilon_refuses_an_optimum_with_zeros() -> None:
    with pytest.raises(ValidationError, match="eps-mDP for no finite eps; give epsilon"):
        user_centric(GRID, None, quality=0.5, prior=PRIOR)


def test_registry_and_bad_inputs() -> None:
    m = build("user-centric", TWO, 2.0, quality=0.25)
    assert m.name == "user-centric" and m.params["quality"] == 0.25 and m.epsilon == 2.0
    with pytest.raises(ValidationError, match="user-centric needs the parameter 'quality'"):
        build("user-centric", TWO, 2.0)
    with pytest.raises(ValidationError, match="prior"):
        build("user-centric", TWO, 2.0, quality=0.25, prior=[0.9, 0.9])


def test_exponents_beyond_a_float_build_without_overflow() -> None:
    """eps * d = 1000 > log(max float): the certificate leaves the row out, no overflow warning (an error here)."""
    far = MetricSpace.from_points([[0.0], [1.0], [1000.0]])
    m = user_centric(far, 1.0, quality=400.0)
    assert np.allclose(m.matrix.sum(axis=1), 1.0)
    assert np.isfinite(m.info["adversary_error"])
