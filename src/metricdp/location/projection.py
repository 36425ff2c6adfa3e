r"""The local tangent plane of a point on the Earth, in km, and its distortion bound.

metricdp measures geographic distance on the sphere of radius
:data:`~metricdp.spaces.EARTH_RADIUS_KM` (the ``haversine`` metric). Two maps of a
neighbourhood of that sphere to a plane are used:

* :class:`TangentPlane` -- the *azimuthal equidistant* projection centred at a point
  c: a point at great-circle distance :math:`\rho` and initial bearing :math:`\theta`
  from c goes to :math:`(x, y) = \rho(\sin\theta, \cos\theta)` km (x east, y north).
  Distances *from the centre* are kept exactly, which is why
  :func:`metricdp.mechanisms.planar_laplace.sample_planar_laplace_latlon` uses it to
  put a planar Laplace around each input, and why a release's radial distance can be
  read back exactly (the tests of ``privatize-points`` do).
* :func:`equirectangular` -- the affine map
  :math:`(x, y) = R(\cos\varphi_0\,\Delta\lambda, \Delta\varphi)` about a reference
  latitude. Straight lines in (lon, lat) -- the edges of a GeoJSON polygon (RFC 7946,
  Section 3.1.1) or of a box -- stay straight, so "inside the region" means the same
  before and after; :mod:`metricdp.location.region` picks nearest points in it.

Distortion bound (azimuthal equidistant)
----------------------------------------
Let :math:`k(r) = (r/R) / \sin(r/R)` for :math:`0 < r < \pi R / 2` (:math:`k(0) = 1`).
For all points p, q within great-circle distance r of the centre,

.. math:: d_{gc}(p, q) \;\le\; \lVert P(p) - P(q) \rVert \;\le\; k(r)\, d_{gc}(p, q).

*Proof.* At great-circle distance :math:`\rho` from the centre the projection's scale is
1 along the radius and :math:`k(\rho) \ge 1` across it (a circle of spherical radius
:math:`\rho` has length :math:`2\pi R \sin(\rho/R)` and is mapped to one of length
:math:`2\pi\rho`); k increases with :math:`\rho`. The differential of P therefore has
operator norm at most :math:`k(r)` on the cap of radius r, and that of the inverse at
most 1 on the disc of radius r. Upper bound: the shortest great-circle arc from p to q
stays in the cap (a cap of radius below :math:`\pi R/2` is geodesically convex), so its
image is a curve of length at most :math:`k(r) d_{gc}(p,q)` from P(p) to P(q), at least
as long as the segment. Lower bound: the segment from P(p) to P(q) stays in the disc of
radius r (convex); its inverse image is a curve on the sphere of length at most
:math:`\lVert P(p) - P(q)\rVert` from p to q, at least as long as the great-circle
arc. :math:`\square`

Numerically :math:`k(r) - 1 \approx r^2 / 6R^2`: :math:`4.1 \times 10^{-7}` at 10 km,
:math:`4.1 \times 10^{-5}` at 100 km and :math:`4.1 \times 10^{-3}` at 1,000 km
(:func:`distortion_bound`). So distances measured in one tangent plane over a city are
great-circle distances to better than a millimetre per km.

Nothing here affects a privacy guarantee: the releases of ``privatize-points`` are
eps-geo-indistinguishable for the great-circle distance itself (the sampler removes
the projection's area distortion by rejection, see its docstring); projections are used
to *read* releases and to post-process them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ValidationError
from ..spaces import EARTH_RADIUS_KM

__all__ = ["TangentPlane", "check_latlon", "distortion_bound", "equirectangular", "equirectangular_inverse"]

_TWO_PI = 2.0 * math.pi


def check_latlon(latlon: ArrayLike, name: str = "latlon") -> tuple[NDArray[np.float64], bool]:
    """``(points (k, 2), single)``: finite (lat, lon) degrees with |lat| <= 90, |lon| <= 180.

    The error names the first row that fails.
    """
    try:
        a = np.asarray(latlon, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(f"{name} must be numeric (lat, lon) pairs") from None
    single = a.ndim == 1
    a = np.atleast_2d(a)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValidationError(f"{name} must have shape (2,) or (k, 2) (lat, lon), got {np.shape(latlon)}")
    bad = ~np.isfinite(a).all(axis=1) | (np.abs(a[:, 0]) > 90) | (np.abs(a[:, 1]) > 180)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"{name} row {i} is not a (lat, lon) in degrees: {a[i].tolist()}")
    return a, single


def distortion_bound(radius_km: float) -> float:
    r""":math:`k(r) = (r/R)/\sin(r/R)`: planar / great-circle distance ratio bound within r of the centre.

    See the module docstring for the proof. Valid for :math:`0 \le r < \pi R/2`
    (about 10,007 km).

    Examples
    --------
    >>> round(distortion_bound(100.0) - 1, 7)
    4.11e-05
    """
    try:
        r = float(radius_km)
    except (TypeError, ValueError):
        raise ValidationError(f"radius_km must be a number, got {radius_km!r}") from None
    if not (0.0 <= r < math.pi * EARTH_RADIUS_KM / 2):
        raise ValidationError(f"radius_km must be in [0, {math.pi * EARTH_RADIUS_KM / 2:.0f}) km, got {radius_km!r}")
    x = r / EARTH_RADIUS_KM
    return 1.0 / float(np.sinc(x / math.pi))


@dataclass(frozen=True)
class TangentPlane:
    """Azimuthal equidistant projection centred at ``(lat0, lon0)`` (degrees), x east and y north in km.

    Examples
    --------
    >>> plane = TangentPlane(48.8566, 2.3522)          # Paris
    >>> xy = plane.forward([[48.8566, 2.3522], [48.9566, 2.3522]])
    >>> [round(float(v), 6) for v in xy[1]]            # 0.1 degree north
    [0.0, 11.119508]
    >>> bool(np.allclose(plane.inverse(xy), [[48.8566, 2.3522], [48.9566, 2.3522]]))
    True
    """

    lat0: float
    lon0: float

    def __post_init__(self) -> None:
        check_latlon([self.lat0, self.lon0], "centre")

    def forward(self, latlon: ArrayLike) -> NDArray[np.float64]:
        """(lat, lon) degrees -> (x, y) km; a point's norm is its exact great-circle distance to the centre."""
        pts, single = check_latlon(latlon)
        lat1, lon1 = math.radians(self.lat0), math.radians(self.lon0)
        lat2, dlon = np.radians(pts[:, 0]), np.radians(pts[:, 1]) - lon1
        # haversine (accurate for small distances) for the angle, atan2 for the bearing
        h = np.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * np.cos(lat2) * np.sin(dlon / 2) ** 2
        c = 2.0 * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))
        theta = np.arctan2(np.sin(dlon) * np.cos(lat2), math.cos(lat1) * np.sin(lat2)
                           - math.sin(lat1) * np.cos(lat2) * np.cos(dlon))
        rho = EARTH_RADIUS_KM * c
        out = np.column_stack([rho * np.sin(theta), rho * np.cos(theta)])
        return out[0] if single else out

    def inverse(self, xy: ArrayLike) -> NDArray[np.float64]:
        """(x, y) km -> (lat, lon) degrees (lon in [-180, 180)); needs |(x, y)| < pi R."""
        a = np.asarray(xy, dtype=np.float64)
        single = a.ndim == 1
        a = np.atleast_2d(a)
        if a.ndim != 2 or a.shape[1] != 2 or not np.isfinite(a).all():
            raise ValidationError(f"xy must be finite with shape (2,) or (k, 2), got {np.shape(xy)}")
        rho = np.hypot(a[:, 0], a[:, 1])
        if (rho >= math.pi * EARTH_RADIUS_KM).any():
            raise ValidationError(f"xy must lie within pi R = {math.pi * EARTH_RADIUS_KM:.0f} km of the centre")
        theta = np.arctan2(a[:, 0], a[:, 1])
        delta = rho / EARTH_RADIUS_KM
        lat1, lon1 = math.radians(self.lat0), math.radians(self.lon0)
        sin_lat2 = math.sin(lat1) * np.cos(delta) + math.cos(lat1) * np.sin(delta) * np.cos(theta)
        lat2 = np.arcsin(np.clip(sin_lat2, -1.0, 1.0))
        east = np.sin(theta) * np.sin(delta) * math.cos(lat1)
        lon2 = lon1 + np.arctan2(east, np.cos(delta) - math.sin(lat1) * sin_lat2)
        lon2 = np.mod(lon2 + math.pi, _TWO_PI) - math.pi
        out = np.column_stack([np.degrees(lat2), np.degrees(lon2)])
        return out[0] if single else out


