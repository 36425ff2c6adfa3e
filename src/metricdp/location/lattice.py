r"""Exact planar Laplace for (lat, lon): a public lattice in a fixed tangent plane.

:class:`LatticePlane` fixes, *before any data is seen*, an origin c (a city centre, the
middle of a public region), a lattice step h (km) and an extent r (km): the lattice is
:math:`h\mathbb{Z}^2` in the azimuthal equidistant plane P centred at c
(:class:`~metricdp.location.projection.TangentPlane`). :func:`release_lattice` moves each
input x to its nearest lattice point :math:`i(x) = \mathrm{rint}(P(x)/h)` and releases
:math:`P^{-1}(h\,(i(x) + K))` with K drawn *exactly* from
:math:`\Pr[K = k] \propto e^{-\alpha\lVert k\rVert}`,
:math:`\alpha = \varepsilon_P h` (:class:`~metricdp.mechanisms.lattice_batch.LatticeSampler`).

Guarantee (``docs/proofs/lattice_points.md``, section 4). Let
:math:`\kappa \ge r/(R\sin(r/R))` be the rational bound :math:`1/(1 - (r/R)^2/6)` of the
projection's stretch within r of c and :math:`\varepsilon_P = \varepsilon/\kappa`. For all
inputs x, x' within r of c and every release z,

.. math:: \Pr[z \mid x] \le e^{\varepsilon\, d_{gc}(x, x') + \varepsilon (h\sqrt2 + 2\delta)}\,\Pr[z \mid x'],

with :math:`\delta = 10^{-6}` km bounding the float error of P at these scales: the
snapping costs the additive :math:`\varepsilon(h\sqrt 2 + 2\delta)` (0.0007 at 0.5/km and
h = 1 m). Mapping the lattice point back to degrees, rounding it, keeping it in a region
(nearest point) or snapping it to a finite set are functions of the release alone
(post-processing). An input farther than r from c is refused: the stretch bound, hence
the guarantee, holds only inside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import check_rng
from .._validation import check_epsilon
from ..errors import ValidationError
from ..mechanisms._kernel_loader import LAZY, lattice_kernels
from ..spaces import EARTH_RADIUS_KM
from .projection import TangentPlane, check_latlon
from .region import Region
from .snap import Snapper

__all__ = ["DELTA_KM", "LatticePlane", "release_lattice"]

_KERNELS: Any = LAZY  # the compiled projection, loaded at first use (None: numpy)

#: Bound on the float error of the projection and its inverse at |P(x)| <= 10,000 km (1 mm).
DELTA_KM = 1e-6
#: Inputs whose distance to the origin (computed in float) exceeds the extent by less than
#: this are still refused; the stretch bound is taken at extent + this margin.
_EXTENT_MARGIN_KM = 1e-3


def _stretch_bound(extent_km: float) -> Fraction:
    """kappa = 1 / (1 - x^2 / 6) >= x / sin(x), x = r / R (sin x >= x - x^3/6): rational, no libm."""
    x = (Fraction(extent_km) + Fraction(_EXTENT_MARGIN_KM)) / Fraction(EARTH_RADIUS_KM)
    return 1 / (1 - x * x / 6)


def _forward(plane: TangentPlane, pts: NDArray[np.float64]) -> NDArray[np.float64]:
    """plane.forward of checked points (the compiled kernel when numba is there: the same formulas)."""
    kernels = lattice_kernels(_KERNELS)
    if kernels is not None:
        x, y = kernels["forward"](np.ascontiguousarray(pts[:, 0]), np.ascontiguousarray(pts[:, 1]),
                                   float(plane.lat0), float(plane.lon0))
        return np.column_stack([x, y])
    return np.atleast_2d(plane.forward(pts))


@dataclass(frozen=True)
class LatticePlane:
    """A public lattice: ``origin`` (lat, lon) degrees, step ``cell_km``, inputs within ``extent_km``.

    Examples
    --------
    >>> plane = LatticePlane(48.8566, 2.3522, cell_km=0.001, extent_km=100.0)
    >>> idx = plane.snap([[48.8566, 2.3522], [48.8666, 2.3522]])
    >>> idx.tolist()
    [[0, 0], [0, 1112]]
    """

    lat: float
    lon: float
    cell_km: float = 0.001
    extent_km: float = 500.0
    _plane: TangentPlane = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_latlon([self.lat, self.lon], "origin")
        for name in ("cell_km", "extent_km"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
                raise ValidationError(f"{name} must be a positive finite number, got {v!r}")
        if self.extent_km > 5000.0:
            raise ValidationError(f"extent_km must be at most 5000 km (one tangent plane), got {self.extent_km!r}")
        if self.cell_km > self.extent_km:
            raise ValidationError(f"cell_km {self.cell_km!r} exceeds extent_km {self.extent_km!r}")
        if self.extent_km / self.cell_km > 2.0**52:  # indices exact in float64 (and far inside int64)
            raise ValidationError(f"cell_km {self.cell_km!r} is too small for extent_km {self.extent_km!r}: "
                                  "more than 2**52 cells across")
        object.__setattr__(self, "_plane", TangentPlane(float(self.lat), float(self.lon)))

    @property
    def stretch(self) -> Fraction:
        """kappa: the proved bound on planar / great-circle distance within the extent."""
        return _stretch_bound(self.extent_km)

    def alpha(self, epsilon_per_km: float | Fraction) -> Fraction:
        """alpha = eps_P h, rounded down to a float, with eps_P = eps / kappa."""
        exact = Fraction(epsilon_per_km) / self.stretch * Fraction(self.cell_km)
        f = float(exact)
        if Fraction(f) > exact:
            f = math.nextafter(f, 0.0)
        return Fraction(f)

    def additive(self, epsilon_per_km: float) -> float:
        """The additive privacy loss of snapping inputs to the lattice: eps (h sqrt 2 + 2 delta)."""
        return float(epsilon_per_km) * (self.cell_km * math.sqrt(2.0) + 2 * DELTA_KM)

    def snap(self, latlon: ArrayLike, *, first_row: int = 1) -> NDArray[np.int64]:
        """Lattice indices rint(P(x) / h) of each input; one beyond the extent is an error naming its row."""
        pts, _ = check_latlon(latlon)
        xy = _forward(self._plane, pts)
        far = np.hypot(xy[:, 0], xy[:, 1]) > self.extent_km
        if far.any():
            i = int(np.flatnonzero(far)[0])
            n = int(far.sum())
            raise ValidationError(
                f"data row {first_row + i} ({pts[i, 0]:g}, {pts[i, 1]:g}) is {np.hypot(*xy[i]):.1f} km from the "
                f"lattice origin ({self.lat:g}, {self.lon:g}), beyond the extent {self.extent_km:g} km "
                f"({n} row(s) in this block); the guarantee holds only within it"
            )
        return np.rint(xy / self.cell_km).astype(np.int64)

    def points(self, index: NDArray[np.int64]) -> NDArray[np.float64]:
        """(lat, lon) of lattice points (post-processing: a fixed function of the index)."""
        xy = np.asarray(index, dtype=np.float64) * self.cell_km
        kernels = lattice_kernels(_KERNELS)
        if kernels is not None:
            lat, lon = kernels["inverse"](np.ascontiguousarray(xy[:, 0]), np.ascontiguousarray(xy[:, 1]),
                                           float(self.lat), float(self.lon))
            return np.column_stack([lat, lon])
        return np.atleast_2d(self._plane.inverse(xy))

    def describe(self, epsilon_per_km: float) -> dict[str, Any]:
        """What the release guarantees, for reports and ``--json``."""
        return {
            "origin": [self.lat, self.lon],
            "cell_km": self.cell_km,
            "extent_km": self.extent_km,
            "stretch_bound": float(self.stretch),
            "noise_epsilon_per_km_in_plane": float(self.alpha(epsilon_per_km)) / self.cell_km,
            "additive_epsilon": self.additive(epsilon_per_km),
        }

    @classmethod
    def around(cls, region: Region, *, cell_km: float = 0.001, extent_km: float | None = None) -> LatticePlane:
        """A lattice centred in a public region's bounding box, covering it with half again as much room."""
        lat0, lon0, lat1, lon1 = region.bounds
        lat, lon = (lat0 + lat1) / 2, (lon0 + lon1) / 2
        if extent_km is None:
            corners = np.array([[lat0, lon0], [lat0, lon1], [lat1, lon0], [lat1, lon1]])
            reach = float(np.hypot(*TangentPlane(lat, lon).forward(corners).T).max())
            extent_km = min(5000.0, max(500.0, 1.5 * reach))
        return cls(lat, lon, cell_km=cell_km, extent_km=extent_km)


