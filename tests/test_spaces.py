"""Metric spaces: constructors, axiom checks naming the culprit, queries."""

from __future__ import annotations

import re

import numpy as np
import pytest

from metricdp import MetricSpace, ValidationError
from metricdp.spaces import EARTH_RADIUS_KM, haversine_km, pairwise_distances

LINE = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])  # points 0, 1, 3 on a line


# ----------------------------------------------------------------------------- axioms
AB = ["a", "b"]


@pytest.mark.parametrize(
    ("matrix", "labels", "pattern"),
    [
        (np.zeros((2, 3)), None, r"square matrix, got shape \(2, 3\)"),
        ([[0.0]], None, "at least 2 points"),
        ([[0.0, np.nan], [np.nan, 0.0]], AB, r"not finite at \(0, 1\) = \('a', 'b'\)"),
        ([[0.0, 1.0], [1.0, 0.5]], AB, r"non-zero diagonal at \(1, 1\) = \('b', 'b'\): 0\.5"),
        ([[0.0, 1.0], [2.0, 0.0]], AB, (
            r"not symmetric at \(0, 1\) = \('a', 'b'\): d\[i,j\]=1\.0 but d\[j,i\]=2\.0$"
        )),
        ([[0.0, 0.0], [0.0, 0.0]], AB, r"zero \(duplicate points\?\) off the diagonal at \(0, 1\)"),
        ([[0.0, -1.0], [-1.0, 0.0]], AB, r"negative off the diagonal at \(0, 1\) = \('a', 'b'\): -1\.0$"),
        ([["0", "1"], ["1", "0"]], None, "numeric matrix"),
    ],
)
def test_each_axiom_failing_names_the_culprit(matrix, labels, pattern):
    with pytest.raises(ValidationError, match=pattern):
        MetricSpace.from_distances(matrix, labels)


def test_triangle_violation_names_the_triple():
    d = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 1.0], [5.0, 1.0, 0.0]])  # d(0,2)=5 > d(0,1)+d(1,2)=2
    with pytest.raises(ValidationError, match=r"triangle inequality at i=0, k=1, j=2 \('x', 'y', 'z'\)"):
        MetricSpace.from_distances(d, ["x", "y", "z"])


def test_triangle_equality_is_allowed():
    space = MetricSpace.from_distances(LINE)  # d(0,2) = d(0,1) + d(1,2) exactly
    assert space.n == 3
    assert space.metric == "precomputed"


def test_triangle_check_n300_passes_and_finds_a_planted_violation():
    g = np.random.default_rng(3)
    x = g.normal(size=(300, 3))
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    assert MetricSpace.from_distances(d).n == 300
    i0, j0 = 17, 211
    bad = d.copy()
    bad[i0, j0] = bad[j0, i0] = d[i0, j0] + 2 * d.max()  # longer than any two-hop path
    with pytest.raises(ValidationError, match="triangle inequality") as info:
        MetricSpace.from_distances(bad)
    i, k, j = map(int, re.search(r"i=(\d+), k=(\d+), j=(\d+)", str(info.value)).groups())
    # only the lengthened pair can be the long side of a broken triangle
    assert {i, j} == {i0, j0}
    assert bad[i, j] > bad[i, k] + bad[k, j]


def test_duplicate_labels_are_refused():
    with pytest.raises(ValidationError, match=r"label 'a' appears twice \(rows 0 and 2\)"):
        MetricSpace.from_distances(LINE, ["a", "b", "a"])


def test_wrong_number_of_labels():
    with pytest.raises(ValidationError, match="labels has 2 entries for 3 points"):
        MetricSpace.from_distances(LINE, ["a", "b"])


def test_asymmetry_within_tolerance_is_symmetrised():
    d = LINE.copy()
    d[0, 1] *= 1 + 1e-12
    space = MetricSpace.from_distances(d)
    np.testing.assert_array_equal(space.distances, space.distances.T)


