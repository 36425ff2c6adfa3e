"""Calibration of a family to an expected distance E_d (:mod:`metricdp.mechanisms.distance_calibration`).

Oracles: k-RR's closed form, the mechanism's own E_d recomputed independently, and
families built to jump across the target.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from metricdp.errors import SolverError, ValidationError
from metricdp.mechanisms.distance_calibration import calibrate_expected_distance, expected_distance
from metricdp.mechanisms.krr import krr
from metricdp.spaces import MetricSpace

GRID = MetricSpace.grid(4, 4, 100.0)  # cells of 100 "metres"
PRIOR = np.random.default_rng(7).dirichlet(np.ones(16))


@pytest.mark.parametrize("family", ["krr", "geometric", "planar-laplace", "exponential"])
def test_calibration_meets_the_target_for_each_family(family: str) -> None:
    target, tol = 90.0, 1e-6
    cal = calibrate_expected_distance(family, GRID, PRIOR, target, tol=tol)
    assert abs(cal.expected_distance - target) <= tol * target
    assert cal.mechanism.name == family
    # The reported E_d is the mechanism's own, recomputed independently.
    recomputed = float(np.einsum("x,xy,xy->", PRIOR, cal.mechanism.matrix, GRID.distances))
    assert cal.expected_distance == pytest.approx(recomputed, rel=1e-12)
    if family == "krr":
        assert cal.mechanism.params["ldp_epsilon"] == pytest.approx(cal.epsilon, rel=1e-12)
    else:
        assert cal.mechanism.epsilon == pytest.approx(cal.epsilon, rel=1e-12)


def test_krr_calibration_against_the_closed_form() -> None:
    # k-RR: M[x,y] = 1/(e^a + n - 1) off the diagonal, so E_d = S / (e^a + n - 1) with
    # S = sum_x pi(x) sum_y d(x,y): a = log(S / E_d - n + 1).
    n, target = GRID.n, 120.0
    s = float(PRIOR @ GRID.distances.sum(axis=1))
    exact = math.log(s / target - n + 1)
    cal = calibrate_expected_distance("krr", GRID, PRIOR, target, tol=1e-9)
    assert cal.epsilon == pytest.approx(exact, rel=1e-7)
    # The uniform prior (None) is the default.
    s_uniform = float(GRID.distances.sum(axis=1).mean())
    cal_u = calibrate_expected_distance("krr", GRID, None, target, tol=1e-9)
    assert cal_u.epsilon == pytest.approx(math.log(s_uniform / target - n + 1), rel=1e-7)


def test_calibration_with_a_callable_and_a_bracket() -> None:
    def build(eps: float):
        return krr(GRID, ldp_epsilon=eps)

    cal = calibrate_expected_distance(build, GRID, PRIOR, 100.0, bracket=(0.5, 20.0))
    assert abs(cal.expected_distance - 100.0) <= 1e-6 * 100.0
    with pytest.raises(ValidationError, match="does not hold the target"):
        calibrate_expected_distance(build, GRID, PRIOR, 100.0, bracket=(10.0, 20.0))


def test_calibration_target_out_of_reach_is_a_clear_error() -> None:
    # Just above what a uniform release gives (the limit eps -> 0): no eps reaches it.
    uniform = float(PRIOR @ GRID.distances.mean(axis=1))
    with pytest.raises(ValidationError, match=r"distance \d.* is out of reach for 'krr': E_d ranges"):
        calibrate_expected_distance("krr", GRID, PRIOR, 1.01 * uniform)
    # Just below it is reachable.
    assert calibrate_expected_distance("krr", GRID, PRIOR, 0.99 * uniform).epsilon > 0
    with pytest.raises(ValidationError, match=r"out of reach for 'exponential'.*build failed"):
        calibrate_expected_distance("exponential", GRID, PRIOR, 1e-300)
    with pytest.raises(ValidationError, match="must be finite and > 0"):
        calibrate_expected_distance("krr", GRID, PRIOR, 0.0)


def test_calibration_bad_arguments() -> None:
    with pytest.raises(ValidationError, match="unknown mechanism 'laplace'; choose one of "):
        calibrate_expected_distance("laplace", GRID, PRIOR, 100.0)
    with pytest.raises(ValidationError, match=r"prior must have shape \(16,\)"):
        calibrate_expected_distance("krr", GRID, PRIOR[:3], 100.0)
    with pytest.raises(ValidationError, match="tol"):
        calibrate_expected_distance("krr", GRID, PRIOR, 100.0, tol=0.0)


def test_calibration_reports_a_jump_across_the_target() -> None:
    # E_d drops from ~E(1) to ~E(6) at eps = 3: no parameter meets a target in between.
    def step(eps: float):
        return krr(GRID, ldp_epsilon=1.0 if eps < 3.0 else 6.0)

    low, high = step(1.0).matrix, step(6.0).matrix
    mid = (expected_distance(low, GRID.distances) + expected_distance(high, GRID.distances)) / 2
    with pytest.raises(SolverError, match="jumps across the target"):
        calibrate_expected_distance(step, GRID, None, mid, bracket=(1.0, 10.0))


def test_calibration_reports_each_probe() -> None:
    calls: list[tuple[int, int | None, str]] = []
    cal = calibrate_expected_distance("krr", GRID, PRIOR, 100.0, progress=lambda d, t, m: calls.append((d, t, m)))
    assert [c[0] for c in calls] == list(range(1, cal.iterations + 1))
    assert all(c[1] == 200 and c[2].startswith("krr: eps = ") for c in calls)
