"""``build --metric mahalanobis`` (a public covariance, given or estimated from public points) and
``build --graph EDGES --policy-graph``: values, the recorded covariance, refusals, evaluate's lines."""

from __future__ import annotations

import json
import zipfile
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest

from metricdp.cli import build as build_cli
from metricdp.covariance import covariance_from_public, read_covariance
from metricdp.errors import ClaimError, MechanismFileError, ValidationError
from metricdp.mechanisms.file import load_mechanism
from metricdp.spaces import POINT_METRICS, mahalanobis_distances
from tests.cli_helpers import assert_one_line_error, run

NODES = "label,x,y\na,0,0\nb,2,0\nc,0,3\nd,5,5\ne,6,5\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "edges.csv").write_text("source,target,weight\na,b,1\nb,c,2\nd,e,1\n")
    (tmp_path / "cov.csv").write_text("x,y\n4,0\n0,9\n")
    (tmp_path / "public.csv").write_text("label,x,y\np,0,0\nq,2,0\nr,0,2\ns,2,2\n")
    return tmp_path


def _meta(path: Path) -> dict:
    with zipfile.ZipFile(path) as z:
        return json.loads(str(np.load(BytesIO(z.read("metadata.npy")))))


def test_the_metric_choices_are_the_library_list():
    assert tuple(m.value for m in build_cli.Metric) == POINT_METRICS
    assert "mahalanobis" in POINT_METRICS and "cosine" not in POINT_METRICS


def test_mahalanobis_with_a_given_covariance_hand_computed(files):
    out = files / "m.npz"
    r = run("build", files / "nodes.csv", "-m", "exponential", "--epsilon", 1, "--metric", "mahalanobis",
            "--covariance", files / "cov.csv", "--out", out)
    assert r.exit_code == 0, r.output
    assert f"covariance given in {files / 'cov.csv'}" in r.stdout
    mech = load_mechanism(out)
    # Sigma = diag(4, 9): d(a, b) = 2 / 2 = 1, d(a, c) = 3 / 3 = 1, d(b, c) = sqrt(1 + 1)
    d = mech.distances
    assert d[0, 1] == pytest.approx(1.0) and d[0, 2] == pytest.approx(1.0) and d[1, 2] == pytest.approx(2**0.5)
    assert mech.space.covariance.tolist() == [[4.0, 0.0], [0.0, 9.0]]
    meta = _meta(out)["space"]
    assert meta["metric"] == "mahalanobis" and meta["covariance"] == [[4.0, 0.0], [0.0, 9.0]]
    assert meta["covariance_source"].startswith("given in ")
    assert mech.audit().satisfies(1.0)


def test_mahalanobis_estimated_from_public_points_is_stated(files):
    out = files / "m.npz"
    r = run("build", files / "nodes.csv", "-m", "exponential", "--epsilon", 1, "--metric", "mahalanobis",
            "--covariance-from", files / "public.csv", "--out", out)
    assert r.exit_code == 0, r.output
    assert f"covariance estimated from {files / 'public.csv'}" in r.stdout
    # the public sample (0,0), (2,0), (0,2), (2,2): variances 4/3, covariance 0
    cov = np.array(_meta(out)["space"]["covariance"])
    np.testing.assert_allclose(cov, np.eye(2) * 4 / 3, rtol=1e-12)
    ev = run("evaluate", out, "--json")
    assert ev.exit_code == 0, ev.output
    assert json.loads(ev.stdout)["covariance"].startswith("estimated from ")


