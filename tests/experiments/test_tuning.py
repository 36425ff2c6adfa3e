"""Tuning a nominal eps to a measured eps_tight, grids, and the experiments' plumbing."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from metricdp import Mechanism, MetricSpace, ValidationError, epsilon_tight
from metricdp._optional import available
from metricdp.errors import SolverError, SolverTimeLimitError
from metricdp.experiments import _records as rs
from metricdp.experiments import _tuning as tu
from metricdp.experiments._plot import plot_grid
from metricdp.mechanisms.exponential import exponential
from tests.helpers import optional_dependency, random_space


@pytest.fixture(scope="module")
def space() -> MetricSpace:
    return random_space(3, 25, dim=4)


@pytest.mark.parametrize("target", [0.2, 1.0, 4.0])
def test_tune_hits_target_on_em(space: MetricSpace, target: float) -> None:
    calls: list[float] = []

    def build(eps: float) -> Mechanism:
        calls.append(eps)
        return exponential(space, eps)

    res = tu.tune_to_eps_tight(build, target, rtol=1e-3)
    assert res.converged
    # recomputed independently of the tuner
    got = epsilon_tight(res.mechanism.matrix, space.distances, 1e-3)
    assert abs(got - target) <= 1e-3 * target
    assert got == pytest.approx(res.eps_tight, rel=1e-12)
    assert res.mechanism.epsilon == res.epsilon
    # eps_tight never exceeds the nominal eps, so the answer is above the target
    assert res.epsilon >= target
    assert res.evaluations == len(calls) == len(res.history) <= 12
    assert res.history[-1] == (res.epsilon, res.eps_tight)


def test_tune_budget_exhausted_returns_closest(space: MetricSpace) -> None:
    res = tu.tune_to_eps_tight(lambda e: exponential(space, e), 1.0, rtol=1e-9, max_evaluations=2)
    assert not res.converged and res.evaluations == 2
    errs = [abs(f - 1.0) for _, f in res.history]
    assert abs(res.eps_tight - 1.0) == min(errs)


def test_a_solver_error_after_a_build_ends_the_search_with_the_closest(space: MetricSpace) -> None:
    calls = []

    def build(e: float) -> Mechanism:
        calls.append(e)
        if len(calls) == 3:
            raise SolverError("constopt: LP is unbounded", status="unbounded")
        return exponential(space, e)

    res = tu.tune_to_eps_tight(build, 1.0, rtol=1e-9)
    assert not res.converged and res.evaluations == 2 and len(calls) == 3
    assert "unbounded" in res.stopped_by and "search ended by" in rs.tuning_note(res)
    # an error before any build, or a time limit, still propagates
    for first, err in ((1, SolverError("numerical trouble")), (3, SolverTimeLimitError("time limit", status="limit"))):
        calls.clear()

        def failing(e: float, first: int = first, err: SolverError = err) -> Mechanism:
            calls.append(e)
            if len(calls) == first:
                raise err
            return exponential(space, e)

        with pytest.raises(SolverError):
            tu.tune_to_eps_tight(failing, 1.0, rtol=1e-9)


def test_tune_synthetic_monotone_function() -> None:
    """A known eps_tight(x) = x**2 / 3 (EM-shaped stand-in): the root is sqrt(3 t)."""
    pts = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])

    def build(x: float) -> Mechanism:
        # two points at distance 1: [[a, 1-a], [1-a, a]] has eps_tight(0) = log(a/(1-a))
        e = x * x / 3
        a = math.exp(e) / (1 + math.exp(e))
        return Mechanism(np.array([[a, 1 - a], [1 - a, a]]), pts, max(x, e), "toy")  # claims what holds

    res = tu.tune_to_eps_tight(build, 2.0, delta=0.0, rtol=1e-6)
    assert res.converged
    assert res.epsilon == pytest.approx(math.sqrt(6.0), rel=1e-5)


def test_tune_refuses_estimated_and_bad_args(space: MetricSpace) -> None:
    est = Mechanism(exponential(space, 1.0).matrix, space, 1.0, "madlib", {"epsilon": 1.0}, exact=False)
    assert tu.measured_eps_tight(est) == (1.0, "proven")
    with pytest.raises(ValidationError, match="estimate"):
        tu.tune_to_eps_tight(lambda e: est, 0.5)
    with pytest.raises(ValidationError, match="target"):
        tu.tune_to_eps_tight(lambda e: est, -1.0)
    with pytest.raises(ValidationError, match="max_evaluations"):
        tu.tune_to_eps_tight(lambda e: est, 1.0, max_evaluations=0)


def test_nominal_grid_spans_targets(space: MetricSpace) -> None:
    targets = np.geomspace(0.3, 3.0, 5)
    grid, probe = tu.nominal_grid(lambda e: exponential(space, e), targets)
    assert probe.eps_kind == "tight" and probe.nominal == pytest.approx(math.sqrt(0.3 * 3.0))
    points = tu.sweep(lambda e: exponential(space, e), grid)
    eps = np.array([p.eps for p in points])
    assert np.all(np.diff(eps) > 0)  # EM: eps_tight increases with the nominal eps
    # the probe's ratio eps_tight / nominal fixed the scale: grid = targets / ratio
    assert grid == pytest.approx(targets * probe.nominal / probe.eps, rel=1e-12)
    assert np.all((eps / targets > 0.7) & (eps / targets < 1.4))
    losses = [p.loss_quantile for p in points]
    assert all(b < a for a, b in itertools.pairwise(losses))
    with pytest.raises(ValidationError, match="targets"):
        tu.nominal_grid(lambda e: exponential(space, e), [1.0, -1.0])


def test_auto_eps_range_hand_computed() -> None:
    # points 0, 1, 3 on a line: distances 1, 3, 2 (median 2); nearest 1, 1, 2 (median 1)
    line = MetricSpace.from_points(np.array([[0.0], [1.0], [3.0]]))
    lo, hi = rs.auto_eps_range(line)
    assert lo == pytest.approx(0.5)
    assert hi == pytest.approx(3 * math.log(3))


def test_result_cache_round_trip(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    cache = rs.ResultCache(path)
    cache.put("a", {"x": 1.5, "y": math.inf, "z": np.float64(2.0)})
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "b", "record"')  # a line cut short by an interrupted run
    resumed = rs.ResultCache(path)
    resumed.put("slow", {"status": "time-out"}, time_limit=60.0)
    resumed.put("bad", {"status": "error"})
    again = rs.ResultCache(path)
    assert again.get("a") == {"x": 1.5, "y": "inf", "z": 2.0, "time_limit": "inf"}
    assert again.get("b") is None
    assert rs.number(again.get("a")["y"]) == math.inf and math.isnan(rs.number(None))
    # a time-out is final under the same or a shorter limit, retried under a longer one
    assert again.get("slow", 60.0) == {"status": "time-out", "time_limit": 60.0}
    assert again.get("slow", 10.0) is not None
    assert again.get("slow", 120.0) is None and again.get("slow", None) is None
    assert again.get("bad") is None  # errors are always retried
    # a frozen cache (--cached-only) reports errors as they were and writes nothing
    frozen = rs.open_cache(path, cached_only=True)
    assert frozen.get("bad") == {"status": "error", "time_limit": "inf"}
    before = path.read_text(encoding="utf-8")
    frozen.put("new", {"status": "ok"})
    assert path.read_text(encoding="utf-8") == before


def test_make_builder_and_datasets(space: MetricSpace) -> None:
    with pytest.raises(ValidationError, match="family"):
        tu.make_builder(tu.MechanismSpec("x", "nope"), space)
    with pytest.raises(ValidationError, match="dataset"):
        rs.dataset_space("mars", 10)
    g = rs.dataset_space("gaussian", 7, seed=1)
    assert g.n == 7 and g.points.shape == (7, 50)
    em = tu.make_builder(tu.MechanismSpec("EM", "exponential"), space)(0.7)
    assert em.name == "exponential" and em.epsilon == 0.7


def test_plot_grid_writes_png(tmp_path) -> None:
    """Without the plot extra: the library's one error naming it, and no file."""
    path = tmp_path / "p.png"
    with optional_dependency("plot"):
        plot_grid(path, [("a", [("s", [1, 2], [3, 4], "-o")]), ("b", [("t", [], [], "-")])],
                     xlabel="x", ylabel=["y1", "y2"], logy=[True, False])
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with pytest.raises(ValidationError):
            plot_grid(path, [], xlabel="x", ylabel="y")
    assert path.exists() == available("plot")


def test_tune_stops_where_eps_tight_jumps_across_the_target() -> None:
    """eps_tight(x) = x / 2 below x = 1 and x above: 0.75 is never reached; the search says where it jumps."""
    pts = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
    built: list[float] = []

    def build(x: float) -> Mechanism:
        built.append(x)
        e = x / 2 if x < 1.0 else x
        a = math.exp(e) / (1 + math.exp(e))
        return Mechanism(np.array([[a, 1 - a], [1 - a, a]]), pts, max(x, e), "toy")

    res = tu.tune_to_eps_tight(build, 0.75, delta=0.0, rtol=1e-6, max_evaluations=200)
    assert not res.converged
    assert res.stopped_by.startswith("eps_tight jumps from 0.5 to 1 across the target 0.75 at nominal eps ")
    assert float(res.stopped_by.rsplit(" ", 1)[1]) == pytest.approx(1.0, rel=1e-5)
    assert len(built) < 200  # stopped by the jump, not by the budget
    assert res.eps_tight in (pytest.approx(0.5, rel=1e-5), pytest.approx(1.0, rel=1e-5))
