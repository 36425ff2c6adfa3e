"""privatize-numbers on the engines: the local engine's number rule, errors and bytes, piece by piece.

Oracles: the local engine itself (:func:`metricdp.streaming.numbers.privatize_numbers_file`).
Where the release is determined (epsilon * step = 60: a move has probability below
1e-26) the engines' output must be the local engine's byte for byte, which checks every
byte that is not a draw (header, other columns, quoting, dropped columns, withheld
rows); where it is random, the released column must follow the mechanism's exact law
(chi-square) and a seeded run must replay itself. Small pieces, so a file is cut across
several partitions.
"""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp.accounting.ledger import Ledger
from metricdp.errors import ValidationError
from metricdp.integrations.numbers import privatize_numbers_engine
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.streaming.accounted import Accounting
from metricdp.streaming.numbers import privatize_numbers_file
from tests.cli_helpers import assert_one_line_error, run
from tests.integrations.conftest import dask_unavailable, spark_unavailable

slow = pytest.mark.slow  # engines start clusters; CI runs these in its full phase
GRID = NumericGrid("0", "9", "1")
SURE = number_mechanism(GRID, 60.0)  # a move has probability < 1e-26: the release is determined


@pytest.fixture(params=[
    pytest.param("dask", marks=pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))),
    pytest.param("spark", marks=pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))),
])
def engine(request: pytest.FixtureRequest) -> Any:
    """``engine(mechanism, src, column, out, **options)`` on a shared cluster, pieces of ~150 bytes."""
    if request.param == "dask":
        where = {"scheduler": request.getfixturevalue("scheduler")}
    else:
        request.getfixturevalue("spark")  # the active session is used as it is
        where = {}

    def call(*args: Any, **kw: Any) -> int:
        kw.setdefault("piece_bytes", 150)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return privatize_numbers_engine(request.param, *args, **where, **kw)

    return call


def _input(tmp_path: Path, n: int = 120) -> Path:
    g = np.random.default_rng(8)
    rows = [["user", "age", "note", "kwh"]]
    for i in range(n):
        age = str(int(g.integers(10)))
        rows.append([f"u{int(g.integers(5))}", f'{age}.0' if i % 7 == 0 else age, "a, b" if i % 3 else "",
                     f"{i / 10}"])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL).writerows(rows)
    path = tmp_path / "in.csv"
    path.write_text(buf.getvalue(), newline="")
    return path


