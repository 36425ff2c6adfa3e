"""The unit of a metric space's distances, for labels in reports and tables.

A ``haversine`` space measures km by construction. Other spaces carry no unit unless
their mechanism file's metadata says so (``metadata["space"]["unit"]``, e.g. ``"m"`` for
the built-in 150 m grid); then the unit is whatever that says, else the empty string
("in the units of the coordinates").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .spaces import MetricSpace

__all__ = ["space_unit", "with_unit"]


def space_unit(space: MetricSpace, metadata: Mapping[str, Any] | None = None) -> str:
    """``"km"`` for haversine spaces, else the file's declared unit, else ``""``.

    Examples
    --------
    >>> space_unit(MetricSpace.from_points([[48.0, 2.0], [49.0, 2.0]], metric="haversine"))
    'km'
    >>> space_unit(MetricSpace.grid(2, 2), {"space": {"unit": "m"}})
    'm'
    """
    if space.metric == "haversine":
        return "km"
    declared = ((metadata or {}).get("space") or {}).get("unit")
    return str(declared) if declared else ""


def with_unit(value: str, unit: str) -> str:
    """``"1.5 km"`` or ``"1.5"`` when there is no unit."""
    return f"{value} {unit}" if unit else value
