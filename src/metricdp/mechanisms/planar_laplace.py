r"""Planar Laplace mechanism for geo-indistinguishability (Andres, Bordenabe,
Chatzikokolakis, Palamidessi, "Geo-indistinguishability", CCS 2013).

The planar Laplace centred at :math:`x \in \mathbb{R}^2` has density

.. math:: D_\varepsilon(x)(z) = \frac{\varepsilon^2}{2\pi}\, e^{-\varepsilon \lVert z - x \rVert}

(Andres et al., Section 4), and is :math:`\varepsilon`-geo-indistinguishable (eps-mDP for
the Euclidean distance) by the triangle inequality. In polar coordinates around x the
angle is uniform and the radius has the CDF
:math:`C_\varepsilon(r) = 1 - (1 + \varepsilon r) e^{-\varepsilon r}` (Andres et al.,
Section 4, who invert it with the -1 branch of the Lambert W function): the Gamma(2, 1/eps)
law, which the samplers draw as the sum of two exponentials of rate eps.

What this module provides:

* :func:`sample_planar_laplace` -- continuous releases on a plane (metres or any unit);
* :func:`sample_planar_laplace_latlon` -- releases on (lat, lon) through the azimuthal
  equidistant projection centred at each input, with the projection's area distortion
  removed by rejection, so the density on the sphere is exactly proportional to
  :math:`e^{-\varepsilon d_{\mathrm{gc}}}` (great-circle distance, the ``haversine``
  metric of :mod:`metricdp.spaces`);
* :func:`truncated_planar_laplace_sample` -- releases remapped into a region (its nearest
  point), as in Andres et al., Section 4 (truncation);
* :func:`planar_laplace` -- the discretised mechanism on a grid space as an exact,
  audited :class:`~metricdp.mechanisms.base.Mechanism` (proof in
  ``docs/proofs/planar_laplace.md``).

Floating point (``docs/proofs/exact_sampling.md``, section 4): the continuous samplers
transform 53-bit float uniforms through ``log``/``cos``/``sin`` and add the noise to
the input in floating point, so their releases are **not** eps-geo-indistinguishable as
floats (Mironov, CCS 2012): the radius is capped at about 74.9 / eps (a release just inside
the cap around one input can be impossible around another: an infinite privacy loss,
also after truncation to a finite set of points), and the reachable floats depend on the
input's low-order bits. Their epsilon is that of the idealised real-valued mechanism.
The private release on coordinates is the discretised mechanism :func:`planar_laplace`
on a grid space: its matrix is integrated and audited exactly and
:meth:`~metricdp.mechanisms.base.Mechanism.sample` draws from it with the exact finite
sampler (:mod:`metricdp.sampling`), so the released grid point follows the audited
matrix exactly; :func:`metricdp.mechanisms.lattice_laplace.sample_lattice_laplace`
releases lattice points exactly without a matrix.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import csr_matrix
from scipy.spatial import cKDTree

from .._progress import Progress, report
from .._random import check_rng, uniform_open
from .._validation import check_epsilon
from ..audit_structured import DENSE_MAX_N, chain_cells, lattice_chain_audit, lattice_steps
from ..errors import MetricDPError, PrivacyViolationError, RepairError, ValidationError
from ..lp.repair import ROUNDING_RESERVE, repair
from ..lp.retry import PLANAR_LAPLACE
from ..spaces import EARTH_RADIUS_KM, MetricSpace, check_space
from ._planar_integration import _TWO_PI, _axis_atoms, _axis_intervals, _interval_masses
from .base import Mechanism, certify
from .dense_plan import check_dense_plan, plan_dense
from .registry import declared

__all__ = [
    "box_rows",
    "lattice_cells",
    "lattice_planar_laplace",
    "planar_laplace",
    "planar_laplace_radius_cdf",
    "sample_planar_laplace",
    "sample_planar_laplace_latlon",
    "structured_audit_applies",
    "truncated_planar_laplace_sample",
]

_MAX_ETA = PLANAR_LAPLACE.max_eta  # largest relative privacy margin spent on numerical error (1e-3)
#: Max-norm of the lattice steps the lattice-chain audit checks: stretch 1/cos(atan(1/6)/2), about 1.0034.
CHAIN_ORDER = 6
_TABLE_ELEMENTS = 1 << 22  # elements of each block of the (inputs, box cells) table


# ----------------------------------------------------------------- continuous sampling
def planar_laplace_radius_cdf(r: ArrayLike, epsilon: float) -> NDArray[np.float64]:
    r""":math:`C_\varepsilon(r) = 1 - (1 + \varepsilon r) e^{-\varepsilon r}` (Andres et al., Section 4)."""
    x = float(epsilon) * np.asarray(r, dtype=np.float64)
    return -np.expm1(-x) - x * np.exp(-x)


def _radii(rng: object, size: int, epsilon: float) -> NDArray[np.float64]:
    r"""Radii of law :math:`C_\varepsilon`: Gamma(2, 1/eps), the sum of two independent
    exponentials of rate eps (its density :math:`\varepsilon^2 r e^{-\varepsilon r}` is
    the derivative of :math:`C_\varepsilon`): two logarithms per radius, cheaper than the
    inverse CDF through Lambert W. Each uniform is >= 2^-54,
    so each exponential is <= 54 ln 2 / eps and the radius <= 74.9 / eps."""
    v = uniform_open(rng, (2, size))  # type: ignore[arg-type]
    return -(np.log(v[0]) + np.log(v[1])) / epsilon


def _noise(rng: object, size: int, epsilon: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(angle, radius) pairs: angle uniform in [0, 2 pi), radius by the inverse CDF."""
    theta = _TWO_PI * np.asarray(rng.random(size), dtype=np.float64)  # type: ignore[attr-defined]
    return theta, _radii(rng, size, epsilon)


