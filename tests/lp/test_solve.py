"""The LP layer: status mapping, checked solutions, warm-started row generation."""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest
import scipy.sparse as sp

from metricdp.errors import (
    InfeasibleError,
    SolverError,
    SolverNumericalError,
    SolverTimeLimitError,
    ValidationError,
)
from metricdp.lp import SolveResult, _solve, require_optimal, solve_lp
from metricdp.lp._solve import LPModel, _residual, add_rows, error_type, new_highs, resolve
from metricdp.mechanisms.constopt import constopt
from metricdp.mechanisms.optimal import optimal
from metricdp.mechanisms.spanner import spanner
from tests.helpers import random_space


def test_optimal_small_lp_and_stats():
    # min x + y s.t. x + 2y >= 1, x, y >= 0: optimum y = 1/2
    r = solve_lp([1.0, 1.0], sp.csr_matrix([[1.0, 2.0]]), 1.0, np.inf, 0.0, np.inf)
    assert r.success and r.status == 0
    np.testing.assert_allclose(r.x, [0.0, 0.5], atol=1e-12)
    assert r.objective == pytest.approx(0.5, abs=1e-12)
    stats = r.stats()
    assert stats["variables"] == 2 and stats["constraints"] == 1 and stats["nonzeros"] == 2
    assert stats["status"] == 0 and stats["highs_status"] == "Optimal"
    json.dumps(stats)
    assert "status=0" in repr(r)
    np.testing.assert_array_equal(require_optimal(r, "toy"), r.x)


@pytest.mark.parametrize("method", ["auto", "simplex", "dual", "primal", "ipm"])
def test_methods_agree(method):
    a = sp.csr_matrix([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]])
    r = solve_lp([1.0, 3.0, 1.0], a, [2.0, 3.0], np.inf, 0.0, 10.0, method=method)
    # x = 2, z = 1 (y = 0): cost 3; the only better direction (y) costs more
    assert r.status == 0 and r.objective == pytest.approx(3.0, abs=1e-8)


def test_infeasible_maps_to_status_2():
    r = solve_lp([1.0, 1.0], sp.csr_matrix([[1.0, 1.0]]), 3.0, np.inf, 0.0, 1.0)
    assert (r.status, r.success, r.x, r.objective) == (2, False, None, None)
    assert "infeasible" in r.message.lower() and r.highs_status == "Infeasible"
    with pytest.raises(SolverError, match="infeasible") as info:
        require_optimal(r, "toy")
    assert info.value.status == "infeasible" and info.value.result is r


def test_unbounded_maps_to_status_3():
    r = solve_lp([-1.0, 1.0], sp.csr_matrix([[1.0, 1.0]]), 0.0, np.inf, 0.0, np.inf)
    assert r.status == 3 and r.x is None
    with pytest.raises(SolverError, match="unbounded"):
        require_optimal(r, "toy")


@pytest.mark.slow
def test_time_limit_maps_to_status_1():
    g = np.random.default_rng(0)
    a = sp.random(3000, 3000, density=0.01, random_state=1, format="csr")
    r = solve_lp(g.random(3000), a, 1.0, np.inf, 0.0, np.inf, time_limit=1e-6)
    assert r.status == 1 and r.x is None and "limit" in r.message
    with pytest.raises(SolverError, match=r"status 1") as info:
        require_optimal(r, "big")
    assert info.value.status == "limit"


def test_time_limit_of_a_resolve_counts_from_now():
    """HiGHS's clock is cumulative over the runs of one instance: every run gets its own
    seconds on top of the time already run (before the fix, a re-solve stopped at once
    once the earlier runs had used its limit)."""
    g = np.random.default_rng(0)
    a = sp.random(3000, 3000, density=0.01, random_state=1, format="csr")
    h = new_highs()
    first = solve_lp(g.random(3000), a, 1.0, np.inf, 0.0, np.inf, time_limit=0.05, highs=h)
    assert first.status == 1
    ran = h.getRunTime()
    assert ran >= 0.05
    h.clearSolver()  # a cold restart, so the re-solve needs its time
    second = resolve(h, time_limit=0.05)
    assert second.status == 1
    assert second.seconds >= 0.04  # it ran, rather than stopping on the earlier runs' clock
    assert h.getOptionValue("time_limit")[1] == pytest.approx(ran + 0.05, abs=1e-6)


def test_time_limit_on_a_mechanism_is_a_solver_error():
    with pytest.raises(SolverError) as info:
        optimal(random_space(0, 25), 0.5, time_limit=1e-6)
    assert info.value.status == "limit"


