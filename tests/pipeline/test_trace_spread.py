"""A per-person budget spread over each person's own fixes, places or trace, and the predictive managers."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

from metricdp.accounting.composition import from_units, to_units
from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError, ValidationError
from metricdp.location.grid import CellGrid
from metricdp.location.predictive import AdaptiveRate, release_traces
from metricdp.pipeline.traces import Independent, PerPlace, Predictive
from metricdp.streaming.traces import release_traces_file

pytest.importorskip("pyarrow")

PARIS = (48.85, 2.35)
COLUMNS = {"user": "user", "time": "time", "lat": "lat", "lon": "lon"}
GRID = CellGrid.over("48.7,2.2,49.0,2.5", 1.0)


def write(path: Path, rows: list[tuple[object, object, float, float]]) -> Path:
    lines = ["user,time,lat,lon"] + [f"{u},{t},{float(la)!r},{float(lo)!r}" for u, t, la, lo in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(src: Path, out: Path, mechanism: object, **kw: object):  # seeded: for tests only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return release_traces_file(src, out, mechanism=mechanism, rng=kw.pop("rng", 7), **COLUMNS, **kw)


def released(path: Path) -> np.ndarray:
    return np.array([[float(v) for v in r.split(",")[2:4]] for r in path.read_text().splitlines()[1:]])


# ------------------------------------------------------------------------------------------ by hand
def test_independent_spreads_each_persons_budget_over_their_fixes(tmp_path):
    """B = 3: a's 3 fixes at 1 each, b's 2 at 1.5, c's one at 3; each spends and is charged exactly 3."""
    rows = [("a", 1, *PARIS), ("b", 1, *PARIS), ("a", 2, *PARIS), ("c", 1, *PARIS), ("a", 3, *PARIS),
            ("b", 2, *PARIS)]
    r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", Independent(spread=3.0))
    assert r.report.persons.tolist() == ["a", "b", "c"] and r.report.fresh.tolist() == [3, 2, 1]
    assert r.report.spent_units.tolist() == r.reserved.tolist() == [to_units(3.0)] * 3
    assert r.withheld == 0


def test_a_share_off_the_grid_is_rounded_down(tmp_path):
    """B = 1 over 3 fixes: 333333333333 units each (1/3 rounded down), 999999999999 spent, never above B."""
    rows = [("a", t, *PARIS) for t in range(3)]
    r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", Independent(spread=1.0))
    assert r.report.spent_units.tolist() == r.reserved.tolist() == [3 * 333_333_333_333]


def test_per_place_spreads_each_persons_budget_over_their_cells(tmp_path):
    """B = 2: a visits 2 cells (3 fixes), at 1 per place; b one cell, at 2."""
    home, work = GRID.centres[0], GRID.centres[-1]
    rows = [("a", 1, *home), ("a", 2, *work), ("a", 3, *(home + 1e-4)), ("b", 1, *work)]
    out = tmp_path / "out.csv"
    r = run(write(tmp_path / "in.csv", rows), out, PerPlace(GRID, spread=2.0))
    assert r.report.fresh.tolist() == [2, 1] and r.report.reused.tolist() == [1, 0]
    assert r.report.spent_units.tolist() == r.reserved.tolist() == [to_units(2.0)] * 2
    got = released(out)
    assert (got[2] == got[0]).all()


def test_per_place_spread_is_memoized_per_eps_in_a_ledger(tmp_path):
    """Two persons at two eps (two memo scopes): a second run of the same file repeats every release for free."""
    home, work = GRID.centres[0], GRID.centres[-1]
    src = write(tmp_path / "in.csv", [("a", 1, *home), ("a", 2, *work), ("b", 1, *work)])
    with Ledger(tmp_path / "l.db", budget=10.0) as ledger:
        first = run(src, tmp_path / "o1.csv", PerPlace(GRID, spread=2.0), ledger=ledger, rng=1)
        second = run(src, tmp_path / "o2.csv", PerPlace(GRID, spread=2.0), ledger=ledger, rng=2)
        assert ledger.spent(["a", "b"]).tolist() == [2.0, 2.0]
    assert from_units(first.reserved).tolist() == [2.0, 2.0] and second.reserved.tolist() == [0, 0]
    np.testing.assert_array_equal(released(tmp_path / "o1.csv"), released(tmp_path / "o2.csv"))


