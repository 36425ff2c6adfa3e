"""The independent audit: exact mDP level, witness, zeros, eps_tight, hockey-stick."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp import ValidationError
from metricdp.audit import AuditResult, audit, audit_epsilon, epsilon_tight, hockey_stick
from tests.helpers import brute_force_epsilon, random_space

D2 = np.array([[0.0, 2.0], [2.0, 0.0]])
D3 = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])  # points 0, 1, 3 on a line


def test_two_points_hand_computed():
    # M(0) = (0.8, 0.2), M(1) = (0.2, 0.8), d = 2: the worst ratio is 0.8/0.2 = 4,
    # so eps = log(4) / 2 = log(2).
    m = np.array([[0.8, 0.2], [0.2, 0.8]])
    result = audit(m, D2)
    assert result.epsilon == pytest.approx(math.log(2), rel=1e-14)
    assert result.witness in {(0, 1, 0), (1, 0, 1)}


def test_three_points_hand_computed_with_witness():
    # Candidates log(M[u,w] / M[v,w]) / d(u,v): (u,v,w) = (2,1,2) gives log(0.6/0.1)/2 = 0.896,
    # (1,0,1) gives log(0.5/0.2)/1 = log 2.5 = 0.916, (0,1,0) gives log(0.7/0.4) = 0.560,
    # (2,0,2) gives log(6)/3 = 0.597; the maximum is log 2.5 at (1, 0, 1).
    m = np.array([[0.7, 0.2, 0.1], [0.4, 0.5, 0.1], [0.1, 0.3, 0.6]])
    result = audit(m, D3)
    candidates = {
        (u, v, w): math.log(m[u, w] / m[v, w]) / D3[u, v]
        for u in range(3)
        for v in range(3)
        for w in range(3)
        if u != v
    }
    best = max(candidates, key=candidates.get)
    assert best == (1, 0, 1)
    assert result.epsilon == pytest.approx(math.log(2.5), rel=1e-14)
    assert result.witness == best
    assert audit_epsilon(m, D3) == result.epsilon


def test_constant_rows_are_zero_private():
    m = np.full((3, 3), 1 / 3)
    result = audit(m, D3)
    assert result.epsilon == 0.0
    assert result.witness is None


def test_zero_against_positive_is_infinite():
    m = np.array([[1.0, 0.0], [0.5, 0.5]])  # M[1,1] > 0 = M[0,1]
    result = audit(m, D2)
    assert math.isinf(result.epsilon)
    assert result.witness == (1, 0, 1)


def test_column_of_zeros_is_no_constraint():
    m = np.array([[0.5, 0.5, 0.0], [0.25, 0.75, 0.0], [0.5, 0.5, 0.0]])
    assert audit_epsilon(m, D3) == pytest.approx(math.log(2) / 1, rel=1e-14)  # 0.5/0.25 over d(0,1) = 1


def test_satisfies_has_relative_slack():
    r = AuditResult(1.0 + 5e-10, (0, 1, 0))
    assert r.satisfies(1.0)
    assert not r.satisfies(1.0, rtol=1e-10)
    assert not AuditResult(math.inf, (0, 1, 0)).satisfies(1e9)


@pytest.mark.parametrize(
    ("matrix", "distances", "pattern"),
    [
        (np.ones((1, 3)), D2, "at least 2 rows"),  # (n, m) is fine (a separate output set); n >= 2
        (np.eye(3), D2, r"distances has shape \(2, 2\) but the matrix has 3 rows"),
        (np.array([[1.5, -0.5], [0.5, 0.5]]), D2, "finite and non-negative"),
        (np.eye(2), np.zeros((2, 2)), "positive off the diagonal"),
    ],
)
def test_bad_inputs(matrix, distances, pattern):
    with pytest.raises(ValidationError, match=pattern):
        audit(matrix, distances)


@st.composite
def matrices(draw):
    n = draw(st.integers(2, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, 2))
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    m = g.random((n, n)) ** draw(st.sampled_from([1, 4]))
    if draw(st.booleans()):
        m = 10.0 ** (-300 * g.random((n, n)) ** 3)  # down to 1e-300: the bounds underflow
    if draw(st.booleans()):
        m[g.random((n, n)) < 0.2] = 0.0  # exact zeros: infinities and skipped columns
    m[m.sum(axis=1) == 0, 0] = 1.0
    return m / m.sum(axis=1, keepdims=True), d


@given(matrices())
def test_audit_agrees_with_brute_force(md):
    m, d = md
    expected = brute_force_epsilon(m, d)
    got = audit(m, d)
    if math.isinf(expected):
        assert math.isinf(got.epsilon)
    else:
        assert got.epsilon == pytest.approx(expected, rel=1e-12, abs=1e-15)
        if got.witness is not None:
            u, v, w = got.witness
            assert math.log(m[u, w] / m[v, w]) / d[u, v] == pytest.approx(got.epsilon, rel=1e-12)


# ----------------------------------------------------------------------------- hockey stick and eps_tight
def test_hockey_stick_hand_computed():
    # M = [[0.75, 0.25], [0.25, 0.75]], d = 1, eps = log 2 (t = 2):
    # hs(0,1) = max(0, 0.75 - 2*0.25) + max(0, 0.25 - 2*0.75) = 0.25; same for (1,0); 0 on the diagonal.
    m = np.array([[0.75, 0.25], [0.25, 0.75]])
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(hockey_stick(m, d, math.log(2)), [[0.0, 0.25], [0.25, 0.0]], atol=1e-15)


def test_epsilon_tight_hand_computed_pair():
    # Same M, d = 1, delta = 0.1. With t = e^eps in [1/3, 3], the second term
    # max(0, 0.25 - 0.75 t) is 0, so the divergence is 0.75 - 0.25 t <= 0.1 iff t >= 2.6;
    # the pair (1, 0) is the mirror image. Hence eps_tight = log(2.6) (< log 3 = exact eps).
    m = np.array([[0.75, 0.25], [0.25, 0.75]])
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert epsilon_tight(m, d, 0.1) == pytest.approx(math.log(2.6), rel=1e-12)
    # with d = 2 the same t is reached at half the epsilon
    assert epsilon_tight(m, 2 * d, 0.1) == pytest.approx(math.log(2.6) / 2, rel=1e-12)
    # delta at least the total variation 0.5: no epsilon needed
    assert epsilon_tight(m, d, 0.5) == 0.0


def test_epsilon_tight_delta_zero_equals_audit():
    g = np.random.default_rng(0)
    m = g.random((7, 7))
    m /= m.sum(axis=1, keepdims=True)
    d = np.abs(np.subtract.outer(np.arange(7.0), np.arange(7.0)))
    assert epsilon_tight(m, d, 0.0) == audit_epsilon(m, d)


def test_epsilon_tight_with_zeros():
    # Row 1 puts mass 0.01 where row 0 has none: infinite for delta < 0.01, finite above.
    m = np.array([[0.5, 0.5, 0.0], [0.49, 0.5, 0.01], [0.3, 0.3, 0.4]])
    assert math.isinf(audit_epsilon(m, D3))
    assert math.isinf(epsilon_tight(m, D3, 0.005))
    assert math.isfinite(epsilon_tight(m, D3, 0.5))


def _bisection_tight(m, d, delta):
    """Reference: bisection on eps of max hockey-stick <= delta (monotone in eps)."""
    if hockey_stick(m, d, 0.0).max() <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while hockey_stick(m, d, hi).max() > delta:
        lo, hi = hi, 2 * hi
    for _ in range(100):
        mid = (lo + hi) / 2
        if hockey_stick(m, d, mid).max() > delta:
            lo = mid
        else:
            hi = mid
    return hi


@given(matrices(), st.sampled_from([1e-3, 1e-2, 0.1]))
def test_epsilon_tight_against_bisection_on_hockey_stick(md, delta):
    m, d = md
    got = epsilon_tight(m, d, delta)
    if math.isinf(got):
        # some pair has more than delta of mass where the other has none
        zero = (m[None, :, :] == 0) & (m[:, None, :] > 0)  # [u, v, w]: M[u,w] > 0 = M[v,w]
        assert ((m[:, None, :] * zero).sum(axis=2) > delta).any()
        return
    ref = _bisection_tight(m, d, delta)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-12)
    assert hockey_stick(m, d, got * (1 + 1e-9) + 1e-15).max() <= delta + 1e-12
    assert got <= audit_epsilon(m, d) * (1 + 1e-12)


def test_epsilon_tight_validates_delta():
    with pytest.raises(ValidationError, match="delta must be in"):
        epsilon_tight(np.eye(2), D2, 1.0)


def test_audit_is_precise_when_levels_are_tiny() -> None:
    """log a - log b loses everything when a/b is within 1e-12 of 1; the audit must not.

    Reference: the level of the float matrix computed exactly with 60-digit decimals.
    """
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    d = np.array([[0.0, 1e-7], [1e-7, 0.0]])
    a = 1e-13  # log-ratio far below the resolution of log(M) ~ 1e-16 * |log M|
    p = np.exp(a) / (1 + np.exp(a))
    m = np.array([[p, 1 - p], [1 - p, p]])
    exact = max(
        (Decimal(float(m[u, w])) / Decimal(float(m[v, w]))).ln() / Decimal(float(d[0, 1]))
        for u, v in ((0, 1), (1, 0))
        for w in (0, 1)
    )
    got = audit(m, d)
    assert abs(Decimal(got.epsilon) - exact) <= Decimal("1e-12") * exact
    u, v, w = got.witness
    assert (Decimal(float(m[u, w])) / Decimal(float(m[v, w]))).ln() / Decimal(float(d[0, 1])) == exact


# ----------------------------------------------------------------------------- the bounds behind audit()


def _exact_log_ratio_max(m: np.ndarray) -> np.ndarray:
    """g(u, v) = max_w log(m[u,w] / m[v,w]) in 40-digit decimals (the oracle of the bounds)."""
    from decimal import Decimal, getcontext

    getcontext().prec = 40
    logs = [[Decimal(float(x)).ln() for x in row] for row in m]
    n, k = m.shape
    return np.array([[float(max(logs[u][w] - logs[v][w] for w in range(k))) for v in range(n)] for u in range(n)])


@st.composite
def positive_matrices(draw):
    n = draw(st.integers(2, 7))
    k = draw(st.integers(1, 7))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = draw(st.sampled_from([1.0, 30.0, 300.0, 700.0]))
    return np.exp(-spread * g.random((n, k)) ** draw(st.sampled_from([1, 3])))


@given(positive_matrices())
def test_log_ratio_bounds_are_upper_bounds_with_their_margin(m):
    from metricdp.audit import _BOUND_MARGIN, _log_ratio_bounds

    exact = _exact_log_ratio_max(m)
    bound = _log_ratio_bounds(np.log(m))
    # at least the margin above the exact value (the rounding it covers is < 1e-11) ...
    assert np.all(bound - exact >= _BOUND_MARGIN - 1e-11)
    # ... and never looser than the trivial bound alpha + beta (plus the margin)
    logm = np.log(m)
    ell = logm - logm.mean(axis=0)
    trivial = ell.max(axis=1)[:, None] + (-ell).max(axis=1)[None, :]
    assert np.all(bound <= trivial + _BOUND_MARGIN + 1e-9)


def test_log_ratio_bounds_are_tight_without_underflow():
    # entries in [e^-3, 1]: no term underflows at p = 32, so the bound is within
    # log(k) / 32 of g (the power mean of k terms exceeds their maximum by at most k^(1/p))
    g = np.random.default_rng(3)
    m = np.exp(-3 * g.random((30, 40)))
    from metricdp.audit import _log_ratio_bounds

    gap = _log_ratio_bounds(np.log(m)) - _exact_log_ratio_max(m)
    assert gap.max() <= math.log(40) / 32 + 2e-9
    assert gap.min() >= 0


def _oracle_epsilon(m: np.ndarray, d: np.ndarray) -> float:
    """Every ordered pair through the precise pair levels (no bounds, no pruning)."""
    from metricdp.audit import _precise_pair_levels

    n = len(m)
    us, vs = np.nonzero(~np.eye(n, dtype=bool))
    lev, _ = _precise_pair_levels(m[us], m[vs], d[us, vs])
    return max(0.0, float(lev.max()))


def _euclidean(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, 5))
    return np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))


@pytest.mark.slow
@pytest.mark.parametrize("dense", [False, True])
def test_audit_of_larger_matrices_matches_the_unpruned_oracle(monkeypatch, dense):
    """n = 240: the pruned scan (a generic matrix) and the dense pass (k-RR on the discrete
    metric: every pair is at the level) both give the exact level."""
    import sys

    audit_module = sys.modules["metricdp.audit"]  # the package re-exports the function audit
    n = 240
    if dense:
        d = 1.0 - np.eye(n)
        m = np.ones((n, n)) + (np.e - 1) * np.eye(n)
    else:
        d = _euclidean(n, 5)
        m = np.exp(-0.5 * d) * np.random.default_rng(1).uniform(0.5, 1.5, (n, n))
    m /= m.sum(axis=1, keepdims=True)
    monkeypatch.setattr(audit_module, "_workers", lambda: 2)  # the branch must not depend on the cores
    calls = []
    real = audit_module._pair_levels
    monkeypatch.setattr(audit_module, "_pair_levels", lambda *a: calls.append(1) or real(*a))
    got = audit(m, d)
    assert bool(calls) == dense
    assert got.epsilon == pytest.approx(_oracle_epsilon(m, d), rel=1e-14)
    u, v, w = got.witness
    assert math.log(m[u, w] / m[v, w]) / d[u, v] == pytest.approx(got.epsilon, rel=1e-12)


@pytest.mark.parametrize("pairs_per_chunk", [1, 7, 64])
@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("kind", ["generic", "near-ties", "exponential"])
def test_audit_scan_is_exact_at_every_chunk_size(monkeypatch, pairs_per_chunk, workers, kind):
    """Tiny chunks make the pruned scan take many steps (and stop early) on n = 50."""
    import sys

    audit_module = sys.modules["metricdp.audit"]
    n = 50
    d = _euclidean(n, 11)
    g = np.random.default_rng(4)
    if kind == "generic":
        m = g.random((n, n)) ** 3
    elif kind == "near-ties":
        m = (np.ones((n, n)) + (np.e - 1) * np.eye(n)) * (1 + 1e-13 * g.random((n, n)))
        d = 1.0 - np.eye(n)
    else:
        m = np.exp(-60.0 * d)  # entries far below 1e-300
    m /= m.sum(axis=1, keepdims=True)
    monkeypatch.setattr(audit_module, "_BLOCK_ELEMENTS", 2 * n * pairs_per_chunk)
    monkeypatch.setattr(audit_module, "_workers", lambda: workers)
    got = audit(m, d)
    assert got.epsilon == pytest.approx(_oracle_epsilon(m, d), rel=1e-13)


def test_audit_under_strict_floating_point_errors():
    """Underflow in the bounds is expected and accounted for: it must not raise."""
    d = _euclidean(40, 2)
    m = np.exp(-700 * np.random.default_rng(0).random((40, 40)))
    with np.errstate(all="raise"):
        got = audit(m, d)
    assert got.epsilon == pytest.approx(_oracle_epsilon(m, d), rel=1e-13)


# ----------------------------------------------------------------------------- normalize=True
def test_normalize_audits_the_row_normalised_matrix_by_hand():
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    e = np.e
    m = np.array([[2 * e, 2.0], [1.0, e]]) / (1 + e)  # row 0 doubled
    # as given: log(2e / 1) = 1 + log 2; normalised: exactly the 1-mDP matrix
    assert audit(m, d).epsilon == pytest.approx(1 + np.log(2), rel=1e-12)
    assert audit(m, d, normalize=True).epsilon == pytest.approx(1.0, rel=1e-12)


def test_normalize_sees_a_row_sum_off_by_rounding():
    """Rows equal as floats in column 0 differ once row 0's extra 2**-52 is normalised away."""
    n = 3
    d = np.ones((n, n)) - np.eye(n)
    m = np.full((n, n), 0.25)
    m[:, 2] = 0.5
    m[0, 2] = 0.5 + 2**-52  # row 0 sums to 1 + 2**-52 exactly
    plain = audit(m, d)
    assert plain.epsilon == pytest.approx(math.log1p(2.0**-51), rel=1e-9)
    assert plain.witness[0] == 0 and plain.witness[2] == 2
    # realized: M[1,0] / M'[0,0] = 1 + 2**-52 (column 2 gives (1 + 2**-51) / (1 + 2**-52), less)
    normal = audit(m, d, normalize=True)
    assert normal.epsilon == pytest.approx(math.log1p(2.0**-52), rel=1e-9)
    assert normal.witness[1] == 0 and normal.witness[2] in (0, 1)