def test_warm_started_rows():
    h = new_highs()
    r = solve_lp([1.0, 1.0], sp.csr_matrix([[1.0, 2.0]]), 1.0, np.inf, 0.0, np.inf, highs=h)
    assert r.objective == pytest.approx(0.5)
    add_rows(h, sp.csr_matrix([[0.0, 1.0]]), -np.inf, 0.2)  # y <= 0.2 forces x = 0.6
    r2 = resolve(h)
    assert r2.constraints == 2 and r2.objective == pytest.approx(0.8)
    np.testing.assert_allclose(r2.x, [0.6, 0.2], atol=1e-12)
    add_rows(h, sp.csr_matrix((0, 2)), [], [])  # nothing to add is fine
    with pytest.raises(ValidationError, match="columns"):
        add_rows(h, sp.csr_matrix([[1.0, 0.0, 1.0]]), -np.inf, 0.0)


def test_residual_check_downgrades():
    lp = types.SimpleNamespace(col_lower_=[0.0], col_upper_=[1.0], row_lower_=[1.0], row_upper_=[1.0])
    assert _residual(np.array([0.5]), np.array([1.0]), lp) == 0.0
    assert _residual(np.array([1.1]), np.array([1.0]), lp) == pytest.approx(0.05)
    assert _residual(np.array([0.5]), np.array([0.9]), lp) == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"A": np.eye(1)}, "sparse"),
        ({"method": "magic"}, "method"),
        ({"time_limit": 0.0}, "time_limit"),
        ({"time_limit": "soon"}, "time_limit"),
        ({"c": [1.0, 2.0, 3.0]}, "c must have shape"),
        ({"c": [np.inf, 1.0]}, "finite"),
        ({"options": {"no_such_option": 1}}, "no_such_option"),
    ],
)
def test_validation(kwargs, match):
    args = {"c": [1.0, 1.0], "A": sp.csr_matrix([[1.0, 2.0]])}
    args.update(kwargs)
    c, a = args.pop("c"), args.pop("A")
    with pytest.raises(ValidationError, match=match):
        solve_lp(c, a, 1.0, np.inf, 0.0, np.inf, **args)


def test_solveresult_is_frozen():
    r = SolveResult(False, 4, "m", "Unknown", None, None, 0.0, 1, 1, 1)
    with pytest.raises(AttributeError):
        r.status = 0  # type: ignore[misc]


# --------------------------------------------------------------------------- typed errors
def _failing_run(code: int, model_status: str):  # type: ignore[no-untyped-def]
    """A stand-in for ``_solve._run``: every LP ends with this status (as HiGHS reports it)."""

    def run(h, time_limit):  # type: ignore[no-untyped-def]
        return SolveResult(False, code, f"LP failed ({model_status})", model_status, None, None, 0.0, 1, 1, 1,
                           model_status=model_status)

    return run


_CONDITIONS = [
    (1, "kTimeLimit", SolverTimeLimitError, "limit"),
    (2, "kInfeasible", InfeasibleError, "infeasible"),
    (3, "kUnbounded", SolverNumericalError, "unbounded"),
    (4, "kSolveError", SolverNumericalError, "numerical/other"),
    (1, "kIterationLimit", SolverError, "limit"),
]


@pytest.mark.parametrize(("code", "model_status", "error", "status"), _CONDITIONS)
def test_each_status_is_its_own_error_type(code, model_status, error, status):  # type: ignore[no-untyped-def]
    r = SolveResult(False, code, "m", model_status, None, None, 0.0, 1, 1, 1, model_status=model_status)
    assert error_type(r) is error
    with pytest.raises(error) as info:
        require_optimal(r, "toy")
    assert type(info.value) is error and info.value.status == status and info.value.result is r


@pytest.mark.parametrize(("code", "model_status", "error", "status"), _CONDITIONS)
@pytest.mark.parametrize(
    "build",
    [
        lambda s: optimal(s, 1.0),
        lambda s: optimal(s, 1.0, formulation="full"),
        lambda s: spanner(s, 1.0),
        lambda s: spanner(s, 1.0, formulation="ipm"),
        lambda s: constopt(s, 1.0, neighbours=2),
        lambda s: constopt(s, 1.0, neighbours=2, fit="paper", formulation="full"),
    ],
    ids=["optimal", "optimal-full", "spanner", "spanner-ipm", "constopt", "constopt-full"],
)
def test_builders_raise_the_typed_error(monkeypatch, build, code, model_status, error, status):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_solve, "_run", _failing_run(code, model_status))
    with pytest.raises(error) as info:
        build(random_space(0, 6))
    assert type(info.value) is error and info.value.status == status


def test_infeasible_or_unbounded_is_infeasible_for_a_feasibility_lp():
    reference = importlib.import_module("metricdp.mechanisms.constopt.reference")
    r = SolveResult(False, 4, "m", "Primal infeasible or unbounded", None, None, 0.0, 1, 1, 1,
                    model_status="kUnboundedOrInfeasible")
    assert reference.infeasible(r) and not reference.infeasible(dataclasses.replace(r, model_status="kSolveError"))


