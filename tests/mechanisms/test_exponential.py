"""Exponential and weighted exponential mechanisms (Imola et al., Sec. 3.1 and Prop. 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.audit import audit_epsilon
from metricdp.errors import PrivacyViolationError, ValidationError
from metricdp.mechanisms.base import certify
from metricdp.mechanisms.exponential import exponential, exponential_matrix, weighted_exponential
from metricdp.mechanisms.file import load_mechanism
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, brute_force_epsilon, random_space

# A 3-point path 0 -1- 1 -2- 2, d(0,2) = 3.
D3 = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])


def space3() -> MetricSpace:
    return MetricSpace.from_distances(D3, labels=["a", "b", "c"])


def test_exponential_hand_computed():
    m = exponential(space3(), 1.0)
    e = math.exp
    row0 = [1.0, e(-0.5), e(-1.5)]
    row1 = [e(-0.5), 1.0, e(-1.0)]
    row2 = [e(-1.5), e(-1.0), 1.0]
    expected = np.array([np.array(r) / sum(r) for r in (row0, row1, row2)])
    np.testing.assert_allclose(m.matrix, expected, rtol=1e-14)
    assert m.name == "exponential" and m.epsilon == 1.0
    assert dict(m.params) == {"calibrated": False, "inner_epsilon": 1.0}
    assert m.info["epsilon_audit"] <= 1.0
    assert_private(m)


def test_weighted_exponential_hand_computed():
    m = weighted_exponential(space3(), 2.0, [1.0, 2.0, 4.0])
    e = math.exp
    row0 = [1.0, 2 * e(-1.0), 4 * e(-3.0)]
    row2 = [e(-3.0), 2 * e(-2.0), 4.0]
    np.testing.assert_allclose(m.matrix[0], np.array(row0) / sum(row0), rtol=1e-14)
    np.testing.assert_allclose(m.matrix[2], np.array(row2) / sum(row2), rtol=1e-14)
    assert m.name == "weighted-exponential"
    assert m.params["weights"] == [1.0, 2.0, 4.0]
    assert_private(m)


def test_constant_weights_give_the_exponential_mechanism():
    space = random_space(3, 8)
    a = exponential(space, 0.8).matrix
    b = weighted_exponential(space, 0.8, np.full(8, 7.5)).matrix
    np.testing.assert_allclose(a, b, rtol=1e-13)


def test_matrix_is_stable_for_extreme_weights_and_distances():
    d = np.array([[0.0, 1e3], [1e3, 0.0]])
    m = exponential_matrix(d, 1.0, weights=[1e300, 1e-300])
    assert np.all(np.isfinite(m))
    np.testing.assert_allclose(m.sum(axis=1), 1.0)
    # row 1: weights ratio 1e600 vs exp(-500): the first column still dominates
    assert m[1, 0] == pytest.approx(1.0) and m[0, 0] == pytest.approx(1.0)


def random_graph_space(seed: int, n: int) -> MetricSpace:
    g = np.random.default_rng(seed)
    tree = [(int(g.integers(0, i)), i) for i in range(1, n)]  # connected
    extra = [tuple(int(x) for x in g.choice(n, 2, replace=False)) for _ in range(n)]
    edges = np.array(tree + extra, dtype=np.int64)
    return MetricSpace.from_graph(edges, g.uniform(0.1, 3.0, len(edges)), n=n)


spaces = st.one_of(
    st.builds(random_space, st.integers(0, 10_000), st.integers(2, 9), st.integers(1, 4), st.booleans()),
    st.builds(random_graph_space, st.integers(0, 10_000), st.integers(2, 9)),
)


@given(space=spaces, eps=st.floats(0.05, 5.0), seed=st.integers(0, 10_000))
def test_pass_the_audit_on_random_spaces(space, eps, seed):
    w = np.random.default_rng(seed).lognormal(0.0, 2.0, space.n)
    for mech in (exponential(space, eps), weighted_exponential(space, eps, w)):
        got = brute_force_epsilon(np.asarray(mech.matrix), np.asarray(space.distances))
        assert got <= eps * (1 + 1e-12)
        assert mech.info["epsilon_audit"] == pytest.approx(got, rel=1e-9, abs=1e-12)


@given(space=spaces, eps=st.floats(0.05, 5.0))
def test_a_perturbed_matrix_fails_the_audit(space, eps):
    m = np.array(exponential(space, eps).matrix)
    # Move most of row 0's mass on column 1 to its diagonal: M[1,1] / M'[0,1] then
    # exceeds exp(eps d(0,1)) by far, and row 0 still sums to 1.
    c = math.exp(-3 * eps * space.diameter)
    moved = m[0, 1] * (1 - c)
    m[0, 1] -= moved
    m[0, 0] += moved
    assert audit_epsilon(m, space.distances) > eps * (1 + 1e-9)
    assert brute_force_epsilon(m, np.asarray(space.distances)) > eps
    with pytest.raises(PrivacyViolationError, match="refusing"):
        certify(m, space, eps, "perturbed")


def test_a_tiny_perturbation_of_a_tight_matrix_fails():
    """On two points EM at 2 eps is exactly eps-mDP; moving 1e-7 of mass breaks it."""
    space = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
    m = exponential_matrix(space.distances, 2.0)
    assert audit_epsilon(m, space.distances) == pytest.approx(1.0, rel=1e-12)
    m[0] += [1e-7, -1e-7]
    assert audit_epsilon(m, space.distances) > 1.0 * (1 + 1e-9)
    with pytest.raises(PrivacyViolationError):
        certify(m, space, 1.0, "perturbed")


@given(seed=st.integers(0, 10_000), n=st.integers(3, 10), eps=st.floats(0.1, 3.0))
def test_calibrated_passes_and_has_no_higher_loss(seed, n, eps):
    space = random_space(seed, n, dim=2, clustered=bool(seed % 2))
    w = np.random.default_rng(seed).uniform(0.5, 2.0, n)
    pairs = [
        (exponential(space, eps), exponential(space, eps, calibrate=True)),
        (weighted_exponential(space, eps, w), weighted_exponential(space, eps, w, calibrate=True)),
    ]
    for plain, cal in pairs:
        assert cal.params["calibrated"] is True
        assert eps <= cal.params["inner_epsilon"] <= 2 * eps
        assert brute_force_epsilon(np.asarray(cal.matrix), np.asarray(space.distances)) <= eps * (1 + 1e-12)
        assert np.all(cal.element_losses() <= plain.element_losses() + 1e-12)
        assert cal.info["calibration"]["epsilon_audit"] <= eps


def test_calibration_on_two_points_reaches_twice_epsilon():
    space = MetricSpace.from_distances([[0.0, 2.0], [2.0, 0.0]])
    m = exponential(space, 0.5, calibrate=True)
    assert m.params["inner_epsilon"] == pytest.approx(1.0, rel=1e-5)
    assert m.info["epsilon_audit"] <= 0.5


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf"), "x"])
def test_bad_epsilon(eps):
    with pytest.raises(ValidationError, match="epsilon"):
        exponential(space3(), eps)
    with pytest.raises(ValidationError, match="epsilon"):
        weighted_exponential(space3(), eps, [1, 1, 1])


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([1.0, 2.0], r"weights must have shape \(3,\)"),
        ([[1.0, 2.0, 3.0]], r"weights must have shape \(3,\)"),
        ([1.0, 0.0, 3.0], r"weights\[1\] = 0\.0"),
        ([1.0, 2.0, -3.0], r"weights\[2\] = -3\.0"),
        ([float("nan"), 2.0, 3.0], r"weights\[0\] = nan"),
        (["a", "b", "c"], "weights must be a numeric vector"),
    ],
)
def test_bad_weights_name_the_culprit(weights, match):
    with pytest.raises(ValidationError, match=match):
        weighted_exponential(space3(), 1.0, weights)


def test_underflow_is_a_clear_error():
    space = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(ValidationError, match="underflows"):
        exponential(space, 2000.0)


def test_file_round_trip(tmp_path):
    m = weighted_exponential(space3(), 1.0, [1.0, 2.0, 3.0], calibrate=True)
    m.save(tmp_path / "m.npz")
    back = load_mechanism(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.matrix, m.matrix)
    assert back.name == m.name and dict(back.params) == dict(m.params)


# ----------------------------------------------------------------------------- a separate output set
def test_outputs_hand_computed():
    # X = {0, 1} on a line, Y = {0, 0.5, 1}, eps = 2: M[x, y] ~ exp(-d(x, y)),
    # so M(0) ~ (1, e^-0.5, e^-1) and M(1) its mirror image.
    from metricdp.outputs import OutputSet

    space = MetricSpace.from_points([[0.0], [1.0]], ["a", "b"])
    ys = OutputSet.from_points(space, [[0.0], [0.5], [1.0]], ["lo", "mid", "hi"])
    m = exponential(space, 2.0, outputs=ys)
    row = np.array([1.0, math.exp(-0.5), math.exp(-1.0)])
    np.testing.assert_allclose(m.matrix, [row / row.sum(), row[::-1] / row.sum()], rtol=1e-14)
    assert m.matrix.shape == (2, 3) and m.output_labels == ("lo", "mid", "hi") and m.m == 3
    # the worst ratio is column 0 (or 2): e^1 times the normalisers' ratio 1: eps_audit = 1 = eps / 2
    assert m.audit().epsilon == pytest.approx(1.0, rel=1e-12)
    assert m.worst_case_loss() == pytest.approx((0.5 * row[1] + row[2]) / row.sum(), rel=1e-14)
    assert_private(m)


@given(n=st.integers(2, 7), k=st.integers(1, 6), eps=st.floats(0.05, 5.0), seed=st.integers(0, 2**32 - 1),
       calibrate=st.booleans())
def test_outputs_pass_the_naive_audit(n, k, eps, seed, calibrate):
    from metricdp.outputs import OutputSet

    g = np.random.default_rng(seed)
    space = MetricSpace.from_points(g.normal(size=(n, 2)))
    ys = OutputSet.from_points(space, g.normal(size=(k, 2)))
    m = exponential(space, eps, outputs=ys, calibrate=calibrate)
    assert m.matrix.shape == (n, k)
    assert brute_force_epsilon(np.asarray(m.matrix), space.distances) <= eps * (1 + 1e-9)
    plain = exponential(space, eps, outputs=ys)
    assert m.worst_case_loss() <= plain.worst_case_loss() + 1e-12  # calibration never costs loss


def test_outputs_breaking_the_triangle_inequality_are_refused():
    from metricdp.outputs import OutputSet

    space = MetricSpace.from_points([[0.0], [1.0]], ["a", "b"])
    ys = OutputSet.from_distances(space, [[0.0, 5.0], [1.0, 1.0]], ["near", "far"])
    with pytest.raises(ValidationError, match=r"\|d\('a', 'far'\) - d\('b', 'far'\)\| = 4 x d\('a', 'b'\)"):
        exponential(space, 1.0, outputs=ys)
    ok = OutputSet.from_distances(space, [[0.0, 2.0], [1.0, 1.0]])  # consistent: the ratio is exactly 1
    assert exponential(space, 1.0, outputs=ok).audit().epsilon <= 1.0 * (1 + 1e-9)


def test_outputs_for_another_space_are_refused():
    from metricdp.outputs import OutputSet

    ys = OutputSet.from_distances(space3(), [[0.0], [1.0], [3.0]])
    with pytest.raises(ValidationError, match="distances to 3 inputs"):
        exponential(MetricSpace.grid(1, 2), 1.0, outputs=ys)


def test_calibrate_with_outputs_when_rounding_puts_the_textbook_matrix_at_epsilon():
    """Inputs 1e-3 apart, outputs on a 1e3 grid through them: |d(u,y) - d(v,y)| = d(u,v) for outputs on
    the line through u and v, and rounding puts the textbook matrix a few 1e-10 over epsilon (within the
    audit's slack: calibrate=False is certified). calibrate=True refused it ("lower end lo=1.0 does not
    pass the audit ... choose a smaller lo", a bracket the caller never chose)."""
    from metricdp.outputs import OutputSet

    space = MetricSpace.from_points([[i * 1e-3, j * 1e-3] for i in range(6) for j in range(6)])
    ys = OutputSet.from_points(space, [[i * 1e3, j * 1e3] for i in range(-2, 3) for j in range(-2, 3)])
    plain = exponential(space, 1.0, outputs=ys)
    cal = exponential(space, 1.0, outputs=ys, calibrate=True)
    assert cal.params["inner_epsilon"] >= 1.0 and cal.audit().satisfies(1.0)
    assert cal.worst_case_loss() <= plain.worst_case_loss() * (1 + 1e-12)
