"""The unit of a space's distances."""

from metricdp.spaces import MetricSpace
from metricdp.units import space_unit, with_unit


def test_units():
    assert space_unit(MetricSpace.from_points([[0.0, 0.0], [1.0, 1.0]], metric="haversine")) == "km"
    assert space_unit(MetricSpace.grid(2, 2)) == ""
    assert space_unit(MetricSpace.grid(2, 2), {"space": {"unit": "m"}}) == "m"
    assert with_unit("3", "km") == "3 km"
    assert with_unit("3", "") == "3"
