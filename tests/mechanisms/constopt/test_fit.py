"""ConstOPTMech's fit orchestration (:mod:`metricdp.mechanisms.constopt.fit`): candidates and
their comparison (hand-derived on 2 points, the black hole of Lemma 1), the normalised fit's
certificate, solver failures and the repair of the winner.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from metricdp.errors import SolverError, ValidationError
from metricdp.mechanisms.constopt import constopt
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, random_space

from .oracles import black_hole, em_matrix, loss

cone_mod = importlib.import_module("metricdp.mechanisms.constopt.cone")
fit_mod = importlib.import_module("metricdp.mechanisms.constopt.fit")
reference_mod = importlib.import_module("metricdp.mechanisms.constopt.reference")
replacement_mod = importlib.import_module("metricdp.mechanisms.constopt.replacement")


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

    mod = importlib.import_module("metricdp.mechanisms.constopt.fast")
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


@pytest.mark.slow
@settings(max_examples=20)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 9), eps=st.floats(0.3, 2.5), clustered=st.booleans())
@example(seed=0, n=5, eps=1.5, clustered=True)  # stalled within the solver's tolerances before the tight re-solve
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


def test_quantile_selects_by_the_quantile() -> None:
    space = random_space(5, 20, clustered=True)
    mech = constopt(space, 1.0, neighbours=3, fit="paper", quantile=0.9)
    losses = mech.info["losses"]
    best = min([losses["exponential"], *[v for v in losses["paper"].values() if v is not None]])
    assert losses["returned"] == pytest.approx(best, rel=1e-6)
    assert mech.quantile_loss(0.9) == pytest.approx(losses["returned"], rel=1e-9)


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

