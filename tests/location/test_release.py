"""The settings of a release of points: the rules a Python caller gets (:meth:`PointSettings.of`)."""

from __future__ import annotations

import pytest

from metricdp import ValidationError
from metricdp.location.region import Region
from metricdp.location.release import DEFAULT_CELL_KM, PointSettings


def test_an_exact_release_is_on_a_public_lattice():
    s = PointSettings.of(0.5, origin=(48.85, 2.35))
    assert s.plane is not None and (s.plane.lat, s.plane.lon) == (48.85, 2.35)
    assert s.plane.cell_km == DEFAULT_CELL_KM == 0.001 and s.plane.extent_km == 500.0
    around = PointSettings.of(0.5, region=Region.box(48.8, 2.3, 48.9, 2.4), cell_km=0.01, truncate="reject")
    assert around.plane is not None and around.plane.cell_km == 0.01 and around.noise_epsilon == 0.25
    with pytest.raises(ValidationError, match=r"^the exact sampler needs a public lattice origin .*the parameter "
                                              r"'origin' .* or the parameter 'region'; or sampler='float'"):
        PointSettings.of(0.5)


def test_the_float_sampler_has_no_lattice():
    assert PointSettings.of(0.5, exact=False).plane is None
    for given in ({"origin": (1.0, 2.0)}, {"cell_km": 0.01}, {"extent_km": 10.0}):
        with pytest.raises(ValidationError, match=r"^the parameter 'origin', the parameter 'cell_km' and the "
                                                  r"parameter 'extent_km' are for sampler='exact'"):
            PointSettings.of(0.5, exact=False, **given)


def test_bad_settings_name_the_parameter():
    with pytest.raises(ValidationError, match=r"^the parameter 'truncate' must be one of nearest, reject, got 'clip'"):
        PointSettings(1.0, None, truncate="clip")
    for eps in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValidationError, match="epsilon must be positive"):
            PointSettings(eps, None)
    with pytest.raises(ValidationError, match=r"^the lattice of the parameter 'origin', .*: "):
        PointSettings.of(1.0, origin=(48.0, 2.0), cell_km=10.0, extent_km=1.0)
