"""Column names as what leaves compares them (metricdp.tabular.names): Unicode keys and coordinate words."""

from __future__ import annotations

import pytest

from metricdp.tabular.names import coordinate_role, name_key


@pytest.mark.parametrize("name", ["latlng", "coordinates", "geom", "position", "breite", "laenge", "latitud",
                                  "longitud", "l\u0430t", "L\u0430titude", "home_lat", "Längengrad", "lat\u200b2"])
def test_coordinate_synonyms_and_look_alike_letters_are_coordinates(name: str) -> None:
    assert coordinate_role(name) is not None


def test_name_key_folds_width_case_format_characters_and_confusables() -> None:
    assert name_key("ｃｉｔｙ") == name_key("CITY") == name_key("ci\u200bty") == name_key("\u0441ity") == "city"
    assert name_key("\u03bfrder") == "order"  # Greek omicron
    assert coordinate_role("note") is None and coordinate_role("id") is None


@pytest.mark.parametrize("name", ["note", "id", "city", "sort_order", "timestamp", "user"])
def test_plain_names_are_not_coordinates(name: str) -> None:
    assert coordinate_role(name) is None