def _as_points(xy: ArrayLike, name: str, dim: int = 2) -> tuple[NDArray[np.float64], bool]:
    a = np.asarray(xy, dtype=np.float64)
    single = a.ndim == 1
    a = np.atleast_2d(a)
    if a.ndim != 2 or a.shape[1] != dim:
        raise ValidationError(f"{name} must have shape ({dim},) or (k, {dim}), got {np.shape(xy)}")
    if not np.all(np.isfinite(a)):
        raise ValidationError(f"{name} row {int(np.argwhere(~np.isfinite(a))[0][0])} is not finite")
    return a, single


def sample_planar_laplace(xy: ArrayLike, epsilon: float, rng: object = None) -> NDArray[np.float64]:
    r"""One planar Laplace release per input point (polar method, Andres et al. Section 4).

    Parameters
    ----------
    xy : array of shape (2,) or (k, 2)
        Inputs on a plane, in any unit (metres, km ...).
    epsilon : float
        Level per unit of distance: the result is eps-geo-indistinguishable.
    rng : None, int or Generator
        ``None`` (default) draws from the OS's secure source.

    Returns
    -------
    ndarray of the shape of ``xy``
        ``xy + r (cos theta, sin theta)`` with theta uniform and
        :math:`r = C_\varepsilon^{-1}(p)`.

    Examples
    --------
    >>> z = sample_planar_laplace([[0.0, 0.0]] * 3, 0.01, rng=7)
    >>> z.shape
    (3, 2)
    """
    epsilon = check_epsilon(epsilon)
    pts, single = _as_points(xy, "xy")
    source = check_rng(rng)
    theta, r = _noise(source, len(pts), epsilon)
    out = pts + r[:, None] * np.column_stack([np.cos(theta), np.sin(theta)])
    return out[0] if single else out


#: Smallest eps * (half the Earth's circumference) accepted: the rejection then succeeds with
#: probability above 1 - (1 + 0.2) e^-0.2, about 1.8 %, per draw.
_MIN_EPS_HALF_CIRCUMFERENCE = 0.2


