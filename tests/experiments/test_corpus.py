"""The real-text corpus shipped with Python (the benchmarks' real English)."""

from __future__ import annotations

import itertools

from metricdp.experiments.corpus import corpus_summary, stdlib_documents, stdlib_text


def test_summary_by_hand() -> None:
    assert corpus_summary(["The cat, the hat.", "A cat's hat"]) == {
        "documents": 2, "tokens": 7, "distinct_words": 5,  # the, cat, hat, a, cat's
    }


def test_stdlib_text_is_real_fixed_and_large_enough() -> None:
    docs = stdlib_text(3000)
    summary = corpus_summary(docs)
    assert summary["tokens"] >= 3000
    assert corpus_summary(docs[:-1])["tokens"] < 3000  # the first documents that reach the size, no more
    assert docs == stdlib_text(3000)  # the same corpus every time
    assert all(d.strip() == d and "\n" not in d and d for d in docs)  # one paragraph per document, one line
    # real prose: many distinct words, common English words among them
    assert summary["distinct_words"] > 500
    words = {w.lower() for d in docs for w in d.split()}
    assert {"the", "is", "of"} <= words
    assert list(itertools.islice(stdlib_documents(), 3)) == docs[:3]
