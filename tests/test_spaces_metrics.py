"""The angular and Mahalanobis metrics (hand-computed values, the metric axioms) and the refusal of cosine."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import cdist

from metricdp.errors import ValidationError
from metricdp.mechanisms import build
from metricdp.mechanisms.file import load_mechanism
from metricdp.pointspace import PointSpace
from metricdp.spaces import (
    MetricSpace,
    angular_distances,
    check_metric_name,
    estimate_covariance,
    mahalanobis_distances,
    pairwise_distances,
)

_coord = st.floats(min_value=-100, max_value=100, allow_nan=False).filter(lambda v: abs(v) > 1e-3)


def _axioms(d: np.ndarray, tol: float) -> None:
    n = len(d)
    assert np.allclose(d, d.T, rtol=0, atol=tol) and np.all(np.diag(d) == 0) and np.all(d >= 0)
    lhs = d[:, None, :]  # d(i, k)
    rhs = d[:, :, None] + d[None, :, :]  # d(i, j) + d(j, k)
    assert np.all(lhs <= rhs + tol), n


# ------------------------------------------------------------------------------ angular
def test_angular_by_hand():
    d = angular_distances([[1.0, 0.0], [0.0, 3.0], [-2.0, 0.0], [1.0, 1.0]],
                          [[1.0, 0.0], [0.0, 3.0], [-2.0, 0.0], [1.0, 1.0]])
    expected = [[0, 0.5, 1, 0.25], [0.5, 0, 0.5, 0.25], [1, 0.5, 0, 0.75], [0.25, 0.25, 0.75, 0]]
    np.testing.assert_allclose(d, expected, atol=1e-15)
    # tiny angles keep their digits (arccos(1 - 5e-17) would give 0)
    eps = 1e-9
    assert angular_distances([[1.0, 0.0]], [[1.0, eps]])[0, 0] == pytest.approx(eps / math.pi, rel=1e-9)


@given(arrays(np.float64, st.tuples(st.integers(3, 6), st.integers(2, 4)), elements=_coord))
def test_angular_is_a_metric_on_directions(x):
    d = pairwise_distances(x, x, "angular")
    np.fill_diagonal(d, 0.0)
    _axioms(d, 1e-12)
    assert d.max() <= 1.0
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    np.testing.assert_allclose(d, np.arccos(np.clip(u @ u.T, -1, 1)) / np.pi, atol=1e-6)
    # scale invariance: a direction, not a point
    np.testing.assert_allclose(angular_distances(3.0 * x, x), angular_distances(x, x), atol=1e-12)


def test_angular_space_refusals_and_file_round_trip(tmp_path):
    with pytest.raises(ValidationError, match="row 1 is the zero vector"):
        MetricSpace.from_points([[1.0, 0.0], [0.0, 0.0]], metric="angular")
    with pytest.raises(ValidationError, match=r"zero .* off the diagonal"):
        MetricSpace.from_points([[1.0, 0.0], [2.0, 0.0]], metric="angular")  # the same direction
    space = MetricSpace.from_points([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.2]], list("abcd"), "angular")
    mech = build("exponential", space, 4.0)
    mech.save(tmp_path / "m.npz")
    loaded = load_mechanism(tmp_path / "m.npz")
    assert loaded.space.metric == "angular" and np.array_equal(loaded.space.distances, space.distances)
    assert PointSpace.from_points([[1.0, 0.0], [0.0, 1.0]], metric="angular").metric == "angular"


# ------------------------------------------------------------------------------- cosine
@pytest.mark.parametrize("call", [
    lambda: MetricSpace.from_points([[1.0, 0.0], [0.0, 1.0]], metric="cosine"),
    lambda: pairwise_distances([[1.0, 0.0]], [[0.0, 1.0]], "cosine"),
    lambda: PointSpace.from_points([[1.0, 0.0], [0.0, 1.0]], metric="cosine"),
    lambda: check_metric_name("Cosine"),
])
def test_cosine_is_refused_with_the_reason(call):
    with pytest.raises(ValidationError, match=r"not a metric: it breaks the triangle inequality.*use 'angular'"):
        call()


def test_the_cosine_counterexample_is_one():
    x, y, z = np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([0.0, 1.0])
    c = 1 - cdist([x, y, z], [x, y, z], "cosine")  # cosine similarity
    one_minus = 1 - c
    assert one_minus[0, 2] > one_minus[0, 1] + one_minus[1, 2]
    assert one_minus[0, 1] + one_minus[1, 2] == pytest.approx(2 - math.sqrt(2))


# -------------------------------------------------------------------------- mahalanobis
def test_mahalanobis_by_hand():
    cov = [[2.0, 1.0], [1.0, 2.0]]  # inverse (1/3) [[2, -1], [-1, 2]]
    d = mahalanobis_distances([[0.0, 0.0]], [[1.0, 0.0], [1.0, 1.0], [1.0, -1.0]], cov)
    np.testing.assert_allclose(d, [[math.sqrt(2 / 3), math.sqrt(2 / 3), math.sqrt(2)]], rtol=1e-14)
    space = MetricSpace.from_points([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]], list("abc"), "mahalanobis",
                                    covariance=np.diag([4.0, 9.0]))
    np.testing.assert_allclose(space.distances, [[0, 1, 1], [1, 0, math.sqrt(2)], [1, math.sqrt(2), 0]], rtol=1e-14)
    assert space.metric == "mahalanobis"


@given(arrays(np.float64, st.tuples(st.integers(3, 6), st.just(3)), elements=_coord),
       arrays(np.float64, (3, 3), elements=st.floats(-2, 2)))
def test_mahalanobis_is_a_metric_and_matches_scipy(x, a):
    cov = a @ a.T + 0.5 * np.eye(3)
    d = mahalanobis_distances(x, x, cov)
    np.fill_diagonal(d, 0.0)
    _axioms(d, 1e-9 * max(1.0, d.max()))
    np.testing.assert_allclose(d, cdist(x, x, "mahalanobis", VI=np.linalg.inv(cov)), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"metric": "mahalanobis"}, "needs a public covariance"),
    ({"metric": "euclidean", "covariance": np.eye(2)}, "covariance is for the mahalanobis metric"),
    ({"metric": "mahalanobis", "covariance": np.eye(3)}, r"shape \(2, 2\)"),
    ({"metric": "mahalanobis", "covariance": [[1.0, 0.5], [0.0, 1.0]]}, "not symmetric"),
    ({"metric": "mahalanobis", "covariance": [[1.0, 1.0], [1.0, 1.0]]}, "not positive definite"),
    ({"metric": "mahalanobis", "covariance": [[1.0, np.nan], [np.nan, 1.0]]}, "finite"),
    ({"metric": "taxicab"}, "metric must be one of"),
])
def test_mahalanobis_refusals(kwargs, fragment):
    with pytest.raises(ValidationError, match=fragment):
        MetricSpace.from_points([[0.0, 0.0], [1.0, 2.0]], **kwargs)


def test_estimate_covariance_from_public_points(tmp_path):
    public = np.random.default_rng(0).normal(size=(50, 2)) * [1.0, 3.0]
    cov = estimate_covariance(public)
    np.testing.assert_allclose(cov, np.cov(public.T), rtol=1e-12)
    with pytest.raises(ValidationError, match="more points than dimensions"):
        estimate_covariance(public[:2])
    space = MetricSpace.from_points(public[:5], metric="mahalanobis", covariance=cov)
    build("exponential", space, 1.0).save(tmp_path / "m.npz")
    assert load_mechanism(tmp_path / "m.npz").space.metric == "mahalanobis"
