"""Trace releases on Dask and Spark (:mod:`metricdp.integrations._traces`) against the local engine.

Oracles: the local engine's output and report. With one partition the engine reads every fix
in file order from partition 0's stream, so a local release drawing from that same stream
(``SeedSequence(seed, spawn_key=(0,))``) writes the same bytes; with many partitions each
person's rows, in file order, and their counts must be the local engine's, the releases
drawn from the same law (a two-sample test), and an accounted run charges what the local
engine charges (the reservation is each person's worst case: no randomness in it).
"""

from __future__ import annotations

import csv
import io
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError, ValidationError
from metricdp.location.grid import CellGrid
from metricdp.pipeline.traces import Independent, PerPlace, Predictive
from metricdp.spaces import haversine_rows_km
from metricdp.streaming.traces import release_traces_file
from tests.cli_helpers import run

pytestmark = pytest.mark.slow  # engines start clusters; CI runs these in its full phase

COLS = {"user": "user", "time": "t", "lat": "lat", "lon": "lon"}


def _rows(n: int = 120, persons: int = 9, seed: int = 3) -> list[tuple[str, int, float, float, str]]:
    """Interleaved persons, each one's fixes in time order, near a few places of theirs."""
    g = np.random.default_rng(seed)
    out = []
    for i in range(n):
        p = int(g.integers(persons))
        home = (48.80 + 0.02 * p, 2.30 + 0.01 * p)
        out.append((f"p{p}", i, home[0] + float(g.normal()) * 0.003, home[1] + float(g.normal()) * 0.003, f"n{i}"))
    return out


