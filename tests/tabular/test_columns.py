"""What leaves: the column plan's refusals and its lists, by hand."""

from __future__ import annotations

import pytest

from metricdp.errors import ValidationError
from metricdp.tabular.columns import look_alikes, plan_columns

HEADER = ["user", "time", "city", "lat", "lon"]


def test_default_keeps_and_names_every_other_column():
    plan = plan_columns(HEADER, ["city"])
    assert plan.released == ("city",)
    assert plan.unreleased == plan.unacknowledged == ("user", "time", "lat", "lon")
    assert plan.kept == plan.dropped == ()
    assert plan.written == tuple(HEADER)


def test_keep_and_drop():
    plan = plan_columns(HEADER, ["city"], keep=["time", "user"], drop=["lon", "lat", "lat"])
    assert plan.kept == ("user", "time")  # header order
    assert plan.dropped == ("lat", "lon")
    assert plan.unacknowledged == ()
    assert plan.unreleased == ("user", "time")
    assert plan.written == ("user", "time", "city")
    assert plan.dropped_indices == (3, 4)
    assert plan.as_dict() == {"released": ["city"], "unreleased": ["user", "time"], "unacknowledged": [],
                              "dropped": ["lat", "lon"]}


@pytest.mark.parametrize(
    ("header", "released", "keep", "drop", "message"),
    [
        (["a", "city", "city"], ["city"], [], [], "the released column 'city' appears more than once"),
        (["a", "a", "city"], ["city"], [], [], "column 'a' appears more than once"),
        (["a", "", "city"], ["city"], [], [], "header column 2 has an empty name"),
        (["a", "b"], ["city"], [], [], "no column 'city'; available: 'a', 'b'"),
        (HEADER, ["city"], ["usr"], [], "no column 'usr' to be kept; available"),
        (HEADER, ["city"], [], ["lng"], "no column 'lng' to be dropped; available"),
        (HEADER, ["city"], ["lat"], ["lat"], "column 'lat' is both kept and dropped"),
        (HEADER, ["city"], [], ["city"], "column 'city' is released; it cannot also be dropped"),
        (HEADER, ["city"], ["city"], [], "column 'city' is released; it cannot also be kept"),
        (HEADER, ["lat", "lat"], [], [], "column 'lat' is released twice"),
        (["id", "city", "City"], ["city"], [], [], "column 'City' is named like the released column 'city'"),
        (["id", "city", " city_"], ["city"], ["id"], [], "column ' city_' is named like the released column"),
    ],
)
def test_refusals_name_the_column(header, released, keep, drop, message):
    with pytest.raises(ValidationError) as info:
        plan_columns(header, released, keep=keep, drop=drop, where="f")
    assert str(info.value).startswith("f: ") and message in str(info.value)


@pytest.mark.parametrize(
    ("header", "twins"),
    [
        (["id", "lat", "lon"], ()),
        (["id", "lat", "lon", "latitude", "lng"], ("latitude", "lng")),
        (["id", "lat", "lon", "home_lat", "lat2", "x", "Y"], ("home_lat", "lat2", "x", "Y")),
        (["id", "lat", "lon", "plateau", "daylong"], ()),  # words, not substrings
        (["id", "lat", "lon", "city", "time"], ()),
    ],
)
def test_look_alikes(header, twins):
    assert look_alikes(plan_columns(header, ["lat", "lon"])) == twins


def test_a_name_twin_kept_or_dropped_by_name_is_allowed():
    assert plan_columns(["city", "City"], ["city"], keep=["City"]).kept == ("City",)
    assert plan_columns(["city", "City"], ["city"], drop=["City"]).written == ("city",)


def test_named_look_alikes_are_not_reported():
    plan = plan_columns(["id", "lat", "lon", "lat2", "x"], ["lat", "lon"], keep=["x"], drop=["lat2"])
    assert look_alikes(plan) == ()
