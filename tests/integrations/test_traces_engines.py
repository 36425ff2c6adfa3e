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
from metricdp.pipeline.traces import Independent, PerPlace, Predictive, release_traces_file
from metricdp.spaces import haversine_rows_km
from tests.cli_helpers import assert_one_line_error, run

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
        for mech in (Independent(1.0), Predictive(3.0, 0.5, 1.0)):
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


@pytest.mark.parametrize("mech, kw, what", [
    (Independent(spread=5.0), {}, "a spread budget is for engine='local'"),
    (PerPlace(CellGrid.over("48.7,2.2,49.1,2.5", 1.0), 1.0), {"budget": 5.0},
     "an accounted per-place release is for engine='local'"),
])
def test_what_the_engines_do_not_release_is_refused_before_anything_is_read(tmp_path, engine, mech, kw, what):
    name, where = engine
    src = _csv(tmp_path / "in.csv", _rows(20, 2))
    with pytest.raises(ValidationError, match=what):
        _release(name, where, src, tmp_path / "out.csv", mech, **kw)
    assert not (tmp_path / "out.csv").exists()


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
    bad = run("privatize-trace", src, "-o", tmp_path / "out2.csv", "--user-column", "user", "--time-column", "t",
              "--lat", "lat", "--lon", "lon", "--mechanism", "independent", "--spread-budget", "5", "--drop", "note",
              "--engine", name, *extra)
    assert_one_line_error(bad, "--engine local")
    assert not (tmp_path / "out2.csv").exists()
