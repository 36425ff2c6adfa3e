"""One retry policy: planar Laplace and SpannerMech's calibration retry through
:meth:`metricdp.lp.retry.RetryPolicy.run`, honouring ``retryable``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import metricdp.mechanisms.planar_laplace as pl_module
import metricdp.mechanisms.spanner as spanner_module
from metricdp import MetricSpace
from metricdp.errors import MetricDPError, PrivacyViolationError, RepairError
from metricdp.lp.retry import OPTMECH, PLANAR_LAPLACE, SPANNER, RetryPolicy


@dataclass(frozen=True)
class Spy(RetryPolicy):
    """A policy that records every run and every attempt's eta."""

    log: list = None  # type: ignore[assignment]

    def run(self, attempt, eta, *, progress=None, what="LP", fallback=None):  # type: ignore[no-untyped-def]
        tries: list[float] = []
        self.log.append((what, tries))

        def recorded(e: float) -> Any:
            tries.append(e)
            return attempt(e)

        return super().run(recorded, eta, progress=progress, what=what, fallback=fallback)


def _spy(policy: RetryPolicy) -> Spy:
    names = ("margin", "max_initial_eta", "max_eta", "min_eta", "factor", "diameter_margin", "room_floor")
    fields = {k: getattr(policy, k) for k in names}
    return Spy(**fields, log=[])


@pytest.fixture
def grid() -> MetricSpace:
    return MetricSpace.grid(2, 2, 1.0)


def test_planar_laplace_runs_through_the_policy(grid: MetricSpace, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _spy(PLANAR_LAPLACE)
    monkeypatch.setattr(pl_module, "PLANAR_LAPLACE", spy)
    mech = pl_module.planar_laplace(grid, 1.0)
    assert [what for what, _ in spy.log] == ["planar-laplace"]
    assert spy.log[0][1] == [mech.params["eta"]]  # one attempt sufficed
    assert pl_module._MAX_ETA == PLANAR_LAPLACE.max_eta  # the cap is the policy's, stated once


def test_planar_laplace_retries_a_failed_audit_on_the_policys_schedule(grid: MetricSpace,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _spy(PLANAR_LAPLACE)
    monkeypatch.setattr(pl_module, "PLANAR_LAPLACE", spy)
    real, calls = pl_module.certify, []

    def certify(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise PrivacyViolationError("forced: the first audit fails")
        return real(*args, **kwargs)

    monkeypatch.setattr(pl_module, "certify", certify)
    mech = pl_module.planar_laplace(grid, 1.0)
    tries = spy.log[0][1]
    assert len(tries) == 2 and tries[1] == pytest.approx(min(PLANAR_LAPLACE.factor * tries[0], PLANAR_LAPLACE.max_eta))
    assert mech.params["eta"] == tries[1] and mech.info["repair"] == "envelope"


def test_planar_laplace_stops_at_a_repair_error_that_is_not_retryable(grid: MetricSpace,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The old loop retried every PrivacyViolationError, RepairError(retryable=False) included."""
    monkeypatch.setattr(pl_module, "certify", lambda *a, **k: (_ for _ in ()).throw(PrivacyViolationError("no")))
    repairs = []

    def repair(*args: Any, **kwargs: Any) -> Any:
        repairs.append(kwargs["eta"])
        raise RepairError("an all-zero row: no margin can help", retryable=False)

    monkeypatch.setattr(pl_module, "repair", repair)
    with pytest.raises(MetricDPError, match=r"could not make the matrix exactly 1\.0-mDP: an all-zero row"):
        pl_module.planar_laplace(grid, 1.0)
    assert len(repairs) == 1


def test_once_is_the_policy_without_retries() -> None:
    once = SPANNER.once()
    assert once.next(1e-9) is None and once.initial(1.0, 1.0) == SPANNER.initial(1.0, 1.0)


def test_spanner_calibration_solves_each_level_under_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    space = MetricSpace.from_points(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.5], [2.0, 2.0], [3.0, 0.5]]))
    spy, main = _spy(SPANNER), _spy(OPTMECH)
    monkeypatch.setattr(spanner_module, "SPANNER", spy)
    monkeypatch.setattr(spanner_module, "OPTMECH", main)  # the proven level (OPTMech's eta rule)
    real, failed = spanner_module.repair, []

    def repair(matrix: Any, d: Any, epsilon: float, *, eta: float) -> Any:
        if not failed and spy.log:  # the first calibration step: the repair needs more room once
            failed.append(eta)
            raise RepairError("forced: spread too wide", retryable=True)
        return real(matrix, d, epsilon, eta=eta)

    monkeypatch.setattr(spanner_module, "repair", repair)
    mech = spanner_module.spanner(space, 1.0, stretch=1.5, calibrate=True)
    steps = [(what, tries) for what, tries in spy.log if what.startswith("spanner at level")]
    # the proven level (OPTMech's rule, one attempt here), then the calibration's levels
    assert main.log == [("spanner", [OPTMECH.initial(1.0, space.d_min, space.diameter)])] and steps, spy.log
    # each level is one attempt (SPANNER.once()): a failed repair answers "too high", no re-solve
    assert steps[0][1] == failed and all(len(t) == 1 for _, t in steps)
    assert mech.info["calibration"]["iterations"] >= 2
