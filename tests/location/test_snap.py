"""Snapping: the nearest output point by great-circle distance (brute force agrees)."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.location.snap import Snapper
from metricdp.spaces import haversine_km


def test_snap_matches_brute_force_great_circle():
    rng = np.random.default_rng(0)
    targets = np.column_stack([rng.uniform(40, 60, 200), rng.uniform(-10, 30, 200)])
    queries = np.column_stack([rng.uniform(35, 65, 1000), rng.uniform(-20, 40, 1000)])
    s = Snapper(targets)
    brute = np.argmin(haversine_km(queries, targets), axis=1)
    np.testing.assert_array_equal(s.index(queries), brute)
    np.testing.assert_array_equal(s.snap(queries), targets[brute])


def test_snap_across_the_antimeridian():
    s = Snapper([[0.0, 179.9], [0.0, 170.0]])
    assert s.index([[0.0, -179.9]]).tolist() == [0]


def test_snap_single_point_shape():
    assert Snapper([[1.0, 2.0]]).snap([3.0, 4.0]).tolist() == [1.0, 2.0]


def test_bad_snap_points():
    with pytest.raises(ValidationError, match="snap points"):
        Snapper([[100.0, 0.0]])