def test_the_fixed_manager_runs_each_person_within_the_spread_budget(tmp_path):
    """Fresh releases at 1, tests at 0.2, B = 2: a's worst case 1 + 2 x 1.2 = 3.4 is capped at 2; after the first
    release 1 is left, below a test and a release (1.2): the prediction is reported untested."""
    rows = [("a", t, *PARIS) for t in range(3)] + [("b", 0, *PARIS)]
    r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", Predictive(1.0, 0.2, 1000.0, spread=2.0))
    a, b = r.report.person("a"), r.report.person("b")
    assert (a.fresh, a.reused, a.tests, a.eps_spent) == (1, 2, 0, 1.0)
    assert (b.fresh, b.eps_spent) == (1, 1.0)
    assert from_units(r.reserved).tolist() == [2.0, 1.0]


def test_the_adaptive_manager_by_hand(tmp_path):
    """B = 4, threshold 1000 km (every test passes). a, 4 fixes: rate 1, test 0.2, base 0.8; first release at
    2 x 0.8 = 1.6; a test (0.2, with 1.6 + 0.2 <= 2.4 left) passes; then eps_N is floor(0.8 x 2^(6/4)) = 2.263 and
    0.2 + 2.263 > 2.2 left: untested. Spent 1.8. b, 2 fixes: rate 2, test 0.4, first release 3.2, then 0.8 left:
    untested. Spent 3.2. Both reserve min(worst, 4) = 4."""
    rows = [("a", t, *PARIS) for t in range(4)] + [("b", t, *PARIS) for t in range(2)]
    r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv",
            Predictive(threshold_km=1000.0, manager="adaptive", spread=4.0))
    a, b = r.report.person("a"), r.report.person("b")
    assert (a.fresh, a.reused, a.tests, a.passed) == (1, 3, 1, 1)
    assert a.eps_spent == pytest.approx(1.8) and b.eps_spent == pytest.approx(3.2)
    assert r.report.spent_units.tolist() == [to_units(1.6) + to_units(0.2), to_units(3.2)]
    assert r.reserved.tolist() == [to_units(4.0)] * 2


