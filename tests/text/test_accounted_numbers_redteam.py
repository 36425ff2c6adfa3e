"""metricdp.text.accounted with numbers, attacked: every spend in its ledger, no true number out, refusals clean.

The input by hand: ann writes "the cat 2004 12.50" and "cat 1,250.50 ٣" (4 numbers, 3 words), bob "a dog 7 8 9"
(3 numbers, 2 words). At 0.25 per number and 0.5 per word token, ann's numbers cost 1.0 and bob's 0.75 per unit
of the value, their words 1.5 and 1.0 per unit of the embedding's distance, in two ledgers that never meet.
"""

from __future__ import annotations

import csv
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import Result

from metricdp.accounting.ledger import Ledger
from metricdp.accounting.plan import plan_release
from metricdp.errors import BudgetExceededError, ValidationError
from metricdp.text.accounted import (
    NUMBERS_UNIT,
    NumbersBudgetExceededError,
    TextBudget,
    TextRelease,
    check_text_release,
    privatize_text_file,
)
from metricdp.text.numbers import NumberRelease
from metricdp.text.rewrite import WITHHELD, Vocabulary
from metricdp.text.tokens import is_numeric, split
from tests.cli_helpers import assert_one_line_error, run

WORDS = ["the", "cat", "dog", "a", "see", "page"]
EPS, EPS_N = 0.5, 0.25
NUMBERS = {"ann": 4, "bob": 3}  # number tokens per author in the input
TOKENS = {"ann": 3, "bob": 2}  # word tokens per author


def _input(tmp_path: Path) -> Path:
    src = tmp_path / "in.csv"
    src.write_text("author,body\nann,the cat 2004 12.50\nbob,a dog 7 8 9\nann,\"cat 1,250.50 \u0663\"\n",
                   encoding="utf-8")
    return src


def _run(tmp_path: Path, src: Path | None = None, out: str = "out.csv", numbers_eps: float = EPS_N,
         **kw: object) -> TextRelease:
    plan = TextBudget(EPS, user_column="author", unit="test distance", **kw)  # type: ignore[arg-type]
    return privatize_text_file(src or _input(tmp_path), tmp_path / out, Vocabulary(WORDS), np.asarray, plan,
                               column="body", keep_columns=("author",), numbers=NumberRelease(numbers_eps, rng=0))


