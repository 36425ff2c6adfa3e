"""Per-token epsilon lists: word token j of each document is released at the (j mod m)-th epsilon."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from metricdp.text.rewrite import Vocabulary, rewrite_texts
from tests.cli.test_text import emb, invoke  # noqa: F401  (the fixture)
from tests.cli_helpers import assert_one_line_error


def test_slots_count_every_word_token_of_each_document() -> None:
    seen: list[tuple[list[int], list[int]]] = []

    def sample(idx: np.ndarray, slots: np.ndarray) -> np.ndarray:
        seen.append((idx.tolist(), slots.tolist()))
        return idx

    vocab = Vocabulary(["a", "b", "c"])
    texts = ["a b zz c a", "c, c!"]  # "zz" is out of the vocabulary: it still takes slot 2
    assert list(rewrite_texts(texts, vocab, sample, cycle=3)) == texts
    shifted = list(rewrite_texts(texts, vocab, lambda idx, slots: (idx + slots) % 3, cycle=3))
    assert shifted == ["a c zz c b", "c, a!"]  # each release went back to its token, with its own slot
    ((idx, slots),) = seen  # one call, the tokens grouped by word (a slot stays with its token)
    assert sorted(zip(idx, slots, strict=True)) == sorted(zip([0, 1, 2, 0, 2, 2], [0, 1, 0, 1, 0, 1], strict=True))


def test_cli_cycles_epsilons_over_each_document(tmp_path: Path, emb: Path) -> None:  # noqa: F811
    src = tmp_path / "in.txt"
    src.write_text(" ".join(["cat"] * 200) + "\n" + " ".join(["dog"] * 200) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    r = invoke("privatize", src, "--out", out, "-m", "exponential", "--epsilon", "1000,0.001", "--embeddings", emb,
               "--seed", 4, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["epsilon_per_token"] == [1000.0, 0.001]
    for line, word in zip(out.read_text(encoding="utf-8").splitlines(), ["cat", "dog"], strict=True):
        tokens = line.split()
        assert tokens[0::2] == [word] * 100  # eps 1000: unchanged
        assert sum(t != word for t in tokens[1::2]) > 60  # eps 0.001: nearly uniform over 10 words


def test_cli_refuses_bad_epsilon_lists(tmp_path: Path, emb: Path) -> None:  # noqa: F811
    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    for value, fragment in (("1,x", "'x' is not a number"), ("1,-2", "epsilon must be finite and > 0")):
        r = invoke("privatize", src, "--out", tmp_path / "o.txt", "-m", "tem", "-e", value, "--embeddings", emb)
        assert_one_line_error(r, fragment)
        assert not (tmp_path / "o.txt").exists()
