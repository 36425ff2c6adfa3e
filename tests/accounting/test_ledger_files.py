"""What a ledger path may be: another application's database, a device, a FIFO, a directory and '' are refused
before anything is written (bytes, journal mode and the directory listing unchanged); a new ledger that could not
be set up or was never spent in leaves no file behind."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from metricdp.accounting.ledger import Ledger, key_path_for
from metricdp.errors import ValidationError


def _foreign(path: Path) -> bytes:
    """Another application's SQLite database, in the rollback-journal mode it chose."""
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT)")  # a table name a ledger uses too
        con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        con.execute("INSERT INTO users (name) VALUES ('ann')")
    con.close()
    return path.read_bytes()


def _state(d: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in d.iterdir()}


@pytest.mark.parametrize("create", [True, False])
def test_another_applications_database_is_refused_untouched(tmp_path: Path, create: bool) -> None:
    app = tmp_path / "app.db"
    data = _foreign(app)
    before = _state(tmp_path)
    with pytest.raises(ValidationError, match="not a metricdp ledger"):
        Ledger(app, budget=1.0 if create else None, create=create)
    assert app.read_bytes() == data and _state(tmp_path) == before  # no -wal, -shm, -journal, key
    with sqlite3.connect(f"{app.as_uri()}?mode=ro", uri=True) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"dear diary\n" * 20)
    before = _state(tmp_path)
    with pytest.raises(ValidationError, match="no SQLite header"):
        Ledger(junk, budget=1.0)
    assert _state(tmp_path) == before


@pytest.mark.parametrize("make", ["dir", "fifo", "device", "empty"])
def test_special_paths_are_refused(tmp_path: Path, make: str) -> None:
    if make == "dir":
        target, what = tmp_path / "d", "a directory"
        target.mkdir()
    elif make == "fifo":
        target, what = tmp_path / "f", "a FIFO"
        os.mkfifo(target)
    elif make == "device":
        target, what = Path("/dev/null"), "a device"
    else:
        target, what = "", "empty"  # type: ignore[assignment]
    before = _state(tmp_path)
    with pytest.raises(ValidationError, match=what):
        Ledger(target, budget=1.0)
    assert _state(tmp_path) == before
    assert not Path("/dev/null-journal").exists() and not Path("/dev/null-wal").exists()


def test_a_fifo_key_file_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(key_path_for(tmp_path / "l.db"), 0o600)
    result: list[BaseException] = []

    def attempt() -> None:
        try:
            Ledger(tmp_path / "l.db", budget=1.0)
        except BaseException as ex:  # the thread hands any outcome back
            result.append(ex)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "opening a FIFO key file hung"
    assert len(result) == 1 and isinstance(result[0], ValidationError) and "a FIFO" in str(result[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.db.key"]  # no ledger file was created


def test_a_key_directory_is_refused_before_the_ledger_is_created(tmp_path: Path) -> None:
    key_path_for(tmp_path / "l.db").mkdir()
    with pytest.raises(ValidationError, match=r"key file .* is a directory"):
        Ledger(tmp_path / "l.db", budget=1.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.db.key"]


def test_a_new_ledger_without_budget_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="is new: it needs a budget"):
        Ledger(tmp_path / "l.db")
    with pytest.raises(ValidationError, match="budget"):
        Ledger(tmp_path / "l.db", budget=-1.0)
    assert list(tmp_path.iterdir()) == []


def test_discard_removes_only_an_unspent_ledger_it_created(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    assert Ledger(path, budget=1.0).discard() is True
    assert list(tmp_path.iterdir()) == []  # database, journals and key gone
    with Ledger(path, budget=1.0) as led:
        led.commit(led.reserve(["ann"], 0.5, unit="").run_id)
    before = _state(tmp_path)
    assert Ledger(path).discard() is False  # opened, not created
    fresh = Ledger(tmp_path / "m.db", budget=1.0)
    fresh.reserve(["bob"], 0.25, unit="")
    assert fresh.discard() is False and (tmp_path / "m.db").exists()  # a reservation is never thrown away
    assert {k: v for k, v in _state(tmp_path).items() if k.startswith("l.db")} == before


def test_an_existing_empty_file_becomes_a_ledger_and_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    path.touch()
    led = Ledger(path, budget=1.0)
    assert led.budget == 1.0
    assert led.discard() is False and path.exists()  # the file was the caller's, not the ledger's
