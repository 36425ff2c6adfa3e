"""Confidence intervals of the estimators: hand cases, validation, and coverage by simulation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.estimation import emd, ibu, matrix_inversion
from metricdp.intervals import Estimate, ibu_intervals, inversion_intervals, oracle_intervals
from metricdp.ldp import GRR, OUE

TRUTH = np.array([0.4, 0.3, 0.2, 0.1])
USERS = 500
DATASETS = 1000
LINE = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))


def _krr(k: int, eps: float) -> np.ndarray:
    e = np.exp(eps)
    m = np.full((k, k), 1.0 / (e + k - 1))
    np.fill_diagonal(m, e / (e + k - 1))
    return m


def _geometric(k: int, alpha: float) -> np.ndarray:
    m = alpha ** np.abs(np.subtract.outer(np.arange(k), np.arange(k)))
    return m / m.sum(axis=1, keepdims=True)


def _population_counts(m: np.ndarray, datasets: int, seed: int) -> np.ndarray:
    """Report counts of a fixed population (USERS * TRUTH users per value), one row per data set."""
    gen = np.random.default_rng(seed)
    sizes = np.round(TRUTH * USERS).astype(int)
    return sum(gen.multinomial(n, m[x], size=datasets) for x, n in enumerate(sizes)).astype(np.float64)


def _coverage(estimates: list[Estimate], metric: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    inside = np.array([(e.lower <= TRUTH) & (TRUTH <= e.upper) for e in estimates])
    tv = np.array([0.5 * np.abs(e.point - TRUTH).sum() <= e.tv for e in estimates])
    return inside.mean(axis=0), float(tv.mean())


# --------------------------------------------------------------------------- hand cases
def test_inversion_interval_is_the_normal_band_of_the_linear_estimate():
    # M = [[.75, .25], [.25, .75]], q = (.3, .7), N = 1000: raw = (0.1, 0.9);
    # Var(q0) = .3 * .7 / 1000 = 2.1e-4, raw0 = (q0 - .25) / .5 so Var(raw0) = 8.4e-4
    m = np.array([[0.75, 0.25], [0.25, 0.75]])
    est = inversion_intervals([300, 700], m, level=0.95, rng=0)
    half = 1.959963984540054 * np.sqrt(8.4e-4)
    assert est.point == pytest.approx([0.1, 0.9])
    assert est.lower == pytest.approx([0.1 - half, 0.9 - half])
    assert est.upper == pytest.approx([0.1 + half, 0.9 + half])
    assert est.method == "normal" and est.emd is None
    # two categories: TV = |error of category 0|, a half-normal; its 95 % quantile is the half-width
    assert est.tv == pytest.approx(half, rel=0.15)


def test_intervals_hold_the_estimators_own_point():
    m = _geometric(4, 0.5)
    c = np.array([120.0, 160.0, 130.0, 90.0])
    assert inversion_intervals(c, m, rng=0).point == pytest.approx(matrix_inversion(c, m))
    est = ibu_intervals(c, m, draws=50, rng=0, distances=LINE)
    assert est.point == pytest.approx(ibu(c, m).estimate)
    assert np.all(est.lower <= est.point) and np.all(est.point <= est.upper)
    assert est.emd is not None and 0 < est.emd and est.method == "bootstrap"


def test_oracle_interval_uses_wangs_variance():
    oracle = OUE(k=3, epsilon=1.0)
    support = np.array([400.0, 300.0, 250.0])
    est = oracle_intervals(oracle, support, 1000, rng=0)
    point = oracle.estimate(support, 1000)
    sd = np.sqrt([oracle.variance(1000, float(f)) for f in np.clip(point, 0, 1)])  # point[2] < 0
    assert est.point == pytest.approx(point)
    assert est.upper - est.point == pytest.approx(1.959963984540054 * sd)
    assert est.tv == est.emd


def test_a_clipped_band_stays_in_the_unit_interval():
    m = _krr(3, 2.0)
    est = inversion_intervals([5, 0, 0], m, rng=0)
    assert np.all(est.lower >= 0) and np.all(est.upper <= 1)


def test_as_dict_is_plain():
    est = inversion_intervals([300, 700], np.array([[0.75, 0.25], [0.25, 0.75]]), rng=0)
    d = est.as_dict()
    assert d["level"] == 0.95 and isinstance(d["lower"], list) and d["method"] == "normal"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"level": 1.0}, "level"), ({"level": 0}, "level"), ({"draws": 3}, "draws"), ({"draws": 10**9}, "draws"),
    ({"rng": "x"}, "rng"), ({"level": float("nan")}, "level"),
])
def test_bad_arguments_are_one_error(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        inversion_intervals([3, 7], np.array([[0.75, 0.25], [0.25, 0.75]]), **kwargs)


def test_bootstrap_needs_whole_counts():
    with pytest.raises(ValidationError, match="whole numbers"):
        ibu_intervals([2.5, 7.0], np.array([[0.75, 0.25], [0.25, 0.75]]))


def test_a_batch_of_counts_is_refused():
    with pytest.raises(ValidationError, match="one vector"):
        inversion_intervals([[3, 7], [4, 6]], np.array([[0.75, 0.25], [0.25, 0.75]]))


def test_oracle_intervals_need_an_oracle():
    with pytest.raises(ValidationError, match="FrequencyOracle"):
        oracle_intervals(np.eye(2), [1.0, 1.0], 2)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- coverage
@pytest.mark.parametrize("name", ["krr", "geometric"])
def test_inversion_intervals_cover_the_truth_at_the_nominal_rate(name):
    m = _krr(4, 1.0) if name == "krr" else _geometric(4, 0.5)
    gen = np.random.default_rng(1)
    estimates = [inversion_intervals(c, m, draws=200, rng=gen) for c in _population_counts(m, DATASETS, 2)]
    per_category, tv = _coverage(estimates)
    assert np.all((0.93 <= per_category) & (per_category <= 0.97)), per_category
    assert 0.92 <= tv <= 0.98, tv


@pytest.mark.parametrize("oracle", [GRR(4, 1.0), OUE(4, 1.0)], ids=["grr", "oue"])
def test_oracle_intervals_cover_the_truth_at_the_nominal_rate(oracle):
    values = np.repeat(np.arange(4), np.round(TRUTH * USERS).astype(int))
    reports = oracle.sample(np.tile(values, DATASETS), rng=3)
    if reports.ndim == 1:
        support = np.bincount(np.repeat(np.arange(DATASETS), USERS) * 4 + reports, minlength=DATASETS * 4)
        support = support.reshape(DATASETS, 4).astype(np.float64)
    else:
        support = reports.reshape(DATASETS, USERS, 4).sum(axis=1, dtype=np.float64)
    gen = np.random.default_rng(4)
    per_category, tv = _coverage([oracle_intervals(oracle, s, USERS, draws=200, rng=gen) for s in support])
    assert np.all((0.93 <= per_category) & (per_category <= 0.97)), per_category
    assert 0.92 <= tv <= 0.98, tv


@pytest.mark.slow
@pytest.mark.parametrize("name", ["krr", "geometric"])
def test_ibu_bootstrap_intervals_cover_the_truth_at_the_nominal_rate(name):
    m = _krr(4, 1.0) if name == "krr" else _geometric(4, 0.5)
    gen = np.random.default_rng(5)
    estimates = [ibu_intervals(c, m, draws=100, rng=gen, tol=1e-7) for c in _population_counts(m, DATASETS, 6)]
    per_category, tv = _coverage(estimates)
    assert np.all((0.93 <= per_category) & (per_category <= 0.97)), per_category
    assert 0.92 <= tv <= 0.98, tv


@pytest.mark.slow
def test_emd_bound_covers_the_truth():
    m = _geometric(4, 0.5)
    gen = np.random.default_rng(7)
    hits = [emd(e.point, TRUTH, LINE) <= e.emd
            for e in (inversion_intervals(c, m, draws=100, rng=gen, distances=LINE)
                      for c in _population_counts(m, 200, 8))]
    assert 0.9 <= np.mean(hits) <= 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 500), min_size=3, max_size=3).filter(lambda c: sum(c) > 0),
       st.floats(0.5, 0.99))
def test_inversion_bands_are_ordered_and_in_the_unit_interval(counts, level):
    est = inversion_intervals(counts, _geometric(3, 0.4), level=level, draws=20, rng=0)
    assert np.all(0 <= est.lower) and np.all(est.upper <= 1)
    assert np.all(est.lower <= est.point + 1e-12) and np.all(est.point <= est.upper + 1e-12)
    assert 0 <= est.tv <= 1


def test_a_higher_level_gives_wider_intervals():
    m = _krr(4, 1.0)
    c = [150, 120, 130, 100]
    narrow, wide = inversion_intervals(c, m, level=0.8, rng=0), inversion_intervals(c, m, level=0.99, rng=0)
    assert np.all(wide.upper - wide.lower > narrow.upper - narrow.lower)
    assert wide.tv > narrow.tv
