"""The unit of a space's distances, and epsilon with units."""

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.spaces import MetricSpace
from metricdp.units import Epsilon, UnitError, level_radius, parse_epsilon, parse_length, space_unit, with_unit


def test_units():
    assert space_unit(MetricSpace.from_points([[0.0, 0.0], [1.0, 1.0]], metric="haversine")) == "km"
    assert space_unit(MetricSpace.grid(2, 2)) == ""
    assert space_unit(MetricSpace.grid(2, 2), {"space": {"unit": "m"}}) == "m"
    assert with_unit("3", "km") == "3 km"
    assert with_unit("3", "") == "3"


# --- epsilon with units and the (l, r) form -------------------------------------------


@pytest.mark.parametrize(
    ("text", "per", "unit", "km", "m"),
    [
        ("0.5/km", Fraction(1, 2), "km", 0.5, 0.0005),
        ("1/m", Fraction(1), "m", 1000.0, 1.0),
        ("2 / 100m", Fraction(1, 50), "m", 20.0, 0.02),
        ("  3/ 0.5 km ", Fraction(6), "km", 6.0, 0.006),
        ("1e-3/m", Fraction(1, 1000), "m", 1.0, 0.001),
        (".25/km", Fraction(1, 4), "km", 0.25, 0.00025),
    ],
)
def test_parse_epsilon_hand_computed(text, per, unit, km, m):
    eps = parse_epsilon(text)
    assert eps == Epsilon(per, unit)
    assert eps.to("km") == km
    assert eps.to("m") == m


def test_plain_number_is_in_the_space_units():
    eps = parse_epsilon("0.7")
    assert eps == Epsilon(Fraction(7, 10), "")
    assert eps.to("km") == 0.7 and eps.to("m") == 0.7 and eps.to("") == 0.7
    with pytest.raises(UnitError, match="has a unit"):
        parse_epsilon("1/km").to("")  # a unit-less space cannot take eps per km
    with pytest.raises(UnitError, match="unknown unit 'mi'"):
        parse_epsilon("1/km").to("mi")


def test_level_radius_is_l_over_r():
    assert level_radius(2, "100m") == parse_epsilon("2 / 100m")
    assert level_radius("1.5", "300m").to("km") == 5.0
    assert level_radius(0.1, 0.5) == Epsilon(Fraction(1, 5), "")
    assert parse_epsilon("0.5/km").level(200, "m") == pytest.approx(0.1)
    assert parse_epsilon("0.5/km").level(2) == 1.0
    for bad_level in ("-1", "x", "0", float("nan"), True, "1_0"):
        with pytest.raises(UnitError):
            level_radius(bad_level, "1km")
    for bad_radius in ("0m", "-1km", "km2", "1 mile", float("inf"), 0.0):
        with pytest.raises(UnitError):
            level_radius(1, bad_radius)


def test_parse_length():
    assert parse_length("500m") == (Fraction(500), "m")
    assert parse_length("0.5 km") == (Fraction(1, 2), "km")
    assert parse_length("km") == (Fraction(1), "km")
    assert parse_length("7") == (Fraction(7), "")
    for bad in ("", " ", "0m", "-5m", "5 miles", "5m5", "٥m", "1_0m"):
        with pytest.raises(UnitError, match=r"length|unit"):
            parse_length(bad)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "abc",
        "0",
        "0/km",
        "-1/km",
        "1/2",
        "1/",
        "1/mi",
        "1/km/m",
        "1 km",
        "nan",
        "inf",
        "1e999/m",
        "1e-999/km",
        "٥/km",
        "1_0/km",
        "0x10",
        "1/0m",
        "2 / 100",
        "1e5000/km",
    ],
)
def test_bad_epsilon_text_is_a_typed_error_quoting_it(bad):
    with pytest.raises(UnitError) as info:
        parse_epsilon(bad)
    assert isinstance(info.value, ValidationError)
    assert repr(bad) in str(info.value)


@given(
    st.fractions(min_value=Fraction(1, 10**6), max_value=Fraction(10**6)).filter(lambda f: f > 0),
    st.sampled_from(["m", "km"]),
    st.sampled_from(["m", "km"]),
)
def test_conversion_is_exact_then_rounded_to_nearest(per, unit, target):
    eps = Epsilon(per, unit)
    factor = {"m": 1, "km": 1000}
    exact = per * factor[target] / factor[unit]
    f = eps.to(target)
    err = abs(Fraction(f) - exact)  # no float is nearer the exact value
    assert err <= abs(Fraction(math.nextafter(f, math.inf)) - exact)
    assert err <= abs(Fraction(math.nextafter(f, 0.0)) - exact)
    # converting there and back agrees with the exact value
    assert Epsilon(eps.exact(target), target).exact(unit) == per


@given(st.decimals(min_value="0.001", max_value="1000", places=3), st.sampled_from(["m", "km"]))
def test_text_round_trip(value, unit):
    eps = parse_epsilon(f"{value}/{unit}")
    assert eps.per == Fraction(value) and eps.unit == unit
    assert parse_epsilon(str(eps)).to(unit) == eps.to(unit)