def sample_planar_laplace_latlon(
    latlon: ArrayLike, epsilon_per_km: float, rng: object = None
) -> NDArray[np.float64]:
    r"""Planar Laplace on (latitude, longitude) in degrees, eps per km of great-circle distance.

    Projection: the azimuthal equidistant projection centred at each input. A planar
    release at distance :math:`\rho` km and bearing :math:`\theta` maps to the point at
    great-circle distance exactly :math:`\rho` and initial bearing :math:`\theta` on the
    sphere of radius ``EARTH_RADIUS_KM`` (the sphere of the ``haversine`` metric), so the
    distance to the input is kept up to float rounding (about 1e-9 km).

    The projection stretches areas by :math:`\rho / (R \sin(\rho/R))`; each radius is
    therefore accepted with probability :math:`\sin(\rho/R)/(\rho/R) \le 1` (rejection,
    redrawing the rejected ones, whose number does not depend on the input). The
    accepted radius has density :math:`\propto e^{-\varepsilon\rho} \sin(\rho/R)`, which is
    exactly the density :math:`\propto e^{-\varepsilon d_{\mathrm{gc}}(x, y)}` with respect
    to area on the sphere; its normaliser does not depend on x (rotation invariance),
    so the mechanism is eps-geo-indistinguishable for the great-circle distance by the
    triangle inequality, with no projection error. At local scales
    (:math:`\rho \ll R`) the acceptance rate is :math:`1 - O(\rho^2/6R^2)`.

    Parameters
    ----------
    latlon : array of shape (2,) or (k, 2)
        Inputs (lat, lon) in degrees.
    epsilon_per_km : float
    rng : None, int or Generator

    Returns
    -------
    ndarray of the shape of ``latlon``
        Releases (lat in [-90, 90], lon in [-180, 180)).
    """
    epsilon = check_epsilon(epsilon_per_km, name="epsilon_per_km")
    if epsilon * math.pi * EARTH_RADIUS_KM < _MIN_EPS_HALF_CIRCUMFERENCE:
        # each draw lands within half the circumference with probability about (eps pi R)^2 / 2:
        # below this the rejection loop would run for minutes per point (and the release is noise
        # anywhere on the globe anyway)
        raise ValidationError(
            f"epsilon_per_km = {epsilon!r} is too small for the Earth: the noise's mean radius 2/epsilon = "
            f"{2 / epsilon:.3g} km dwarfs half the circumference ({math.pi * EARTH_RADIUS_KM:.0f} km); "
            f"use epsilon_per_km >= {_MIN_EPS_HALF_CIRCUMFERENCE / (math.pi * EARTH_RADIUS_KM):.2g}"
        )
    pts, single = _as_points(latlon, "latlon")
    if (np.abs(pts[:, 0]) > 90).any() or (np.abs(pts[:, 1]) > 180).any():
        i = int(np.flatnonzero((np.abs(pts[:, 0]) > 90) | (np.abs(pts[:, 1]) > 180))[0])
        raise ValidationError(f"latlon row {i} is not a (lat, lon) in degrees: {pts[i].tolist()}")
    source = check_rng(rng)
    k = len(pts)
    theta = _TWO_PI * np.asarray(source.random(k), dtype=np.float64)
    rho = np.empty(k)
    todo = np.arange(k)
    while todo.size:  # rounds of rejection, each vectorised over the undecided inputs
        cand = _radii(source, todo.size, epsilon)
        u = np.asarray(source.random(todo.size), dtype=np.float64)
        x = cand / EARTH_RADIUS_KM
        accept = (x < math.pi) & (u < np.sinc(x / math.pi))  # sinc(t) = sin(pi t)/(pi t)
        rho[todo[accept]] = cand[accept]
        todo = todo[~accept]
    lat1, lon1 = np.radians(pts[:, 0]), np.radians(pts[:, 1])
    delta = rho / EARTH_RADIUS_KM
    sin_lat2 = np.sin(lat1) * np.cos(delta) + np.cos(lat1) * np.sin(delta) * np.cos(theta)
    lat2 = np.arcsin(np.clip(sin_lat2, -1.0, 1.0))
    east = np.sin(theta) * np.sin(delta) * np.cos(lat1)
    lon2 = lon1 + np.arctan2(east, np.cos(delta) - np.sin(lat1) * sin_lat2)
    lon2 = np.mod(lon2 + math.pi, _TWO_PI) - math.pi
    out = np.column_stack([np.degrees(lat2), np.degrees(lon2)])
    return out[0] if single else out