def test_row_log_sums_exact():
    from fractions import Fraction

    from metricdp.audit import row_log_sums

    rows = np.array([[0.1] * 3 + [0.7], [0.5, 0.5 + 2**-52, 1e-300, 0.0], [3.0, 4.0, 0.0, 0.0]])
    got = row_log_sums(rows)
    for u, row in enumerate(rows):
        exact = sum(Fraction(float(x)) for x in row)
        delta = float(exact - 1)
        want = np.log1p(delta) if abs(delta) < 0.5 else np.log(float(exact))
        assert got[u] == pytest.approx(want, rel=1e-14, abs=0)
    with pytest.raises(ValidationError, match=r"row 0 sums to 0\.0"):
        row_log_sums(np.zeros((2, 2)))


@given(st.integers(2, 6), st.integers(0, 10**6))
def test_normalize_matches_brute_force_on_normalised_rows(n, seed):
    g = np.random.default_rng(seed)
    space = random_space(seed, n)
    m = g.random((n, n)) + 0.05
    m *= g.uniform(0.5, 2.0, size=(n, 1))  # rows far from summing to 1
    want = brute_force_epsilon(m / m.sum(axis=1, keepdims=True), space.distances)
    got = audit(m, space.distances, normalize=True).epsilon
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


# ----------------------------------------------------------------------------- rectangular (a separate output set)
@st.composite
def rectangular(draw):
    n, k = draw(st.integers(2, 6)), draw(st.integers(1, 7))
    g = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = g.normal(size=(n, 2))
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    m = g.random((n, k)) ** draw(st.sampled_from([1, 4]))
    if draw(st.booleans()):
        m = 10.0 ** (-300 * g.random((n, k)) ** 3)
    if draw(st.booleans()):
        m[g.random((n, k)) < 0.2] = 0.0
    m[m.sum(axis=1) == 0, 0] = 1.0
    return m / m.sum(axis=1, keepdims=True), d


