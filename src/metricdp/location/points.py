r"""Planar Laplace on (latitude, longitude) columns: what ``metricdp privatize-points`` runs.

:func:`privatize_points` releases each (lat, lon) through the planar Laplace mechanism of
Andrés et al. (CCS 2013, Section 4) at ``epsilon_per_km`` per km of great-circle
distance, drawn by the exact-radius sampler
:func:`~metricdp.mechanisms.planar_laplace.sample_planar_laplace_latlon` (the radius
Gamma(2, 1/eps) as two exponentials, placed on the sphere by the azimuthal equidistant
projection at each input with its area distortion removed by rejection, so the release
density is exactly proportional to :math:`e^{-\varepsilon d_{gc}}`). Then, optionally:

1. ``region`` -- keep releases inside a :class:`~metricdp.location.region.Region`:
   ``truncation="nearest"`` (default) replaces a release outside by the nearest point
   of the region, post-processing, **epsilon unchanged**; ``truncation="reject"``
   redraws until inside, which is 2x the noise level (proof in
   :mod:`metricdp.location.region`), so the noise is drawn at **epsilon / 2** and the
   result is epsilon-geo-indistinguishable as asked.
2. ``snap_to`` -- replace each release by the nearest point of a finite output set
   (:class:`~metricdp.location.snap.Snapper`), post-processing, epsilon unchanged.

This is the *continuous* mechanism: its guarantee holds for real numbers, not exactly for
the floats it releases (Mironov, CCS 2012). ``metricdp privatize-points`` releases by
default with :func:`metricdp.location.lattice.release_lattice` instead: the same law on a
public lattice, drawn exactly (``docs/proofs/lattice_points.md``); this function is what
``--sampler float`` runs.

Every step after the draw is a fixed function of the draw, so the composition is
``epsilon_per_km``-geo-indistinguishable for the great-circle distance in km: for all
inputs x, x' and sets S of outputs,
:math:`\Pr[M(x) \in S] \le e^{\varepsilon\, d_{gc}(x, x')} \Pr[M(x') \in S]`.
Each row is released independently; k rows of one person compose to k epsilon.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import check_rng, warn_unless_secure
from .._validation import check_epsilon
from ..errors import ValidationError
from .projection import check_latlon
from .region import Region, sample_in_region
from .snap import Snapper

__all__ = ["TRUNCATIONS", "privatize_points"]

#: Ways of keeping releases inside a region.
TRUNCATIONS = ("nearest", "reject")


def privatize_points(
    latlon: ArrayLike,
    epsilon_per_km: float,
    *,
    region: Region | None = None,
    truncation: Literal["nearest", "reject"] = "nearest",
    snap_to: Snapper | ArrayLike | None = None,
    rng: object = None,
    max_rounds: int = 1000,
) -> NDArray[np.float64]:
    """Release every (lat, lon) with planar Laplace at ``epsilon_per_km`` (see the module docstring).

    Parameters
    ----------
    latlon : array of shape (k, 2) or (2,)
        Inputs in degrees.
    epsilon_per_km : float
        The guarantee: eps-geo-indistinguishability per km of great-circle distance,
        whatever ``region``/``truncation``/``snap_to`` are.
    region : Region, optional
    truncation : "nearest" or "reject"
    snap_to : Snapper or (m, 2) array of (lat, lon), optional
    rng : None, int or Generator
        ``None`` (default) draws from the OS's secure source; a seed is reproducible
        and not private (a :class:`~metricdp.errors.PrivacyLeakWarning` says so).
    max_rounds : int
        Rejection only: draws per row before giving up (an error, nothing released).

    Returns
    -------
    ndarray of the shape of ``latlon``

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     z = privatize_points([[48.8566, 2.3522]] * 2, 1.0, rng=0)
    >>> z.shape
    (2, 2)
    """
    epsilon = check_epsilon(epsilon_per_km, name="epsilon_per_km")
    pts, single = check_latlon(latlon)
    if truncation not in TRUNCATIONS:
        raise ValidationError(f"truncation must be one of {', '.join(TRUNCATIONS)}, got {truncation!r}")
    if region is not None and not isinstance(region, Region):
        raise ValidationError(f"region must be a Region, got {type(region).__name__}")
    snapper = None if snap_to is None else snap_to if isinstance(snap_to, Snapper) else Snapper(np.asarray(snap_to))
    warn_unless_secure(rng, stacklevel=2)
    source = check_rng(rng)
    from ..mechanisms.planar_laplace import sample_planar_laplace_latlon

    if region is not None and truncation == "reject":
        out = sample_in_region(pts, epsilon / 2.0, region, source, max_rounds=max_rounds)
    else:
        out = np.atleast_2d(sample_planar_laplace_latlon(pts, epsilon, source))
        if region is not None:
            out = region.nearest(out)
    if snapper is not None:
        out = snapper.snap(out)
    out = np.atleast_2d(out)
    return out[0] if single else out