def truncated_planar_laplace_sample(
    xy: ArrayLike, epsilon: float, region: ArrayLike | MetricSpace, rng: object = None
) -> NDArray[np.float64]:
    """Planar Laplace releases remapped to the nearest point of a region (Andres et al. Section 4, truncation).

    Remapping is a deterministic function of the release alone, so the result is still
    eps-geo-indistinguishable (post-processing).

    Parameters
    ----------
    xy : array of shape (2,) or (k, 2)
    epsilon : float
    region : 4 numbers, array of shape (m, 2), or MetricSpace
        ``(xmin, ymin, xmax, ymax)``: a rectangle, whose nearest point is the clipped
        release; or a finite set of points (a Euclidean space built from 2-d points),
        whose nearest point is found with a k-d tree.
    rng : None, int or Generator

    Returns
    -------
    ndarray of the shape of ``xy``
        Coordinates inside the region.
    """
    if isinstance(region, MetricSpace):
        if region.points is None or region.metric != "euclidean" or region.points.shape[1] != 2:
            raise ValidationError(f"region must be a Euclidean space of 2-d points, got {region!r}")
        targets = np.asarray(region.points)
        box = None
    else:
        r = np.asarray(region, dtype=np.float64)
        if r.shape == (4,):
            box = r
            if not (np.all(np.isfinite(r)) and r[0] <= r[2] and r[1] <= r[3]):
                raise ValidationError(f"region box must be finite (xmin, ymin, xmax, ymax), got {r.tolist()}")
        elif r.ndim == 2 and r.shape[1] == 2 and len(r) >= 1 and np.all(np.isfinite(r)):
            box, targets = None, r
        else:
            raise ValidationError(
                f"region must be (xmin, ymin, xmax, ymax) or an (m, 2) array, got shape {r.shape}"
            )
    z = np.atleast_2d(sample_planar_laplace(xy, epsilon, rng))
    if box is not None:
        out = np.clip(z, box[:2], box[2:])
    else:
        out = targets[cKDTree(targets).query(z)[1]]
    return out[0] if np.asarray(xy).ndim == 1 else out


# ----------------------------------------------------------------- discretisation
def lattice_cells(space: MetricSpace) -> tuple[NDArray[np.intp], NDArray[np.intp], int, int]:
    """Integer lattice coordinates (row, col) of a grid space's points and the bounding box size (rows, cols)."""
    pts = np.asarray(space.points)
    rel = np.rint((pts - pts.min(axis=0)) / space.cell).astype(np.intp)
    return rel[:, 0], rel[:, 1], int(rel[:, 0].max()) + 1, int(rel[:, 1].max()) + 1


