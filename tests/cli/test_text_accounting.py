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
     "--ledger needs --user-column (a .csv/.jsonl field naming the author or a stable document id)"),
    ("in.txt", "the cat\n", ["--over-budget", "drop"], "--over-budget needs a budget"),
    ("in.txt", "the cat\n", ["--budget", "-1"], "--budget must be a finite number > 0"),
    ("in.txt", "the cat\n", ["--budget", "0.4"], "--over-budget refuse: 1 of 1 documents with words to "
     "release would exceed their budget of 0.4 (eps 0.5 per released word token); nothing written, nothing spent"),
    ("in.txt", "the cat\n", ["--user-column", "author"], "--user-column names the author's field of a .csv/.jsonl"),
    ("in.csv", "author,body\n,the cat\n", ["-c", "body", "--user-column", "author"],
     "line 2: user column 'author' is empty"),
    ("in.csv", "author,body\na,the cat\n", ["-c", "body", "--user-column", "body"], "not the text's"),
])
def test_refusals(tmp_path: Path, emb: Path, name: str, body: str, args: list[str], fragment: str) -> None:
    src = tmp_path / name
    src.write_text(body, encoding="utf-8")
    out = tmp_path / f"o{src.suffix}"  # a rewrite is written in its input's format
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


# ---------------------------------------------------------------------------------------------- budgets
W = "[WITHHELD]"


def test_the_placeholder_is_the_libraries() -> None:
    from metricdp.text.rewrite import WITHHELD

    assert text.WITHHELD == WITHHELD == W


def _out_lines(tmp_path: Path, name: str) -> list[str]:
    return (tmp_path / "out" / name).read_text(encoding="utf-8").splitlines()


def test_budget_by_hand_drop_and_refuse(tmp_path: Path, emb: Path) -> None:
    """eps 0.5, budget 1 = two released tokens per document. Doc 1 (5 tokens) keeps 2, doc 2 (2 tokens) all, doc 3
    none; under refuse the run stops naming one document of the two with words, nothing written."""
    (tmp_path / "out").mkdir()
    src = tmp_path / "in.txt"
    src.write_text("the cat the cat the\na dog\n42 !\n", encoding="utf-8")
    acc = _privatize(tmp_path, emb, src, "--budget", 1, "--over-budget", "drop")
    assert (acc["rows_in"], acc["rows_released"], acc["withheld_budget"], acc["withheld_cap"]) == (7, 4, 3, 0)
    assert (acc["persons_in"], acc["persons_over"], acc["person"], acc["withheld_as"]) == (3, 1, "document", W)
    assert acc["eps_per_person_run"]["max"] == 1.0 and acc["eps_per_person_total"] is None
    assert acc["tokens_released"]["max"] == 2 and acc["eps_per_document"]["max"] == 1.0  # the released tokens
    d1, d2, d3 = _out_lines(tmp_path, "in.txt")
    assert d1.split().count(W) == 3 and W not in d2 and d3 == "42 !"
    assert all(w in WORDS for w in d1.split() if w != W)
    # refuse (the default): exit 2, one line naming how many documents, nothing written
    out = tmp_path / "refused.txt"
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.5, "--embeddings", emb, "--budget", 1)
    assert_one_line_error(r, "--over-budget refuse: 1 of 2 documents with words to release would exceed their "
                             "budget of 1")
    assert not out.exists()
    # budget 2.5: everything fits, nothing withheld
    acc = _privatize(tmp_path, emb, src, "--budget", 2.5)
    assert (acc["withheld_budget"], acc["eps_per_person_run"]["max"]) == (0, 2.5)
    assert W not in (tmp_path / "out" / "in.txt").read_text(encoding="utf-8")


def test_consistent_budget_counts_distinct_words(tmp_path: Path, emb: Path) -> None:
    """--consistent: doc 1 costs 2 distinct words x 0.5 = 1, so budget 1 fits; at 0.5 one word of two is
    withheld, all of its tokens (the word's one release is withheld, not some copies)."""
    (tmp_path / "out").mkdir()
    src = tmp_path / "in.txt"
    src.write_text("the cat the cat the\n" * 200, encoding="utf-8")
    acc = _privatize(tmp_path, emb, src, "--budget", 1, "--consistent")
    assert (acc["withheld_budget"], acc["eps_per_person_run"]["max"], acc["fresh_releases"]) == (0, 1.0, 400)
    acc = _privatize(tmp_path, emb, src, "--budget", 0.5, "--consistent", "--over-budget", "drop",
                     "--seed", 3)  # a fixed draw decides the band below
    assert (acc["persons_over"], acc["eps_per_person_run"]["max"], acc["fresh_releases"]) == (200, 0.5, 200)
    kept_the = 0
    for line in _out_lines(tmp_path, "in.txt"):
        w = line.split()
        assert w[0] == w[2] == w[4] and w[1] == w[3] and (w[0] == W) != (w[1] == W)
        kept_the += w[0] != W
    assert 60 < kept_the < 140  # which word is withheld: uniform (binomial(200, 1/2), 6 sd)