# ----------------------------------------------------------------------------- points
def test_haversine_paris_london():
    paris, london = (48.8566, 2.3522), (51.5074, -0.1278)
    space = MetricSpace.from_points([paris, london], ["Paris", "London"], metric="haversine")
    assert space.distances[0, 1] == pytest.approx(343.5, abs=0.5)
    assert space.metric == "haversine"


def test_haversine_quarter_meridian():
    # pole to equator along a meridian: a quarter of the circumference
    d = haversine_km([[90.0, 0.0]], [[0.0, 0.0]])
    assert d[0, 0] == pytest.approx(np.pi / 2 * EARTH_RADIUS_KM, rel=1e-12)


@pytest.mark.parametrize(
    ("metric", "expected"),
    [("euclidean", 5.0), ("manhattan", 7.0), ("chebyshev", 4.0)],
)
def test_named_metrics_hand_computed(metric, expected):
    space = MetricSpace.from_points([[0.0, 0.0], [3.0, 4.0]], metric=metric)
    assert space.distances[0, 1] == pytest.approx(expected)
    assert space.distances[1, 0] == space.distances[0, 1]
    assert space.labels == ("0", "1")


def test_unknown_metric():
    with pytest.raises(ValidationError, match="metric must be one of"):
        pairwise_distances(np.zeros((2, 2)), np.ones((2, 2)), "taxicab")
    with pytest.raises(ValidationError, match="'cosine' is refused: 1 - cos"):  # with the reason
        pairwise_distances(np.zeros((2, 2)), np.ones((2, 2)), "cosine")


def test_duplicate_points_name_the_labels():
    with pytest.raises(ValidationError, match=r"zero \(duplicate points\?\).*\('p', 'r'\)"):
        MetricSpace.from_points([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]], ["p", "q", "r"])


@pytest.mark.parametrize(
    ("points", "metric", "pattern"),
    [
        ([[0.0, 0.0]], "euclidean", "at least 2 rows"),
        ([[0.0, np.inf], [1.0, 1.0]], "euclidean", "row 0 is not finite"),
        ([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], "haversine", "two columns"),
        ([[0.0, 0.0], [91.0, 0.0]], "haversine", r"row 1 is not a \(lat, lon\)"),
    ],
)
def test_bad_points(points, metric, pattern):
    with pytest.raises(ValidationError, match=pattern):
        MetricSpace.from_points(points, metric=metric)


# ----------------------------------------------------------------------------- graphs
def test_graph_shortest_path_metric():
    # path 0 -1- 1 -2- 2 plus a long edge 0 -10- 2: shortest path d(0,2) = 3
    space = MetricSpace.from_graph([[0, 1], [1, 2], [0, 2]], [1.0, 2.0, 10.0])
    np.testing.assert_allclose(space.distances, LINE)
    assert space.metric == "graph"


def test_graph_not_connected():
    # the components are named (labels), not one pair of nodes
    with pytest.raises(ValidationError, match=r"not connected: 2 components .*\{'0', '1'\} \(2 node\(s\)\); "
                                              r"\{'2', '3'\}"):
        MetricSpace.from_graph([[0, 1], [2, 3]])


@pytest.mark.parametrize(
    ("edges", "weights", "pattern"),
    [
        ([[0, 1], [1, 2]], [1.0, 0.0], r"edge 1 \(1, 2\) has weight 0.0"),
        ([[0, 1], [1, 2]], [1.0, -2.0], r"edge 1 \(1, 2\) has weight -2.0"),
        ([[0, 1], [1, 2]], [1.0], r"weights must have shape \(2,\)"),
        ([[0.5, 1.0]], None, "integer array"),
    ],
)
def test_graph_bad_edges(edges, weights, pattern):
    with pytest.raises(ValidationError, match=pattern):
        MetricSpace.from_graph(np.asarray(edges), weights)


def test_graph_node_outside_range():
    with pytest.raises(ValidationError, match=r"outside 0..2"):
        MetricSpace.from_graph([[0, 1], [1, 3]], n=3)


