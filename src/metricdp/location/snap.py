r"""Snapping releases to a finite output set (grid cell centres, points of interest).

Each release is replaced by the output point at the smallest great-circle distance
(ties broken deterministically by the k-d tree). That is a fixed function of the release alone, so an
eps-geo-indistinguishable release stays eps-geo-indistinguishable (post-processing).
Snapping also discards the low-order bits of a floating-point release, which are what
the attack of Mironov (CCS 2012) on floating-point Laplace samplers reads.

The search runs on unit vectors in R^3 with a k-d tree: the chord length
:math:`2\sin(d_{gc}/2R)` increases with the great-circle distance :math:`d_{gc}` on
:math:`[0, \pi R]`, so the nearest point by chord is the nearest by great-circle
distance, exactly (up to float rounding of near-ties), with no projection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial import cKDTree

from ..errors import ValidationError
from .projection import check_latlon

__all__ = ["Snapper", "unit_vectors"]


def unit_vectors(latlon: ArrayLike) -> NDArray[np.float64]:
    """(lat, lon) degrees -> points of the unit sphere in R^3, shape (k, 3)."""
    pts, _ = check_latlon(latlon)
    lat, lon = np.radians(pts[:, 0]), np.radians(pts[:, 1])
    return np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])


@dataclass(frozen=True, eq=False, repr=False)
class Snapper:
    """The nearest of a fixed set of output points, by great-circle distance.

    Examples
    --------
    >>> s = Snapper([[48.85, 2.35], [51.51, -0.13]])
    >>> s.index([[49.0, 2.0], [51.0, 0.0]]).tolist()
    [0, 1]
    """

    points: NDArray[np.float64]
    _tree: cKDTree = field(init=False, repr=False)

    def __post_init__(self) -> None:
        pts, _ = check_latlon(self.points, "snap points")
        if len(pts) < 1:
            raise ValidationError("snap points: at least one point is needed")
        pts = pts.copy()
        pts.setflags(write=False)
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "_tree", cKDTree(unit_vectors(pts)))

    def index(self, latlon: ArrayLike) -> NDArray[np.intp]:
        """Index of the nearest output point of each (lat, lon)."""
        pts, _ = check_latlon(latlon)
        _, idx = self._tree.query(unit_vectors(pts))
        return np.asarray(idx, dtype=np.intp)

    def snap(self, latlon: ArrayLike) -> NDArray[np.float64]:
        """The nearest output point of each (lat, lon), as (lat, lon)."""
        single = np.ndim(latlon) == 1
        out = self.points[self.index(latlon)]
        return out[0] if single else out

    def __repr__(self) -> str:
        return f"Snapper(points={len(self.points)})"
