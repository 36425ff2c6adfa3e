"""ConstOPTMech's reference formulation (:mod:`metricdp.mechanisms.constopt.reference`).

Oracles: the paper's reduced LP written naively (dense, one Python loop per row family),
OPTMech solved naively (dense ``scipy.optimize.linprog``), and the fast formulation solving
the same LPs to the same optima.
"""

from __future__ import annotations

import importlib

import pytest

from metricdp.mechanisms.constopt import constopt
from tests.helpers import assert_private, random_space

from .oracles import naive_paper_lp, opt_worst_case

replacement_mod = importlib.import_module("metricdp.mechanisms.constopt.replacement")


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


@pytest.mark.slow
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

