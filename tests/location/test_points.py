"""privatize_points: the release law (KS against Gamma(2, 1/eps)), regions, snapping, warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.location.points import privatize_points
from metricdp.location.projection import TangentPlane
from metricdp.location.region import parse_region
from metricdp.location.snap import Snapper

INPUTS = [(48.8566, 2.3522), (-33.87, 151.21), (64.15, -21.94), (0.0, 179.99)]


def _release(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return privatize_points(*args, **kwargs)


@pytest.mark.parametrize("epsilon", [0.2, 2.0])
def test_radial_distance_is_gamma_2_over_eps_and_angle_uniform(epsilon):
    """Project each release back into the tangent plane of its input (exact radial distance)."""
    per = 1500
    x = np.repeat(np.array(INPUTS), per, axis=0)
    z = _release(x, epsilon, rng=12345)
    for i, centre in enumerate(INPUTS):
        xy = TangentPlane(*centre).forward(z[i * per : (i + 1) * per])
        rho = np.hypot(xy[:, 0], xy[:, 1])
        assert stats.kstest(rho, stats.gamma(a=2, scale=1 / epsilon).cdf).pvalue > 1e-3
        angle = np.mod(np.arctan2(xy[:, 0], xy[:, 1]), 2 * np.pi)
        assert stats.kstest(angle, stats.uniform(0, 2 * np.pi).cdf).pvalue > 1e-3


def test_the_ks_test_can_fail():
    """The same statistic rejects releases drawn at the wrong epsilon."""
    z = _release(np.repeat([INPUTS[0]], 1500, axis=0), 1.3, rng=1)
    rho = np.hypot(*TangentPlane(*INPUTS[0]).forward(z).T)
    assert stats.kstest(rho, stats.gamma(a=2, scale=1 / 1.0).cdf).pvalue < 1e-6


@pytest.mark.parametrize("truncation", ["nearest", "reject"])
def test_truncation_keeps_every_release_inside(truncation):
    region = parse_region("48.83,2.30,48.88,2.40")
    x = np.repeat([[48.85, 2.35], [48.90, 2.35]], 400, axis=0)
    z = _release(x, 0.5, region=region, truncation=truncation, rng=5)
    tolerance = 1e-6 if truncation == "nearest" else 0.0
    assert region.contains(z, tolerance_km=tolerance).all()


def test_reject_draws_at_half_epsilon():
    """Far inside a large region rejection is inactive: the radius law is Gamma(2, 2/eps)."""
    region = parse_region("40,-8,56,8")
    z = _release(np.repeat([[48.0, 0.0]], 2000, axis=0), 2.0, region=region, truncation="reject", rng=9)
    rho = np.hypot(*TangentPlane(48.0, 0.0).forward(z).T)
    assert stats.kstest(rho, stats.gamma(a=2, scale=2 / 2.0).cdf).pvalue > 1e-3


def test_snap_to_outputs_only_snap_points():
    targets = np.array([[48.85, 2.35], [48.86, 2.36], [48.80, 2.30]])
    z = _release(np.repeat([[48.85, 2.35]], 200, axis=0), 1.0, snap_to=targets, rng=2)
    assert {tuple(p) for p in z.tolist()} <= {tuple(p) for p in targets.tolist()}
    z2 = _release(np.repeat([[48.85, 2.35]], 200, axis=0), 1.0, snap_to=Snapper(targets), rng=2)
    np.testing.assert_array_equal(z, z2)


def test_seed_warns_and_default_does_not():
    with pytest.warns(PrivacyLeakWarning, match="seed"):
        privatize_points([48.0, 2.0], 1.0, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z = privatize_points([48.0, 2.0], 1.0)
    assert z.shape == (2,)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon_per_km": 0.0}, "epsilon_per_km"),
        ({"truncation": "clip"}, "truncation"),
        ({"region": "paris"}, "Region"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = {"epsilon_per_km": 1.0, **kwargs}
    with pytest.raises(ValidationError, match=match):
        privatize_points([[48.0, 2.0]], **args)


def test_bad_inputs_name_the_row():
    with pytest.raises(ValidationError, match="row 1"):
        privatize_points([[48.0, 2.0], [95.0, 2.0]], 1.0)
