"""Traces on the release pipeline: predictive, per-place and independent releases per person, in file order."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

from metricdp.accounting.composition import MAX_UNITS, from_units, to_units
from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError, ValidationError
from metricdp.location.grid import CellGrid
from metricdp.location.predictive import FixedSplit, release_traces
from metricdp.pipeline.traces import Independent, PerPlace, Predictive
from metricdp.streaming.traces import release_traces_file

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyarrow.csv")
pq = pytest.importorskip("pyarrow.parquet")

PARIS = (48.85, 2.35)
COLUMNS = {"user": "user", "time": "time", "lat": "lat", "lon": "lon"}


def write(path: Path, rows: list[tuple[object, object, float, float]], extra: str = "") -> Path:
    head = "user,time,lat,lon" + (",note" if extra else "")
    lines = [head] + [f"{u},{t},{float(la)!r},{float(lo)!r}" + (f",{extra}{i}" if extra else "") for i, (u, t, la, lo)
                      in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def released(path: Path) -> np.ndarray:
    rows = path.read_text(encoding="utf-8").splitlines()[1:]
    return np.array([[float(r.split(",")[2]), float(r.split(",")[3])] for r in rows])


def run(src: Path, out: Path, mechanism: object, **kw: object):  # seeded: for tests only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return release_traces_file(src, out, mechanism=mechanism, rng=kw.pop("rng", 7), **COLUMNS, **kw)


# --------------------------------------------------------------------------------- predictive, by hand
def test_a_prediction_is_reused_when_the_fix_stays_put(tmp_path):
    """Threshold 1000 km, test eps 1/km: the clamped distance is l - 20, a pass has probability 1 - e^-20 / 2."""
    src = write(tmp_path / "in.csv", [("a", 1, *PARIS), ("a", 2, *PARIS), ("a", 3, *PARIS)])
    out = tmp_path / "out.csv"
    r = run(src, out, Predictive(1.0, 1.0, 1000.0))
    got = released(out)
    assert (got == got[0]).all()  # the first release, reported again twice
    p = r.report.person("a")
    assert (p.fresh, p.reused, p.tests, p.passed) == (1, 2, 2, 2)
    assert r.report.spent_units.tolist() == [to_units(1.0) + 2 * to_units(1.0)]  # one fresh, two tests


def test_a_fix_far_from_the_prediction_is_released_afresh(tmp_path):
    """Threshold 0, fixes 1000 km apart: a pass has probability e^-20 / 2; each failed test pays test + fresh."""
    src = write(tmp_path / "in.csv", [("a", 1, 40.0, 0.0), ("a", 2, 49.0, 0.0), ("a", 3, 40.0, 0.0)])
    out = tmp_path / "out.csv"
    r = run(src, out, Predictive(2.0, 0.5, 0.0))
    got = released(out)
    assert len({tuple(g) for g in got}) == 3
    assert np.abs(got[:, 0] - [40.0, 49.0, 40.0]).max() < 1.0  # each near its own fix (noise of mean 1 km)
    p = r.report.person("a")
    assert (p.fresh, p.reused, p.tests, p.passed) == (3, 0, 2, 0)
    assert p.eps_spent == pytest.approx(2.0 + 2 * (0.5 + 2.0))


def test_one_person_is_the_librarys_predictive_mechanism(tmp_path):
    """The oracle: one person's trace, the same seed, the same draws as release_traces (sorted rows)."""
    rng = np.random.default_rng(3)
    pts = PARIS + np.cumsum(rng.normal(0, 0.01, (40, 2)), axis=0)
    src = write(tmp_path / "in.csv", [("a", t, float(la), float(lo)) for t, (la, lo) in enumerate(pts)])
    out = tmp_path / "out.csv"
    r = run(src, out, Predictive(1.0, 0.5, 1.5), digits=15, rng=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = release_traces(["a"] * 40, np.arange(40), pts, FixedSplit(0.5, 1.0, 1e6, 1.5), rng=11)
    np.testing.assert_allclose(released(out), want.released, rtol=0, atol=1e-12)
    assert r.report.spent_units.tolist() == want.report.spent_units.tolist()
    assert r.report.fresh.tolist() == want.report.fresh.tolist()


def test_interleaved_persons_keep_their_own_state_across_chunks(tmp_path):
    """Rows of persons interleave; chunks of one row: each person's prediction is their own last release."""
    rows = [("a", 1, 10.0, 10.0), ("b", 1, 50.0, 5.0), ("a", 2, 10.0, 10.0), ("b", 2, 50.0, 5.0),
            ("a", 3, 10.0, 10.0)]
    out = tmp_path / "out.csv"
    r = run(write(tmp_path / "in.csv", rows), out, Predictive(1.0, 1.0, 1000.0), chunk_rows=1)
    got = released(out)
    assert (got[[2, 4]] == got[0]).all() and (got[3] == got[1]).all()
    assert r.report.fresh.tolist() == [1, 1] and r.report.reused.tolist() == [2, 1]


# ----------------------------------------------------------------------------------------- order
@pytest.mark.parametrize("chunk_rows", [1, 100])
def test_a_person_out_of_time_order_is_refused_naming_both_lines(tmp_path, chunk_rows):
    rows = [("a", "2020-01-01 10:00:00", *PARIS), ("b", "2020-01-01 08:00:00", *PARIS),
            ("a", "2020-01-01 09:00:00", *PARIS)]
    out = tmp_path / "out.csv"
    with pytest.raises(ValidationError) as ex:
        run(write(tmp_path / "in.csv", rows), out, Independent(1.0), chunk_rows=chunk_rows)
    msg = str(ex.value)
    assert "person 'a': line 4 (time 2020-01-01 09:00:00" in msg and "comes after line 2 (time 2020-01-01 10:00" in msg
    assert "sort the file by 'user', then by time" in msg
    assert not out.exists()


def test_an_out_of_order_file_spends_nothing(tmp_path):
    rows = [("a", 2, *PARIS), ("a", 1, *PARIS)]
    out = tmp_path / "out.csv"
    with Ledger(tmp_path / "l.db", budget=10.0) as ledger:
        with pytest.raises(ValidationError, match=r"person 'a': line 3 .* comes after line 2"):
            run(write(tmp_path / "in.csv", rows), out, Predictive(1.0, 0.2, 1.0), ledger=ledger)
        assert ledger.spent(["a"]).tolist() == [0.0] and ledger.runs_table() == []
    assert not out.exists()


@pytest.mark.parametrize("chunk_rows", [1, 100])
def test_numbers_and_iso_times_in_one_file_are_refused(tmp_path, chunk_rows):
    rows = [("a", 1, *PARIS), ("a", "2020-01-01 10:00:00", *PARIS)]
    with pytest.raises(ValidationError, match="one form of time per file"):
        run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", Independent(1.0), chunk_rows=chunk_rows)


def test_equal_times_and_numbers_as_text_are_in_order(tmp_path):
    rows = [("a", 9, *PARIS), ("a", 9, *PARIS), ("a", 10, *PARIS)]  # 10 after 9 as numbers, not as text
    r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", Independent(1.0))
    assert r.stats.rows == 3


@pytest.mark.parametrize(("rows", "fragment"), [
    ([("a", "noon", *PARIS)], "time column 'time' is 'noon', neither a number nor an ISO 8601 time"),
    ([("a", "nan", *PARIS)], "time column 'time' is 'nan', not a finite time"),
    ([("", 1, *PARIS)], "user column 'user' is empty"),
    ([("a", 1000, 95.0, 2.0)], "(95.0, 2.0) in columns 'lat', 'lon' is not a latitude"),
])
def test_bad_fixes_are_refused_in_one_error_naming_the_row(tmp_path, rows, fragment):
    out = tmp_path / "out.csv"
    with pytest.raises(ValidationError, match=r"data row 1 \(line 2\)") as ex:
        run(write(tmp_path / "in.csv", rows), out, Independent(1.0))
    assert fragment in str(ex.value)
    assert not out.exists()


@pytest.mark.parametrize(("user", "time", "fragment"), [
    ("who", "time", "no user column 'who' (columns: 'user', 'time', 'lat', 'lon')"),
    ("user", "when", "no time column 'when'"),
    ("user", "lat", "must be four different columns"),
])
@pytest.mark.parametrize("budget", [None, 5.0])
def test_a_missing_or_reused_column_is_one_error(tmp_path, user, time, fragment, budget):
    src = write(tmp_path / "in.csv", [("a", 1, *PARIS)])
    with pytest.raises(ValidationError, match=re.escape(fragment)), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        release_traces_file(src, tmp_path / "o.csv", user=user, time=time, lat="lat", lon="lon",
                            mechanism=Independent(1.0), budget=budget, rng=1)
    assert not (tmp_path / "o.csv").exists()


# ------------------------------------------------------------------------------------ accounting
def test_the_ledger_is_charged_each_persons_rows_independent(tmp_path):
    rows = [("a", 1, *PARIS), ("b", 1, *PARIS), ("a", 2, *PARIS), ("a", 3, *PARIS), ("b", 2, *PARIS)]
    with Ledger(tmp_path / "l.db", budget=10.0) as ledger:
        r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", Independent(0.5), ledger=ledger)
        assert ledger.spent(["a", "b"]).tolist() == [1.5, 1.0]
        assert from_units(r.reserved).tolist() == [1.5, 1.0] == r.report.eps_spent.tolist()
        assert [run_["state"] for run_ in ledger.runs_table()] == ["committed"]


def test_the_ledger_keeps_the_predictive_worst_case_and_the_report_the_actual_spend(tmp_path):
    """a: 3 fixes, worst case 1 + 2 x (0.2 + 1) = 3.4; b: 1 fix, 1. Committed: the reservation."""
    rows = [("a", 1, *PARIS), ("a", 2, *PARIS), ("b", 1, *PARIS), ("a", 3, *PARIS)]
    with Ledger(tmp_path / "l.db", budget=10.0) as ledger:
        r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", Predictive(1.0, 0.2, 1000.0), ledger=ledger)
        assert ledger.spent(["a", "b"]).tolist() == pytest.approx([3.4, 1.0])
        assert from_units(r.reserved).tolist() == pytest.approx([3.4, 1.0])
        assert r.report.eps_spent.tolist() == pytest.approx([1.4, 1.0])  # one fresh, two passed tests


def test_a_grant_below_the_worst_case_runs_the_predictive_mechanism_within_it(tmp_path):
    """Budget 2 < worst case 3.4: the person is released within 2 (one fresh, then tests while 1.2 fits)."""
    rows = [("a", t, 40.0 + 5 * t, 0.0) for t in range(3)]  # far apart: every test fails
    r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", Predictive(1.0, 0.2, 0.0), budget=2.0)
    assert r.stats.rows == 3 and r.withheld == 0
    p = r.report.person("a")
    assert (p.fresh, p.reused, p.tests) == (1, 2, 0)  # 2 - 1 = 1 < 1.2: no test, the prediction reported
    assert from_units(r.reserved).tolist() == [2.0]


def test_a_spend_past_what_can_be_accounted_is_one_error_not_a_silent_cut(tmp_path):
    """Not accounted, nothing is withheld: 2 x 3e6 eps passes the grid's 2^62 units (4.6e6 eps)."""
    out = tmp_path / "out.csv"
    with pytest.raises(ValidationError, match=r"person 'a': their spend would pass 4.61e\+06 eps"):
        run(write(tmp_path / "in.csv", [("a", 1, *PARIS), ("a", 2, *PARIS)]), out, Independent(3e6))
    assert not out.exists()
    worst = Predictive(1e6, 1e5, 1.0).worst(np.array([0, 1, 10**12]), np.zeros(3, dtype=np.int64))
    assert worst.tolist() == [0, 10, MAX_UNITS // to_units(1e5)]  # capped, never wrapped around


def test_a_file_changed_after_its_reservation_is_released_nowhere_and_refunded(tmp_path, monkeypatch):
    import metricdp.pipeline.first_pass as fp

    src = write(tmp_path / "in.csv", [("a", 1, *PARIS)])
    read = fp.first_pass

    def then_append(*args, **kw):  # a writer appends a fix between the first pass and the release
        got = read(*args, **kw)
        with open(src, "a") as fh:
            fh.write("a,2,48.85,2.35\n")
        return got

    monkeypatch.setattr(fp, "first_pass", then_append)
    out = tmp_path / "out.csv"
    with Ledger(tmp_path / "l.db", budget=5.0) as ledger:
        with pytest.raises(ValidationError, match="the file changed while it was released"):
            run(src, out, Independent(1.0), ledger=ledger)
        assert ledger.spent(["a"]).tolist() == [0.0]
        assert [r["state"] for r in ledger.runs_table()] == ["aborted"]
    assert not out.exists()


def test_refuse_writes_and_spends_nothing(tmp_path):
    rows = [("a", 1, *PARIS), ("a", 2, *PARIS)]
    out = tmp_path / "out.csv"
    with Ledger(tmp_path / "l.db", budget=1.0) as ledger:
        with pytest.raises(BudgetExceededError):
            run(write(tmp_path / "in.csv", rows), out, Independent(0.75), ledger=ledger)
        with pytest.raises(BudgetExceededError):
            run(write(tmp_path / "in.csv", rows), out, Predictive(2.0, 0.5, 1.0), ledger=ledger)
        assert ledger.spent(["a"]).tolist() == [0.0]
    assert not out.exists()


def test_drop_withholds_the_rows_past_each_persons_grant(tmp_path):
    rows = [("a", 1, *PARIS), ("b", 1, *PARIS), ("a", 2, *PARIS), ("a", 3, *PARIS)]
    out = tmp_path / "out.csv"
    r = run(write(tmp_path / "in.csv", rows, extra="n"), out, Independent(0.5), budget=1.0, policy="drop")
    assert [line.split(",")[-1] for line in out.read_text().splitlines()[1:]] == ["n0", "n1", "n2"]
    assert (r.withheld, r.over) == (1, 1)
    assert r.report.fresh.tolist() == [2, 1]


# ------------------------------------------------------------------------------------- per place
def test_revisits_to_a_cell_repeat_one_release(tmp_path):
    grid = CellGrid.over("48.7,2.2,49.0,2.5", 1.0)
    home, work = grid.centres[0], grid.centres[-1]
    rows = [("a", 1, *home), ("a", 2, *work), ("a", 3, *(home + 1e-4)), ("b", 1, *home)]
    out = tmp_path / "out.csv"
    with Ledger(tmp_path / "l.db", budget=5.0) as ledger:
        r = run(write(tmp_path / "in.csv", rows), out, PerPlace(grid, 0.5), ledger=ledger)
        assert ledger.spent(["a", "b"]).tolist() == [1.0, 0.5]  # one eps per distinct (person, cell)
    got = released(out)
    assert (got[2] == got[0]).all() and not (got[3] == got[0]).all()  # b's home is b's own release
    assert r.report.fresh.tolist() == [2, 1] and r.report.reused.tolist() == [1, 0]


def test_a_fix_outside_the_tiling_is_refused(tmp_path):
    grid = CellGrid.over("48.7,2.2,49.0,2.5", 1.0)
    with pytest.raises(ValidationError, match=r"data row 2 \(line 3\).*lies in no public cell"):
        run(write(tmp_path / "in.csv", [("a", 1, *PARIS), ("a", 2, 10.0, 10.0)]), tmp_path / "o.csv",
            PerPlace(grid, 1.0))


# ------------------------------------------------------------------------------------------ formats
def test_csv_keeps_the_other_bytes_parquet_float64_geojson_out(tmp_path):
    text = "user,time,lat,lon,note\na,1,48.85,2.35,\"x, y\"\na,2,48.85,2.35,z\n"
    src = tmp_path / "in.csv"
    src.write_text(text)
    run(src, tmp_path / "out.csv", Independent(1.0))
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0] == "user,time,lat,lon,note" and lines[1].startswith("a,1,") and lines[1].endswith(',"x, y"')
    pq.write_table(pa.table({"user": [1, 2, 1], "time": pa.array([1, 1, 2], pa.int64()),
                             "lat": [48.85, 48.86, 48.85], "lon": [2.35, 2.36, 2.35]}), tmp_path / "in.parquet")
    r = run(tmp_path / "in.parquet", tmp_path / "out.parquet", Predictive(1.0, 1.0, 1000.0))
    t = pq.read_table(tmp_path / "out.parquet")
    assert t.schema.field("lat").type == pa.float64() and t.column("user").to_pylist() == [1, 2, 1]
    assert r.report.persons.tolist() == [1, 2]
    run(tmp_path / "in.parquet", tmp_path / "out.geojson", Independent(1.0))
    assert len(json.loads((tmp_path / "out.geojson").read_text())["features"]) == 3
    pq.write_table(pa.table({"user": [1.5], "time": [1], "lat": [48.85], "lon": [2.35]}), tmp_path / "f.parquet")
    with pytest.raises(ValidationError, match="user column 'user' has type double: person ids must be integers"):
        run(tmp_path / "f.parquet", tmp_path / "f_out.parquet", Independent(1.0))
    assert not (tmp_path / "f_out.parquet").exists()


# ------------------------------------------------------------------------------------------ property
GRID = CellGrid.over("40.0,0.0,41.0,1.0", 20.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(persons=hst.lists(hst.integers(0, 3), min_size=1, max_size=30), budget=hst.floats(1.0, 6.0),
       threshold=hst.sampled_from([0.0, 1.0, 1000.0]), chunk=hst.integers(1, 7),
       which=hst.sampled_from(["predictive", "independent", "per-place"]))
def test_each_person_spends_within_the_reservation_within_the_budget(tmp_path, persons, budget, threshold, chunk,
                                                                     which):
    """The oracle: each person's spend, grant and kept rows recomputed from the rows alone."""
    rng = np.random.default_rng(len(persons))
    rows = [(f"p{p}", i, float(40.05 + 0.9 * rng.uniform()), float(0.05 + 0.9 * rng.uniform()))
            for i, p in enumerate(persons)]
    mech = {"predictive": lambda: Predictive(1.0, 0.25, threshold), "independent": lambda: Independent(0.75),
            "per-place": lambda: PerPlace(GRID, 0.75)}[which]()
    r = run(write(tmp_path / "in.csv", rows), tmp_path / "out.csv", mech, budget=budget, policy="drop",
            chunk_rows=chunk)
    left = to_units(budget, budget=True)
    assert (r.report.spent_units <= r.reserved).all() and (r.reserved <= left).all()
    n = np.array([persons.count(p) for p in sorted(set(persons))])
    if which == "independent":  # the first floor(budget / eps) rows of each person, the rest withheld
        kept = np.minimum(n, left // to_units(0.75))
        assert r.report.fresh.tolist() == kept.tolist() and r.reserved.tolist() == (kept * to_units(0.75)).tolist()
    elif which == "per-place":
        cells = [len({int(GRID.locate(np.array([[la, lo]]))[0]) for u, _t, la, lo in rows if u == f"p{p}"})
                 for p in sorted(set(persons))]
        assert r.report.fresh.tolist() == np.minimum(cells, left // to_units(0.75)).tolist()
    else:  # every row kept (a budget of 1 pays the first release); worst case 1 + (n - 1) x 1.25, capped
        worst = to_units(1.0) + (n - 1) * to_units(1.25)
        assert r.reserved.tolist() == np.minimum(worst, left - left % to_units(0.25)).tolist()
        assert r.withheld == 0
    assert int((r.report.fresh + r.report.reused).sum()) == r.stats.rows == len(rows) - r.withheld


# ------------------------------------------------------------------------------------------ benchmark
@pytest.mark.parametrize("form", ["parquet", "csv"])
def test_the_quick_benchmark_releases_every_fix_of_interleaved_persons(form):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_traces", Path(__file__).parents[2] / "benchmarks" /
                                                  "bench_traces.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--quick", "--format", form])
    assert [(r["fixes"], r["persons"], r["accounted"]) for r in results] == [(20_000, 2_000, False),
                                                                             (20_000, 2_000, True)]
    assert all(r["reuses"] > 0.2 * r["fixes"] and r["fixes_per_second"] > 0 for r in results)  # stays of 5


# ------------------------------------------------------------------------------------------ real data
@pytest.mark.slow
def test_the_ais_week_is_released_within_each_vessels_reservation(tmp_path):
    """Real tracks (tracktable-data): 172,679 fixes of 140 vessels, sorted by vessel then ISO time."""
    pytest.importorskip("tracktable_data")
    from metricdp.data.ais import ais_traces

    t = ais_traces()
    src = tmp_path / "ais.csv"
    times = np.char.replace(np.datetime_as_string(t.time, unit="s"), "T", " ")
    pa.csv.write_csv(pa.table({"user": t.person, "time": times, "lat": t.lat, "lon": t.lon}), src)
    with Ledger(tmp_path / "l.db", budget=200.0) as ledger:
        r = run(src, tmp_path / "out.csv", Predictive(1.0, 0.2, 2.0), ledger=ledger, keep=("user", "time"))
        assert (r.stats.rows, len(r.report)) == (t.n, t.persons) == (172_679, 140)
        assert (r.report.spent_units <= r.reserved).all() and r.reserved.max() == to_units(200.0)
        assert ledger.spent(r.report.persons).tolist() == from_units(r.reserved).tolist()
    assert int(r.report.reused.sum()) > int(r.report.fresh.sum())  # vessels stay put: predictions pass


# ------------------------------------------------------------------------------------------ first pass
def test_the_first_pass_of_traces_counts_per_person_and_keeps_nothing_per_row(tmp_path):
    from metricdp.pipeline.first_pass import first_pass
    from metricdp.pipeline.run import Source
    from metricdp.pipeline.traces import Traces

    rows = [("b", 1, *PARIS), ("a", 1, *PARIS), ("b", 2, *PARIS), ("b", 3, *PARIS)]
    src = Source.of(write(tmp_path / "in.csv", rows), chunk_rows=2)
    kind = Traces("user", "time", "lat", "lon", Independent(1.0))
    read = first_pass(kind, src, "user", per_row=False)
    assert read.persons is None and read.codes.size == 0
    assert kind.persons.ids.tolist() == ["b", "a"] and kind.rows[:2].tolist() == [3, 1]


@pytest.mark.parametrize(("user", "fragment"), [
    ("x" * 257, "is an id of more than 256 bytes"),
    ("ann\x00", "holds a NUL character"),
])
@pytest.mark.parametrize("budget", [None, 5.0])
def test_an_id_the_accounting_cannot_name_is_refused_naming_its_row(tmp_path, user, fragment, budget):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"user": ["ann", user], "time": [1, 2], "lat": [PARIS[0]] * 2,
                             "lon": [PARIS[1]] * 2}), path)
    with pytest.raises(ValidationError, match=r"data row 2: user column 'user' " + re.escape(fragment)):
        run(path, tmp_path / "out.parquet", Independent(1.0), budget=budget)
    assert not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize("ids", [[5, 3, 5, 7, 3, 7, 9, 9], ["5", "3", "5", "7", "3", "7", "9", "9"]])
