"""Madlib over a PointSpace vs dense brute-force references (Mahalanobis: test_mahalanobis.py)."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.mechanisms.madlib import madlib_sample
from metricdp.pointspace import PointSpace
from metricdp.text.ann import make_index, recall_at_1
from metricdp.text.madlib import MadlibText
from tests.helpers import optional_dependency, skip_unless


def test_matrix_free_madlib_equals_the_dense_sampler(vocab) -> None:
    dense, points = vocab
    inputs = np.arange(300).repeat(20)
    for eps in (1.0, 8.0, 40.0):
        got = MadlibText(points, eps).sample(inputs, rng=5)
        assert np.array_equal(got, madlib_sample(dense, inputs, eps, rng=5))


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_ann_index_recall(vocab, kind: str) -> None:
    skip_unless("faiss-cpu")
    _, points = vocab
    inputs = np.arange(300).repeat(10)
    exact = MadlibText(points, 8.0).sample(inputs, rng=9)
    approx = MadlibText(points, 8.0, index=kind).sample(inputs, rng=9)
    assert recall_at_1(approx, exact) >= 0.9


def test_ann_index_is_built_or_names_the_faiss_extra() -> None:
    """Without faiss-cpu: the library's one error naming the extra; with it, each word finds itself."""
    points = PointSpace.from_points(np.random.default_rng(0).normal(size=(200, 4)), [f"w{i}" for i in range(200)])
    with optional_dependency("faiss-cpu"):
        index = make_index("hnsw", points)
        assert (index.search(np.asarray(points.vectors)) == np.arange(200)).mean() >= 0.95
