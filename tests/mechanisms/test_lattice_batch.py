"""The vectorised exact lattice sampler: its bounds against exact oracles, its law by chi-square and KS."""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from metricdp import ValidationError
from metricdp.mechanisms import lattice_batch as lb
from metricdp.mechanisms.lattice_batch import LatticeSampler, exp_neg_bounds, exp_neg_float, lazy_less

_CTX = Context(prec=120)


def _exp_neg_exact(x: Fraction) -> Decimal:
    return _CTX.exp(-_CTX.divide(Decimal(x.numerator), Decimal(x.denominator)))


class _Words:
    """A word source that replays given words, then a fixed word forever (counts what it hands out)."""

    def __init__(self, words: list[int], then: int = 0) -> None:
        self.words, self.then, self.used = list(words), then, 0

    def __call__(self, count: int) -> np.ndarray:
        out = []
        for _ in range(count):
            out.append(self.words.pop(0) if self.words else self.then)
            self.used += 1
        return np.array(out, dtype=np.uint64)


# ------------------------------------------------------------------------------ bounds
@given(st.fractions(min_value=0, max_value=80, max_denominator=10**6), st.integers(1, 200))
def test_exp_neg_bounds_bracket_the_exact_value(x, bits):
    lo, hi = exp_neg_bounds(x, bits)
    exact = Fraction(_exp_neg_exact(x)) * 2**bits if x else Fraction(2**bits)
    assert lo <= exact <= hi  # the Decimal oracle at 120 digits is within 1e-100 relative
    assert hi - lo <= 4


def test_exp_neg_bounds_refuses_negative():
    with pytest.raises(ValidationError, match=">= 0"):
        exp_neg_bounds(Fraction(-1), 10)


@given(st.floats(min_value=0.0, max_value=60.0))
def test_exp_neg_float_error_below_the_proved_bound(x):
    y = exp_neg_float(np.array([x]))[0]
    exact = Fraction(_exp_neg_exact(Fraction(x)))
    assert abs(Fraction(float(y)) / exact - 1) < Fraction(1, 2**42)


def test_exp_neg_float_on_a_dense_grid():
    x = np.concatenate([np.linspace(0.0, 60.0, 4001), np.arange(1, 87) * math.log(2.0)])  # the k boundaries too
    y = exp_neg_float(x)
    worst = max(abs(Fraction(float(b)) / Fraction(_exp_neg_exact(Fraction(float(a)))) - 1)
                for a, b in zip(x, y, strict=True))
    assert worst < Fraction(1, 2**42)


@given(st.fractions(min_value=0, max_value=1, max_denominator=2**20), st.integers(0, 2**64 - 1),
       st.integers(0, 2**64 - 1))
def test_lazy_less_equals_the_exact_comparison(t, first, ext):
    """U = (first 2^64 + ext) / 2^128 + (the rest); with t a dyadic of 20 bits the answer is settled by then."""
    words = _Words([ext, ext & 0xFFFF_FFFF << 32])

    def bounds(m: int) -> tuple[int, int]:
        v = t * 2**m
        return math.floor(v), math.ceil(v)

    got = lazy_less(first, bounds, words)
    u_low = Fraction(first, 2**64)
    if u_low + Fraction(1, 2**64) <= t:
        assert got and words.used == 0
    elif u_low >= t:
        assert not got and words.used == 0
    else:  # U's 96-bit prefix decides a 20-bit-denominator threshold
        u96 = Fraction(first * 2**32 + (ext >> 32), 2**96)
        assert got == (u96 < t)


# ---------------------------------------------------------------------------- tables
@pytest.mark.parametrize("alpha", [Fraction(1, 2), Fraction(3, 1000), Fraction(1, 10**6)])
def test_tables_hold_the_exact_floors(alpha):
    s = LatticeSampler(alpha)
    rng = np.random.default_rng(0)
    for g in sorted({1, s._m.size, *rng.integers(1, s._m.size + 1, 20).tolist()}):
        lo, hi = exp_neg_bounds(s.beta * s.block * g, 200)
        assert lo >> 136 == hi >> 136 == int(s._m.desc[g - 1])
    if s._r is not None:
        q = Fraction(_exp_neg_exact(s.beta))
        qn = Fraction(_exp_neg_exact(s.beta * s.block))
        for r in sorted({1, s._r.size, *rng.integers(1, s._r.size + 1, 5).tolist()}):
            exact = (Fraction(_exp_neg_exact(s.beta * r)) - qn) / (1 - qn) * 2**64
            assert math.floor(exact) == int(s._r.desc[r - 1]), (r, q)


