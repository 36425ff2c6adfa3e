"""The eps of a trace release from an accepted mean displacement: hand values, the refusals, the law it rests on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.location.displacement import epsilon_for_displacement
from metricdp.mechanisms.planar_laplace import sample_planar_laplace_latlon
from metricdp.spaces import haversine_rows_km


def test_independent_is_two_over_the_length():
    assert epsilon_for_displacement(0.5) == 4.0
    assert epsilon_for_displacement(2.0) == 1.0


def test_per_place_subtracts_half_the_cells_diagonal():
    # cells of 0.1 km: a fix is at most 0.1 / sqrt(2) = 0.0707 km from its centre; 2 / 0.429289 = 4.658863
    assert epsilon_for_displacement(0.5, 0.1) == pytest.approx(2 / (0.5 - 0.1 / math.sqrt(2)), rel=1e-15)
    assert epsilon_for_displacement(0.5, 0.1) == pytest.approx(4.658863, rel=1e-6)


@pytest.mark.parametrize(("length", "cell", "fragment"), [
    (0.0, None, "positive length"), (-1.0, None, "positive length"), (math.nan, None, "positive length"),
    (math.inf, None, "positive length"), (0.7, 1.0, "cells of 1 km"), (1 / math.sqrt(2), 1.0, "cells of 1 km"),
])
def test_refusals_name_the_reason(length, cell, fragment):
    with pytest.raises(ValidationError, match=fragment):
        epsilon_for_displacement(length, cell)


def test_independent_releases_move_a_fix_by_the_length_on_average():
    """Seeded (a fixed draw): 40,000 releases at eps = 2 / 0.5 km, mean haversine displacement 0.5 km within 1 %."""
    eps = epsilon_for_displacement(0.5)
    rng = np.random.default_rng(12)
    true = np.tile([[48.8566, 2.3522]], (40_000, 1))
    got = sample_planar_laplace_latlon(true, eps, rng=rng)
    moved = haversine_rows_km(true, got)
    assert abs(moved.mean() - 0.5) < 0.005  # sd of the mean: sqrt(2) / eps / 200 = 0.0018 km
    assert abs(moved.mean() - 0.55) > 0.03  # the test can fail: a 10 % error would show
