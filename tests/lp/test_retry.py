"""The one solve-repair retry policy: retry only what a larger margin can fix."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from metricdp.errors import PrivacyViolationError, RepairError
from metricdp.lp.retry import CONSTOPT, OPTMECH, RetryPolicy
from metricdp.mechanisms.constopt import constopt
from metricdp.mechanisms.optimal import optimal
from tests.helpers import assert_private, random_space

core = importlib.import_module("metricdp.lp.core")
fit_mod = importlib.import_module("metricdp.mechanisms.constopt.fit")


def test_schedule() -> None:
    p = RetryPolicy(margin=1e-5, max_initial_eta=1e-3, max_eta=0.1)
    assert p.initial(1.0, 1.0) == pytest.approx(1e-5)
    assert p.initial(1e-9, 1.0) == 1e-3 and p.initial(1e9, 1.0) == 1e-9  # clipped
    assert [p.next(1e-5), p.next(1e-3), p.next(0.1)] == [pytest.approx(1e-3), 0.1, None]
    assert OPTMECH.initial(1.0, 1e-8) == pytest.approx(1e-3) and CONSTOPT.initial(1.0, 1.0) == pytest.approx(1e-6)
    # OPTMech: eps * eta * d_max = 1e-10, unless that leaves < 1e-12 at d_min
    assert OPTMECH.initial(2.0, 0.5, 2.0) == pytest.approx(2.5e-11)
    assert OPTMECH.initial(1.0, 1e-3, 1.0) == pytest.approx(1e-9)
    assert OPTMECH.initial(1.0, 0.5) == pytest.approx(2e-10)  # no diameter: 1e-10 at d_min
    assert CONSTOPT.initial(1.0, 1.0, 100.0) == CONSTOPT.initial(1.0, 1.0)  # no diameter margin


def test_run_retries_only_retryable_repair_errors() -> None:
    p = RetryPolicy(margin=1e-5, max_initial_eta=1e-3, max_eta=0.1)
    calls: list[float] = []

    def flaky(eta: float) -> float:
        calls.append(eta)
        if len(calls) < 3:
            raise RepairError("spread", retryable=True)
        return eta

    assert p.run(flaky, 1e-5) == 0.1 and calls == [1e-5, pytest.approx(1e-3), 0.1]
    calls.clear()

    def always(eta: float) -> float:
        calls.append(eta)
        raise RepairError("spread", retryable=True)

    with pytest.raises(RepairError):
        p.run(always, 1e-5)
    assert calls[-1] == 0.1 and len(calls) == 3  # stops at max_eta
    for exc in (RepairError("underflow", retryable=False), PrivacyViolationError("audit"), ValueError("x")):
        calls.clear()

        def fails(eta: float, exc: Exception = exc) -> float:
            calls.append(eta)
            raise exc

        with pytest.raises(type(exc)):
            p.run(fails, 1e-5)
        assert len(calls) == 1


def test_optimal_does_not_retry_an_underflow(monkeypatch: pytest.MonkeyPatch) -> None:
    # repair documents underflow as not retryable: the builder must not re-solve
    calls: list[float] = []

    def underflow(matrix: np.ndarray, distances: np.ndarray, epsilon: float, *, eta: float) -> np.ndarray:
        calls.append(eta)
        raise RepairError("repair: exp(-eps * d) underflowed", retryable=False)

    monkeypatch.setattr(core, "repair", underflow)
    with pytest.raises(RepairError, match="underflowed"):
        optimal(random_space(1, 5), 1.0)
    assert len(calls) == 1


def test_optimal_retries_a_spread_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    real = core.repair

    def spread_once(matrix: np.ndarray, distances: np.ndarray, epsilon: float, *, eta: float) -> np.ndarray:
        calls.append(eta)
        if len(calls) == 1:
            raise RepairError("repair: row sums after the envelope spread", retryable=True)
        return real(matrix, distances, epsilon, eta=eta)

    monkeypatch.setattr(core, "repair", spread_once)
    s = random_space(1, 5)
    mech = optimal(s, 1.0)
    # first eta by the diameter, the first retry at least the d_min rule's eta
    assert calls[0] == pytest.approx(max(1e-10 / s.diameter, 1e-12 / s.d_min))
    assert OPTMECH.factor == 10 and calls[1] == pytest.approx(max(10 * calls[0], 1e-10 / s.d_min))
    assert mech.info["lp"]["eta"] == calls[1]
    assert_private(mech)


def test_constopt_does_not_retry_a_non_retryable_repair_error(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []

    def zero_row(*args: object, **kwargs: object) -> np.ndarray:
        calls.append(1.0)
        raise RepairError("repair_free: row 0 is all zero", retryable=False)

    monkeypatch.setattr(fit_mod, "repair_free", zero_row)
    space = random_space(5, 8, clustered=True)
    with pytest.raises(RepairError, match="all zero"):
        constopt(space, 1.0, neighbours=3, fit="paper", lambdas=(0.1,), exponential_candidate=False)
    assert len(calls) == 1


def test_run_fallback_lifts_only_the_first_retry() -> None:
    calls: list[float] = []

    def fail_twice(eta: float) -> float:
        calls.append(eta)
        if len(calls) <= 2:
            raise RepairError("spread", retryable=True)
        return eta

    assert OPTMECH.run(fail_twice, 1e-12, fallback=1e-9) == pytest.approx(1e-8)
    assert calls == [1e-12, pytest.approx(1e-9), pytest.approx(1e-8)]
    calls.clear()
    assert OPTMECH.run(fail_twice, 1e-12, fallback=1e-13) == pytest.approx(1e-10)  # 10x wins
    calls.clear()
    with pytest.raises(RepairError):  # capped at max_eta = 0.1, then no further retry
        OPTMECH.run(fail_twice, 1e-2, fallback=1.0)
    assert calls == [1e-2, pytest.approx(0.1)]
    with pytest.raises(RepairError):
        OPTMECH.run(lambda eta: (_ for _ in ()).throw(RepairError("x", retryable=True)), 1e-3, fallback=1.0)