def test_floors_resolve_a_straddling_bound():
    exact = Fraction(_exp_neg_exact(Fraction(1, 3)))

    def at(g: int):
        return lambda bits: exp_neg_bounds(Fraction(1, 3), bits)

    lo = math.floor(exact * 2**lb._P)
    floors = lb._floors([lo - 2**200], [lo + 2**200], at)  # wide bounds: floor(t 2^64) undecided
    assert floors == [math.floor(exact * 2**64)]


def test_beta_is_dyadic_and_at_most_alpha_over_root2():
    for alpha in (Fraction(1, 3), Fraction(10**-9), Fraction(7, 2)):
        s = LatticeSampler(alpha)
        assert 2 * s.beta**2 <= alpha**2 and s.beta > alpha * Fraction(7071, 10000)
        assert s.beta == Fraction(s.beta_f)


def test_rejects_bad_alpha():
    with pytest.raises(ValidationError, match="alpha must be > 0"):
        LatticeSampler(Fraction(0))
    with pytest.raises(ValidationError, match="larger cell"):
        LatticeSampler(Fraction(1, 10**12))


# ------------------------------------------------------------------- forced exact paths
def test_a_word_equal_to_a_table_entry_is_decided_exactly():
    s = LatticeSampler(Fraction(1, 4))
    level = s._m
    g = 3
    w = np.array([level.desc[g - 1]], dtype=np.uint64)  # U 2^64 in [F_g, F_g + 1): U < t_g undecided
    t = Fraction(_exp_neg_exact(s.beta * g)) * 2**64  # t_g 2^64 = F_g + frac
    frac = t - int(level.desc[g - 1])
    for ext in (0, 2**64 - 1, int(frac * 2**64) - 5, int(frac * 2**64) + 5):
        words = _Words([ext])
        c = level.count(w, words)
        below = Fraction(ext >> 32, 2**32) < frac  # U 2^64 = F_g + (ext >> 32) / 2^32 exactly: zeros follow
        assert words.used >= 1
        assert int(c[0]) == (g if below else g - 1), ext


def test_an_undecided_acceptance_takes_the_exact_path(monkeypatch):
    s = LatticeSampler(Fraction(1, 3))
    a, b = np.array([3]), np.array([4])  # ||k|| = 5: gamma = 5/3 - 7 beta
    gamma = Fraction(5, 3) - 7 * s.beta
    t = Fraction(_exp_neg_exact(gamma)) * 2**64
    w = np.array([math.floor(t)], dtype=np.uint64)
    calls = []
    real = lb.lazy_less

    def spy(*args, **kw):
        calls.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(lb, "lazy_less", spy)
    frac = t - math.floor(t)
    assert s._accept(a, b, w, _Words([0]))[0]  # U just above floor(t): accepted when the rest is small
    assert not s._accept(a, b, w, _Words([2**64 - 1]))[0] or frac > 1 - Fraction(1, 2**32)
    assert calls == [int(w[0])] * 2
    # far from the threshold: decided by floats, no exact path
    assert s._accept(a, b, np.array([0], dtype=np.uint64), _Words([]))[0]
    assert not s._accept(a, b, np.array([2**64 - 1], dtype=np.uint64), _Words([]))[0]
    assert len(calls) == 2


def test_huge_coordinates_take_the_exact_path(monkeypatch):
    s = LatticeSampler(Fraction(1, 10**6))
    a, b = np.array([2**31 + 5]), np.array([0])  # q = a^2 would not fit int64: Python integers decide
    calls = []
    real = lb.lazy_less
    monkeypatch.setattr(lb, "lazy_less", lambda *args: calls.append(args[0]) or real(*args))
    # e^-gamma ~ e^-630: U >= 2^-64 is above it; U = 0 exactly (all-zero bits) is below it
    assert not s._accept(a, b, np.array([1], dtype=np.uint64), _Words([]))[0]
    assert s._accept(a, b, np.array([0], dtype=np.uint64), _Words([], then=0))[0]
    assert calls == [1, 0]


# -------------------------------------------------------------------------------- law
def _pmf_window(alpha: float, cap: int) -> tuple[np.ndarray, np.ndarray]:
    axis = np.arange(-cap, cap + 1)
    ga, gb = np.meshgrid(axis, axis, indexing="ij")
    w = np.exp(-alpha * np.hypot(ga, gb))
    return w / w.sum(), np.hypot(ga, gb)


