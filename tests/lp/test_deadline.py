"""One deadline for the whole build: every builder's ``time_limit``."""

from __future__ import annotations

import importlib
import itertools
import math

import numpy as np
import pytest

from metricdp.errors import SolverTimeLimitError, ValidationError
from metricdp.lp import _solve
from metricdp.lp.deadline import Deadline
from metricdp.mechanisms.constopt import constopt
from metricdp.mechanisms.optimal import optimal
from metricdp.mechanisms.spanner import spanner
from tests.helpers import assert_private, random_space


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_deadline_counts_down_and_expires() -> None:
    clock = FakeClock()
    d = Deadline(10.0, clock=clock)
    assert d.remaining() == 10.0 and not d.expired() and d.require("x") == 10.0
    clock.now = 9.5
    assert d.remaining() == pytest.approx(0.5) and d.describe() == "0.5 s of 10 s left"
    clock.now = 12.0
    assert d.remaining() == 0.0 and d.expired()
    assert d.solve_limit() == pytest.approx(1e-3)  # HiGHS then stops at once
    with pytest.raises(SolverTimeLimitError, match="whole build") as info:
        d.require("optimal")
    assert info.value.status == "limit"


def test_unlimited_and_passing_down() -> None:
    for limit in (None, math.inf):
        d = Deadline(limit)
        assert d.remaining() is None and d.solve_limit() is None and not d.expired()
    d = Deadline(5.0)
    assert Deadline.of(d) is d and Deadline.of(3.0).total == 3.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, "soon", True])
def test_deadline_validation(bad: object) -> None:
    with pytest.raises(ValidationError, match="time_limit"):
        Deadline(bad)  # type: ignore[arg-type]


def _record_limits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every time limit handed to HiGHS in this test."""
    seen: list[float] = []
    real = _solve._run

    def run(h, time_limit):  # type: ignore[no-untyped-def]
        seen.append(time_limit)
        return real(h, time_limit)

    monkeypatch.setattr(_solve, "_run", run)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize(
    "build",
    [
        lambda s: optimal(s, 0.5, time_limit=100.0),
        lambda s: spanner(s, 1.0, calibrate=True, time_limit=100.0),
        lambda s: constopt(s, 1.0, neighbours=3, calibrate=True, time_limit=100.0),
    ],
    ids=["optimal", "spanner-calibrated", "constopt-calibrated"],
)
def test_every_solve_gets_the_time_left_of_one_budget(monkeypatch: pytest.MonkeyPatch, build) -> None:  # type: ignore[no-untyped-def]
    # per-LP limits would hand HiGHS 100 s each time; one budget hands it less and less. ConstOPTMech solves
    # the lambdas after the first side by side (threads), whose limits may be recorded out of order: sorted,
    # every limit is still distinct and below the one before (per-LP limits would repeat 100.0)
    seen = _record_limits(monkeypatch)
    assert_private(build(random_space(4, 14)))
    assert len(seen) > 2
    ordered = sorted(seen, reverse=True)
    assert all(b < a for a, b in itertools.pairwise(ordered)) and ordered[0] <= 100.0


def _fake_time(monkeypatch: pytest.MonkeyPatch, module: str, per_lp: float) -> None:
    """Builders in ``module`` get a Deadline on a clock that advances ``per_lp`` s per HiGHS run."""
    clock = FakeClock()
    real = _solve._run

    def run(h, time_limit):  # type: ignore[no-untyped-def]
        clock.now += per_lp
        return real(h, None)

    monkeypatch.setattr(_solve, "_run", run)
    mod = importlib.import_module(module)
    monkeypatch.setattr(mod, "Deadline", lambda t: Deadline(t, clock=clock))


def test_spanner_calibration_draws_on_the_same_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    space = random_space(2, 10)
    _fake_time(monkeypatch, "metricdp.mechanisms.spanner", per_lp=1.0)
    plain = spanner(space, 1.0, formulation="full", time_limit=1.5)  # one LP: 1 s of 1.5 s
    assert_private(plain)
    with pytest.raises(SolverTimeLimitError):  # the calibration's first LP finds none left
        spanner(space, 1.0, formulation="full", calibrate=True, time_limit=1.5)


def test_constopt_out_of_time_is_a_time_limit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # a deadline that has passed: every LP stops at once, no candidate: SolverTimeLimitError
    clock = FakeClock()
    mod = importlib.import_module("metricdp.mechanisms.constopt.builder")

    def expired(t: float) -> Deadline:
        d = Deadline(t, clock=clock)
        clock.now += 2 * t
        return d

    monkeypatch.setattr(mod, "Deadline", expired)
    seen: list[float] = []

    def run(h, time_limit):  # type: ignore[no-untyped-def]
        # what HiGHS does when handed no time (1 ms, the least it is given): stop at once
        seen.append(time_limit)
        return _solve.SolveResult(
            False, 1, "LP stopped at a time or iteration limit", "Time limit reached", None, None, 0.0, 1, 1, 1,
            model_status="kTimeLimit",
        )

    monkeypatch.setattr(_solve, "_run", run)
    space = random_space(3, 9)
    with pytest.raises(SolverTimeLimitError):
        constopt(space, 1.0, neighbours=2, fit="paper", lambdas=(0.1,), time_limit=5.0)
    np.testing.assert_equal(clock.now, 10.0)
    assert seen and all(t == pytest.approx(1e-3) for t in seen)