def test_covariance_file_refusals_name_the_file(files):
    base = ("build", files / "nodes.csv", "-m", "exponential", "--epsilon", 1, "--metric", "mahalanobis")
    (files / "asym.csv").write_text("x,y\n1,0.5\n0.2,1\n")
    assert_one_line_error(run(*base, "--covariance", files / "asym.csv", "--out", files / "o.npz"),
                          "asym.csv", "not symmetric")
    (files / "nonpd.csv").write_text("x,y\n1,2\n2,1\n")
    assert_one_line_error(run(*base, "--covariance", files / "nonpd.csv", "--out", files / "o.npz"),
                          "nonpd.csv", "not positive definite")
    np.save(files / "shape.npy", np.eye(3))
    assert_one_line_error(run(*base, "--covariance", files / "shape.npy", "--out", files / "o.npz"),
                          "shape.npy", "shape (2, 2)")
    (files / "rows.csv").write_text("x,y\n1,0\n0,1\n0,0\n")
    assert_one_line_error(run(*base, "--covariance", files / "rows.csv", "--out", files / "o.npz"),
                          "rows.csv", "shape (2, 2)")
    (files / "text.csv").write_text("x,y\n1,zz\n0,1\n")
    assert_one_line_error(run(*base, "--covariance", files / "text.csv", "--out", files / "o.npz"),
                          "text.csv: line 2")
    (files / "cols.csv").write_text("u,v\n1,0\n0,1\n")
    assert_one_line_error(run(*base, "--covariance", files / "cols.csv", "--out", files / "o.npz"),
                          "cols.csv", "same coordinates")
    assert_one_line_error(run(*base, "--out", files / "o.npz"), "exactly one of --covariance")
    assert_one_line_error(run(*base[:-2], "--covariance", files / "cov.csv", "--out", files / "o.npz"),
                          "only with --metric mahalanobis")
    (files / "few.csv").write_text("x,y\n0,0\n1,1\n")
    assert_one_line_error(run(*base, "--covariance-from", files / "few.csv", "--out", files / "o.npz"),
                          "few.csv", "more points than dimensions")
    assert not (files / "o.npz").exists()


def test_covariance_readers_in_python(files):
    np.save(files / "c.npy", np.array([[2.0, 1.0], [1.0, 2.0]]))
    assert read_covariance(files / "c.npy", 2).tolist() == [[2.0, 1.0], [1.0, 2.0]]
    assert read_covariance(files / "cov.csv", 2, ["x", "y"]).tolist() == [[4.0, 0.0], [0.0, 9.0]]
    with pytest.raises(ValidationError, match="lacks the coordinate column"):
        covariance_from_public(files / "cov.csv", ["x", "z"])


def _tamper(path: Path, out: Path, **space: object) -> None:
    with zipfile.ZipFile(path) as z:
        arrays = {n[:-4]: np.load(BytesIO(z.read(n)), allow_pickle=False) for n in z.namelist()}
    meta = json.loads(str(arrays["metadata"]))
    meta["space"].update(space)
    arrays["metadata"] = np.array(json.dumps(meta))
    np.savez(out, **arrays)


