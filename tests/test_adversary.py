"""Adversary error and re-identification: brute force over every guess function on small spaces."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from metricdp.adversary import adversary_error, adversary_report, reidentification_probability
from metricdp.errors import ValidationError
from metricdp.mechanisms.exponential import exponential
from metricdp.spaces import MetricSpace


def _brute(m, d, pi):
    n, k = m.shape
    best_err, best_ri = np.inf, 0.0
    for g in itertools.product(range(n), repeat=k):  # a guess for every output
        g = np.array(g)
        err = sum(pi[x] * m[x, y] * d[x, g[y]] for x in range(n) for y in range(k))
        ri = sum(pi[x] * m[x, y] * (g[y] == x) for x in range(n) for y in range(k))
        best_err, best_ri = min(best_err, err), max(best_ri, ri)
    return best_err, best_ri


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("n", "k"), [(2, 2), (3, 3), (4, 4), (3, 2), (2, 4)])
def test_matches_brute_force(seed, n, k):
    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2))
    d = MetricSpace.from_points(pts).distances
    m = rng.random((n, k)) ** 3
    m /= m.sum(axis=1, keepdims=True)
    pi = rng.dirichlet(np.ones(n))
    r = adversary_error(m, d, pi)
    err, ri = _brute(m, d, pi)
    assert r.expected_error == pytest.approx(err, rel=1e-12, abs=1e-15)
    assert r.reidentification == pytest.approx(ri, rel=1e-12)
    assert reidentification_probability(m, pi) == pytest.approx(ri, rel=1e-12)


def test_no_information_mechanism_gives_the_prior_only_values():
    space = MetricSpace.from_distances([[0, 1, 3], [1, 0, 2], [3, 2, 0]])
    pi = np.array([0.2, 0.5, 0.3])
    r = adversary_error(np.full((3, 3), 1 / 3), space.distances, pi)
    assert r.expected_error == pytest.approx((pi @ space.distances).min())
    assert r.reidentification == pytest.approx(0.5)


def test_report_keys_and_units():
    space = MetricSpace.from_points([[48.0, 2.0], [48.1, 2.0], [48.0, 2.2]], metric="haversine")
    m = exponential(space, 0.3)
    rep = adversary_report(m, [0.2, 0.3, 0.5])
    assert rep["unit"] == "km"
    assert set(rep) == {
        "adversary_expected_error", "adversary_reidentification", "prior_only_error",
        "prior_only_reidentification", "expected_loss", "unit", "exact",
    }
    assert rep["adversary_expected_error"] <= rep["prior_only_error"] + 1e-12
    assert rep["adversary_reidentification"] >= rep["prior_only_reidentification"] - 1e-12


def test_bad_prior_and_shapes():
    with pytest.raises(ValidationError, match="prior"):
        adversary_error([[1.0, 0.0], [0.0, 1.0]], [[0, 1], [1, 0]], [0.7, 0.7])
    with pytest.raises(ValidationError, match="distances"):
        adversary_error([[1.0, 0.0], [0.0, 1.0]], [[0, 1, 1], [1, 0, 1], [1, 1, 0]], [0.5, 0.5])


def test_rectangular_mechanism_adversary_guesses_inputs():
    # 2 inputs at distance 1, 3 outputs; the adversary sees y and names an input.
    from metricdp.mechanisms.base import Mechanism
    from metricdp.outputs import OutputSet

    space = MetricSpace.from_points([[0.0], [1.0]])
    ys = OutputSet.from_points(space, [[0.0], [0.5], [1.0]])
    mech = Mechanism.from_matrix([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]], space, 1.0, outputs=ys)
    rep = adversary_report(mech, [0.5, 0.5])
    # y=lo: guess input 0, wrong w.p. 0.2 * 0.5; y=mid: a tie, error 0.15; y=hi: 0.1: total 0.35
    assert rep["adversary_expected_error"] == pytest.approx(0.35)
    assert rep["adversary_reidentification"] == pytest.approx(0.5 * (0.5 + 0.3 + 0.5))
    assert rep["expected_loss"] == pytest.approx(0.35)  # over the cross distances: 0.15 + 0.2
