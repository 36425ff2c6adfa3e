"""The text benchmark's corpus and table (the runs themselves are benchmarks, not tests)."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.experiments.bench_text import (
    TextBenchRow,
    markdown_table,
    plot_utility,
    replacement_summary,
    run_text_bench,
    token_forms,
    zipf_tokens,
)
from tests.helpers import skip_unless


def test_zipf_corpus_is_streamed_and_follows_1_over_k() -> None:
    chunks = list(zipf_tokens(250_000, top=1000, seed=1, chunk=100_000))
    assert [len(c) for c in chunks] == [100_000, 100_000, 50_000]
    counts = np.bincount(np.concatenate(chunks), minlength=1000)
    h = (1.0 / np.arange(1, 1001)).sum()
    assert counts[0] / 250_000 == pytest.approx(1 / h, rel=0.02)
    assert counts[1] / counts[0] == pytest.approx(0.5, rel=0.05)
    assert np.array_equal(
        np.concatenate(list(zipf_tokens(1000, top=10, seed=3))),
        np.concatenate(list(zipf_tokens(1000, top=10, seed=3, chunk=7))),
    )


def test_table_and_unknown_mechanism() -> None:
    row = TextBenchRow("tem", 1000, 10.0, setup_s=1.0, sample_s=0.5, tokens_per_s=2000.0, peak_mib=900.0)
    table = markdown_table([row])
    assert "| tem | zipf | 1,000 | n/a | 10 | 1.0 | 0.5 | 2,000 | n/a | 900 | n/a | n/a | n/a | n/a | ok |" in table
    real = TextBenchRow("exponential", 2000, 5.0, corpus="stdlib-docs", distinct_words=400, distinct_per_s=250.0)
    assert "| exponential | stdlib-docs | 2,000 | 400 | 5 |" in markdown_table([real])
    with pytest.raises(ValidationError, match="unknown text benchmark"):
        run_text_bench(["nope"], 10)
    with pytest.raises(ValidationError, match="unknown corpus"):
        run_text_bench(["tem"], 10, corpus="wikipedia")


def test_token_forms_by_hand() -> None:
    original = "In 2004 Paris had 1,250.5 CATS and Dogs\nA line\n"
    released = "In 2004 Rome had 1,250.5 CATS and dogs\nA line of more words\n"
    # numbers 2004 and 1,250.5 kept as numbers; In, had, CATS, and kept as written; Dogs kept as 'dogs'
    # (its case lost); Paris -> Rome is no kept word; the second line does not align
    assert token_forms(original, released) == {"numbers": 2, "numbers_as_words": 0, "words_as_numbers": 0,
                                               "kept_words": 5, "kept_in_case": 4, "kept_mixed": 0,
                                               "misaligned_lines": 1}
    assert token_forms("a 12 b iPhone", "7 x b iphone") == {
        "numbers": 1, "numbers_as_words": 1, "words_as_numbers": 1, "kept_words": 1, "kept_in_case": 1,
        "kept_mixed": 1, "misaligned_lines": 0}
    row = TextBenchRow("tem", 1000, 10.0, corpus="stdlib-docs",
                       forms={"numbers": 9, "numbers_as_words": 0, "words_as_numbers": 0, "kept_words": 1200,
                              "kept_in_case": 1200, "misaligned_lines": 0})
    assert "| 0 of 9 / 0 / 1,200 of 1,200 |" in markdown_table([row])


def test_replacement_summary_by_hand() -> None:
    from metricdp.pointspace import PointSpace

    space = PointSpace.from_points([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]], ["a", "b", "c"])
    pairs = [(np.array([0, 1]), np.array([0, 2])), (np.array([2]), np.array([0]))]
    got = replacement_summary(space, pairs)
    assert got["mean_distance"] == pytest.approx((0.0 + 5.0 + 10.0) / 3)
    assert got["examples"] == ["b -> c", "c -> a"]
    assert replacement_summary(space, []) == {"mean_distance": None, "examples": []}


def test_utility_plot(tmp_path) -> None:
    skip_unless("plot")
    rows = [TextBenchRow(m, 100, e, unchanged=1 - 1 / e, mean_distance=5 / e) for m in ("exponential", "tem")
            for e in (1.0, 5.0, 10.0)]
    plot_utility(rows, tmp_path / "u.png")
    assert (tmp_path / "u.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
