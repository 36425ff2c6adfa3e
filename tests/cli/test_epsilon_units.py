"""``--epsilon 0.5/km``, ``--level L --radius R`` on build; both forms in build, evaluate and evaluate --json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metricdp import load_mechanism
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import skip_unless


@pytest.fixture(scope="module")
def capitals(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("eps") / "caps.csv"
    assert run("example", "europe-capitals", "--out", path).exit_code == 0
    return path


@pytest.mark.parametrize(
    "args", [["--epsilon", "0.005/km"], ["--epsilon", "5/1000km"], ["--epsilon", "0.000005/m"],
             ["--epsilon", "1 / 200km"], ["--level", "0.5", "--radius", "100km"], ["--level", "1", "--radius", "200"]],
)
def test_every_form_builds_the_same_mechanism(capitals, tmp_path, args):
    ref, out = tmp_path / "ref.npz", tmp_path / "m.npz"
    assert run("build", capitals, "-m", "exponential", "--epsilon", "0.005", "--out", ref).exit_code == 0
    r = run("build", capitals, "-m", "exponential", *args, "--out", out)
    assert r.exit_code == 0, r.output
    assert "0.005 per km = level 0.0005 within 100 m, 0.005 within 1 km" in r.stdout
    a, b = load_mechanism(ref), load_mechanism(out)
    assert a.epsilon == b.epsilon == 0.005 and np.array_equal(a.matrix, b.matrix)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--epsilon", "0.5/mi"], "--epsilon: not an epsilon: '0.5/mi'"),
        (["--epsilon", "-1/km"], "--epsilon: not an epsilon: '-1/km'"),
        (["--epsilon", "0/km"], "--epsilon: epsilon must be positive"),
        (["--level", "2"], "--level and --radius go together"),
        (["--level", "2", "--radius", "1km", "--epsilon", "1"], "not both"),
        (["--level", "2", "--radius", "0m"], "--level/--radius: a length must be positive"),
    ],
)
def test_bad_epsilon_is_one_line(capitals, tmp_path, args, fragment):
    r = run("build", capitals, "-m", "exponential", *args, "--out", tmp_path / "m.npz")
    assert_one_line_error(r, fragment)
    assert not (tmp_path / "m.npz").exists()


def test_a_unit_needs_a_space_with_one(tmp_path):
    grid = tmp_path / "g.csv"
    assert run("example", "grid-10x10", "--out", grid).exit_code == 0
    r = run("build", grid, "-m", "exponential", "--epsilon", "1/km", "--out", tmp_path / "m.npz")
    assert_one_line_error(r, "has a unit (km) but the space's distances have none")


def test_evaluate_states_both_forms(capitals, tmp_path):
    out = tmp_path / "m.npz"
    assert run("build", capitals, "-m", "exponential", "--level", "1", "--radius", "500km", "--out", out).exit_code == 0
    r = run("evaluate", out, "--json")
    forms = json.loads(r.stdout)["epsilon_forms"]
    assert forms["per_km"] == 0.002 and forms["per_m"] == 2e-6 and forms["unit"] == "km"
    assert forms["level_radius"] == [{"level": pytest.approx(0.0002), "radius": 100, "radius_unit": "m"},
                                     {"level": 0.002, "radius": 1000, "radius_unit": "m"}]
    text = " ".join(run("evaluate", out).stdout.split())
    assert "epsilon (l, r)" in text and "level 0.0002 within 100 m" in text


def test_calibrate_json_states_both_forms(capitals):
    r = run("calibrate", "-m", "exponential", "--points", capitals, "-E", "500", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    forms = out["epsilon_forms"]
    assert forms["unit"] == "km" and forms["per_km"] == out["epsilon_mdp"]
    assert forms["level_radius"][1] == {"level": pytest.approx(out["epsilon_mdp"]), "radius": 1000, "radius_unit": "m"}


def test_privatize_json_and_report_state_both_forms(capitals, tmp_path):
    mech = tmp_path / "m.npz"
    assert run("build", capitals, "-m", "exponential", "--epsilon", "0.004/km", "--out", mech).exit_code == 0
    rows = tmp_path / "rows.csv"
    rows.write_text("city\nParis\nRome\n")
    r = run("privatize", mech, rows, "--column", "city", "--out", tmp_path / "rel.csv", "--json")
    assert r.exit_code == 0, r.output
    forms = json.loads(r.stdout)["epsilon_forms"]
    assert forms["per_km"] == 0.004 and forms["level_radius"][1]["level"] == 0.004
    skip_unless("plot")
    from metricdp import load_mechanism
    from metricdp.report import _privacy_section

    page = _privacy_section(load_mechanism(mech), [1e-3], "km")
    assert "0.004 per km = level 0.0004 within 100 m, 0.004 within 1 km" in page
