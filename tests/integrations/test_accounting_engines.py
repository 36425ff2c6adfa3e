"""Per-person accounting on the Dask and Spark engines agrees with the local engine.

The driver plans as the local engine plans (one reservation per job); the pieces carry
the rows they write. Small pieces (a few records each) so that the plan is cut across
many partitions.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.accounting.ledger import Ledger
from metricdp.mechanisms.base import certify
from metricdp.streaming.accounted import Accounting
from metricdp.streaming.files import privatize_file
from tests.cli_helpers import assert_one_line_error, run

pytestmark = pytest.mark.slow  # engines start clusters; CI runs these in its full phase

LABELS = ["Paris", "Lyon", "Lille", "Nice"]


@pytest.fixture
def mech() -> Any:
    latlon = [[48.8566, 2.3522], [45.7640, 4.8357], [50.6292, 3.0573], [43.7102, 7.2620]]
    space = MetricSpace.from_points(latlon, LABELS, metric="haversine")
    m = np.exp(-0.004 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 0.004, "exponential")


@pytest.fixture(params=["dask", "spark"])
def engine(request: pytest.FixtureRequest) -> Any:
    if request.param == "dask":
        from metricdp.integrations.dask import privatize_file_dask

        address = request.getfixturevalue("scheduler")
        return lambda *a, **k: privatize_file_dask(*a, scheduler=address, piece_bytes=120, **k)
    request.getfixturevalue("spark")  # an active session, used as it is
    from metricdp.integrations.spark import privatize_file_spark

    return lambda *a, **k: privatize_file_spark(*a, piece_bytes=120, **k)


def _input(tmp_path: Path) -> Path:
    g = np.random.default_rng(4)
    rows = [["user", "t", "city"]] + [[f"u{int(g.integers(6))}", f"r{i}", LABELS[int(g.integers(4))]]
                                      for i in range(90)]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    path = tmp_path / "in.csv"
    path.write_text(buf.getvalue(), newline="")
    return path


def test_consistent_repeats_of_a_local_release_are_identical(engine: Any, mech: Any, tmp_path: Path) -> None:
    inp = _input(tmp_path)
    reports: list[Any] = []
    with Ledger(tmp_path / "l.db", budget=10.0) as ledger:
        acc = Accounting("user", ledger=ledger, consistent=True, scope="m")
        local = privatize_file(mech, inp, "city", tmp_path / "local.csv", accounting=acc, chunk_rows=7)
        assert local.accounting is not None and local.accounting.fresh_releases > 0
        spent = ledger.spent([f"u{i}" for i in range(6)]).tolist()
        rows = engine(mech, inp, "city", tmp_path / "engine.csv", accounting=acc, on_report=reports.append)
        assert rows == 90
        assert (tmp_path / "engine.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
        assert reports[0].fresh_releases == 0 and reports[0].extra["memo_hits"] == local.accounting.fresh_releases
        assert ledger.spent([f"u{i}" for i in range(6)]).tolist() == spent  # repeats are free
        assert [r["state"] for r in ledger.runs_table()] == ["committed", "committed"]


def test_drop_writes_the_granted_rows_whole(engine: Any, mech: Any, tmp_path: Path) -> None:
    inp = _input(tmp_path)
    reports: list[Any] = []
    with Ledger(tmp_path / "l.db", budget=0.012) as ledger:  # 3 rows of 0.004 per person
        acc = Accounting("user", ledger=ledger, policy="drop")
        rows = engine(mech, inp, "city", tmp_path / "o.csv", accounting=acc, on_report=reports.append)
        assert rows == 18 and reports[0].rows_released == 18 and reports[0].withheld_budget == 72
        assert ledger.spent([f"u{i}" for i in range(6)]).tolist() == [0.012] * 6
    got = (tmp_path / "o.csv").read_bytes().split(b"\r\n")
    src = inp.read_bytes().split(b"\r\n")
    assert got[0] == src[0] and got[-1] == b""
    heads = [line.rsplit(b",", 1)[0] for line in got[1:-1]]
    assert heads == [line.rsplit(b",", 1)[0] for line in src[1:-1] if line.rsplit(b",", 1)[0] in set(heads)]
    assert sorted(h.split(b",")[0] for h in heads) == sorted([f"u{i}".encode() for i in range(6)] * 3)


def test_parquet_cap(engine: Any, mech: Any, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"user": [f"u{i % 5}" for i in range(60)], "city": [LABELS[i % 4] for i in range(60)]})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=7)
    rows = engine(mech, tmp_path / "in.parquet", "city", tmp_path / "o.parquet",
                  accounting=Accounting("user", max_rows_per_user=2))
    back = pq.read_table(tmp_path / "o.parquet")
    assert rows == 10 and sorted(back.column("user").to_pylist()) == sorted([f"u{i}" for i in range(5)] * 2)


def test_cli_refuse_on_an_engine_writes_and_spends_nothing(mech: Any, tmp_path: Path, scheduler: str) -> None:
    mech.save(tmp_path / "m.npz")
    inp = _input(tmp_path)
    res = run("privatize", tmp_path / "m.npz", inp, "-c", "city", "-o", tmp_path / "o.csv", "--engine", "dask",
              "--scheduler", scheduler, "--user-column", "user", "--budget", "0.012", "--ledger", tmp_path / "l.db")
    assert_one_line_error(res, "--over-budget refuse: 6 of 6 persons would exceed their budget of 0.012")
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "l.db").exists()  # created, refused: removed