def test_duals_and_model_status():
    # min x + y s.t. x + 2y >= 1: dual 1/2 on the row, reduced costs (1/2, 0)
    r = solve_lp([1.0, 1.0], sp.csr_matrix([[1.0, 2.0]]), 1.0, np.inf, 0.0, np.inf)
    assert r.model_status == "kOptimal" and r.iterations >= 0
    np.testing.assert_allclose(r.row_dual, [0.5], atol=1e-12)
    np.testing.assert_allclose(r.col_dual, [0.5, 0.0], atol=1e-12)
    bad = solve_lp([1.0, 1.0], sp.csr_matrix([[1.0, 1.0]]), 3.0, np.inf, 0.0, 1.0)
    assert bad.model_status == "kInfeasible" and bad.row_dual is None


def test_lp_model_columns_and_coefficients():
    # min x + y s.t. x + 2y >= 1; then a column z (cost 0.1, coefficient 4): z = 1/4
    m = LPModel()
    r = m.load([1.0, 1.0], sp.csr_matrix([[1.0, 2.0]]), 1.0, np.inf, 0.0, np.inf)
    assert r.objective == pytest.approx(0.5) and m.num_rows == 1 and m.num_cols == 2
    m.add_cols([0.1], 0.0, np.inf, sp.csc_matrix([[4.0]]))
    r = m.resolve()
    assert r.objective == pytest.approx(0.025) and m.num_cols == 3
    m.change_coeffs([0], [2], [1.0])  # z now counts 1: z = 1, cost 0.1
    assert m.resolve().objective == pytest.approx(0.1)
    m.set_options({"simplex_strategy": 4})
    m.add_rows(sp.csr_matrix([[0.0, 0.0, 1.0]]), -np.inf, 0.5)  # z <= 1/2: then y = 1/4
    assert m.resolve().objective == pytest.approx(0.05 + 0.25)
    with pytest.raises(ValidationError, match="rows"):
        m.add_cols([0.0], 0.0, 1.0, sp.csc_matrix(np.ones((3, 1))))
    with pytest.raises(ValidationError, match="no_such_option"):
        m.set_options({"no_such_option": 1})


# --------------------------------------------------------------------------- output
def test_highs_writes_nothing_to_stdout(capfd):
    s = random_space(2, 8)
    optimal(s, 1.0)
    spanner(s, 1.0, formulation="ipm")
    constopt(s, 1.0, neighbours=2)
    out, _ = capfd.readouterr()
    assert out == ""


@pytest.mark.slow
def test_a_fresh_process_prints_no_banner():
    # HiGHS prints its banner once per process, from the first instance: a fresh interpreter
    code = (
        "from metricdp.lp._solve import highs_version\n"
        "from metricdp.mechanisms.optimal import optimal\n"
        "from metricdp.spaces import MetricSpace\n"
        "assert highs_version()[0].isdigit()\n"
        "optimal(MetricSpace.from_points([[0.0], [1.0], [3.0]]), 1.0)\n"
    )
    src = str(pathlib.Path(__file__).resolve().parents[3] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout == ""


def test_the_solver_log_can_go_to_a_logger(caplog, capfd):
    with caplog.at_level(logging.DEBUG, logger="metricdp.highs"):
        solve_lp([1.0, 1.0], sp.csr_matrix([[1.0, 2.0]]), 1.0, np.inf, 0.0, np.inf)
    assert any(rec.name == "metricdp.highs" for rec in caplog.records)
    assert capfd.readouterr().out == ""


# --------------------------------------------------------------------------- progress
@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda s, p: optimal(s, 0.5, progress=p, time_limit=600),
         ("round", "privacy rows", "simplex iterations", "objective", "s left")),
        (lambda s, p: spanner(s, 1.0, calibrate=True, progress=p),
         ("round", "simplex iterations", "objective", "calibration step")),
        (
            lambda s, p: constopt(s, 1.0, neighbours=3, progress=p, time_limit=600),
            ("LP", "rows", "simplex iterations", "objective", "s left"),
        ),
    ],
    ids=["optimal", "spanner", "constopt"],
)
def test_long_builds_report_progress(build, words):  # type: ignore[no-untyped-def]
    calls: list[tuple[int, int | None, str]] = []
    build(random_space(3, 12), lambda done, total, message: calls.append((done, total, message)))
    assert calls
    plan = calls[0]  # the plan comes first, before any LP: size, memory and a time scale (mechanisms/lp_plan.py)
    assert plan[0] == 0 and all(w in plan[2] for w in ("variables", "privacy rows", "memory", "time of the order"))
    assert all(isinstance(d, int) and (t is None or isinstance(t, int)) and isinstance(m, str) for d, t, m in calls)
    text = " ".join(m for _, _, m in calls)
    for word in words:
        assert word in text
