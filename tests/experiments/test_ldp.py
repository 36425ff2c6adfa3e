"""The LDP experiment (Alvim et al., Figure 2): quick mode end to end, data, determinism."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from metricdp.cli import app
from metricdp.errors import ValidationError
from metricdp.experiments.ldp import (
    MECHANISMS,
    PARIS_CENTRE,
    QUICK,
    LDPConfig,
    bin_checkins,
    run_ldp,
    standin_prior,
)
from metricdp.spaces import EARTH_RADIUS_KM
from tests.helpers import needs

TINY = LDPConfig(rows=4, cols=4, cell=300.0, checkins=40, target=400.0, sizes=(10, 20, 40), repetitions=3,
                 calibration_tol=1e-6, ibu_tol=1e-6, ibu_max_iter=20_000)


def _latlon(x_m: np.ndarray, y_m: np.ndarray, centre=PARIS_CENTRE) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of the experiment's local projection (metres east/north of the centre)."""
    k = EARTH_RADIUS_KM * 1000 * math.pi / 180
    return centre[0] + y_m / k, centre[1] + x_m / (k * math.cos(math.radians(centre[0])))


@pytest.mark.slow
@needs("plot", "geo")
def test_quick_mode_runs_end_to_end_from_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "ldp"
    result = CliRunner().invoke(app, ["experiment", "ldp", "--out", str(out), "--quick", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert (out / "ldp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (out / "ldp.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(MECHANISMS) * len(QUICK.sizes)
    assert {r["mechanism"] for r in rows} == set(MECHANISMS)
    assert [int(r["checkins"]) for r in rows if r["mechanism"] == "krr"] == list(QUICK.sizes)
    assert all(0 < float(r["emd_mean_m"]) < 4500 * math.sqrt(2) for r in rows)
    summary = (out / "ldp.md").read_text(encoding="utf-8")
    assert "| k-RR |" in summary and "8.248" in summary and "0.00398 /m" in summary
    for label in ("k-RR:", "geometric:", "planar Laplace:"):
        assert label in result.stdout
    assert "wrote" in result.stdout


@pytest.mark.slow
@needs("plot", "geo")
def test_tiny_run_meets_the_target_and_is_reproducible(tmp_path: Path) -> None:
    a = run_ldp(tmp_path / "a", config=TINY, seed=11)
    b = run_ldp(None, config=TINY, seed=11)
    for key in MECHANISMS:
        cal = a.calibration[key]
        prior = np.bincount(a.data, minlength=16) / a.data.size
        e_d = float(np.einsum("x,xy,xy->", prior, cal.mechanism.matrix, cal.mechanism.space.distances))
        assert abs(e_d - TINY.target) <= TINY.calibration_tol * TINY.target
        np.testing.assert_array_equal(a.emd_mean[key], b.emd_mean[key])
        assert a.emd_mean[key].shape == (3,) and np.all(a.emd_stderr[key] >= 0)
        assert a.ibu_unconverged[key] == 0
    assert a.data.size == 40 and b.files == {}
    assert set(a.files) == {"csv", "png", "md"} and all(p.is_file() for p in a.files.values())
    c = run_ldp(None, config=TINY, seed=12)
    assert not np.array_equal(c.data, a.data)


@needs("geo")
def test_standin_prior_is_a_distribution_on_the_grid() -> None:
    prior, places = standin_prior(QUICK)
    assert prior.shape == (QUICK.rows * QUICK.cols,) and places > 5
    assert np.all(prior >= 0) and prior.sum() == pytest.approx(1.0, abs=1e-12)
    # Population concentrates: the heaviest tenth of the cells holds well over a tenth.
    assert np.sort(prior)[::-1][: prior.size // 10].sum() > 0.2


def test_bin_checkins_cells_and_edges() -> None:
    # Square of 4 x 300 m around the centre: x, y in [-600, 600).
    x = np.array([-599.0, 599.0, 0.0, -1.0, 700.0, 0.0])
    y = np.array([-599.0, 599.0, 0.0, 301.0, 0.0, -601.0])
    lat, lon = _latlon(x, y)
    cells = bin_checkins(lat, lon, TINY)
    # (row, col) = (0, 0), (3, 3), (2, 2), (3, 1); the last two are outside.
    np.testing.assert_array_equal(cells, [0, 15, 10, 13])


@pytest.mark.slow
def test_checkin_file_replaces_the_standin(tmp_path: Path) -> None:
    g = np.random.default_rng(0)
    x, y = g.uniform(-590, 590, 60), g.uniform(-590, 590, 60)
    lat, lon = _latlon(np.r_[x, 5000.0], np.r_[y, 0.0])  # one check-in far outside
    path = tmp_path / "checkins.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["user", "time", "lat", "lon"])
        w.writerows([i % 7, f"2010-10-19T23:{i % 60:02d}:27Z", f"{a:.8f}", f"{b:.8f}"] for i, (a, b) in
                    enumerate(zip(lat, lon, strict=True)))
    res = run_ldp(None, config=TINY, seed=1, checkins=path)
    assert res.data.size == 40 and "40 of the 60 check-ins in the square (61 read)" in res.source
    far = _latlon(np.array([0.0]), np.array([0.0]), (10.0, 10.0))
    with pytest.raises(ValidationError, match="fall in the"):
        run_ldp(None, config=TINY, seed=1, checkins=path, centre=(float(far[0][0]), float(far[1][0])))


@needs("plot", "geo")
def test_cli_errors(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["experiment", "ldp", "--out", str(tmp_path), "--centre", "north"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --centre must be LAT,LON")
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(ValidationError, match="not a directory"):
        run_ldp(blocker, config=TINY)
