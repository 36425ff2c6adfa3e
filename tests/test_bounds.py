"""Packing lower bounds (Imola et al. UAI 2022, Theorem 3) against LP optima and hand values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog
from scipy.sparse.csgraph import shortest_path

from metricdp.bounds import PackingBound, lower_bound, lower_bound_quantile, packing_radius
from metricdp.errors import ValidationError
from metricdp.loss import element_losses, quantile_loss, quantile_rank
from metricdp.spaces import MetricSpace
from tests.helpers import random_space


# ----------------------------------------------------------------- oracles
def optimal_loss(d: np.ndarray, eps: float, group: tuple[int, ...] | None = None) -> tuple[float, np.ndarray]:
    """Dense OPTMech LP: min k s.t. rows sum to 1, eps-mDP, loss(u) <= k for u in ``group``.

    With ``group`` = all points this is the worst-case optimum; minimising over every
    group of size ceil(q n) gives the exact minimum of L_q over all eps-mDP mechanisms
    (L_q <= t iff ceil(q n) points have loss <= t).
    """
    n = len(d)
    group = tuple(range(n)) if group is None else group
    nv = n * n + 1
    c = np.zeros(nv)
    c[-1] = 1.0
    a_eq = np.zeros((n, nv))
    for u in range(n):
        a_eq[u, u * n : (u + 1) * n] = 1.0
    rows = []
    for u, v in itertools.permutations(range(n), 2):
        for w in range(n):
            r = np.zeros(nv)
            r[u * n + w] = 1.0
            r[v * n + w] = -math.exp(eps * d[u, v])
            rows.append(r)
    for u in group:
        r = np.zeros(nv)
        r[u * n : (u + 1) * n] = d[u]
        r[-1] = -1.0
        rows.append(r)
    res = linprog(c, A_ub=np.array(rows), b_ub=np.zeros(len(rows)), A_eq=a_eq, b_eq=np.ones(n),
                  bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return float(res.fun), res.x[:-1].reshape(n, n)


def min_quantile_loss(d: np.ndarray, eps: float, q: float) -> float:
    n = len(d)
    m = quantile_rank(n, q)
    return min(optimal_loss(d, eps, g)[0] for g in itertools.combinations(range(n), m))


def brute_radius(d: np.ndarray, s: list[int]) -> float:
    return min(max(d[a, y], d[b, y]) for a, b in itertools.combinations(s, 2) for y in range(len(d)))


def brute_value(d: np.ndarray, s: list[int], eps: float, drop: int) -> float:
    """r*(S) max_w (1 - 1/N_k(w,S)) written out naively."""
    r = brute_radius(d, s)
    best = 0.0
    for w in range(len(d)):
        terms = sorted(math.exp(-eps * d[w, x]) for x in s)
        nk = sum(terms[: len(s) - drop])
        if nk > 1:
            best = max(best, r * (1 - 1 / nk))
    return best


def exponential_matrix(d: np.ndarray, eps: float) -> np.ndarray:
    m = np.exp(-eps * d / 2)
    return m / m.sum(axis=1, keepdims=True)


def graph_space(seed: int, n: int) -> MetricSpace:
    """Shortest-path metric of a random weighted complete graph (non-Euclidean)."""
    g = np.random.default_rng(seed)
    w = g.uniform(0.2, 3.0, (n, n))
    w = np.triu(w, 1) + np.triu(w, 1).T
    return MetricSpace.from_distances(shortest_path(w, directed=False))


spaces = st.builds(
    lambda seed, n, kind: graph_space(seed, n) if kind == 2 else random_space(seed, n, clustered=kind == 1),
    st.integers(0, 10_000),
    st.integers(2, 6),
    st.integers(0, 2),
)
#: eps * diameter in [0.2, 25]: from nearly uniform to nearly deterministic, while the
#: LP coefficients exp(eps d) stay below what HiGHS accepts (1e15).
scales = st.floats(0.2, 25.0)


def f(x: float) -> float:
    return math.exp(-x) / (1 + math.exp(-x))


# ----------------------------------------------------------------- hand computations
@pytest.mark.parametrize("eps", [0.01, 0.7, 3.0, 40.0])
def test_two_points_equal_the_exact_optimum(eps: float) -> None:
    dist = 2.5
    space = MetricSpace.from_distances([[0, dist], [dist, 0]])
    b = lower_bound(space, eps)
    # OPTMech on two points: the symmetric mechanism with M[u,u] = e^{eps D} M[u,v],
    # loss D e^{-eps D} / (1 + e^{-eps D}).
    assert b.value == pytest.approx(dist * f(eps * dist), rel=1e-12)
    assert b.radius == dist
    assert sorted(b.packing.tolist()) == [0, 1]
    if eps < 10:
        assert b.value == pytest.approx(optimal_loss(space.distances, eps)[0], rel=1e-7)


def test_three_points_by_hand() -> None:
    # Points 0, 1, 3 on a line, eps = 1. Pairs: r*({0,1}) = 1 (no point within < 1 of
    # both) with value 1/(1+e); r*({1,3}) = 2, value 2/(1+e^2); r*({0,3}) = 2 (y = 1),
    # value 2/(1+e^3). All three: r* = 1, N(1) = 1 + e^-1 + e^-2 is the largest N, value
    # (e^-1 + e^-2) / (1 + e^-1 + e^-2) = 0.33476 beats every pair and eq. 8
    # (1 - 1/(1 + 2 e^-3)) = 0.0906.
    space = MetricSpace.from_points([[0.0], [1.0], [3.0]])
    b = lower_bound(space, 1.0)
    expected = (math.exp(-1) + math.exp(-2)) / (1 + math.exp(-1) + math.exp(-2))
    assert b.value == pytest.approx(expected, rel=1e-14)
    assert (b.kind, b.radius, b.witness, b.packing.tolist()) == ("eq7", 1.0, 1, [0, 1, 2])
    assert b.value <= optimal_loss(space.distances, 1.0)[0] + 1e-9
    # q = 2/3: ceil(2) = 2 points must be covered, so k = 1 term is dropped:
    # N_1(w) = sum of the two smallest terms; N_1(1) = e^-1 + e^-2 < 1 -> bound 0.
    bq = lower_bound_quantile(space, 1.0, 2 / 3)
    assert (bq.value, bq.kind, bq.dropped) == (0.0, "none", 1)


def test_radius_is_the_finite_space_radius_not_half_the_separation() -> None:
    # A midpoint makes r* = D/2; without it r* = D.
    line = MetricSpace.from_points([[0.0], [1.0], [2.0]])
    assert packing_radius(line.distances, np.array([0, 2])) == 1.0
    two = MetricSpace.from_points([[0.0], [2.0]])
    assert packing_radius(two.distances, np.array([0, 1])) == 2.0
    assert packing_radius(two.distances, np.array([0])) == math.inf


# ----------------------------------------------------------------- properties
@given(spaces, scales)
def test_never_above_the_optimum_and_never_weaker_than_the_paper(space: MetricSpace, scale: float) -> None:
    d = np.asarray(space.distances)
    eps = scale / space.diameter
    b = lower_bound(space, eps)
    opt, _ = optimal_loss(d, eps)
    assert b.value <= opt * (1 + 1e-7) + 1e-12
    # Paper's two-farthest-points form, with the diameter D and with r* of that pair.
    i, j = np.unravel_index(np.argmax(d), d.shape)
    big_d = d[i, j]
    rho = brute_radius(d, [int(i), int(j)])
    assert b.value >= big_d / 2 * f(eps * big_d) * (1 - 1e-12)
    assert b.value >= rho / 2 * f(eps * rho) * (1 - 1e-12)
    # The reported packing really gives the reported value and radius.
    assert b.radius == pytest.approx(brute_radius(d, b.packing.tolist()), rel=1e-15)
    assert b.value == pytest.approx(brute_value(d, b.packing.tolist(), eps, 0), rel=1e-12)


@given(spaces, scales, st.sampled_from([0.5, 0.7, 0.85]))
def test_quantile_bound_never_above_any_quantile_loss(space: MetricSpace, scale: float, q: float) -> None:
    d = np.asarray(space.distances)
    eps = scale / space.diameter
    b = lower_bound_quantile(space, eps, q)
    n = len(d)
    assert b.dropped == n - math.ceil(q * n - 1e-9)
    # against EM, the worst-case optimum and the exact minimum of L_q over all mechanisms
    assert b.value <= quantile_loss(exponential_matrix(d, eps), d, q) * (1 + 1e-9)
    _, opt_matrix = optimal_loss(d, eps)
    assert b.value <= np.sort(element_losses(opt_matrix, d))[quantile_rank(n, q) - 1] * (1 + 1e-7) + 1e-9
    assert b.value <= min_quantile_loss(d, eps, q) * (1 + 1e-7) + 1e-12
    if b.value > 0:
        assert b.value == pytest.approx(brute_value(d, b.packing.tolist(), eps, b.dropped), rel=1e-12)
    # dropping more terms never helps
    assert b.value <= lower_bound(space, eps).value


@given(spaces, scales)
def test_quantile_one_is_the_worst_case_bound(space: MetricSpace, scale: float) -> None:
    eps = scale / space.diameter
    a, b = lower_bound(space, eps), lower_bound_quantile(space, eps, 1.0)
    assert (a.value, a.kind, a.radius, a.packing.tolist()) == (b.value, b.kind, b.radius, b.packing.tolist())


def test_quantile_bound_is_monotone_in_q_and_positive_on_a_large_space() -> None:
    space = random_space(3, 120, dim=5)
    values = [lower_bound_quantile(space, 1.0, q).value for q in (0.5, 0.8, 0.95, 1.0)]
    assert values == sorted(values)
    assert values[2] > 0  # dropping 6 of many packing terms still leaves a bound
    assert values[-1] == lower_bound(space, 1.0).value


def test_grid_bound_uses_a_large_packing() -> None:
    space = MetricSpace.grid(10, 10, 150.0)
    b = lower_bound(space, 0.004)
    assert isinstance(b, PackingBound) and b.kind == "eq7" and len(b.packing) > 2
    assert b.radius == pytest.approx(brute_radius(np.asarray(space.distances), b.packing.tolist()))
    assert b.as_dict()["value"] == b.value


def test_bad_input_names_the_culprit() -> None:
    space = random_space(0, 4)
    with pytest.raises(ValidationError, match="epsilon"):
        lower_bound(space, 0.0)
    with pytest.raises(ValidationError, match="q"):
        lower_bound_quantile(space, 1.0, 1.5)
    with pytest.raises(ValidationError, match="space"):
        lower_bound(np.eye(3), 1.0)
