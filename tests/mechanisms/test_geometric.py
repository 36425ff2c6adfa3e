"""Geometric mechanism: the lattice form on grids and the row-normalised form elsewhere."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import brentq

from metricdp.errors import ValidationError
from metricdp.mechanisms.exponential import exponential_matrix
from metricdp.mechanisms.file import load_mechanism
from metricdp.mechanisms.geometric import (
    MASS_LEFT_OUT,
    _lattice_coordinates,
    _lattice_matrix,
    _nearest_point_of_cells,
    geometric,
    lattice_tail_bound,
    lattice_truncation_radius,
)
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, brute_force_epsilon, random_space


def lattice_sum(alpha: float, radius: int = 400) -> float:
    """Z = sum over Z^2 of exp(-alpha ||z||), by brute force (tail below 1e-100 here)."""
    i = np.arange(-radius, radius + 1, dtype=np.float64)
    return math.fsum(np.exp(-alpha * np.hypot(i[:, None], i[None, :])).ravel())


# ----------------------------------------------------------------- lattice form, by hand
def test_two_cells_hand_computed():
    """1 x 2 grid: input 0 keeps every lattice point with j <= 0, i.e. half of Z^2 plus half
    of the axis j = 0: M[0,0] = 1/2 + A / (2Z) with A = sum_i r^|i| = (1+r)/(1-r)."""
    h, eps = 150.0, 0.004
    alpha = eps * h
    m = geometric(MetricSpace.grid(1, 2, cell=h), eps)
    r = math.exp(-alpha)
    big_a, z = (1 + r) / (1 - r), lattice_sum(alpha)
    expected = 0.5 + big_a / (2 * z)
    np.testing.assert_allclose(m.matrix, [[expected, 1 - expected], [1 - expected, expected]], atol=1e-14)
    assert m.params["form"] == "lattice" and m.params["parameter"] == eps
    assert m.params["mass_left_out"] <= MASS_LEFT_OUT
    assert_private(m)


def test_four_cells_hand_computed():
    """2 x 2 grid, input (0,0): its cell collects the closed quadrant, (0,1) the quadrant
    i <= 0 < j, (1,1) the open quadrant. With A1 = r/(1-r) and Z = 1 + 4 A1 + 4 H11:
    M = [(Z + 3 + 4 A1), (Z - 1), (Z - 1), (Z - 1 - 4 A1)] / (4 Z)."""
    alpha = 0.7
    m = geometric(MetricSpace.grid(2, 2, cell=1.0), alpha)
    r = math.exp(-alpha)
    a1, z = r / (1 - r), lattice_sum(alpha)
    row0 = np.array([z + 3 + 4 * a1, z - 1, z - 1, z - 1 - 4 * a1]) / (4 * z)
    np.testing.assert_allclose(m.matrix[0], row0, atol=1e-14)
    np.testing.assert_allclose(m.matrix[3], row0[::-1], atol=1e-14)  # symmetry of the square
    assert_private(m)


# ----------------------------------------------------------------- lattice form, by brute force
def torus_oracle(k: np.ndarray, alpha: float, radius: int) -> np.ndarray:
    """The lattice form by its definition: enumerate every torus point's representative in
    the extended box, weight it by exp(-alpha * torus distance), clamp, remap."""
    size0, size1 = int(k[:, 0].max()) + 1, int(k[:, 1].max()) + 1
    n0, n1 = size0 + 2 * radius, size1 + 2 * radius
    rep0, rep1 = np.arange(-radius, size0 + radius), np.arange(-radius, size1 + radius)
    ii, jj = np.meshgrid(rep0, rep1, indexing="ij")
    ii, jj = ii.ravel(), jj.ravel()
    nearest = _nearest_point_of_cells(k, size0, size1)
    release = nearest[np.clip(ii, 0, size0 - 1) * size1 + np.clip(jj, 0, size1 - 1)]
    out = np.zeros((len(k), len(k)))
    for u in range(len(k)):
        di = np.abs(ii - k[u, 0])
        dj = np.abs(jj - k[u, 1])
        w = np.exp(-alpha * np.hypot(np.minimum(di, n0 - di), np.minimum(dj, n1 - dj)))
        out[u] = np.bincount(release, weights=w, minlength=len(k))
    return out / out.sum(axis=1, keepdims=True)


@pytest.mark.parametrize(
    ("cells", "alpha"),
    [
        ([(0, 0), (0, 1)], 1.0),
        ([(i, j) for i in range(3) for j in range(4)], 0.3),
        ([(0, j) for j in range(5)], 2.0),  # a single row: the other axis folds
        ([(i, 0) for i in range(4)], 0.5),  # a single column
        ([(0, 0), (0, 1), (1, 3), (2, 1), (3, 3)], 0.5),  # a subset of a 4 x 4 box
        ([(0, 0), (2, 2), (4, 0)], 0.15),  # sparse: the detected cell is 4, not 2
    ],
)
def test_matches_the_definition_enumerated(cells, alpha):
    space = MetricSpace.from_points(np.array(cells, dtype=float) * 2.0 + [10.0, -3.0])
    m = geometric(space, alpha / space.cell)
    assert m.params["cell"] == space.cell
    k = _lattice_coordinates(space)
    np.testing.assert_allclose(m.matrix, torus_oracle(k, alpha, m.params["truncation_radius"]), rtol=1e-12)
    # one normaliser for every row: rows sum to 1 without being normalised one by one
    np.testing.assert_allclose(m.matrix.sum(axis=1), 1.0, atol=1e-13)
    assert m.params["lattice_box"] == [int(k[:, 0].max()) + 1, int(k[:, 1].max()) + 1]
    assert_private(m)


@pytest.mark.parametrize(
    "cells",
    [
        [(i, j) for i in range(3) for j in range(4)],
        [(0, j) for j in range(4)],
        [(0, 0), (0, 1), (1, 3), (2, 1), (3, 3)],
    ],
)
@pytest.mark.parametrize("alpha", [0.2, 1.0])
def test_privacy_does_not_depend_on_the_truncation_radius(cells, alpha):
    """At a tiny radius the torus wrap-around and the segment ends carry real mass: the
    construction must still equal its definition, keep one normaliser, and be exactly
    alpha-mDP in cell units (truncation only affects faithfulness, never privacy)."""
    k = np.array(cells, dtype=np.int64)
    d_cells = np.hypot(*(k[:, None, :] - k[None, :, :]).transpose(2, 0, 1).astype(float))
    size = int(k.max()) + 1
    for radius in (size, 2 * size + 1):
        m = _lattice_matrix(k, alpha, radius)
        assert lattice_tail_bound(alpha, radius) > 1e-3  # truncation is far from negligible
        np.testing.assert_allclose(m, torus_oracle(k, alpha, radius), rtol=1e-12)
        np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-13)
        assert brute_force_epsilon(m, d_cells) <= alpha * (1 + 1e-12)


def test_nearest_point_of_cells_is_a_nearest_point():
    g = np.random.default_rng(7)
    cells = g.choice(12 * 9, 15, replace=False)
    k = np.column_stack(np.divmod(cells, 9)).astype(np.int64)
    size0, size1 = int(k[:, 0].max()) + 1, int(k[:, 1].max()) + 1
    near = _nearest_point_of_cells(k, size0, size1)
    xs, ys = np.divmod(np.arange(size0 * size1), size1)
    d2 = (xs[:, None] - k[None, :, 0]) ** 2 + (ys[:, None] - k[None, :, 1]) ** 2
    np.testing.assert_array_equal(d2[np.arange(len(xs)), near], d2.min(axis=1))
    assert np.array_equal(near[k[:, 0] * size1 + k[:, 1]], np.arange(len(k)))  # points map to themselves


@st.composite
def lattice_spaces(draw):
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    if rows * cols < 2:
        cols = 2
    keep = draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols))
    cells = [divmod(c, cols) for c in range(rows * cols) if keep[c]]
    if len(cells) < 2:
        cells = [divmod(c, cols) for c in range(rows * cols)]
    h = draw(st.sampled_from([1.0, 0.25, 150.0]))
    return MetricSpace.from_points(np.array(cells, dtype=float) * h), h


@given(data=lattice_spaces(), alpha=st.floats(0.05, 5.0))
def test_lattice_form_passes_the_audit(data, alpha):
    space, h = data
    m = geometric(space, alpha / h)
    assert m.params["form"] == "lattice"
    got = brute_force_epsilon(np.asarray(m.matrix), np.asarray(space.distances))
    assert got <= m.epsilon * (1 + 1e-12)
    assert abs(m.matrix.sum(axis=1) - 1).max() <= 1e-13


@pytest.mark.parametrize("alpha", [0.05, 1.0, 5.0])
def test_truncation_changes_rows_by_less_than_the_bound(alpha):
    """Each row is within tau_T of the infinite-lattice mechanism in total variation, so
    two truncation radii T < T' give rows within tau_T + tau_T' of each other."""
    k = np.array([(i, j) for i in range(3) for j in range(3)], dtype=np.int64)
    radius = lattice_truncation_radius(alpha, 3)
    a = _lattice_matrix(k, alpha, radius)
    b = _lattice_matrix(k, alpha, radius + 40)
    tv = 0.5 * np.abs(a - b).sum(axis=1).max()
    assert tv <= lattice_tail_bound(alpha, radius) + lattice_tail_bound(alpha, radius + 40) + 1e-14


@pytest.mark.parametrize("alpha", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("radius", [0, 2, 6])
def test_tail_bound_bounds_the_true_tail(alpha, radius):
    i = np.arange(-300, 301, dtype=np.float64)
    f = np.exp(-alpha * np.hypot(i[:, None], i[None, :]))
    outside = np.maximum(np.abs(i)[:, None], np.abs(i)[None, :]) > radius
    tail = f[outside].sum() / f.sum()
    bound = lattice_tail_bound(alpha, radius)
    assert tail <= bound <= 5 * tail  # measured: within a factor 2-4


@pytest.mark.parametrize("alpha", [0.05, 0.6, 5.0])
def test_truncation_radius_is_the_smallest_meeting_the_mass(alpha):
    radius = lattice_truncation_radius(alpha)
    assert lattice_tail_bound(alpha, radius) <= MASS_LEFT_OUT < lattice_tail_bound(alpha, radius - 1)
    assert lattice_truncation_radius(alpha, minimum=radius + 7) == radius + 7


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.05, 5.0])
def test_thirty_by_thirty_grid_rows_are_distributions(alpha):
    """The geolocation case: 30 x 30 cells (the builder adds its certify audit on top)."""
    space = MetricSpace.grid(30, 30, cell=150.0)
    k = _lattice_coordinates(space)
    radius = lattice_truncation_radius(alpha, 30)
    m = _lattice_matrix(k, alpha, radius)
    assert abs(m.sum(axis=1) - 1).max() <= 1e-13 and m.min() > 0


def test_fifteen_by_fifteen_grid_at_small_alpha_is_certified():
    m = geometric(MetricSpace.grid(15, 15, cell=150.0), 0.05 / 150)
    assert m.params["truncation_radius"] > 700
    assert m.info["epsilon_audit"] <= m.epsilon * (1 + 1e-9)


# ----------------------------------------------------------------- row-normalised form
def test_row_normalised_hand_computed():
    """Path 0 - 1 - 2 (unit steps, given as distances, so not a lattice). With r = e^-p the
    binding ratio is M[0,0] / M[1,0] = e^p (1 + 2r) / (1 + r + r^2); the calibrated p
    solves e^p (1 + 2r) / (1 + r + r^2) = e^eps."""
    space = MetricSpace.from_distances([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    eps = 1.0
    m = geometric(space, eps)

    def gap(p: float) -> float:
        r = math.exp(-p)
        return p + math.log((1 + 2 * r) / (1 + r + r * r)) - eps

    p_star = brentq(gap, eps / 2, eps, xtol=1e-15)
    assert m.params["form"] == "row-normalised"
    assert m.params["parameter"] <= p_star and m.params["parameter"] == pytest.approx(p_star, rel=2e-6)
    p = m.params["parameter"]
    row = np.exp(-p * np.array([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(m.matrix[0], row / row.sum(), rtol=1e-14)
    assert_private(m)


@given(seed=st.integers(0, 10_000), n=st.integers(3, 10), eps=st.floats(0.1, 3.0))
def test_row_normalised_passes_the_audit_on_irregular_spaces(seed, n, eps):
    space = random_space(seed, n, dim=3, clustered=bool(seed % 2))
    m = geometric(space, eps)
    p = m.params["parameter"]
    assert m.params["form"] == "row-normalised" and eps / 2 <= p <= eps
    np.testing.assert_allclose(m.matrix, exponential_matrix(space.distances, 2 * p), rtol=1e-13)
    assert brute_force_epsilon(np.asarray(m.matrix), np.asarray(space.distances)) <= eps * (1 + 1e-12)


def test_row_normalised_on_a_grid_on_request():
    space = MetricSpace.grid(3, 3)
    m = geometric(space, 1.0, form="row-normalised")
    assert m.params["form"] == "row-normalised"
    assert_private(m)


# ----------------------------------------------------------------- errors and files
def test_lattice_form_refused_on_an_irregular_space():
    with pytest.raises(ValidationError, match="form='lattice' is not available"):
        geometric(random_space(0, 5), 1.0, form="lattice")


def test_auto_on_irregular_space_records_why():
    m = geometric(random_space(0, 5), 1.0)
    assert "not a subset of a square lattice" in m.info["lattice_form_skipped"]


@pytest.mark.parametrize("eps", [0.0, -0.5, float("nan"), None])
def test_bad_epsilon(eps):
    with pytest.raises(ValidationError, match="epsilon"):
        geometric(MetricSpace.grid(2, 2), eps)


def test_bad_form():
    with pytest.raises(ValidationError, match="'form' must be"):  # the registry's one message template
        geometric(MetricSpace.grid(2, 2), 1.0, form="torus")  # type: ignore[arg-type]


def test_underflow_is_a_clear_error():
    with pytest.raises(ValidationError, match="underflows"):
        geometric(MetricSpace.grid(1, 200), 5.0)


def test_file_round_trip(tmp_path):
    m = geometric(MetricSpace.grid(2, 3, cell=150.0), 0.004)
    m.save(tmp_path / "g.npz")
    back = load_mechanism(tmp_path / "g.npz")
    np.testing.assert_array_equal(back.matrix, m.matrix)
    assert dict(back.params) == dict(m.params)


@pytest.mark.parametrize(("alpha", "mass", "match"), [(0.5, 0.0, "mass"), (0.5, -1.0, "mass"), (0.0, 1e-9, "alpha")])
def test_truncation_radius_rejects_bad_arguments(alpha: float, mass: float, match: str) -> None:
    # mass <= 0 can never be met by the (positive) tail bound: an error, not an endless loop
    with pytest.raises(ValidationError, match=match):
        lattice_truncation_radius(alpha, mass=mass)


def test_an_epsilon_too_small_for_the_lattice_falls_back_without_overflow():
    # --epsilon 1e-300 once raised OverflowError formatting the lattice size
    space = MetricSpace.grid(3, 3, cell=150.0)
    mech = geometric(space, 1e-300)
    assert mech.params["form"] == "row-normalised"
    assert "about 10^" in mech.info["lattice_form_skipped"]
    with pytest.raises(ValidationError, match="lattice tables would need about 10"):
        geometric(space, 1e-300, form="lattice")


# ----------------------------------------------------------------- clamped form on a line
def test_clamped_two_and_three_points_by_hand():
    # 2 points, step h: rows [1, a] / (1 + a) and [a, 1] / (1 + a), a = exp(-eps h)
    eps, h = 0.8, 2.5
    a = math.exp(-eps * h)
    m = geometric(MetricSpace.from_points([[0.0], [h]]), eps)
    assert m.params == {"form": "clamped", "parameter": eps, "step": h}
    np.testing.assert_allclose(m.matrix, np.array([[1, a], [a, 1]]) / (1 + a), rtol=1e-14)
    # 3 points: the middle column is (1 - a)/(1 + a) a^|r - 1|, the ends the geometric tails
    m3 = geometric(MetricSpace.from_points([[0.0], [h], [2 * h]]), eps)
    c = (1 - a) / (1 + a)
    expected = np.array([[1 / (1 + a), c * a, a * a / (1 + a)],
                         [a / (1 + a), c, a / (1 + a)],
                         [a * a / (1 + a), c * a, 1 / (1 + a)]])
    np.testing.assert_allclose(m3.matrix, expected, rtol=1e-13)
    assert_private(m3)


def test_clamped_ages_halve_the_worst_case_loss():
    # Ages 0..99 at eps 0.1 -- row-normalised 18.0, clamped two-sided geometric 9.91
    from metricdp.loss import worst_case_loss

    ages = MetricSpace.from_points(np.arange(100.0)[:, None])
    clamped, normalised = geometric(ages, 0.1), geometric(ages, 0.1, form="row-normalised")
    assert clamped.params["form"] == "clamped"
    assert worst_case_loss(clamped.matrix, ages.distances) == pytest.approx(9.9125, abs=1e-3)
    assert worst_case_loss(normalised.matrix, ages.distances) == pytest.approx(18.0, abs=0.01)
    assert clamped.audit().epsilon <= 0.1 * (1 + 1e-9)


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 5.0])
def test_clamped_in_any_order_and_offset_is_private(eps):
    g = np.random.default_rng(3)
    pts = g.permutation(np.arange(9.0)) * 0.5 + 1e3
    m = geometric(MetricSpace.from_points(pts[:, None]), eps)
    assert m.params["form"] == "clamped" and m.params["step"] == pytest.approx(0.5)
    np.testing.assert_allclose(m.matrix.sum(axis=1), 1.0, rtol=1e-12)
    assert brute_force_epsilon(m.matrix, m.space.distances) <= eps * (1 + 1e-9)
    assert_private(m)


def test_clamped_form_needs_an_equally_spaced_line():
    with pytest.raises(ValidationError, match="equally spaced line"):
        geometric(MetricSpace.from_points([[0.0], [1.0], [3.0]]), 1.0, form="clamped")
    m = geometric(MetricSpace.from_points([[0.0], [1.0], [3.0]]), 1.0)  # auto: not a line, row-normalised
    assert m.params["form"] == "row-normalised"
    path = MetricSpace.from_distances([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    assert geometric(path, 1.0, form="clamped").params["form"] == "clamped"  # a line by its distances, on request
    assert geometric(MetricSpace.grid(1, 3, cell=1.0), 1.0).params["form"] == "lattice"  # 2-d lattices first
