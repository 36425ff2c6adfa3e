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
from tests.helpers import skip_unless

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
@pytest.mark.slow
def test_glove_writes_the_library_space_exactly(app, tmp_path):
    skip_unless("glove")
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
    skip_unless("glove")
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
        (["--out", "words.txt"], "must be .csv or .parquet/.pq, got .txt"),
        (["--out", "no/such/dir/w.csv"], "does not exist"),
    ],
)
def test_glove_errors(app, tmp_path, monkeypatch, args, message):
    skip_unless("glove")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["data", "glove", *args])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_glove_rejects_a_size_below_2(app):
    result = runner.invoke(app, ["data", "glove", "--size", "1"])
    assert result.exit_code == 2


# ----------------------------------------------------------------------------- geo
@pytest.mark.slow
@pytest.mark.parametrize("region", ["paris", "beijing"])
def test_geo_writes_200_cells_and_their_weights(app, tmp_path, region):
    skip_unless("geo")
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
    skip_unless("geo")
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
        (["--region", "paris", "--out", "x.json"], "must be .csv or .parquet/.pq, got .json"),
    ],
)
def test_geo_errors(app, tmp_path, monkeypatch, args, message):
    skip_unless("geo")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["data", "geo", *args])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_geo_needs_a_region(app):
    result = runner.invoke(app, ["data", "geo"])
    assert result.exit_code == 2 and "--region" in result.output


# ----------------------------------------------------------------------------- geolife / vec
_PLT_HEADER = "Geolife trajectory\nWGS 84\nAltitude is in Feet\nReserved 3\n0,2,255,My Track,0,0,2,8421376\n0\n"


def _plt(path, points):
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"{lat!r},{lon!r},0,492,39744.12,2008-10-23,02:53:00\n" for lat, lon in points)
    path.write_text(_PLT_HEADER + body, encoding="utf-8")


