"""The text benchmark's corpus and table (the runs themselves are benchmarks, not tests)."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.experiments.bench_text import TextBenchRow, markdown_table, run_text_bench, zipf_tokens


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
    assert "| tem | zipf | 1,000 | n/a | 10 | 1.0 | 0.5 | 2,000 | n/a | 900 | n/a | n/a | ok |" in table
    real = TextBenchRow("exponential", 2000, 5.0, corpus="stdlib-docs", distinct_words=400, distinct_per_s=250.0)
    assert "| exponential | stdlib-docs | 2,000 | 400 | 5 |" in markdown_table([real])
    with pytest.raises(ValidationError, match="unknown text benchmark"):
        run_text_bench(["nope"], 10)
    with pytest.raises(ValidationError, match="unknown corpus"):
        run_text_bench(["tem"], 10, corpus="wikipedia")
