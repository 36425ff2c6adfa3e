"""Bayesian remapping: never raises expected loss (hypothesis), audits at epsilon, hand-computed cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.adversary import adversary_error
from metricdp.audit import audit
from metricdp.errors import ValidationError
from metricdp.mechanisms.exponential import exponential
from metricdp.mechanisms.krr import krr
from metricdp.remap import bayesian_remap, posterior_costs, remap_targets
from metricdp.spaces import MetricSpace

LINE = MetricSpace.from_distances([[0, 1, 2], [1, 0, 1], [2, 1, 0]])


@st.composite
def cases(draw):
    n = draw(st.integers(2, 6))
    coords = draw(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=n, max_size=n, unique=True))
    space = MetricSpace.from_points(np.array(coords, dtype=float))
    eps = draw(st.floats(0.05, 3.0))
    raw = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    if raw.sum() == 0:
        raw[0] = 1.0
    kind = draw(st.sampled_from(["exponential", "krr"]))
    return space, eps, raw / raw.sum(), kind


@settings(max_examples=60, deadline=None)
@given(cases())
def test_remap_never_raises_expected_loss_and_audits_at_epsilon(case):
    space, eps, prior, kind = case
    mech = exponential(space, eps) if kind == "exponential" else krr(space, eps)
    remapped = bayesian_remap(mech, prior)
    before, after = mech.expected_loss(prior), remapped.expected_loss(prior)
    assert after <= before * (1 + 1e-12) + 1e-15
    assert audit(remapped.matrix, space.distances).epsilon <= eps * (1 + 1e-9)
    assert remapped.epsilon == mech.epsilon
    assert remapped.info["remap"]["expected_loss_after"] == pytest.approx(after, rel=1e-12, abs=1e-15)
    # the remap is the Bayes-optimal adversary's guess: same expected error
    assert adversary_error(mech.matrix, space.distances, prior).expected_error == pytest.approx(
        after, rel=1e-9, abs=1e-12
    )


def test_remap_is_the_best_deterministic_post_processing_brute_force():
    mech = exponential(LINE, 0.7)
    prior = np.array([0.6, 0.1, 0.3])
    remapped = bayesian_remap(mech, prior)
    best = min(
        prior @ np.einsum("ij,ij->i", mech.matrix @ np.eye(3)[list(f)], LINE.distances)
        for f in itertools.product(range(3), repeat=3)
    )
    assert remapped.expected_loss(prior) == pytest.approx(best, rel=1e-12)


def test_hand_computed_two_points():
    # krr on 2 points at distance 1, eps = log 3: M = [[3/4, 1/4], [1/4, 3/4]].
    space = MetricSpace.from_distances([[0, 1], [1, 0]])
    mech = krr(space, np.log(3.0))
    # prior (0.9, 0.1): C[y=1, z=0] = 0.1 * 3/4 * 1 = 0.075 < C[1, 1] = 0.9 * 1/4 = 0.225 -> everything to 0
    r = bayesian_remap(mech, [0.9, 0.1])
    assert r.info["remap"]["targets"] == [0, 0]
    np.testing.assert_allclose(r.matrix, [[1, 0], [1, 0]])
    assert r.expected_loss([0.9, 0.1]) == pytest.approx(0.1)
    assert mech.expected_loss([0.9, 0.1]) == pytest.approx(0.25)
    # uniform prior: nothing moves (y is kept on ties and wins here)
    assert bayesian_remap(mech, [0.5, 0.5]).info["remap"]["targets"] == [0, 1]


def test_posterior_costs_and_targets_by_hand():
    c = posterior_costs([[0.5, 0.5], [0.0, 1.0]], [0.5, 0.5], [[0, 2], [2, 0]])
    # C[y, z] = sum_x pi(x) M[x, y] l(x, z)
    np.testing.assert_allclose(c, [[0.0, 0.5], [1.0, 0.5]])
    assert remap_targets(c).tolist() == [0, 1]
    assert remap_targets([[1.0, 1.0], [0.5, 0.5]]).tolist() == [0, 1]  # ties keep y
    assert remap_targets([[1.0, 0.5, 0.5], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]).tolist() == [1, 0, 2]


def test_custom_loss():
    mech = exponential(LINE, 0.5)
    sq = LINE.distances**2
    r = bayesian_remap(mech, [1 / 3] * 3, loss=sq)
    assert r.info["remap"]["loss"] == "custom"
    assert r.info["remap"]["expected_loss_after"] <= r.info["remap"]["expected_loss_before"]


def test_saved_and_reloaded(tmp_path):
    from metricdp.mechanisms.file import load_mechanism

    r = bayesian_remap(exponential(LINE, 0.5), [0.5, 0.3, 0.2])
    r.save(tmp_path / "r.npz")
    back = load_mechanism(tmp_path / "r.npz")
    np.testing.assert_array_equal(back.matrix, r.matrix)
    assert back.name == "exponential+remap"


@pytest.mark.parametrize(
    ("prior", "loss", "match"),
    [
        ([0.5, 0.5], None, "prior"),
        ([0.5, 0.6, -0.1], None, "prior"),
        ([1 / 3] * 3, np.ones((2, 3)), "loss"),
        ([1 / 3] * 3, -np.ones((3, 3)), "loss"),
    ],
)
def test_bad_arguments(prior, loss, match):
    with pytest.raises(ValidationError, match=match):
        bayesian_remap(exponential(LINE, 0.5), prior, loss=loss)


# ----------------------------------------------------------------------------- a separate output set
@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 6), k=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_rectangular_remap_keeps_epsilon_and_never_raises_the_loss(n, k, seed):
    from metricdp.outputs import OutputSet

    g = np.random.default_rng(seed)
    space = MetricSpace.from_points(g.normal(size=(n, 2)))
    ys = OutputSet.from_points(space, g.normal(size=(k, 2)))
    mech = exponential(space, 1.0, outputs=ys)
    pi = g.dirichlet(np.ones(n))
    r = bayesian_remap(mech, pi)
    assert r.matrix.shape == (n, k) and r.output_labels == mech.output_labels
    assert audit(r.matrix, space.distances).satisfies(1.0)
    assert r.expected_loss(pi) <= mech.expected_loss(pi) + 1e-12
    # brute force: the best output for each release, under the prior, over the cross distances
    joint = pi[:, None] * np.asarray(mech.matrix)
    for y, z in enumerate(r.info["remap"]["targets"]):
        costs = joint[:, y] @ ys.distances
        assert costs[z] <= costs.min() + 1e-12