def test_integer_and_text_ids_are_one_person_each_across_chunks_in_order_of_first_sight(tmp_path, ids):
    """Chunks of 3 rows: 7 first comes beside 5 and is new twice in its chunk (rows 4 and 6), 9 twice in one."""
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"user": ids, "time": list(range(8)), "lat": [PARIS[0]] * 8, "lon": [PARIS[1]] * 8}),
                   path)
    r = run(path, tmp_path / "out.parquet", Independent(1.0), chunk_rows=3, budget=5.0)
    assert [str(p) for p in r.report.persons.tolist()] == ["3", "5", "7", "9"]
    assert r.report.fresh.tolist() == [2, 2, 2, 2] and from_units(r.reserved).tolist() == [2.0] * 4


def test_persons_coded_after_start_release_within_the_grants_given_them():
    """An engine's partition meets its persons as it reads: grants given then bound them as grants at start do."""
    from metricdp.pipeline.trace_states import Fixes

    fixes = Fixes(np.array([0, 1, 0, 1, 0]), np.arange(5.0), np.zeros((5, 2)), np.arange(5))
    late, early = Independent(1.0), Independent(1.0)
    late.start(np.zeros(0, dtype=np.int64), np.random.default_rng(0))
    late.grant(np.array([0, 1]), np.array([2, 1]))
    early.start(np.array([2, 1]), np.random.default_rng(0))
    kept, drawn = late.release(fixes)
    assert kept.tolist() == [True, True, True, False, False] == early.release(fixes)[0].tolist()
    assert late.counts(2)[1].tolist() == [2, 1] and drawn.shape == (3, 2)
    held = Predictive(1.0, 0.2, 1.0)
    held.start(np.zeros(0, dtype=np.int64), np.random.default_rng(0))
    held.grant(np.array([1]), np.array([held.least()]))  # person 0 has no grant: withheld whole
    assert held.release(fixes)[0].tolist() == [False, True, False, True, False]