def _csv(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    path.write_text("user,t,lat,lon,note\n" + "".join(f"{u},{t},{a:.6f},{b:.6f},{n}\n" for u, t, a, b, n in rows))
    return path


def _read(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _by_person(rows: list[dict[str, str]]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in rows:
        out[r["user"]].append((r["t"], r["note"]))
    return dict(out)


def _release(engine: str, where: dict[str, Any], src: Path, out: Path, mechanism: Any, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's PrivacyLeakWarning
        return release_traces_file(src, out, mechanism=mechanism, keep=("note",), engine=engine, **where, **COLS,
                                   **kw)


def _local(src: Path, out: Path, mechanism: Any, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return release_traces_file(src, out, mechanism=mechanism, keep=("note",), **COLS, **kw)


def _mechanisms() -> list[Any]:
    return [Independent(1.0), Predictive(1.0, 0.2, 2.0), PerPlace(CellGrid.over("48.7,2.2,49.1,2.5", 1.0), 1.0)]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["independent", "predictive", "per-place"])
def test_one_partition_writes_the_local_engines_bytes_from_the_same_stream(tmp_path, engine, which):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows())
    stream = np.random.default_rng(np.random.SeedSequence(7, spawn_key=(0,)))  # partition 0's
    local = _local(src, tmp_path / "local.csv", _mechanisms()[which], rng=stream)
    got = _release(name, where, src, tmp_path / "engine.csv", _mechanisms()[which], rng=7, piece_bytes=1 << 20)
    assert (tmp_path / "engine.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    assert got.stats.rows == local.stats.rows == 120
    for f in ("persons", "spent_units", "fresh", "reused", "tests", "passed"):
        assert getattr(got.report, f).tolist() == getattr(local.report, f).tolist(), f


def test_many_partitions_keep_each_persons_rows_in_file_order_and_the_law(tmp_path, engine):
    name, where = engine
    rows = _rows(400, 12)
    src = _csv(tmp_path / "in.csv", rows)
    local = _local(src, tmp_path / "local.csv", Independent(2.0), rng=1)
    got = _release(name, where, src, tmp_path / "engine.csv", Independent(2.0), rng=1, piece_bytes=2000)
    local_rows, engine_rows = _read(tmp_path / "local.csv"), _read(tmp_path / "engine.csv")
    assert _by_person(engine_rows) == _by_person(local_rows)  # same rows, each person's in file order
    assert got.report.persons.tolist() == local.report.persons.tolist()  # sorted by person, as the local one
    counts = {p: sum(r[0] == p for r in rows) for p in got.report.persons.tolist()}
    assert got.report.fresh.tolist() == local.report.fresh.tolist() == list(counts.values())
    true = {r[4]: (r[2], r[3]) for r in rows}

    def moved(out: list[dict[str, str]]) -> Any:
        return haversine_rows_km(np.array([true[r["note"]] for r in out]),
                                 np.array([(float(r["lat"]), float(r["lon"])) for r in out]))

    from scipy.stats import ks_2samp

    assert ks_2samp(moved(engine_rows), moved(local_rows)).pvalue > 1e-3  # planar Laplace at 2/km on both


def test_parquet_in_parquet_out(tmp_path, engine):
    import pyarrow as pa
    import pyarrow.parquet as pq

    name, where = engine
    rows = _rows(60, 5)
    table = pa.table({"user": [r[0] for r in rows], "t": [r[1] for r in rows], "lat": [r[2] for r in rows],
                      "lon": [r[3] for r in rows], "note": [r[4] for r in rows]})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=7)
    got = _release(name, where, tmp_path / "in.parquet", tmp_path / "out.parquet", Independent(1.0),
                   piece_bytes=1)
    out = pq.read_table(tmp_path / "out.parquet")
    assert got.stats.rows == out.num_rows == 60
    assert out.schema.field("lat").type == pa.float64()
    assert sorted(out.column("note").to_pylist()) == sorted(r[4] for r in rows)


def test_an_accounted_run_charges_what_the_local_engine_charges(tmp_path, engine):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(150, 6))
    persons = [f"p{i}" for i in range(6)]
    spent = []
    for label, call in (("local", lambda out, mech, ledger: _local(src, out, mech, ledger=ledger, policy="drop",
                                                                    rng=2)),
                        ("engine", lambda out, mech, ledger: _release(name, where, src, out, mech, ledger=ledger,
                                                                      policy="drop", rng=2, piece_bytes=700))):
        with Ledger(tmp_path / f"{label}.db", budget=20.0) as ledger:
            ind = call(tmp_path / f"{label}-i.csv", Independent(0.75), ledger)
            pred = call(tmp_path / f"{label}-p.csv", Predictive(1.0, 0.2, 2.0), ledger)
            spent.append((ledger.spent(persons).tolist(), ind.reserved.tolist(), pred.reserved.tolist(),
                          ind.withheld, ind.report.fresh.tolist(), ind.stats.rows))
    assert spent[1] == spent[0]
    assert spent[0][3] > 0  # the budget withheld some rows (the first ones of each person are written)
    local, eng = _by_person(_read(tmp_path / "local-i.csv")), _by_person(_read(tmp_path / "engine-i.csv"))
    assert eng == local


def test_a_refused_run_writes_and_spends_nothing(tmp_path, engine):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(80, 4))
    out = tmp_path / "out.csv"
    with Ledger(tmp_path / "l.db", budget=2.0) as ledger:
        for mech in (Independent(1.0), Predictive(3.0, 0.5, 1.0), Independent(spread=5.0)):
            with pytest.raises(BudgetExceededError):
                _release(name, where, src, out, mech, ledger=ledger, piece_bytes=500)
        assert ledger.spent(["p0", "p1", "p2", "p3"]).tolist() == [0.0] * 4
    assert not out.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary or scratch left


def test_a_fix_out_of_order_is_refused_as_the_local_engine_refuses_it(tmp_path, engine):
    name, where = engine
    rows = _rows(50, 3)
    rows[30] = (rows[30][0], -1, *rows[30][2:])
    src = _csv(tmp_path / "in.csv", rows)
    with pytest.raises(ValidationError) as local:
        _local(src, tmp_path / "a.csv", Independent(1.0))
    with pytest.raises(ValidationError) as got:
        _release(name, where, src, tmp_path / "b.csv", Independent(1.0), piece_bytes=300)
    assert str(got.value) == str(local.value) and "line 32" in str(got.value)
    assert not (tmp_path / "b.csv").exists()


GRID = "48.7,2.2,49.1,2.5"


def _spread_mechanisms() -> list[Any]:
    return [Independent(spread=5.0), PerPlace(CellGrid.over(GRID, 1.0), spread=3.0),
            Predictive(1.0, 0.2, 2.0, spread=4.0), Predictive(manager="adaptive", spread=6.0)]


@pytest.mark.parametrize("which", [0, 1, 2, 3], ids=["independent", "per-place", "predictive", "adaptive"])
def test_a_spread_budget_gives_each_person_the_local_engines_eps_and_charges(tmp_path, engine, which):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(150, 6))
    # partition 0's stream; per place, the driver's (every place is drawn there, from the stream after the pieces')
    stream = np.random.default_rng(np.random.SeedSequence(4, spawn_key=(1 if which == 1 else 0,)))
    local = _local(src, tmp_path / "local.csv", _spread_mechanisms()[which], rng=stream)
    one = _release(name, where, src, tmp_path / "one.csv", _spread_mechanisms()[which], rng=4, piece_bytes=1 << 20)
    many = _release(name, where, src, tmp_path / "many.csv", _spread_mechanisms()[which], rng=4, piece_bytes=600)
    assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()  # each person's own eps
    for f in ("persons", "spent_units", "fresh", "reused", "tests", "passed"):
        assert getattr(one.report, f).tolist() == getattr(local.report, f).tolist(), f
    for got in (one, many):
        assert got.reserved.tolist() == local.reserved.tolist() and got.withheld == local.withheld == 0
        assert got.report.persons.tolist() == local.report.persons.tolist()
        assert (got.report.spent_units <= got.reserved).all()
    assert _by_person(_read(tmp_path / "many.csv")) == _by_person(_read(tmp_path / "local.csv"))
    if which in (0, 1):  # independent and per place spend their shares whatever is drawn: as locally
        for f in ("spent_units", "fresh", "reused"):
            assert getattr(many.report, f).tolist() == getattr(local.report, f).tolist(), f


