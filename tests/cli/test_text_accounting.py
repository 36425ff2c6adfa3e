"""`metricdp text privatize` per document and per author: eps by hand, --consistent replacements, refusals."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from metricdp.cli import text
from metricdp.text.accounting import TextAccounting
from tests.cli_helpers import assert_one_line_error, make_app, runner

APP = make_app(text.register)
WORDS = ["the", "cat", "dog", "paris", "london", "sat", "on", "mat", "a", "big"]


@pytest.fixture
def emb(tmp_path: Path) -> Path:
    g = np.random.default_rng(0)
    p = tmp_path / "emb.txt"
    p.write_text("".join(f"{w} " + " ".join(f"{v:.5f}" for v in g.normal(size=4)) + "\n" for w in WORDS),
                 encoding="utf-8")
    return p


def invoke(*args: object):  # type: ignore[no-untyped-def]
    return runner.invoke(APP, ["text", *[str(a) for a in args]])


def _privatize(tmp_path: Path, emb: Path, src: Path, *extra: object) -> dict:
    r = invoke("privatize", src, "--out", tmp_path / "out" / src.name, "-m", "exponential", "-e", 0.5,
               "--embeddings", emb, "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["accounting"]


def test_per_document_eps_by_hand(tmp_path: Path, emb: Path) -> None:
    """Doc 1: the x3, cat x2 (5 tokens, 2 words); doc 2: a dog; doc 3: no vocabulary word. eps 0.5 per token."""
    (tmp_path / "out").mkdir()
    src = tmp_path / "in.txt"
    src.write_text("the cat the cat the\na dog\n42 !\n", encoding="utf-8")
    acc = _privatize(tmp_path, emb, src)
    assert acc["documents"] == 3
    assert acc["tokens_released"]["max"] == 5 and acc["distinct_words"]["max"] == 2
    assert (acc["eps_per_document"]["max"], acc["eps_per_document"]["median"]) == (2.5, 1.0)
    assert acc["eps_per_document"]["mean"] == pytest.approx(3.5 / 3)
    assert (acc["eps_repeated_word"]["max"], acc["eps_repeated_word"]["median"]) == (1.5, 0.5)
    # consistent: one replacement per word and document: 2 x 0.5 and 0.5 for the repeated word
    acc = _privatize(tmp_path, emb, src, "--consistent")
    assert (acc["eps_per_document"]["max"], acc["eps_repeated_word"]["max"]) == (1.0, 0.5)
    assert acc["eps_per_author"] is None


def test_consistent_same_word_same_replacement(tmp_path: Path, emb: Path) -> None:
    (tmp_path / "out").mkdir()
    src = tmp_path / "in.txt"
    src.write_text("cat cat cat dog dog cat\n" * 40, encoding="utf-8")
    _privatize(tmp_path, emb, src, "--consistent")
    lines = (tmp_path / "out" / "in.txt").read_text(encoding="utf-8").splitlines()
    for line in lines:
        w = line.split()
        assert w[0] == w[1] == w[2] == w[5] and w[3] == w[4]
    assert len({line.split()[0] for line in lines}) > 1  # each document draws its own


def test_consistent_per_author_across_documents(tmp_path: Path, emb: Path) -> None:
    (tmp_path / "out").mkdir()
    src = tmp_path / "in.csv"
    src.write_text("author,body\nann,the cat the cat the\nbob,a dog\nann,cat sat on the mat\n", encoding="utf-8")
    acc = _privatize(tmp_path, emb, src, "-c", "body", "--user-column", "author", "--consistent", "--keep", "author")
    # ann: the, cat, then sat, on, mat fresh (the, cat repeated): 5 x 0.5; bob 2 x 0.5
    assert acc["eps_per_author"] == {"persons": 2, "max": 2.5, "median": 1.0, "p90": 2.5, "p99": 2.5, "mean": 1.75}
    with (tmp_path / "out" / "in.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))[1:]
    d1, d3 = rows[0][1].split(), rows[2][1].split()
    assert d1[0] == d1[2] == d1[4] == d3[3] and d1[1] == d1[3] == d3[0]  # "the" and "cat" of ann, both documents
    # without --consistent an author's eps sums every token: ann 10 x 0.5
    acc = _privatize(tmp_path, emb, src, "-c", "body", "--user-column", "author", "--keep", "author")
    assert (acc["eps_per_author"]["max"], acc["eps_per_author"]["median"]) == (5.0, 1.0)


def test_author_field_in_jsonl_may_be_dropped(tmp_path: Path, emb: Path) -> None:
    (tmp_path / "out").mkdir()
    src = tmp_path / "in.jsonl"
    src.write_text('{"who": "a", "t": "cat dog"}\n{"who": "a", "t": "cat"}\n', encoding="utf-8")
    acc = _privatize(tmp_path, emb, src, "-c", "t", "--user-column", "who", "--consistent", "--drop", "who")
    assert acc["eps_per_author"]["max"] == 1.0  # cat and dog, once
    assert all("who" not in json.loads(x) for x in (tmp_path / "out" / "in.jsonl").read_text().splitlines())


@pytest.mark.parametrize(("name", "body", "args", "fragment"), [
    ("in.txt", "the cat\n", ["--ledger", "l.db", "--budget", "2"],
     "--ledger needs --user-column COL (a .csv/.jsonl field naming the author or a stable document id)"),
    ("in.txt", "the cat\n", ["--over-budget", "drop"], "--over-budget needs a budget"),
    ("in.txt", "the cat\n", ["--budget", "-1"], "--budget must be a finite number > 0"),
    ("in.txt", "the cat\n", ["--budget", "0.4"], "--over-budget refuse: 1 of 1 documents would exceed their "
     "budget of 0.4 (eps 0.5 per released word token); nothing written, nothing spent"),
    ("in.txt", "the cat\n", ["--user-column", "author"], "--user-column names the author's field of a .csv/.jsonl"),
    ("in.csv", "author,body\n,the cat\n", ["-c", "body", "--user-column", "author"],
     "line 2: user column 'author' is empty"),
    ("in.csv", "author,body\na,the cat\n", ["-c", "body", "--user-column", "body"], "not the text's"),
])
def test_refusals(tmp_path: Path, emb: Path, name: str, body: str, args: list[str], fragment: str) -> None:
    src = tmp_path / name
    src.write_text(body, encoding="utf-8")
    out = tmp_path / "o.txt"
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.5, "--embeddings", emb, *args)
    assert_one_line_error(r, fragment)
    assert not out.exists()


def test_per_token_epsilon_lists_are_not_accounted(tmp_path: Path, emb: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    out = tmp_path / "o.txt"
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", "0.5,1", "--embeddings", emb,
               "--budget", "3", "--max-rows-per-user", "2")
    assert_one_line_error(r, "per-token epsilons) is not accounted per document yet: --budget, --max-rows-per-user "
                             "need one epsilon")
    assert not out.exists()


def test_consistent_draw_follows_the_sampler() -> None:
    """One draw per (document, word), whatever the repeats: the first replacements are the sampler's law."""
    acc = TextAccounting(1.0, 4, consistent=True)
    rng = np.random.default_rng(5)
    p = np.array([0.1, 0.2, 0.3, 0.4])

    def sample(words: np.ndarray) -> np.ndarray:
        return rng.choice(4, size=words.size, p=p)

    words = np.tile([2, 2, 2, 3], 2000)  # 2000 documents: word 2 three times, word 3 once
    docs = np.repeat(np.arange(2000), 4)
    out = acc.release(words, docs.tolist(), 2000, sample).reshape(2000, 4)
    assert (out[:, 0] == out[:, 1]).all() and (out[:, 0] == out[:, 2]).all()
    counts = np.bincount(out[:, 0], minlength=4)
    assert stats.chisquare(counts, 2000 * p).pvalue > 1e-3
    rep = acc.report(2000)
    assert rep.eps.tolist() == [2.0] * 2000 and rep.eps_repeated_word.max() == 1.0
