"""metricdp.text.accounted: a text rewrite under a budget fails safe (nothing published, nothing spent) or
publishes what it spent; ``kill -9`` at each step leaves spent >= published."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError, ValidationError
from metricdp.text import accounted
from metricdp.text.accounted import TextBudget, privatize_text_file
from metricdp.text.rewrite import WITHHELD, Vocabulary
from tests.text._kill_worker import STEPS

WORDS = ["the", "cat", "dog", "paris", "london", "sat", "on", "mat", "a", "big"]
ROOT = Path(__file__).resolve().parents[2]


def _input(tmp_path: Path) -> Path:
    src = tmp_path / "in.csv"
    src.write_text("author,body\nann,the cat the cat the\nbob,a dog\nann,paris\n", encoding="utf-8")
    return src


def _draw(idx: np.ndarray) -> np.ndarray:
    return np.random.default_rng().integers(0, len(WORDS), size=np.asarray(idx).size)


def _run(tmp_path: Path, book: Ledger, draw=_draw, **kw) -> accounted.TextRelease:  # type: ignore[no-untyped-def]
    plan = TextBudget(0.5, ledger=book, user_column="author", unit="test distance", policy="drop", **kw)
    return privatize_text_file(_input(tmp_path), tmp_path / "out.csv", Vocabulary(WORDS), draw, plan,
                               column="body", keep_columns=("author",), batch_tokens=2)


def test_drop_by_hand(tmp_path: Path) -> None:
    """Budget 2 at 0.5 = 4 tokens per author: ann asks 6 (withholds 2), bob 2."""
    with Ledger(tmp_path / "l.db", budget=2) as book:
        rel = _run(tmp_path, book)
        st = rel.stats
        assert (rel.persons.rows_in, rel.persons.withheld_budget, st.withheld, st.replaced) == (8, 2, 2, 6)
        assert book.spent(["ann", "bob"]).tolist() == [2.0, 1.0]
    with (tmp_path / "out.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert sum(r[1].split().count(WITHHELD) for r in rows[1:]) == 2


def test_a_failure_while_writing_spends_nothing(tmp_path: Path) -> None:
    calls = [0]

    def failing(idx: np.ndarray) -> np.ndarray:
        calls[0] += 1
        if calls[0] == 2:  # the second batch of the rewrite: the temporary output is half written
            raise RuntimeError("disk on fire")
        return _draw(idx)

    with Ledger(tmp_path / "l.db", budget=2) as book:
        with pytest.raises(RuntimeError, match="disk on fire"):
            _run(tmp_path, book, failing)
        assert book.spent(["ann", "bob"]).tolist() == [0.0, 0.0]
        assert [r["state"] for r in book.runs_table()] == ["aborted"]
    assert not (tmp_path / "out.csv").exists()


def test_a_failure_after_publishing_keeps_the_spend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object) -> None:
        raise RuntimeError("lost the ledger")

    monkeypatch.setattr(accounted._Publish, "commit", broken)
    with Ledger(tmp_path / "l.db", budget=2) as book:
        with pytest.raises(RuntimeError, match="lost the ledger"):
            _run(tmp_path, book)
        assert book.spent(["ann", "bob"]).tolist() == [2.0, 1.0]  # published: spent, never the reverse
        assert [r["state"] for r in book.runs_table()] == ["reserved"]
    assert (tmp_path / "out.csv").exists()


def test_a_file_changed_between_the_passes_is_refused(tmp_path: Path) -> None:
    src = _input(tmp_path)

    def editing(idx: np.ndarray) -> np.ndarray:  # called in the rewrite pass only: the scan draws nothing
        src.write_text("author,body\nann,the the the the the the the\n", encoding="utf-8")
        return _draw(idx)

    with Ledger(tmp_path / "l.db", budget=5) as book:
        with pytest.raises(ValidationError, match="the file changed while it was being released"):
            _run(tmp_path, book, editing)
        assert book.spent(["ann", "bob"]).tolist() == [0.0, 0.0]
    assert not (tmp_path / "out.csv").exists()


def test_a_ledger_needs_authors(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    with Ledger(tmp_path / "l.db", budget=2) as book, pytest.raises(ValidationError, match="identity across runs"):
        privatize_text_file(src, tmp_path / "o.txt", Vocabulary(WORDS), _draw,
                            TextBudget(0.5, ledger=book, unit="test distance"))
    assert not (tmp_path / "o.txt").exists()


def test_a_parquet_input_is_accounted_per_author(tmp_path: Path) -> None:
    """The scan and the rewrite read a Parquet file through the same chunk loop: drop by hand as above."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"author": ["ann", "bob", "ann"], "body": ["the cat the cat the", "a dog", "paris"]}),
                   src)
    with Ledger(tmp_path / "l.db", budget=2) as book:
        rel = privatize_text_file(src, tmp_path / "out.parquet", Vocabulary(WORDS), _draw,
                                  TextBudget(0.5, ledger=book, user_column="author", unit="test distance",
                                             policy="drop"), column="body", keep_columns=("author",), batch_tokens=2)
        assert (rel.persons.rows_in, rel.persons.withheld_budget, rel.stats.withheld) == (8, 2, 2)
        assert book.spent(["ann", "bob"]).tolist() == [2.0, 1.0]
    bodies = pq.read_table(tmp_path / "out.parquet").column("body").to_pylist()
    assert sum(b.split().count(WITHHELD) for b in bodies) == 2 and len(bodies) == 3


