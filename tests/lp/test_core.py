"""The shared mechanism LP (:mod:`metricdp.lp.core`): implied pairs, and the
fast formulation against the reference across the privacy range."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.audit import audit
from metricdp.lp.core import implied_pairs
from metricdp.mechanisms.optimal import optimal
from metricdp.spaces import MetricSpace


def test_implied_pairs_on_a_line_and_a_grid() -> None:
    line = MetricSpace.grid(1, 4)  # 0 - 1 - 2 - 3: (0,2), (0,3), (1,3) and reverses have a point between
    got = implied_pairs(line.distances, 1.0)
    want = np.zeros((4, 4), dtype=bool)
    for u, v in ((0, 2), (0, 3), (1, 3)):
        want[u, v] = want[v, u] = True
    assert np.array_equal(got, want)
    # a capped pair (level * d >= 20) keeps its row: the cap makes it stricter than its chain
    assert not implied_pairs(line.distances, 7.0)[0, 3] and implied_pairs(line.distances, 7.0)[0, 2]
    grid = MetricSpace.grid(3, 3)
    m = implied_pairs(grid.distances, 1.0)
    # corner to corner along the diagonal (through the centre) is implied; a knight's move is not
    assert m[0, 8] and not m[0, 5]
    # no point is between two others in general position
    rng = np.random.default_rng(0)
    assert not implied_pairs(MetricSpace.from_points(rng.standard_normal((12, 3))).distances, 1.0).any()


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("objective", ["worst", "expected"])
def test_fast_matches_full_across_epsilon(epsilon: float, objective: str) -> None:
    """Pruned constraint generation and the full LP reach the same optimum to 1e-9, audited."""
    space = MetricSpace.grid(3, 3)
    rng = np.random.default_rng(int(epsilon * 10))
    prior = rng.dirichlet(np.full(9, 0.5)) if objective == "expected" else None
    kw = {"objective": objective, "prior": prior} if prior is not None else {}
    fast = optimal(space, epsilon, **kw)
    full = optimal(space, epsilon, formulation="full", **kw)
    key = "worst" if objective == "worst" else "expected"
    a, b = fast.info["loss"][key], full.info["loss"][key]
    # 1e-9 relative, or 1e-9 absolute (d_min = 1) where the loss is tiny: at eps = 10 it is
    # 1.9e-4 and the two differ by 1e-10, the solvers' feasibility tolerance (fast lower)
    assert a == pytest.approx(b, rel=1e-9, abs=1e-9)
    for mech in (fast, full):
        assert audit(mech.matrix, space.distances).epsilon <= epsilon * (1 + 1e-9)


def _raw(space: MetricSpace, eps: float, formulation: str, tiebreak: float = 0.0):  # type: ignore[no-untyped-def]
    from metricdp.lp.core import solve_raw

    allowed = ~np.eye(space.n, dtype=bool)
    return solve_raw(space, eps, 0.0, allowed, space.distances, None, formulation=formulation,
                     time_limit=None, what="t", tiebreak=tiebreak)


@pytest.mark.parametrize(("seed", "eps"), [(0, 0.3), (1, 1.0), (2, 3.0)])
def test_tiebreak_reaches_the_full_optimum_accepted_or_not(
    monkeypatch: pytest.MonkeyPatch, seed: int, eps: float
) -> None:
    """The worst-case tie-break (core._solve_fast): the same optimum as the full LP whether
    its bound check accepts the tie-broken point or the generation goes on without it."""
    from metricdp.lp import core
    from metricdp.lp._solve import LPModel

    space = MetricSpace.from_points(np.random.default_rng(seed).standard_normal((8, 2)))
    full = _raw(space, eps, "full").result.objective
    switched: list[int] = []
    real = LPModel.change_costs

    def spy(self: LPModel, cost: np.ndarray) -> None:
        switched.append(1)
        real(self, cost)

    monkeypatch.setattr(LPModel, "change_costs", spy)
    accepted = _raw(space, eps, "fast", core.TIEBREAK)
    assert switched == [1]  # the pure objective was restored once, for the bound
    assert accepted.result.objective == pytest.approx(full, rel=1e-9)
    # a point above the threshold: the check refuses, the generation goes on to the optimum
    monkeypatch.setattr(core, "TIEBREAK_GAP", -1.0)
    refused = _raw(space, eps, "fast", 1000.0)
    assert refused.result.objective == pytest.approx(full, rel=1e-9)
    assert len(switched) == 2
    # the privacy rows hold at the solution (the scan found none violated)
    m = refused.matrix
    factor = np.exp(eps * space.distances)
    assert (m[:, None, :] <= factor[:, :, None] * m[None, :, :] + 1e-9).all()
