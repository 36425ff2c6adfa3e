"""`metricdp privatize` per person, what it refuses: ids that would merge or split persons,
ledgers of another unit or corrupted, outputs that would clobber the ledger or its key."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.accounting.ledger import Ledger
from metricdp.mechanisms.base import certify
from tests.cli_helpers import assert_one_line_error, run

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

LABELS = ["Paris", "Lyon", "Lille", "Nice"]
EPS = 0.004


def _mech(path: Path, metric: str) -> Path:
    """The four cities: haversine (eps per km) or euclidean on degrees (no unit)."""
    latlon = [[48.8566, 2.3522], [45.7640, 4.8357], [50.6292, 3.0573], [43.7102, 7.2620]]
    space = MetricSpace.from_points(latlon, LABELS, metric=metric)
    eps = EPS if metric == "haversine" else 0.4
    m = np.exp(-eps * np.asarray(space.distances) / 2)
    certify(m / m.sum(axis=1, keepdims=True), space, eps, "exponential").save(path)
    return path


@pytest.fixture
def km(tmp_path: Path) -> Path:
    return _mech(tmp_path / "km.npz", "haversine")


def _rows(path: Path, users: list[str]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows([["user", "city"], *[[u, "Paris"] for u in users]])
    return path


def test_parquet_binary_id_not_utf8_is_refused_with_its_row(km: Path, tmp_path: Path) -> None:
    """Was a pyarrow traceback (ArrowInvalid: Invalid UTF8 payload)."""
    src = tmp_path / "in.parquet"
    users = pa.array([b"ann", b"bob", b"cy", b"\xff\xfe", b"dan"], pa.binary())
    pq.write_table(pa.table({"user": users, "city": ["Paris"] * 5}), src)
    out = tmp_path / "out.parquet"
    for extra in ([], ["--budget", "1"], ["--consistent"], ["--ledger", str(tmp_path / "l.db"), "--budget", "1"]):
        result = run("privatize", km, src, "-c", "city", "-o", out, "--user-column", "user", *extra)
        assert_one_line_error(result, "in.parquet", "'user'", "not UTF-8", "row 4")
        assert not out.exists()
    assert not (tmp_path / "l.db.key").exists() or Ledger(tmp_path / "l.db").runs_table() == []


def test_parquet_ids_differing_by_a_nul_are_refused(km: Path, tmp_path: Path) -> None:
    """``"ann"`` and ``"ann\\0"`` were one person or an error naming nothing ("persons must be distinct")."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"user": ["ann", "bob", "ann\x00"], "city": ["Paris"] * 3}), src)
    out = tmp_path / "out.parquet"
    for extra in (["--budget", "1"], ["--ledger", str(tmp_path / "l.db"), "--budget", "1"]):
        result = run("privatize", km, src, "-c", "city", "-o", out, "--user-column", "user", *extra)
        assert_one_line_error(result, "in.parquet", "'user'", "NUL", "row 3")
        assert not out.exists()


def test_a_ledger_is_bound_to_one_distance_unit(km: Path, tmp_path: Path) -> None:
    """eps per km and eps of a unitless mechanism were summed into one total: a person could overspend."""
    plain = _mech(tmp_path / "deg.npz", "euclidean")
    src, ledger, out = _rows(tmp_path / "in.csv", ["ann", "ann", "bob"]), tmp_path / "l.db", tmp_path / "o.csv"
    base = ("privatize", km, src, "-c", "city", "-o", out, "--user-column", "user", "--drop", "user",
            "--ledger", ledger)
    assert run(*base, "--budget", "1").exit_code == 0
    out.unlink()
    result = run("privatize", plain, *base[2:])
    assert_one_line_error(result, "l.db", "per km", "unitless")
    assert not out.exists()
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT COUNT(*), MIN(state) FROM runs").fetchone() == (1, "committed")
        assert db.execute("SELECT v FROM meta WHERE k = 'unit'").fetchone() == ("km",)
    assert run(*base).exit_code == 0  # the same unit still runs


