"""The public (lat, lon) lattice: snapping, the stretch bound, the extent, and the release law."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from metricdp.errors import ValidationError
from metricdp.location.lattice import LatticePlane, release_lattice
from metricdp.location.projection import TangentPlane, distortion_bound
from metricdp.location.region import parse_region
from metricdp.location.snap import Snapper
from metricdp.spaces import EARTH_RADIUS_KM

PARIS = (48.8566, 2.3522)


@given(st.floats(min_value=0.001, max_value=5000.0))
def test_stretch_bound_is_above_the_true_stretch(extent):
    plane = LatticePlane(*PARIS, cell_km=0.001, extent_km=extent)
    x = (Fraction(extent) + Fraction(1e-3)) / Fraction(EARTH_RADIUS_KM)
    # sin x >= the Taylor sum ending on a negative term: x / that >= x / sin x, the true stretch
    sin_low = sum((-1) ** n * x ** (2 * n + 1) / math.factorial(2 * n + 1) for n in range(12))
    assert plane.stretch >= x / sin_low
    assert float(plane.stretch) - distortion_bound(extent) < 1e-3 * (extent / 1000) ** 2 + 1e-12


@given(st.floats(min_value=0.01, max_value=50.0), st.floats(min_value=1e-4, max_value=1.0),
       st.floats(min_value=1.0, max_value=5000.0))
def test_alpha_is_at_most_eps_h_over_stretch(eps, cell, extent):
    plane = LatticePlane(*PARIS, cell_km=cell, extent_km=max(extent, cell))
    a = plane.alpha(eps)
    assert a == Fraction(float(a))  # a float
    assert a <= Fraction(eps) * Fraction(cell) / plane.stretch
    assert float(a) >= eps * cell / float(plane.stretch) * (1 - 1e-15)


def test_snap_is_nearest_lattice_point_and_points_inverts():
    plane = LatticePlane(*PARIS, cell_km=0.01, extent_km=100.0)
    rng = np.random.default_rng(3)
    pts = np.array(PARIS) + rng.normal(0, 0.2, (500, 2))
    idx = plane.snap(pts)
    xy = TangentPlane(*PARIS).forward(pts)
    assert np.all(np.abs(xy / 0.01 - idx) <= 0.5 + 1e-9)
    back = TangentPlane(*PARIS).forward(plane.points(idx))
    np.testing.assert_allclose(back, idx * 0.01, atol=1e-9)  # the projection's float error: far below DELTA_KM


def test_inputs_beyond_the_extent_are_refused_by_row():
    plane = LatticePlane(*PARIS, cell_km=0.001, extent_km=50.0)
    with pytest.raises(ValidationError, match=r"data row 12 .* beyond the extent 50 km"):
        plane.snap([[48.86, 2.35], [51.5, -0.12]], first_row=11)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"cell_km": 0.0}, "cell_km must be a positive"),
    ({"extent_km": float("inf")}, "extent_km must be a positive"),
    ({"extent_km": 6000.0}, "at most 5000"),
    ({"cell_km": 10.0, "extent_km": 5.0}, "exceeds extent_km"),
])
def test_bad_planes(kwargs, fragment):
    with pytest.raises(ValidationError, match=fragment):
        LatticePlane(*PARIS, **kwargs)
    with pytest.raises(ValidationError, match="origin"):
        LatticePlane(91.0, 0.0)


def test_release_law_in_the_plane_is_planar_laplace_at_eps_over_stretch():
    eps = 0.5
    plane = LatticePlane(*PARIS, cell_km=0.002, extent_km=100.0)
    x = np.tile([[48.87, 2.36]], (4000, 1))
    z = release_lattice(x, eps, plane, rng=5)
    base = plane.snap(x[:1])[0] * plane.cell_km
    d = np.hypot(*(TangentPlane(*PARIS).forward(z) - base).T)
    eps_p = float(plane.alpha(eps)) / plane.cell_km
    assert stats.kstest(d, stats.gamma(a=2, scale=1 / eps_p).cdf).pvalue > 1e-3
    assert plane.describe(eps)["additive_epsilon"] == pytest.approx(eps * (0.002 * math.sqrt(2) + 2e-6))


@pytest.mark.parametrize("truncation", ["nearest", "reject"])
def test_region_truncation_keeps_releases_inside(truncation):
    box = parse_region("48.85,2.33,48.87,2.36")
    plane = LatticePlane.around(box)
    assert plane.extent_km == 500.0
    z = release_lattice(np.tile([[48.86, 2.34]], (300, 1)), 1.0, plane, region=box, truncation=truncation, rng=1)
    assert box.contains(z, tolerance_km=1e-6).all()


def test_reject_gives_up_with_the_row():
    box = parse_region("48.85,2.33,48.8501,2.3301")
    plane = LatticePlane.around(box)
    with pytest.raises(ValidationError, match="data row 3: no release inside"):
        release_lattice([[48.85, 2.33]], 5.0, plane, region=box, truncation="reject", rng=0, max_rounds=1,
                        first_row=3)


def test_snap_to_is_post_processing():
    plane = LatticePlane(*PARIS)
    snapper = Snapper(np.array([[48.85, 2.35], [48.9, 2.3]]))
    z = release_lattice([[48.86, 2.35]] * 50, 1.0, plane, snap_to=snapper, rng=2)
    assert {tuple(p) for p in z.tolist()} <= {(48.85, 2.35), (48.9, 2.3)}


def test_seeded_releases_are_reproducible_and_secure_ones_vary():
    plane = LatticePlane(*PARIS)
    a = release_lattice([[48.86, 2.35]] * 20, 1.0, plane, rng=9)
    np.testing.assert_array_equal(a, release_lattice([[48.86, 2.35]] * 20, 1.0, plane, rng=9))
    assert not np.array_equal(release_lattice([[48.86, 2.35]] * 20, 1.0, plane),
                              release_lattice([[48.86, 2.35]] * 20, 1.0, plane))
