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