def test_one_person_under_the_adaptive_manager_is_the_librarys(tmp_path):
    """The oracle: AdaptiveRate(B, horizon n) over one person's trace, the same seed, the same draws."""
    rng = np.random.default_rng(3)
    pts = PARIS + np.cumsum(rng.normal(0, 0.01, (40, 2)), axis=0)
    src = write(tmp_path / "in.csv", [("a", t, float(la), float(lo)) for t, (la, lo) in enumerate(pts)])
    out = tmp_path / "out.csv"
    r = run(src, out, Predictive(threshold_km=1.5, manager="adaptive", spread=60.0), digits=15, rng=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = release_traces(["a"] * 40, np.arange(40), pts, AdaptiveRate(budget=60.0, horizon=40, threshold_km=1.5),
                              rng=11)
    np.testing.assert_allclose(released(out), want.released, rtol=0, atol=1e-12)
    assert r.report.spent_units.tolist() == want.report.spent_units.tolist()
    assert (r.report.tests.tolist(), r.report.passed.tolist()) == (want.report.tests.tolist(),
                                                                   want.report.passed.tolist())


# ------------------------------------------------------------------------------------------ refusals
def test_a_refused_spread_run_writes_and_spends_nothing(tmp_path):
    rows = [("a", 1, *PARIS), ("a", 2, *PARIS)]
    out = tmp_path / "out.csv"
    src = write(tmp_path / "in.csv", rows)
    with Ledger(tmp_path / "l.db", budget=1.0) as ledger:
        with pytest.raises(BudgetExceededError):
            run(src, out, Independent(spread=2.0), ledger=ledger)
        with pytest.raises(BudgetExceededError):  # a's first release alone costs 2 x (2 / 2 x 0.8) = 1.6 > 1
            run(src, out, Predictive(threshold_km=1.0, manager="adaptive", spread=2.0), ledger=ledger)
        assert ledger.spent(["a"]).tolist() == [0.0]
        assert all(r["state"] != "committed" for r in ledger.runs_table())
    assert not out.exists()


def test_a_share_too_thin_for_the_sampler_names_the_person_before_anything_is_reserved(tmp_path):
    rows = [("a", 1, *PARIS), ("b", 1, *PARIS), ("b", 2, *PARIS)]
    out = tmp_path / "out.csv"
    with Ledger(tmp_path / "l.db", budget=1.0) as ledger:
        with pytest.raises(ValidationError, match=r"person 'b': a budget of 1e-05 over their 2 fixes is 5e-06"):
            run(write(tmp_path / "in.csv", rows), out, Independent(spread=1e-5), ledger=ledger)
        with pytest.raises(ValidationError, match=r"person 'a': a budget of 1e-05 over 2 fixes leaves no eps"):
            run(write(tmp_path / "in.csv", rows), out, Predictive(threshold_km=1.0, manager="adaptive",
                                                                  spread=1e-5), ledger=ledger)
        assert ledger.runs_table() == []
    assert not out.exists()


@pytest.mark.parametrize(("make", "match"), [
    (lambda: Independent(), "exactly one"),
    (lambda: Independent(1.0, spread=2.0), "exactly one"),
    (lambda: PerPlace(GRID), "exactly one"),
    (lambda: Predictive(threshold_km=1.0, manager="adaptive"), "give spread"),
    (lambda: Predictive(1.0, 0.2, 1.0, manager="adaptive", spread=2.0), "neither epsilon nor eps_test"),
    (lambda: Predictive(1.0, 0.2, 1.0, manager="rate"), "manager must be 'fixed' or 'adaptive'"),
    (lambda: Predictive(1.0, 0.2, 1.0, spread=0.5), "spread 0.5 is below one fresh release"),
    (lambda: Predictive(threshold_km=1.0, manager="adaptive", spread=2.0, test_share=1.5), "test_share"),
])
def test_bad_parameters_are_refused_before_any_file_is_read(make, match):
    with pytest.raises(ValidationError, match=match):
        make()


# ------------------------------------------------------------------------------------------ property
SQUARE = CellGrid.over("40.0,0.0,41.0,1.0", 20.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(persons=hst.lists(hst.integers(0, 3), min_size=1, max_size=30), spread=hst.floats(0.5, 20.0),
       budget=hst.one_of(hst.none(), hst.floats(0.5, 20.0)), threshold=hst.sampled_from([0.0, 1.0, 1000.0]),
       chunk=hst.integers(1, 7), which=hst.sampled_from(["fixed", "adaptive", "independent", "per-place"]))
def test_the_reserved_worst_case_covers_the_spend_within_spread_and_budget(tmp_path, persons, spread, budget,
                                                                           threshold, chunk, which):
    """Every person: actual spend <= reserved <= min(spread, budget) (units); independent and per place: each
    person's eps is spread // count, and their fresh releases the first ones their grant pays for."""
    rng = np.random.default_rng(len(persons))
    rows = [(f"p{p}", 1000 + i, float(40.05 + 0.9 * rng.uniform()), float(0.05 + 0.9 * rng.uniform()))
            for i, p in enumerate(persons)]
    mech = {"fixed": lambda: Predictive(0.4, 0.1, threshold, spread=spread),
            "adaptive": lambda: Predictive(threshold_km=threshold, manager="adaptive", spread=spread),
            "independent": lambda: Independent(spread=spread),
            "per-place": lambda: PerPlace(SQUARE, spread=spread)}[which]()
    r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", mech, budget=budget, policy="drop",
            chunk_rows=chunk)
    cap = min(to_units(spread, budget=True), to_units(budget, budget=True) if budget is not None else 2**62)
    assert (r.report.spent_units <= r.reserved).all() and (r.reserved <= cap).all()
    n = np.array([persons.count(p) for p in sorted(set(persons))])
    if which in ("independent", "per-place"):
        cells = np.array([len({int(SQUARE.locate(np.array([[la, lo]]))[0]) for u, _t, la, lo in rows if u == f"p{p}"})
                          for p in sorted(set(persons))])
        parts = n if which == "independent" else cells
        eps = to_units(spread, budget=True) // parts
        kept = np.minimum(parts, cap // eps)
        assert r.report.fresh.tolist() == kept.tolist()
        assert r.report.spent_units.tolist() == (kept * eps).tolist()
    assert int((r.report.fresh + r.report.reused).sum()) == r.stats.rows == len(rows) - r.withheld
