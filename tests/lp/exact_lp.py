r"""An exact rational oracle for OPTMech's full LP on tiny spaces.

The LP (worst case, or expected under a prior), every privacy row written out:

.. math::

    \min c^\top x \quad\text{s.t.}\quad \sum_w M[u,w] = 1,\quad
    M[u,w] - f_{uv} M[v,w] \le 0\ (u \ne v),\quad
    [\textstyle\sum_w L[u,w] M[u,w] - k \le 0],\quad x \ge 0,

with :math:`f_{uv}` = ``np.exp(eps * d[u, v])`` *taken as exact rationals* (every float
is a dyadic rational): the oracle certifies the optimum of that rational LP, which is
within a few unit roundoffs of the real-coefficient one.

**Certificate.** HiGHS solves the LP in floats and reports a basis (basic structurals
:math:`B_c`, tight rows :math:`N_r`, :math:`|B_c| = |N_r|`). In :class:`fractions.Fraction`:
the primal :math:`x_{B_c}` solves :math:`A_{N_r,B_c} x_{B_c} = b_{N_r}` (non-basic
columns at 0), the dual :math:`y_{N_r}` solves :math:`A_{N_r,B_c}^\top y = c_{B_c}`
(other rows' duals 0). The oracle then checks, exactly, (P) :math:`x \ge 0` and every
row of the LP, and (D) every reduced cost :math:`c_j - a_j^\top y \ge 0` and
:math:`y_r \le 0` on the ``<=`` rows. Weak duality then proves optimality: for any
feasible :math:`x'`, :math:`c^\top x' = \sum_j (c_j - a_j^\top y) x'_j + y^\top A x'
\ge y^\top b = c^\top x` (the reduced costs and :math:`x'` are non-negative; on a
``<=`` row :math:`y_r a_r x' \ge y_r b_r`; equality rows are met exactly). When the
float basis is not exactly optimal (HiGHS's tolerances), exact primal simplex pivots
(Bland's rule, so no cycling) run from it until (P) and (D) hold; when it is not even
primal feasible in exact arithmetic (large eps * d: HiGHS drops coefficients below 1e-9),
they start from the vertex "every input releases output 0" instead. HiGHS sees each row
divided by its largest coefficient (its basis was then exactly optimal where the raw rows
left it 1e-8 off); the exact checks use the unscaled rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import highspy
import numpy as np
import scipy.sparse as sp

Q = Fraction


@dataclass(frozen=True)
class ExactOptimum:
    """The certified optimum: value, the primal matrix M (n x m) and the pivots taken."""

    value: Fraction
    matrix: list[list[Fraction]]
    pivots: int


def _build(d: np.ndarray, eps: float, loss: np.ndarray, prior: np.ndarray | None):
    """Sparse rows (as dicts col -> Fraction), bounds and costs of the full LP."""
    n, m = loss.shape
    worst = prior is None
    nv = n * m + worst
    factor = np.exp(eps * d)
    rows: list[dict[int, Fraction]] = []
    rhs: list[Fraction] = []
    kind: list[str] = []  # "eq" or "le"
    for u in range(n):
        rows.append({u * m + w: Q(1) for w in range(m)})
        rhs.append(Q(1))
        kind.append("eq")
    for u in range(n):
        for v in range(n):
            if u == v:
                continue
            f = Q(float(factor[u, v]))
            for w in range(m):
                rows.append({u * m + w: Q(1), v * m + w: -f})
                rhs.append(Q(0))
                kind.append("le")
    if worst:
        for u in range(n):
            row = {u * m + w: Q(float(loss[u, w])) for w in range(m) if loss[u, w] != 0}
            row[nv - 1] = Q(-1)
            rows.append(row)
            rhs.append(Q(0))
            kind.append("le")
        cost = [Q(0)] * (nv - 1) + [Q(1)]
    else:
        assert prior is not None
        cost = [Q(float(prior[u])) * Q(float(loss[u, w])) for u in range(n) for w in range(m)]
    return rows, rhs, kind, cost, nv


def _float_basis(rows, rhs, kind, cost, nv) -> tuple[list[int], list[int]]:
    """HiGHS's optimal basis of the float LP: (basic columns, tight rows)."""
    nr = len(rows)
    r_idx = [r for r, row in enumerate(rows) for _ in row]
    c_idx = [c for row in rows for c in row]
    # each row divided by its largest coefficient (HiGHS's basis is then exactly optimal where
    # the raw rows, coefficients up to e^20, left it 1e-8 off; the basis is scaling-invariant)
    scale = [max(1.0, max(abs(float(v)) for v in row.values())) for row in rows]
    vals = [float(v) / scale[r] for r, row in enumerate(rows) for v in row.values()]
    a = sp.csc_matrix((vals, (r_idx, c_idx)), shape=(nr, nv))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = nv, nr
    lp.col_cost_ = np.array([float(c) for c in cost])
    lp.col_lower_ = np.zeros(nv)
    lp.col_upper_ = np.full(nv, highspy.kHighsInf)
    lp.row_lower_ = np.array(
        [float(b) / c if k == "eq" else -highspy.kHighsInf for b, k, c in zip(rhs, kind, scale, strict=True)]
    )
    lp.row_upper_ = np.array([float(b) / c for b, c in zip(rhs, scale, strict=True)])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr
    lp.a_matrix_.index_ = a.indices
    lp.a_matrix_.value_ = a.data
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for key in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
        h.setOptionValue(key, 1e-10)
    h.setOptionValue("solver", "simplex")
    h.passModel(lp)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal, h.modelStatusToString(h.getModelStatus())
    basis = h.getBasis()
    basic = highspy.HighsBasisStatus.kBasic
    cols = [j for j in range(nv) if basis.col_status[j] == basic]
    tight = [r for r in range(nr) if basis.row_status[r] != basic]
    assert len(cols) == len(tight), "HiGHS returned an invalid basis"
    return cols, tight


