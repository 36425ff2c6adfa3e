"""Elastic metrics: the metric axioms (hypothesis), a hand-computed case, density adaptation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.elastic import elastic_metric
from metricdp.errors import ValidationError
from metricdp.mechanisms.exponential import exponential
from metricdp.spaces import MetricSpace

LINE3 = MetricSpace.from_distances([[0, 1, 3], [1, 0, 2], [3, 2, 0]])


def test_hand_computed_line():
    """Points at 0, 1, 3; weights 1, 1, 2; rho(m) = m (scale 4 = W, dimension 1).

    Pass 1: radii 1, 1, 2 (own mass); edges 0-1 (1, from both ends) and 2-1 (2).
    Pass 2: balls of radius 1, 1, 2 hold 2, 2, 3 -> radii 2, 2, 3; point 0's nearest
    point beyond 2 is 2 (d = 1 + 2 = 3): edge 0-2 of length 2. Points 1 and 2 have
    everyone within their radius. Pass 3: every ball holds W = 4: finished.
    """
    e = elastic_metric(LINE3, [1, 1, 2], scale=4, dimension=1, coverage=1.0)
    np.testing.assert_array_equal(e.distances, [[0, 1, 2], [1, 0, 2], [2, 2, 0]])
    assert e.metric == "elastic" and e.labels == LINE3.labels


def test_hand_computed_two_points():
    # rho(m) = s (m / W)^(1/2): the lighter point asks for s sqrt(1/4) = 0.5 s and the
    # edge keeps the shorter length.
    space = MetricSpace.from_distances([[0, 10], [10, 0]])
    e = elastic_metric(space, [1, 3], scale=2.0)
    assert e.distances[0, 1] == pytest.approx(1.0)


@st.composite
def spaces(draw):
    n = draw(st.integers(2, 12))
    coords = draw(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=n, max_size=n, unique=True))
    weights = draw(st.lists(st.floats(0.01, 100.0), min_size=n, max_size=n))
    cov = draw(st.sampled_from([0.51, 0.75, 1.0]))
    return MetricSpace.from_points(np.array(coords, dtype=float)), np.array(weights), cov


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(spaces())
def test_metric_axioms(case):
    space, w, cov = case
    d = elastic_metric(space, w, coverage=cov).distances
    n = len(d)
    assert np.all(np.isfinite(d))
    assert np.all(np.diag(d) == 0)
    assert np.all(d[~np.eye(n, dtype=bool)] > 0)
    np.testing.assert_array_equal(d, d.T)
    # triangle inequality, every triple
    assert np.all(d[:, None, :] <= d[:, :, None] + d[None, :, :] + 1e-9 * d.max())


def test_scale_invariance_in_the_weights():
    rng = np.random.default_rng(0)
    space = MetricSpace.from_points(rng.random((30, 2)))
    w = rng.random(30) + 0.1
    np.testing.assert_allclose(elastic_metric(space, w).distances, elastic_metric(space, 7.0 * w).distances)


def test_dense_areas_are_stretched():
    """A heavy cluster gets larger elastic distances between its points than a light one."""
    rng = np.random.default_rng(1)
    a = rng.random((15, 2)) * 0.1
    b = rng.random((15, 2)) * 0.1 + [5.0, 0.0]
    space = MetricSpace.from_points(np.vstack([a, b]))
    w = np.r_[np.full(15, 100.0), np.full(15, 1.0)]
    d = elastic_metric(space, w).distances
    base = space.distances
    heavy = (d[:15, :15] / np.where(base[:15, :15] > 0, base[:15, :15], 1))[~np.eye(15, dtype=bool)]
    light = (d[15:, 15:] / np.where(base[15:, 15:] > 0, base[15:, 15:], 1))[~np.eye(15, dtype=bool)]
    assert np.median(heavy) > 3 * np.median(light)


def test_every_mechanism_accepts_it():
    space = MetricSpace.from_points(np.random.default_rng(2).random((8, 2)))
    e = elastic_metric(space, np.arange(1.0, 9.0))
    m = exponential(e, 1.0)
    assert m.audit().epsilon <= 1.0 * (1 + 1e-9)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"weights": [1.0, 0.0, 1.0]}, "weights"),
        ({"weights": [1.0, 1.0]}, "shape"),
        ({"weights": [1.0, np.nan, 1.0]}, "weights"),
        ({"weights": [1.0, 1.0, 1.0], "coverage": 0.5}, "coverage"),
        ({"weights": [1.0, 1.0, 1.0], "scale": -1.0}, "scale"),
        ({"weights": [1.0, 1.0, 1.0], "radius": lambda m: m * 0.0}, "radius"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        elastic_metric(LINE3, **kwargs)


def test_a_haversine_base_is_remembered():
    space = MetricSpace.from_points([[48.0, 2.0], [48.1, 2.0], [48.0, 2.3]], metric="haversine")
    e = elastic_metric(space, [1.0, 2.0, 3.0])
    assert e.metric == "elastic-haversine"
    np.testing.assert_array_equal(e.points, space.points)
