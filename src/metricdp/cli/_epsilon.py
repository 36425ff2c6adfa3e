"""``--epsilon`` with units, and ``--level L --radius R``: the two ways to state a geo-indistinguishability level.

``--epsilon`` takes ``0.5/km``, ``1/m``, ``2 / 100m`` or a plain number in the space's
units (:func:`metricdp.units.parse_epsilon`); ``--level L --radius R`` sets eps = L / R
(Andres et al. 2013). The value is converted exactly to the space's unit
(:func:`metricdp.units.space_unit`: km for lat/lon) and handed on as a float.
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from .._validation import check_epsilon
from ..errors import ValidationError
from ..units import UnitError, level_radius, parse_epsilon

__all__ = ["EpsilonOption", "LevelOption", "RadiusOption", "resolve_epsilon"]

EpsilonOption = Annotated[
    str | None,
    typer.Option("--epsilon", "-e", metavar="EPS", help="The mDP guarantee per unit of distance: 0.5/km, 1/m, "
                 "2 / 100m, or a plain number in the space's units (km for lat/lon)."),
]
LevelOption = Annotated[  # text, read by the strict decimal rule (float() would take 4_8 as 48)
    str | None,
    typer.Option("--level", metavar="L", help="With --radius R: level L within radius R (eps = L / R; "
                 "Andres et al. 2013), instead of --epsilon."),
]
RadiusOption = Annotated[
    str | None, typer.Option("--radius", metavar="R", help="The radius of --level: 200m, 1km, or a plain number.")
]


def resolve_epsilon(epsilon: str | None, level: str | None, radius: str | None, unit: str) -> float | None:
    """The epsilon per ``unit`` the options state (None when none is given); errors name the flags."""
    if (level is None) != (radius is None):
        raise ValidationError("--level and --radius go together (level L within radius R)")
    if level is not None and epsilon is not None:
        raise ValidationError("give --epsilon or --level with --radius, not both")
    try:
        if level is not None:
            assert radius is not None
            return level_radius(level, radius).to(unit)
        if epsilon is None:
            return None
        if "/" not in epsilon:  # a plain number: the one epsilon check and its message (0, nan, inf)
            try:
                plain = float(epsilon)
            except ValueError:
                plain = None
            if plain is not None and not (math.isfinite(plain) and plain > 0):
                check_epsilon(plain, "--epsilon")
        return parse_epsilon(epsilon).to(unit)
    except UnitError as ex:
        flag = "--level/--radius" if level is not None else "--epsilon"
        raise ValidationError(f"{flag}: {ex}") from None