@given(rectangular())
def test_rectangular_audit_agrees_with_brute_force(md):
    m, d = md
    expected = brute_force_epsilon(m, d)
    got = audit(m, d)
    if math.isinf(expected):
        assert math.isinf(got.epsilon)
    else:
        assert got.epsilon == pytest.approx(expected, rel=1e-12, abs=1e-15)
        if got.witness is not None:
            u, v, w = got.witness
            assert w < m.shape[1]
            assert math.log(m[u, w] / m[v, w]) / d[u, v] == pytest.approx(got.epsilon, rel=1e-12)


@given(rectangular(), st.sampled_from([0.0, 1e-3, 0.05]))
def test_rectangular_hockey_and_tight_against_brute_force(md, delta):
    m, d = md
    n = m.shape[0]
    eps = 0.7
    want = np.array([[np.maximum(m[u] - np.exp(eps * d[u, v]) * m[v], 0).sum() for v in range(n)] for u in range(n)])
    np.testing.assert_allclose(hockey_stick(m, d, eps), want, atol=1e-12)
    tight = epsilon_tight(m, d, delta)
    if math.isfinite(tight):  # the divergence at eps_tight is <= delta, and just below it is not
        assert hockey_stick(m, d, tight * (1 + 1e-9) + 1e-12).max() <= delta + 1e-9
        if tight > 1e-9:
            assert hockey_stick(m, d, tight * (1 - 1e-6)).max() > delta - 1e-12


