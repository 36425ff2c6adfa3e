"""The eps of a trace release from the mean displacement accepted: hand values, a seeded Monte-Carlo check, refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.location.displacement import epsilon_for_displacement, spread_for_displacement
from metricdp.location.grid import CellGrid
from metricdp.location.per_place import release_per_place
from metricdp.mechanisms.planar_laplace import sample_planar_laplace_latlon
from metricdp.spaces import haversine_rows_km


@pytest.mark.parametrize("mode", ["independent", "predictive"])
def test_a_fix_released_alone_is_moved_2_over_eps(mode):
    assert epsilon_for_displacement(0.5, mode).item() == 4.0
    assert epsilon_for_displacement([2.0, 0.25], mode).tolist() == [1.0, 8.0]


def test_per_place_pays_half_the_cells_diagonal_first():
    # h = 0.6 * sqrt(2): offset 0.6 km, so d = 1 km leaves 0.4 km for the noise: eps = 2 / 0.4
    assert epsilon_for_displacement(1.0, "per-place", cell_km=0.6 * math.sqrt(2)).item() == pytest.approx(5.0)


def test_adaptive_spread_budget_puts_the_lowest_rung_at_2_over_d():
    b = spread_for_displacement(0.5, np.array([10, 3]), test_share=0.2)
    assert b.tolist() == pytest.approx([50.0, 15.0])  # 2 n / (0.8 x 0.5)
    assert ((1 - 0.2) * b / np.array([10, 3])).tolist() == pytest.approx([4.0, 4.0])


@pytest.mark.filterwarnings("ignore::metricdp.errors.PrivacyLeakWarning")  # a seeded draw, on purpose
def test_seeded_planar_laplace_moves_a_fix_by_2_over_eps_on_average():
    eps = epsilon_for_displacement(0.5, "independent").item()
    x = np.tile([[48.85, 2.35]], (40_000, 1))
    d = haversine_rows_km(x, sample_planar_laplace_latlon(x, eps, rng=np.random.default_rng(7)))
    # the radius is Gamma(2, 1/eps): sd sqrt(2)/eps = 0.35 km, so the mean's sd is 0.0018 km
    assert abs(d.mean() - 0.5) < 0.01


@pytest.mark.filterwarnings("ignore::metricdp.errors.PrivacyLeakWarning")  # a seeded draw, on purpose
def test_seeded_per_place_displacement_is_within_the_bound_even_at_a_corner():
    grid = CellGrid.over("48.80,2.30,48.90,2.40", 1.0)
    eps = epsilon_for_displacement(1.0, "per-place", cell_km=1.0).item()
    i, j = grid.ij[grid.n // 2]
    corner = grid.plane.inverse(np.array([[i + 1e-6, j + 1e-6]], dtype=np.float64))  # just inside, a corner
    n = 20_000
    fixes = np.tile(corner, (n, 1))
    out = release_per_place(np.arange(n), fixes, grid, eps, rng=np.random.default_rng(11))
    d = haversine_rows_km(fixes, out.released)
    assert d.mean() <= 1.0 + 0.01  # the bound, with the Monte-Carlo error (sd of the mean ~ 0.006 km)
    assert d.mean() > 2.0 / eps  # the corner's offset is real: the noise alone would move less
    assert grid.locate(fixes)[0] == grid.n // 2


def test_no_eps_fits_a_displacement_the_cell_alone_may_exceed():
    with pytest.raises(ValidationError, match=r"its cell alone may move it 707\.1"):
        epsilon_for_displacement(0.7, "per-place", cell_km=1.0)


def test_no_eps_within_the_budget_is_refused():
    with pytest.raises(ValidationError, match="needs eps 4 per km"):
        epsilon_for_displacement(0.5, "independent", budget=3.0)
    assert epsilon_for_displacement(0.5, "independent", budget=4.0).item() == 4.0
    with pytest.raises(ValidationError, match="10 fixes need 50"):
        spread_for_displacement(0.5, [10], budget=20.0)


@pytest.mark.parametrize(("args", "kw", "match"), [
    ((0.0, "independent"), {}, "displacement must be finite and > 0"),
    ((float("nan"), "independent"), {}, "displacement must be finite"),
    ((1.0, "walk"), {}, "mode must be one of"),
    ((1.0, "per-place"), {}, "needs the cells' side"),
    ((1.0, "independent"), {"cell_km": 1.0}, "not one of independent"),
])
def test_bad_arguments_are_one_clear_error(args, kw, match):
    with pytest.raises(ValidationError, match=match):
        epsilon_for_displacement(*args, **kw)
