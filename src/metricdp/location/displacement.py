r"""The eps of a trace release from the mean displacement a user accepts.

A location release is judged by how far it moves a fix; users know the distance they can
live with (500 m for a city's venues, 5 km for a region's) better than an eps. This module
turns that distance into the eps that guarantees it, for the releases whose displacement has
a closed form:

* **independent** releases: planar Laplace at eps per km moves a point by a radius
  distributed as Gamma(2, 1/eps) (Andrés et al., CCS 2013), whose mean is exactly
  :math:`2/\varepsilon`; so :math:`\varepsilon = 2/L` gives a mean displacement of exactly
  ``L`` (up to the rounding of the written digits);
* **one release per place**: the release is drawn around the centre of the fix's public cell
  of side ``h``, and a fix lies at most half the cell's diagonal :math:`h/\sqrt{2}` from
  that centre (in the grid's tangent plane), so by the triangle inequality the displacement
  is at most :math:`r + h/\sqrt{2}` with ``r`` the noise radius, whose mean is
  :math:`2/\varepsilon`: :math:`\varepsilon = 2/(L - h/\sqrt{2})` bounds the mean by ``L``
  (an upper bound: fixes near their centre move less).

The predictive mechanism has no such form: a reused release moves with the true fix up to
the test's threshold, so its displacement is measured (``evaluate-trace``), not set. Every
input here is public (a distance, a cell side), so the choice reveals nothing of the data.
"""

from __future__ import annotations

import math

from ..errors import ValidationError

__all__ = ["epsilon_for_displacement"]


def epsilon_for_displacement(length_km: float, cell_km: float | None = None) -> float:
    r"""The eps per km whose release moves a fix by at most ``length_km`` on average.

    Parameters
    ----------
    length_km
        The accepted mean displacement, km.
    cell_km
        One release per place: the side of the public cells (km); None for independent
        releases.

    Returns
    -------
    float
        :math:`2/L` for independent releases (the mean is exactly ``L``), or
        :math:`2/(L - h/\sqrt{2})` per place (the mean is at most ``L``; module docstring).

    Raises
    ------
    ValidationError
        ``length_km`` is not a positive finite length, or per place it is no longer than half
        the cell's diagonal (the cell alone moves a fix that far: no eps can promise it).
    """
    length = float(length_km)
    if not (math.isfinite(length) and length > 0):
        raise ValidationError(f"the accepted displacement must be a positive length, got {length_km!r}")
    offset = 0.0 if cell_km is None else float(cell_km) / math.sqrt(2.0)
    if length <= offset:
        raise ValidationError(f"a displacement of {length:g} km cannot be promised with cells of {cell_km:g} km: "
                              f"a fix can be {offset:.4g} km from its cell's centre; use smaller cells or accept "
                              "more than that")
    return 2.0 / (length - offset)
