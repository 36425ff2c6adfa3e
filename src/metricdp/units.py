"""The unit of a metric space's distances, for labels in reports and tables.

A ``haversine`` space measures km by construction. Other spaces carry no unit unless
their mechanism file's metadata says so (``metadata["space"]["unit"]``, e.g. ``"m"`` for
the built-in 150 m grid); then the unit is whatever that says, else the empty string
("in the units of the coordinates").

It also reads privacy parameters written with units (:func:`parse_epsilon`,
:func:`parse_length`, :func:`level_radius`): ``0.5/km``, ``1/m``, ``2 / 100m``, a plain
number (in the space's units), or geo-indistinguishability's (l, r) form, "level l within
radius r", which is eps = l / r (Andres et al. 2013, Definition 3.1 and section 3.2).

Exactness. Every number is read as an exact decimal (:class:`fractions.Fraction`) and the
unit conversion is exact; the float handed to a mechanism is the float nearest that value,
the same float the decimal typed directly in the target unit gives (``2 / 100m`` in m is
``0.02``). As everywhere in metricdp, the guarantee a mechanism states and audits is for
the float epsilon it was built with, and that float is what files and reports record.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from .errors import ValidationError

if TYPE_CHECKING:  # annotations only: `ledger show` (which parses budgets) starts without scipy
    from .spaces import MetricSpace

__all__ = [
    "METRES_PER",
    "Epsilon",
    "UnitError",
    "describe_epsilon",
    "epsilon_forms",
    "level_radius",
    "parse_epsilon",
    "parse_length",
    "space_unit",
    "with_unit",
]

#: Length units understood on input, in metres (exact).
METRES_PER: dict[str, Fraction] = {"m": Fraction(1), "km": Fraction(1000)}

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?"
_LENGTH_RE = re.compile(rf"^\s*(?P<num>{_NUMBER})?\s*(?P<unit>[A-Za-z]+)?\s*$", re.ASCII)
_EPS_RE = re.compile(rf"^\s*(?P<num>{_NUMBER})\s*(?:/\s*(?P<den>.*))?$", re.ASCII | re.DOTALL)


class UnitError(ValidationError):
    """Text that should be an epsilon, a length or a unit is not one; the message quotes it."""


def _nearest(x: Fraction) -> float:
    """The float nearest ``x`` (correctly rounded: ``Fraction.__float__`` divides exactly)."""
    return float(x)


def _unit(text: str, what: str) -> str:
    unit = text.strip()
    if unit not in METRES_PER:
        raise UnitError(f"{what}: unknown unit {unit!r}; use one of {sorted(METRES_PER)}")
    return unit


def parse_length(text: str) -> tuple[Fraction, str]:
    """``"500m"`` -> ``(Fraction(500), "m")``; ``"0.5 km"``; a plain ``"3"`` has unit ``""``
    (the space's units). The length must be positive and finite.

    Examples
    --------
    >>> parse_length("0.5km")
    (Fraction(1, 2), 'km')
    >>> parse_length("250")
    (Fraction(250, 1), '')
    """
    m = _LENGTH_RE.match(text)
    if m is None or (m["num"] is None and m["unit"] is None):
        raise UnitError(f"not a length: {text!r} (write e.g. 500m, 0.5km or a plain number)")
    value = Fraction(m["num"]) if m["num"] is not None else Fraction(1)
    if value <= 0:
        raise UnitError(f"a length must be positive: {text!r}")
    unit = _unit(m["unit"], f"length {text!r}") if m["unit"] is not None else ""
    return value, unit


@dataclass(frozen=True)
class Epsilon:
    """An epsilon per unit of distance: ``per`` is the exact value, ``unit`` is ``"m"``,
    ``"km"`` or ``""`` (the space's own units, whatever they are).

    :meth:`to` converts to a target unit and returns the float a mechanism uses (rounded
    down); :meth:`level` gives the (l, r) form for a radius.
    """

    per: Fraction
    unit: str

    def to(self, unit: str) -> float:
        """Epsilon per ``unit`` (``"m"``, ``"km"``, or ``""``: only when this one has no unit).

        A unit-less epsilon (a plain number) is taken to be in the target's units: the
        caller decides that the space's unit is ``unit``. The result is the largest float
        nearest the exact value.

        Examples
        --------
        >>> parse_epsilon("1/m").to("km")
        1000.0
        >>> parse_epsilon("2 / 100m").to("km")
        20.0
        >>> parse_epsilon("0.7").to("m")
        0.7
        """
        return _nearest(self.exact(unit))

    def exact(self, unit: str) -> Fraction:
        """:meth:`to` without the rounding."""
        if not self.unit or not unit:
            if unit and unit not in METRES_PER:
                raise UnitError(f"unknown unit {unit!r}; use one of {sorted(METRES_PER)}")
            if self.unit and not unit:
                raise UnitError(
                    f"epsilon {self} has a unit ({self.unit}) but the space's distances have none;"
                    " give a plain number in the space's units"
                )
            return self.per
        # eps per metre = eps per km / 1000: scale by (metres per target) / (metres per own unit)
        return self.per * METRES_PER[_unit(unit, "target unit")] / METRES_PER[self.unit]

    def level(self, radius: Fraction | float, unit: str | None = None) -> float:
        """The level l = eps * r of the (l, r) form for radius ``r`` in ``unit`` (default own)."""
        return float(self.exact(self.unit if unit is None else unit) * Fraction(radius))

    def __str__(self) -> str:
        value = f"{float(self.per):g}"
        return f"{value}/{self.unit}" if self.unit else value


def parse_epsilon(text: str) -> Epsilon:
    """Read an epsilon: ``"0.5/km"``, ``"1/m"``, ``"2 / 100m"`` (level 2 within 100 m: the
    (l, r) form as a fraction), ``"0.5 / 0.1km"`` or a plain ``"1.2"`` (the space's units).

    Raises :class:`UnitError` naming the text for anything else: an unknown unit, a zero
    or negative value, a number where a unit belongs (``"1/2"``), exponents that overflow.

    Examples
    --------
    >>> parse_epsilon("0.5/km")
    Epsilon(per=Fraction(1, 2), unit='km')
    >>> parse_epsilon("2 / 100m").to("m")
    0.02
    """
    m = _EPS_RE.match(text)
    if m is None:
        raise UnitError(f"not an epsilon: {text!r} (write e.g. 0.5/km, 1/m, 2 / 100m or a plain number)")
    level = Fraction(m["num"])
    if m["den"] is None:
        return _checked(Epsilon(level, ""), text)
    try:
        radius, unit = parse_length(m["den"])
    except UnitError:
        raise UnitError(
            f"not an epsilon: {text!r}: after '/' comes a length with its unit (km, m), e.g. 0.5/km or 2 / 100m"
        ) from None
    if not unit:
        raise UnitError(f"not an epsilon: {text!r}: the length after '/' needs a unit (m or km)")
    return _checked(Epsilon(level / radius, unit), text)


def level_radius(level: float | str, radius: str | float) -> Epsilon:
    """The (l, r) form of geo-indistinguishability: eps = l / r, e.g. ``level_radius(2, "100m")``
    (Andres et al. 2013: "l-privacy within r"). A plain-number radius is in the space's units.

    Examples
    --------
    >>> level_radius(1.5, "300m").to("km")
    5.0
    """
    try:
        lv = _fraction(level) if not isinstance(level, str) else Fraction(_number(level.strip(), "level"))
    except (ValueError, ZeroDivisionError, TypeError):
        raise UnitError(f"not a level: {level!r}") from None
    r, unit = parse_length(radius) if isinstance(radius, str) else (_fraction(radius), "")
    if r <= 0:
        raise UnitError(f"a radius must be positive: {radius!r}")
    return _checked(Epsilon(lv / r, unit), f"level {level} within radius {radius}")


def _fraction(x: float) -> Fraction:
    """The decimal the user wrote for a float (``0.1`` is 1/10, its shortest repr)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise UnitError(f"not a finite number: {x!r}")
    return Fraction(repr(float(x)))


def _number(text: str, what: str) -> Fraction:
    if re.fullmatch(_NUMBER, text, re.ASCII) is None:
        raise UnitError(f"not a {what}: {text!r}")
    return Fraction(text)


def _checked(eps: Epsilon, text: str) -> Epsilon:
    if eps.per <= 0:
        raise UnitError(f"epsilon must be positive: {text!r}")
    if eps.per * 1000 > Fraction(1e300) or _nearest(eps.per / 1000) == 0.0:
        raise UnitError(f"epsilon out of range (too small or too large for a float in m or km): {text!r}")
    return eps


#: Radii at which (l, r) is stated, in metres, for spaces measured in m or km.
REFERENCE_RADII_M = (100, 1000)


def epsilon_forms(epsilon: float, unit: str) -> dict[str, Any]:
    """Both forms of an epsilon in a space's ``unit``, for JSON: per unit (and per m and km when the
    unit is one of them), and the (l, r) form at 100 m and 1 km (at radius 1 for a unit-less space).

    Examples
    --------
    >>> f = epsilon_forms(0.5, "km")
    >>> f["per_km"], f["per_m"], f["level_radius"][0]
    (0.5, 0.0005, {'level': 0.05, 'radius': 100, 'radius_unit': 'm'})
    """
    eps = float(epsilon)
    out: dict[str, Any] = {"epsilon": eps, "unit": unit}
    if unit in METRES_PER:
        per_m = eps / float(METRES_PER[unit])
        out.update(per_m=per_m, per_km=per_m * 1000)
        out["level_radius"] = [{"level": per_m * r, "radius": r, "radius_unit": "m"} for r in REFERENCE_RADII_M]
    else:
        out["level_radius"] = [{"level": eps, "radius": 1, "radius_unit": unit}]
    return out


def describe_epsilon(epsilon: float, unit: str) -> str:
    """``"0.5 per km = level 0.05 within 100 m, 0.5 within 1 km"``; ``"0.7"`` (per unit) for a unit-less space."""
    f = epsilon_forms(epsilon, unit)
    if unit not in METRES_PER:
        return f"{epsilon:.6g} per unit of distance" if not unit else f"{epsilon:.6g} per {unit}"
    parts = [f"{x['level']:.6g} within {x['radius'] if x['radius'] < 1000 else x['radius'] // 1000}"
             f" {'m' if x['radius'] < 1000 else 'km'}" for x in f["level_radius"]]
    return f"{epsilon:.6g} per {unit} = level {', '.join(parts)}"


def space_unit(space: MetricSpace, metadata: Mapping[str, Any] | None = None) -> str:
    """``"km"`` for haversine spaces, else the file's declared unit, else ``""``.

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
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