# ----------------------------------------------------------------------------- grid and queries
def test_grid_layout_and_cell():
    space = MetricSpace.grid(2, 3, cell=150.0)
    assert space.n == 6
    assert space.cell == 150.0
    assert space.d_min == 150.0
    assert space.diameter == pytest.approx(np.hypot(150.0, 300.0))
    np.testing.assert_array_equal(space.points[4], [150.0, 150.0])  # i = 4 -> row 1, column 1


def test_cell_is_none_off_lattice():
    assert MetricSpace.from_points([[0.0, 0.0], [1.0, 0.0], [0.0, 1.5]]).cell is None
    assert MetricSpace.from_points([[0.0, 0.0], [1.0, 0.0]], metric="manhattan").cell is None


def test_neighbours_tie_breaking_by_index():
    # points at 0, 1, 2, 3 on a line: point 1 has two neighbours at distance 1 (0 and 2)
    space = MetricSpace.from_points(np.arange(4.0)[:, None])
    nb = space.neighbours(2)
    np.testing.assert_array_equal(nb, [[1, 2], [0, 2], [1, 3], [2, 1]])
    np.testing.assert_array_equal(space.neighbours(1)[:, 0], [1, 0, 1, 2])
    assert space.neighbours(0).shape == (4, 0)


def test_neighbours_range_checked():
    with pytest.raises(ValidationError, match="r must be <= 2"):
        MetricSpace.from_distances(LINE).neighbours(3)


def test_nearest_point():
    space = MetricSpace.grid(3, 3)
    np.testing.assert_array_equal(space.nearest([[0.1, 0.2], [1.9, 1.2], [5.0, 5.0]]), [0, 7, 8])
    with pytest.raises(ValidationError, match="Euclidean space built from points"):
        MetricSpace.from_distances(LINE).nearest([[0.0]])


def test_index_names_every_missing_label():
    space = MetricSpace.from_distances(LINE, ["a", "b", "c"])
    np.testing.assert_array_equal(space.index(["c", "a"]), [2, 0])
    with pytest.raises(ValidationError, match=r"2 value\(s\) not in the space's labels: 'x', 'y'"):
        space.index(["a", "y", "x", "y"])


def test_space_is_read_only():
    space = MetricSpace.from_distances(LINE)
    with pytest.raises(ValueError, match="read-only"):
        space.distances[0, 1] = 7.0


def test_subspace_keeps_the_metric():
    space = MetricSpace.grid(3, 3)
    sub = space.subspace([0, 4, 8])
    assert sub.labels == ("0", "4", "8")
    assert sub.distances[0, 2] == pytest.approx(2 * np.sqrt(2))
    with pytest.raises(ValidationError, match="at least 2 distinct"):
        space.subspace([1, 1])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: MetricSpace.from_graph(np.empty((0, 2), dtype=int)), "edges is empty"),
        (lambda: MetricSpace.grid(3, 3, cell="a"), "cell must be a number"),
        (lambda: MetricSpace.from_points([["a", "b"], ["c", "d"]]), "points must be a numeric"),
        (lambda: MetricSpace.grid(2, 2).subspace([0, 10]), "index 10 is outside"),
        (lambda: MetricSpace.grid(2, 2).subspace([0, 3, -1]), "index -1 is outside"),
        (lambda: MetricSpace.grid(2, 2).subspace([0.5, 1.5]), "integer array"),
    ],
)
def test_bad_input_is_one_clear_error(call, message):
    with pytest.raises(ValidationError, match=message):
        call()


def test_a_grid_with_one_point_moved_a_hair_is_not_a_grid():
    # one point of a 10 x 10 grid of 150 m moved by 1e-7 m made h = 1e-7 and planar
    # Laplace tried to allocate 201 GiB for a 10^10-cell box
    x = np.array([[i * 150.0, j * 150.0] for i in range(10) for j in range(10)])
    assert MetricSpace.from_points(x).cell == 150.0
    x[37, 0] += 1e-7
    assert MetricSpace.from_points(x).cell is None
