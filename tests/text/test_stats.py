"""Plausible deniability N_w, S_w: exact values on a trivial space, monotone in epsilon."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from metricdp.text.exponential import ExponentialText
from metricdp.text.stats import plausible_deniability, plot_deniability


def test_n_w_and_s_w(vocab, tmp_path: Path) -> None:
    _, points = vocab
    words = np.arange(0, 300, 10)
    lo = ExponentialText(points, 1.0)
    hi = ExponentialText(points, 12.0)
    a = plausible_deniability(lambda i: lo.sample(i, rng=1), points, words, 200)
    b = plausible_deniability(lambda i: hi.sample(i, rng=1), points, words, 200)
    assert np.median(a.n_w) < np.median(b.n_w) and np.median(a.s_w) > np.median(b.s_w)
    assert (a.loss > b.loss).mean() > 0.9 and a.s_w.max() <= 200
    q = a.quantiles()
    assert len(q["N_w"]) == 7 and q["S_w"][0] <= q["S_w"][-1]
    plot_deniability(a, tmp_path / "h.png", "test")
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"


def test_corpus_composition_by_hand() -> None:
    from metricdp.text.stats import corpus_composition

    labels = ["the", "cat", "saw", "nasa", "iphones", "paris"]
    texts = ["The cat saw 2 NASA iPhones, (xyzzy).", "par\u200bis -1,250.5 PARIS"]
    c = corpus_composition(texts, labels)
    # words: The cat saw NASA iPhones xyzzy | paris PARIS; numbers: 2, -1,250.5; punctuation: ",", "(", ")."
    assert (c.documents, c.words, c.numbers, c.punctuation) == (2, 8, 2, 3)
    assert c.in_vocabulary == 7 and c.normalised == 1
    assert c.case_kept == 6  # iPhones (mixed) takes the vocabulary's spelling
    assert c.cases == {"lower": 4, "title": 1, "upper": 2, "mixed": 1}
    shares = c.shares()
    assert shares["words"] == 8 / 13 and shares["in_vocabulary"] == 7 / 8 and shares["case_kept"] == 6 / 7
    assert corpus_composition([], labels).shares()["words"] is None
