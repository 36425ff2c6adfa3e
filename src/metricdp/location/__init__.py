"""Location privacy on real coordinates (latitude, longitude in degrees, km).

* :mod:`~metricdp.location.projection` -- the local tangent plane (azimuthal
  equidistant projection on the sphere of the ``haversine`` metric) and its
  distortion bound;
* :mod:`~metricdp.location.region` -- regions (a box or GeoJSON polygons) and the two
  ways of keeping releases inside one: the nearest point of the region
  (post-processing, epsilon unchanged) or rejection (proved 2 epsilon; run at
  epsilon / 2);
* :mod:`~metricdp.location.snap` -- snapping releases to a finite output set
  (post-processing);
* :mod:`~metricdp.location.points` -- :func:`~metricdp.location.points.privatize_points`,
  planar Laplace on (lat, lon) with the above, as ``metricdp privatize-points`` runs it;
* :mod:`~metricdp.location.predictive` -- traces: the predictive mechanism (a private
  test of the last release, fresh noise only when it fails) and its budget managers;
* :mod:`~metricdp.location.per_place` -- traces: one release per (person, public cell),
  reused across rows and runs through the ledger; equal releases reveal a shared cell;
* :mod:`~metricdp.location.trace_report` -- what a trace release cost each person;
* :mod:`~metricdp.location.displacement` -- traces: the eps (or the adaptive manager's
  spread budget) whose mean displacement of a fix is at most a given distance.

Functions are imported from their modules (``from metricdp.location.points import
privatize_points``); the package binds no function names.
"""

from __future__ import annotations

__all__: list[str] = []

from .._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
