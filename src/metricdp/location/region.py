r"""Regions on the Earth and two provably private ways of keeping releases inside one.

A :class:`Region` is a union of polygons with holes whose edges are straight lines in
(longitude, latitude), as in GeoJSON (RFC 7946, Section 3.1.1); a box
``LAT0,LON0,LAT1,LON1`` is the polygon with those four corners. A point is inside by the
even-odd rule (for valid GeoJSON: inside an exterior ring and outside its holes).

Keeping releases inside a region
--------------------------------
Let :math:`f_x` be the density (w.r.t. area on the sphere) of the planar Laplace release
of x, :math:`f_x(z) = e^{-\varepsilon d(x,z)}/C` with C independent of x
(:func:`~metricdp.mechanisms.planar_laplace.sample_planar_laplace_latlon`), so that
:math:`f_x(z) \le e^{\varepsilon d(x,x')} f_{x'}(z)` for all z.

1. **Nearest point** (:meth:`Region.nearest`, the default of ``privatize-points``): a
   release outside the region is replaced by the nearest point of the region's boundary
   (nearest in the :func:`~metricdp.location.projection.equirectangular` plane about the
   region's middle latitude; points inside are kept). This is a fixed function g of the
   release alone, so for every measurable set S,
   :math:`\Pr[g(Z_x) \in S] = \Pr[Z_x \in g^{-1}(S)] \le e^{\varepsilon d(x,x')}\Pr[Z_{x'} \in g^{-1}(S)]`:
   **epsilon is unchanged** (post-processing; Andres et al., CCS 2013, Section 4,
   truncation). The price: releases outside pile up on the boundary.

2. **Rejection** (:func:`sample_in_region`): draw again until the release is inside A.
   The release then has density :math:`g_x(z) = f_x(z)/F_x(A)` on A, with
   :math:`F_x(A) = \int_A f_x`. For z in A,

   .. math:: \frac{g_x(z)}{g_{x'}(z)} = \frac{f_x(z)}{f_{x'}(z)} \cdot \frac{F_{x'}(A)}{F_x(A)}
             \le e^{\varepsilon d(x,x')} \cdot e^{\varepsilon d(x,x')},

   because :math:`F_{x'}(A) = \int_A f_{x'} \le e^{\varepsilon d(x,x')} \int_A f_x`. So
   rejection at noise level epsilon is **2 epsilon**-geo-indistinguishable, and the
   factor 2 cannot be removed in general: far from A the normaliser ratio alone tends to
   :math:`e^{\varepsilon d}` (e.g. x, x' on a line towards a half-plane A). To release
   at a target epsilon by rejection, draw the noise at epsilon / 2 (``privatize-points
   --truncate reject`` does). The number of draws depends on the input and is not
   released; a row still outside after ``max_rounds`` draws is an error (nothing is
   released).

References
----------
.. [1] M. E. Andrés, N. E. Bordenabe, K. Chatzikokolakis, C. Palamidessi.
   "Geo-indistinguishability: differential privacy for location-based systems." CCS 2013.
.. [2] H. Butler et al. "The GeoJSON Format." RFC 7946, 2016.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import check_rng
from .._validation import check_epsilon, check_int
from ..errors import ValidationError
from .projection import check_latlon, equirectangular, equirectangular_inverse

__all__ = ["Region", "parse_region", "sample_in_region"]

_CHUNK = 1 << 21  # points x edges per block of the nearest-point search and the even-odd test
_MAX_DEPTH = 16  # GeoJSON objects nested deeper than this (collections of collections ...) are refused


@dataclass(frozen=True, eq=False, repr=False)
class Region:
    """A union of polygons with holes in (lat, lon) degrees.

    Attributes
    ----------
    polygons : tuple of tuples of arrays
        ``polygons[p][0]`` is the exterior ring of polygon p and the others its holes,
        each an ``(m, 2)`` array of (lat, lon) vertices, not repeating the first vertex.
    name : str
    """

    polygons: tuple[tuple[NDArray[np.float64], ...], ...]
    name: str = "region"

    # ----------------------------------------------------------------- constructors
    @classmethod
    def box(cls, lat0: float, lon0: float, lat1: float, lon1: float, name: str = "box") -> Region:
        """The box ``lat0 <= lat <= lat1``, ``lon0 <= lon <= lon1`` (no antimeridian crossing)."""
        from ..data.geo import parse_region as parse_box

        _, (a, b, c, d) = parse_box([lat0, lon0, lat1, lon1])
        ring = np.array([[a, b], [a, d], [c, d], [c, b]], dtype=np.float64)
        return cls(((ring,),), name)

    @classmethod
    def from_geojson(cls, obj: Any, name: str = "geojson") -> Region:
        """From a GeoJSON object: Polygon, MultiPolygon, Feature, FeatureCollection or GeometryCollection.

        Positions are ``[lon, lat]`` (RFC 7946 order); every polygonal geometry found is
        part of the region, other geometries are an error.
        """
        polygons: list[tuple[NDArray[np.float64], ...]] = []
        _collect(obj, polygons, "GeoJSON")
        if not polygons:
            raise ValidationError(f"{name}: the GeoJSON has no Polygon or MultiPolygon")
        return cls(tuple(polygons), name)

    # ----------------------------------------------------------------- queries
    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """``(lat0, lon0, lat1, lon1)`` of all vertices."""
        v = np.concatenate([ring for poly in self.polygons for ring in poly])
        return float(v[:, 0].min()), float(v[:, 1].min()), float(v[:, 0].max()), float(v[:, 1].max())

    @property
    def _lat_ref(self) -> float:
        lat0, _, lat1, _ = self.bounds
        return (lat0 + lat1) / 2

    def _edges(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Start and end points of every edge in the equirectangular plane (km)."""
        starts, ends = [], []
        for poly in self.polygons:
            for ring in poly:
                xy = equirectangular(ring, self._lat_ref)
                starts.append(xy)
                ends.append(np.roll(xy, -1, axis=0))
        return np.concatenate(starts), np.concatenate(ends)

    def _inside(self, pts: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Even-odd rule in (lon, lat): inside a polygon when a ray towards +lon crosses its rings an odd
        number of times; inside the region when inside one of its polygons.

        An edge from a to b crosses the ray from p when p's latitude lies in the edge's
        half-open span ``[min(a_lat, b_lat), max(a_lat, b_lat))`` (so a vertex on the ray
        counts once and a horizontal edge never) and the crossing's longitude exceeds p's.
        With the points sorted by latitude, the points an edge spans are one contiguous run
        (two binary searches), so the work is the number of (edge, spanned point) pairs, not
        points x edges; the pairs are taken in blocks of at most ``_CHUNK``.
        """
        order = np.argsort(pts[:, 0], kind="stable")
        lat, lon = pts[order, 0], pts[order, 1]
        inside = np.zeros(len(pts), dtype=bool)
        for poly in self.polygons:
            a = np.concatenate(poly)
            b = np.concatenate([np.roll(ring, -1, axis=0) for ring in poly])
            lo = np.searchsorted(lat, np.minimum(a[:, 0], b[:, 0]), side="left")
            count = np.searchsorted(lat, np.maximum(a[:, 0], b[:, 0]), side="left") - lo
            ends = np.cumsum(count)
            crossings = np.zeros(len(pts), dtype=np.int64)  # per point, in latitude order
            first = 0
            while first < len(a):
                stop = max(first + 1, int(np.searchsorted(ends, ends[first] - count[first] + _CHUNK, side="right")))
                edges = np.arange(first, stop)
                c = count[edges]
                edge = np.repeat(edges, c)
                p = lo[edge] + np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
                ea, eb = a[edge], b[edge]  # a spanned edge has ea_lat != eb_lat
                cross = ea[:, 1] + (lat[p] - ea[:, 0]) * (eb[:, 1] - ea[:, 1]) / (eb[:, 0] - ea[:, 0])
                crossings += np.bincount(p[lon[p] < cross], minlength=len(pts))
                first = stop
            inside[order] |= crossings % 2 == 1
        return inside

    def boundary_distance_km(self, latlon: ArrayLike) -> NDArray[np.float64]:
        """Distance (equirectangular km) from each point to the region's boundary."""
        pts, _ = check_latlon(latlon)
        return self._nearest_on_boundary(pts)[1]

    def contains(self, latlon: ArrayLike, tolerance_km: float = 1e-6) -> NDArray[np.bool_]:
        """Whether each point is in the closed region (inside, or within ``tolerance_km`` of the boundary)."""
        pts, single = check_latlon(latlon)
        inside = self._inside(pts)
        if not inside.all():
            out = np.flatnonzero(~inside)
            inside[out] = self._nearest_on_boundary(pts[out])[1] <= tolerance_km
        return inside[0] if single else inside

    def _nearest_on_boundary(self, pts: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Nearest boundary point (equirectangular plane) of each point: ((k, 2) lat/lon, (k,) km)."""
        a, b = self._edges()
        ab = b - a
        length2 = np.einsum("ij,ij->i", ab, ab)
        q = equirectangular(pts, self._lat_ref)
        best_xy = np.empty_like(q)
        best_d = np.empty(len(q))
        step = max(1, _CHUNK // max(1, len(a)))
        for start in range(0, len(q), step):
            p = q[start : start + step, None, :]  # (c, 1, 2)
            with np.errstate(invalid="ignore", divide="ignore"):
                t = np.einsum("cej,ej->ce", p - a[None], ab) / length2[None]
            t = np.clip(np.nan_to_num(t, nan=0.0), 0.0, 1.0)
            foot = a[None] + t[:, :, None] * ab[None]  # (c, e, 2)
            d2 = np.einsum("cej,cej->ce", p - foot, p - foot)
            k = np.argmin(d2, axis=1)
            rows = np.arange(len(k))
            best_xy[start : start + step] = foot[rows, k]
            best_d[start : start + step] = np.sqrt(d2[rows, k])
        return equirectangular_inverse(best_xy, self._lat_ref), best_d

    def nearest(self, latlon: ArrayLike) -> NDArray[np.float64]:
        """Each point if inside, else the nearest point of the boundary: a fixed map into the region.

        Post-processing: applied to eps-geo-indistinguishable releases it keeps epsilon
        (module docstring, part 1).
        """
        pts, single = check_latlon(latlon)
        out = pts.copy()
        outside = np.flatnonzero(~self._inside(pts))
        if outside.size:
            out[outside] = self._nearest_on_boundary(pts[outside])[0]
        return out[0] if single else out

    def __repr__(self) -> str:
        rings = sum(len(p) for p in self.polygons)
        return f"Region({self.name!r}, polygons={len(self.polygons)}, rings={rings}, bounds={self.bounds})"


def _ring(raw: Any, where: str) -> NDArray[np.float64]:
    if not isinstance(raw, list):
        raise ValidationError(f"{where}: a ring must be a list of [lon, lat] positions")
    for k, position in enumerate(raw):  # JSON numbers only: numpy would read "24.1" and true as numbers
        if not isinstance(position, list) or not all(
            isinstance(c, int | float) and not isinstance(c, bool) for c in position
        ):
            raise ValidationError(f"{where}: position {k} is not a list of JSON numbers: {str(position)[:60]}")
    try:
        a = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # ragged, not numbers, an integer beyond a float
        raise ValidationError(f"{where}: a ring must be a list of [lon, lat] positions") from None
    if a.ndim != 2 or a.shape[1] < 2:
        raise ValidationError(f"{where}: a ring must be a list of [lon, lat] positions, got shape {a.shape}")
    latlon = a[:, [1, 0]]
    if len(latlon) > 1 and np.array_equal(latlon[0], latlon[-1]):
        latlon = latlon[:-1]
    if len(np.unique(latlon, axis=0)) < 3:
        raise ValidationError(f"{where}: a ring needs at least 3 distinct positions")
    check_latlon(latlon, f"{where} position")
    centred = latlon - latlon.mean(axis=0)
    sv = np.linalg.svd(centred, compute_uv=False)  # collinear positions: the second singular value vanishes
    if sv[1] <= 1e-9 * sv[0]:  # (a signed area would also refuse a figure-eight, which encloses area)
        raise ValidationError(f"{where}: the ring encloses no area (its positions are collinear)")
    return latlon


def _members(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    """``obj[key]`` as a list (absent or null: empty); anything else is an error naming ``where``."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError(f"{where}: {key!r} must be a list, got {type(value).__name__}")
    return value


def _collect(obj: Any, out: list[tuple[NDArray[np.float64], ...]], where: str, depth: int = 0) -> None:
    if not isinstance(obj, dict) or "type" not in obj:
        raise ValidationError(f"{where}: not a GeoJSON object (no 'type')")
    if depth > _MAX_DEPTH:  # RFC 7946 3.1.8: nested GeometryCollections SHOULD be avoided
        raise ValidationError(f"{where}: GeoJSON objects nested more than {_MAX_DEPTH} deep")
    kind = obj["type"]
    if not isinstance(kind, str):
        raise ValidationError(f"{where}: 'type' must be a string, got {type(kind).__name__}")
    if kind == "FeatureCollection":
        for i, feature in enumerate(_members(obj, "features", where)):
            _collect(feature, out, f"{where} feature {i}", depth + 1)
    elif kind == "Feature":
        if obj.get("geometry") is None:
            raise ValidationError(f"{where}: a Feature without geometry")
        _collect(obj["geometry"], out, where, depth + 1)
    elif kind == "GeometryCollection":
        for i, geometry in enumerate(_members(obj, "geometries", where)):
            _collect(geometry, out, f"{where} geometry {i}", depth + 1)
    elif kind == "Polygon":
        rings = _members(obj, "coordinates", where)
        if not rings:
            raise ValidationError(f"{where}: a Polygon without coordinates")
        out.append(tuple(_ring(r, f"{where} ring {j}") for j, r in enumerate(rings)))
    elif kind == "MultiPolygon":
        for i, poly in enumerate(_members(obj, "coordinates", where)):
            if not poly or not isinstance(poly, list):
                raise ValidationError(f"{where} polygon {i}: no rings")
            out.append(tuple(_ring(r, f"{where} polygon {i} ring {j}") for j, r in enumerate(poly)))
    else:
        raise ValidationError(f"{where}: a region must be polygonal, got a {kind!r}")


def parse_region(spec: str | PathLike[str] | Sequence[float] | Region) -> Region:
    """A region from a name of :data:`metricdp.data.geo.REGIONS`, ``"LAT0,LON0,LAT1,LON1"``,
    4 numbers, or a GeoJSON file (``.geojson`` / ``.json``)."""
    if isinstance(spec, Region):
        return spec
    if isinstance(spec, PathLike) or (isinstance(spec, str) and spec.lower().endswith((".geojson", ".json"))):
        p = Path(spec)
        if not p.is_file():
            raise ValidationError(f"region {p}: no such file")
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as ex:
            raise ValidationError(f"region {p}: not a JSON file ({ex})") from None
        except RecursionError:  # brackets nested thousands deep: no GeoJSON is
            raise ValidationError(f"region {p}: JSON nested too deep to be GeoJSON") from None
        try:
            return Region.from_geojson(obj, name=p.name)
        except ValidationError as ex:
            raise ValidationError(f"region {p}: {ex}") from None
    from ..data.geo import parse_region as parse_box

    name, box = parse_box(spec)
    return Region.box(*box, name=name if name != "box" else "box " + ",".join(f"{v:g}" for v in box))


def sample_in_region(
    latlon: ArrayLike, epsilon_per_km: float, region: Region, rng: object = None, *, max_rounds: int = 1000
) -> NDArray[np.float64]:
    """Planar Laplace releases at ``epsilon_per_km``, redrawn until inside ``region`` (rejection).

    The result is **2 epsilon_per_km**-geo-indistinguishable (proof in the module
    docstring, part 2): call it with half the target epsilon.

    Raises
    ------
    ValidationError
        A row has no release inside the region after ``max_rounds`` draws (the input is
        far outside the region compared with 1/epsilon); nothing is returned.
    """
    from ..mechanisms.planar_laplace import sample_planar_laplace_latlon

    epsilon = check_epsilon(epsilon_per_km, name="epsilon_per_km")
    rounds = check_int(max_rounds, "max_rounds", minimum=1)
    pts, single = check_latlon(latlon)
    if not isinstance(region, Region):
        raise ValidationError(f"region must be a Region, got {type(region).__name__}")
    source = check_rng(rng)
    out = np.empty_like(pts)
    todo = np.arange(len(pts))
    for _ in range(rounds):
        if not todo.size:
            break
        z = np.atleast_2d(sample_planar_laplace_latlon(pts[todo], epsilon, source))
        ok = region._inside(z)
        out[todo[ok]] = z[ok]
        todo = todo[~ok]
    if todo.size:
        i = int(todo[0])
        raise ValidationError(
            f"row {i}: no release inside the region after {rounds} draws ({todo.size} row(s) in all); "
            f"the input lies far outside {region.name} compared with 1/epsilon = {1 / epsilon:.3g} km"
        )
    return out[0] if single else out