def test_the_verifier_recomputes_mahalanobis_distances_from_the_recorded_covariance(files):
    out = files / "m.npz"
    assert run("build", files / "nodes.csv", "-m", "exponential", "--epsilon", 1, "--metric", "mahalanobis",
               "--covariance", files / "cov.csv", "--out", out).exit_code == 0
    mech = load_mechanism(out)
    np.testing.assert_allclose(mech.distances, mahalanobis_distances(mech.space.points, mech.space.points,
                                                                     [[4, 0], [0, 9]]), rtol=1e-15, atol=0)
    _tamper(out, files / "t1.npz", covariance=[[1.0, 0.0], [0.0, 1.0]])  # a claim the distances contradict
    with pytest.raises(ClaimError, match="differs from"):
        load_mechanism(files / "t1.npz")
    _tamper(out, files / "t2.npz", covariance=[[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(MechanismFileError, match="not positive definite"):
        load_mechanism(files / "t2.npz")
    _tamper(out, files / "t3.npz", covariance=None)
    with pytest.raises(MechanismFileError, match="must record its covariance"):
        load_mechanism(files / "t3.npz")
    _tamper(out, files / "t4.npz", metric="euclidean")
    with pytest.raises(MechanismFileError, match="only the mahalanobis metric"):
        load_mechanism(files / "t4.npz")


# ----------------------------------------------------------------------------- policy graphs
def test_disconnected_graph_is_refused_naming_components_and_the_option(files):
    r = run("build", files / "nodes.csv", "-m", "exponential", "--epsilon", 1, "--graph", files / "edges.csv",
            "--out", files / "g.npz")
    assert_one_line_error(r, "not connected: 2 components", "{'a', 'b', 'c'}", "--policy-graph")


def test_policy_graph_build_evaluate_report(files):
    out = files / "g.npz"
    r = run("build", files / "nodes.csv", "-m", "optimal", "--epsilon", 1, "--graph", files / "edges.csv",
            "--policy-graph", "--out", out)
    assert r.exit_code == 0, r.output
    assert "2 components, cross-component pairs unprotected" in r.stdout
    mech = load_mechanism(out)
    assert mech.space.n_components == 2 and mech.audit().satisfies(1.0)
    assert (mech.matrix[:3, 3:] == 0).all() and (mech.matrix[3:, :3] == 0).all()
    ev = run("evaluate", out)
    assert ev.exit_code == 0, ev.output
    assert "policy graph" in ev.stdout and "cross-component pairs" in ev.stdout
    js = json.loads(run("evaluate", out, "--json").stdout)
    assert js["policy_graph"] == {"components": 2, "cross_component_pairs": "unprotected"}
    assert "lower_bound" not in js and "policy graph" in js["lower_bound_note"]
    (files / "rows.csv").write_text("id,node\n1,a\n2,e\n")
    pv = run("privatize", out, files / "rows.csv", "--column", "node", "--out", files / "rel.csv")
    assert pv.exit_code == 0, pv.output
    assert "policy graph of 2 components" in pv.stderr and "reveals the component" in pv.stderr


def test_policy_graph_refusals(files):
    base = ("build", files / "nodes.csv", "--epsilon", 1, "--out", files / "o.npz")
    assert_one_line_error(run(*base, "-m", "exponential", "--policy-graph"), "--policy-graph applies only with --graph")
    assert_one_line_error(run(*base, "-m", "madlib", "--graph", files / "edges.csv", "--policy-graph"),
                          "madlib is an estimated family")
    (files / "w.csv").write_text("label,weight\na,1\nb,1\nc,1\nd,1\ne,1\n")
    assert_one_line_error(run(*base, "-m", "exponential", "--graph", files / "edges.csv", "--policy-graph",
                              "--elastic", files / "w.csv"), "--elastic cannot be combined with --policy-graph")
    assert not (files / "o.npz").exists()


def test_covariance_from_a_public_parquet_file(files):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"x": [0.0, 2.0, 0.0, 2.0], "y": [0.0, 0.0, 2.0, 2.0], "note": list("abcd")}),
                   files / "public.parquet")
    np.testing.assert_allclose(covariance_from_public(files / "public.parquet", ["x", "y"]), np.eye(2) * 4 / 3,
                               rtol=1e-12)
    pq.write_table(pa.table({"x": [0.0, 2.0, None, 2.0], "y": [0.0, 0.0, 2.0, 2.0]}), files / "holes.parquet")
    with pytest.raises(ValidationError, match=r"holes\.parquet: row 3 is not finite"):
        covariance_from_public(files / "holes.parquet", ["x", "y"])


def test_one_node_components_are_called_out(files):
    (files / "edges2.csv").write_text("source,target\na,b\nb,c\n")
    r = run("build", files / "nodes.csv", "-m", "exponential", "--epsilon", 1, "--graph", files / "edges2.csv",
            "--policy-graph", "--out", files / "s.npz")
    assert r.exit_code == 0, r.output
    assert "3 components" in r.stdout and "2 one-node component(s): those nodes are released UNCHANGED" in r.stdout
    mech = load_mechanism(files / "s.npz")
    assert mech.matrix[3, 3] == 1.0 and mech.matrix[4, 4] == 1.0
