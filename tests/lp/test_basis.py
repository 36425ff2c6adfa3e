"""The exact vertex and duals of a simplex basis (lp/basis.py)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.lp._solve import LPModel
from metricdp.lp.basis import vertex


def test_a_hand_lp_by_hand() -> None:
    # min -x - 2y  s.t.  x + y <= 4,  x + 3y <= 6,  0 <= x, y <= 10: optimum at x = 3, y = 1
    # (both rows bind), duals solve [1 1; 1 3]^T (a, b) = (-1, -2): a = -1/2, b = -1/2
    a = sp.csr_matrix([[1.0, 1.0], [1.0, 3.0]])
    c = np.array([-1.0, -2.0])
    model = LPModel(method="simplex")
    result = model.load(c, a, -np.inf, [4.0, 6.0], 0.0, 10.0)
    assert result.success
    basis = model.basis()
    assert basis is not None
    v = vertex(c, a, -np.inf, [4.0, 6.0], 0.0, 10.0, *basis)
    assert v is not None
    assert v.x.tolist() == [3.0, 1.0]
    assert v.y.tolist() == [-0.5, -0.5]
    assert np.abs(v.r).max() == 0.0  # both columns basic


def test_nonbasic_at_the_upper_bound() -> None:
    # min -x - y  s.t.  x + y <= 3,  0 <= x <= 1, 0 <= y <= 5: x at its upper bound 1, y = 2
    a = sp.csr_matrix([[1.0, 1.0]])
    c = np.array([-2.0, -1.0])
    model = LPModel(method="simplex")
    assert model.load(c, a, -np.inf, 3.0, 0.0, [1.0, 5.0]).success
    basis = model.basis()
    assert basis is not None
    v = vertex(c, a, -np.inf, 3.0, 0.0, [1.0, 5.0], *basis)
    assert v is not None
    assert v.x.tolist() == [1.0, 2.0] and v.y.tolist() == [-1.0] and v.r.tolist() == [-1.0, 0.0]


def test_a_basis_that_is_not_square_is_refused() -> None:
    a = sp.csr_matrix([[1.0, 1.0]])
    cols, rows = np.array([1, 1], dtype=np.int8), np.array([0], dtype=np.int8)  # two basic columns, one row
    assert vertex(np.ones(2), a, 0.0, 1.0, 0.0, 1.0, cols, rows) is None


def _exact_solve(a: np.ndarray, b: np.ndarray) -> list[Fraction]:
    """Gaussian elimination in rationals (the oracle)."""
    n = len(b)
    m = [[Fraction(float(x)) for x in row] + [Fraction(float(bi))] for row, bi in zip(a, b, strict=True)]
    for i in range(n):
        p = next(r for r in range(i, n) if m[r][i] != 0)
        m[i], m[p] = m[p], m[i]
        for r in range(n):
            if r != i and m[r][i] != 0:
                f = m[r][i] / m[i][i]
                m[r] = [x - f * y for x, y in zip(m[r], m[i], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 6))
def test_vertex_and_duals_match_rational_arithmetic(seed: int, n: int) -> None:
    # badly scaled rows (coefficients over 12 orders of magnitude): the vertex and the duals
    # are those of the basis to rounding, checked against exact rational solves of its systems
    g = np.random.default_rng(seed)
    dense = g.random((n, n)) * 10.0 ** g.uniform(-6, 6, size=(n, 1))
    a = sp.csr_matrix(dense)
    rhs = dense @ g.random(n)  # a feasible point exists
    c = -g.random(n)
    model = LPModel(method="simplex", options={"primal_feasibility_tolerance": 1e-10,
                                               "dual_feasibility_tolerance": 1e-10})
    result = model.load(c, a, -np.inf, rhs, 0.0, 1.0)
    assert result.success
    basis = model.basis()
    assert basis is not None
    v = vertex(c, a, -np.inf, rhs, 0.0, 1.0, *basis)
    assert v is not None
    cols, rows = basis
    b, nb = np.flatnonzero(cols == 1), np.flatnonzero(rows != 1)
    if len(b) == 0:
        return
    x_fixed = np.where(cols == 2, 1.0, 0.0)
    want_x = _exact_solve(dense[np.ix_(nb, b)], rhs[nb] - dense[np.ix_(nb, np.flatnonzero(cols != 1))]
                          @ x_fixed[cols != 1])
    want_y = _exact_solve(dense[np.ix_(nb, b)].T, c[b])
    for got, want in zip(v.x[b], want_x, strict=True):
        assert got == pytest.approx(float(want), rel=1e-15, abs=1e-15)
    for got, want in zip(v.y[nb], want_y, strict=True):
        assert got == pytest.approx(float(want), rel=1e-15, abs=1e-300)
