"""The LP benchmark's data sets (no download, deterministic in n and seed)."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp import ValidationError
from metricdp.experiments.bench_lp_data import (
    CLUSTER_SIZE,
    DATASETS,
    bench_data,
    bench_space,
    clustered_points,
)


def _components(d: np.ndarray, threshold: float) -> np.ndarray:
    """Labels of the connected components of the graph ``d < threshold`` (single linkage)."""
    n = len(d)
    label = np.full(n, -1)
    for start in range(n):
        if label[start] >= 0:
            continue
        label[start] = start
        stack = [start]
        while stack:
            u = stack.pop()
            for v in np.flatnonzero((d[u] < threshold) & (label < 0)):
                label[v] = start
                stack.append(int(v))
    return label


def test_clustered_points_form_tight_separated_groups() -> None:
    """Within a group about 0.2 * sqrt(100) = 2 apart, between groups about 10: single
    linkage at 5 finds the groups, every pair inside is below 4 and every pair across above 6."""
    n = 100
    x = clustered_points(n, seed=1)
    assert x.shape == (n, 50) and x.dtype == np.float64
    d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    label = _components(d, 5.0)
    same = label[:, None] == label[None, :]
    off = ~np.eye(n, dtype=bool)
    k = -(-n // CLUSTER_SIZE)
    assert 2 <= len(np.unique(label)) <= k
    assert d[same & off].max() < 4.0
    assert d[~same].min() > 6.0


def test_clustered_is_a_function_of_n_and_seed() -> None:
    np.testing.assert_array_equal(clustered_points(30, seed=4), clustered_points(30, seed=4))
    assert not np.array_equal(clustered_points(30, seed=4), clustered_points(30, seed=5))
    space, prior = bench_data(30, "clustered", seed=4)
    assert prior is None and space.n == 30
    np.testing.assert_array_equal(space.distances, bench_space(30, "clustered", seed=4).distances)
    with pytest.raises(ValidationError, match="n"):
        clustered_points(1)


def test_every_data_set_without_extras_builds_and_a_bad_name_is_refused() -> None:
    assert "clustered" in DATASETS
    assert bench_space(5, "gaussian").n == 5
    space, prior = bench_data(9, "grid", seed=3)
    assert space.n == 9 and prior is not None and prior.sum() == pytest.approx(1.0)
    with pytest.raises(ValidationError, match="square"):
        bench_data(10, "grid")
    with pytest.raises(ValidationError, match="data must be one of glove, gaussian, clustered"):
        bench_data(10, "fasttext")