def _solve(mat: list[dict[int, Fraction]], rhs: list[Fraction], keys: list[int]) -> dict[int, Fraction]:
    """Solve the square sparse system sum_k mat[i][k] z_k = rhs[i] exactly (Gauss-Jordan)."""
    eqs = [(dict(row), b) for row, b in zip(mat, rhs, strict=True)]
    out: dict[int, Fraction] = {}
    pivots: list[tuple[int, dict[int, Fraction], Fraction]] = []
    for key in keys:
        # sparsest row holding key among the unused ones
        cand = [i for i, (row, _) in enumerate(eqs) if row.get(key, 0) != 0]
        if not cand:
            raise ArithmeticError("singular basis")
        i = min(cand, key=lambda i: len(eqs[i][0]))
        row, b = eqs.pop(i)
        piv = row[key]
        row = {k: v / piv for k, v in row.items()}
        b = b / piv
        for j, (other, ob) in enumerate(eqs):
            a = other.get(key)
            if a:
                new = dict(other)
                for k, v in row.items():
                    nvl = new.get(k, 0) - a * v
                    if nvl:
                        new[k] = nvl
                    else:
                        new.pop(k, None)
                eqs[j] = (new, ob - a * b)
        pivots.append((key, row, b))
    for key, row, b in reversed(pivots):
        out[key] = b - sum((v * out[k] for k, v in row.items() if k != key), Q(0))
    return out


def _transpose(rows: list[dict[int, Fraction]], tight: list[int], cols: list[int]) -> list[dict[int, Fraction]]:
    """Rows of A_{tight, cols}^T indexed by column j, keyed by row r."""
    colset = set(cols)
    t: dict[int, dict[int, Fraction]] = {j: {} for j in cols}
    for r in tight:
        for j, v in rows[r].items():
            if j in colset:
                t[j][r] = v
    return [t[j] for j in cols]


def exact_optimum(
    d: np.ndarray, eps: float, *, loss: np.ndarray | None = None, prior: np.ndarray | None = None,
    max_pivots: int = 5000,
) -> ExactOptimum:
    """The exact (rational) optimum of OPTMech's full LP at ``eps``, certified (module doc)."""
    d = np.asarray(d, dtype=np.float64)
    loss = d if loss is None else np.asarray(loss, dtype=np.float64)
    rows, rhs, kind, cost, nv = _build(d, eps, loss, prior)
    cols, tight = _float_basis(rows, rhs, kind, cost, nv)
    n, m = loss.shape
    try:
        _check_primal(rows, rhs, kind, cols, tight)
    except (AssertionError, ArithmeticError):
        cols, tight = _trivial_vertex(loss, prior, len(rows))
    col_rows: dict[int, list[int]] = {j: [] for j in range(nv)}
    for r, row in enumerate(rows):
        for j in row:
            col_rows[j].append(r)
    for pivots in range(max_pivots + 1):
        x = _solve([{j: rows[r][j] for j in rows[r] if j in set(cols)} for r in tight], [rhs[r] for r in tight], cols)
        y = _solve(_transpose(rows, tight, cols), [cost[j] for j in cols], tight)
        # (P): x >= 0 and every row met
        neg = [j for j in cols if x[j] < 0]
        if neg:
            raise AssertionError(f"the float basis is not primal feasible in exact arithmetic: x[{neg[0]}] < 0")
        for r, row in enumerate(rows):
            ax = sum((v * x.get(j, Q(0)) for j, v in row.items()), Q(0))
            assert (ax == rhs[r]) if kind[r] == "eq" else (ax <= rhs[r]), f"row {r} violated"
        # (D): reduced costs of the non-basic columns and the signs of the row duals
        basic = set(cols)
        entering = None
        for j in range(nv):
            if j in basic:
                continue
            red = cost[j] - sum((rows[r][j] * y.get(r, Q(0)) for r in col_rows[j]), Q(0))
            if red < 0:
                entering = ("col", j)
                break
        if entering is None:
            for r in tight:
                if kind[r] == "le" and y[r] > 0:
                    entering = ("row", r)
                    break
        if entering is None:
            value = sum((cost[j] * x[j] for j in cols), Q(0))
            n, m = loss.shape
            mat = [[x.get(u * m + w, Q(0)) for w in range(m)] for u in range(n)]
            return ExactOptimum(value, mat, pivots)
        cols, tight = _pivot(rows, rhs, kind, cols, tight, x, entering)
    raise AssertionError(f"no exact optimum after {max_pivots} pivots")


