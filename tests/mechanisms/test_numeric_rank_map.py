"""The value -> rank map of NumericGrid: exact float64 equality with the grid points (review regressions)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.mechanisms.numeric import NumericGrid


@settings(max_examples=60, deadline=None)
@given(lo=st.integers(-10**9, 10**9), places=st.integers(0, 6), step_units=st.integers(1, 999),
       n=st.integers(2, 400), scale=st.integers(-3, 3))
def test_every_grid_point_typed_as_text_has_its_rank(lo, places, step_units, n, scale):
    lo_d = Decimal(lo).scaleb(-places - 3 + scale)
    step_d = Decimal(step_units).scaleb(-places)
    hi_d = lo_d + (n - 1) * step_d
    if max(abs(lo_d), abs(hi_d)) > step_d * 2**45:
        return
    g = NumericGrid(str(lo_d), str(hi_d), str(step_d))
    texts = [format(lo_d + r * step_d, "f") for r in range(n)]
    ranks, status = g.ranks([float(t) for t in texts])
    assert status.tolist() == [0] * n
    assert ranks.tolist() == list(range(n))
    # the oracle: the float of the exact rational, and the neighbours one ulp away are off the grid
    exact = np.array([float(Fraction(t)) for t in texts])
    np.testing.assert_array_equal(g.points(np.arange(n)), exact)
    inner = exact[1:-1]
    _, up = g.ranks(np.nextafter(inner, np.inf))
    _, down = g.ranks(np.nextafter(inner, -np.inf))
    assert (up == 3).all() and (down == 3).all()


def test_points_slow_path_matches_the_fast_one():
    g = NumericGrid("0.1", "0.5", "0.1")
    assert g.points([0, 2, 4]).tolist() == [0.1, 0.3, 0.5]
    big = NumericGrid("0.123456789012345678", "0.323456789012345678", "0.1")  # a = 123456789012345678 > 2**53
    want = [float(Fraction("0.123456789012345678") + Fraction(k, 10)) for k in range(3)]
    assert big.points([0, 1, 2]).tolist() == want
    _, status = big.ranks([want[1], np.nextafter(want[1], 1.0)])
    assert status.tolist() == [0, 3]


def test_clamp_and_out_of_range_use_the_grid_floats():
    g = NumericGrid("0.1", "0.3", "0.1")
    ranks, status = g.ranks([0.1, 0.3, 0.30000000000000004, 0.09999999999999999, 0.2, 0.25])
    assert status.tolist() == [0, 0, 2, 2, 0, 3]
    ranks, status = g.ranks([0.30000000000000004, 0.09999999999999999, 0.25], clamp=True)
    assert status.tolist() == [0, 0, 3] and ranks.tolist()[:2] == [2, 0]


def test_a_step_too_fine_for_float64_is_refused():
    with pytest.raises(ValidationError, match="too fine"):
        NumericGrid("1e15", "1.0000000000000001e15", "0.1")


def test_release_labels_refuses_an_int64_that_float64_rounds_onto_the_grid():
    from metricdp._random import check_rng
    from metricdp.mechanisms.numeric import number_mechanism

    mech = number_mechanism(NumericGrid(2**53, 2**53 + 2048, 1024), 0.001)
    values = np.array([2**53, 2**53 + 1024, 2**53 + 1], dtype=np.int64)  # the last reads as the float 2**53
    with pytest.raises(ValidationError, match=r"position 2: .*not on the grid"):
        mech.release_labels(values, check_rng(np.random.default_rng(0)))
    out = mech.release_labels(values[:2], check_rng(np.random.default_rng(0)))
    assert len(out) == 2
