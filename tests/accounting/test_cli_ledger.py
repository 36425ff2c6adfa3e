"""``metricdp ledger show|export``: tables, JSON, CSV, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

from metricdp.accounting.ledger import Ledger
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import needs, skip_unless


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
    assert "budget 1 per unit of distance (no release has named a unit yet) per person, 2 persons (1 exhausted), " \
           "3 runs" in result.stdout
    km = tmp_path / "km.db"
    with Ledger(km, budget=2.0) as led:
        led.commit(led.reserve(["ann"], 0.5, unit="km").run_id)
    result = run("ledger", "show", km)
    assert "budget 2 per km per person, 1 persons" in result.stdout
    assert json.loads(run("ledger", "show", km, "--json").stdout)["unit"] == "km"


def test_show_plot(tmp_path: Path) -> None:
    skip_unless("plot")
    led = _ledger(tmp_path)
    png = tmp_path / "spent.png"
    result = run("ledger", "show", led, "--plot", png)
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}: histogram of the eps spent by 2 persons" in result.stdout.replace("\n", "")
    assert_one_line_error(run("ledger", "show", led, "--plot", tmp_path / "x.jpg"), "expected a .png file")
    assert_one_line_error(run("ledger", "show", led, "--plot", led), "ledger")  # never the ledger itself
    assert led.exists() and Ledger(led, create=False).budget == 1.0


def test_show_plot_draws_a_visible_bar_when_every_person_spent_the_same(tmp_path: Path) -> None:
    """One value: numpy's bins around it are ~1e-6 wide (no pixel); the bar must cover many pixels of tab:blue."""
    skip_unless("plot")
    import matplotlib.image
    import numpy as np

    led = tmp_path / "same.db"
    with Ledger(led, budget=1.0) as ledger:
        ledger.commit(ledger.reserve(["ann", "bob", "cyd"], 0.25).run_id)
    png = tmp_path / "spent.png"
    result = run("ledger", "show", led, "--plot", png)
    assert result.exit_code == 0, result.output
    rgb = matplotlib.image.imread(png)[..., :3]
    blue = np.array([0x1F, 0x77, 0xB4]) / 255  # tab:blue
    assert int((np.abs(rgb - blue).max(axis=-1) < 0.02).sum()) > 1000


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


def test_foreign_and_special_paths_are_one_error_and_left_untouched(tmp_path: Path) -> None:
    app = tmp_path / "app.db"
    with sqlite3.connect(app) as con:
        con.execute("CREATE TABLE t (x)")
    con.close()
    data, listing = app.read_bytes(), sorted(p.name for p in tmp_path.iterdir())
    assert_one_line_error(run("ledger", "show", app), "not a metricdp ledger", "left untouched")
    assert_one_line_error(run("ledger", "export", app), "not a metricdp ledger")
    assert app.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == listing
    with sqlite3.connect(f"{app.as_uri()}?mode=ro", uri=True) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    con.close()
    assert_one_line_error(run("ledger", "show", "/dev/null"), "is a device")
    assert not Path("/dev/null-journal").exists()
    assert_one_line_error(run("ledger", "show", tmp_path), "is a directory")
    assert_one_line_error(run("ledger", "show", ""), "the ledger path is empty")


@needs("plot")  # without matplotlib --plot is refused first, for the missing extra
def test_an_empty_ledger_path_with_a_plot_is_one_error(tmp_path: Path) -> None:
    assert_one_line_error(run("ledger", "show", "--plot", tmp_path / "p.png", ""), "names no file")


def test_show_person_by_hand(tmp_path: Path) -> None:
    """ann: 2 releases at 0.25 committed, 1 at 0.5 reserved, 1 at 0.25 aborted (not listed): total 1 of 1."""
    path = _ledger(tmp_path)
    result = run("ledger", "show", path, "--person", "ann", "--json")
    assert result.exit_code == 0, result.output
    obj = json.loads(result.stdout)
    assert [(r["state"], r["eps"], r["releases"], r["eps_spent"]) for r in obj["runs"]] == [
        ("committed", 0.25, 2, 0.5), ("reserved", 0.5, 1, 0.5)]
    assert (obj["committed"], obj["reserved"], obj["total"], obj["remaining"]) == (0.5, 0.5, 1.0, 0.0)
    with Ledger(path) as led:
        assert obj["hash"] == led.person_hashes(["ann"])[0].hex()
    bob = json.loads(run("ledger", "show", path, "--person", "bob", "--json").stdout)
    assert [r["run"] for r in bob["runs"]] != [] and "failed" not in [r["run"] for r in bob["runs"]]
    assert (bob["total"], bob["remaining"]) == (0.25, 0.75)
    nobody = json.loads(run("ledger", "show", path, "--person", "zed", "--json").stdout)
    assert (nobody["runs"], nobody["total"], nobody["remaining"]) == ([], 0.0, 1.0)
    table = run("ledger", "show", path, "--person", "ann")
    assert table.exit_code == 0, table.output
    assert "person 'ann' in ledger" in table.stdout and "1 of 1 per unit of distance" in table.stdout
    assert "0.5 committed, 0.5 reserved), 0 remaining; 2 runs" in table.stdout
    assert "pending" in table.stdout


def test_show_person_needs_the_key(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    key = tmp_path / "ledger.db.key"
    moved = tmp_path / "elsewhere.key"
    key.rename(moved)
    assert_one_line_error(run("ledger", "show", path, "--person", "ann"), "--person needs the ledger's key",
                          "does not exist")
    result = run("ledger", "show", path, "--person", "ann", "--ledger-key", moved, "--json")
    assert result.exit_code == 0, result.output and json.loads(result.stdout)["total"] == 1.0
    assert json.loads(result.stdout)["total"] == 1.0
    other = tmp_path / "other.key"
    other.write_bytes(b"k" * 32)
    other.chmod(0o600)
    assert_one_line_error(run("ledger", "show", path, "--person", "ann", "--ledger-key", other),
                          "does not belong to ledger")
    assert_one_line_error(run("ledger", "show", path, "--ledger-key", moved), "--ledger-key is for --person")
    assert_one_line_error(run("ledger", "show", path, "--person", "ann", "--plot", tmp_path / "p.png"),
                          "--plot shows every person")
