"""The scaled, uncapped finish beyond LOG_CAP (lp/polish.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import metricdp.lp.polish as polish_module
from metricdp.audit import audit
from metricdp.lp._solve import LOG_CAP
from metricdp.lp.polish import beyond_cap, kernel_distances
from metricdp.mechanisms.optimal import optimal
from metricdp.mechanisms.spanner import spanner
from metricdp.spaces import MetricSpace
from tests.lp.exact_lp import exact_optimum

TWO = MetricSpace.from_points(np.array([[0.0], [1.0]]))


@pytest.mark.parametrize("eps", [25.0, 40.0, 60.0, 300.0])
def test_two_points_far_beyond_the_cap_by_hand(eps: float) -> None:
    # worst case on two points at distance 1: M = [[f, 1], [1, f]] / (1 + f), loss 1 / (1 + f),
    # f = e^eps; the capped LP returned 1 / (1 + e^20) = 2.1e-9 at every eps here (1e17x off at 60)
    m = optimal(TWO, eps, formulation="fast")
    want = 1.0 / (1.0 + math.exp(eps))
    got = m.worst_case_loss()
    assert want * (1 - 1e-12) <= got <= want * (1 + 1e-9), (got - want) / want
    assert m.info["lp"]["polish"]["kept"] == "polished"
    assert audit(m.matrix, TWO.distances).epsilon <= eps * (1 + 1e-12)
    # the bound certified from the finish's duals is valid (weak duality) and tight at every
    # eps: the basis's own duals (lp/basis.py), no scale floor (at a floor of 1e-11 of the
    # row, eps 40-60 were certified only to 1 / (1 + e^20): HiGHS dropped the loss row's k)
    bound = m.info["lp"]["dual_bound"]
    assert want * (1 - 1e-12) <= bound <= want * (1 + 1e-12)


def test_no_finish_below_the_cap() -> None:
    m = optimal(TWO, 15.0, formulation="fast")
    assert "polish" not in m.info["lp"]
    assert m.worst_case_loss() == pytest.approx(1.0 / (1.0 + math.exp(15.0)), rel=1e-9)


def test_beyond_cap_threshold() -> None:
    d = np.array([[0.0, 2.0], [2.0, 0.0]])
    allowed = ~np.eye(2, dtype=bool)
    assert not beyond_cap(LOG_CAP / 2 * 0.999, d, allowed)
    assert beyond_cap(LOG_CAP / 2 * 1.001, d, allowed)
    # SpannerMech: the substituted kernel uses graph distances, which may exceed the metric's
    assert beyond_cap(LOG_CAP / 2 * 0.999, d, allowed, graph_distances=2 * d)


def test_a_failed_finish_keeps_the_capped_build(monkeypatch: pytest.MonkeyPatch) -> None:
    # the finish never fails a build: no optimum from it -> the capped solution, recorded
    monkeypatch.setattr(polish_module, "polish", lambda *a, **k: None)
    m = optimal(TWO, 30.0, formulation="fast")
    record = m.info["lp"]["polish"]
    assert record["kept"] == "capped" and record["failed"] == "no optimum"
    assert m.worst_case_loss() == pytest.approx(1.0 / (1.0 + math.exp(LOG_CAP)), rel=1e-6)
    assert audit(m.matrix, TWO.distances).epsilon <= 30.0 * (1 + 1e-12)


def test_a_worse_polished_candidate_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # both candidates are repaired and proven; the one of smaller loss is returned
    real = polish_module.polish

    def worse(*args: object, **kwargs: object) -> polish_module.Polished | None:
        pol = real(*args, **kwargs)  # type: ignore[arg-type]
        assert pol is not None
        return pol._replace(matrix=np.full((2, 2), 0.5))  # the uniform mechanism: private, loss 0.5

    monkeypatch.setattr(polish_module, "polish", worse)
    m = optimal(TWO, 30.0, formulation="fast")
    record = m.info["lp"]["polish"]
    assert record["kept"] == "capped" and record["loss_polished"] > record["loss_capped"]


def test_every_pair_beyond_exp_overflow() -> None:
    # eps * d > 700: every privacy row is left out of the finish (exp overflows), which
    # crashed it before ("need at least one array to concatenate"); at 650 the polished
    # identity-like optimum (5e-283) is kept, at 800 its repair refuses (exp underflows) and
    # the capped build is returned, recorded; both proven private
    m = optimal(TWO, 650.0, formulation="fast")
    assert m.info["lp"]["polish"]["kept"] == "polished"
    assert m.worst_case_loss() == pytest.approx(math.exp(-650.0), rel=1e-9)
    m = optimal(TWO, 800.0, formulation="fast")
    assert m.info["lp"]["polish"]["kept"] == "capped" and "underflow" in m.info["lp"]["polish"]["failed"]
    assert audit(m.matrix, TWO.distances).epsilon <= 800.0 * (1 + 1e-12)


@pytest.mark.parametrize(("seed", "n", "objective", "eps_d"), [(1, 5, "worst", 30.0), (2, 5, "expected", 45.0),
                                                               (3, 4, "worst", 80.0), (4, 5, "expected", 120.0)])
def test_certified_gap_against_the_exact_optimum(seed: int, n: int, objective: str, eps_d: float) -> None:
    # the target "certified within 1e-9, eps * d > 20 included": the finish's bound is
    # below the exact rational optimum (valid) and within 1e-10 of it (tight), and the build
    # within 1e-9 above it
    g = np.random.default_rng(seed)
    s = MetricSpace.from_points(g.normal(size=(n, 2)))
    eps = eps_d / s.diameter
    prior = g.dirichlet(np.full(n, 0.5)) if objective == "expected" else None
    exact = float(exact_optimum(s.distances, eps, prior=prior).value)
    m = optimal(s, eps, objective=objective, prior=prior, formulation="fast")
    got = m.worst_case_loss() if prior is None else m.expected_loss(prior)
    bound = m.info["lp"]["dual_bound"]
    assert m.info["lp"]["polish"]["kept"] == "polished"
    assert exact * (1 - 1e-10) <= bound <= exact * (1 + 1e-12), (bound - exact) / exact
    assert exact * (1 - 1e-12) <= got <= exact * (1 + 1e-9), (got - exact) / exact


def test_kernel_distances_are_the_allowed_chains() -> None:
    # a path 0 - 1 - 2 with only its edges allowed: the kernel of (0, 2) chains both edges
    d = np.array([[0.0, 1.0, 1.5], [1.0, 0.0, 1.0], [1.5, 1.0, 0.0]])
    every = ~np.eye(3, dtype=bool)
    assert kernel_distances(d, every) is d
    path = every.copy()
    path[0, 2] = path[2, 0] = False
    got = kernel_distances(d, path)
    assert got[0, 2] == got[2, 0] == 2.0 and got[0, 1] == 1.0


def test_spanner_beyond_the_cap_is_private_and_no_worse_than_capped() -> None:
    # SpannerMech's finish substitutes the graph-distance kernel (implied by its edge rows)
    g = np.random.default_rng(9)
    s = MetricSpace.from_points(g.normal(size=(12, 2)))
    eps = 40.0 / s.diameter
    m = spanner(s, eps, stretch=1.5)
    record = m.info["lp"]["polish"]
    assert record["kept"] == "polished", record
    assert record["loss_polished"] <= record["loss_capped"]
    assert audit(m.matrix, s.distances).epsilon <= eps * (1 + 1e-12)


def test_far_beyond_the_cap_certified_without_an_oracle() -> None:
    # 8 points at eps * d_max = 400 (entries down to e^-400, loss 1.07e-19; capped: 4.7e-8):
    # at a0b4fed polished but its bound was 7e-41 (HiGHS's duals); with HiGHS's own scaling
    # on top of the finish's the first pass stopped in numerical trouble (capped kept); now
    # polished and certified to 1e-9
    g = np.random.default_rng(9)
    g.integers(4, 14, size=2)  # the fuzz run that found it drew n and the dimension first
    s = MetricSpace.from_points(g.normal(size=(8, 3)))
    eps = 400.0 / s.diameter
    m = optimal(s, eps, formulation="fast")
    record = m.info["lp"]["polish"]
    assert record["kept"] == "polished", record
    got, bound = m.worst_case_loss(), m.info["lp"]["dual_bound"]
    assert 0 < bound <= got <= bound * (1 + 1e-9), (got - bound) / bound
    assert audit(m.matrix, s.distances).epsilon <= eps * (1 + 1e-12)
