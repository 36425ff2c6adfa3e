"""Policy graphs (docs/proofs/policy_graphs.md): extended metrics, the audit per component,
block-diagonal builds of every exact family, refusals and mechanism-file round trips."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.audit import audit, epsilon_tight, finite_components, hockey_stick
from metricdp.errors import MechanismFileError, ValidationError
from metricdp.mechanisms import build, registry
from metricdp.mechanisms.base import AUDIT_RTOL
from metricdp.mechanisms.file import load_mechanism
from metricdp.spaces import MetricSpace, check_extended_metric

INF = math.inf


def two_components() -> MetricSpace:
    """a - b (length 1) and c - d (length 2): two components of two nodes."""
    return MetricSpace.from_graph(np.array([[0, 1], [2, 3]]), [1.0, 2.0], labels=list("abcd"), policy=True)


def brute_level(m: np.ndarray, d: np.ndarray) -> float:
    """The mDP level by definition, over the ordered pairs at finite distance and every output."""
    best = 0.0
    n = len(d)
    for u in range(n):
        for v in range(n):
            if u == v or not np.isfinite(d[u, v]):
                continue
            for w in range(m.shape[1]):
                if m[u, w] > 0 and m[v, w] == 0:
                    return INF
                if m[u, w] > 0:
                    best = max(best, math.log(m[u, w] / m[v, w]) / d[u, v])
    return best


# ----------------------------------------------------------------------------- the space
def test_from_graph_default_refuses_a_disconnected_graph_and_policy_accepts_it():
    with pytest.raises(ValidationError, match="not connected: 2 components"):
        MetricSpace.from_graph(np.array([[0, 1], [2, 3]]), [1.0, 2.0])
    space = two_components()
    assert space.policy and space.n_components == 2
    assert space.components.tolist() == [0, 0, 1, 1]
    assert space.distances[0, 1] == 1.0 and space.distances[2, 3] == 2.0
    assert np.isinf(space.distances[0, 2]) and np.isinf(space.distances[3, 1])
    assert space.diameter == INF and space.d_min == 1.0
    assert space.metadata()["policy_graph"]["components"] == 2
    connected = MetricSpace.from_graph(np.array([[0, 1], [1, 2]]), policy=True)
    assert not connected.policy and "policy_graph" not in connected.metadata()


def test_extended_metric_checks():
    good = np.array([[0, 1, INF], [1, 0, INF], [INF, INF, 0]])
    assert check_extended_metric(good).tolist() == good.tolist()
    chain = np.array([[0, 1, INF], [1, 0, 1], [INF, 1, 0]])  # a finite chain joins 0 and 2
    with pytest.raises(ValidationError, match=r"infinite at \('0', '2'\)"):
        check_extended_metric(chain)
    with pytest.raises(ValidationError, match="not finite"):
        check_extended_metric(np.array([[0, np.nan], [np.nan, 0]]))
    triangle = np.array([[0, 1, 5, INF], [1, 0, 1, INF], [5, 1, 0, INF], [INF, INF, INF, 0]])
    with pytest.raises(ValidationError, match="triangle"):
        check_extended_metric(triangle)
    assert finite_components(good)[0] == 2
    with pytest.raises(ValidationError, match="non-zero diagonal"):
        check_extended_metric(np.array([[INF, INF], [INF, 0]]))


# ----------------------------------------------------------------------------- the audit
def test_audit_skips_pairs_at_infinite_distance_hand_computed():
    d = np.array([[0, 1, INF], [1, 0, INF], [INF, INF, 0]])
    m = np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.0, 0.0, 1.0]])
    res = audit(m, d)
    # within {0, 1}: max_w log(M[0, w] / M[1, w]) / 1 = log 2; node 2 is alone (no pair)
    assert res.epsilon == pytest.approx(math.log(2), rel=1e-12)
    assert res.witness in ((0, 1, 0), (1, 0, 1))
    assert (res.components, res.unprotected_pairs) == (2, 2)
    # a finite distance in place of the infinite ones: row 2 has zeros where rows 0, 1 do not
    finite = np.where(np.isinf(d), 10.0, d)
    assert audit(m, finite).epsilon == INF
    # a column mixed inside a component is still infinite
    mixed = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert audit(mixed, d).epsilon == INF and audit(mixed, d).witness[:2] == (1, 0)


def test_hockey_stick_and_tight_level_on_a_policy_graph():
    d = np.array([[0, 1, INF], [1, 0, INF], [INF, INF, 0]])
    m = np.array([[0.75, 0.25, 0.0], [0.25, 0.75, 0.0], [0.0, 0.0, 1.0]])
    hs = hockey_stick(m, d, 0.0)
    assert hs[0, 1] == pytest.approx(0.5) and hs[0, 2] == 1.0 and hs[2, 0] == 1.0  # mass off the other's support
    assert epsilon_tight(m, d, 0.0) == pytest.approx(math.log(3))
    assert epsilon_tight(m, d, 1e-3) == pytest.approx(epsilon_tight(m[:2, :2], d[:2, :2], 1e-3))


def test_exponential_on_two_components_hand_computed():
    space = two_components()
    mech = build("exponential", space, 1.0)
    a = np.array([1.0, math.exp(-0.5)]) / (1 + math.exp(-0.5))  # e^{-eps d / 2}, d = 1
    c = np.array([1.0, math.exp(-1.0)]) / (1 + math.exp(-1.0))  # d = 2
    want = np.zeros((4, 4))
    want[0, :2], want[1, :2] = a, a[::-1]
    want[2, 2:], want[3, 2:] = c, c[::-1]
    np.testing.assert_allclose(mech.matrix, want, rtol=1e-14, atol=0)
    res = mech.audit()
    assert res.epsilon == pytest.approx(0.5, rel=1e-12)  # (1/2) d / d on both components
    assert (res.components, res.unprotected_pairs) == (2, 4)
    assert mech.info["policy_graph"]["components"] == 2
    # losses: an output never released costs nothing (0 * inf = 0)
    assert mech.worst_case_loss() == pytest.approx(2 * c[1])
    assert mech.uniform_losses().tolist() == [INF] * 4


def test_singleton_components_release_themselves():
    space = MetricSpace.from_graph(np.array([[0, 1]]), n=3, policy=True)
    mech = build("exponential", space, 1.0)
    assert mech.matrix[2].tolist() == [0.0, 0.0, 1.0]
    assert mech.info["policy_graph"]["singletons"] == 1


@pytest.mark.parametrize("name", ["madlib", "subsampled-exponential"])
def test_estimated_families_are_refused_with_the_reason(name):
    space = two_components()
    with pytest.raises(ValidationError, match=r"estimated family.*policy graph of 2 components"):
        build(name, space, 1.0)


def test_outputs_are_refused_on_a_policy_graph():
    from metricdp.outputs import OutputSet

    space = two_components()
    outs = OutputSet.from_distances(space, np.ones((4, 2)), ["x", "y"])
    with pytest.raises(ValidationError, match="separate output set"):
        build("exponential", space, 1.0, outputs=outs)


#: Every exact family that builds on a graph's metric alone (lattice/point families refuse a graph).
GRAPH_FAMILIES = ("exponential", "krr", "geometric", "optimal", "spanner", "constopt")


@st.composite
def policy_graphs(draw: st.DrawFn) -> MetricSpace:
    n = draw(st.integers(3, 6))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=len(pairs), unique=True))
    weights = draw(st.lists(st.floats(0.5, 4.0), min_size=len(chosen), max_size=len(chosen)))
    return MetricSpace.from_graph(np.array(chosen), weights, n=n, policy=True)


@settings(max_examples=12)
@given(space=policy_graphs(), eps=st.floats(0.2, 2.0), family=st.sampled_from(GRAPH_FAMILIES))
def test_every_offered_family_audits_at_eps_on_random_policy_graphs(space, eps, family):
    if all(np.bincount(space.components) == 1):
        with pytest.raises(ValidationError, match="no pair is protected"):
            build(family, space, eps)
        return
    mech = build(family, space, eps)
    np.testing.assert_allclose(mech.matrix.sum(axis=1), 1.0, rtol=0, atol=1e-9)
    cross = space.components[:, None] != space.components[None, :]
    assert (mech.matrix[cross] == 0).all()  # never released outside the input's component
    res = mech.audit()
    assert res.satisfies(eps, AUDIT_RTOL)
    assert res.components == space.n_components
    oracle = brute_level(mech.matrix / mech.matrix.sum(axis=1, keepdims=True), space.distances)
    assert res.epsilon == pytest.approx(oracle, rel=1e-9, abs=1e-12)


@settings(max_examples=25)
@given(space=policy_graphs(), seed=st.integers(0, 2**32 - 1))
def test_audit_equals_the_definition_on_random_matrices(space, seed):
    rng = np.random.default_rng(seed)
    m = rng.random((space.n, space.n)) * (rng.random((space.n, space.n)) < 0.8)
    m[np.arange(space.n), np.arange(space.n)] += 0.1
    res = audit(m, space.distances)
    assert res.epsilon == pytest.approx(brute_level(m, space.distances), rel=1e-9, abs=1e-12)
    pairs = space.n * (space.n - 1) // 2
    inside = sum(k * (k - 1) // 2 for k in np.bincount(space.components))
    assert res.unprotected_pairs == pairs - inside


# ----------------------------------------------------------------------------- the file
def _rewrite(path: Path, out: Path, **changes: object) -> None:
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    arrays = {n[:-4]: np.load(__import__("io").BytesIO(b), allow_pickle=False) for n, b in members.items()}
    meta = json.loads(str(arrays["metadata"]))
    for key, value in changes.items():
        if key == "distances":
            arrays["distances"] = value  # type: ignore[assignment]
        else:
            meta["space"][key] = value
            if value is None:
                del meta["space"][key]
    arrays["metadata"] = np.array(json.dumps(meta))
    np.savez(out, **arrays)


def test_mechanism_file_round_trip_with_infinite_distances(tmp_path):
    mech = build("optimal", two_components(), 1.0)
    path = tmp_path / "p.npz"
    mech.save(path)
    back = load_mechanism(path)
    assert back.space.policy and back.space.n_components == 2
    np.testing.assert_array_equal(back.matrix, mech.matrix)
    np.testing.assert_array_equal(back.distances, mech.distances)
    assert back.metadata["space"]["policy_graph"]["components"] == 2
    # infinite distances without the claim are refused, and a false count too
    _rewrite(path, tmp_path / "noclaim.npz", policy_graph=None)
    with pytest.raises(MechanismFileError, match="policy_graph claim"):
        load_mechanism(tmp_path / "noclaim.npz")
    _rewrite(path, tmp_path / "three.npz", policy_graph={"components": 3})
    with pytest.raises(MechanismFileError, match="claims a policy graph of 3 components, but its distances have 2"):
        load_mechanism(tmp_path / "three.npz")
    # the claim cannot turn a pair at finite distance into an unprotected one unnoticed: a chain
    d = np.array(mech.distances)
    d[0, 2] = d[2, 0] = 1.0
    _rewrite(path, tmp_path / "chain.npz", distances=d)
    with pytest.raises(MechanismFileError, match="infinite at"):
        load_mechanism(tmp_path / "chain.npz")


def test_a_finite_file_gets_no_policy_treatment(tmp_path):
    space = MetricSpace.from_graph(np.array([[0, 1], [1, 2]]), [1.0, 2.0])
    mech = build("exponential", space, 1.0)
    mech.save(tmp_path / "f.npz")
    back = load_mechanism(tmp_path / "f.npz")
    assert not back.space.policy and back.audit().components == 1 and back.audit().unprotected_pairs == 0
    assert registry.get("exponential").exact


def test_per_point_parameters_are_restricted_and_renormalised_per_component():
    space = MetricSpace.from_graph(np.array([[0, 1], [2, 3], [3, 4]]), [1.0, 2.0, 1.0], policy=True)
    prior = np.array([0.1, 0.3, 0.2, 0.3, 0.1])
    mech = build("optimal", space, 1.0, objective="expected", prior=prior)
    for idx in ([0, 1], [2, 3, 4]):
        part = prior[idx] / prior[idx].sum()
        alone = build("optimal", space.subspace(np.array(idx)), 1.0, objective="expected", prior=part)
        np.testing.assert_array_equal(mech.matrix[np.ix_(idx, idx)], alone.matrix)
    # the expected loss under the whole prior is the prior-weighted sum of the blocks' (0 * inf = 0 across)
    assert np.isfinite(mech.expected_loss(prior))


@given(labels=st.lists(st.integers(0, 3), min_size=2, max_size=9), seed=st.integers(0, 2**32 - 1))
def test_finite_components_recovers_the_blocks_and_refuses_a_bridge(labels, seed):
    rng = np.random.default_rng(seed)
    comp = np.array(labels)
    x = rng.random(len(comp)) + np.arange(len(comp))  # distinct points on a line: a metric
    d = np.abs(x[:, None] - x[None, :])
    d[comp[:, None] != comp[None, :]] = INF
    count, found = finite_components(d)
    assert count == len(set(labels))
    assert ((found[:, None] == found[None, :]) == (comp[:, None] == comp[None, :])).all()
    check_extended_metric(d)
    cross = np.argwhere(comp[:, None] != comp[None, :])
    if len(cross) and count == 2 and min(np.bincount(found)) >= 2:  # a bridge makes a chain to an inf pair
        i, j = cross[0]
        d[i, j] = d[j, i] = 1.0
        with pytest.raises(ValidationError, match="infinite at"):
            finite_components(d)
