"""Madlib over a PointSpace vs dense brute-force references (Mahalanobis: test_mahalanobis.py)."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.mechanisms.madlib import madlib_sample
from metricdp.text.ann import recall_at_1
from metricdp.text.madlib import MadlibText


def test_matrix_free_madlib_equals_the_dense_sampler(vocab) -> None:
    dense, points = vocab
    inputs = np.arange(300).repeat(20)
    for eps in (1.0, 8.0, 40.0):
        got = MadlibText(points, eps).sample(inputs, rng=5)
        assert np.array_equal(got, madlib_sample(dense, inputs, eps, rng=5))


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_ann_index_recall(vocab, kind: str) -> None:
    pytest.importorskip("faiss")
    _, points = vocab
    inputs = np.arange(300).repeat(10)
    exact = MadlibText(points, 8.0).sample(inputs, rng=9)
    approx = MadlibText(points, 8.0, index=kind).sample(inputs, rng=9)
    assert recall_at_1(approx, exact) >= 0.9