def test_an_output_in_another_format_is_refused_after_the_plan_and_spends_nothing(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.db", budget=2) as book:
        with pytest.raises(ValidationError, match="written in its input's format"):
            privatize_text_file(_input(tmp_path), tmp_path / "out.parquet", Vocabulary(WORDS), _draw,
                                TextBudget(0.5, ledger=book, user_column="author", unit="test distance",
                                           policy="drop"), column="body", keep_columns=("author",))
        assert book.spent(["ann", "bob"]).tolist() == [0.0, 0.0]
        assert [r["state"] for r in book.runs_table()] == ["aborted"]
    assert not (tmp_path / "out.parquet").exists()


@pytest.mark.slow
def test_kill_9_at_every_step_spends_at_least_what_was_published(tmp_path: Path) -> None:
    emb = tmp_path / "emb.txt"
    g = np.random.default_rng(0)
    emb.write_text("".join(f"{w} " + " ".join(f"{v:.5f}" for v in g.normal(size=4)) + "\n" for w in WORDS),
                   encoding="utf-8")
    src, ledger = _input(tmp_path), tmp_path / "l.db"
    Ledger(ledger, budget=100).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    published = np.zeros(2)
    for k, step in enumerate((*STEPS, "")):
        out = tmp_path / f"o{k}.csv"
        args = ["text", "privatize", src, "-o", out, "-m", "exponential", "-e", 0.5, "--embeddings", emb,
                "-c", "body", "--user-column", "author", "--keep", "author", "--ledger", ledger,
                *(["--consistent"] if k % 2 else [])]
        p = subprocess.run([sys.executable, "-m", "tests.text._kill_worker", *map(str, args)], cwd=ROOT,
                           env={**env, "TEXT_KILL_AT": step}, capture_output=True, timeout=120, check=False)
        assert p.returncode == (-9 if step else 0), (step, p.stderr.decode())
        assert out.exists() == (step in ("renamed", "")), step
        if out.exists():  # what the world has seen: the true tokens (distinct words under --consistent) x 0.5
            assert WITHHELD not in out.read_text(encoding="utf-8")
            published += 0.5 * (np.array([3, 2]) if k % 2 else np.array([6, 2]))
        with Ledger(ledger) as book:
            book.check_integrity()
            assert (book.spent(["ann", "bob"]) >= published - 1e-12).all(), step


@settings(max_examples=40, deadline=None)
@given(docs=st.lists(st.lists(st.integers(0, 4), max_size=8), min_size=1, max_size=4),
       budget=st.sampled_from([None, 0.5, 1.0, 1.5, 2.5]), cap=st.sampled_from([None, 1, 2, 3]),
       consistent=st.booleans(), drop=st.booleans())
def test_budget_and_cap_bound_every_document(docs: list[list[int]], budget: float | None, cap: int | None,
                                             consistent: bool, drop: bool) -> None:
    """Oracle: each document's cost (released tokens, or distinct released words under --consistent) x 0.5 is at
    most the budget and the cap; tokens are released or written as the placeholder, in place; refuse refuses
    exactly when a document's demand exceeds the budget; consistent copies agree and are withheld together."""
    if budget is None and cap is None:
        cap = 2
    eps = 0.5
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.txt", Path(tmp) / "out.txt"
        src.write_text("".join(" ".join(WORDS[w] for w in doc) + " 42\n" for doc in docs), encoding="utf-8")
        plan = TextBudget(eps, budget=budget, max_tokens_per_person=cap, consistent=consistent,
                          policy="drop" if drop else "refuse")
        demand = [eps * min(len(set(d)) if consistent else len(d), len(d) if cap is None else cap) for d in docs]
        over = budget is not None and any(x > budget for x in demand)
        try:
            rel = privatize_text_file(src, out, Vocabulary(WORDS), _draw, plan, batch_tokens=3)
        except BudgetExceededError:
            assert over and not drop and not out.exists()
            return
        assert not (over and not drop)
        lines = out.read_text(encoding="utf-8").splitlines()
    assert rel.stats.withheld + rel.stats.replaced == sum(map(len, docs)) == rel.persons.rows_in
    for doc, line in zip(docs, lines, strict=True):
        got = line.split()[:-1]
        assert len(got) == len(doc) and line.endswith(" 42")
        released = [w for w, g in zip(doc, got, strict=True) if g != WITHHELD]
        assert all(g in WORDS for g in got if g != WITHHELD)
        cost = eps * (len(set(released)) if consistent else len(released))
        assert budget is None or cost <= budget + 1e-12
        if cap is not None:
            assert len(released) <= cap if not consistent else cost <= eps * cap
        if consistent and cap is None:  # one release per word, withheld whole (a cap picks tokens, not words)
            by_word: dict[int, set[str]] = {}
            for w, g in zip(doc, got, strict=True):
                by_word.setdefault(w, set()).add(g)
            assert all(len(v) == 1 for v in by_word.values())