def equirectangular(latlon: ArrayLike, lat0: float) -> NDArray[np.float64]:
    r"""(lat, lon) degrees -> (x, y) = R (cos(lat0) lon, lat) in km (radians inside): an affine map.

    Exact along meridians; along a parallel at latitude :math:`\varphi` the scale is
    :math:`\cos\varphi/\cos\varphi_0`, which within :math:`\Delta` of ``lat0`` lies in
    :math:`[\cos(|\varphi_0|+\Delta), \cos(\max(|\varphi_0|-\Delta, 0))]/\cos\varphi_0`
    (about :math:`1 \pm \tan|\varphi_0|\,\Delta`, :math:`\Delta` in radians).
    Used only to choose a nearest point of a region (post-processing), never for a
    privacy level.
    """
    pts, _ = check_latlon(latlon)
    lat0 = math.radians(float(lat0))
    return EARTH_RADIUS_KM * np.column_stack([math.cos(lat0) * np.radians(pts[:, 1]), np.radians(pts[:, 0])])


def equirectangular_inverse(xy: ArrayLike, lat0: float) -> NDArray[np.float64]:
    """The inverse of :func:`equirectangular` (no range check: callers map back points of a region)."""
    a = np.atleast_2d(np.asarray(xy, dtype=np.float64))
    lat0 = math.radians(float(lat0))
    return np.column_stack([np.degrees(a[:, 1] / EARTH_RADIUS_KM),
                            np.degrees(a[:, 0] / (EARTH_RADIUS_KM * math.cos(lat0)))])
