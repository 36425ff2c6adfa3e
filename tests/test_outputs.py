"""Separate output sets: construction, validation, the cross triangle inequality."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.outputs import OutputSet, check_outputs, cross_triangle_violation
from metricdp.spaces import MetricSpace, haversine_km

LINE = MetricSpace.from_points([[0.0], [1.0], [3.0]], ["a", "b", "c"])


def test_from_points_hand_computed():
    y = OutputSet.from_points(LINE, [[0.5], [2.0]], ["p", "q"])
    assert y.labels == ("p", "q") and y.m == 2 and y.n == 3 and y.metric == "euclidean"
    np.testing.assert_array_equal(y.distances, [[0.5, 2.0], [0.5, 1.0], [2.5, 1.0]])
    assert not y.distances.flags.writeable and not y.points.flags.writeable
    with pytest.raises(ValueError):
        y.distances.setflags(write=True)
    assert y.nearest_inputs().tolist() == [0, 1]  # ties: the smaller index (0.5 from a and b)
    assert y.index(["q", "p"]).tolist() == [1, 0]
    assert OutputSet.from_points(LINE, [[1.0]]).labels == ("y0",)


def test_from_points_haversine_in_km():
    space = MetricSpace.from_points([[48.85, 2.35], [48.86, 2.30]], ["x", "z"], "haversine")
    y = OutputSet.from_points(space, [[48.80, 2.40]])
    np.testing.assert_allclose(y.distances, haversine_km(space.points, [[48.80, 2.40]]))
    with pytest.raises(ValidationError, match="output point 0 is not a \\(lat, lon\\)"):
        OutputSet.from_points(space, [[91.0, 2.0]])


def test_from_distances_and_errors_name_the_culprit():
    y = OutputSet.from_distances(LINE, [[1.0], [0.0], [2.0]], ["hub"])
    assert y.metric == "precomputed" and y.points is None
    with pytest.raises(ValidationError, match=r"output distance \(2, 1\) \(input 'c'\) is -1.0"):
        OutputSet.from_distances(LINE, [[0.0, 1.0], [1.0, 1.0], [1.0, -1.0]])
    with pytest.raises(ValidationError, match="is nan"):
        OutputSet.from_distances(LINE, [[0.0], [np.nan], [1.0]])
    with pytest.raises(ValidationError, match=r"shape \(3, m\)"):
        OutputSet.from_distances(LINE, np.ones((2, 2)))
    with pytest.raises(ValidationError, match=r"shape \(3, m\)"):
        OutputSet.from_distances(LINE, np.ones(3))
    with pytest.raises(ValidationError, match="'p' appears twice"):
        OutputSet.from_distances(LINE, np.ones((3, 2)), ["p", "p"])
    with pytest.raises(ValidationError, match="2 entries for 1 outputs"):
        OutputSet.from_distances(LINE, np.ones((3, 1)), ["p", "q"])
    with pytest.raises(ValidationError, match=r"shape \(m, 1\)"):
        OutputSet.from_points(LINE, [[0.0, 1.0]])
    with pytest.raises(ValidationError, match="coordinate metric"):
        OutputSet.from_points(MetricSpace.from_distances([[0, 1], [1, 0]]), [[0.0]])
    with pytest.raises(ValidationError, match="not among the output labels"):
        y.index(["nope"])


def test_check_outputs():
    y = OutputSet.from_points(LINE, [[0.5]])
    assert check_outputs(None, LINE) is None and check_outputs(y, LINE) is y
    with pytest.raises(ValidationError, match="must be an OutputSet"):
        check_outputs(np.ones((3, 1)), LINE)
    with pytest.raises(ValidationError, match="distances to 3 inputs, but the space has 2"):
        check_outputs(y, MetricSpace.grid(1, 2))


def test_cross_triangle_hand_computed():
    # d(a, b) = 1. Output 0 at distances 0 and 1: ratio 1 (fine); output 1 at 3 and 1: |3 - 1| / 1 = 2.
    d = [[0.0, 1.0], [1.0, 0.0]]
    assert cross_triangle_violation(d, [[0.0], [1.0]]).ratio == 1.0
    worst = cross_triangle_violation(d, [[0.0, 3.0], [1.0, 1.0]])
    assert worst == (2.0, 0, 1, 1)
    y = OutputSet.from_points(LINE, [[0.5], [7.0]])
    assert y.triangle_violation(LINE).ratio <= 1.0 + 1e-12


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 6), m=st.integers(1, 5), seed=st.integers(0, 2**32 - 1), noise=st.booleans())
def test_cross_triangle_agrees_with_brute_force(n, m, seed, noise):
    g = np.random.default_rng(seed)
    x, yp = g.normal(size=(n, 2)), g.normal(size=(m, 2))
    space = MetricSpace.from_points(x)
    cross = OutputSet.from_points(space, yp).distances.copy()
    if noise:
        cross *= g.uniform(0.5, 1.5, size=cross.shape)
    want = max(abs(cross[u, y] - cross[v, y]) / space.distances[u, v]
               for u, v in itertools.permutations(range(n), 2) for y in range(m))
    got = cross_triangle_violation(space.distances, cross)
    assert got.ratio == pytest.approx(want, rel=1e-12)
    assert abs(cross[got.u, got.y] - cross[got.v, got.y]) / space.distances[got.u, got.v] == pytest.approx(want)
    if not noise:
        assert got.ratio <= 1.0 + 1e-9


def test_check_outputs_refuses_an_output_set_measured_on_another_space():
    """An OutputSet from points remembers its coordinates: one built on another space of the same size
    (another scale, other points, another metric) was accepted, and losses used the wrong distances."""
    x = MetricSpace.from_points([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    y = OutputSet.from_points(x, [[0.5, 0.5], [3.0, 3.0]])
    assert check_outputs(y, x) is y
    assert check_outputs(y, MetricSpace.from_points(np.asarray(x.points) + 0.0)) is y  # the same points: fine
    scaled = MetricSpace.from_points(np.asarray(x.points) * 10.0)
    with pytest.raises(ValidationError, match=r"another space.*output distance d\('1', 'y0'\)"):
        check_outputs(y, scaled)
    manhattan = MetricSpace.from_points(x.points, metric="manhattan")
    with pytest.raises(ValidationError, match=r"euclidean.*manhattan"):
        check_outputs(y, manhattan)
    # given distances carry no coordinates: nothing to compare (the cross triangle check is the builders')
    z = OutputSet.from_distances(x, y.distances)
    assert check_outputs(z, scaled) is z
