"""The greedy feasible flow of the column-generation pricing (lp/greedy_cover.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.lp import colgen, greedy_cover
from metricdp.lp.colgen import cover, covers
from metricdp.lp.greedy_cover import greedy_flow
from tests.lp.test_colgen import random_distances, random_pricing


def _order(factor: np.ndarray) -> np.ndarray:
    return np.argsort(factor, axis=1, kind="stable")


def test_greedy_flow_by_hand():
    # a line 0 - 1 - 2 - 3, price e^d: deficits 1 (at 1) and 0.5 (at 3), surpluses e/2 at 0
    # and e at 2. The larger deficit goes first and takes its nearest surplus first (a tie
    # between 0 and 2 at distance 1, broken by index): all of 0's e/2 buys 1/2, then 1/2
    # from 2 costs e/2 of its e; deficit 3 then buys the remaining e/2 of 2 at price e:
    # 1/2, its whole need
    d = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
    factor = np.exp(d)
    g = np.array([0.5 * math.e, -1.0, math.e, -0.5])
    k, v, t = greedy_flow(g, 0.0, _order(factor), factor)
    assert list(zip(k.tolist(), v.tolist(), strict=True)) == [(1, 0), (1, 2), (3, 2)]
    np.testing.assert_allclose(t, [0.5, 0.5, 0.5], rtol=1e-15)
    assert cover(g, factor, nearest=0).shortfall <= 1e-15


def test_greedy_flow_leaves_the_deficits_below_the_floor():
    d = np.abs(np.subtract.outer(np.arange(3.0), np.arange(3.0)))
    factor = np.exp(d)
    k, _, _ = greedy_flow(np.array([-1e-3, 5.0, -1.0]), 1e-2, _order(factor), factor)
    assert k.tolist() == [2]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 9), st.floats(0.05, 5.0))
def test_greedy_flow_is_feasible_and_a_valid_cover(seed, n, lam):
    # every deficit receives at most its need and every surplus pays at most its capacity;
    # the fitted greedy cover never claims less shortfall than the exact maximum flow
    factor, g = random_pricing(seed, n, lam)
    k, v, t = greedy_flow(g, 0.0, _order(factor), factor)
    assert np.all(t > 0) and np.all(g[k] < 0) and np.all(g[v] > 0)
    assert np.all(np.bincount(k, weights=t, minlength=n) <= np.maximum(-g, 0) * (1 + 1e-12))
    assert np.all(np.bincount(v, weights=factor[k, v] * t, minlength=n) <= np.maximum(g, 0) * (1 + 1e-12))
    greedy = colgen._greedy_cover(g, factor, _order(factor), 0.0, 0.0)
    exact = cover(g, factor, nearest=0)
    assert greedy.shortfall >= exact.shortfall - 1e-12
    assert np.all(np.bincount(greedy.deficit, weights=greedy.flow, minlength=n) <= np.maximum(-g, 0))
    assert np.all(np.bincount(greedy.surplus, weights=factor[greedy.deficit, greedy.surplus] * greedy.flow,
                              minlength=n) <= np.maximum(g, 0))


def test_the_compiled_loop_matches_the_reference():
    kernel = greedy_cover.load_kernel()
    if kernel is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(5)
    factor = np.exp(0.7 * random_distances(5, 30))
    order = _order(factor)
    for _ in range(20):
        g = rng.normal(size=30) + rng.uniform(-0.5, 1)
        bufs = [np.empty(900, np.intp), np.empty(900, np.intp), np.empty(900)]
        ref = [np.empty(900, np.intp), np.empty(900, np.intp), np.empty(900)]
        count = kernel(g, 1e-3, order, factor, *bufs)
        assert count == greedy_cover._greedy(g, 1e-3, order, factor, *ref)
        for a, b in zip(bufs, ref, strict=True):
            np.testing.assert_array_equal(a[:count], b[:count])


def test_covers_asks_the_lp_only_where_the_greedy_flow_falls_short(monkeypatch):
    # one column the greedy flow covers, one it cannot (no surplus at all): only the
    # second reaches the flow LPs
    d = np.abs(np.subtract.outer(np.arange(3.0), np.arange(3.0)))
    factor = np.exp(d)
    g = np.array([[-1.0, -1.0], [10.0, -1.0], [10.0, -1.0]])
    seen = []
    real = colgen._flows

    def spy(problems, nearest, limit=None):
        seen.append(len(problems))
        return real(problems, nearest, limit)

    monkeypatch.setattr(colgen, "_flows", spy)
    found = covers(g, factor, tol=0.0)
    assert found[0].shortfall <= 1e-15 and found[1].shortfall == pytest.approx(3.0)
    assert seen == []  # the second column has no surplus: nothing for an LP to ship either
    g[:, 1] = [-1.0, -1.5, 0.5]  # a small surplus: the greedy flow ships all of it to its neighbour
    found = covers(g, factor, tol=0.0)  # (the larger deficit, first), and the LPs cannot do better
    assert found[1].shortfall == pytest.approx(2.5 - 0.5 / math.e, rel=1e-12)
    assert seen and all(s == 1 for s in seen)
