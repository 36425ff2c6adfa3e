r"""The eps of a trace release from the mean displacement a user accepts.

A trace release moves each fix; the user often knows the displacement they accept (say
500 m) rather than the eps per km that gives it. :func:`epsilon_for_displacement` turns
one into the other for each of the three modes of ``metricdp privatize-trace``
(:mod:`metricdp.pipeline.traces`), and :func:`spread_for_displacement` gives the
adaptive predictive manager's budget.

Derivation
----------
**Planar Laplace.** The noise of one release has density
:math:`\frac{\varepsilon^2}{2\pi} e^{-\varepsilon r}` in the (tangent) plane, so its radius
:math:`\rho` has density :math:`\varepsilon^2 r e^{-\varepsilon r}`: Gamma(2, 1/eps), with
:math:`E\rho = 2/\varepsilon` **exactly**. A fix released on its own (``independent``, and
each fresh release of ``predictive``) is moved by :math:`2/\varepsilon` on average, so
:math:`\varepsilon = 2/d` gives a mean displacement of exactly ``d`` in the plane. On the
sphere (:func:`~metricdp.mechanisms.planar_laplace.sample_planar_laplace_latlon`) the radius has
density :math:`\propto e^{-\varepsilon\rho}\sin(\rho/R)`, whose mean is below :math:`2/\varepsilon` by a
relative :math:`O((\varepsilon R)^{-2})` (1e-9 at eps = 4 per km): ``d`` stays a bound there.

**Per place.** A fix is replaced by its cell's centre plus the noise: its displacement is
:math:`|a + N|` with ``a`` the offset from the fix to the centre of its square cell of side
``h``, :math:`|a| \le h/\sqrt{2}` (a corner). By the triangle inequality
:math:`E|a + N| \le |a| + E|N| \le h/\sqrt{2} + 2/\varepsilon`, so
:math:`\varepsilon = 2/(d - h/\sqrt{2})` keeps the mean displacement of every fix at most
``d``. This is an **upper bound** (a fix at its cell's centre is moved by :math:`2/\varepsilon`
only): the eps is sufficient, not the least that would do for a given file. No eps fits when
:math:`d \le h/\sqrt{2}`: the cell alone may move a fix that far.

**Predictive, fixed manager.** Fresh releases are planar Laplace at ``eps``: ``2/d``, exact
for them. A reuse reports the person's last release for a fix that passed the private test
(threshold ``2/eps`` = ``d`` by default): the test keeps the reused release near the fix but
does not bound its distance, so nothing is claimed for reuses here.

**Predictive, adaptive manager.** The eps of a fresh release is at least the ladder's lowest
rung :math:`b = (1 - s) B / n` (``B`` the person's spread budget, ``n`` their fixes, ``s``
the tests' share; :class:`~metricdp.location.predictive.AdaptiveRate`), so each fresh
release is moved by at most :math:`2/b` on average; :math:`B = 2n / ((1 - s) d)` bounds the
mean displacement of every fresh release by ``d`` (an **upper bound**: higher rungs move
less; rounding onto the accounting grid is left to the release).

**Budget.** One fresh release costs eps; an eps above ``budget`` (each person's budget per
km, when one is given) cannot be paid and is refused.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_number
from ..errors import ValidationError

__all__ = ["MODES", "epsilon_for_displacement", "spread_for_displacement"]

#: the modes of :func:`epsilon_for_displacement` and whether their value is exact ("exact") or a bound
MODES = {"independent": "exact", "predictive": "exact for fresh releases", "per-place": "upper bound"}


def _positive(value: ArrayLike, name: str) -> NDArray[np.float64]:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number of km, got {value!r}") from None
    bad = ~(np.isfinite(a) & (a > 0))
    if a.size == 0 or bad.any():
        raise ValidationError(f"{name} must be finite and > 0 km, got {a[bad].ravel()[0] if a.size else value!r}")
    return a


def epsilon_for_displacement(distance_km: ArrayLike, mode: str, *, cell_km: float | None = None,
                             budget: float | None = None) -> NDArray[np.float64]:
    r"""The least eps per km whose expected displacement of a fix is at most ``distance_km``.

    Parameters
    ----------
    distance_km
        The mean displacement accepted, km (one or many; > 0).
    mode
        ``"independent"`` or ``"predictive"`` (fixed manager: the fresh releases):
        :math:`2/d`, exact; ``"per-place"``: :math:`2/(d - h/\sqrt{2})`, an upper bound on
        the displacement (module docstring).
    cell_km
        ``"per-place"``: the cells' side ``h`` (km); no other mode takes one.
    budget
        Each person's budget per km, if any: an eps above it is refused.

    Returns
    -------
    ndarray
        The eps per km, the shape of ``distance_km``.

    Raises
    ------
    ValidationError
        An unknown mode, a bad distance or cell, a distance the cell alone may exceed, or an
        eps above the budget.

    Examples
    --------
    >>> epsilon_for_displacement(0.5, "independent").item()
    4.0
    >>> round(epsilon_for_displacement(1.0, "per-place", cell_km=math.sqrt(2) / 2).item(), 12)
    4.0
    """
    if mode not in MODES:
        raise ValidationError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    d = _positive(distance_km, "the displacement")
    offset = 0.0
    if mode == "per-place":
        if cell_km is None:
            raise ValidationError("a per-place displacement needs the cells' side (km)")
        h = check_number(cell_km, "the cell side", minimum=0, open_minimum=True)
        offset = h / math.sqrt(2.0)
        if np.any(d <= offset):
            raise ValidationError(f"no eps moves a fix by at most {float(d.min()) * 1000:g} m on average: its cell "
                                  f"alone may move it {offset * 1000:g} m (half the diagonal of {h * 1000:g} m "
                                  "cells); accept more, or use smaller cells")
    elif cell_km is not None:
        raise ValidationError(f"a cell side is a per-place parameter, not one of {mode}")
    eps = 2.0 / (d - offset)
    if budget is not None:
        b = check_number(budget, "budget", minimum=0, open_minimum=True)
        if np.any(eps > b):
            raise ValidationError(f"no eps within the budget {b:g} per km moves a fix by at most "
                                  f"{float(d.min()) * 1000:g} m on average: that needs eps {float(eps.max()):g} per "
                                  "km; accept more displacement, or give a larger budget")
    return eps


def spread_for_displacement(distance_km: ArrayLike, fixes: ArrayLike, *, test_share: float = 0.2,
                            budget: float | None = None) -> NDArray[np.float64]:
    r"""The adaptive predictive manager's spread budget per person bounding a fresh release's mean displacement.

    :math:`B = 2n / ((1 - s) d)`: the lowest eps of the ladder, :math:`(1 - s) B / n`, is then
    :math:`2/d` (module docstring; an upper bound on the displacement of every fresh release).

    Parameters
    ----------
    distance_km
        The mean displacement accepted, km (> 0).
    fixes
        Each person's number of fixes ``n`` (integers >= 2, the manager's horizon).
    test_share
        The tests' share of the spend per fix, in (0, 1).
    budget
        Each person's budget per km, if any: a spread budget above it is refused.

    Examples
    --------
    >>> spread_for_displacement(1.0, [10, 20], test_share=0.2).tolist()
    [25.0, 50.0]
    """
    d = _positive(distance_km, "the displacement")
    n = np.asarray(fixes)
    if n.size == 0 or n.dtype.kind not in "iu" or np.any(n < 2):
        raise ValidationError(f"fixes must be integers >= 2 (each person's fixes), got {fixes!r}")
    s = check_number(test_share, "test_share", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    spread = 2.0 * n.astype(np.float64) / ((1.0 - s) * d)
    if budget is not None:
        b = check_number(budget, "budget", minimum=0, open_minimum=True)
        if np.any(spread > b):
            raise ValidationError(f"no spread budget within {b:g} per km bounds the fresh releases' mean "
                                  f"displacement by {float(d.min()) * 1000:g} m: {int(n.max())} fixes need "
                                  f"{float(spread.max()):g}; accept more displacement, or give a larger budget")
    return spread
