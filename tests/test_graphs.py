"""Road networks: ``build --graph EDGES`` and :mod:`metricdp.graphs` on 3-4 node graphs computed by hand."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metricdp.errors import ValidationError
from metricdp.graphs import graph_space, read_edges
from metricdp.mechanisms.file import load_mechanism
from metricdp.spaces import MetricSpace
from tests.cli_helpers import assert_one_line_error, run

NODES = MetricSpace.from_points([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]], list("ABCD"))


def _edges(path, text):
    path.write_text(text)
    return path


def test_square_with_a_long_diagonal_by_hand(tmp_path):
    # A-B 1, B-C 2, C-D 1, A-D 5 (and a parallel A-B 3, a self-loop C-C): d(A, D) = min(5, 1 + 2 + 1) = 4
    e = _edges(tmp_path / "e.csv", "source,target,weight\nA,B,1\nB,C,2\nC,D,1\nA,D,5\nA,B,3\nC,C,0.5\n")
    space = graph_space(NODES, e)
    expected = [[0, 1, 3, 4], [1, 0, 2, 3], [3, 2, 0, 1], [4, 3, 1, 0]]
    np.testing.assert_array_equal(space.distances, expected)
    assert space.metric == "graph" and space.labels == tuple("ABCD")
    np.testing.assert_array_equal(space.points, NODES.points)  # coordinates kept for display


def test_unweighted_triangle_and_parquet(tmp_path):
    nodes = MetricSpace.from_points([[0.0], [1.0], [2.0]], ["x", "y", "z"])
    e = _edges(tmp_path / "e.csv", "target,source\ny,x\nz,y\n")  # no weight column: lengths 1, any column order
    np.testing.assert_array_equal(graph_space(nodes, e).distances, [[0, 1, 2], [1, 0, 1], [2, 1, 0]])
    pq.write_table(pa.table({"source": ["x", "y", "x"], "target": ["y", "z", "z"], "weight": [1.0, 1.0, 1.5]}),
                   tmp_path / "e.parquet")
    np.testing.assert_array_equal(graph_space(nodes, tmp_path / "e.parquet").distances,
                                  [[0, 1, 1.5], [1, 0, 1], [1.5, 1, 0]])


@pytest.mark.parametrize(("text", "fragment"), [
    ("source,target,weight\nA,B,1\nB,Q,1\n", "line 3: target 'Q' is not a node"),
    ("source,target,weight\nA,B,1\nB,C,-2\n", "line 3: weight '-2' is not finite and > 0"),
    ("source,target,weight\nA,B,nan\n", "line 2: weight 'nan' is not finite and > 0"),
    ("source,target,weight\nA,B,0\n", "line 2: weight '0'"),
    ("source,target,weight\nA,B,inf\n", "line 2: weight 'inf'"),
    ("source,target,weight\nA,B,1_0\n", "line 2: weight '1_0' is not a number"),
    ("source,target,weight\nA,B,\n", "line 2: weight '' is not a number"),
    ("from,to\nA,B\n", "needs the columns source,target"),
    ("source,target,weight,kind\nA,B,1,road\n", "unknown column(s) 'kind'"),
    ("source,target\n", "no edges"),
    ("source,target\nA,B\nC,D\n", "2 components with no path between them: {'A', 'B'} (2 node(s)); {'C', 'D'}"),
])
def test_refusals_name_the_file_and_line(tmp_path, text, fragment):
    e = _edges(tmp_path / "e.csv", text)
    with pytest.raises(ValidationError) as ex:
        graph_space(NODES, e)
    assert str(e) in str(ex.value) and fragment in str(ex.value), str(ex.value)


def test_read_edges_returns_indices_and_weights(tmp_path):
    e = _edges(tmp_path / "e.csv", "source,target,weight\nD,A,2.5\nB,C,1e0\n")
    edges, weights = read_edges(e, NODES.labels)
    assert edges.tolist() == [[3, 0], [1, 2]] and weights.tolist() == [2.5, 1.0]


def test_build_graph_cli(tmp_path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("label,x,y\nA,0,0\nB,1,0\nC,1,1\nD,0,1\n")
    e = _edges(tmp_path / "e.csv", "source,target,weight\nA,B,1\nB,C,2\nC,D,1\nA,D,5\n")
    out = tmp_path / "m.npz"
    r = run("build", nodes, "--graph", e, "-m", "exponential", "-e", "1", "-o", out)
    assert r.exit_code == 0, r.output
    mech = load_mechanism(out)
    assert mech.space.metric == "graph" and mech.space.distances[0, 3] == 4.0
    assert_one_line_error(run("build", nodes, "--graph", e, "--metric", "euclidean", "-m", "exponential", "-e", "1",
                              "-o", tmp_path / "m2.npz"), "--metric does not apply with --graph")
    bad = _edges(tmp_path / "bad.csv", "source,target,weight\nA,B,1\nA,Z,2\n")
    assert_one_line_error(run("build", nodes, "--graph", bad, "-m", "exponential", "-e", "1", "-o", tmp_path / "x.npz"),
                          f"{bad}: line 3: target 'Z' is not a node")
    assert not (tmp_path / "x.npz").exists()
    assert_one_line_error(run("build", nodes, "--graph", e, "-m", "exponential", "-e", "1", "-o", e), "e.csv")


def test_angular_metric_from_the_cli(tmp_path):
    pts = tmp_path / "emb.csv"
    pts.write_text("label,a,b\nx,1,0\ny,0,1\nz,1,1\n")
    r = run("build", pts, "--metric", "angular", "-m", "exponential", "-e", "2", "-o", tmp_path / "m.npz")
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(load_mechanism(tmp_path / "m.npz").space.distances[0], [0, 0.5, 0.25], atol=1e-15)
