"""Exact planar Laplace on a lattice: Bernoulli(exp(-gamma)), discrete Laplace, the 2-D law."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from metricdp import ValidationError
from metricdp._random import check_rng
from metricdp.mechanisms.lattice_laplace import (
    BitStream,
    bernoulli_exp,
    discrete_laplace,
    lattice_laplace_offsets,
    sample_lattice_laplace,
)


def _sqrt2_bounds(m: int) -> tuple[Fraction, Fraction]:
    root = math.isqrt(2 << (2 * m))  # floor(sqrt(2) 2**m)
    return Fraction(root), Fraction(root + 1)


@pytest.mark.parametrize(
    ("bounds", "upper", "gamma"),
    [
        (lambda m: (Fraction(1, 2) * 2**m,) * 2, 1, 0.5),
        (lambda m: (Fraction(23, 10) * 2**m,) * 2, 3, 2.3),
        (_sqrt2_bounds, 2, math.sqrt(2)),  # irrational: decided by lazy refinement
        (lambda m: (Fraction(0),) * 2, 0, 0.0),
    ],
)
def test_bernoulli_exp_rate(bounds, upper, gamma):
    bits = BitStream(check_rng(11))
    hits = sum(bernoulli_exp(bits, bounds, upper) for _ in range(6_000))
    if gamma == 0.0:
        assert hits == 6_000
    else:
        assert stats.binomtest(hits, 6_000, math.exp(-gamma)).pvalue > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("beta", [Fraction(1, 3), Fraction(3, 2)])
def test_discrete_laplace_pmf(beta):
    bits = BitStream(check_rng(5))
    draws = np.array([discrete_laplace(bits, beta) for _ in range(6_000)])
    cap = 8
    support = np.arange(-cap, cap + 1)
    pmf = np.exp(-float(beta) * np.abs(support))
    pmf /= np.exp(-float(beta) * np.abs(np.arange(-400, 401))).sum()
    observed = np.bincount(np.clip(draws, -cap, cap) + cap, minlength=2 * cap + 1)
    expected = pmf * len(draws)
    expected[0] += (1 - pmf.sum()) / 2 * len(draws)  # the tails folded into the end bins
    expected[-1] += (1 - pmf.sum()) / 2 * len(draws)
    assert stats.chisquare(observed, expected).pvalue > 1e-3


@pytest.mark.slow
def test_offsets_follow_the_planar_law():
    alpha = 0.8
    k = lattice_laplace_offsets(Fraction(alpha), 3_000, check_rng(2024))
    a = np.arange(-80, 81)
    grid_a, grid_b = np.meshgrid(a, a, indexing="ij")
    w = np.exp(-alpha * np.hypot(grid_a, grid_b))
    w /= w.sum()
    # radial bins of the exact pmf, pooled to about equal mass
    r_grid = np.hypot(grid_a, grid_b).ravel()
    order = np.argsort(r_grid, kind="stable")
    edges = np.unique(r_grid[order][np.searchsorted(np.cumsum(w.ravel()[order]), np.linspace(0, 1, 9)[1:-1])])
    observed = np.bincount(np.searchsorted(edges, np.hypot(k[:, 0], k[:, 1]), side="right"), minlength=len(edges) + 1)
    expected = np.bincount(np.searchsorted(edges, r_grid, side="right"), weights=w.ravel()) * len(k)
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # symmetric in the axes
    assert stats.binomtest(int((k[:, 0] > 0).sum()), int((k[:, 0] != 0).sum())).pvalue > 1e-3


def test_sample_lattice_laplace_rounds_inputs_and_releases_lattice_points():
    xy, idx = sample_lattice_laplace([[0.4, 0.6], [10.2, -3.0]], 0.3, 2.0, rng=4)
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(xy, idx * 2.0)
    again, _ = sample_lattice_laplace([[0.4, 0.6], [10.2, -3.0]], 0.3, 2.0, rng=4)
    np.testing.assert_array_equal(xy, again)  # seeded: reproducible (not private)
    single, _ = sample_lattice_laplace([1.0, 1.0], 0.3, 2.0)  # secure default
    assert single.shape == (1, 2)


@pytest.mark.parametrize(
    ("xy", "eps", "cell", "pattern"),
    [
        ([[0.0, 0.0]], 0.0, 1.0, "epsilon"),
        ([[0.0, 0.0]], 1.0, 0.0, "cell must be a positive finite number"),
        ([[0.0, 0.0]], 1.0, float("nan"), "cell must be a positive finite number"),
        ([[0.0, np.nan]], 1.0, 1.0, "finite points"),
        ([[0.0, 0.0, 0.0]], 1.0, 1.0, "shape"),
        ([[1e300, 0.0]], 1.0, 1.0, "exceeds 2\\*\\*52"),
        ([[0.0, 0.0]], 1e-9, 1e-6, "use a larger cell"),
    ],
)
def test_sample_lattice_laplace_errors(xy, eps, cell, pattern):
    with pytest.raises(ValidationError, match=pattern):
        sample_lattice_laplace(xy, eps, cell, rng=0)


def test_offsets_reject_bad_alpha():
    with pytest.raises(ValidationError, match="alpha must be > 0"):
        lattice_laplace_offsets(Fraction(0), 1, check_rng(0))
