"""Regions: GeoJSON parsing, the even-odd rule, nearest points, and rejection sampling."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from metricdp.errors import ValidationError
from metricdp.location.projection import TangentPlane
from metricdp.location.region import Region, parse_region, sample_in_region

# a 10 x 10 degree square with a 2 x 2 hole in the middle; GeoJSON positions are [lon, lat]
SQUARE = {
    "type": "Polygon",
    "coordinates": [
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]],
    ],
}


def test_even_odd_rule_with_a_hole():
    r = Region.from_geojson(SQUARE)
    pts = np.array([[1.0, 1.0], [5.0, 5.0], [11.0, 5.0], [5.0, -1.0], [3.0, 9.0]])
    assert r.contains(pts).tolist() == [True, False, False, False, True]


def test_positions_are_lon_lat():
    # a thin box in lon 0..10, lat 0..1: (lat 0.5, lon 5) is in, (lat 5, lon 0.5) is not
    r = Region.from_geojson({"type": "Polygon", "coordinates": [[[0, 0], [10, 0], [10, 1], [0, 1]]]})
    assert r.contains([[0.5, 5.0], [5.0, 0.5]]).tolist() == [True, False]


def test_feature_collection_and_multipolygon_are_unions():
    fc = {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "properties": {}, "geometry": {"type": "MultiPolygon", "coordinates": [
                [[[0, 0], [1, 0], [1, 1], [0, 1]]], [[[5, 5], [6, 5], [6, 6], [5, 6]]]]}},
            {"type": "Feature", "properties": {}, "geometry": SQUARE},
        ],
    }
    r = Region.from_geojson(fc)
    assert len(r.polygons) == 3
    assert r.contains([[0.5, 0.5], [5.5, 5.5], [20.0, 20.0]]).tolist() == [True, True, False]


def test_nearest_is_identity_inside_and_lands_on_the_boundary_outside():
    r = Region.from_geojson(SQUARE)
    rng = np.random.default_rng(1)
    pts = np.column_stack([rng.uniform(-5, 15, 500), rng.uniform(-5, 15, 500)])
    out = r.nearest(pts)
    inside = r.contains(pts, tolerance_km=0.0)
    np.testing.assert_array_equal(out[inside], pts[inside])
    assert r.contains(out).all()
    assert np.all(r.boundary_distance_km(out[~inside]) < 1e-6)
    # hand-computed: due south of the square -> straight up to lat 0; in the hole -> its nearest edge
    np.testing.assert_allclose(r.nearest([[-3.0, 7.0], [5.0, 4.2]]), [[0.0, 7.0], [5.0, 4.0]], atol=1e-9)


def test_nearest_beats_every_vertex_in_the_plane():
    r = Region.from_geojson(SQUARE)
    p = np.array([[12.0, 12.0]])
    # the nearest point of a convex corner region is the corner
    np.testing.assert_allclose(r.nearest(p), [[10.0, 10.0]], atol=1e-9)


def test_parse_region_names_boxes_and_files(tmp_path):
    paris = parse_region("paris")
    assert paris.bounds == (48.6, 2.0, 49.1, 2.7)
    box = parse_region("1,2,3,4")
    assert box.bounds == (1.0, 2.0, 3.0, 4.0)
    f = tmp_path / "r.geojson"
    f.write_text(json.dumps(SQUARE))
    assert parse_region(str(f)).contains([1.0, 1.0])


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ({"type": "Point", "coordinates": [0, 0]}, "polygonal"),
        ({"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [0, 0]]]}, "3 distinct"),
        ({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 95]]]}, "not a \\(lat, lon\\)"),
        ({"coordinates": []}, "no 'type'"),
        ({"type": "FeatureCollection", "features": []}, "no Polygon"),
    ],
)
def test_bad_geojson_is_one_clear_error(obj, match):
    with pytest.raises(ValidationError, match=match):
        Region.from_geojson(obj)


def test_bad_region_files(tmp_path):
    with pytest.raises(ValidationError, match="no such file"):
        parse_region(str(tmp_path / "missing.geojson"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValidationError, match="not a JSON"):
        parse_region(str(bad))
    with pytest.raises(ValidationError, match="lat0 < lat1"):
        parse_region("3,2,1,4")


def test_rejection_keeps_every_release_strictly_inside():
    r = parse_region("48.80,2.25,48.90,2.45")
    x = np.repeat([[48.85, 2.35], [48.95, 2.35]], 300, axis=0)  # one input outside the box
    z = sample_in_region(x, 0.5, r, rng=3)
    assert r.contains(z, tolerance_km=0.0).all()


def test_rejection_far_inside_a_large_region_is_planar_laplace():
    # a box of +-5 degrees around the input: truncation is practically never active at eps = 2/km
    r = parse_region("43.0,-5.0,53.0,5.0")
    z = sample_in_region(np.repeat([[48.0, 0.0]], 2000, axis=0), 2.0, r, rng=4)
    rho = np.hypot(*TangentPlane(48.0, 0.0).forward(z).T)
    assert stats.kstest(rho, stats.gamma(a=2, scale=1 / 2.0).cdf).pvalue > 1e-3


def test_rejection_gives_up_with_a_clear_error():
    r = parse_region("0,0,0.001,0.001")
    with pytest.raises(ValidationError, match="no release inside the region after 5 draws"):
        sample_in_region([[40.0, 40.0]], 1.0, r, rng=0, max_rounds=5)


def _poly(tmp_path, ring):
    p = tmp_path / "r.geojson"
    p.write_text(json.dumps({"type": "Polygon", "coordinates": [ring]}), encoding="utf-8")
    return p

@pytest.mark.parametrize(("ring", "message"), [
    ([[24.0, 56.9], [24.1, 56.95], [24.2, 57.0], [24.0, 56.9]], "encloses no area"),
    ([["24.0", 56.9], [24.1, 57.0], [24.2, 56.9], [24.0, 56.9]], "position 0 is not a list of JSON numbers"),
    ([[24.0, 56.9], [True, 57.0], [24.2, 56.9], [24.0, 56.9]], "position 1 is not a list of JSON numbers"),
])
def test_degenerate_or_non_numeric_rings_are_refused(tmp_path, ring, message):
    with pytest.raises(ValidationError, match=message):
        parse_region(_poly(tmp_path, ring))

def test_a_valid_triangle_is_read(tmp_path):
    r = parse_region(_poly(tmp_path, [[24.0, 56.9], [24.1, 57.0], [24.2, 56.9], [24.0, 56.9]]))
    assert r.bounds == pytest.approx((56.9, 24.0, 57.0, 24.2))

@pytest.mark.parametrize("box", ["5_6.9,24,57,24.25", "56.9,24,57,\u0662\u0664.25"])
def test_box_numbers_follow_the_one_number_rule(box):
    with pytest.raises(ValidationError, match="must be numbers"):
        parse_region(box)


def test_a_figure_eight_ring_is_not_mistaken_for_a_flat_one(tmp_path):
    # its signed area is 0 (the lobes cancel) but it encloses area under the even-odd rule
    r = parse_region(_poly(tmp_path, [[0.0, 0.0], [2.0, 2.0], [2.0, 0.0], [0.0, 2.0], [0.0, 0.0]]))
    assert r.contains([[1.0, 0.5]]).all() and not r.contains([[0.5, 1.0]]).any()  # (lat, lon)
