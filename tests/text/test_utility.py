"""Utility of a release on a corpus: fraction of tokens changed, mean embedding distance, examples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metricdp.pointspace import PointSpace
from metricdp.text.utility import plot_utility, replacement_summary, utility_rows
from tests.cli.test_text import emb, invoke  # noqa: F401  (the fixture)
from tests.cli_helpers import assert_one_line_error
from tests.helpers import skip_unless

SPACE = PointSpace.from_points([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]], ["a", "b", "c"])


def test_replacement_summary_by_hand() -> None:
    pairs = [(np.array([0, 1]), np.array([0, 2])), (np.array([2, 0]), np.array([0, 0]))]
    s = replacement_summary(SPACE, pairs)
    # moves: 0, 5, 10, 0 over 4 tokens
    assert s == {"changed": 0.5, "mean_distance": pytest.approx(3.75), "examples": ["b -> c", "c -> a"]}
    assert replacement_summary(SPACE, []) == {"changed": None, "mean_distance": None, "examples": []}


def test_utility_rows_rewrite_the_corpus_per_sampler(tmp_path: Path) -> None:
    texts = ["A b, zz c!", "b b"]  # "zz" is out of the vocabulary: not counted

    def same(idx: np.ndarray) -> np.ndarray:
        return idx

    def first(idx: np.ndarray) -> np.ndarray:
        return np.zeros_like(idx)

    rows = utility_rows(SPACE, texts, [("same", 1.0, same), ("first", 2.0, first)])
    assert [(r.mechanism, r.epsilon, r.tokens, r.changed) for r in rows] == [("same", 1.0, 5, 0.0),
                                                                              ("first", 2.0, 5, 0.8)]
    assert rows[0].mean_distance == 0.0 and rows[1].mean_distance == pytest.approx((5 + 10 + 5 + 5) / 5)
    assert rows[1].examples[0] == "b -> a"
    skip_unless("plot")
    plot_utility(rows, tmp_path / "u.png", "two lines")
    assert (tmp_path / "u.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_stats_on_a_corpus(tmp_path: Path, emb: Path) -> None:  # noqa: F811
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n" * 30 + "paris and london\n", encoding="utf-8")
    r = invoke("stats", "-m", "exponential,tem", "-e", "500,0.001", "--embeddings", emb, "--corpus", corpus,
               "--seed", 2, "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert [(x["mechanism"], x["epsilon"]) for x in rows] == [("exponential", 500.0), ("exponential", 0.001),
                                                               ("tem", 500.0), ("tem", 0.001)]
    assert rows[0]["changed"] == 0.0 and rows[0]["mean_distance"] == 0.0 and rows[0]["tokens"] == 182
    assert rows[1]["changed"] > 0.5 and rows[1]["mean_distance"] > 0.5 and rows[1]["examples"]
    table = invoke("stats", "-m", "tem", "-e", "3", "--embeddings", emb, "--corpus", corpus)
    assert table.exit_code == 0 and "mean distance" in table.stdout
    bad = invoke("stats", "-m", "tem,nope", "-e", "1", "--embeddings", emb, "--corpus", corpus)
    assert_one_line_error(bad, "choose among")
    assert_one_line_error(invoke("stats", "-m", "tem", "-e", "1,2", "--embeddings", emb), "several are compared")
