"""`metricdp text privatize --numbers-epsilon` per person: --numbers-budget, --numbers-ledger, the report's line.

By hand: ann's document holds 2 numbers, bob's 3; at --numbers-epsilon 0.25 ann's numbers cost 0.5 and bob's
0.75 per unit of the value, in their own budget line (the words' eps is per unit of the embedding's distance).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metricdp.accounting.ledger import Ledger
from metricdp.cli import ledger as ledger_cli
from metricdp.cli import text
from metricdp.text.accounted import NUMBERS_UNIT
from tests.cli_helpers import assert_one_line_error, make_app, runner

APP = make_app(text.register)
ledger_cli.register(APP)  # `ledger show` of the numbers' ledger
WORDS = ["the", "cat", "dog", "a"]
W = "[WITHHELD]"


@pytest.fixture
def emb(tmp_path: Path) -> Path:
    g = np.random.default_rng(0)
    p = tmp_path / "emb.txt"
    p.write_text("".join(f"{w} " + " ".join(f"{v:.5f}" for v in g.normal(size=4)) + "\n" for w in WORDS),
                 encoding="utf-8")
    return p


@pytest.fixture
def src(tmp_path: Path) -> Path:
    p = tmp_path / "in.csv"
    p.write_text("author,body\nann,the cat 2004 12.50\nbob,a dog 7 8 9\n", encoding="utf-8")
    return p


def _args(emb: Path, src: Path, out: Path, *extra: object) -> list[str]:
    return [str(a) for a in ("text", "privatize", src, "--out", out, "-m", "exponential", "-e", 0.5,
                             "--embeddings", emb, "-c", "body", "--user-column", "author", "--keep", "author",
                             "--numbers-epsilon", 0.25, *extra)]


def _json(emb: Path, src: Path, out: Path, *extra: object) -> dict:
    r = runner.invoke(APP, [*_args(emb, src, out, *extra), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_report_json_has_the_numbers_line(tmp_path: Path, emb: Path, src: Path) -> None:
    s = _json(emb, src, tmp_path / "o.csv", "--budget", 5, "--numbers-budget", 0.5, "--over-budget", "drop")
    assert s["numbers"]["released"] == 4 and s["numbers"]["withheld"] == 1
    num = s["accounting"]["numbers"]
    assert (num["rows_are"], num["budget"], num["ledger"], num["ledger_unit"], num["eps_per_release"]) == (
        "numbers", 0.5, None, None, 0.25)
    assert (num["rows_in"], num["rows_released"], num["withheld_budget"], num["persons_over"]) == (5, 4, 1, 1)
    assert (num["eps_per_person_run"]["max"], num["eps_per_person_total"]) == (0.5, None)
    words = s["accounting"]  # the words' line: 2 tokens each at 0.5, apart from the numbers
    assert (words["rows_in"], words["eps_per_person_run"]["max"], words["rows_are"]) == (4, 1.0, "word tokens")
    body = (tmp_path / "o.csv").read_text(encoding="utf-8").splitlines()[2]
    assert body.split(",")[1].split().count(W) == 1


def test_ledgers_two_runs_and_ledger_show(tmp_path: Path, emb: Path, src: Path) -> None:
    """Numbers ledger budget 1: run 1 spends ann 0.5, bob 0.75; run 2 (drop) ann 0.5 more, bob 1 of 3."""
    w, n = tmp_path / "w.db", tmp_path / "n.db"
    first = _json(emb, src, tmp_path / "o.csv", "--ledger", w, "--budget", 5, "--numbers-ledger", n,
                  "--numbers-budget", 1)["accounting"]
    assert first["numbers"]["ledger_unit"] == NUMBERS_UNIT and first["numbers"]["ledger_run"] == first["ledger_run"]
    assert first["numbers"]["eps_per_person_total"]["max"] == 0.75
    second = _json(emb, src, tmp_path / "o.csv", "--ledger", w, "--numbers-ledger", n, "--over-budget", "drop")
    assert (second["accounting"]["numbers"]["withheld_budget"], second["numbers"]["withheld"]) == (2, 2)
    with Ledger(n) as book:
        assert book.spent(["ann", "bob"]).tolist() == [1.0, 1.0]
    with Ledger(w) as book:
        assert book.spent(["ann", "bob"]).tolist() == [2.0, 2.0]
    r = runner.invoke(APP, ["ledger", "show", str(n), "--json"])
    assert r.exit_code == 0, r.output
    shown = json.loads(r.stdout)
    assert (shown["unit"], shown["budget"], shown["persons"]) == (NUMBERS_UNIT, 1.0, 2)
    assert [(x["eps"], x["rows"], x["withheld"], x["eps_spent"]) for x in shown["runs"]] == [
        (0.25, 5, 0, 1.25), (0.25, 3, 2, 0.75)]
    assert all(x["mechanism"].endswith("numbers") for x in shown["runs"])


def test_refusal_writes_nothing_and_leaves_no_ledger(tmp_path: Path, emb: Path, src: Path) -> None:
    w, n, out = tmp_path / "w.db", tmp_path / "n.db", tmp_path / "o.csv"
    r = runner.invoke(APP, _args(emb, src, out, "--ledger", w, "--budget", 5, "--numbers-ledger", n,
                                 "--numbers-budget", 0.5))
    assert_one_line_error(r, "--over-budget refuse: 1 of 2 authors with numbers to release would exceed their "
                             "numbers budget of 0.5", "nothing written, nothing spent")
    assert not out.exists() and not w.exists() and not n.exists()
    # an existing pair of ledgers: nothing spent in either
    _json(emb, src, out, "--ledger", w, "--budget", 5, "--numbers-ledger", n, "--numbers-budget", 1)
    out.unlink()
    r = runner.invoke(APP, _args(emb, src, out, "--ledger", w, "--numbers-ledger", n))
    assert_one_line_error(r, "2 authors with numbers to release would exceed their numbers budget of 1")
    assert not out.exists()
    with Ledger(w) as words, Ledger(n) as nums:
        assert words.spent(["ann", "bob"]).tolist() == [1.0, 1.0] and len(words.runs_table()) == 1
        assert nums.spent(["ann", "bob"]).tolist() == [0.5, 0.75] and len(nums.runs_table()) == 1


def test_the_text_report_prints_the_numbers_line(tmp_path: Path, emb: Path, src: Path) -> None:
    r = runner.invoke(APP, _args(emb, src, tmp_path / "o.csv", "--max-rows-per-user", 2))
    assert r.exit_code == 0, r.output
    assert ("numbers per author: 5 numbers of 2 authors, 4 released at eps 0.25 per unit of the value each"
            in r.stdout)
    assert "numbers withheld (written as [WITHHELD]): 1 by --max-rows-per-user 2" in r.stdout
    assert "numbers eps per author (per unit of the value), this run: max 0.5" in r.stdout


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--budget", 5], "--numbers-epsilon under a per-person budget needs a budget of its own, --numbers-budget"),
    (["--ledger", "w.db", "--budget", 5], "--numbers-epsilon with --ledger needs a ledger of its own, "
     "--numbers-ledger"),
    (["--numbers-ledger", "n.db", "--numbers-budget", 1], "--numbers-ledger is kept beside the words' ledger: "
     "give --ledger too"),
    (["--ledger", "w.db", "--numbers-ledger", "w.db", "--budget", 1], "--numbers-ledger must be another ledger "
     "than --ledger"),
    (["--numbers-budget", 0], "--numbers-budget must be a finite number > 0"),
    (["--ledger", "w.db", "--budget", 1, "--numbers-ledger", "n.db"],
     "--numbers-ledger n.db does not exist: create it with --numbers-budget B"),
])
def test_refusals_name_the_flags(tmp_path: Path, emb: Path, src: Path, extra: list[object], fragment: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "o.csv"
    r = runner.invoke(APP, _args(emb, src, out, *extra))
    assert_one_line_error(r, fragment)
    assert not out.exists() and not (tmp_path / "n.db").exists() and not (tmp_path / "w.db").exists()


def test_a_numbers_budget_needs_numbers(tmp_path: Path, emb: Path, src: Path) -> None:
    args = [a for a in _args(emb, src, tmp_path / "o.csv", "--numbers-budget", 1) if a not in ("--numbers-epsilon",
                                                                                                 "0.25")]
    assert_one_line_error(runner.invoke(APP, args), "--numbers-budget accounts numbers released as numbers: give "
                                                    "--numbers-epsilon too")


def test_a_numbers_budget_alone_is_a_budget(tmp_path: Path, emb: Path, src: Path) -> None:
    """--over-budget drop with --numbers-budget only: the words are reported, the numbers budgeted."""
    s = _json(emb, src, tmp_path / "o.csv", "--numbers-budget", 0.5, "--over-budget", "drop")
    acc = s["accounting"]
    assert (acc["withheld_budget"], acc["eps_per_person_run"]["max"]) == (0, 1.0)
    assert (acc["numbers"]["withheld_budget"], acc["numbers"]["eps_per_person_run"]["max"]) == (1, 0.5)
    r = runner.invoke(APP, _args(emb, src, tmp_path / "o2.csv", "--numbers-budget", 0.5))
    assert_one_line_error(r, "1 of 2 authors with numbers to release would exceed their numbers budget of 0.5")
    assert not (tmp_path / "o2.csv").exists()
