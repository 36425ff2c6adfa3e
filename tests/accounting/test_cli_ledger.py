"""``metricdp ledger show|export``: tables, JSON, CSV, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from metricdp.accounting.ledger import Ledger
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import skip_unless


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with Ledger(path, budget=1.0) as ledger:
        r = ledger.reserve(["ann", "bob", "ann"], 0.25, mechanism="geo")
        ledger.commit(r.run_id)
        ledger.reserve(["ann"], 0.5, run_id="pending")
        ledger.abort(ledger.reserve(["bob"], 0.25, run_id="failed").run_id)
    return path


def test_show_json(tmp_path: Path) -> None:
    result = run("ledger", "show", _ledger(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    obj = json.loads(result.stdout)
    assert obj["budget"] == 1.0 and obj["persons"] == 2 and obj["exhausted"] == 1
    assert obj["spent"]["max"] == 1.0 and obj["spent"]["median"] == 0.25
    assert obj["runs_by_state"] == {"committed": 1, "reserved": 1, "aborted": 1}
    assert [(r["run"], r["eps_spent"]) for r in obj["runs"]][1:] == [("pending", 0.5), ("failed", 0.0)]
    assert "ann" not in result.stdout and "bob" not in result.stdout


def test_show_table(tmp_path: Path) -> None:
    result = run("ledger", "show", _ledger(tmp_path))
    assert result.exit_code == 0, result.output
    assert "budget 1 per person, 2 persons (1 exhausted), 3 runs" in result.stdout


def test_show_plot(tmp_path: Path) -> None:
    skip_unless("plot")
    led = _ledger(tmp_path)
    png = tmp_path / "spent.png"
    result = run("ledger", "show", led, "--plot", png)
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert_one_line_error(run("ledger", "show", led, "--plot", tmp_path / "x.jpg"), "expected a .png file")
    assert_one_line_error(run("ledger", "show", led, "--plot", led), "ledger")  # never the ledger itself
    assert led.exists() and Ledger(led, create=False).budget == 1.0


def test_export_csv_and_json(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    result = run("ledger", "export", path)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert sorted((r["committed"], r["reserved"], r["total"], r["remaining"]) for r in rows) == [
        ("0.25", "0.0", "0.25", "0.75"), ("0.5", "0.5", "1.0", "0.0")]
    assert all(len(r["person"]) == 32 for r in rows)  # 128-bit keyed hashes, never the id
    out = tmp_path / "export.json"
    result = run("ledger", "export", path, "--json", "--out", out)
    assert result.exit_code == 0, result.output
    obj = json.loads(out.read_text())
    assert len(obj["persons"]) == 2 and len(obj["runs"]) == 3


def test_errors(tmp_path: Path) -> None:
    assert_one_line_error(run("ledger", "show", tmp_path / "absent.db"), "does not exist")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"x" * 4096)
    assert_one_line_error(run("ledger", "export", junk), "not a usable SQLite database")
    assert not (tmp_path / "absent.db").exists()  # reading never creates a ledger
