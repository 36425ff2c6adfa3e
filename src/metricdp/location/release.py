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


@dataclass(frozen=True)
class PointSettings:
    """A release of (lat, lon) rows: ``plane`` None means the float sampler."""

    epsilon: float
    plane: LatticePlane | None
    area: Region | None = None
    truncate: str = "nearest"
    snapper: Snapper | None = None

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
