"""The ledger's protocol on SQLite and PostgreSQL: reserve, commit, abort, memo, keys, refusals."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from metricdp.accounting.ledger import Ledger, key_path_for
from metricdp.errors import BudgetExceededError, ValidationError


def test_reserve_commit_abort(target: tuple[str, Path]) -> None:
    url, key = target
    with Ledger(url, budget=1.0, key_file=key) as ledger:
        r = ledger.reserve(["ann", "bob", "ann"], 0.25, mechanism="geo eps=0.25")
        assert r.grant.granted.tolist() == [2, 1]
        ledger.commit(r.run_id)
        ledger.commit(r.run_id)  # idempotent
        with pytest.raises(BudgetExceededError) as info:
            ledger.reserve(["ann"] * 3 + ["cy"], 0.25)
        assert (info.value.over, info.value.persons) == (1, 2)
        assert ledger.spent(["ann", "bob", "cy"]).tolist() == [0.5, 0.25, 0.0]  # nothing of the refused run
        d = ledger.reserve(["ann"] * 3 + ["cy"], 0.25, policy="drop", run_id="drop-1")
        assert d.grant.granted.tolist() == [2, 1] and d.grant.withheld == 1
        assert ledger.remaining(["ann", "cy"]).tolist() == [0.0, 0.75]
        ledger.abort("drop-1")
        ledger.abort("drop-1")  # idempotent
        assert ledger.spent(["ann", "cy"]).tolist() == [0.5, 0.0]
        with pytest.raises(ValidationError, match="aborted"):
            ledger.commit("drop-1")
        with pytest.raises(ValidationError, match="committed"):
            ledger.abort(r.run_id)
        with pytest.raises(ValidationError, match="already"):
            ledger.reserve(["ann"], 0.25, run_id="drop-1")
        with pytest.raises(ValidationError, match="not in ledger"):
            ledger.commit("nope")
        runs = ledger.runs_table()
        assert [(x["state"], x["rows"], x["withheld"], x["eps"]) for x in runs] == [
            ("committed", 3, 0, 0.25), ("aborted", 3, 1, 0.25)]
        assert runs[0]["mechanism"] == "geo eps=0.25"
        table = ledger.persons_table()
        assert sorted(table["total"].tolist()) == [0.25, 0.5]
        assert sorted(table["remaining"].tolist()) == [0.5, 0.75]
        ledger.check_integrity()
    with Ledger(url, key_file=key) as again:  # persistent; the budget is the stored one
        assert again.budget == 1.0
        assert again.spent(["ann", "bob"]).tolist() == [0.5, 0.25]
        with pytest.raises(ValidationError, match="budget of 1"):
            Ledger(url, budget=2.0, key_file=key)


def test_reservation_context(target: tuple[str, Path]) -> None:
    url, key = target
    ledger = Ledger(url, budget=1.0, key_file=key)
    with pytest.raises(RuntimeError), ledger.reservation(["a"], 0.5):
        raise RuntimeError("the release failed before publishing")
    assert ledger.spent(["a"]).tolist() == [0.0]
    with pytest.raises(RuntimeError), ledger.reservation(["a"], 0.5) as res:
        res.publishing()
        raise RuntimeError("failed while publishing")
    assert ledger.spent(["a"]).tolist() == [0.5]  # maybe published: stays spent
    with ledger.reservation(["a"], 0.5) as res:
        res.publishing()
    assert [r["state"] for r in ledger.runs_table()] == ["aborted", "reserved", "committed"]
    ledger.close()


def test_memo_reuses_only_paid_releases(target: tuple[str, Path]) -> None:
    url, key = target
    ledger = Ledger(url, budget=1.0, key_file=key)
    a = ledger.reserve(["p", "q"], 0.5)
    assert ledger.memo_store(a.run_id, "mech", ["p", "q"], ["x", "y"], np.array([3, 4])).tolist() == [3, 4]
    found, _ = ledger.memo_lookup("mech", ["p"], ["x"])
    assert not found.any()  # run a is not committed: not free yet
    b = ledger.reserve(["p"], 0.5)
    # b drew 9 for (p, x) but a stored 3 first: b publishes 3 and owns it (it paid too)
    assert ledger.memo_store(b.run_id, "mech", ["p"], ["x"], np.array([9])).tolist() == [3]
    ledger.abort(a.run_id)
    ledger.commit(b.run_id)
    found, rel = ledger.memo_lookup("mech", ["p", "q", "p"], ["x", "y", "z"])
    assert found.tolist() == [True, False, False]  # (q, y) died with run a
    assert rel[0] == 3
    assert not ledger.memo_lookup("other", ["p"], ["x"])[0].any()  # scoped by mechanism
    with pytest.raises(ValidationError, match="not reserved"):
        ledger.memo_store(b.run_id, "mech", ["p"], ["w"], np.array([1]))
    ledger.close()


def test_keyed_hashes_never_store_ids_or_values(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    secret_id, secret_value = "alice.secret@example.org", "48.8566-2.3522-home"
    with Ledger(path, budget=5.0) as ledger:
        r = ledger.reserve([secret_id, "bob-the-builder"], 0.5, mechanism="m")
        ledger.memo_store(r.run_id, "m", [secret_id], [secret_value], np.array([123456789]))
        ledger.commit(r.run_id)
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("ledger.db") and p.suffix != ".key")
    for text in (secret_id, "bob-the-builder", secret_value, "alice"):
        assert text.encode() not in data and text.encode("utf-16-le") not in data
    assert (123456789).to_bytes(8, "big") not in data
    key = key_path_for(path)
    assert (key.stat().st_mode & 0o777) == 0o600 and len(key.read_bytes()) == 32
    with Ledger(path) as ledger:
        assert ledger.spent([secret_id]).tolist() == [0.5]
        assert ledger.memo_lookup("m", [secret_id], [secret_value])[1].tolist() == [123456789]


def test_key_file_refusals(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger(path, budget=1.0).close()
    key = key_path_for(path)
    os.chmod(key, 0o644)
    with pytest.raises(ValidationError, match="readable by others"):
        Ledger(path).spent(["a"])
    os.chmod(key, 0o600)
    key.write_bytes(os.urandom(32))  # a different key: persons would silently restart from zero
    with pytest.raises(ValidationError, match="does not belong"):
        Ledger(path).spent(["a"])
    key.unlink()
    with pytest.raises(ValidationError, match="does not exist"):
        Ledger(path).reserve(["a"], 0.1)
    assert Ledger(path, create=False).runs_table() == []  # reports need no key


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="needs a budget"):
        Ledger(tmp_path / "new.db")
    with pytest.raises(ValidationError, match="does not exist"):
        Ledger(tmp_path / "absent.db", create=False)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(ValidationError, match="not a metricdp ledger"):
        Ledger(other, budget=1.0)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ValidationError, match="not a usable SQLite"):
        Ledger(junk, budget=1.0)
    with pytest.raises(ValidationError, match="key file"):
        Ledger("postgresql+psycopg://u@h/db", budget=1.0)
    with pytest.raises(ValidationError, match="file path"):
        Ledger("sqlite:///x.db", budget=1.0)
    ledger = Ledger(tmp_path / "l.db", budget=1.0)
    with pytest.raises(ValidationError, match="run id"):
        ledger.reserve(["a"], 0.1, run_id="bad id; DROP TABLE")
    with pytest.raises(ValidationError):
        ledger.reserve(["a"], -0.1)
    ledger.set_budget(0.5)
    assert Ledger(tmp_path / "l.db", budget=0.5).budget == 0.5


def test_memo_keys_points_and_odd_text(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db", budget=1.0)
    odd = "caf\udce9"  # an undecodable byte read with surrogateescape
    r = ledger.reserve([odd, "b"], 0.5)
    points = np.array([[48.8566, 2.3522], [41.9, 12.5]])
    assert ledger.memo_store(r.run_id, "m", [odd, "b"], points, np.array([1, 2])).tolist() == [1, 2]
    ledger.commit(r.run_id)
    found, rel = ledger.memo_lookup("m", [odd, "b", "b"], np.array([[48.8566, 2.3522], [41.9, 12.5], [41.9, 12.6]]))
    assert found.tolist() == [True, True, False] and rel[:2].tolist() == [1, 2]
    assert ledger.spent([odd]).tolist() == [0.5]
    with pytest.raises(ValidationError, match="finite"):
        ledger.memo_lookup("m", ["b"], np.array([np.nan]))
    ledger.close()


def test_memo_of_points(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db", budget=1.0)
    r = ledger.reserve(["a", "b"], 0.5)
    fresh = np.array([[48.85, 2.35], [41.9, 12.5]])
    stored = ledger.memo_store(r.run_id, "pl", ["a", "b"], ["home", "work"], fresh)
    assert np.array_equal(stored, fresh)
    ledger.commit(r.run_id)
    found, rel = ledger.memo_lookup("pl", ["a", "b", "a"], ["home", "work", "gym"], width=2)
    assert found.tolist() == [True, True, False]
    assert np.array_equal(rel[:2], fresh) and np.isnan(rel[2]).all()
    with pytest.raises(ValidationError, match="not indices"):
        ledger.memo_lookup("pl", ["a"], ["home"])
    r2 = ledger.reserve(["a"], 0.25)
    with pytest.raises(ValidationError, match="finite point"):
        ledger.memo_store(r2.run_id, "pl", ["a"], ["x"], np.array([[np.inf, 0.0]]))
    ledger.close()


def test_budget_changed_by_another_process_applies_at_once(tmp_path: Path) -> None:
    first = Ledger(tmp_path / "l.db", budget=1.0)
    Ledger(tmp_path / "l.db").set_budget(0.5)
    with pytest.raises(BudgetExceededError):
        first.reserve(["a"] * 6, 0.1)  # 0.6 fits the budget first saw, not the current one
    assert first.budget == 0.5
    first.close()
    # remaining() sees the new budget as well
    again = Ledger(tmp_path / "l.db")
    Ledger(tmp_path / "l.db").set_budget(2.0)
    assert again.remaining(["a"]).tolist() == [2.0]
    again.close()


def test_spend_past_bigint_on_every_backend(target: tuple[str, Path]) -> None:
    """1.05e19 units in one run (past 2**63 - 1): recorded exactly, and the ledger still opens (its sums check)."""
    url, key = target
    with Ledger(url, budget=4e6, key_file=key) as ledger:
        ledger.commit(ledger.reserve(["a", "b", "c"], 3.5e6, run_id="big").run_id)
    with Ledger(url, key_file=key) as again:
        assert [x["eps_spent"] for x in again.runs_table()] == [pytest.approx(1.05e7, rel=1e-15)]
        again.check_integrity()


def test_person_history_reads_ids_as_a_release_does(tmp_path: Path) -> None:
    """7 and "7" are one person; an id no release accepts is refused, not shown with nothing spent."""
    with Ledger(tmp_path / "l.db", budget=1.0) as ledger:
        ledger.commit(ledger.reserve(np.array([7, 7]), 0.25, unit="km").run_id)
        for same in (7, "7", np.int64(7)):
            assert ledger.person_history(same)["committed"] == pytest.approx(0.5)
        for bad in (None, 7.0, float("nan"), True, np.float64(7)):
            with pytest.raises(ValidationError, match="person must be integers or text"):
                ledger.person_history(bad)
