r"""Lat/lon cell grids as planar lattices: the discretised planar Laplace on the cells of ``metricdp grid``.

A POINTS file of cell centres (``label,lat,lon``, the ``haversine`` metric) is a square
grid only in a plane. :func:`lattice_of` recovers that plane and lattice from the centres
alone, with no knowledge of how they were made:

1. project the centres with the azimuthal equidistant projection
   (:class:`~metricdp.location.projection.TangentPlane`) about the middle of their
   bounding box;
2. take the lattice coordinates (i, j) as the offsets from the first centre rounded in
   units of the median nearest-neighbour distance, fit the similarity (rotation and
   scale) (i, j) -> plane by least squares (it absorbs the small rotation between this
   plane and the tiling's), and take the cell side h from its scale;
3. refuse when a centre lies more than ``tolerance`` h off the fitted lattice (the cells
   are not one grid of equal squares, or they span a region where the projection bends
   them noticeably).

For the cells of :class:`~metricdp.location.grid.CellGrid` the centres project back to an
exact lattice about the grid's own centre; about the middle of the centres' bounding box
(a point within a few cells of it) they are off by the change of projection only (well under
a metre over a city).

The guarantee on the sphere
---------------------------
Let :math:`d_L` be the lattice distance and :math:`d` the great-circle distance between
centres, and :math:`K = \max_{u \ne v} d_L(u, v) / d(u, v)` (computed over every pair, not
bounded). :func:`planar_laplace_cells` builds the planar Laplace of
:func:`~metricdp.mechanisms.planar_laplace.planar_laplace` on the lattice at
:math:`\varepsilon / K`: for all u, v, z,
:math:`M[u, z] \le e^{(\varepsilon/K) d_L(u, v)} M[v, z] \le e^{\varepsilon d(u, v)} M[v, z]`,
so the matrix is :math:`\varepsilon`-mDP for the great-circle distance. It is then
audited exactly against the haversine space itself (:func:`~metricdp.mechanisms.base.certify`)
and returned only if the audited level is at most epsilon: the bound above is the reason
it passes, the audit is what is relied on. :math:`K - 1` is the projection's distortion
(about :math:`r^2/6R^2`, :func:`~metricdp.location.projection.distortion_bound`) plus the
lattice fit's residual; the cost is a relative loss of epsilon of the same size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._progress import Progress
from .._resources import check_allocation
from .._validation import check_epsilon
from ..errors import MetricDPError, ValidationError
from ..mechanisms.base import Mechanism
from ..mechanisms.dense_plan import check_dense_plan, plan_dense
from ..mechanisms.planar_laplace import lattice_planar_laplace
from ..spaces import MetricSpace
from .projection import TangentPlane

__all__ = ["Lattice", "lattice_of", "planar_laplace_cells"]

#: Largest offset of a centre from its lattice point, in cells, for the centres to count as one grid.
TOLERANCE = 0.02


@dataclass(frozen=True)
class Lattice:
    """A haversine space of cell centres seen as a lattice: ``space`` (Euclidean, km, ``cell`` set),
    ``ratio`` K (module docstring), ``residual_km`` (largest offset from the lattice) and the plane."""

    space: MetricSpace
    ratio: float
    residual_km: float
    plane: TangentPlane


def lattice_of(space: MetricSpace, tolerance: float = TOLERANCE) -> Lattice:
    """The square lattice of a haversine space of cell centres (module docstring), or a ValidationError
    naming the centre farthest off the lattice."""
    from scipy.spatial import cKDTree

    pts = space.points
    if space.metric != "haversine" or pts is None:
        raise ValidationError(f"expected a haversine space of (lat, lon) cell centres, got {space!r}")
    if space.n < 2:
        raise ValidationError("a grid needs at least 2 cells")
    check_allocation(8 * 8.0 * space.n * space.n, f"planar-laplace on {space.n:,} cells (8 dense n x n arrays)")
    lat0, lon0 = float(pts[:, 0].min()), float(pts[:, 1].min())
    lat1, lon1 = float(pts[:, 0].max()), float(pts[:, 1].max())
    if lon1 - lon0 > 180:
        raise ValidationError("the cells span more than 180 degrees of longitude; not one local grid")
    plane = TangentPlane((lat0 + lat1) / 2, (lon0 + lon1) / 2)
    xy = plane.forward(pts)
    dist, _ = cKDTree(xy).query(xy, k=2)
    h = float(np.median(dist[:, 1]))
    if not h > 0:
        raise ValidationError("two cells have the same centre")
    ij = np.rint((xy - xy[0]) / h)
    # the lattice as the plane sees it: the similarity z = a w + b (w = i + j sqrt(-1), a complex: a
    # rotation and a scale, so squares stay squares) of least squares, and each centre's offset from it
    w, z = ij[:, 0] + 1j * ij[:, 1], xy[:, 0] + 1j * xy[:, 1]
    (a, b), *_ = np.linalg.lstsq(np.column_stack([w, np.ones_like(w)]), z, rcond=None)
    h = float(abs(a))
    if not h > 0:
        raise ValidationError("the cell centres do not span a lattice")
    off = np.abs(a * w + b - z) / h
    worst = int(np.argmax(off))
    if off[worst] > tolerance:
        raise ValidationError(
            f"the points are not the centres of one grid of equal square cells: {space.labels[worst]!r} is "
            f"{off[worst] * h * 1000:.3g} m off the lattice of {h * 1000:.6g} m cells "
            f"(more than {tolerance:g} of a cell)"
        )
    grid = MetricSpace.from_points(ij * h, space.labels, metric="euclidean")
    if grid.cell is None:
        raise ValidationError("the cell centres do not form one square lattice (two share a cell)")
    d_l = np.asarray(grid.distances)
    d = np.asarray(space.distances)
    ratio = 0.0
    block = max(1, (1 << 22) // space.n)
    for s in range(0, space.n, block):  # by blocks of rows: no n x n temporaries
        rows = np.arange(s, min(s + block, space.n))
        other = np.ones((len(rows), space.n), dtype=bool)
        other[np.arange(len(rows)), rows] = False
        if (d[rows][other] <= 0).any():
            raise ValidationError("two cells have the same centre")
        ratio = max(ratio, float((d_l[rows][other] / d[rows][other]).max()))
    return Lattice(grid, ratio, float(off[worst] * h), plane)


def planar_laplace_cells(
    space: MetricSpace, epsilon: float, *, accuracy: float = 1e-12, progress: Progress | None = None
) -> Mechanism:
    """The discretised planar Laplace on a haversine space of square cells, exactly epsilon-mDP for the
    great-circle distance (module docstring). Returns a :class:`~metricdp.mechanisms.base.Mechanism` on
    ``space`` (its labels, its metric); ``params`` adds ``cell`` (km), ``lattice_epsilon`` and ``ratio``.
    The matrix is certified once, against the great-circle distances, by the audit
    :func:`~metricdp.mechanisms.planar_laplace.lattice_planar_laplace` picks (``info["audit"]``)."""
    epsilon = check_epsilon(epsilon)
    check_dense_plan(plan_dense("planar-laplace", space.n))
    lat = lattice_of(space)
    inner = epsilon / lat.ratio
    params = {"lattice_epsilon": inner, "ratio": lat.ratio, "plane_centre": [lat.plane.lat0, lat.plane.lon0]}
    info = {"lattice": {"cell_km": lat.space.cell, "ratio": lat.ratio, "residual_km": lat.residual_km,
                        "projection": "azimuthal equidistant about the middle of the centres' bounding box"}}
    mech = lattice_planar_laplace(lat.space, inner, space, epsilon, accuracy=accuracy, progress=progress,
                                  extra=(params, info))
    if mech.info["epsilon_audit"] > epsilon:  # no slack: the bound says it cannot happen
        raise MetricDPError(f"planar-laplace on cells: audited level {mech.info['epsilon_audit']!r} exceeds "
                            f"{epsilon!r} on the great-circle distance")
    return mech