def _local(mech: Any, src: Path, out: Path, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privatize_numbers_file(mech, src, "age", out, **kw)


@slow
def test_csv_is_the_local_engines_bytes_where_the_release_is_determined(engine: Any, tmp_path: Path) -> None:
    src = _input(tmp_path)
    data = src.read_bytes().replace(b'\r\nu1,3,', b'\r\nu1,"3",')  # a quoted released field stays quoted
    src.write_bytes(data)
    local = _local(SURE, src, tmp_path / "local.csv", drop=["kwh"], keep=["user", "note"])
    rows = engine(SURE, src, "age", tmp_path / "eng.csv", drop=["kwh"], keep=["user", "note"])
    assert rows == local.rows == 120
    assert (tmp_path / "eng.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    assert b"kwh" not in (tmp_path / "eng.csv").read_bytes() and b'"3"' in (tmp_path / "eng.csv").read_bytes()


@slow
def test_parquet_is_the_local_engines_table(engine: Any, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"id": list(range(60)), "age": pa.array([float(i % 12) for i in range(60)]),
                      "dec": pa.array([i % 10 for i in range(60)], pa.int16())})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=7, compression="zstd")
    kw = {"out_of_range": "clamp"}  # 10 and 11 move to 9
    _local(SURE, tmp_path / "in.parquet", tmp_path / "local.parquet", **kw)
    rows = engine(SURE, tmp_path / "in.parquet", "age", tmp_path / "eng.parquet", **kw)
    a, b = pq.read_table(tmp_path / "local.parquet"), pq.read_table(tmp_path / "eng.parquet")
    assert rows == 60 and a.equals(b) and b.schema.equals(table.schema)
    assert b.column("age").to_pylist() == [float(min(i % 12, 9)) for i in range(60)]
    assert pq.ParquetFile(tmp_path / "eng.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    # an integer column released on the grid keeps its type
    rows = engine(SURE, tmp_path / "in.parquet", "dec", tmp_path / "dec.parquet")
    assert pq.read_table(tmp_path / "dec.parquet").column("dec").equals(table.column("dec"))


@slow
def test_released_column_follows_the_exact_law(engine: Any, tmp_path: Path) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    mech = number_mechanism(GRID, 0.4)
    src = tmp_path / "in.csv"
    src.write_text("id,age\n" + "".join(f"{i},3\n" for i in range(3000)))
    engine(mech, src, "age", tmp_path / "o.csv", piece_bytes=4000, seed=3)  # a fixed draw
    got = np.array([int(r.split(",")[1]) for r in (tmp_path / "o.csv").read_text().splitlines()[1:]])
    counts = np.bincount(got, minlength=10)
    expected = mech.matrix()[3] * got.size
    assert scipy_stats.chisquare(counts, expected).pvalue > 1e-4
    assert counts[3] < 0.5 * got.size  # really drawn (a pass-through would put all 3000 at 3)


@slow
def test_seeded_runs_replay_and_other_bytes_stay(engine: Any, tmp_path: Path) -> None:
    mech = number_mechanism(GRID, 0.5)
    src = _input(tmp_path)
    engine(mech, src, "age", tmp_path / "a.csv", seed=5, keep=["user", "note", "kwh"])
    engine(mech, src, "age", tmp_path / "b.csv", seed=5, keep=["user", "note", "kwh"])
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    want = list(csv.reader(io.StringIO(src.read_bytes().decode(), newline="")))
    got = list(csv.reader(io.StringIO((tmp_path / "a.csv").read_bytes().decode(), newline="")))
    assert [r[:1] + r[2:] for r in got] == [r[:1] + r[2:] for r in want]
    assert all(r[1] in {str(k) for k in range(10)} for r in got[1:])
    assert sum(a[1] != b[1] for a, b in zip(want[1:], got[1:], strict=True)) > 30


@slow
def test_refusals_are_the_local_engines_and_write_nothing(engine: Any, tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("id,age\n" + "".join(f"{i},{i % 10}\n" for i in range(60)) + "60,x\n61,12\n62,3.5\n63,\n")
    with pytest.raises(ValidationError) as local:
        _local(SURE, src, tmp_path / "l.csv")
    with pytest.raises(ValidationError) as eng:
        engine(SURE, src, "age", tmp_path / "o.csv")
    assert str(eng.value) == str(local.value)
    assert "4 value(s) cannot be released" in str(eng.value) and "line 62: 'x' (not a number)" in str(eng.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


@slow
def test_accounting_consistent_repeat_of_a_local_release_is_identical(engine: Any, tmp_path: Path) -> None:
    mech = number_mechanism(GRID, 0.5)
    src = _input(tmp_path)
    users = [f"u{i}" for i in range(5)]
    reports: list[Any] = []
    with Ledger(tmp_path / "l.db", budget=100.0) as ledger:
        acc = Accounting("user", ledger=ledger, consistent=True, scope="numbers:t", mechanism="t")
        local = _local(mech, src, tmp_path / "local.csv", accounting=acc)
        assert local.accounting is not None and local.accounting.fresh_releases > 0
        spent = ledger.spent(users).tolist()
        rows = engine(mech, src, "age", tmp_path / "eng.csv", accounting=acc, on_report=reports.append)
        assert rows == 120
        assert (tmp_path / "eng.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
        assert reports[0].fresh_releases == 0 and reports[0].extra["memo_hits"] == local.accounting.fresh_releases
        assert ledger.spent(users).tolist() == spent  # repeats are free
        assert [r["state"] for r in ledger.runs_table()] == ["committed", "committed"]


@slow
def test_accounting_drop_and_cap_write_the_granted_rows_whole(engine: Any, tmp_path: Path) -> None:
    src = _input(tmp_path)
    reports: list[Any] = []
    with Ledger(tmp_path / "l.db", budget=180.0) as ledger:  # 3 rows of 60 per person
        acc = Accounting("user", ledger=ledger, policy="drop", scope="numbers:t", mechanism="t")
        rows = engine(SURE, src, "age", tmp_path / "o.csv", accounting=acc, on_report=reports.append)
        assert rows == 15 and reports[0].rows_released == 15 and reports[0].withheld_budget == 105
        assert ledger.spent([f"u{i}" for i in range(5)]).tolist() == [180.0] * 5
    got = (tmp_path / "o.csv").read_bytes().split(b"\r\n")
    src_lines = src.read_bytes().split(b"\r\n")
    assert got[0] == src_lines[0] and got[-1] == b""
    def grid_text(line: bytes) -> bytes:  # the release writes the grid point's text: 4.0 -> 4
        user, age, rest = line.split(b",", 2)
        return b",".join([user, str(int(float(age))).encode(), rest])

    assert set(got[1:-1]) <= {grid_text(x) for x in src_lines[1:-1]}  # whole records (the release is determined)
    assert sorted(line.split(b",")[0].strip(b'"') for line in got[1:-1]) == sorted(
        [f"u{i}".encode() for i in range(5)] * 3)
    rows = engine(SURE, src, "age", tmp_path / "cap.csv", accounting=Accounting("user", max_rows_per_user=2))
    assert rows == 10


@slow
def test_accounting_refuse_spends_and_writes_nothing(engine: Any, tmp_path: Path) -> None:
    from metricdp.errors import BudgetExceededError

    src = _input(tmp_path)
    with Ledger(tmp_path / "l.db", budget=60.0) as ledger:
        acc = Accounting("user", ledger=ledger, scope="numbers:t", mechanism="t")
        with pytest.raises(BudgetExceededError):
            engine(SURE, src, "age", tmp_path / "o.csv", accounting=acc)
        assert ledger.runs_table() == []
    assert not (tmp_path / "o.csv").exists()


# --------------------------------------------------------------------------------------------- CLI
def _cli(tmp_path: Path, *args: object) -> Any:
    src = tmp_path / "in.csv"
    if not src.exists():
        src.write_text("user,age\n" + "".join(f"u{i % 3},{i % 10}\n" for i in range(30)))
    return run("privatize-numbers", src, "-c", "age", "-e", "0.5", "--range", "0,9", "-o", tmp_path / "o.csv",
               *args)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--scheduler", "tcp://127.0.0.1:9"], "--scheduler is for --engine dask"),
    (["--master", "local[1]"], "--master is for --engine spark"),
    (["--engine", "spark", "--scheduler", "tcp://127.0.0.1:9"], "--scheduler is for --engine dask"),
    (["--engine", "dask", "--chunk-rows", "5"], "--chunk-rows is for --engine local"),
])
def test_cli_engine_options_belong_to_their_engine(tmp_path: Path, args: list[str], fragment: str) -> None:
    assert_one_line_error(_cli(tmp_path, *args), fragment)
    assert not (tmp_path / "o.csv").exists()


@slow
@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
def test_cli_dask_with_accounting(tmp_path: Path, scheduler: str) -> None:
    res = _cli(tmp_path, "--engine", "dask", "--scheduler", scheduler, "--user-column", "user", "--budget", "2",
               "--over-budget", "drop", "--json")
    assert res.exit_code == 0, res.output
    import json

    out = json.loads(res.stdout)
    assert out["engine"] == "dask" and out["rows"] == 12 and out["accounting"]["withheld_budget"] == 18
    assert out["accounting"]["eps_per_person_run"]["max"] == 2.0
    assert len((tmp_path / "o.csv").read_text().splitlines()) == 13
    res = _cli(tmp_path, "--engine", "dask", "--scheduler", scheduler, "--user-column", "user", "--budget", "2")
    assert_one_line_error(res, "--over-budget refuse: 3 of 3 persons would exceed their budget of 2")


@slow
@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
def test_cli_dask_refusal_is_one_line(tmp_path: Path, scheduler: str) -> None:
    (tmp_path / "in.csv").write_text("user,age\nu1,3\nu2,11\n")
    res = _cli(tmp_path, "--engine", "dask", "--scheduler", scheduler)
    assert_one_line_error(res, "column 'age': 1 value(s) cannot be released", "line 3: '11' (outside the range)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


# ------------------------------------------------------------------------------------ hostile shapes
def _numbers_shape(data: bytes) -> bytes:
    """A hostile shape of tests/integrations/test_hostile_engines.py with its labels a, b, c as numbers."""
    return data.replace(b"a", b"1").replace(b"b", b"2").replace(b"c", b"3")


@slow
@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
def test_hostile_shapes_are_refused_or_released_as_locally(tmp_path: Path, scheduler: str) -> None:
    """Differential: on every shape both engines refuse with the same message, or write the same bytes."""
    from tests.integrations.test_hostile_engines import SHAPES

    for k, (name, data, column) in enumerate(SHAPES):
        src = tmp_path / f"in{k}.csv"
        src.write_bytes(_numbers_shape(data))
        outcome = []
        for which in ("local", "dask"):
            out = tmp_path / f"{which}{k}.csv"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if which == "local":
                        privatize_numbers_file(SURE, src, column, out)
                    else:
                        privatize_numbers_engine("dask", SURE, src, column, out, scheduler=scheduler, piece_bytes=4)
                outcome.append(out.read_bytes())
            except ValidationError as ex:
                assert not out.exists(), name
                outcome.append(str(ex))
        assert outcome[0] == outcome[1], name
