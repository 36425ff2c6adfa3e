"""The tangent plane: exact distances from the centre, round trips, and the distortion bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.location.projection import (
    TangentPlane,
    distortion_bound,
    equirectangular,
    equirectangular_inverse,
)
from metricdp.spaces import EARTH_RADIUS_KM, haversine_km


def _around(centre, radius_km, k, seed):
    """k points within radius_km (great-circle) of centre, via the inverse projection."""
    rng = np.random.default_rng(seed)
    rho = radius_km * np.sqrt(rng.random(k))
    theta = 2 * np.pi * rng.random(k)
    return TangentPlane(*centre).inverse(np.column_stack([rho * np.sin(theta), rho * np.cos(theta)]))


def test_one_degree_north_is_the_meridian_arc():
    xy = TangentPlane(0.0, 0.0).forward([1.0, 0.0])
    assert xy[0] == pytest.approx(0.0, abs=1e-12)
    assert xy[1] == pytest.approx(EARTH_RADIUS_KM * math.pi / 180, rel=1e-12)


def test_east_is_positive_x():
    x, y = TangentPlane(45.0, 10.0).forward([45.0, 10.01])
    assert x > 0 and abs(y) < 1e-3 * x + 1e-3


@settings(max_examples=50, deadline=None)
@given(
    lat=st.floats(-80, 80), lon=st.floats(-179, 179), seed=st.integers(0, 2**32 - 1),
)
def test_norm_is_the_great_circle_distance_and_inverse_round_trips(lat, lon, seed):
    pts = _around((lat, lon), 500.0, 20, seed)
    plane = TangentPlane(lat, lon)
    xy = plane.forward(pts)
    d = haversine_km([[lat, lon]], pts)[0]
    np.testing.assert_allclose(np.hypot(xy[:, 0], xy[:, 1]), d, rtol=1e-9, atol=1e-9)
    back = plane.inverse(xy)
    np.testing.assert_allclose(haversine_km(back, pts).diagonal(), 0.0, atol=1e-7)


@pytest.mark.parametrize("radius", [10.0, 100.0, 1000.0, 3000.0])
def test_distortion_bound_holds_between_points_of_the_cap(radius):
    centre = (52.0, 13.0)
    pts = _around(centre, radius, 300, seed=int(radius))
    xy = TangentPlane(*centre).forward(pts)
    planar = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))
    gc = haversine_km(pts, pts)
    off = ~np.eye(len(pts), dtype=bool)
    ratio = planar[off] / gc[off]
    k = distortion_bound(radius)
    assert ratio.min() >= 1 - 1e-7
    assert ratio.max() <= k * (1 + 1e-7)
    # the bound is not vacuous: some pair comes close to it at large radii
    if radius >= 1000:
        assert ratio.max() > 1 + 0.3 * (k - 1)


def test_distortion_bound_values():
    assert distortion_bound(0.0) == 1.0
    x = 100.0 / EARTH_RADIUS_KM
    assert distortion_bound(100.0) == pytest.approx(x / math.sin(x), rel=1e-14)
    with pytest.raises(ValidationError, match="radius_km"):
        distortion_bound(-1.0)
    with pytest.raises(ValidationError, match="radius_km"):
        distortion_bound(20000.0)


def test_equirectangular_is_affine_and_inverts():
    pts = np.array([[48.0, 2.0], [49.0, 3.0], [48.5, 2.5]])
    xy = equirectangular(pts, 48.5)
    np.testing.assert_allclose(xy[2], (xy[0] + xy[1]) / 2, rtol=1e-12)
    np.testing.assert_allclose(equirectangular_inverse(xy, 48.5), pts, atol=1e-12)


@pytest.mark.parametrize("bad", [[91.0, 0.0], [0.0, 181.0], [np.nan, 0.0], [[1.0, 2.0, 3.0]]])
def test_bad_coordinates_name_the_row(bad):
    with pytest.raises(ValidationError, match="latlon"):
        TangentPlane(0.0, 0.0).forward(bad)


def test_inverse_refuses_beyond_the_antipode():
    with pytest.raises(ValidationError, match="pi R"):
        TangentPlane(0.0, 0.0).inverse([EARTH_RADIUS_KM * 4, 0.0])
