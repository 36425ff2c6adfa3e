"""The scaled, uncapped finish beyond LOG_CAP (lp/polish.py, issue 37)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import metricdp.mechanisms.lp.polish as polish_module
from metricdp.audit import audit
from metricdp.mechanisms.lp._solve import LOG_CAP
from metricdp.mechanisms.lp.optimal import optimal
from metricdp.mechanisms.lp.polish import beyond_cap
from metricdp.spaces import MetricSpace

TWO = MetricSpace.from_points(np.array([[0.0], [1.0]]))


@pytest.mark.parametrize("eps", [25.0, 40.0, 60.0])
def test_two_points_far_beyond_the_cap_by_hand(eps: float) -> None:
    # worst case on two points at distance 1: M = [[f, 1], [1, f]] / (1 + f), loss 1 / (1 + f),
    # f = e^eps; the capped LP returned 1 / (1 + e^20) = 2.1e-9 at every eps here (1e17x off at 60)
    m = optimal(TWO, eps, formulation="fast")
    want = 1.0 / (1.0 + math.exp(eps))
    got = m.worst_case_loss()
    assert want * (1 - 1e-12) <= got <= want * (1 + 1e-9), (got - want) / want
    assert m.info["lp"]["polish"]["kept"] == "polished"
    assert audit(m.matrix, TWO.distances).epsilon <= eps * (1 + 1e-12)
    # the bound certified from the finish's duals is valid (weak duality); tight at 25 only:
    # beyond, the off-diagonal entries sit below the finish's scale floor (1e-11 of the row),
    # where HiGHS's dual tolerance in scaled units is larger than the optimum itself
    bound = m.info["lp"]["dual_bound"]
    assert bound <= want * (1 + 1e-12)
    if eps == 25.0:
        assert bound >= want * (1 - 1e-9)


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
