"""Planar Laplace (Andres et al. CCS 2013): continuous samplers and the discretised mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

import metricdp.mechanisms.planar_laplace as pl
from metricdp.errors import ValidationError
from metricdp.mechanisms.planar_laplace import (
    planar_laplace,
    planar_laplace_radius_cdf,
    sample_planar_laplace,
    sample_planar_laplace_latlon,
    truncated_planar_laplace_sample,
)
from metricdp.spaces import EARTH_RADIUS_KM, MetricSpace, haversine_km
from tests.helpers import assert_private, brute_force_epsilon, random_space


# ----------------------------------------------------------------- continuous
def test_radius_cdf_is_gamma_two() -> None:
    r = np.linspace(0, 50, 101)
    assert np.allclose(planar_laplace_radius_cdf(r, 0.3), stats.gamma(a=2, scale=1 / 0.3).cdf(r), rtol=1e-13, atol=0)


def test_radius_and_angle_distributions() -> None:
    eps = 0.004
    z = sample_planar_laplace(np.tile([[1000.0, -50.0]], (20_000, 1)), eps, rng=2024) - [1000.0, -50.0]
    r = np.hypot(z[:, 0], z[:, 1])
    assert stats.kstest(r, lambda x: planar_laplace_radius_cdf(x, eps)).pvalue > 0.01
    assert stats.kstest(r, lambda x: planar_laplace_radius_cdf(x, 1.05 * eps)).pvalue < 1e-6  # power
    angle = np.arctan2(z[:, 1], z[:, 0])
    assert stats.kstest(angle, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 0.01


def spherical_cdf(rho: np.ndarray, eps: float) -> np.ndarray:
    """CDF of the great-circle distance with density prop. to e^{-eps t} sin(t / R) on [0, pi R]."""
    a, b = eps, 1.0 / EARTH_RADIUS_KM
    num = b - np.exp(-a * rho) * (a * np.sin(b * rho) + b * np.cos(b * rho))
    return num / (b * (1 + np.exp(-a * math.pi / b)))


@pytest.mark.parametrize("eps", [1.0, 3e-4])  # local scale, and a continent-wide scale
def test_latlon_distance_law_on_the_sphere(eps: float) -> None:
    start = np.tile([[48.8566, 2.3522]], (20_000, 1))
    out = sample_planar_laplace_latlon(start, eps, rng=7)
    assert (np.abs(out[:, 0]) <= 90).all() and (out[:, 1] >= -180).all() and (out[:, 1] < 180).all()
    rho = haversine_km(start[:1], out)[0]
    assert stats.kstest(rho, lambda x: spherical_cdf(x, eps)).pvalue > 0.01
    planar = stats.kstest(rho, lambda x: planar_laplace_radius_cdf(x, eps)).pvalue
    if eps < 1e-3:  # the rejection step matters at this scale: the planar law is rejected
        assert planar < 1e-6
    else:
        assert planar > 0.01


def test_latlon_near_the_pole_and_the_antimeridian() -> None:
    out = sample_planar_laplace_latlon([[89.99, 179.999], [-89.99, -179.999]], 0.5, rng=3)
    assert np.all(np.isfinite(out)) and (np.abs(out[:, 0]) <= 90).all() and (np.abs(out[:, 1]) <= 180).all()
    assert sample_planar_laplace_latlon([10.0, 20.0], 1.0, rng=1).shape == (2,)


def test_truncation_remaps_to_the_nearest_point_of_the_region() -> None:
    xy = np.tile([[0.0, 0.0]], (2000, 1))
    free = sample_planar_laplace(xy, 0.01, rng=5)
    box = truncated_planar_laplace_sample(xy, 0.01, (-50.0, -20.0, 80.0, 30.0), rng=5)
    assert np.array_equal(box, np.clip(free, [-50.0, -20.0], [80.0, 30.0]))
    assert (box[:, 0] > -50).any() and (box[:, 0] == 80.0).any()  # some moved, some not
    region = random_space(3, 30)
    pts = truncated_planar_laplace_sample(xy, 0.01, region, rng=5)
    nearest = np.asarray(region.points)[np.argmin(((free[:, None, :] - region.points[None]) ** 2).sum(-1), axis=1)]
    assert np.array_equal(pts, nearest)
    with pytest.raises(ValidationError, match="region"):
        truncated_planar_laplace_sample(xy, 0.01, (1.0, 0.0, 0.0, 1.0))


def test_secure_default_rng() -> None:
    assert sample_planar_laplace([[0.0, 0.0], [1.0, 1.0]], 1.0).shape == (2, 2)
    assert sample_planar_laplace_latlon([[0.0, 0.0]], 1.0).shape == (1, 2)
    assert truncated_planar_laplace_sample([0.0, 0.0], 1.0, (-1.0, -1.0, 1.0, 1.0)).shape == (2,)


# ----------------------------------------------------------------- discretised
def test_two_cells_are_two_half_planes() -> None:
    # A 1 x 2 grid: cell 1 receives the half-plane x > h/2, whose mass is the tail of the
    # marginal density (eps^2 / pi) |x| K_1(eps |x|) of the planar Laplace.
    eps = 0.6
    mech = planar_laplace(MetricSpace.grid(1, 2, 1.0), eps)
    e1 = mech.params["inner_epsilon"]
    tail = integrate.quad(lambda x: e1**2 / math.pi * x * special.k1(e1 * x), 0.5, np.inf, epsrel=1e-13, limit=200)[0]
    assert mech.matrix[0, 1] == pytest.approx(tail, rel=1e-10)
    assert mech.matrix[1, 0] == pytest.approx(tail, rel=1e-10)


def test_centre_row_of_a_three_by_three_grid_by_dblquad() -> None:
    eps, h = 0.005, 200.0
    mech = planar_laplace(MetricSpace.grid(3, 3, h), eps)
    s = mech.params["inner_epsilon"] * h
    edges = [(-np.inf, -0.5), (-0.5, 0.5), (0.5, np.inf)]  # in cells, from the centre point

    def density(y: float, x: float) -> float:
        return s * s / (2 * math.pi) * math.exp(-s * math.hypot(x, y))

    for v in range(9):
        (y0, y1), (x0, x1) = edges[v // 3], edges[v % 3]
        ref = integrate.dblquad(density, x0, x1, y0, y1, epsabs=0, epsrel=1e-11)[0]
        assert mech.matrix[4, v] == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize(("rows", "cols", "cell", "eps"), [(4, 5, 150.0, 0.004), (3, 3, 1.0, 4.0), (1, 6, 10.0, 1e-4)])
def test_discretised_matrix_passes_the_naive_audit(rows: int, cols: int, cell: float, eps: float) -> None:
    mech = planar_laplace(MetricSpace.grid(rows, cols, cell), eps)
    assert mech.exact and mech.name == "planar-laplace"
    assert_private(mech, eps, rtol=0.0)
    assert mech.info["integration"]["relative_accuracy"] <= 1e-12


def test_lattice_subset_snaps_missing_cells_to_the_nearest_point() -> None:
    pts = np.array([[0, 0], [0, 1], [1, 0], [2, 2], [1, 2], [3, 0]]) * 100.0
    space = MetricSpace.from_points(pts)
    assert space.cell == 100.0
    mech = planar_laplace(space, 0.01)
    assert_private(mech, 0.01, rtol=0.0)
    # same input, box 4 x 3: more mass near the input than far away
    assert mech.matrix[0, 0] > mech.matrix[0, 1] > mech.matrix[0, 3]


def test_integration_error_is_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    # Plant an exact zero (infinitely non-private) in the integrated matrix: the direct
    # normalisation fails the audit, the envelope repair at a larger eta passes it.
    original = pl._discretised_matrix

    def broken(space, epsilon, accuracy, box=False):
        raw, info, box_matrix = original(space, epsilon, accuracy, box)
        raw = raw.copy()
        raw[0, -1] = 0.0
        return raw, info, box_matrix

    monkeypatch.setattr(pl, "_discretised_matrix", broken)
    mech = planar_laplace(MetricSpace.grid(3, 4, 100.0), 0.01)
    assert mech.info["repair"] == "envelope" and mech.params["eta"] > 1e-8
    assert mech.matrix[0, -1] > 0
    assert brute_force_epsilon(np.asarray(mech.matrix), np.asarray(mech.space.distances)) <= 0.01


def test_non_grid_spaces_are_refused() -> None:
    with pytest.raises(ValidationError, match="grid"):
        planar_laplace(random_space(0, 5), 0.1)
    with pytest.raises(ValidationError, match="grid"):
        planar_laplace(MetricSpace.from_distances([[0, 1], [1, 0]]), 0.1)
    with pytest.raises(ValidationError, match="underflow"):
        planar_laplace(MetricSpace.grid(10, 10, 150.0), 1.0)
    with pytest.raises(ValidationError, match="epsilon"):
        planar_laplace(MetricSpace.grid(2, 2, 1.0), 0.0)


def test_too_small_epsilon_is_a_clear_error():
    from metricdp.errors import ValidationError
    from metricdp.mechanisms.planar_laplace import planar_laplace as build
    from metricdp.spaces import MetricSpace

    with pytest.raises(ValidationError, match="too small for the integration accuracy"):
        build(MetricSpace.grid(2, 2), 1e-12)


def test_latlon_sampler_refuses_an_epsilon_too_small_for_the_earth():
    # review: privatize-points -e 1e-7 took 37 s for one row and 1e-8 never finished
    from metricdp.mechanisms.planar_laplace import sample_planar_laplace_latlon

    with pytest.raises(ValidationError, match="too small for the Earth"):
        sample_planar_laplace_latlon([48.8, 2.3], 1e-7, rng=0)
    assert sample_planar_laplace_latlon([48.8, 2.3], 1e-4, rng=0).shape == (2,)