def _discretised_matrix(
    space: MetricSpace, epsilon: float, accuracy: float, box: bool = False
) -> tuple[NDArray[np.float64], dict[str, object], tuple[NDArray[np.float64], NDArray[np.intp]] | None]:
    """P[u, v] = Pr[snap(x_u + Z) = v] for Z planar Laplace at ``epsilon``, before repair.

    With ``box`` also the same row seen from every cell of the bounding rectangle that a
    chain path can visit (:func:`metricdp.audit_structured.chain_cells`: all of them on a
    full rectangle), with those cells' indices ``r * n_cols + c``: what the lattice-chain
    audit reads (:func:`metricdp.audit_structured.lattice_chain_audit`); else None.
    """
    assert space.cell is not None  # checked by the builder: a grid space
    h = float(space.cell)
    rows, cols, n_rows, n_cols = lattice_cells(space)
    s = epsilon * h
    # Beyond `reach` cells the survival (1 + s t) e^{-s t} is below e^{-60} / s^2 of the
    # smallest cell mass (> s^2 e^{-s (diagonal + 1)} / 2 pi): negligible at any accuracy.
    reach = math.hypot(n_rows, n_cols) + 2.0 + (60.0 + 2.0 * max(0.0, math.log(1.0 / s))) / s
    r_atoms = _axis_atoms(n_rows, s, reach)
    c_atoms = _axis_atoms(n_cols, s, reach)
    r_member, ridx = _axis_intervals(n_rows, *r_atoms)
    c_member, cidx = _axis_intervals(n_cols, *c_atoms)
    # x = column, y = row: masses[row interval, column interval]
    masses, err, nodes = _interval_masses(c_atoms, r_atoms, c_member, r_member, s, accuracy)
    # table[u, box cell (r, c)] by translation invariance: one integral per atom
    box_r, box_c = np.divmod(np.arange(n_rows * n_cols), n_cols)
    cells = np.flatnonzero(chain_cells(rows, cols, (n_rows, n_cols), CHAIN_ORDER)) if box else rows * n_cols + cols
    seen_r, seen_c = box_r[cells], box_c[cells]
    # Box cells that are not points of the space (a lattice subset) go to the point
    # nearest to their centre: a fixed function of the release, i.e. post-processing.
    target = cKDTree(np.column_stack([rows, cols])).query(np.column_stack([box_r, box_c]))[1]
    snap = csr_matrix((np.ones(n_rows * n_cols), (np.arange(n_rows * n_cols), target)),
                      shape=(n_rows * n_cols, space.n))
    if not box:  # the inputs' rows in one product (the order of its sums fixes the matrix's bits)
        table = masses[ridx[rows][:, :, None], cidx[cols][:, None, :]].reshape(space.n, n_rows * n_cols)
        seen = np.asarray((snap.T @ table.T).T)
        del table
    else:  # every box cell's row, by blocks of the (box cells, box cells) table
        seen = np.empty((len(seen_r), space.n))
        block = max(1, _TABLE_ELEMENTS // (n_rows * n_cols))
        for s in range(0, len(seen_r), block):
            part = slice(s, s + block)
            table = masses[ridx[seen_r[part]][:, :, None], cidx[seen_c[part]][:, None, :]].reshape(-1, n_rows * n_cols)
            if space.n == n_rows * n_cols:  # a full rectangle: the snapping is a permutation of the columns
                seen[part, target] = table
            else:
                seen[part] = np.asarray((snap.T @ table.T).T)
    position = np.full(n_rows * n_cols, -1, dtype=np.intp)
    position[cells] = np.arange(len(cells))
    chain = (seen, cells) if box else None
    matrix = seen[position[rows * n_cols + cols]] if box else seen
    info = {
        "integration": {
            "method": "polar Gauss-Legendre over 8 angular pieces per atom rectangle",
            "atoms": [len(r_atoms[0]), len(c_atoms[0])],
            "nodes_per_piece": nodes,
            "relative_accuracy": err,
            "row_sum_error": float(np.max(np.abs(matrix.sum(axis=1) - 1.0))),
            "box": [n_rows, n_cols],
        }
    }
    return matrix.astype(np.float64), dict(info), chain


def box_rows(
    space: MetricSpace, epsilon: float, accuracy: float = 1e-12
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The discretised planar Laplace at ``epsilon`` seen from the cells of grid ``space``'s bounding box
    that a chain path can visit, and those cells (``r * n_cols + c``, :func:`lattice_cells`).

    One column per point, not normalised: the box rows the lattice-chain proof reads
    (:func:`metricdp.audit_structured.lattice_chain_audit`), as the builder integrates them.
    """
    box = _discretised_matrix(space, epsilon, accuracy, True)[2]
    assert box is not None
    return box


@declared("planar-laplace")
def planar_laplace(
    space: MetricSpace, epsilon: float, *, accuracy: float = 1e-12, progress: Progress | None = None
) -> Mechanism:
    r"""The discretised planar Laplace on a grid space, as an exact eps-mDP matrix.

    The continuous release :math:`z = x_u + Z`, :math:`Z \sim D_\varepsilon(0)`, is snapped
    to the nearest grid point (Andres et al., Section 4, discretisation, remainder outside
    the grid assigned to the nearest cell). On a full rectangular grid the set of
    releases snapped to point v is its cell, extended to infinity along the grid's
    border; so

    .. math:: M[u, v] = \int_{V_v} D_\varepsilon(x_u)(z)\,dz ,

    integrated numerically to ``accuracy`` (relative, per cell) through translation
    invariance: the plane seen from an input is cut into bounded atoms (unit cells at
    every offset the grid allows, doubling atoms beyond it), each atom is integrated
    once, and every cell region is a sum of atoms (no differences, so relative accuracy
    is kept), not one integral per pair. On a lattice subset (cells missing) a release in a missing box cell goes
    to the point nearest to that cell's centre. Either way the snapping is a fixed
    function of z, so the exact matrix is eps-mDP (post-processing).

    Numerical integration is not exact, so the matrix is integrated at
    :math:`\varepsilon_1 = \varepsilon(1-\eta)`, with :math:`\eta` set from the reached
    accuracy (:math:`\eta\,\varepsilon\, d_{\min} \approx 16 \times` accuracy, at least
    1e-8): a matrix within relative error a of an exactly :math:`\varepsilon_1`-mDP one is
    :math:`(\varepsilon_1 + 4a/d_{\min})`-mDP after row normalisation, below
    :math:`\varepsilon`. It is normalised and handed to
    :func:`~metricdp.mechanisms.base.certify`, whose exact audit decides; a result is
    returned only if the audited level is <= eps with no slack. Otherwise eta is raised
    tenfold (up to 1e-3) and the matrix is re-integrated and passed through
    :func:`metricdp.lp.repair.repair` (log-Lipschitz envelope at
    :math:`\varepsilon_1`, normalisation, spread check), which makes it exactly eps-mDP
    whatever the integration error, then audited again. Privacy of the returned matrix
    therefore rests on the audit, never on the accuracy estimate. Cost in loss: O(eta)
    relative. Proof and details: ``docs/proofs/planar_laplace.md``.

    Parameters
    ----------
    space : MetricSpace
        A grid: Euclidean 2-d points on one square lattice (``space.cell`` not None),
        e.g. :meth:`MetricSpace.grid`. For the (lat, lon) centres of equal square cells
        (:class:`metricdp.location.grid.CellGrid`) use
        :func:`metricdp.location.cells.planar_laplace_cells` (``build`` does): the same
        mechanism on their tangent-plane lattice, audited on the sphere.
    epsilon : float
        Level per unit of the space's distances (e.g. per metre).
    accuracy : float
        Target relative accuracy of every cell mass (1e-12 by default).

    Returns
    -------
    Mechanism
        ``name="planar-laplace"``, exact and audited; ``params`` has ``epsilon``,
        ``cell``, ``inner_epsilon`` and ``eta``; ``info["integration"]`` the nodes,
        the reached accuracy and the row-sum error before the repair.

    Raises
    ------
    ValidationError
        The space is not a grid, the masses underflow float64 (eps * diameter beyond
        about 700), or the integration cannot reach 1e-9.
    MetricDPError
        No eta up to 1e-3 gives a matrix that passes the audit (not observed).

    Examples
    --------
    >>> m = planar_laplace(MetricSpace.grid(3, 3, 150.0), 0.004)
    >>> m.name, m.exact, bool(abs(m.matrix.sum(axis=1) - 1).max() < 1e-12)
    ('planar-laplace', True, True)
    """
    space = check_space(space)
    pts = space.points
    if space.cell is None or pts is None or space.metric != "euclidean" or pts.shape[1] != 2:
        cells = " (lat, lon) cell centres: metricdp.location.cells.planar_laplace_cells" \
            if space.metric == "haversine" else ""
        raise ValidationError(
            f"planar-laplace needs a grid: Euclidean 2-d points on one square lattice; these {space.n} points "
            f"({space.metric}) are not one{';' + cells if cells else ''}"
        )
    epsilon = check_epsilon(epsilon)
    check_dense_plan(plan_dense("planar-laplace", space.n))
    return lattice_planar_laplace(space, epsilon, space, epsilon, accuracy=accuracy, progress=progress)


def structured_audit_applies(space: MetricSpace) -> bool:
    """Whether :func:`lattice_planar_laplace` audits ``space`` (a grid) with the lattice-chain proof.

    Above :data:`~metricdp.audit_structured.DENSE_MAX_N` points, when the cells of the
    bounding rectangle that a chain path can visit (:func:`~metricdp.audit_structured.chain_cells`:
    those within a few cells of the points' convex hull; every cell of a full rectangle) are at
    most twice as many as the points: the proof integrates and reads a row for each.
    """
    if space.n <= DENSE_MAX_N or space.cell is None or space.points is None:
        return False
    rows, cols, n_rows, n_cols = lattice_cells(space)
    return int(chain_cells(rows, cols, (n_rows, n_cols), CHAIN_ORDER).sum()) <= 2 * space.n


def lattice_planar_laplace(
    space: MetricSpace, epsilon: float, audit_space: MetricSpace, guarantee: float, *,
    accuracy: float = 1e-12, progress: Progress | None = None,
    extra: tuple[dict[str, Any], dict[str, Any]] = ({}, {}),
) -> Mechanism:
    r"""The discretised planar Laplace on grid ``space`` at ``epsilon``, certified ``guarantee``-mDP on ``audit_space``.

    ``audit_space`` has the points of ``space`` in the same order under the metric the
    guarantee is for (``space`` itself, or the cells' great-circle distances for
    :func:`metricdp.location.cells.planar_laplace_cells`, whose ``epsilon`` is the guarantee
    over the lattice's distortion). Large grids (:func:`structured_audit_applies`) are
    integrated at ``epsilon (1 - eta) / stretch`` and certified by the lattice-chain proof
    (:func:`metricdp.audit_structured.lattice_chain_audit`: O(n^2) work, an exact upper
    bound of the level; the stretch, below 1.004, is what the proof costs in epsilon);
    the others by the independent dense audit. ``info["audit"]`` says which. ``extra``
    (params, info) is merged into the result's.
    """
    accuracy = float(accuracy)  # declared in (0, 1e-3) (registry)
    d = np.asarray(space.distances)
    reserve = ROUNDING_RESERVE * (1.0 + epsilon * float(d.max()))
    d_min = float(space.d_min)
    eta = max(1e-8, (16.0 * accuracy + 2.0 * reserve) / (epsilon * d_min))
    if eta > _MAX_ETA:
        raise ValidationError(
            f"planar-laplace: epsilon * d_min = {epsilon * d_min:.3g} is too small for the integration "
            f"accuracy {accuracy:g}: the margin it needs ({eta:.3g} of epsilon) exceeds {_MAX_ETA:g}; "
            "use a larger epsilon or coarser cells"
        )
    structured = structured_audit_applies(space)
    stretch = lattice_steps(CHAIN_ORDER)[1] if structured else 1.0
    report(progress, 0, 3, f"integrating the planar Laplace on {space.n:,} cells")
    raw, info, box = _discretised_matrix(space, epsilon * (1.0 - eta) / stretch, accuracy, structured)
    reached = float(info["integration"]["relative_accuracy"])  # type: ignore[index]
    if reached > accuracy:  # the target was not met: widen the margin to what was reached
        eta = min(_MAX_ETA, max(eta, (16.0 * reached + 2.0 * reserve) / (epsilon * d_min)))
        raw, info, box = _discretised_matrix(space, epsilon * (1.0 - eta) / stretch, accuracy, structured)
    first_eta, cell = eta, float(space.cell)  # type: ignore[arg-type]

    def attempt(eta: float) -> Mechanism:  # the schedule is the one retry policy's (lp/retry.py)
        nonlocal raw, info
        repaired = eta != first_eta
        if repaired:
            raw, info, _ = _discretised_matrix(space, epsilon * (1.0 - eta) / stretch, accuracy)
        inner = epsilon * (1.0 - eta) / stretch
        params = {"epsilon": guarantee, "cell": cell, "inner_epsilon": inner, "eta": eta, **extra[0]}
        # Unrepaired: within the reached accuracy (relative) of an exactly eps1-mDP matrix;
        # the audit in certify decides, and no slack is accepted below.
        matrix = repair(raw, d, epsilon, eta=eta) if repaired else raw / raw.sum(axis=1, keepdims=True)
        info["repair"] = "envelope" if repaired else "none"
        info.update(extra[1])
        proof = None
        if structured and not repaired:
            report(progress, 2, 3, "auditing: lattice-chain proof")
            rows, cols, n_rows, n_cols = lattice_cells(space)
            assert box is not None
            proof = lattice_chain_audit(matrix, audit_space.distances, box[0], (n_rows, n_cols), rows, cols, cell,
                                        order=CHAIN_ORDER, box_cells=box[1])
            if not proof.epsilon <= guarantee:
                raise RepairError(f"lattice-chain bound {proof.epsilon!r} exceeds {guarantee!r}", retryable=True)
        else:
            report(progress, 2, 3, "auditing: dense")
        try:
            mech = certify(matrix, audit_space, guarantee, "planar-laplace", params, info, proof=proof)
        except PrivacyViolationError as ex:  # the audit refused: a larger margin can help
            raise RepairError(str(ex), retryable=True) from None
        if mech.info["epsilon_audit"] > guarantee:
            raise RepairError(f"audited level {mech.info['epsilon_audit']!r} exceeds {guarantee!r}", retryable=True)
        return mech

    try:
        return PLANAR_LAPLACE.run(attempt, eta, what="planar-laplace")
    except RepairError as ex:  # the schedule ran out, or the repair cannot help (not retryable)
        raise MetricDPError(f"planar-laplace: could not make the matrix exactly {guarantee}-mDP: {ex}") from None
