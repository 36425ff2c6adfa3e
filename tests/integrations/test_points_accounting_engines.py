"""privatize-points with per-person accounting on Dask and Spark agrees with the local engine.

The driver runs the local engine's first pass and plan (one reservation per job); the
pieces carry the rows they write and, for consistent releases, their releases. Small
pieces (a few records each) so that the plan is cut across several partitions.
Oracles: the local engine's output (a consistent repeat is read back from the ledger, so
the two outputs must be equal byte for byte), the ledger's spend, and the input's records.
"""

from __future__ import annotations

import csv
import io
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp._random import check_rng
from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError
from metricdp.integrations._points import privatize_points_engine
from metricdp.location.lattice import LatticePlane
from metricdp.location.release import PointSettings, full_precision, make_release, validator
from metricdp.streaming.accounted import Accounting
from metricdp.streaming.points import privatize_points_file
from tests.cli_helpers import assert_one_line_error, run
from tests.integrations.conftest import dask_unavailable, spark_unavailable

pytestmark = pytest.mark.slow  # engines start clusters; CI runs these in its full phase

SETTINGS = PointSettings(1.0, LatticePlane(48.85, 2.35))
USERS = [f"u{i}" for i in range(5)]


@pytest.fixture(params=[
    pytest.param("dask", marks=pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))),
    pytest.param("spark", marks=pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))),
])
def engine(request: pytest.FixtureRequest) -> Any:
    if request.param == "dask":
        where = {"scheduler": request.getfixturevalue("scheduler")}
    else:
        request.getfixturevalue("spark")  # the active session is used as it is
        where = {}

    def call(*args: Any, **kw: Any) -> tuple[int, Any]:
        kw.setdefault("piece_bytes", 200)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return privatize_points_engine(request.param, *args, SETTINGS, **where, **kw)

    return call


def _input(tmp_path: Path, n: int = 80) -> Path:
    g = np.random.default_rng(3)
    rows = [["user", "lat", "note", "lon"]]
    for i in range(n):
        k = int(g.integers(4))  # few distinct points: consistent groups repeat
        rows.append([USERS[int(g.integers(5))], f"{48.80 + k / 100:.2f}", "a, b" if i % 3 else "",
                     f"{2.30 + k / 50:.2f}"])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    path = tmp_path / "in.csv"
    path.write_text(buf.getvalue(), newline="")
    return path


def _local(src: Path, out: Path, acc: Accounting) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return privatize_points_file(src, "lat", "lon", out, make_release(SETTINGS, check_rng(None)),
                                     keep=["user", "note"], full=full_precision(SETTINGS), accounting=acc,
                                     validate=validator(SETTINGS), epsilon=SETTINGS.epsilon)


def test_consistent_repeats_of_a_local_release_are_identical(engine: Any, tmp_path: Path) -> None:
    src = _input(tmp_path)
    reports: list[Any] = []
    with Ledger(tmp_path / "l.db", budget=100.0) as ledger:
        acc = Accounting("user", ledger=ledger, consistent=True, scope="points:t", mechanism="t")
        local = _local(src, tmp_path / "local.csv", acc)
        assert local.accounting is not None and local.accounting.fresh_releases > 0
        spent = ledger.spent(USERS).tolist()
        rows, _ = engine(src, "lat", "lon", tmp_path / "eng.csv", keep=["user", "note"], accounting=acc,
                         on_report=reports.append)
        assert rows == 80
        assert (tmp_path / "eng.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
        assert reports[0].fresh_releases == 0 and reports[0].extra["memo_hits"] == local.accounting.fresh_releases
        assert ledger.spent(USERS).tolist() == spent  # repeats are free
        assert [r["state"] for r in ledger.runs_table()] == ["committed", "committed"]


def test_drop_writes_the_granted_rows_whole(engine: Any, tmp_path: Path) -> None:
    src = _input(tmp_path)
    reports: list[Any] = []
    with Ledger(tmp_path / "l.db", budget=3.0) as ledger:  # 3 rows of 1 per km per person
        acc = Accounting("user", ledger=ledger, policy="drop", scope="points:t", mechanism="t")
        rows, _ = engine(src, "lat", "lon", tmp_path / "o.csv", keep=["user", "note"], accounting=acc,
                         on_report=reports.append)
        assert rows == 15 and reports[0].rows_released == 15 and reports[0].withheld_budget == 65
        assert ledger.spent(USERS).tolist() == [3.0] * 5
    got = list(csv.reader(io.StringIO((tmp_path / "o.csv").read_bytes().decode(), newline="")))
    want = list(csv.reader(io.StringIO(src.read_bytes().decode(), newline="")))
    assert got[0] == want[0] and len(got) == 16
    assert sorted(r[0] for r in got[1:]) == sorted(USERS * 3)
    notes = [(r[0], r[2]) for r in want[1:]]
    assert all((r[0], r[2]) in notes for r in got[1:])  # every written record is one of the input's
    assert all(abs(float(r[1]) - 48.8) < 1.5 for r in got[1:])  # released near the input, never blank


def test_parquet_cap(engine: Any, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"user": [f"u{i % 5}" for i in range(60)], "lat": [48.8] * 60, "lon": [2.3] * 60})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=7)
    rows, _ = engine(tmp_path / "in.parquet", "lat", "lon", tmp_path / "o.parquet", keep=["user"],
                     accounting=Accounting("user", max_rows_per_user=2))
    back = pq.read_table(tmp_path / "o.parquet")
    assert rows == 10 and sorted(back.column("user").to_pylist()) == sorted(USERS * 2)
    assert back.schema.equals(table.schema)


def test_refuse_writes_and_spends_nothing(engine: Any, tmp_path: Path) -> None:
    src = _input(tmp_path)
    with Ledger(tmp_path / "l.db", budget=2.0) as ledger:
        acc = Accounting("user", ledger=ledger, scope="points:t", mechanism="t")
        with pytest.raises(BudgetExceededError):
            engine(src, "lat", "lon", tmp_path / "o.csv", keep=["user", "note"], accounting=acc)
        assert ledger.runs_table() == []
    assert {p.name for p in tmp_path.iterdir()} <= {"in.csv", "l.db", "l.db.key", "l.db-wal", "l.db-shm"}


@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
def test_cli_dask_accounting(tmp_path: Path, scheduler: str) -> None:
    src = _input(tmp_path)
    base = ["privatize-points", src, "--lat", "lat", "--lon", "lon", "-e", "1/km", "--origin", "48.85,2.35",
            "--keep", "note", "--engine", "dask", "--scheduler", scheduler, "--user-column", "user"]
    res = run(*base, "-o", tmp_path / "o.csv", "--budget", "3", "--over-budget", "drop", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["engine"] == "dask" and out["rows"] == 15
    assert out["accounting"]["withheld_budget"] == 65 and out["accounting"]["eps_per_person_run"]["max"] == 3.0
    res = run(*base, "-o", tmp_path / "r.csv", "--budget", "3", "--ledger", tmp_path / "l.db")
    assert_one_line_error(res, "--over-budget refuse: 5 of 5 persons would exceed their budget of 3")
    assert not (tmp_path / "r.csv").exists() and not (tmp_path / "l.db").exists()  # created, refused: removed
