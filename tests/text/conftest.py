"""A small real vocabulary (300 GloVe words) as a dense space and as a point space."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metricdp.data.glove import glove_space
from metricdp.pointspace import PointSpace
from metricdp.spaces import MetricSpace
from tests.helpers import skip_unless


@pytest.fixture(scope="session")
def vocab() -> tuple[MetricSpace, PointSpace]:
    skip_unless("glove")
    dense = glove_space(300, seed=0)
    return dense, PointSpace.from_points(dense.points, dense.labels)


def chi_square_p(releases: np.ndarray, probs: np.ndarray) -> float:
    """p-value of releases against probabilities (bins with expected < 5 pooled)."""
    n = len(releases)
    counts = np.bincount(releases, minlength=len(probs)).astype(float)
    expected = probs * n
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    exp *= obs.sum() / exp.sum()
    return float(stats.chisquare(obs, exp).pvalue)
