r"""Square cells over a region: a public tiling, binning of (lat, lon) rows, and a private prior.

The tiling
----------
A :class:`CellGrid` depends on the **region and the cell side only**, never on the data,
so publishing its cells (the POINTS file a mechanism is built on) reveals nothing about
the rows binned into it:

* the plane is the azimuthal equidistant projection
  (:class:`~metricdp.location.projection.TangentPlane`) centred at the middle of the
  region's bounding box, ``((lat0 + lat1) / 2, (lon0 + lon1) / 2)``, x east, y north, km;
* cell ``(i, j)`` is the square :math:`[i h, (i+1) h) \times [j h, (j+1) h)` of side h in
  that plane, labelled ``x{i}y{j}``; its point is its centre, mapped back to (lat, lon);
* the grid's cells are those whose centre or one of whose four corners lies in the
  region (closed, :meth:`~metricdp.location.region.Region.contains`): every cell with a
  corner or its centre in the region is kept, so a row of the region falls outside the
  grid only in a sliver of a cell the region merely grazes.

In the plane the cells are exactly square and of equal size; on the sphere distances
between centres differ from the planar ones by the projection's distortion factor
:math:`k(r) - 1 \approx r^2/6R^2` (:func:`~metricdp.location.projection.distortion_bound`;
4e-7 at 10 km), which ``build`` measures and pays for (:mod:`metricdp.location.cells`).

Rows outside the grid
---------------------
``unknown="refuse"`` (an error counting them and naming the first lines), ``"drop"`` (left
out of the labelled output and of the counts) or ``"nearest"`` (the cell whose centre is
nearest in the plane). Each is a fixed function of the row alone, so a release computed from
the labels is a post-processing of a row-wise map: the mechanism's guarantee applies to the
cell labels (for ``nearest`` the guarantee is between the cells the rows map to).

The prior
---------
:func:`private_prior`: the count of rows per cell plus independent two-sided geometric
noise, :math:`\Pr[Z = z] \propto e^{-\varepsilon |z|}` (Ghosh, Roughgarden, Sundararajan,
STOC 2009), drawn exactly from random bits
(:func:`~metricdp.mechanisms.lattice_laplace.discrete_laplace`, Canonne, Kamath and
Steinke 2020), then clamped at 0 and normalised (uniform if every noisy count is 0).
Adding or removing **one row** changes one count by one, so the noisy counts are
:math:`\varepsilon`-differentially private (standard DP on rows, not metric DP): the
vector of counts has L1 sensitivity 1 and the geometric mechanism is
:math:`\varepsilon`-DP for sensitivity 1; clamping and normalising are post-processing.
A person with k rows is protected at :math:`k\varepsilon` (group privacy), and the prior's
epsilon adds to the budget of every release that uses it (sequential composition).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from os import PathLike
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import check_rng, warn_unless_secure
from .._resources import check_allocation
from ..errors import ValidationError
from ..io import atomic_write
from .projection import TangentPlane
from .region import Region, parse_region

__all__ = ["MAX_CELLS", "MIN_PRIOR_EPSILON", "CellGrid", "Unknown", "assign_cells", "private_prior", "write_prior"]

#: Candidate cells (the region's bounding square) a grid may enumerate: 4e7 centres and corners ~ 2.5 GB.
MAX_CELLS = 20_000_000
#: Smallest epsilon of the prior: the noise (scale 1/epsilon) must fit a 64-bit count
#: (Pr[|Z| >= 2**62] = e^(-epsilon 2**62) < e^(-4e9) at 1e-9); below it the prior is pure noise anyway.
MIN_PRIOR_EPSILON = 1e-9
_EDGE_SAMPLES = 256  # points per side of the bounding box projected to find the lattice range

Unknown = Literal["refuse", "drop", "nearest"]


@dataclass(frozen=True, eq=False)
class CellGrid:
    """The cells of side ``cell_km`` over ``region`` (module docstring: the tiling).

    Attributes
    ----------
    region, cell_km, plane
        The region, the side in km and the projection (centre = bounding-box middle).
    ij : (n, 2) int64 array
        Lattice indices of the cells, sorted by j then i (south to north, west to east).
    labels : tuple of str
        ``x{i}y{j}``.
    centres : (n, 2) float array
        (lat, lon) of the cell centres.
    """

    region: Region
    cell_km: float
    plane: TangentPlane
    ij: NDArray[np.int64]
    labels: tuple[str, ...]
    centres: NDArray[np.float64]
    _lookup: NDArray[np.int64] = field(repr=False)
    _origin: tuple[int, int] = field(repr=False)

    @classmethod
    def over(cls, region: Region | str | PathLike[str], cell_km: float) -> CellGrid:
        """The grid of ``cell_km`` cells over ``region`` (a :class:`Region` or what
        :func:`~metricdp.location.region.parse_region` reads)."""
        region = parse_region(region)
        h = float(cell_km)
        if not (math.isfinite(h) and h > 0):
            raise ValidationError(f"the cell side must be a positive length, got {cell_km!r}")
        lat0, lon0, lat1, lon1 = region.bounds
        plane = TangentPlane((lat0 + lat1) / 2, (lon0 + lon1) / 2)
        t = np.linspace(0.0, 1.0, _EDGE_SAMPLES)
        edge = np.concatenate([
            np.column_stack([np.full_like(t, lat0), lon0 + t * (lon1 - lon0)]),
            np.column_stack([np.full_like(t, lat1), lon0 + t * (lon1 - lon0)]),
            np.column_stack([lat0 + t * (lat1 - lat0), np.full_like(t, lon0)]),
            np.column_stack([lat0 + t * (lat1 - lat0), np.full_like(t, lon1)]),
        ])
        xy = plane.forward(edge)
        lo = np.floor(xy.min(axis=0) / h).astype(np.int64) - 1  # one cell of slack for the curved edges
        hi = np.floor(xy.max(axis=0) / h).astype(np.int64) + 1
        nx, ny = int(hi[0] - lo[0] + 1), int(hi[1] - lo[1] + 1)
        if float(nx) * ny > MAX_CELLS:
            raise ValidationError(
                f"cells of {h * 1000:g} m over {region.name} need {float(nx) * ny:,.0f} candidate cells "
                f"(more than {MAX_CELLS:,}); use larger cells or a smaller region"
            )
        check_allocation(float(nx) * ny * 5 * 2 * 8 * 3, f"the {nx} x {ny} candidate cells of the grid")
        jj, ii = np.divmod(np.arange(nx * ny, dtype=np.int64), nx)
        ii, jj = ii + lo[0], jj + lo[1]
        # centre and the 4 corners of every candidate, in the plane, then on the sphere
        offsets = np.array([[0.5, 0.5], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        corners = (np.stack([ii, jj], axis=1)[:, None, :] + offsets[None]) * h
        latlon = plane.inverse(corners.reshape(-1, 2))
        keep = region.contains(latlon).reshape(-1, 5).any(axis=1)
        if not keep.any():
            raise ValidationError(f"no cell of {h * 1000:g} m lies in {region.name}")
        ij = np.stack([ii[keep], jj[keep]], axis=1)
        centres = latlon.reshape(-1, 5, 2)[keep, 0, :]
        lookup = np.full(nx * ny, -1, dtype=np.int64)
        lookup[np.flatnonzero(keep)] = np.arange(int(keep.sum()))
        labels = tuple(f"x{i}y{j}" for i, j in ij.tolist())
        return cls(region, h, plane, ij, labels, centres, lookup.reshape(ny, nx), (int(lo[0]), int(lo[1])))

    @property
    def n(self) -> int:
        """Number of cells."""
        return len(self.labels)

    def locate(self, latlon: ArrayLike) -> NDArray[np.int64]:
        """Cell index of each (lat, lon) row; -1 outside the grid. Rows must be valid (lat, lon)."""
        xy = self.plane.forward(np.asarray(latlon, dtype=np.float64).reshape(-1, 2))
        with np.errstate(invalid="ignore", over="ignore"):
            cell = np.floor(xy / self.cell_km)
        ny, nx = self._lookup.shape
        i = cell[:, 0] - self._origin[0]
        j = cell[:, 1] - self._origin[1]
        inside = (i >= 0) & (i < nx) & (j >= 0) & (j < ny)
        out = np.full(len(xy), -1, dtype=np.int64)
        out[inside] = self._lookup[j[inside].astype(np.int64), i[inside].astype(np.int64)]
        return out

    def nearest(self, latlon: ArrayLike) -> NDArray[np.int64]:
        """Index of the cell whose centre is nearest each row in the plane."""
        from scipy.spatial import cKDTree

        xy = self.plane.forward(np.asarray(latlon, dtype=np.float64).reshape(-1, 2))
        tree = cKDTree((self.ij + 0.5) * self.cell_km)
        return np.asarray(tree.query(xy)[1], dtype=np.int64)

    def write_points(self, path: str | PathLike[str], inputs: Sequence[str | PathLike[str]] = ()) -> None:
        """The cells as a POINTS file ``label,lat,lon`` (CSV, atomically), centres to 1e-9 degree."""
        pairs = zip(self.labels, self.centres.tolist(), strict=True)
        lines = [f"{lab},{lat:.9f},{lon:.9f}\n" for lab, (lat, lon) in pairs]
        with atomic_write(path, "wb", inputs=inputs) as fh:
            fh.write(("label,lat,lon\n" + "".join(lines)).encode("ascii"))

    def describe(self) -> dict[str, object]:
        """The tiling's definition, for a JSON report."""
        return {
            "cells": self.n, "cell_m": self.cell_km * 1000, "region": self.region.name,
            "projection": "azimuthal equidistant", "centre": [self.plane.lat0, self.plane.lon0],
            "labels": "x{i}y{j}: the square [i h, (i+1) h) x [j h, (j+1) h) in km east, north of the centre",
        }