def release_lattice(
    latlon: ArrayLike,
    epsilon_per_km: float,
    plane: LatticePlane,
    *,
    region: Region | None = None,
    truncation: Literal["nearest", "reject"] = "nearest",
    snap_to: Snapper | None = None,
    rng: object = None,
    max_rounds: int = 1000,
    first_row: int = 1,
    sampler: Any = None,
) -> NDArray[np.float64]:
    r"""Exact lattice planar Laplace releases of (lat, lon) rows (module docstring), shape (k, 2).

    ``region`` with ``truncation="nearest"`` moves releases outside to its nearest point
    (post-processing); ``"reject"`` redraws until inside with the noise at epsilon / 2
    (conditioning at most doubles the loss: :mod:`metricdp.location.region`, part 2, holds
    for any output law). ``snap_to`` post-processes to a finite set. ``rng=None`` is the OS
    secure source; ``sampler`` may pass a prebuilt
    :class:`~metricdp.mechanisms.lattice_batch.LatticeSampler` for the same epsilon and
    plane (its tables are built once per file, not per chunk). ``first_row`` numbers rows
    in errors.

    Examples
    --------
    >>> plane = LatticePlane(48.8566, 2.3522)
    >>> z = release_lattice([[48.86, 2.35]] * 3, 1.0, plane, rng=0)
    >>> z.shape
    (3, 2)
    """
    from ..mechanisms.lattice_batch import LatticeSampler

    epsilon = check_epsilon(epsilon_per_km, name="epsilon_per_km")
    reject = region is not None and truncation == "reject"
    noise_eps = epsilon / 2.0 if reject else epsilon
    alpha = plane.alpha(noise_eps)
    if sampler is None:
        sampler = LatticeSampler(alpha)
    elif Fraction(sampler.alpha) != alpha:  # a sampler of another epsilon (or plane) would void the guarantee
        raise ValidationError(f"the sampler draws at alpha {float(sampler.alpha):.6g}, this release needs "
                              f"{float(alpha):.6g} (epsilon {noise_eps:g} per km on this plane)")
    source = check_rng(rng)
    base = plane.snap(latlon, first_row=first_row)
    out = plane.points(base + sampler.offsets(len(base), source))
    if reject:
        assert region is not None
        todo = np.flatnonzero(~region._inside(out))
        for _ in range(max_rounds):
            if not todo.size:
                break
            z = plane.points(base[todo] + sampler.offsets(len(todo), source))
            ok = region._inside(z)
            out[todo[ok]] = z[ok]
            todo = todo[~ok]
        if todo.size:
            raise ValidationError(
                f"data row {first_row + int(todo[0])}: no release inside the region after {max_rounds} draws "
                f"({todo.size} row(s)); the input lies far outside {region.name} compared with 1/epsilon"
            )
    elif region is not None:
        out = region.nearest(out)
    if snap_to is not None:
        out = snap_to.snap(out)
    return np.atleast_2d(out)