def test_a_spread_budget_too_thin_for_a_person_is_refused_as_locally(tmp_path, engine):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(60, 2))
    with pytest.raises(ValidationError) as local:
        _local(src, tmp_path / "a.csv", Independent(spread=1e-9))
    with pytest.raises(ValidationError) as got:
        _release(name, where, src, tmp_path / "b.csv", Independent(spread=1e-9), piece_bytes=300)
    assert str(got.value) == str(local.value) and "person 'p" in str(got.value)
    assert not (tmp_path / "b.csv").exists()


def _places(path: Path) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """The releases of each (person, cell of the fix): one per place."""
    grid = CellGrid.over(GRID, 1.0)
    out: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    notes = {r[4]: (r[2], r[3]) for r in _rows(150, 6)}
    for r in _read(path):
        cell = int(grid.locate(np.array([notes[r["note"]]]))[0])
        out[(r["user"], str(cell))].add((r["lat"], r["lon"]))
    return dict(out)


def test_an_accounted_per_place_release_charges_and_memoizes_what_the_local_engine_does(tmp_path, engine):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(150, 6))
    persons = [f"p{i}" for i in range(6)]
    grid = CellGrid.over(GRID, 1.0)
    settle_stream = np.random.default_rng(np.random.SeedSequence(5, spawn_key=(1,)))  # the driver's: 1 piece
    with Ledger(tmp_path / "local.db", budget=2.5) as ledger:
        local = _local(src, tmp_path / "local.csv", PerPlace(grid, 1.0), ledger=ledger, policy="drop",
                       rng=settle_stream)
        local_spent = ledger.spent(persons).tolist()
    with Ledger(tmp_path / "engine.db", budget=2.5) as ledger:
        one = _release(name, where, src, tmp_path / "one.csv", PerPlace(grid, 1.0), ledger=ledger, policy="drop",
                       rng=5, piece_bytes=1 << 20)
        assert ledger.spent(persons).tolist() == local_spent
        assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()  # places drawn alike
        assert one.reserved.tolist() == local.reserved.tolist() and one.withheld == local.withheld > 0
        for f in ("persons", "spent_units", "fresh", "reused"):
            assert getattr(one.report, f).tolist() == getattr(local.report, f).tolist(), f
        # a second run, on many partitions: the places paid for are read back from the memo, at no cost
        again = _release(name, where, src, tmp_path / "again.csv", PerPlace(grid, 1.0), ledger=ledger,
                         policy="drop", rng=6, piece_bytes=600)
        assert again.report.fresh.tolist() == [0] * 6 and again.reserved.tolist() == [0] * 6
        assert ledger.spent(persons).tolist() == local_spent
        assert _places(tmp_path / "again.csv") == _places(tmp_path / "one.csv")  # the same release per place
        assert all(len(v) == 1 for v in _places(tmp_path / "again.csv").values())


def test_an_accounted_per_place_run_on_many_partitions_spends_the_local_engines_charges(tmp_path, engine):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(150, 6))
    persons = [f"p{i}" for i in range(6)]
    grid = CellGrid.over(GRID, 1.0)
    got = []
    for label, call in (("local", lambda out, ledger: _local(src, out, PerPlace(grid, 1.0), ledger=ledger,
                                                            policy="drop", rng=2)),
                        ("engine", lambda out, ledger: _release(name, where, src, out, PerPlace(grid, 1.0),
                                                                ledger=ledger, policy="drop", rng=2,
                                                                piece_bytes=500))):
        with Ledger(tmp_path / f"{label}.db", budget=4.0) as ledger:
            run1 = call(tmp_path / f"{label}.csv", ledger)
            got.append((ledger.spent(persons).tolist(), run1.reserved.tolist(), run1.withheld,
                        run1.report.fresh.tolist(), run1.report.reused.tolist()))
            call(tmp_path / f"{label}-2.csv", ledger)  # the places of the first run, read back from the memo
            first, second = _places(tmp_path / f"{label}.csv"), _places(tmp_path / f"{label}-2.csv")
            assert all(second[k] == v for k, v in first.items())
    assert got[1] == got[0]
    assert _by_person(_read(tmp_path / "engine.csv")) == _by_person(_read(tmp_path / "local.csv"))
    assert all(len(v) == 1 for v in _places(tmp_path / "engine.csv").values())