def test_max_rows_per_user_keeps_k_uniform_tokens(tmp_path: Path, emb: Path) -> None:
    """K = 1 token per document, chosen uniformly (not the first): chi-square over the 5 positions."""
    (tmp_path / "out").mkdir()
    src = tmp_path / "in.txt"
    src.write_text("the cat the cat the\n" * 1000, encoding="utf-8")
    acc = _privatize(tmp_path, emb, src, "--max-rows-per-user", 1, "--seed", 3)  # a fixed draw
    assert (acc["withheld_cap"], acc["rows_released"], acc["eps_per_person_run"]["max"]) == (4000, 1000, 0.5)
    positions = np.zeros(5, dtype=int)
    for line in _out_lines(tmp_path, "in.txt"):
        w = line.split()
        assert sum(x != W for x in w) == 1
        positions[[x != W for x in w].index(True)] += 1
    assert stats.chisquare(positions).pvalue > 1e-3


def _csv(tmp_path: Path) -> Path:
    src = tmp_path / "in.csv"
    src.write_text("author,body\nann,the cat the cat the\nbob,a dog\n", encoding="utf-8")
    return src


def _spent(ledger: Path, who: list[str]) -> list[float]:
    from metricdp.accounting.ledger import Ledger

    with Ledger(ledger) as book:
        return [round(x, 12) for x in book.spent(who).tolist()]


def test_ledger_across_two_runs(tmp_path: Path, emb: Path) -> None:
    """Budget 3 at 0.5 = 6 tokens per author. Run 1: ann 5, bob 2. Run 2 (drop): ann 1 of 5, bob 2. Run 3
    (refuse): ann over, refused, nothing spent."""
    (tmp_path / "out").mkdir()
    src, ledger = _csv(tmp_path), tmp_path / "l.db"
    args = ("-c", "body", "--user-column", "author", "--keep", "author", "--ledger", ledger)
    acc = _privatize(tmp_path, emb, src, *args, "--budget", 3)
    assert (acc["withheld_budget"], acc["eps_per_person_total"]["max"], acc["person"]) == (0, 2.5, "author")
    assert _spent(ledger, ["ann", "bob"]) == [2.5, 1.0]
    acc = _privatize(tmp_path, emb, src, *args, "--over-budget", "drop")  # the ledger's budget
    assert (acc["withheld_budget"], acc["persons_over"]) == (4, 1)
    assert (acc["eps_per_person_run"]["max"], acc["eps_per_person_total"]["max"]) == (1.0, 3.0)
    with (tmp_path / "out" / "in.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))[1:]
    assert rows[0][1].split().count(W) == 4 and W not in rows[1][1]
    assert _spent(ledger, ["ann", "bob"]) == [3.0, 2.0]
    out = tmp_path / "o3.csv"
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.5, "--embeddings", emb, *args)
    assert_one_line_error(r, "--over-budget refuse: 1 of 2 authors with words to release would exceed their "
                             "budget of 3")
    assert not out.exists() and _spent(ledger, ["ann", "bob"]) == [3.0, 2.0]


def test_consistent_repeat_costs_nothing_across_runs(tmp_path: Path, emb: Path) -> None:
    (tmp_path / "out").mkdir()
    src, ledger = _csv(tmp_path), tmp_path / "l.db"
    args = ("-c", "body", "--user-column", "author", "--keep", "author", "--ledger", ledger, "--consistent")
    acc = _privatize(tmp_path, emb, src, *args, "--budget", 1.5)
    first = (tmp_path / "out" / "in.csv").read_text(encoding="utf-8")
    assert (acc["fresh_releases"], acc["memo_hits"], acc["eps_per_person_total"]["max"]) == (4, 0, 1.0)
    for _ in range(2):
        acc = _privatize(tmp_path, emb, src, *args)
        assert (acc["fresh_releases"], acc["memo_hits"], acc["eps_per_person_run"]["max"]) == (0, 4, 0.0)
        assert (tmp_path / "out" / "in.csv").read_text(encoding="utf-8") == first
    assert _spent(ledger, ["ann", "bob"]) == [1.0, 1.0]
    # a new word of ann costs one more release; her repeated words stay the same
    src.write_text("author,body\nann,the cat sat\n", encoding="utf-8")
    acc = _privatize(tmp_path, emb, src, *args)
    assert (acc["fresh_releases"], acc["memo_hits"]) == (1, 2)
    assert _spent(ledger, ["ann", "bob"]) == [1.5, 1.0]
    with (tmp_path / "out" / "in.csv").open(newline="", encoding="utf-8") as fh:
        ann = list(csv.reader(fh))[1][1].split()
    assert ann[:2] == first.splitlines()[1].split(",")[1].split()[:2]


