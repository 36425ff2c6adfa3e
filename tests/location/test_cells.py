"""Lat/lon cell grids as planar lattices: planar Laplace on the cells of ``metricdp grid``, audited on the sphere."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.location.cells import lattice_of, planar_laplace_cells
from metricdp.location.grid import CellGrid
from metricdp.location.region import Region
from metricdp.mechanisms.planar_laplace import planar_laplace
from metricdp.spaces import MetricSpace
from tests.cli_helpers import assert_one_line_error, run

BOX = Region.box(56.90, 24.00, 56.93, 24.05)


@pytest.fixture(scope="module")
def cells() -> MetricSpace:
    g = CellGrid.over(BOX, 0.5)
    return MetricSpace.from_points(g.centres, g.labels, metric="haversine")


def test_lattice_recovers_the_grid(cells):
    g = CellGrid.over(BOX, 0.5)
    lat = lattice_of(cells)
    assert lat.space.cell == pytest.approx(0.5, rel=1e-6)
    ij = np.rint(np.asarray(lat.space.points) / lat.space.cell).astype(int)
    assert (ij - ij[0] == g.ij - g.ij[0]).all()  # the same lattice, up to translation
    assert lat.residual_km < 1e-6  # well under a millimetre
    assert 1.0 <= lat.ratio < 1 + 1e-5  # projection distortion over ~3 km, plus the fit


def test_planar_laplace_on_cells_is_audited_on_the_sphere(cells):
    eps = 1.5
    mech = planar_laplace_cells(cells, eps)
    assert mech.space is cells or mech.space.metric == "haversine"
    assert mech.labels == cells.labels and mech.exact
    assert mech.info["epsilon_audit"] <= eps
    # the matrix is the lattice planar Laplace at eps / K
    lat = lattice_of(cells)
    ref = planar_laplace(lat.space, eps / lat.ratio)
    assert np.array_equal(mech.matrix, ref.matrix)
    # and it is (about) as good as the grid allows: loss at eps with no slack lost beyond K
    assert mech.params["lattice_epsilon"] == pytest.approx(eps / lat.ratio)
    with pytest.raises(ValidationError, match="planar_laplace_cells"):  # the Euclidean builder points here
        planar_laplace(cells, eps)


def test_points_off_a_grid_are_refused():
    capitals = MetricSpace.from_points([[48.85, 2.35], [51.5, -0.12], [52.52, 13.4]], ["P", "L", "B"],
                                       metric="haversine")
    with pytest.raises(ValidationError, match="not the centres of one grid"):
        planar_laplace_cells(capitals, 1.0)
    with pytest.raises(ValidationError, match="are not one"):
        planar_laplace(MetricSpace.from_points([[0.0, 0.0], [1.0, 0.3], [2.5, 1.0]]), 1.0)


def test_cli_build_on_grid_cells(tmp_path):
    cells, mech = tmp_path / "cells.csv", tmp_path / "m.npz"
    ck = tmp_path / "in.csv"
    ck.write_text("lat,lon\n56.91,24.01\n")
    assert run("grid", ck, "--cell", "500m", "--region", "56.90,24.00,56.93,24.05", "--out", cells).exit_code == 0
    r = run("build", cells, "-m", "planar-laplace", "--epsilon", "2", "--out", mech)
    assert r.exit_code == 0, r.output
    assert "planar-laplace" in r.stdout
    caps = tmp_path / "caps.csv"
    assert run("example", "europe-capitals", "--out", caps).exit_code == 0
    r = run("build", caps, "-m", "planar-laplace", "--epsilon", "2", "--out", tmp_path / "x.npz")
    assert_one_line_error(r, "not the centres of one grid")
    assert "MetricSpace" not in r.stderr


def test_a_rotated_lattice_is_fitted_and_a_perturbed_one_refused():
    from metricdp.location.projection import TangentPlane

    i, j = np.meshgrid(np.arange(-10, 10), np.arange(-10, 10))
    ij = np.column_stack([i.ravel(), j.ravel()]).astype(float)
    theta = 0.01  # 10 cells out: 0.1 cell off a lattice aligned with this plane's axes
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    plane = TangentPlane(57.0, 24.1)
    latlon = plane.inverse(0.5 * ij @ rot.T)
    space = MetricSpace.from_points(latlon, [f"c{k}" for k in range(len(ij))], metric="haversine")
    lat = lattice_of(space)
    assert lat.space.cell == pytest.approx(0.5, rel=1e-6) and lat.residual_km < 1e-5
    assert 1.0 <= lat.ratio < 1 + 1e-5
    moved = 0.5 * ij @ rot.T
    moved[7] += [0.05, 0.0]  # one centre a tenth of a cell off
    bad = MetricSpace.from_points(plane.inverse(moved), space.labels, metric="haversine")
    with pytest.raises(ValidationError, match=r"'c7' is 49\.\d m off the lattice of 49\d\.\d+ m cells"):
        lattice_of(bad)
