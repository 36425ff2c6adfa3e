"""PointSpace: distances on demand, exact nearest and radius queries, memory refusals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from metricdp.errors import ResourceLimitError, ValidationError
from metricdp.pointspace import PointSpace, check_memory, memory_limit


def _points(seed: int, n: int, dim: int, offset: float = 0.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)) + offset


def test_distances_from_match_cdist_and_are_zero_on_the_diagonal() -> None:
    x = _points(0, 300, 7)
    s = PointSpace.from_points(x)
    idx = np.array([0, 5, 299])
    got = s.distances_from(idx)
    assert np.allclose(got, cdist(x[idx], x), atol=1e-12)
    assert got[0, 0] == got[1, 5] == got[2, 299] == 0.0
    blocks = list(s.blocks(idx))
    assert blocks[0][0] == 0 and blocks[-1][1] == 300
    assert np.allclose(np.concatenate([b for _, _, b in blocks], axis=1), got)


@pytest.mark.parametrize("metric", ["manhattan", "chebyshev"])
def test_other_metrics(metric: str) -> None:
    x = _points(1, 200, 3)
    s = PointSpace.from_points(x, metric=metric)
    scipy_name = {"manhattan": "cityblock", "chebyshev": "chebyshev"}[metric]
    assert np.allclose(s.distances_from([3, 4]), cdist(x[[3, 4]], x, scipy_name))
    q = _points(2, 50, 3)
    assert np.array_equal(s.nearest(q), cdist(q, x, scipy_name).argmin(axis=1))


@pytest.mark.slow
@pytest.mark.parametrize(("dim", "offset"), [(2, 0.0), (50, 0.0), (10, 1e8)])
def test_nearest_is_exact_against_brute_force(dim: int, offset: float) -> None:
    x = _points(3, 2000, dim, offset)
    q = x[np.random.default_rng(4).integers(0, 2000, 700)] + 0.3 * _points(5, 700, dim)
    s = PointSpace.from_points(x)
    # brute force in 80-bit long double on the coordinates as given
    xl, ql = x.astype(np.longdouble), q.astype(np.longdouble)
    ref = np.array([np.argmin(((xl - row) ** 2).sum(axis=1)) for row in ql])
    assert np.array_equal(s.nearest(q), ref)


def test_nearest_breaks_ties_to_the_smaller_index() -> None:
    s = PointSpace.from_points([[0.0], [2.0], [4.0]])
    assert s.nearest([[1.0], [3.0]]).tolist() == [0, 1]


def test_radius_matches_brute_force() -> None:
    x = _points(6, 500, 5)
    s = PointSpace.from_points(x)
    idx, dist = s.radius(7, 2.0)
    d = cdist(x[[7]], x)[0]
    assert np.array_equal(idx, np.flatnonzero(d <= 2.0)) and np.allclose(dist, d[idx])


def test_memory_limit_is_checked_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    s = PointSpace.from_points(_points(7, 400, 3))
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "100000")
    assert memory_limit() == 100_000
    with pytest.raises(ResourceLimitError, match=r"400 x 400 distances need .*; the limit is"):
        s.to_metric_space()
    with pytest.raises(ResourceLimitError):
        s.distances_from(np.arange(100))
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "lots")
    with pytest.raises(ValidationError, match="METRICDP_MEMORY_LIMIT"):
        check_memory(1, "x")


def test_to_metric_space_and_labels() -> None:
    x = _points(8, 20, 2, offset=5.0)
    s = PointSpace.from_points(x, [f"w{i}" for i in range(20)])
    m = s.to_metric_space([0, 3, 9])
    assert m.labels == ("w0", "w3", "w9") and np.allclose(m.distances, cdist(x[[0, 3, 9]], x[[0, 3, 9]]))
    assert s.index(["w3", "w0"]).tolist() == [3, 0] and s.get("nope") == -1
    assert np.allclose(s.points, x)
    with pytest.raises(ValidationError, match="'zz'"):
        s.index(["zz"])


@pytest.mark.parametrize(
    ("points", "labels", "match"),
    [
        ([[0.0], [np.nan]], None, "row 1 is not finite"),
        ([[0.0]], None, "at least 2 rows"),
        ([[0.0], [1.0]], ["a", "a"], "'a' appears twice"),
        ([[0.0], [1.0]], ["a"], "1 entries for 2 points"),
    ],
)
def test_bad_input_is_one_clear_error(points: list, labels: list | None, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        PointSpace.from_points(points, labels)


# ---------------------------------------------------------------- exact range search
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(deadline=None, max_examples=60)
@given(
    st.integers(2, 60),
    st.integers(1, 4),
    st.sampled_from([1e-3, 1.0, 50.0]),
    st.sampled_from([0.0, 1e6]),
    st.booleans(),
    st.integers(0, 2**31),
    st.floats(0.0, 1.0),
)
def test_within_is_the_filter_of_distances_from(n, dim, scale, offset, rounded, seed, q):
    g = np.random.default_rng(seed)
    v = g.standard_normal((n, dim)) * scale
    if rounded:  # ties: many distances equal, some exactly on the radius
        v = np.round(v / scale * 2) * scale
    v = v + offset + np.arange(n)[:, None] * 1e-7 * scale
    space = PointSpace.from_points(v, [str(i) for i in range(n)])
    idx = g.choice(n, min(n, 5), replace=False)
    d = space.distances_from(idx)
    r = float(np.quantile(d, q))  # a radius equal to some distance
    for row, (hit, dist) in zip(d, space.within(idx, r), strict=True):
        expected = np.flatnonzero(row <= r)
        assert np.array_equal(hit, expected) and np.array_equal(dist, row[expected])


def test_within_refuses_a_bad_radius():
    space = PointSpace.from_points([[0.0], [1.0]], ["a", "b"])
    with pytest.raises(ValidationError, match="radius"):
        space.within([0], float("nan"))
    assert [h.tolist() for h, _ in space.within([0, 1], 0.0)] == [[0], [1]]
