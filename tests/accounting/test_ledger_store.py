"""The bulk reservation against hand-computed ledgers: spent, remaining, refused persons, run records; the
table layouts (WITHOUT ROWID for new SQLite ledgers, rowid tables of older ones) and the totals' read-back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from metricdp.accounting import _store
from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError

pa = pytest.importorskip("pyarrow")
E = 10**12  # units per eps


def _runs(led: Ledger) -> list[tuple[str, str, int, int, int, float]]:
    return [(r["run"], r["state"], r["rows"], r["withheld"], r["persons"], r["eps_spent"]) for r in led.runs_table()]


@pytest.mark.parametrize("arrow", [False, True])
def test_reservations_by_hand_on_three_persons(tmp_path: Path, arrow: bool) -> None:
    """Budget 1: ann 2 rows, bob 1, cy 3 at eps 0.25, then everyone 2 more rows, refused and dropped by hand."""
    led = Ledger(tmp_path / "l.db", budget=1.0)
    ids = (lambda xs: pa.array(xs)) if arrow else (lambda xs: np.array(xs))
    r1 = led.reserve(ids(["ann", "bob", "cy"]), 0.25, np.array([2, 1, 3]), run_id="r1", unit="")
    assert r1.grant.granted.tolist() == [2, 1, 3] and r1.totals is not None
    assert r1.totals.tolist() == [E // 2, E // 4, 3 * E // 4]
    led.commit("r1")
    assert led.spent(["ann", "bob", "cy", "dan"]).tolist() == [0.5, 0.25, 0.75, 0.0]
    assert led.remaining(["ann", "bob", "cy", "dan"]).tolist() == [0.5, 0.75, 0.25, 1.0]
    # refuse: cy would reach 1.25 > 1 -> nothing written, the error counts one person over
    with pytest.raises(BudgetExceededError, match="1 "):
        led.reserve(ids(["ann", "bob", "cy"]), 0.25, np.array([2, 2, 2]), run_id="r2", unit="")
    assert led.spent(["ann", "bob", "cy"]).tolist() == [0.5, 0.25, 0.75]
    # drop: cy gets 1 of 2, ann and bob all; dan (new) 4 of 5
    r3 = led.reserve(ids(["cy", "ann", "dan", "bob"]), 0.25, np.array([2, 2, 5, 2]), policy="drop", run_id="r3",
                     unit="")
    assert r3.grant.persons.tolist() == ["ann", "bob", "cy", "dan"]
    assert r3.grant.requested.tolist() == [2, 2, 2, 5] and r3.grant.granted.tolist() == [2, 2, 1, 4]
    assert r3.totals is not None and r3.totals.tolist() == [E, 3 * E // 4, E, E]
    assert led.spent(["ann", "bob", "cy", "dan"]).tolist() == [1.0, 0.75, 1.0, 1.0]
    led.abort("r3")
    assert led.spent(["ann", "bob", "cy", "dan"]).tolist() == [0.5, 0.25, 0.75, 0.0]
    assert _runs(led) == [("r1", "committed", 6, 0, 3, 1.5), ("r3", "aborted", 9, 2, 4, 0.0)]
    led.check_integrity()
    table = led.persons_table()
    assert sorted(table["total"].tolist()) == [0.25, 0.5, 0.75]


def _sql(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())


def test_new_ledgers_are_without_rowid_and_old_rowid_ledgers_keep_working(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    new = tmp_path / "new.db"
    Ledger(new, budget=1.0).close()
    assert all(_sql(new)[t].endswith("WITHOUT ROWID") for t in ("persons", "charges", "memo"))
    old = tmp_path / "old.db"
    monkeypatch.setattr(_store.SQLite, "keyed", "")  # the layout of ledgers created before WITHOUT ROWID
    with Ledger(old, budget=1.0) as led:
        led.reserve(["ann", "bob"], 0.5, [1, 1], run_id="a", unit="")
        led.commit("a")
    monkeypatch.undo()
    assert not any("WITHOUT ROWID" in _sql(old)[t] for t in ("persons", "charges", "memo"))
    with Ledger(old) as led:  # reopened by this version: same SQL, same answers
        r = led.reserve(["bob", "cy"], 0.5, [1, 1], run_id="b", unit="")
        assert r.totals is not None and r.totals.tolist() == [E, E // 2]
        with pytest.raises(BudgetExceededError):
            led.reserve(["bob"], 0.5, [1], unit="")
        assert led.spent(["ann", "bob", "cy"]).tolist() == [0.5, 1.0, 0.5]
        led.check_integrity()
    assert not any("WITHOUT ROWID" in _sql(old)[t] for t in ("persons", "charges", "memo"))


def test_pairs_parse_the_concatenated_decimals_and_fall_back_to_rows() -> None:
    conn = sqlite3.connect(":memory:")
    tx = _store.SQLiteTx(conn)
    conn.execute("CREATE TABLE t (i INTEGER, v INTEGER)")
    assert [a.tolist() for a in tx.pairs("SELECT i, v FROM t")] == [[], []]
    rows = [(5, 0), (0, 2**63 - 1), (9_999_999_999, 10**12), (3, 7)]
    conn.executemany("INSERT INTO t VALUES (?, ?)", rows)
    at, val = tx.pairs("SELECT i, v FROM t ORDER BY i")
    assert list(zip(at.tolist(), val.tolist(), strict=True)) == sorted(rows)
    conn.execute("INSERT INTO t VALUES (8, -3)")  # outside the fixed widths: read as tuples instead
    at, val = tx.pairs("SELECT i, v FROM t ORDER BY i")
    assert list(zip(at.tolist(), val.tolist(), strict=True)) == sorted([*rows, (8, -3)])


def test_a_run_past_bigint_units_is_recorded_exactly_and_the_ledger_reopens(tmp_path: Path) -> None:
    """3 persons at 3.5e6 eps are 1.05e19 units (1e-12 eps each): past 2**63 - 1, where SQLite's SUM raised
    'integer overflow' on the next open and numpy's int64 sum wrapped the run's recorded spend."""
    path = tmp_path / "big.db"
    with Ledger(path, budget=4e6) as book:
        r = book.reserve(["a", "b", "c"], 3.5e6)
        book.commit(r.run_id)
        book.reserve(["a"], 1.0, run_id="small")  # a second run, left reserved
    assert 3 * 3_500_000 * 10**12 > 2**63
    with Ledger(path) as book:  # the open checks persons == charges == runs, exactly
        runs = {x["run"]: x for x in book.runs_table()}
        assert runs[r.run_id]["eps_spent"] == pytest.approx(1.05e7, rel=1e-15)
        assert runs["small"]["eps_spent"] == pytest.approx(1.0)
        assert book.spent(["a", "b", "c"]).tolist() == [3_500_001.0, 3_500_000.0, 3_500_000.0]
        book.check_integrity()
    with sqlite3.connect(path) as con:  # the run's spend split as units_hi * 2**62 + units
        hi, lo = con.execute("SELECT units_hi, units FROM runs WHERE run = ?", (r.run_id,)).fetchone()
    assert hi * _store.RUN_UNITS_SPLIT + lo == 3 * 3_500_000 * 10**12 and 0 <= lo < _store.RUN_UNITS_SPLIT


def test_a_schema_1_ledger_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Ledger(path, budget=10.0) as book:
        book.commit(book.reserve(["a", "b"], 2.0, run_id="r1").run_id)
    with sqlite3.connect(path) as con:  # what schema 1 wrote: no units_hi
        con.execute("ALTER TABLE runs DROP COLUMN units_hi")
        con.execute("UPDATE meta SET v = '1' WHERE k = 'version'")
    with Ledger(path) as book:
        assert [x["eps_spent"] for x in book.runs_table()] == [4.0]
        book.commit(book.reserve(["a"], 1.0, run_id="r2").run_id)
        assert book.spent(["a", "b"]).tolist() == [3.0, 2.0]
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT v FROM meta WHERE k = 'version'").fetchone()[0] == _store.SCHEMA_VERSION == "2"
        assert "units_hi" in [c[1] for c in con.execute("PRAGMA table_info(runs)")]
