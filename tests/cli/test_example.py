"""``metricdp example``: built-in POINTS files, and the README's main job end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metricdp import read_points
from metricdp.cli.example import EXAMPLES, example_text
from tests.cli_helpers import run


def test_list():
    result = run("example", "--list")
    assert result.exit_code == 0
    for name in EXAMPLES:
        assert name in result.stdout


def test_europe_capitals(tmp_path: Path):
    out = tmp_path / "caps.csv"
    result = run("example", "europe-capitals", "--out", out)
    assert result.exit_code == 0, result.output
    assert out.read_text() == example_text("europe-capitals")
    space = read_points(out)
    assert space.metric == "haversine"
    assert space.n == 43
    i, j = space.index(["Paris", "London"])
    assert space.distances[i, j] == pytest.approx(343.5, abs=0.5)
    i, j = space.index(["Vienna", "Bratislava"])  # the closest pair: d_min
    assert space.d_min == pytest.approx(space.distances[i, j])
    assert space.d_min == pytest.approx(55, abs=1)


def test_grid(tmp_path: Path):
    out = tmp_path / "grid.csv"
    assert run("example", "grid-10x10", "-o", out).exit_code == 0
    space = read_points(out)
    assert space.n == 100
    assert space.metric == "euclidean"
    assert space.cell == 150.0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nope", "--out", "x.csv"], "no example named 'nope'; available: europe-capitals"),
        (["europe-capitals"], "give --out FILE"),
        ([], "give an example NAME"),
        (["europe-capitals", "--out", "missing/x.csv"], "does not exist"),
    ],
)
def test_errors(tmp_path, monkeypatch, args, fragment):
    monkeypatch.chdir(tmp_path)
    result = run("example", *args)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert fragment in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_readme_main_job(tmp_path, monkeypatch):
    # README: example europe-capitals -> build exponential at eps 0.01 -> evaluate
    monkeypatch.chdir(tmp_path)
    assert run("example", "europe-capitals", "--out", "capitals.csv").exit_code == 0
    built = run("build", "capitals.csv", "--mechanism", "exponential", "--epsilon", "0.01", "--out", "em.npz")
    assert built.exit_code == 0, built.output
    result = run("evaluate", "em.npz", "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    # a sensible loss in km: far better than releasing a random capital, far from zero
    assert 50 < got["loss_max"] < got["loss_uniform_max"] / 5
    assert run("evaluate", "em.npz").exit_code == 0


def test_checkins_match_the_capitals_and_feed_privatize_points(tmp_path: Path):
    import csv

    from metricdp.cli.privatize_points import register
    from metricdp.spaces import haversine_km
    from tests.cli_helpers import make_app, runner

    out = tmp_path / "checkins.csv"
    result = run("example", "checkins", "--out", out)
    assert result.exit_code == 0, result.output
    assert "300 check-ins" in result.stdout
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 300 and list(rows[0]) == ["user", "time", "city", "lat", "lon"]
    space = read_points_from_text(tmp_path)
    idx = space.index([r["city"] for r in rows])  # every city is a label of europe-capitals
    fixes = [[float(r["lat"]), float(r["lon"])] for r in rows]
    d = haversine_km(fixes, space.points[idx]).diagonal()
    assert d.max() < 15.0  # GPS fixes near their city
    released = tmp_path / "released.csv"
    app = make_app(register)
    r = runner.invoke(app, ["privatize-points", str(out), "--lat", "lat", "--lon", "lon", "--epsilon", "0.5",
                            "--out", str(released), "--origin", "50,10", "--extent", "4000km"])
    assert r.exit_code == 0, r.output


def read_points_from_text(tmp_path: Path):
    caps = tmp_path / "europe-capitals.csv"
    caps.write_text(example_text("europe-capitals"))
    return read_points(caps)
