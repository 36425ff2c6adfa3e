"""``metricdp calibrate``: prints the library's calibrated epsilon; errors are one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metricdp.io import read_points
from metricdp.mechanisms.distance_calibration import calibrate_expected_distance
from tests.cli_helpers import assert_one_line_error, run


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    points = tmp_path / "grid.csv"
    rows = [f"c{r}{c},{100.0 * r},{100.0 * c}" for r in range(3) for c in range(3)]
    points.write_text("label,x,y\n" + "\n".join(rows) + "\n", encoding="utf-8")
    prior = tmp_path / "prior.csv"
    p = np.random.default_rng(1).dirichlet(np.ones(9)).tolist()
    prior.write_text("label,probability\n" + "".join(f"c{i // 3}{i % 3},{v!r}\n" for i, v in enumerate(p)),
                     encoding="utf-8")
    return points, prior


@pytest.mark.parametrize("mechanism", ["krr", "geometric"])
def test_calibrate_prints_the_library_epsilon(files, mechanism: str) -> None:
    points, prior = files
    space = read_points(points)
    pi = np.array([float(line.split(",")[1]) for line in prior.read_text().splitlines()[1:]])
    for prior_arg, prior_vec in (("uniform", None), (prior, pi / pi.sum())):
        result = run("calibrate", "--mechanism", mechanism, "--points", points, "--prior", prior_arg,
                     "--expected-distance", 80)
        assert result.exit_code == 0, result.output
        expected = calibrate_expected_distance(mechanism, space, prior_vec, 80.0).epsilon
        assert float(result.stdout.strip()) == expected


def test_calibrate_json(files) -> None:
    points, prior = files
    result = run("calibrate", "-m", "krr", "--points", points, "--prior", prior, "-E", 80,
                 "--tol", 1e-8, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["mechanism"] == "krr" and out["parameter"] == "ldp_epsilon" and out["n"] == 9
    assert abs(out["expected_distance"] - 80.0) <= 1e-8 * 80.0
    # k-RR's mDP guarantee is its LDP epsilon over the smallest distance.
    assert out["epsilon_mdp"] == pytest.approx(out["epsilon"] / 100.0, rel=1e-12)


def test_calibrate_errors(files, tmp_path: Path) -> None:
    points, _ = files
    assert_one_line_error(run("calibrate", "-m", "laplace", "--points", points, "-E", 80),
                          "unknown --mechanism 'laplace'", "krr")
    assert_one_line_error(run("calibrate", "-m", "krr", "--points", points, "-E", 1e6),
                          "out of reach for 'krr'")
    bad = tmp_path / "bad.csv"
    bad.write_text("label,probability\nc00,0.5\nzz,0.5\n", encoding="utf-8")
    assert_one_line_error(run("calibrate", "-m", "krr", "--points", points, "--prior", bad, "-E", 80), "'zz'")
    half = tmp_path / "half.csv"
    half.write_text("".join(f"c{i // 3}{i % 3},0.05\n" for i in range(9)), encoding="utf-8")
    assert_one_line_error(run("calibrate", "-m", "krr", "--points", points, "--prior", half, "-E", 80),
                          "sum to 0.45")


# ----------------------------------------------------------------------------- --target
def test_target_json_is_the_library_result(files) -> None:
    from metricdp.cli.calibrate import read_prior
    from metricdp.targets import calibrate_to_target, parse_target

    points, prior = files
    result = run("calibrate", points, "-m", "exponential", "--prior", prior, "--target", "adversary-error=60",
                 "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    space = read_points(points)
    lib = calibrate_to_target("exponential", space, parse_target("adversary-error=60"),
                              read_prior(str(prior), space.labels))
    assert out["epsilon"] == lib.parameter and out["figures"] == lib.figures
    assert out["target"]["answer"] == "largest" and out["certified"]["meets"]
    assert out["neighbour"]["meets"] is False and out["neighbour"]["epsilon"] == pytest.approx(lib.parameter * 1.05)
    assert out["build"].startswith(f"metricdp build {points} --mechanism exponential --epsilon {lib.parameter!r}")


def test_target_text_prints_the_build_command_and_out_builds_it(files, tmp_path: Path) -> None:
    from metricdp.mechanisms.file import load_mechanism

    points, prior = files
    result = run("calibrate", points, "-m", "exponential", "--prior", prior, "-t", "expected-loss=60")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("smallest epsilon meeting expected-loss=60: ")
    eps = float(lines[0].split(": ")[1].split(" ")[0])
    assert any(line.startswith("witness: epsilon / 1.05 fails the target") for line in lines)
    assert lines[-1].startswith("build: metricdp build ")
    out = tmp_path / "m.npz"
    result = run("calibrate", points, "-m", "exponential", "--prior", prior, "-t", "expected-loss=60", "--out", out)
    assert result.exit_code == 0, result.output
    mech = load_mechanism(out)
    assert mech.name == "exponential" and mech.epsilon == eps
    assert mech.expected_loss(read_prior_vector(prior, mech.labels)) <= 60


def read_prior_vector(prior: Path, labels: tuple[str, ...]) -> np.ndarray:
    values = dict(line.split(",") for line in prior.read_text().splitlines()[1:])
    p = np.array([float(values[label]) for label in labels])
    return p / p.sum()


def test_target_user_centric_takes_its_quality_and_the_prior(files) -> None:
    points, prior = files
    result = run("calibrate", points, "-m", "user-centric", "--prior", prior, "-t", "adversary-error=70",
                 "--param", "quality=75", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["figures"]["adversary_error"] >= 70 and out["figures"]["expected_loss"] <= 75 + 1e-6
    assert f"--prior {prior}" in out["build"] and "--quality 75" in out["build"]


def test_target_errors(files, tmp_path: Path) -> None:
    points, _ = files
    assert_one_line_error(run("calibrate", points, "-m", "exponential", "-t", "loss=3"), "unknown kind 'loss'")
    assert_one_line_error(run("calibrate", points, "-m", "exponential", "-t", "expected-loss=5km"),
                          "the space's distances have none")
    assert_one_line_error(run("calibrate", points, "-m", "exponential"), "exactly one of --target and")
    assert_one_line_error(run("calibrate", points, "-m", "exponential", "-t", "expected-loss=5", "-E", 3),
                          "exactly one of --target and")
    assert_one_line_error(run("calibrate", points, "--points", points, "-m", "exponential", "-t", "expected-loss=5"),
                          "give the POINTS file once")
    assert_one_line_error(run("calibrate", points, "-m", "exponential", "-t", "adversary-error=1e6"),
                          "no epsilon in")
    assert_one_line_error(run("calibrate", points, "-m", "user-centric", "-t", "adversary-error=1",
                              "--param", "quality=x"), "'x' is not a number")
    assert_one_line_error(run("calibrate", points, "-m", "user-centric", "-t", "adversary-error=1",
                              "--param", "nope=1"), "takes no parameter 'nope'")
    out = tmp_path / "m.npz"
    assert_one_line_error(run("calibrate", points, "-m", "exponential", "-t", "adversary-error=1e6", "--out", out),
                          "no epsilon in")
    assert not out.exists()


def test_target_search_over_the_time_limit_is_refused_at_once(files) -> None:
    points, prior = files
    result = run("calibrate", points, "-m", "optimal", "--prior", prior, "-t", "adversary-error=70",
                 "--time-limit", "0.01")
    assert_one_line_error(result, "calibrating optimal on 9 points would take about")
    assert "over the time limit of 0.01 s" in result.output


def test_target_planar_laplace_on_lat_lon_cells_is_the_build_commands_mechanism(tmp_path: Path) -> None:
    # lat/lon cell centres: `metricdp build` builds planar-laplace through location.cells; calibrate must too
    import math

    from metricdp.mechanisms.file import load_mechanism

    dlat, dlon = 0.5 / 111.195, 0.5 / (111.195 * math.cos(math.radians(48.85)))
    points = tmp_path / "cells.csv"
    points.write_text("label,lat,lon\n" + "".join(f"c{r}{c},{48.85 + dlat * r!r},{2.35 + dlon * c!r}\n"
                                                  for r in range(3) for c in range(3)), encoding="utf-8")
    result = run("calibrate", points, "-m", "planar-laplace", "-t", "adversary-error=300m", "--json",
                 "--out", tmp_path / "cal.npz")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["unit"] == "km" and out["target"]["value"] == 0.3 and out["figures"]["adversary_error"] >= 0.3
    assert run("build", points, "-m", "planar-laplace", "--epsilon", repr(out["epsilon"]), "--out",
               tmp_path / "built.npz").exit_code == 0
    np.testing.assert_array_equal(load_mechanism(tmp_path / "cal.npz").matrix,
                                  load_mechanism(tmp_path / "built.npz").matrix)