def assign_cells(grid: CellGrid, latlon: ArrayLike, unknown: Unknown) -> NDArray[np.int64]:
    """Cell index per row under the ``unknown`` policy: -1 marks a row to drop (``"drop"``);
    with ``"refuse"`` the caller refuses on any -1; with ``"nearest"`` none is -1."""
    idx = grid.locate(latlon)
    if unknown == "nearest":
        out = np.flatnonzero(idx < 0)
        if len(out):
            idx[out] = grid.nearest(np.asarray(latlon, dtype=np.float64).reshape(-1, 2)[out])
    return idx


def private_prior(
    counts: ArrayLike, epsilon: float | Fraction | str, rng: object = None
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    r"""An :math:`\varepsilon`-DP histogram prior from per-cell row counts (module docstring).

    Returns ``(prior, noisy_counts)``: the noisy counts clamped at 0 (integers) and
    their normalisation (uniform when all are 0). ``epsilon`` is read as an exact decimal
    (a float is taken at its shortest repr, ``0.1`` is 1/10).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     p, noisy = private_prior([5, 0, 3], 50.0, rng=0)   # huge epsilon: noise is 0 w.h.p.
    >>> noisy.tolist(), [round(float(x), 3) for x in p]
    ([5, 0, 3], [0.625, 0.0, 0.375])
    """
    from ..mechanisms.lattice_laplace import BitStream, discrete_laplace

    c = np.asarray(counts)
    if c.ndim != 1 or len(c) == 0 or not np.issubdtype(c.dtype, np.integer) or (c < 0).any():
        raise ValidationError("counts must be a non-empty vector of non-negative integers")
    try:
        eps = Fraction(epsilon if isinstance(epsilon, (str, Fraction)) else repr(float(epsilon)))
    except (ValueError, ZeroDivisionError):
        raise ValidationError(f"the prior's epsilon must be a positive number, got {epsilon!r}") from None
    if not (Fraction(MIN_PRIOR_EPSILON) <= eps <= 1000):
        raise ValidationError(f"the prior's epsilon must be in [{MIN_PRIOR_EPSILON:g}, 1000], got {epsilon!r}")
    warn_unless_secure(rng, stacklevel=2)
    bits = BitStream(check_rng(rng))
    noise = np.array([discrete_laplace(bits, eps) for _ in range(len(c))], dtype=np.int64)
    noisy = np.maximum(c.astype(np.int64) + noise, 0)
    total = int(noisy.sum())
    prior = np.full(len(c), 1.0 / len(c)) if total == 0 else noisy / total
    return prior, noisy


def write_prior(
    path: str | PathLike[str], labels: Sequence[str], prior: ArrayLike, inputs: Sequence[str | PathLike[str]] = ()
) -> None:
    """``label,probability`` CSV (what ``--prior`` reads), atomically; 17 significant digits."""
    p = np.asarray(prior, dtype=np.float64)
    lines = [f"{lab},{v:.17g}\n" for lab, v in zip(labels, p.tolist(), strict=True)]
    with atomic_write(path, "wb", inputs=inputs) as fh:
        fh.write(("label,probability\n" + "".join(lines)).encode("utf-8"))
