"""``metricdp explore``: the page, --json equal to the library, --png, the settings block, errors."""

from __future__ import annotations

import hashlib
import json

import pytest

from metricdp.cli.build import build_mechanism
from metricdp.explore import explore
from metricdp.io import read_points
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import needs


@pytest.fixture
def points(tmp_path):
    path = tmp_path / "line.csv"
    path.write_text("label,x\na,0\nb,1\nc,3\nd,4.5\n")
    return path


def test_json_equals_the_library_and_states_its_settings(points, tmp_path):
    prior = tmp_path / "prior.csv"
    prior.write_text("a,4\nb,3\nc,2\nd,1\n")
    r = run("explore", points, "--mechanisms", "exponential,krr,weighted-exponential", "--epsilons", "0.5:2:3",
            "--prior", prior, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    settings = got.pop("settings")
    want = explore(read_points(points), ["exponential", "krr", "weighted-exponential"], (0.5, 1.0, 2.0),
                   prior=[0.4, 0.3, 0.2, 0.1], build=lambda name, space, e: build_mechanism(space, name, e))
    assert got == json.loads(json.dumps(want.as_dict()))
    assert len(got["failures"]) == 3 and all("needs --weights FILE" in f["error"] for f in got["failures"])
    assert settings == {"mechanism": "exponential, krr, weighted-exponential", "epsilon": [0.5, 1.0, 2.0],
                        "epsilon_unit": None, "prior": "prior.csv", "target": None,
                        "metricdp_version": settings["metricdp_version"], "input": "line.csv",
                        "input_sha256": hashlib.sha256(points.read_bytes()).hexdigest()}


def test_the_page_carries_the_settings_and_the_build_commands(points, tmp_path):
    out = tmp_path / "explore.html"
    r = run("explore", points, "--mechanisms", "exponential,krr", "--epsilons", "0.5,2", "--out", out)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("settings\n") and f"wrote {out}" in r.stdout
    assert r.stderr == ""  # progress lines go to a terminal only
    assert "epsilon:      0.5, 2 per unit of distance" in r.stdout and "not built" not in r.stdout
    page = out.read_text()
    assert "input sha256: " + hashlib.sha256(points.read_bytes()).hexdigest() in page
    assert f"metricdp build {points} --mechanism krr --epsilon 2.0 --out krr-eps2.npz" in page


def test_failures_are_counted_on_the_terminal(points, tmp_path):
    r = run("explore", points, "--mechanisms", "krr,weighted-exponential", "--epsilons", "1", "--out",
            tmp_path / "e.html")
    assert r.exit_code == 0, r.output
    assert "not built: 1 of 2 (family, epsilon) points" in r.stdout


@needs("plot")
def test_png(points, tmp_path):
    png = tmp_path / "e.png"
    r = run("explore", points, "--mechanisms", "krr", "--epsilons", "0.5:2:3", "--png", png)
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("args", "fragments"), [
    (["--epsilons", "1:2"], ("--epsilons", "LOW:HIGH:COUNT")),
    (["--epsilons", "1:x:3"], ("--epsilons",)),
    (["--epsilons", "2:1:3"], ("--epsilons", "below the lowest")),
    (["--epsilons", "1", "--mechanisms", "nope"], ("unknown mechanism 'nope'",)),
    (["--epsilons", "2,1"], ("must increase",)),
])
def test_errors_are_one_line(points, tmp_path, args, fragments):
    r = run("explore", points, "--out", tmp_path / "e.html", *args)
    assert_one_line_error(r, *fragments)
    assert not (tmp_path / "e.html").exists()


def test_nothing_to_write_and_a_wrong_suffix_are_refused(points, tmp_path):
    assert_one_line_error(run("explore", points, "--epsilons", "1"), "nothing to write")
    assert_one_line_error(run("explore", points, "--epsilons", "1", "--out", tmp_path / "e.txt"), ".html")
    assert_one_line_error(run("explore", points, "--epsilons", "1", "--out", points), "--out")
    alias = tmp_path / "alias.html"
    alias.symlink_to(points)
    before = points.read_bytes()
    assert_one_line_error(run("explore", points, "--epsilons", "1", "--out", alias), "is the input")
    assert points.read_bytes() == before


def test_a_terminal_gets_one_progress_line_per_family_and_epsilon(points, tmp_path, monkeypatch):
    from metricdp._progress import ProgressReporter

    monkeypatch.setattr(ProgressReporter, "is_live", lambda self: True)
    r = run("explore", points, "--mechanisms", "krr,exponential", "--epsilons", "0.5,2", "--out", tmp_path / "e.html")
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert [line.split(" (")[-1] for line in lines] == [
        "krr at epsilon 0.5)", "krr at epsilon 2)", "exponential at epsilon 0.5)", "exponential at epsilon 2)",
        "done)"]
    assert all(line.startswith("explore line.csv: ") for line in lines)