def test_geolife_on_fixture_traces(app, tmp_path):
    # three traces in Beijing; 0.01-degree bins; bin A in all three traces, B in two, C in one
    a, b, c = (39.905, 116.305), (39.915, 116.305), (39.905, 116.325)
    _plt(tmp_path / "Data" / "000" / "Trajectory" / "1.plt", [a] * 5 + [b] * 2)
    _plt(tmp_path / "Data" / "001" / "Trajectory" / "1.plt", [a, b, b, b])
    _plt(tmp_path / "Data" / "002" / "Trajectory" / "1.plt", [a, c, c])
    out = tmp_path / "geolife.csv"
    result = runner.invoke(app, ["data", "geolife", str(tmp_path / "Data"), "--region", "39.9,116.3,40.0,116.4",
                                 "--cell", "0.01", "--size", "3", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["n"] == 3 and summary["available_cells"] == 3
    space = read_points(out)
    assert space.metric == "haversine"
    labels, weights = _weights(weights_path(out))
    assert weights == [3.0, 2.0, 1.0]
    np.testing.assert_allclose(space.points[space.index(labels[0])[0]], a, atol=1e-9)


@pytest.mark.parametrize("existing", ["geolife.csv", "geolife.weights.csv"])
def test_geolife_refuses_an_existing_output_unless_overwrite(app, tmp_path, existing):
    """The POINTS file or its weights file: one error naming it, nothing written, both kept as they were."""
    _plt(tmp_path / "Data" / "000" / "Trajectory" / "1.plt", [(39.905, 116.305), (39.915, 116.305)])
    (tmp_path / existing).write_text("mine\n", encoding="utf-8")
    args = ["data", "geolife", str(tmp_path / "Data"), "--region", "39.9,116.3,40.0,116.4", "--cell", "0.01",
            "--size", "2", "--out", str(tmp_path / "geolife.csv")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr.strip().splitlines() == [
        f"error: --out: refusing to write {tmp_path / existing}: the file exists and replacing it was not asked "
        "for; pass --overwrite to replace it"]
    assert (tmp_path / existing).read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["Data", existing])
    assert runner.invoke(app, [*args, "--overwrite"]).exit_code == 0
    assert read_points(tmp_path / "geolife.csv").n == 2 and _weights(weights_path(tmp_path / "geolife.csv"))[1]


def test_geolife_failing_weights_leave_no_points_file(app, tmp_path, monkeypatch):
    """The weights file fails after the POINTS file was written: the POINTS file goes too, nothing is left."""
    from metricdp.cli import data
    from metricdp.errors import UnsafeOutputError

    def appeared(path, *_a):
        raise UnsafeOutputError(f"refusing to write {path}: the file appeared while it was written")

    monkeypatch.setattr(data, "_write_weights", appeared)
    _plt(tmp_path / "Data" / "000" / "Trajectory" / "1.plt", [(39.905, 116.305), (39.915, 116.305)])
    result = runner.invoke(app, ["data", "geolife", str(tmp_path / "Data"), "--region", "39.9,116.3,40.0,116.4",
                                 "--cell", "0.01", "--size", "2", "--out", str(tmp_path / "geolife.csv")])
    assert result.exit_code == 2 and "geolife.weights.csv: the file appeared" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["Data"]


def test_vec_refuses_an_existing_output_unless_overwrite(app, tmp_path):
    src = tmp_path / "tiny.vec"
    _vec(src, [f"w{chr(97 + i)}" for i in range(20)])
    out = tmp_path / "words.parquet"
    out.write_bytes(b"mine")
    args = ["data", "vec", str(src), "--size", "5", "--pool", "10", "--neighbours", "2", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and f"refusing to write {out}: the file exists" in result.stderr
    assert out.read_bytes() == b"mine"
    assert runner.invoke(app, [*args, "--overwrite"]).exit_code == 0
    assert read_points(out).n == 5


def test_geolife_errors(app, tmp_path):
    result = runner.invoke(app, ["data", "geolife", str(tmp_path / "missing"), "--out", str(tmp_path / "g.csv")])
    assert result.exit_code == 2 and "no such file or folder" in result.stderr


def _vec(path, words, dim=4, seed=0, header=True):
    rng = np.random.default_rng(seed)
    lines = [f"{len(words)} {dim}"] if header else []
    for w in words:
        lines.append(w + " " + " ".join(f"{v:.6f}" for v in rng.normal(size=dim)))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_vec_samples_a_vocabulary_from_a_fixture_file(app, tmp_path):
    words = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(60)] + [",", "123"]
    src = tmp_path / "tiny.vec"
    _vec(src, words)
    out = tmp_path / "words.csv"
    args = ["data", "vec", str(src), "--size", "10", "--seed", "3", "--pool", "40", "--neighbours", "5",
            "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    space = read_points(out)
    assert space.n == 10 and space.points.shape[1] == 4
    assert all(lab.isalpha() for lab in space.labels)  # the pool drops ',' and '123'
    # the same as the library call on the same file
    from metricdp.data.embeddings import read_vec
    from metricdp.data.glove import vocabulary_space

    lib = vocabulary_space(read_vec(src, limit=160), 10, seed=3, pool=40, neighbours=5)
    assert space.labels == lib.labels
    again = tmp_path / "again.csv"
    assert runner.invoke(app, [*args[:-1], str(again)]).exit_code == 0
    assert again.read_text() == out.read_text()


def test_vec_errors(app, tmp_path):
    src = tmp_path / "tiny.vec"
    _vec(src, ["aa", "bb", "cc"])
    result = runner.invoke(app, ["data", "vec", str(src), "--size", "10", "--pool", "3", "--neighbours", "1",
                                 "--out", str(tmp_path / "w.csv")])
    assert result.exit_code == 2 and "exceeds the pool" in result.stderr
    assert not (tmp_path / "w.csv").exists()
