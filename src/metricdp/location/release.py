"""What one chunk of (lat, lon) rows becomes: the settings of a release and the function that applies them.

:class:`PointSettings` is everything a release needs, fixed before any row is read and
small enough to send to an engine's workers (epsilon per km, the sampler, the public
lattice, a region and how releases are kept in it, a snapping set). :func:`make_release`
turns it and ONE random source into ``release(latlon, first_row)`` for
:func:`metricdp.streaming.points.privatize_points_file`: the exact lattice sampler
(:func:`metricdp.location.lattice.release_lattice`; its tables built once) or the float
one (:func:`metricdp.location.points.privatize_points`). :func:`full_precision` says which
rows must be written unrounded (a snapped point; a release that rounding would move out
of the region).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from ..errors import PrivacyLeakWarning, ValidationError
from .lattice import LatticePlane, release_lattice
from .region import Region
from .snap import Snapper

__all__ = ["PointSettings", "check_rows", "full_precision", "make_release", "validator"]

#: A release within this distance of a region's boundary counts as inside (1 mm).
REGION_TOLERANCE_KM = 1e-6
#: The lattice step of an exact release unless one is given (1 m: adds eps x 1.42 m to the loss).
DEFAULT_CELL_KM = 0.001


@dataclass(frozen=True)
class PointSettings:
    """A release of (lat, lon) rows: ``plane`` None means the float sampler."""

    epsilon: float
    plane: LatticePlane | None
    area: Region | None = None
    truncate: str = "nearest"
    snapper: Snapper | None = None

    def __post_init__(self) -> None:
        from .points import TRUNCATIONS

        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValidationError(f"epsilon must be positive, got {self.epsilon!r}")
        if self.truncate not in TRUNCATIONS:
            raise ValidationError(f"the parameter 'truncate' must be one of {', '.join(TRUNCATIONS)}, "
                                  f"got {self.truncate!r}")

    @classmethod
    def of(cls, epsilon: float, *, exact: bool = True, region: Region | None = None, truncate: str = "nearest",
           snapper: Snapper | None = None, origin: tuple[float, float] | None = None, cell_km: float | None = None,
           extent_km: float | None = None) -> PointSettings:
        """The settings of a release at ``epsilon`` per km: exact on the public lattice centred at ``origin``
        (default: the centre of ``region``; step ``cell_km``, default 1 m; rows within ``extent_km``, default
        500 km or 1.5x the region's reach) or, ``exact`` False, the float sampler (no lattice).

        Raises
        ------
        ValidationError
            lattice parameters for the float sampler, an exact release with neither ``origin`` nor
            ``region`` (the lattice must be public, fixed before seeing the data), a bad lattice,
            ``truncate`` not one of :data:`~metricdp.location.points.TRUNCATIONS`.
        """
        if not exact:
            if origin is not None or cell_km is not None or extent_km is not None:
                raise ValidationError("the parameter 'origin', the parameter 'cell_km' and the parameter 'extent_km' "
                                      "are for sampler='exact' (the lattice)")
            return cls(epsilon, None, region, truncate, snapper)
        if origin is None and region is None:
            raise ValidationError(
                "the exact sampler needs a public lattice origin fixed before seeing the data: the parameter "
                "'origin' (e.g. the city centre) or the parameter 'region'; or sampler='float' (continuous, not "
                "exact in floating point)")
        cell = DEFAULT_CELL_KM if cell_km is None else cell_km
        try:
            plane = (LatticePlane.around(region, cell_km=cell, extent_km=extent_km) if origin is None  # type: ignore[arg-type]
                     else LatticePlane(*origin, cell_km=cell, extent_km=500.0 if extent_km is None else extent_km))
        except ValidationError as ex:
            raise ValidationError(f"the lattice of the parameter 'origin', the parameter 'cell_km' and the parameter "
                                  f"'extent_km': {ex}") from None
        return cls(epsilon, plane, region, truncate, snapper)

    @property
    def noise_epsilon(self) -> float:
        """The epsilon the noise is drawn at (half with rejection into a region)."""
        return self.epsilon / 2 if self.area is not None and self.truncate == "reject" else self.epsilon


def check_rows(pts: NDArray[np.float64], first_row: int) -> None:
    """Finite (lat, lon) degrees, else an error naming the first bad data row (1-based)."""
    bad = ~np.isfinite(pts).all(axis=1) | (np.abs(pts[:, 0]) > 90) | (np.abs(pts[:, 1]) > 180)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        lat, lon = float(pts[i, 0]), float(pts[i, 1])
        raise ValidationError(f"data row {first_row + i}: ({lat!r}, {lon!r}) is not a (lat, lon) in degrees")


def validator(settings: PointSettings) -> Any:
    """``validate(latlon (k, 2), first_row)``: raises on a row the release would refuse, drawing nothing.

    Finite degrees (:func:`check_rows`) and, on the lattice, within its extent (the
    lattice's own check). An accounted release runs it over the whole file before it
    reserves any budget, so a bad row costs nobody anything.
    """
    plane = settings.plane

    def validate(pts: NDArray[np.float64], first_row: int) -> None:
        check_rows(pts, first_row)
        if plane is not None:
            plane.snap(pts, first_row=first_row)

    return validate


def make_release(settings: PointSettings, source: RandomSource) -> Any:
    """``release(latlon (k, 2), first_row) -> (k, 2)`` drawing from ``source`` chunk after chunk."""
    if settings.plane is not None:
        from ..mechanisms.lattice_batch import LatticeSampler

        plane = settings.plane
        sampler = LatticeSampler(plane.alpha(settings.noise_epsilon))

        def exact(pts: NDArray[np.float64], first_row: int) -> NDArray[np.float64]:
            check_rows(pts, first_row)
            return release_lattice(pts, settings.epsilon, plane, region=settings.area,
                                   truncation=settings.truncate,  # type: ignore[arg-type]
                                   snap_to=settings.snapper, rng=source, first_row=first_row, sampler=sampler)

        return exact

    from .points import privatize_points

    def continuous(pts: NDArray[np.float64], first_row: int) -> NDArray[np.float64]:
        check_rows(pts, first_row)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # the caller says it once
            try:
                out = privatize_points(pts, settings.epsilon, region=settings.area,
                                       truncation=settings.truncate,  # type: ignore[arg-type]
                                       snap_to=settings.snapper, rng=source)
            except ValidationError as ex:
                raise ValidationError(f"rows from data row {first_row}: {ex}") from None
        return np.atleast_2d(out)

    return continuous


def full_precision(settings: PointSettings) -> Any:
    """``full(rounded) -> mask`` of rows to write unrounded, or None when rounding never matters."""
    if settings.snapper is not None:
        return lambda rounded: np.ones(len(rounded), dtype=bool)
    if settings.area is not None:
        area = settings.area
        return lambda rounded: ~area.contains(rounded, tolerance_km=REGION_TOLERANCE_KM)
    return None