def test_rectangular_hand_computed():
    # 2 inputs at distance 2, 3 outputs: the worst ratio is column 2, 0.6 / 0.1 = 6, so eps = log(6) / 2.
    m = np.array([[0.2, 0.2, 0.6], [0.5, 0.4, 0.1]])
    r = audit(m, D2)
    assert r.epsilon == pytest.approx(math.log(6) / 2, rel=1e-14) and r.witness == (0, 1, 2)
    assert audit(np.array([[1.0], [1.0]]), D2).epsilon == 0.0  # one output: nothing to distinguish


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 5), k=st.sampled_from([1, 2, 40, 300]), seed=st.integers(0, 2**32 - 1),
       kind=st.sampled_from(["plain", "spread", "subnormal", "dead column", "near one"]),
       normalize=st.booleans())
def test_rectangular_audit_on_adversarial_matrices(n, k, seed, kind, normalize):
    """m = 1, m >> n, subnormal entries, all-zero columns, ratios within ulps of 1, with and without
    normalisation, against a brute force over every triple (the row sums taken exactly)."""
    from fractions import Fraction

    g = np.random.default_rng(seed)
    x = g.normal(size=(n, 2))
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    m = {"plain": lambda: g.random((n, k)) + 1e-3,
         "spread": lambda: np.exp(-740 * g.random((n, k))),
         "subnormal": lambda: np.where(g.random((n, k)) < 0.5, 5e-324, 1e-320) * (1 + np.arange(k)),
         "dead column": lambda: np.where(np.arange(k) % 3 == 1, 0.0, g.random((n, k)) + 0.1),
         "near one": lambda: np.ones((n, k)) * (1 + 1e-15 * g.integers(0, 4, (n, k)))}[kind]()
    logs = np.log(np.where(m > 0, m, 1.0))
    if normalize:
        logs -= np.array([math.log(sum(Fraction(float(v)) for v in row)) for row in m])[:, None]
    off = ~np.eye(n, dtype=bool)
    live = (m > 0).all(axis=0)
    gaps = (logs[:, None, live] - logs[None, :, live]).max(axis=2) if live.any() else np.zeros((n, n))
    want = max(0.0, float((gaps[off] / d[off]).max()))
    got = audit(m, d, normalize=normalize)
    # the brute force's own rounding: a few ulps of |log m| (<= 745), over the smallest distance
    assert got.epsilon == pytest.approx(want, rel=1e-9, abs=1e-12 * 745 / d[off].min())
    if got.witness is not None:
        assert got.witness[2] < k and live[got.witness[2]]