def test_ledger_unit_is_the_embedding(tmp_path: Path, emb: Path) -> None:
    """Another embedding is another distance: its eps cannot be added to this ledger's."""
    (tmp_path / "out").mkdir()
    src, ledger = _csv(tmp_path), tmp_path / "l.db"
    args = ("-c", "body", "--user-column", "author", "--keep", "author", "--ledger", ledger)
    _privatize(tmp_path, emb, src, *args, "--budget", 10)
    other = tmp_path / "emb2.txt"
    other.write_text(emb.read_text(encoding="utf-8").replace("the ", "the 1", 1), encoding="utf-8")
    out = tmp_path / "o.csv"
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.5, "--embeddings", other, *args)
    assert_one_line_error(r, "per euclidean distance of emb.txt#")
    assert not out.exists() and _spent(ledger, ["ann", "bob"]) == [2.5, 1.0]
    acc = _privatize(tmp_path, emb, src, *args, "-m", "tem")  # another Euclidean family: the same unit
    assert acc["eps_per_person_total"]["max"] == 5.0


def test_seeded_budget_run_is_reproducible_and_names_its_unit(tmp_path: Path, emb: Path) -> None:
    """--seed fixes the releases and the random choice of withheld tokens (with the usual warning)."""
    src, ledger = _csv(tmp_path), tmp_path / "l.db"
    outs = []
    for k in range(2):
        out = tmp_path / f"o{k}.csv"
        r = invoke("privatize", src, "--out", out, "-m", "exponential", "-e", 0.5, "--embeddings", emb, "--seed", 7,
                   "-c", "body", "--user-column", "author", "--keep", "author", "--max-rows-per-user", 3,
                   "--ledger", ledger, "--budget", 100, "--json")
        assert r.exit_code == 0, r.output
        assert "--seed makes the releases reproducible" in r.stderr
        acc = json.loads(r.stdout)["accounting"]
        assert acc["withheld_cap"] == 2 and acc["ledger_unit"].startswith("euclidean distance of emb.txt#")
        outs.append(out.read_text(encoding="utf-8"))
    assert outs[0] == outs[1] and outs[0].count(W) == 2


def test_the_ledger_and_its_key_are_never_the_output(tmp_path: Path, emb: Path) -> None:
    (tmp_path / "out").mkdir()
    src, ledger = _csv(tmp_path), tmp_path / "l.db"
    args = ("-m", "exponential", "-e", 0.5, "--embeddings", emb, "-c", "body", "--user-column", "author",
            "--keep", "author", "--ledger", ledger)
    _privatize(tmp_path, emb, src, *args[6:], "--budget", 5)
    before = ledger.read_bytes(), (tmp_path / "l.db.key").read_bytes()
    for target in (ledger, tmp_path / "l.db.key"):
        r = invoke("privatize", src, "--out", target, *args)
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert (ledger.read_bytes(), (tmp_path / "l.db.key").read_bytes()) == before
    assert _spent(ledger, ["ann", "bob"]) == [2.5, 1.0]


def test_jsonl_budget_per_author_with_the_author_dropped(tmp_path: Path, emb: Path) -> None:
    (tmp_path / "out").mkdir()
    src = tmp_path / "in.jsonl"
    src.write_text('{"who": "a", "t": "cat dog"}\n{"who": "a", "t": "cat"}\n{"who": "b", "t": "dog"}\n',
                   encoding="utf-8")
    acc = _privatize(tmp_path, emb, src, "-c", "t", "--user-column", "who", "--drop", "who", "--budget", 1,
                     "--over-budget", "drop")
    assert (acc["withheld_budget"], acc["persons_over"], acc["eps_per_author"]["max"]) == (1, 1, 1.0)
    recs = [json.loads(x) for x in (tmp_path / "out" / "in.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all("who" not in r for r in recs)
    assert sum((r["t"] + " ").split().count(W) for r in recs[:2]) == 1 and W not in recs[2]["t"]