def test_ledger_unit_library_refusal_leaves_nothing(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.db", budget=1.0) as book:
        book.commit(book.reserve(["ann"], 0.1, unit="km").run_id)
        with pytest.raises(Exception, match="per km; this release's eps is per m"):
            book.reserve(["ann"], 0.1, unit="m")
        book.commit(book.reserve(["ann"], 0.1).run_id)  # no unit named: not checked (library callers)
        assert book.spent(["ann"]).tolist() == [pytest.approx(0.2)]
        assert len(book.runs_table()) == 2


def test_an_overlong_id_is_refused_with_its_line(km: Path, tmp_path: Path) -> None:
    """One 200 kB id among 200,000 persons was a MemoryError traceback (numpy asked for 149 GiB of '<U200000')."""
    src = _rows(tmp_path / "in.csv", ["ann", "bob", "x" * 257, "cy"])
    out = tmp_path / "o.csv"
    result = run("privatize", km, src, "-c", "city", "-o", out, "--user-column", "user", "--drop", "user")
    assert_one_line_error(result, "in.csv", "'user'", "257 bytes", "line 4")
    assert not out.exists()
    pq.write_table(pa.table({"user": ["ann", "é" * 129], "city": ["Paris"] * 2}), tmp_path / "in.parquet")
    result = run("privatize", km, tmp_path / "in.parquet", "-c", "city", "-o", tmp_path / "o.parquet",
                 "--user-column", "user", "--drop", "user")
    assert_one_line_error(result, "in.parquet", "258 bytes", "row 2")
    src = _rows(tmp_path / "ok.csv", ["ann", "y" * 256])  # at the limit: released
    assert run("privatize", km, src, "-c", "city", "-o", out, "--user-column", "user", "--drop", "user").exit_code == 0


@pytest.mark.parametrize(("sql", "says"), [
    ("DROP TABLE persons", "totals, their charges"),  # recreated empty on open: everyone's budget back
    ("DELETE FROM persons", "totals, their charges"),
    ("UPDATE persons SET total = 0", "totals, their charges"),
    ("UPDATE persons SET total = 'zz'", "totals, their charges"),  # was a ValueError traceback
    ("DELETE FROM charges", "totals, their charges"),
    ("UPDATE meta SET v = 'abc' WHERE k = 'budget'", "budget 'abc'"),  # was a ValueError traceback
    ("DELETE FROM meta WHERE k = 'key_check'", "key fingerprint"),  # was a KeyError traceback
])
def test_a_corrupted_ledger_is_refused(km: Path, tmp_path: Path, sql: str, says: str) -> None:
    src, ledger, out = _rows(tmp_path / "in.csv", ["ann", "ann", "bob"]), tmp_path / "l.db", tmp_path / "o.csv"
    base = ("privatize", km, src, "-c", "city", "-o", out, "--user-column", "user", "--drop", "user",
            "--ledger", ledger)
    assert run(*base, "--budget", "0.008").exit_code == 0  # ann has spent all of her budget
    out.unlink()
    with sqlite3.connect(ledger) as db:
        db.execute(sql)
    db.close()
    assert_one_line_error(run(*base), "l.db", "corrupted", says)
    assert not out.exists()
    assert_one_line_error(run("ledger", "show", ledger), "l.db", "corrupted")


@pytest.mark.parametrize("name", ["l.db", "l.db.key", "l.db-wal", "k"])
def test_the_output_never_overwrites_the_ledger_or_its_key(km: Path, tmp_path: Path, name: str) -> None:
    """`-o l.db --ledger l.db` replaced the ledger with the CSV (everyone's spend gone); same for its key."""
    src, ledger = _rows(tmp_path / "in.csv", ["ann", "bob"]), tmp_path / "l.db"
    base = ("privatize", km, src, "-c", "city", "--user-column", "user", "--drop", "user", "--ledger", ledger)
    assert run(*base, "-o", tmp_path / "o.csv", "--budget", "1").exit_code == 0
    (tmp_path / "l.db-wal").touch()
    key = (tmp_path / "l.db.key").read_bytes()
    extra = ("--ledger-key", tmp_path / "l.db.key") if name == "k" else ()
    target = tmp_path / ("l.db.key" if name == "k" else name)
    assert_one_line_error(run(*base, *extra, "-o", target), "refusing to write", name if name != "k" else "l.db.key")
    assert (tmp_path / "l.db.key").read_bytes() == key  # (SQLite itself checkpoints and removes the WAL)
    assert Ledger(ledger).spent(["ann", "bob"]).tolist() == [pytest.approx(EPS)] * 2


@pytest.mark.parametrize("json_out", [False, True])
def test_ledger_export_never_overwrites_the_ledger(km: Path, tmp_path: Path, json_out: bool) -> None:
    """`ledger export l.db --out l.db` replaced the ledger with its own export."""
    src, ledger = _rows(tmp_path / "in.csv", ["ann", "bob"]), tmp_path / "l.db"
    assert run("privatize", km, src, "-c", "city", "--user-column", "user", "--drop", "user", "--ledger", ledger,
               "-o", tmp_path / "o.csv", "--budget", "1").exit_code == 0
    flags = ["--json"] if json_out else []
    for target in ("l.db", "l.db.key", "l.db-wal"):
        assert_one_line_error(run("ledger", "export", ledger, *flags, "--out", tmp_path / target), "refusing", target)
    assert Ledger(ledger).spent(["ann", "bob"]).tolist() == [pytest.approx(EPS)] * 2
    assert run("ledger", "export", ledger, *flags, "--out", tmp_path / "e.txt").exit_code == 0