@pytest.mark.parametrize(("alpha", "seed"), [(0.8, 1), (0.25, 2), (2.5, 3)])
def test_chi_square_against_the_exact_law(alpha, seed):
    """Every lattice point of the window |k| <= 3 is a bin; the rest pooled by radius."""
    k = LatticeSampler(Fraction(alpha)).offsets(200_000, np.random.default_rng(seed))
    cap = int(60 / alpha)
    pmf, radius = _pmf_window(alpha, cap)  # mass beyond cap: < e^-50
    inner = 3
    c = cap
    exp_cells = pmf[c - inner:c + inner + 1, c - inner:c + inner + 1].ravel()
    ring_edges = np.array([inner + 1, 6, 9, 14, 25, 1e9]) / max(alpha, 0.5)
    outside = np.ones_like(pmf, dtype=bool)
    outside[c - inner:c + inner + 1, c - inner:c + inner + 1] = False
    ring_of = np.searchsorted(ring_edges, radius[outside], side="right")
    exp_rings = np.bincount(ring_of, weights=pmf[outside], minlength=len(ring_edges) + 1)
    expected = np.concatenate([exp_cells, exp_rings]) * len(k)
    in_box = (np.abs(k) <= inner).all(axis=1)
    cells = np.bincount(((k[in_box, 0] + inner) * (2 * inner + 1) + k[in_box, 1] + inner),
                        minlength=(2 * inner + 1) ** 2)
    rings = np.bincount(np.searchsorted(ring_edges, np.hypot(*k[~in_box].T), side="right"),
                        minlength=len(ring_edges) + 1)
    observed = np.concatenate([cells, rings])
    keep = expected > 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-4


def test_ks_against_continuous_planar_laplace_at_lattice_scale():
    """alpha = eps h small: h ||K|| is the planar Laplace radius Gamma(2, 1/eps) up to O(h)."""
    eps, h = 0.5, 0.002
    k = LatticeSampler(Fraction(eps) * Fraction(h)).offsets(20_000, np.random.default_rng(9))
    radius = h * np.hypot(k[:, 0], k[:, 1])
    assert stats.kstest(radius, stats.gamma(a=2, scale=1 / eps).cdf).pvalue > 1e-3
    angle = np.arctan2(k[:, 1], k[:, 0])
    assert stats.kstest(angle, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 1e-3


def test_two_level_tables_give_the_same_law():
    """alpha = 1e-6: G = n M + R with two tables; the radius is still Gamma(2, 1/alpha)."""
    alpha = 1e-6
    s = LatticeSampler(Fraction(alpha))
    assert s._r is not None and s.block > 1
    k = s.offsets(20_000, np.random.default_rng(4))
    assert stats.kstest(alpha * np.hypot(k[:, 0], k[:, 1]), stats.gamma(a=2).cdf).pvalue > 1e-3
    assert stats.kstest(k[:, 0] * alpha, stats.laplace(scale=1).cdf).pvalue < 1e-3  # not a product law


@given(st.fractions(min_value=Fraction(1, 1000), max_value=8, max_denominator=1000), st.integers(0, 50),
       st.integers(0, 2**32))
def test_shape_dtype_and_reproducibility(alpha, size, seed):
    s = LatticeSampler(alpha)
    k = s.offsets(size, np.random.default_rng(seed))
    assert k.shape == (size, 2) and k.dtype == np.int64
    np.testing.assert_array_equal(k, s.offsets(size, np.random.default_rng(seed)))


def test_secure_source_words():
    from metricdp._random import SecureRandom

    k = LatticeSampler(Fraction(1, 10)).offsets(1000, SecureRandom())
    assert k.shape == (1000, 2) and np.abs(k).max() < 10_000


@pytest.mark.parametrize("beta", [0.3, 1.0, 2.0**-20])
def test_geometric_laplace_is_the_two_sided_geometric_law(beta) -> None:
    from metricdp.mechanisms.lattice_batch import Geometric

    z = Geometric(Fraction(beta)).laplace(40_000, np.random.default_rng(7))
    q = math.exp(-beta)
    if beta < 0.01:  # wide: |Z| / scale against the continuous limit, P(|Z| >= m) ~ q^m
        for m in (1, 2**19, 2**21):
            assert abs((np.abs(z) >= m).mean() - 2 * q**m / (1 + q)) < 0.01
        return
    k = np.arange(-8, 9)
    p = (1 - q) / (1 + q) * q ** np.abs(k)
    counts = np.array([(z == v).sum() for v in k] + [(np.abs(z) > 8).sum()])
    expected = np.append(p, 1 - p.sum()) * len(z)
    assert stats.chisquare(counts, expected).pvalue > 1e-3
    with pytest.raises(ValidationError, match="beta"):
        Geometric(Fraction(1, 3))