def _bodies(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as fh:
        return [row[1] for row in list(csv.reader(fh))[1:]]


def _runs(path: Path) -> list[tuple[str, str]]:
    """The ledger's run rows, read with sqlite3 directly (not through the library)."""
    with sqlite3.connect(path) as db:
        return [(str(r), str(s)) for r, s in db.execute("SELECT run, state FROM runs ORDER BY created")]


# -- every spend reaches the ledgers --------------------------------------------------------------------------------

def test_repeated_runs_spend_released_count_times_eps_in_each_ledger(tmp_path: Path) -> None:
    with Ledger(tmp_path / "w.db", budget=100) as words, Ledger(tmp_path / "n.db", budget=100) as nums:
        for k in range(3):
            rel = _run(tmp_path, out=f"o{k}.csv", ledger=words, numbers_ledger=nums)
            assert rel.numbers is not None and rel.numbers.rows_released == 7
            assert nums.spent(["ann", "bob"]).tolist() == pytest.approx(
                [(k + 1) * NUMBERS["ann"] * EPS_N, (k + 1) * NUMBERS["bob"] * EPS_N], abs=1e-12)
            assert words.spent(["ann", "bob"]).tolist() == pytest.approx(
                [(k + 1) * TOKENS["ann"] * EPS, (k + 1) * TOKENS["bob"] * EPS], abs=1e-12)
    w_runs, n_runs = _runs(tmp_path / "w.db"), _runs(tmp_path / "n.db")
    assert [r for r, _ in w_runs] == [r for r, _ in n_runs] and {s for _, s in w_runs + n_runs} == {"committed"}


def test_cli_ledger_show_person_matches_the_count(tmp_path: Path) -> None:
    src, emb = _input(tmp_path), _embeddings(tmp_path)
    for k in range(2):
        r = run("text", "privatize", src, "-o", tmp_path / f"o{k}.csv", "-m", "exponential", "-e", EPS,
                "--embeddings", emb, "-c", "body", "--user-column", "author", "--keep", "author",
                "--ledger", tmp_path / "w.db", "--numbers-epsilon", EPS_N, "--numbers-ledger", tmp_path / "n.db",
                *(["--budget", 100, "--numbers-budget", 100] if k == 0 else []))
        assert r.exit_code == 0, r.output
    for person in ("ann", "bob"):
        shown = run("ledger", "show", tmp_path / "n.db", "--person", person)
        assert f"{2 * NUMBERS[person] * EPS_N:g} of 100 per {NUMBERS_UNIT}" in shown.stdout, shown.stdout
        shown = run("ledger", "show", tmp_path / "w.db", "--person", person)
        assert f"'{person}' in ledger" in shown.stdout and f"{2 * TOKENS[person] * EPS:g} of 100" in shown.stdout


@pytest.mark.parametrize(("budget", "refused"), [(1.0, False), (0.999999, True)])
def test_numbers_budget_just_at_passes_and_just_over_refuses(tmp_path: Path, budget: float, refused: bool) -> None:
    """ann's 4 numbers at 0.25 cost exactly 1.0: a budget of 1.0 releases all, a hair less refuses all."""
    with Ledger(tmp_path / "w.db", budget=100) as words, Ledger(tmp_path / "n.db", budget=budget) as nums:
        if refused:
            with pytest.raises(NumbersBudgetExceededError, match="1 of 2 persons"):
                _run(tmp_path, ledger=words, numbers_ledger=nums)
        else:
            _run(tmp_path, ledger=words, numbers_ledger=nums)
        assert nums.spent(["ann", "bob"]).tolist() == ([0.0, 0.0] if refused else [1.0, 0.75])
    assert (tmp_path / "out.csv").exists() is not refused
    assert _runs(tmp_path / "w.db") == [] if refused else len(_runs(tmp_path / "w.db")) == 1
    assert _runs(tmp_path / "n.db") == [] if refused else len(_runs(tmp_path / "n.db")) == 1


def test_drop_writes_the_placeholder_never_the_true_number(tmp_path: Path) -> None:
    """Numbers budget 0.5: two numbers per person released, the rest [WITHHELD]; no input number is in the output."""
    with Ledger(tmp_path / "w.db", budget=100) as words, Ledger(tmp_path / "n.db", budget=0.5) as nums:
        rel = _run(tmp_path, ledger=words, numbers_ledger=nums, policy="drop", numbers_eps=EPS_N)
        assert nums.spent(["ann", "bob"]).tolist() == [0.5, 0.5]
    assert rel.numbers is not None and rel.numbers.withheld_budget == 3 == rel.stats.numbers_withheld
    out = _bodies(tmp_path / "out.csv")
    assert sum(b.split().count(WITHHELD) for b in out) == 3
    assert rel.stats.withheld == 0  # the words are not touched by the numbers' budget


def test_max_rows_per_user_caps_the_numbers_and_their_spend(tmp_path: Path) -> None:
    with Ledger(tmp_path / "w.db", budget=100) as words, Ledger(tmp_path / "n.db", budget=100) as nums:
        rel = _run(tmp_path, ledger=words, numbers_ledger=nums, max_tokens_per_person=1)
        assert nums.spent(["ann", "bob"]).tolist() == [EPS_N, EPS_N]
        assert words.spent(["ann", "bob"]).tolist() == [EPS, EPS]
    assert rel.numbers is not None and (rel.numbers.rows_released, rel.numbers.withheld_cap) == (2, 5)
    assert sum(b.split().count(WITHHELD) for b in _bodies(tmp_path / "out.csv")) == 5 + 3


# -- no true number leaves ------------------------------------------------------------------------------------------

ODD = ["1,250.50", "-3", "12%", "2004", "\u0663", "\uff11\uff12", "http://see.page/12345", "$1,000", "\u0661\u0662"]


@pytest.mark.parametrize("number", ODD)
def test_odd_numbers_are_released_not_copied(tmp_path: Path, number: str) -> None:
    """At eps 1e-4 per unit the noise is thousands of units: the seeded release moves every one of these."""
    src = tmp_path / "in.csv"
    src.write_text(f'author,body\nann,"the {number} cat"\n', encoding="utf-8")
    rel = _run(tmp_path, src, budget=100, numbers_budget=100, numbers_eps=1e-4)
    [body] = _bodies(tmp_path / "out.csv")
    assert rel.stats.numbers >= 1 and rel.stats.kept_by.get("numbers", 0) == 0
    assert number not in body and body.split()[0] == "the"


@pytest.mark.parametrize("number", ["1e5", "\u246b", "1.5e-3", "2.50E+3"])
def test_numbers_in_other_notations_are_released(tmp_path: Path, number: str) -> None:
    src = tmp_path / "in.csv"
    src.write_text(f"author,body\nann,the {number} cat\n", encoding="utf-8")
    _run(tmp_path, src, budget=100, numbers_budget=100, numbers_eps=1e-4)
    assert number not in _bodies(tmp_path / "out.csv")[0]


# -- refusals leave nothing behind ----------------------------------------------------------------------------------

def _embeddings(tmp_path: Path) -> Path:
    emb = tmp_path / "emb.txt"
    g = np.random.default_rng(0)
    emb.write_text("".join(f"{w} " + " ".join(f"{v:.5f}" for v in g.normal(size=4)) + "\n" for w in WORDS),
                   encoding="utf-8")
    return emb


def _cli(tmp_path: Path, *extra: object) -> Result:
    return run("text", "privatize", _input(tmp_path), "-o", tmp_path / "out.csv", "-m", "exponential", "-e", EPS,
               "--embeddings", _embeddings(tmp_path), "-c", "body", "--user-column", "author", "--keep", "author",
               "--numbers-epsilon", EPS_N, *extra)


def _key(tmp_path: Path) -> Path:
    key = tmp_path / "shared.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    return key


@pytest.mark.parametrize("spelling", ["symlink", "dot", "absolute", "hardlink"])
def test_one_ledger_under_two_names_is_refused_before_anything(tmp_path: Path, spelling: str) -> None:
    """The words' ledger given again as the numbers' by a link or another spelling: one line, no run row left."""
    key = _key(tmp_path)
    assert _cli(tmp_path, "--ledger", tmp_path / "w.db", "--ledger-key", key, "--budget", 100,
                "--numbers-ledger", tmp_path / "n.db", "--numbers-budget", 100).exit_code == 0
    (tmp_path / "out.csv").unlink()
    other = tmp_path / "other.db"
    if spelling == "symlink":
        other.symlink_to(tmp_path / "w.db")
    elif spelling == "hardlink":
        os.link(tmp_path / "w.db", other)
    else:
        other = Path(os.path.relpath(tmp_path / "w.db")) if spelling == "dot" else (tmp_path / "w.db").resolve()
        other = Path(f".{os.sep}{other}") if spelling == "dot" and not other.is_absolute() else other
    r = _cli(tmp_path, "--ledger", tmp_path / "w.db", "--ledger-key", key, "--numbers-ledger", other)
    assert_one_line_error(r, "--numbers-ledger must be another ledger than --ledger")
    assert not (tmp_path / "out.csv").exists()
    assert [s for _, s in _runs(tmp_path / "w.db")] == ["committed"]


def test_a_new_ledger_linked_as_both_is_refused_and_not_created(tmp_path: Path) -> None:
    key = _key(tmp_path)
    (tmp_path / "link.db").symlink_to(tmp_path / "w.db")
    r = _cli(tmp_path, "--ledger", tmp_path / "w.db", "--ledger-key", key, "--budget", 5,
             "--numbers-ledger", tmp_path / "link.db", "--numbers-budget", 5)
    assert_one_line_error(r, "--numbers-ledger must be another ledger than --ledger")
    assert not (tmp_path / "w.db").exists() and not (tmp_path / "out.csv").exists()


def test_the_library_resolves_links_too(tmp_path: Path) -> None:
    src = _input(tmp_path)
    (tmp_path / "link.db").symlink_to(tmp_path / "w.db")
    with pytest.raises(ValidationError, match="another ledger than the parameter 'ledger'"):
        check_text_release(src, "body", user_column="author", ledger=tmp_path / "w.db", numbers=1.0,
                           numbers_ledger=tmp_path / "link.db")


def test_a_numbers_ledger_of_another_unit_leaves_no_run_in_the_words_ledger(tmp_path: Path) -> None:
    """A ledger of ``privatize`` (here bound to km) as the numbers' ledger: refused before the words' reservation."""
    with Ledger(tmp_path / "n.db", budget=5) as nums:
        p = plan_release(np.array([0]), 0.1, ledger=nums, persons=np.array(["zed"], dtype=object), unit="km")
        p.publishing()
        p.commit()
    with Ledger(tmp_path / "w.db", budget=5) as words, Ledger(tmp_path / "n.db") as nums:
        with pytest.raises(ValidationError, match=r"n\.db accounts eps per km"):
            _run(tmp_path, ledger=words, numbers_ledger=nums)
    assert _runs(tmp_path / "w.db") == [] and len(_runs(tmp_path / "n.db")) == 1
    assert not (tmp_path / "out.csv").exists()


def test_a_numbers_ledger_reused_for_the_words_is_refused_in_one_line(tmp_path: Path) -> None:
    assert _cli(tmp_path, "--ledger", tmp_path / "w.db", "--budget", 100, "--numbers-ledger", tmp_path / "n.db",
                "--numbers-budget", 100).exit_code == 0
    (tmp_path / "out.csv").unlink()
    r = _cli(tmp_path, "--ledger", tmp_path / "n.db", "--numbers-ledger", tmp_path / "w.db")
    assert_one_line_error(r, ".db accounts eps per ", "would mean nothing")  # either ledger is the culprit
    assert not (tmp_path / "out.csv").exists()
    assert len(_runs(tmp_path / "n.db")) == len(_runs(tmp_path / "w.db")) == 1


def test_a_cli_ledger_of_another_unit_as_numbers_ledger_is_one_line(tmp_path: Path) -> None:
    with Ledger(tmp_path / "n.db", budget=5) as nums:
        p = plan_release(np.array([0]), 0.1, ledger=nums, persons=np.array(["zed"], dtype=object), unit="km")
        p.publishing()
        p.commit()
    r = _cli(tmp_path, "--ledger", tmp_path / "w.db", "--budget", 100, "--numbers-ledger", tmp_path / "n.db")
    assert_one_line_error(r, "n.db accounts eps per km")
    assert not (tmp_path / "w.db").exists() and not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("extra", [
    ("--ledger", "w.db", "--budget", 5),  # numbers with a words' ledger and none of their own
    ("--numbers-ledger", "n.db", "--numbers-budget", 5),  # a numbers ledger without the words'
    ("--budget", 5),  # a words' budget and none for the numbers
])
def test_a_bad_combination_creates_no_file(tmp_path: Path, extra: tuple[object, ...]) -> None:
    r = _cli(tmp_path, *(tmp_path / e if isinstance(e, str) and e.endswith(".db") else e for e in extra))
    assert_one_line_error(r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.txt", "in.csv"]


def test_a_refused_numbers_budget_creates_no_ledger(tmp_path: Path) -> None:
    r = _cli(tmp_path, "--ledger", tmp_path / "w.db", "--budget", 100, "--numbers-ledger", tmp_path / "n.db",
             "--numbers-budget", 0.9)
    assert_one_line_error(r, "1 of 2 authors", "numbers budget of 0.9")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.txt", "in.csv"]


def test_a_words_refusal_leaves_the_numbers_ledger_untouched(tmp_path: Path) -> None:
    with Ledger(tmp_path / "w.db", budget=1.0) as words, Ledger(tmp_path / "n.db", budget=100) as nums:
        with pytest.raises(BudgetExceededError):
            _run(tmp_path, ledger=words, numbers_ledger=nums)
    assert _runs(tmp_path / "w.db") == [] == _runs(tmp_path / "n.db")
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize(("value", "fragment"), [("", "--numbers-ledger is empty"),
                                                 ("   ", "--numbers-ledger is empty")])
def test_an_empty_numbers_ledger_is_named_by_its_flag(tmp_path: Path, value: str, fragment: str) -> None:
    r = _cli(tmp_path, "--ledger", tmp_path / "w.db", "--budget", 5, "--numbers-ledger", value)
    assert_one_line_error(r, fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.txt", "in.csv"]


@pytest.mark.slow
def test_kill_9_at_every_step_leaves_both_ledgers_at_least_what_was_published(tmp_path: Path) -> None:
    """kill -9 after the plans, mid-write, past the point of no return, after the rename: no output unless renamed,
    and each ledger holds at least what the outputs out in the world cost (a reservation counts as spent)."""
    import subprocess
    import sys

    from tests.text._kill_worker import STEPS

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    src, emb = _input(tmp_path), _embeddings(tmp_path)
    Ledger(tmp_path / "w.db", budget=100).close()
    Ledger(tmp_path / "n.db", budget=100).close()
    words_out, numbers_out = np.zeros(2), np.zeros(2)
    for k, step in enumerate((*STEPS, "")):
        out = tmp_path / f"o{k}.csv"
        args = ["text", "privatize", src, "-o", out, "-m", "exponential", "-e", EPS, "--embeddings", emb, "-c", "body",
                "--user-column", "author", "--keep", "author", "--ledger", tmp_path / "w.db",
                "--numbers-epsilon", EPS_N, "--numbers-ledger", tmp_path / "n.db"]
        p = subprocess.run([sys.executable, "-m", "tests.text._kill_worker", *map(str, args)], cwd=root,
                           env={**env, "TEXT_KILL_AT": step}, capture_output=True, timeout=120, check=False)
        assert p.returncode == (-9 if step else 0), (step, p.stderr.decode())
        assert out.exists() == (step in ("renamed", "")), step
        if out.exists():
            words_out += EPS * np.array([TOKENS["ann"], TOKENS["bob"]])
            numbers_out += EPS_N * np.array([NUMBERS["ann"], NUMBERS["bob"]])
        with Ledger(tmp_path / "w.db") as words, Ledger(tmp_path / "n.db") as nums:
            words.check_integrity()
            nums.check_integrity()
            assert (words.spent(["ann", "bob"]) >= words_out - 1e-12).all(), step
            assert (nums.spent(["ann", "bob"]) >= numbers_out - 1e-12).all(), step


@pytest.mark.parametrize(("numbers_eps", "budget", "refused"), [(0.1, 0.4, False), (0.1, 0.3999999999, True),
                                                                (0.3, 1.2, False)])
def test_a_budget_at_a_sum_of_float_eps_is_exact(tmp_path: Path, numbers_eps: float, budget: float,
                                                 refused: bool) -> None:
    """ann's 4 numbers at 0.1 cost 0.4 exactly (0.1 + 0.1 + 0.1 + 0.1 is 0.4000000000000001 in floats)."""
    try:
        rel = _run(tmp_path, budget=100, numbers_budget=budget, numbers_eps=numbers_eps)
    except NumbersBudgetExceededError:
        assert refused and not (tmp_path / "out.csv").exists()
        return
    assert not refused and rel.numbers is not None and rel.numbers.run is not None
    assert rel.numbers.run.max == pytest.approx(4 * numbers_eps, abs=1e-12)


def test_consistent_words_leave_the_numbers_charged_each_time(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("author,body\nann,cat cat cat 1 1 1\n", encoding="utf-8")
    with Ledger(tmp_path / "w.db", budget=100) as words, Ledger(tmp_path / "n.db", budget=100) as nums:
        for k in range(2):
            _run(tmp_path, src, out=f"o{k}.csv", ledger=words, numbers_ledger=nums, consistent=True,
                 scope="test")
        assert words.spent(["ann"]).tolist() == [EPS]  # one word, one release, reused in the second run
        assert nums.spent(["ann"]).tolist() == [2 * 3 * EPS_N]  # the same 1 three times, twice: six releases


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_other_formats_charge_the_same(tmp_path: Path, fmt: str) -> None:
    rows = [{"author": "ann", "body": "the cat 2004 12.50"}, {"author": "bob", "body": "a dog 7 8 9"},
            {"author": "ann", "body": "cat 1,250.50 \u0663"}]
    src = tmp_path / f"in.{fmt}"
    if fmt == "jsonl":
        import json

        src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), src)
    with Ledger(tmp_path / "w.db", budget=100) as words, Ledger(tmp_path / "n.db", budget=0.75) as nums:
        rel = _run(tmp_path, src, out=f"out.{fmt}", ledger=words, numbers_ledger=nums, policy="drop")
        assert nums.spent(["ann", "bob"]).tolist() == [0.75, 0.75]
        assert words.spent(["ann", "bob"]).tolist() == [TOKENS["ann"] * EPS, TOKENS["bob"] * EPS]
    assert rel.stats.numbers_withheld == 1 and rel.numbers is not None and rel.numbers.rows_released == 6


def test_an_empty_numbers_ledger_file_is_named_with_the_numbers_flags(tmp_path: Path) -> None:
    (tmp_path / "n.db").write_bytes(b"")
    r = _cli(tmp_path, "--ledger", tmp_path / "w.db", "--budget", 5, "--numbers-ledger", tmp_path / "n.db")
    assert_one_line_error(r, "--numbers-ledger", "is new: create it with --numbers-budget B")
    assert "--ledger " not in r.stderr.replace("--numbers-ledger ", "")
    assert not (tmp_path / "w.db").exists() and not (tmp_path / "out.csv").exists()


FRAGMENTS = ["the", "cat", "1,250.50", "-3", "12%", "2004", "\u0663", "\uff11\uff12", "3rd", "A4", "COVID-19",
             "http://see.page/12345", "$1,000", "10:30", "2024-01-15", "0.5", "+7", "007", "1 234", "a"]


@settings(max_examples=25, deadline=None)
@given(docs=st.lists(st.tuples(st.sampled_from(["ann", "bob", "cy"]),
                               st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6)), min_size=1, max_size=5))
def test_fuzz_numbers_charged_by_count_and_none_copied(docs: list[tuple[str, list[str]]]) -> None:
    """Oracle from the tokeniser: each number token a number release can release costs EPS_N to its author, in
    the ledger and in the report; at eps 1e-6 per unit (noise of millions of steps) none leaves as written."""
    release = NumberRelease(1e-6, rng=0)
    expected: dict[str, int] = {}
    true_numbers: set[str] = set()
    for author, words in docs:
        pieces = [p for p, is_word in split(" ".join(words)) if is_word and is_numeric(p) and release.releasable(p)]
        expected[author] = expected.get(author, 0) + len(pieces)
        true_numbers.update(pieces)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        src = tmp_path / "in.csv"
        with src.open("w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows([("author", "body"), *((a, " ".join(w)) for a, w in docs)])
        with Ledger(tmp_path / "w.db", budget=1000) as book, Ledger(tmp_path / "n.db", budget=1000) as nums:
            rel = _run(tmp_path, src, ledger=book, numbers_ledger=nums, numbers_eps=1e-6)
            authors = sorted(expected)
            assert nums.spent(authors).tolist() == pytest.approx([expected[a] * 1e-6 for a in authors], abs=1e-15)
        assert rel.numbers is not None and rel.numbers.rows_released == sum(expected.values()) == rel.stats.numbers
        out = [p for body in _bodies(tmp_path / "out.csv") for p, is_word in split(body) if is_word]
    assert not true_numbers & set(out)


def test_numbers_in_a_column_not_released_are_named_on_stderr(tmp_path: Path) -> None:
    """A column beside the text leaves with its true numbers only when the user is told (or kept it on purpose)."""
    src = tmp_path / "in.csv"
    src.write_text("author,body,salary\nann,the cat 2004,91000\n", encoding="utf-8")
    r = run("text", "privatize", src, "-o", tmp_path / "out.csv", "-m", "exponential", "-e", EPS, "--embeddings",
            _embeddings(tmp_path), "-c", "body", "--user-column", "author", "--keep", "author", "--numbers-epsilon",
            EPS_N, "--numbers-budget", 1, "--budget", 5)
    assert r.exit_code == 0, r.output
    assert "'salary' are written UNRELEASED" in r.stderr
    with (tmp_path / "out.csv").open(newline="", encoding="utf-8") as fh:
        [[_, body, salary]] = list(csv.reader(fh))[1:]
    assert salary == "91000" and is_numeric(body.split()[-1])  # the column as it was; the text's number released


def test_a_number_edited_in_place_between_the_passes_is_refused(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Same size, same tokens, same persons, one digit changed (2004 -> 2005): the publish sees another file."""
    from metricdp.text import accounted

    src = _input(tmp_path)
    scanned = accounted._Rewrite.__init__

    def edit_then_rewrite(self: Any, *args: Any, **kw: Any) -> None:
        src.write_text(src.read_text(encoding="utf-8").replace("2004", "2005"), encoding="utf-8")
        scanned(self, *args, **kw)

    monkeypatch.setattr(accounted._Rewrite, "__init__", edit_then_rewrite)
    with Ledger(tmp_path / "w.db", budget=5) as words, Ledger(tmp_path / "n.db", budget=5) as nums:
        with pytest.raises(ValidationError, match="changed while it was being released"):
            _run(tmp_path, ledger=words, numbers_ledger=nums)
        assert words.spent(["ann", "bob"]).tolist() == nums.spent(["ann", "bob"]).tolist() == [0.0, 0.0]
    assert {s for _, s in _runs(tmp_path / "w.db") + _runs(tmp_path / "n.db")} == {"aborted"}
    assert not (tmp_path / "out.csv").exists()