def test_a_refused_per_place_run_writes_spends_and_memoizes_nothing(tmp_path, engine):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(150, 6))
    grid = CellGrid.over(GRID, 1.0)
    out = tmp_path / "out.csv"
    with Ledger(tmp_path / "l.db", budget=1.0) as ledger:
        with pytest.raises(BudgetExceededError):
            _release(name, where, src, out, PerPlace(grid, 1.0), ledger=ledger, piece_bytes=500)
        assert ledger.spent([f"p{i}" for i in range(6)]).tolist() == [0.0] * 6
        run1 = _release(name, where, src, tmp_path / "after.csv", PerPlace(grid, 1.0), ledger=ledger,
                        policy="drop", piece_bytes=500)
        assert run1.report.reused.sum() + run1.report.fresh.sum() > 0 and run1.report.fresh.tolist() == [1] * 6
    assert not out.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary or scratch left


def test_progress_is_told_the_rows_as_partitions_complete(tmp_path, engine):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(200, 8))
    ticks: list[tuple[int, int | None, str]] = []
    _release(name, where, src, tmp_path / "out.csv", Independent(1.0), piece_bytes=800,
             progress=lambda done, total, msg: ticks.append((done, total, msg)))
    assert ticks and ticks[-1][:2] == (200, 200) and "partitions done" in ticks[-1][2]
    assert [t[0] for t in ticks] == sorted(t[0] for t in ticks) and all(t[1] == 200 for t in ticks)


def test_engine_options_are_checked_against_the_engine(tmp_path):
    src = _csv(tmp_path / "in.csv", _rows(10, 2))
    with pytest.raises(ValidationError, match="'chunk_rows' is for engine='local'"):
        release_traces_file(src, tmp_path / "o.csv", mechanism=Independent(1.0), engine="dask", chunk_rows=5, **COLS)
    with pytest.raises(ValidationError, match="'piece_bytes' is for engine='dask' or engine='spark'"):
        release_traces_file(src, tmp_path / "o.csv", mechanism=Independent(1.0), piece_bytes=5, **COLS)
    with pytest.raises(ValidationError, match="'master' is for engine='spark'"):
        release_traces_file(src, tmp_path / "o.csv", mechanism=Independent(1.0), engine="dask", master="x", **COLS)
    with pytest.raises(ValidationError, match=r"an output in another format \(.*o\.geojson\) is for engine='local'"):
        release_traces_file(src, tmp_path / "o.geojson", mechanism=Independent(1.0), engine="dask", **COLS)
    with pytest.raises(ValidationError, match="rng must be None or an int"):
        release_traces_file(src, tmp_path / "o.csv", mechanism=Independent(1.0), engine="dask",
                            rng=np.random.default_rng(0), **COLS)
    assert not list(tmp_path.glob("o.*"))


def test_the_command_runs_on_an_engine(tmp_path, engine):
    import json

    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(40, 3))
    extra = ["--scheduler", where["scheduler"]] if "scheduler" in where else []
    result = run("privatize-trace", src, "-o", tmp_path / "out.csv", "--user-column", "user", "--time-column", "t",
                 "--lat", "lat", "--lon", "lon", "--mechanism", "independent", "--epsilon", "1", "--budget", "5",
                 "--over-budget", "drop", "--drop", "note", "--engine", name, *extra, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["engine"] == name and summary["rows"] + summary["accounting"]["withheld_rows"] == 40
    assert summary["persons"] == 3
    spread = run("privatize-trace", src, "-o", tmp_path / "out2.csv", "--user-column", "user", "--time-column",
                 "t", "--lat", "lat", "--lon", "lon", "--mechanism", "independent", "--spread-budget", "5", "--drop",
                 "note", "--engine", name, *extra, "--json")
    assert spread.exit_code == 0, spread.output
    assert json.loads(spread.stdout)["rows"] == 40
    assert "partitions" not in spread.stderr and "rows/s" not in spread.stderr  # no progress in a pipe
