"""Numeric mechanisms on a grid: hand-computed laws, the exact audit, chi-square of the sampler, refusals."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.mechanisms import build
from metricdp.mechanisms.numeric import (
    MAX_OFFSETS,
    NumericGrid,
    discrete_laplace,
    draw_offsets,
    number_mechanism,
    offset_weights,
    safe_log_ratio,
)
from metricdp.sampling import ExactTable
from metricdp.spaces import MetricSpace


# ----------------------------------------------------------------------------- the grid
def test_grid_labels_are_the_decimals_typed():
    g = NumericGrid("0.1", "0.5", "0.1")
    assert g.n == 5
    assert g.labels(-1, 5) == ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6"]
    assert NumericGrid(-2, 2, 2).labels(0, 2) == ["-2", "0", "2"]
    assert NumericGrid(0, 1, 0.25).labels(0, 4) == ["0.00", "0.25", "0.50", "0.75", "1.00"]


@given(st.integers(-10**6, 10**6), st.integers(1, 300), st.integers(1, 999), st.integers(-8, 3),
       st.integers(-5, 5), st.integers(0, 5))
def test_grid_labels_equal_each_label(a, n, b, exp, below, above):
    """The numpy labels are :meth:`label` one by one (signs, zero, padding, exponents of both signs)."""
    lo, step = Decimal(a).scaleb(exp), Decimal(b).scaleb(exp + (a % 3) - 1)
    g = NumericGrid(lo, lo + n * step, step)
    lo_rank, hi_rank = -below, g.n - 1 + above
    assert g.labels(lo_rank, hi_rank) == [g.label(r) for r in range(lo_rank, hi_rank + 1)]


@pytest.mark.parametrize(("lo", "hi", "step", "fragment"), [
    ("0", "1", "0.3", "not a whole number of steps"),
    ("1", "1", "1", "lo < hi"),
    ("0", "5", "-1", "step must be > 0"),
    ("0", "nan", "1", "finite"),
    ("1_0", "20", "1", "plain decimal"),
    ("x", "20", "1", "must be a number"),
    ("0", "1e9", "1", "at most"),
])
def test_grid_refusals(lo, hi, step, fragment):
    with pytest.raises(ValidationError, match=fragment):
        NumericGrid(lo, hi, step)


def test_ranks_status_by_hand():
    g = NumericGrid("0.1", "0.5", "0.1")
    ranks, status = g.ranks([0.3, 0.35, 0.6, np.nan, 0.1, 0.5, np.inf, 0.0])
    assert ranks.tolist()[:1] + ranks.tolist()[4:6] == [2, 0, 4]
    assert status.tolist() == [0, 3, 2, 1, 0, 0, 1, 2]
    ranks, status = g.ranks([0.0, 7.0, 0.33], clamp=True, snap=True)
    assert ranks.tolist() == [0, 4, 2] and not status.any()


# ------------------------------------------------------------------- the parameter a'
@given(st.floats(min_value=2.0**-40, max_value=800.0))
def test_safe_log_ratio_is_below_by_the_margin_and_short(a):
    a1 = safe_log_ratio(a)
    assert 0 < a1 and a - a1 >= 2.0**-44
    assert a - a1 <= a * 2.0**-32 + 2.0**-43  # the utility cost is negligible
    mant, _ = math.frexp(a1)
    assert (mant * 2.0**33).is_integer()  # a' |z| is exact for |z| < 2**20


# --------------------------------------------------------------------- laws by hand
def test_clamped_law_by_hand_on_three_points():
    m = number_mechanism(NumericGrid(0, 2, 1), 1.0)
    b = math.exp(-m.log_ratio)
    c = (1 - b) / (1 + b)
    expected = np.array([
        [1 / (1 + b), c * b, b**2 / (1 + b)],
        [b / (1 + b), c, b / (1 + b)],
        [b**2 / (1 + b), c * b, 1 / (1 + b)],
    ])
    np.testing.assert_allclose(m.matrix(), expected, rtol=1e-12)
    assert m.output_labels == ("0", "1", "2")


def test_discrete_laplace_law_is_the_two_sided_geometric_inside_the_window():
    m = number_mechanism(NumericGrid(0, 4, 1), 0.7, "discrete-laplace")
    b = math.exp(-m.log_ratio)
    T = -m.lo_rank
    assert b**T / (1 + b) <= 1e-15 < b ** (T - 1) / (1 + b)
    M = m.matrix()
    for i in range(5):
        for j in range(m.lo_rank + 1, m.hi_rank):  # interior columns: (1-b)/(1+b) b^|i-j|
            assert M[i, j - m.lo_rank] == pytest.approx((1 - b) / (1 + b) * b ** abs(i - j), rel=1e-12, abs=1e-300)
        # the window's ends carry the tails: E[release] = the value (unbiased)
        values = np.arange(m.lo_rank, m.hi_rank + 1)
        assert M[i] @ values == pytest.approx(i, abs=1e-9)


@pytest.mark.parametrize("kind", ["clamped-geometric", "discrete-laplace"])
@pytest.mark.parametrize(("lo", "hi", "step", "eps"), [
    (0, 9, 1, 0.1), (0, 9, 1, 3.0), ("0.5", "3.0", "0.5", 2.0), (-20, 20, 5, 0.05), (0, 30, 1, 20.0),
])
def test_audit_is_at_most_epsilon_exactly(kind, lo, hi, step, eps):
    m = number_mechanism(NumericGrid(lo, hi, step), eps, kind)
    result = m.audit()
    assert result.epsilon <= eps  # no tolerance: a' leaves room for every float rounding
    assert result.epsilon >= eps * (1 - 1e-6)  # and the mechanism is not needlessly loose
    np.testing.assert_allclose(m.matrix().sum(axis=1), 1.0, rtol=1e-12)


def test_float_weights_ratios_with_exact_rationals():
    # the sampled law is the float weights read as rationals: check every adjacent ratio exactly
    from fractions import Fraction

    a1 = safe_log_ratio(0.3)
    w = offset_weights(a1, 40)
    bound = math.exp(0.3)  # ratios must stay below e^{eps * step}; compare in rationals
    for k in range(40, 80):
        assert Fraction(w[k]) / Fraction(w[k + 1]) <= Fraction(bound) * (1 - Fraction(1, 10**12))


def test_clamped_matches_geometric_clamped_form():
    space = MetricSpace.from_points(np.arange(6.0)[:, None])
    g = build("geometric", space, 0.8, form="clamped")
    m = number_mechanism(NumericGrid(0, 5, 1), 0.8)
    np.testing.assert_allclose(m.matrix(), g.matrix, rtol=1e-9)


# ------------------------------------------------------------------------- sampling
def test_draw_offsets_is_exacttable_sample_word_for_word():
    m = number_mechanism(NumericGrid(0, 50, 1), 0.2, "discrete-laplace")
    a = draw_offsets(m.table, 5000, np.random.default_rng(3))
    b = m.table.sample(np.zeros(5000, dtype=np.intp), np.random.default_rng(3))
    assert np.array_equal(a, b)
    # a row with truncated prefix sums (large dynamic range) too
    t = ExactTable.from_matrix(np.array([[1.0, 1e-30, 3.0, 2.0**-60, 0.5]]))
    assert np.array_equal(draw_offsets(t, 4000, np.random.default_rng(4)),
                          t.sample(np.zeros(4000, dtype=np.intp), np.random.default_rng(4)))


@given(st.lists(st.integers(0, 2**20), min_size=1, max_size=40), st.integers(0, 2**32))
def test_guide_search_is_searchsorted(steps, seed):
    from metricdp.mechanisms.numeric import _largest_at_most

    prefix = np.concatenate([[0], np.cumsum(steps)]).astype(np.uint64)  # repeats where a step is 0
    total = int(prefix[-1]) + len(steps) + 1  # as a truncated row: x may lie past prefix[n]
    x = np.random.default_rng(seed).integers(0, total, 2000, dtype=np.uint64)
    x[:3] = [0, total - 1, int(prefix[-1])]
    assert np.array_equal(_largest_at_most(prefix, total)(x), np.searchsorted(prefix, x, side="right") - 1)


@pytest.mark.parametrize("kind", ["clamped-geometric", "discrete-laplace"])
def test_chi_square_against_the_exact_law(kind):
    m = number_mechanism(NumericGrid(0, 9, 1), 0.6, kind)
    M = m.matrix()
    rng = np.random.default_rng(2024)
    for i in (0, 4, 9):
        with pytest.warns(PrivacyLeakWarning):
            out = m.sample(np.full(60_000, i), rng)
        counts = np.bincount(out, minlength=m.m)
        expected = M[i] * len(out)
        keep = expected >= 5  # pool the far tail into one cell
        obs = np.append(counts[keep], counts[~keep].sum())
        exp = np.append(expected[keep], expected[~keep].sum())
        if exp[-1] < 5:
            obs, exp = obs[:-1], exp[:-1] * obs[:-1].sum() / exp[:-1].sum()
        assert stats.chisquare(obs, exp).pvalue > 1e-4


def test_sample_secure_by_default_and_checks_ranks():
    m = number_mechanism(NumericGrid(0, 3, 1), 1.0)
    out = m.sample([0, 1, 2, 3])
    assert out.shape == (4,) and out.min() >= 0 and out.max() <= 3
    with pytest.raises(ValidationError, match="ranks must lie"):
        m.sample([4])


# ------------------------------------------------------------------------- refusals
def test_underflow_and_size_refusals():
    with pytest.raises(ValidationError, match="underflow"):
        number_mechanism(NumericGrid(0, 99, 1), 10.0)
    with pytest.raises(ValidationError, match="offsets"):
        number_mechanism(NumericGrid(0, 10, 1), 1e-6, "discrete-laplace")
    with pytest.raises(ValidationError, match="kind"):
        number_mechanism(NumericGrid(0, 10, 1), 1.0, "laplace")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="epsilon"):
        number_mechanism(NumericGrid(0, 10, 1), -1.0)
    assert MAX_OFFSETS == 2**20 - 1


# ------------------------------------------------------------------------- registry
def test_registry_builds_and_audits_discrete_laplace():
    space = MetricSpace.from_points(np.array([[0.0], [0.5], [1.0], [1.5]]), labels=["a", "b", "c", "d"])
    mech = build("discrete-laplace", space, 1.5)
    assert mech.audit().epsilon <= 1.5
    assert mech.output_labels[:0] == () and {"a", "b", "c", "d"} <= set(mech.output_labels)
    assert mech.m == 4 + 2 * mech.params["extension"]
    with pytest.raises(ValidationError, match="equally spaced line"):
        discrete_laplace(MetricSpace.from_points([[0.0], [1.0], [3.0]]), 1.0)
    with pytest.raises(ValidationError, match="tail"):
        build("discrete-laplace", space, 1.0, tail=0.7)


def test_grid_of_decimals_is_exact():
    g = NumericGrid(Decimal("1.10"), 2.2, "0.55")
    assert g.n == 3 and g.labels(0, 2) == ["1.10", "1.65", "2.20"]


def test_ages_worst_case_loss_is_the_issues_figure():
    # Ages 0..99 at eps 0.1: the clamped form's worst-case loss 9.91 (row-normalised geometric: 18.0)
    from metricdp.loss import worst_case_loss

    m = number_mechanism(NumericGrid(0, 99, 1), 0.1)
    assert worst_case_loss(m.matrix(), m.distances()) == pytest.approx(9.9125, abs=1e-3)
