"""`metricdp privatize-numbers` per person: eps by hand, refuse, bad values before reserving, cap, --consistent."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from metricdp.accounting.ledger import Ledger
from tests.cli_helpers import assert_one_line_error, run

EPS = 0.1  # per unit of the value


def _write(path: Path, rows: list[list[str]], newline: str = "\n") -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator=newline).writerows(rows)
    return path


def _read(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _json(result: object) -> dict:
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    return json.loads(result.stdout.strip().splitlines()[0])  # type: ignore[attr-defined]


def _ages(tmp_path: Path) -> Path:
    """ann 3 rows (30, 30, 31), bob 1 (40), cy 2 (50, 50), round robin, row id in ``t``."""
    return _write(tmp_path / "in.csv", [["user", "t", "age"], ["ann", "r0", "30"], ["bob", "r1", "40"],
                                        ["cy", "r2", "50"], ["ann", "r3", "30"], ["cy", "r4", "50"],
                                        ["ann", "r5", "31"]])


def _numbers(inp: Path, out: Path, *args: object) -> object:
    return run("privatize-numbers", inp, "-c", "age", "-e", EPS, "--range", "0,100", "-o", out, "--keep", "user",
               "--keep", "t", *args)


def test_per_person_eps_by_hand(tmp_path: Path) -> None:
    inp = _ages(tmp_path)
    acc = _json(_numbers(inp, tmp_path / "a.csv", "--user-column", "user", "--json"))["accounting"]
    run_eps = acc["eps_per_person_run"]  # ann 0.3, bob 0.1, cy 0.2
    assert (run_eps["persons"], run_eps["max"], run_eps["median"]) == (3, pytest.approx(0.3), pytest.approx(0.2))
    assert (acc["rows_in"], acc["rows_released"], acc["epsilon_unit"]) == (6, 6, "per unit")
    acc = _json(_numbers(inp, tmp_path / "b.csv", "--user-column", "user", "--max-rows-per-user", "1", "--json"))
    acc = acc["accounting"]
    assert (acc["eps_per_person_run"]["max"], acc["withheld_cap"], acc["rows_released"]) == (0.1, 3, 3)
    assert sorted(r[0] for r in _read(tmp_path / "b.csv")[1:]) == ["ann", "bob", "cy"]
    acc = _json(_numbers(inp, tmp_path / "c.csv", "--user-column", "user", "--consistent", "--json"))["accounting"]
    assert (acc["fresh_releases"], acc["eps_per_person_run"]["max"]) == (4, 0.2)  # ann: 30 and 31
    by_t = {r[1]: r[2] for r in _read(tmp_path / "c.csv")[1:]}
    assert by_t["r0"] == by_t["r3"] and by_t["r2"] == by_t["r4"]
    acc = _json(_numbers(inp, tmp_path / "d.csv", "--user-column", "user", "--budget", "0.2", "--over-budget", "drop",
                         "--json"))["accounting"]
    assert (acc["withheld_budget"], acc["persons_over"], acc["rows_released"]) == (1, 1, 5)
    assert len(_read(tmp_path / "d.csv")) == 6


def test_refuse_and_bad_values_spend_nothing(tmp_path: Path) -> None:
    inp = _ages(tmp_path)
    ledger, out = tmp_path / "l.db", tmp_path / "o.csv"
    out.write_text("old\n")
    res = _numbers(inp, out, "--user-column", "user", "--budget", "0.2", "--ledger", ledger)
    assert_one_line_error(res, "--over-budget refuse: 1 of 3 persons would exceed their budget of 0.2")
    assert out.read_text() == "old\n" and not ledger.exists()  # the ledger this run created: removed
    with Ledger(ledger, budget=0.2):
        pass
    bad = _write(tmp_path / "bad.csv", [["user", "t", "age"], ["ann", "r0", "30"], ["bob", "r1", "140"]])
    res = _numbers(bad, out, "--user-column", "user", "--ledger", ledger)
    assert_one_line_error(res, "line 3: '140' (outside the range)", "nothing written")
    assert out.read_text() == "old\n"
    with Ledger(ledger) as book:
        assert book.runs_table() == []  # neither run reserved anything
        assert book.spent(["ann", "bob"]).tolist() == [0.0, 0.0]


def test_option_errors(tmp_path: Path) -> None:
    inp = _ages(tmp_path)
    assert_one_line_error(_numbers(inp, tmp_path / "o.csv", "--consistent"), "--consistent needs --user-column")
    assert_one_line_error(_numbers(inp, tmp_path / "o.csv", "--user-column", "age"),
                          "the user column 'age' is the released column")


def test_consistent_is_identical_across_runs_and_free(tmp_path: Path) -> None:
    inp = _ages(tmp_path)
    ledger = tmp_path / "l.db"
    outs = []
    for k in range(2):
        acc = _json(_numbers(inp, tmp_path / f"o{k}.csv", "--user-column", "user", "--consistent", "--ledger", ledger,
                             "--budget", "1", "--json"))["accounting"]
        outs.append(_read(tmp_path / f"o{k}.csv"))
        assert acc["fresh_releases"] == (4 if k == 0 else 0)
    assert outs[0] == outs[1]
    with Ledger(ledger) as book:
        assert [round(x, 12) for x in book.spent(["ann", "bob", "cy"]).tolist()] == [0.2, 0.1, 0.1]


def test_parquet_cap(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"user": [7, 7, 7, 8, 9, 9], "t": list(range(6)), "age": [30.0] * 6}),
                   tmp_path / "in.parquet")
    out = tmp_path / "o.parquet"
    acc = _json(_numbers(tmp_path / "in.parquet", out, "--user-column", "user", "--max-rows-per-user", "1",
                         "--chunk-rows", "4", "--json"))["accounting"]
    assert sorted(pq.read_table(out).column("user").to_pylist()) == [7, 8, 9]
    assert acc["withheld_cap"] == 3


def test_off_grid_round_reports_the_additive_term(tmp_path: Path) -> None:
    inp = _write(tmp_path / "in.csv", [["user", "age"], ["ann", "30.4"], ["ann", "31"], ["bob", "2"]])
    acc = _json(run("privatize-numbers", inp, "-c", "age", "-e", EPS, "--range", "0,100", "--step", "2", "--off-grid",
                    "round", "-o", tmp_path / "o.csv", "--keep", "user", "--user-column", "user", "--json"))
    acc = acc["accounting"]
    assert acc["additive_per_release"] == pytest.approx(0.2)  # eps x step
    assert acc["additive_per_person_max"] == pytest.approx(0.4)  # ann: 2 releases