def _check_primal(rows, rhs, kind, cols, tight) -> None:
    """Raise unless the basis (cols, tight) is exactly primal feasible."""
    colset = set(cols)
    x = _solve([{j: rows[r][j] for j in rows[r] if j in colset} for r in tight], [rhs[r] for r in tight], cols)
    assert all(x[j] >= 0 for j in cols), "negative basic variable"
    for r, row in enumerate(rows):
        ax = sum((v * x.get(j, Q(0)) for j, v in row.items()), Q(0))
        assert (ax == rhs[r]) if kind[r] == "eq" else (ax <= rhs[r]), f"row {r} violated"


def _trivial_vertex(loss: np.ndarray, prior: np.ndarray | None, nrows: int) -> tuple[list[int], list[int]]:
    """The vertex 'every input releases output 0' (private at any eps): basic M[u, 0] (and
    k, tight on the loss row of the worst input), the row sums tight."""
    n, m = loss.shape
    cols = [u * m for u in range(n)]
    tight = list(range(n))
    if prior is None:
        cols.append(n * m)
        tight.append(nrows - n + int(np.argmax(loss[:, 0])))
    return cols, tight


def _pivot(rows, rhs, kind, cols, tight, x, entering):
    """One exact primal simplex pivot (ratio test, Bland's smallest-index ties)."""
    basic = set(cols)
    # direction: the entering column rises (or the entering row's slack opens) by t >= 0;
    # the basic x_B moves by dx with A_{tight,B} dx = -(entering's column on tight rows)
    what, idx = entering
    free_tight = [r for r in tight if not (what == "row" and r == idx)]
    if what == "col":
        mat = [{j: rows[r][j] for j in rows[r] if j in basic} for r in tight]
        rhs_dir = [-rows[r].get(idx, Q(0)) for r in tight]
        dx = _solve(mat, rhs_dir, cols)
    else:  # row idx leaves the tight set: a_idx x decreases by t, others stay tight
        mat = [{j: rows[r][j] for j in rows[r] if j in basic} for r in tight]
        rhs_dir = [Q(-1) if r == idx else Q(0) for r in tight]
        dx = _solve(mat, rhs_dir, cols)
    best, leave = None, None
    for j in sorted(cols):
        if dx[j] < 0:
            t = -x[j] / dx[j]
            if best is None or t < best:
                best, leave = t, ("col", j)
    # non-tight <= rows may become tight
    for r in range(len(rows)):
        if r in set(tight) or kind[r] != "le":
            continue
        ax = sum((v * x.get(j, Q(0)) for j, v in rows[r].items()), Q(0))
        da = sum((v * dx.get(j, Q(0)) for j, v in rows[r].items()), Q(0))
        if what == "col":
            da += rows[r].get(idx, Q(0))
        if da > 0:
            t = (rhs[r] - ax) / da
            if best is None or t < best:
                best, leave = t, ("row", r)
    if leave is None:
        raise AssertionError("unbounded LP (impossible for OPTMech)")
    new_cols, new_tight = list(cols), list(free_tight)
    if what == "col":
        new_cols.append(idx)
    if leave[0] == "col":
        new_cols.remove(leave[1])
    else:
        new_tight.append(leave[1])
    assert len(new_cols) == len(new_tight)
    return new_cols, new_tight
