"""The LP layer: status mapping, checked solutions, warm-started row generation."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest
import scipy.sparse as sp

from metricdp.errors import SolverError, ValidationError
from metricdp.mechanisms.lp import SolveResult, require_optimal, solve_lp
from metricdp.mechanisms.lp._solve import _residual, add_rows, new_highs, resolve
from metricdp.mechanisms.lp.optimal import optimal
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


def test_time_limit_maps_to_status_1():
    g = np.random.default_rng(0)
    a = sp.random(3000, 3000, density=0.01, random_state=1, format="csr")
    r = solve_lp(g.random(3000), a, 1.0, np.inf, 0.0, np.inf, time_limit=1e-6)
    assert r.status == 1 and r.x is None and "limit" in r.message
    with pytest.raises(SolverError, match=r"status 1") as info:
        require_optimal(r, "big")
    assert info.value.status == "limit"


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
