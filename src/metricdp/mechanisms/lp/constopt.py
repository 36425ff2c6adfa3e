r"""ConstOPTMech: the LP mechanism of Imola et al. (UAI 2022, Algorithm 1) and its exact fit.

A *replacement function* :math:`I` names, for every output :math:`v`, the inputs
:math:`u \in I(v)` whose probability :math:`M[u,v]` is a free LP variable. Every other
entry is fixed to the weighted exponential form

.. math:: M_{\text{full}}[u,v] = Y_v\, e^{-\varepsilon' d(u,v)}, \qquad \varepsilon' = \varepsilon / 2,

with one LP variable :math:`Y_v \ge 0` per column. The mechanism is :math:`H` = the rows of
:math:`M_{\text{full}}` normalised to sum 1, which is :math:`\varepsilon`-mDP whenever
:math:`M_{\text{full}}` satisfies the privacy rows at :math:`\varepsilon'`
(Theorem 2 of the paper; proof in ``docs/proofs/constopt.md``).

Two fits choose the LP variables:

* ``paper`` -- the reduced LP of the paper's Theorem 1 proof for each penalty
  :math:`\lambda` (rows (18), (20), (22), (25), (26)); keep the :math:`H` of lowest loss.
* ``normalised`` (default) -- the loss of :math:`H` itself, minimised exactly. The
  constraints (22), (25), (26) and :math:`M_{\text{full}} \ge 0` are homogeneous, so
  the family is a cone :math:`C`, and the worst-case loss of :math:`H` is
  :math:`\max_w a_w(x) / b_w(x)` with :math:`a_w = \sum_v M_{\text{full}}[w,v] d(w,v)`,
  :math:`b_w = \sum_v M_{\text{full}}[w,v]` linear in the LP variables :math:`x`: a
  generalised linear-fractional program, solved to a certified relative tolerance by
  Dinkelbach-type iterations (``fast``) or bisection (``full``) on feasibility LPs.

Whatever the fit, the exponential mechanism at :math:`\varepsilon` (``Y`` constant and
every free entry at its fixed value, a member of the family) and, for the normalised fit,
every paper-fit candidate are kept as candidates: the result is never worse than them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from ..._validation import check_epsilon, check_int, check_quantile
from ...errors import PrivacyViolationError, SolverError, ValidationError
from ...loss import element_losses, quantile_rank
from ...spaces import MetricSpace, check_space
from ..base import Mechanism, certify
from ._solve import STATUS_NAMES, SolveResult, add_rows, new_highs, resolve, solve_lp
from .repair import repair, repair_free

if TYPE_CHECKING:  # pragma: no cover
    import highspy

__all__ = ["DEFAULT_LAMBDAS", "constopt", "nearest_neighbour_replacement"]

#: The penalties of the paper's experiments (Imola et al., Section 6).
DEFAULT_LAMBDAS: tuple[float, ...] = (0.001, 0.1, 1.0)
#: Relative optimality tolerance of the normalised fit.
FIT_RTOL = 1e-6
#: Target of ``eps * eta * d_min``: the log-space room the repair leaves for solver error.
REPAIR_ROOM = 1e-6
#: Terms of the dense rows a(x), b(x) with a factor exp(-eps' d) below this are left out
#: (HiGHS's own ``small_matrix_value``): see :func:`_dense_rows`.
DROP_TOL = 1e-9
#: Largest |log| of a cone coefficient kept as it is; beyond it the row is made stricter
#: (the family shrinks, privacy is untouched and the exponential mechanism stays in it).
LOG_CAP = 25.0
#: HiGHS options of the fast model: presolve only re-substitutes the A/B rows, at a cost
#: that grows to minutes at n = 2,000.
_HIGHS_OPTIONS: dict[str, Any] = {"presolve": "off"}
_CHUNK = 1 << 22  # elements per temporary of the vectorised coefficient computations
_FITS = ("normalised", "paper")
_FORMULATIONS = ("fast", "full")


# --------------------------------------------------------------------------- replacement
def nearest_neighbour_replacement(space: MetricSpace, r: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    r"""The paper's replacement function :math:`I_{NN,r}` as (free rows, free columns).

    :math:`u \in I_{NN,r}(v)` iff :math:`v` is one of the ``r`` nearest neighbours of
    :math:`u` (``u`` itself excluded, ties broken by the smaller index, as
    :meth:`MetricSpace.neighbours`). Entry ``k`` of the result says that
    ``M[rows[k], cols[k]]`` is a free LP variable; there are exactly ``n r`` of them and
    the diagonal is never free.

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> s = MetricSpace.from_points([[0.0], [1.0], [3.0]])
    >>> rows, cols = nearest_neighbour_replacement(s, 1)
    >>> rows.tolist(), cols.tolist()
    ([0, 1, 2], [1, 0, 1])
    """
    nb = space.neighbours(r)
    rows = np.repeat(np.arange(space.n, dtype=np.intp), nb.shape[1])
    return rows, np.ascontiguousarray(nb.ravel(), dtype=np.intp)


def _free_mask(space: MetricSpace, replacement: object, neighbours: object) -> NDArray[np.bool_]:
    """The (n, n) mask of free entries, from ``replacement`` or the default I_NN,r."""
    n = space.n
    if replacement is None:
        r = min(check_int(neighbours, "neighbours", minimum=0), n - 1)  # r >= n - 1: all free
        rows, cols = nearest_neighbour_replacement(space, r)
    elif isinstance(replacement, np.ndarray) and replacement.ndim == 2:
        if replacement.dtype != np.bool_:
            raise ValidationError(
                "replacement as a matrix must be a boolean (n, n) mask (True = free entry), "
                f"got dtype {replacement.dtype}"
            )
        if replacement.shape != (n, n):
            raise ValidationError(f"replacement mask must have shape ({n}, {n}), got {replacement.shape}")
        return np.array(replacement, dtype=bool)
    elif isinstance(replacement, tuple | list) and len(replacement) == 2:
        rows, cols = (np.asarray(a) for a in replacement)
        for name, a in (("rows", rows), ("cols", cols)):
            if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
                raise ValidationError(f"replacement {name} must be a 1-d integer array, got shape {a.shape} {a.dtype}")
        if rows.shape != cols.shape:
            raise ValidationError(f"replacement rows and cols differ in length: {rows.size} != {cols.size}")
        bad = (rows < 0) | (rows >= n) | (cols < 0) | (cols >= n)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValidationError(f"replacement entry {k} = ({rows[k]}, {cols[k]}) is outside 0..{n - 1}")
    else:
        raise ValidationError(
            "replacement must be None, a boolean (n, n) mask, or a pair (rows, cols) of index arrays, "
            f"got {type(replacement).__name__}"
        )
    mask = np.zeros((n, n), dtype=bool)
    mask[rows.astype(np.intp), cols.astype(np.intp)] = True
    return mask


# --------------------------------------------------------------------------- the cone
@dataclass(frozen=True, eq=False)
class _Cone:
    r"""Geometry of the reduced LP at the LP level ``level`` (:math:`\varepsilon'(1-\eta)`).

    Free entries ``f`` are ``(fu[f], fw[f])``, sorted by column then row. Variables are
    ``x = (Y, z)`` with the free entry scaled as :math:`M[u,w] = z_f e^{-\ell d(u,w)}`, so
    the exponential mechanism is ``Y = z = 1`` and every cone coefficient is a ratio to
    the fixed form (well scaled when ``I`` holds near pairs). Rows, with ``x`` the fixed
    entries of column ``w`` (:math:`x \notin I(w)`):

    * (25) :math:`z_f \le c^{25}_f Y_w`,
      :math:`\log c^{25}_f = \ell\,(d(u,w) + \min_x [d(u,x) - d(x,w)])`;
    * (26) :math:`c^{26}_f Y_w \le z_f`,
      :math:`\log c^{26}_f = \ell\,(d(u,w) - \min_x [d(x,w) + d(x,u)])`;
    * (22) :math:`z_i \le c^{22}_{ij} z_j` for free ``i = (u, w)``, ``j = (v, w)``,
      :math:`\log c^{22} = \ell\,(d(u,v) + d(u,w) - d(v,w))`.

    The (22) row of pair (i, j) is *implied* by (25) of i and (26) of j when
    :math:`c^{25}_i \le c^{22}_{ij} c^{26}_j`; without the cap that is
    ``m25[i] + m26[j] <= d(u, v)``, independent of the level.
    """

    d: NDArray[np.float64]
    level: float
    free: NDArray[np.bool_]
    fu: NDArray[np.intp]
    fw: NDArray[np.intp]
    g: NDArray[np.float64]  # exp(-level d)
    log25: NDArray[np.float64]  # +inf where the column has no fixed entry
    log26: NDArray[np.float64]  # -inf likewise
    pi: NDArray[np.intp]  # (22) pairs: free entries i, j of one column, i != j
    pj: NDArray[np.intp]
    log22: NDArray[np.float64]
    implied: NDArray[np.bool_]

    @property
    def n(self) -> int:
        return self.d.shape[0]

    @property
    def nfree(self) -> int:
        return len(self.fu)

    @property
    def bounded(self) -> NDArray[np.bool_]:
        """Free entries whose column has a fixed entry (only they get rows (25), (26))."""
        return np.isfinite(self.log25)

    def matrix(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """M_full of the variables ``x = (Y, z)`` (negatives from the solver clipped)."""
        x = np.maximum(x, 0.0)
        y, z = x[: self.n], x[self.n : self.n + self.nfree]
        m = self.g * y[None, :]
        m[self.fu, self.fw] = self.g[self.fu, self.fw] * z
        return m


def _cone(d: NDArray[np.float64], free: NDArray[np.bool_], level: float) -> _Cone:
    n = d.shape[0]
    fw, fu = np.nonzero(free.T)  # column-major: sorted by column w, then row u
    fu = fu.astype(np.intp)
    fw = fw.astype(np.intp)
    nf = len(fu)
    m25 = np.full(nf, np.inf)
    m26 = np.full(nf, np.inf)
    step = max(1, _CHUNK // n)
    for s in range(0, nf, step):
        u, w = fu[s : s + step], fw[s : s + step]
        excluded = free[:, w].T  # [k, x]: x is itself free in column w[k]: not a fixed entry
        dw = d[w]  # [k, x] = d(x, w)
        a = d[u] - dw  # d(u,x) - d(x,w)
        a[excluded] = np.inf
        m25[s : s + step] = a.min(axis=1)
        b = d[u] + dw  # d(x,u) + d(x,w)
        b[excluded] = np.inf
        m26[s : s + step] = b.min(axis=1)
    duw = d[fu, fw]
    with np.errstate(invalid="ignore"):
        log25 = np.minimum(level * (duw + m25), LOG_CAP)
        log26 = np.maximum(level * (duw - m26), -LOG_CAP)
    log25[~np.isfinite(m25)] = np.inf
    log26[~np.isfinite(m26)] = -np.inf

    # (22): all ordered pairs of distinct free entries of one column, built in one shot.
    size = np.bincount(fw, minlength=n)
    start = np.cumsum(size) - size
    per = size[fw]  # each free entry pairs with every entry of its column
    pi = np.repeat(np.arange(nf, dtype=np.intp), per)
    offset = np.arange(len(pi), dtype=np.intp) - np.repeat(np.cumsum(per) - per, per)
    pj = start[fw[pi]] + offset
    keep = pi != pj
    pi, pj = pi[keep], pj[keep]
    u, v, w = fu[pi], fu[pj], fw[pi]
    log22 = np.minimum(level * (d[u, v] + d[u, w] - d[v, w]), LOG_CAP)
    implied = log25[pi] <= log22 + log26[pj]  # False when the column has no fixed entry
    return _Cone(d, level, free, fu, fw, np.exp(-level * d), log25, log26, pi, pj, log22, implied)


def _dense_rows(cone: _Cone, with_distance: bool) -> sp.csr_matrix:
    r"""Rows ``a_u(x)`` (``with_distance``) or ``b_u(x)`` over ``x = (Y, z)``, CSR (n, n + F).

    Terms whose factor :math:`e^{-\ell d(u,w)}` is below ``DROP_TOL`` are left out: HiGHS
    treats such coefficients as zero anyway (its ``small_matrix_value``), and leaving them
    out here keeps the LP that is solved the LP that is described. The LP's row sums are
    then lower bounds of the true ones (rows (20) only get stricter: privacy is untouched),
    and every loss reported is recomputed from the full matrix.
    """
    n, nf = cone.n, cone.nfree
    ru, cw = np.nonzero(~cone.free & (cone.g >= DROP_TOL))
    coef_y = cone.g[ru, cw]
    gf = cone.g[cone.fu, cone.fw]
    keep = np.flatnonzero(gf >= DROP_TOL)
    coef_z = gf[keep]
    if with_distance:
        coef_y = coef_y * cone.d[ru, cw]
        coef_z = coef_z * cone.d[cone.fu[keep], cone.fw[keep]]
    rows = np.concatenate([ru, cone.fu[keep]])
    cols = np.concatenate([cw, n + keep])
    return sp.csr_matrix((np.concatenate([coef_y, coef_z]), (rows, cols)), shape=(n, n + nf))


def _bound_rows(cone: _Cone, ncols: int) -> sp.csr_matrix:
    """Rows (25) then (26) of every bounded free entry, as ``A x <= 0`` over ``x = (Y, z, ...)``."""
    f = np.flatnonzero(cone.bounded)
    k = len(f)
    z, y = cone.n + f, cone.fw[f]
    rows = np.concatenate([np.arange(k), np.arange(k), k + np.arange(k), k + np.arange(k)])
    cols = np.concatenate([z, y, y, z])
    vals = np.concatenate([np.ones(k), -np.exp(cone.log25[f]), np.exp(cone.log26[f]), -np.ones(k)])
    return sp.csr_matrix((vals, (rows, cols)), shape=(2 * k, ncols))


def _pair_rows(cone: _Cone, pairs: NDArray[np.intp], ncols: int) -> sp.csr_matrix:
    """Rows (22) ``z_i - c22 z_j <= 0`` of the given pairs, over ``x = (Y, z, ...)``."""
    k = len(pairs)
    rows = np.concatenate([np.arange(k), np.arange(k)])
    cols = cone.n + np.concatenate([cone.pi[pairs], cone.pj[pairs]])
    vals = np.concatenate([np.ones(k), -np.exp(cone.log22[pairs])])
    return sp.csr_matrix((vals, (rows, cols)), shape=(k, ncols))


def _mechanism_rows(m: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rows of a non-negative matrix normalised to sum 1 (the paper's H)."""
    return m / m.sum(axis=1, keepdims=True)


def _ratios(cone: _Cone, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Element losses of H = normalised M_full(x): a_u(x) / b_u(x)."""
    m = cone.matrix(x)
    return np.einsum("ij,ij->i", m, cone.d) / m.sum(axis=1)


# --------------------------------------------------------------------------- full formulation
def _to_paper_variables(cone: _Cone, a: sp.csr_matrix) -> sp.csr_matrix:
    """Rewrite rows over ``(Y, z)`` in the paper's variables ``(Y, M_free)``: z = M / g."""
    scale = np.concatenate([np.ones(cone.n), 1.0 / cone.g[cone.fu, cone.fw]])
    return sp.csr_matrix(a @ sp.diags(scale))


def _full_rows(cone: _Cone) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """Rows a(x), b(x) and every cone row (25), (26), (22) in the paper's variables."""
    ncols = cone.n + cone.nfree
    rows = sp.vstack([_bound_rows(cone, ncols), _pair_rows(cone, np.arange(len(cone.pi)), ncols)])
    return (
        _to_paper_variables(cone, _dense_rows(cone, True)),
        _to_paper_variables(cone, _dense_rows(cone, False)),
        _to_paper_variables(cone, rows),
    )


def _m_to_x(cone: _Cone, xm: NDArray[np.float64]) -> NDArray[np.float64]:
    gf = cone.g[cone.fu, cone.fw]
    return np.concatenate([xm[: cone.n], xm[cone.n : cone.n + cone.nfree] / gf])


class _Clock:
    """The user's time limit shared by every LP of one build."""

    def __init__(self, time_limit: float | None) -> None:
        if time_limit is not None:
            try:
                time_limit = float(time_limit)
            except (TypeError, ValueError):
                raise ValidationError(f"time_limit must be a number of seconds, got {time_limit!r}") from None
            if not time_limit > 0:
                raise ValidationError(f"time_limit must be > 0 seconds, got {time_limit!r}")
        self.deadline = None if time_limit is None else time.monotonic() + time_limit

    def left(self) -> float | None:
        if self.deadline is None:
            return None
        return max(self.deadline - time.monotonic(), 1e-3)


@dataclass
class _Stats:
    """LP statistics accumulated over every LP of one fit."""

    lps: int = 0
    optimal: int = 0
    rounds: int = 0
    seconds: float = 0.0
    variables: int = 0
    constraints: int = 0
    nonzeros: int = 0
    status: int = 0
    highs_status: str = ""
    message: str = ""
    rows22: int = 0
    blocks: int = 0

    def record(self, r: SolveResult) -> None:
        self.lps += 1
        self.optimal += r.status == 0
        self.seconds += r.seconds
        self.variables = max(self.variables, r.variables)
        self.constraints = max(self.constraints, r.constraints)
        self.nonzeros = max(self.nonzeros, r.nonzeros)
        if r.status != 0 or not self.highs_status:
            self.status, self.highs_status, self.message = r.status, r.highs_status, r.message


def _full_paper(cone: _Cone, lam: float, clock: _Clock, stats: _Stats) -> tuple[NDArray | None, SolveResult]:
    """The paper's reduced LP for one lambda, in one piece (the reference formulation)."""
    a, b, rows = _full_rows(cone)
    nv = cone.n + cone.nfree
    k = np.ones((cone.n, 1))
    A = sp.vstack(
        [
            sp.hstack([a + lam * b, sp.csr_matrix(-k)]),  # (18)
            sp.hstack([b, sp.csr_matrix((cone.n, 1))]),  # (20)
            sp.hstack([rows, sp.csr_matrix((rows.shape[0], 1))]),  # (25), (26), (22)
        ],
        format="csr",
    )
    lo = np.concatenate([np.full(cone.n, -np.inf), np.ones(cone.n), np.full(rows.shape[0], -np.inf)])
    hi = np.concatenate([np.zeros(cone.n), np.full(cone.n, np.inf), np.zeros(rows.shape[0])])
    c = np.zeros(nv + 1)
    c[-1] = 1.0
    col_lo = np.concatenate([np.zeros(nv), [-np.inf]])
    r = solve_lp(c, A, lo, hi, col_lo, np.inf, time_limit=clock.left())
    stats.record(r)
    stats.rows22 = max(stats.rows22, len(cone.pi))
    return (None if r.x is None else _m_to_x(cone, r.x)), r


def _feasibility_lp(cone: _Cone, t: float, time_limit: float | None = None) -> SolveResult:
    r"""Is there :math:`x \in C` with :math:`b(x) \ge 1` and :math:`a(x) \le t\, b(x)`?

    The feasibility LP of the normalised fit, written plainly with every row (22);
    status 0 with a point, or infeasible (:func:`_infeasible`) when no mechanism of the
    family has worst-case loss at most ``t``.
    """
    a, b, rows = _full_rows(cone)
    nv = cone.n + cone.nfree
    A = sp.vstack([a - t * b, b, rows], format="csr")
    lo = np.concatenate([np.full(cone.n, -np.inf), np.ones(cone.n), np.full(rows.shape[0], -np.inf)])
    hi = np.concatenate([np.zeros(cone.n), np.full(cone.n, np.inf), np.zeros(rows.shape[0])])
    return solve_lp(np.zeros(nv), A, lo, hi, 0.0, np.inf, time_limit=time_limit)


def _infeasible(r: SolveResult) -> bool:
    """HiGHS proved the LP infeasible (its presolve may say "infeasible or unbounded": with a
    zero objective, as in the feasibility LPs, unbounded is impossible)."""
    return r.status == 2 or (r.status == 4 and "infeasible" in r.highs_status.lower())


def _full_parametric(cone: _Cone, t: float, time_limit: float | None = None) -> SolveResult:
    r"""The plain LP :math:`F(t) = \min s` s.t. :math:`a(x) - t\, b(x) \le s`, :math:`\sum_u b_u(x) = n`.

    Every row (22) written out, variables ``(Y, M_free, s)``. :math:`F(t) > 0` iff no
    member of the family has worst-case loss at most t (``docs/proofs/constopt.md`` §5).
    Unlike the pure feasibility LP (:func:`_feasibility_lp`), it is always feasible:
    HiGHS proves an optimum far more readily than it proves infeasibility far from the
    optimum (measured: over 120 s against 2 s at n = 100).
    """
    a, b, rows = _full_rows(cone)
    n, nv = cone.n, cone.n + cone.nfree
    ones = sp.csr_matrix(np.ones((n, 1)))
    A = sp.vstack(
        [
            sp.hstack([a - t * b, -ones]),
            sp.hstack([sp.csr_matrix(b.sum(axis=0)), sp.csr_matrix((1, 1))]),
            sp.hstack([rows, sp.csr_matrix((rows.shape[0], 1))]),
        ],
        format="csr",
    )
    k = rows.shape[0]
    lo = np.concatenate([np.full(n, -np.inf), [float(n)], np.full(k, -np.inf)])
    hi = np.concatenate([np.zeros(n), [float(n)], np.zeros(k)])
    c = np.zeros(nv + 1)
    c[-1] = 1.0
    return solve_lp(c, A, lo, hi, np.concatenate([np.zeros(nv), [-np.inf]]), np.inf, time_limit=time_limit)


def _full_bisection(
    cone: _Cone, x0: NDArray[np.float64], clock: _Clock, stats: _Stats, rtol: float
) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """Plain bisection on t, one cold-started plain LP per step (the reference normalised fit).

    Each step solves :func:`_full_parametric` at the middle of the bracket: a positive
    optimum raises the lower end, otherwise its solution (value at most the middle)
    lowers the upper end.
    """
    best_x, best_t = x0, float(_ratios(cone, x0).max())
    lo, hi, status, its = 0.0, best_t, "certified", 0
    while hi - lo > rtol * hi:
        mid = (lo + hi) / 2
        r = _full_parametric(cone, mid, clock.left())
        stats.record(r)
        its += 1
        if r.status != 0:
            status = STATUS_NAMES.get(r.status, "numerical/other")
            break
        if r.objective > 0:
            lo = mid
            continue
        x = _polish(cone, _m_to_x(cone, r.x))
        t = float(_ratios(cone, x).max())
        if t < best_t:
            best_x, best_t = x, t
        hi = min(mid, t)
    info = {
        "t": best_t,
        "lower_bound": lo if status == "certified" else None,
        "certified": status == "certified",
        "iterations": its,
        "status": status,
    }
    return best_x, info


# --------------------------------------------------------------------------- fast formulation
class _FastModel:
    r"""A warm-started HiGHS model for the paper LPs or the normalised fit (``fast`` formulation).

    Variables ``x = (Y, e)`` with the free entries written as :math:`z_f = c^{26}_f Y_w + e_f`,
    :math:`e \ge 0` (rows (26) become bounds), and auxiliary ``A, B, s``. Rows:

    * ``a(x) - A = 0`` and ``b(x) - B = 0`` (the dense rows);
    * objective rows: paper fit :math:`A_u + \lambda B_u - s \le 0` with :math:`B \ge 1`
      (rows (18), (20)); normalised fit :math:`A_u - t B_u - c_u s \le 0` with
      :math:`\sum_u B_u = n`, :math:`B \ge 0` (a model is one or the other, fixed by its
      first solve). A new t and c change ``2n`` coefficients of the live model, whose
      basis warm-starts the next solve; a new :math:`\lambda` starts a fresh model
      (:meth:`paper`: measured far faster than the warm start there);
    * per output column ``w`` in the model (a *block*: :math:`Y_w` and the :math:`e_f` of
      its free entries): rows (25), and the rows (22) of its pairs that are not implied by
      (25) and (26) (:class:`_Cone`; over 98% are implied on GloVe and Gaussian spaces).

    **Column generation over outputs.** At the optimum most outputs are never released
    (:math:`Y_w = 0`, measured: 79% at n = 400 on GloVe), so only some blocks are in the
    model. After each solve the reduced cost of every absent block's best direction is
    priced from the row duals :math:`y` (vectorised, one product with the dense rows):
    with :math:`\bar c = -(D_A^\top y_A + D_B^\top y_B)`,

    .. math:: \rho_w = \bar c_{Y_w} + \sum_{f \in w} \min(0, \bar c_{e_f})\,(c^{25}_f - c^{26}_f),

    the least reduced cost over the block's cone with :math:`Y_w = 1` when its rows (22)
    are relaxed, hence a lower bound of the true one. Blocks with :math:`\rho_w < 0` (to
    the solver's dual tolerance) are added, most negative first, and the model re-solved
    from its basis (the new columns enter at 0, so it stays primal feasible). When no
    block prices out, the duals are feasible for the whole LP: the restricted optimum is
    an optimum of the LP with every block (LP duality). Blocks whose column has no fixed
    entry are always in the model.

    **Rows (22) of blocks in the model** are all there when they are few (at most
    ``2F + 1000`` non-implied rows overall); otherwise they are generated when a solution
    violates them. No solution is used before it satisfies every non-implied (22) row of
    its blocks to a relative 1e-9.
    """

    def __init__(
        self, cone: _Cone, clock: _Clock, stats: _Stats, method: str = "auto", options: dict[str, Any] | None = None
    ) -> None:
        n, nf = cone.n, cone.nfree
        self.cone, self.clock, self.stats, self.method = cone, clock, stats, method
        self.options = dict(_HIGHS_OPTIONS if options is None else options)
        self.nx = nx = n + nf
        bounded = cone.bounded
        c26 = np.where(bounded, np.exp(cone.log26), 0.0)
        # x_(Y,z) = T x_(Y,e)
        fb = np.flatnonzero(bounded)
        self.t = sp.csr_matrix(
            (np.concatenate([np.ones(nx), c26[fb]]), (np.concatenate([np.arange(nx), n + fb]),
             np.concatenate([np.arange(nx), cone.fw[fb]]))),
            shape=(nx, nx),
        )
        self.da = sp.csc_matrix(_dense_rows(cone, True) @ self.t)
        self.db = sp.csc_matrix(_dense_rows(cone, False) @ self.t)
        self.width = np.where(bounded, np.exp(cone.log25) - c26, np.inf)  # room of e_f
        self.size = np.bincount(cone.fw, minlength=n)
        self.start = np.cumsum(self.size) - self.size
        self.c22 = np.exp(cone.log22)
        self.candidate = ~cone.implied
        self.eager22 = int(self.candidate.sum()) <= 2 * nf + 1000
        self.in_model = np.zeros(len(cone.pi), dtype=bool)
        self.present = np.zeros(n, dtype=bool)
        self.hcol = np.full(nx, -1, dtype=np.intp)  # HiGHS column of each x variable
        self.col_a, self.col_b, self.col_s = 0, n, 2 * n
        self.ncols = 2 * n + 1
        self.row_obj = 2 * n  # objective rows; the normalisation row is 3n
        self.h: highspy.Highs | None = None
        self.kind = ""  # "paper" or "normalised", fixed by the first solve

    # ------------------------------------------------------------------ blocks
    def _initial_blocks(self) -> NDArray[np.intp]:
        """Outputs to start from: the most-chosen neighbours, then cover every row."""
        cone, n = self.cone, self.cone.n
        m = max(20, n // 10)
        chosen = np.zeros(n, dtype=bool)
        chosen[np.argsort(-self.size, kind="stable")[:m]] = True
        chosen |= cone.free.all(axis=0)  # a column without fixed entry has no Y: always in
        # every row needs a positive coefficient in its row sum b_u among the chosen blocks
        yb = self.db[:, :n].tocsr()
        covered = (yb[:, np.flatnonzero(chosen)].max(axis=1).toarray().ravel() > 0)
        for u in np.flatnonzero(~covered):  # rare (dropped terms only): one block per row
            row = yb.getrow(u)
            chosen[row.indices[np.argmax(row.data)]] = True
        return np.flatnonzero(chosen)

    def _block_columns(self, blocks: NDArray[np.intp]) -> NDArray[np.intp]:
        """x indices of the blocks: each Y_w, then the e_f of their free entries."""
        sizes = self.size[blocks]
        offset = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        return np.concatenate([blocks, self.cone.n + np.repeat(self.start[blocks], sizes) + offset])

    def _block_rows(self, blocks: NDArray[np.intp]) -> sp.csr_matrix:
        """Rows (25) and the eager rows (22) of the blocks, over x (``A x <= 0``)."""
        cone = self.cone
        mask = np.zeros(cone.n, dtype=bool)
        mask[blocks] = True
        f = np.flatnonzero(mask[cone.fw] & cone.bounded)
        k = len(f)
        r25 = sp.csr_matrix(
            (np.concatenate([np.ones(k), -self.width[f]]),
             (np.concatenate([np.arange(k), np.arange(k)]), np.concatenate([cone.n + f, cone.fw[f]]))),
            shape=(k, self.nx),
        )
        pairs = np.flatnonzero(self.candidate & mask[cone.fw[cone.pi]]) if self.eager22 else np.empty(0, np.intp)
        self.in_model[pairs] = True
        return sp.vstack([r25, _pair_rows(cone, pairs, self.nx) @ self.t], format="csr")

    def _to_highs(self, rows: sp.csr_matrix) -> sp.csr_matrix:
        """Rows over x rewritten over the HiGHS columns (every column used is present)."""
        rows = sp.csr_matrix(rows)
        return sp.csr_matrix((rows.data, self.hcol[rows.indices], rows.indptr), shape=(rows.shape[0], self.ncols))

    def _add_blocks(self, blocks: NDArray[np.intp]) -> None:
        n = self.cone.n
        cols = self._block_columns(blocks)
        self.hcol[cols] = self.ncols + np.arange(len(cols))
        self.ncols += len(cols)
        self.present[blocks] = True
        entries = sp.vstack([self.da[:, cols], self.db[:, cols], sp.csr_matrix((n + 1, len(cols)))], format="csc")
        entries.resize((self.h.getNumRow(), len(cols)))
        self.h.addCols(
            len(cols), np.zeros(len(cols)), np.zeros(len(cols)), np.full(len(cols), np.inf), int(entries.nnz),
            entries.indptr[:-1].astype(np.int32), entries.indices.astype(np.int32), entries.data,
        )
        add_rows(self.h, self._to_highs(self._block_rows(blocks)), -np.inf, 0.0)

    def _price(self, objective: float) -> NDArray[np.intp]:
        """Absent blocks whose best direction has a negative reduced cost, most negative first."""
        cone, n = self.cone, self.cone.n
        y = np.asarray(self.h.getSolution().row_dual, dtype=np.float64)
        rc = -(self.da.T @ y[:n] + self.db.T @ y[n : 2 * n])
        gain = np.minimum(rc[n:], 0.0) * np.where(np.isfinite(self.width), self.width, 0.0)
        rho = rc[:n] + np.bincount(cone.fw, weights=gain, minlength=n)
        absent = np.flatnonzero(~self.present & (rho < -1e-7 * max(1.0, abs(objective))))
        batch = max(20, n // 40)
        return absent[np.argsort(rho[absent], kind="stable")[:batch]]

    def point(self, col_value: ArrayLike) -> NDArray[np.float64]:
        """``(Y, z)`` of a solution of this model (absent blocks 0, negatives clipped)."""
        v = np.asarray(col_value, dtype=np.float64)
        x = np.where(self.hcol >= 0, v[np.maximum(self.hcol, 0)], 0.0)
        return self.t @ np.maximum(x, 0.0)

    # ------------------------------------------------------------------ solving
    def _build(self, lam: float | None, t: float = 0.0, c: NDArray[np.float64] | None = None) -> SolveResult:
        n = self.cone.n
        eye = sp.identity(n, format="csr")
        zero = sp.csr_matrix((n, n))
        zcol = sp.csr_matrix((n, 1))
        paper = lam is not None
        obj = (
            sp.hstack([eye, lam * eye, -sp.csr_matrix(np.ones((n, 1)))])
            if paper
            else sp.hstack([eye, -t * eye, -sp.csr_matrix(np.asarray(c)[:, None])])
        )
        base = sp.vstack(
            [sp.hstack([-eye, zero, zcol]), sp.hstack([zero, -eye, zcol]), obj, sp.hstack([sp.csr_matrix((1, n)),
             np.ones((1, n)), sp.csr_matrix((1, 1))])],
            format="csr",
        )
        blocks = self._initial_blocks()
        cols = self._block_columns(blocks)
        self.hcol[cols] = self.ncols + np.arange(len(cols))
        self.ncols += len(cols)
        self.present[blocks] = True
        rows = self._to_highs(self._block_rows(blocks))
        top = sp.hstack([base, sp.vstack([self.da[:, cols], self.db[:, cols], sp.csr_matrix((n + 1, len(cols)))])])
        a = sp.vstack([top, rows], format="csr")
        k = rows.shape[0]
        norm = (-np.inf, np.inf) if paper else (float(n), float(n))
        lo = np.concatenate([np.zeros(2 * n), np.full(n, -np.inf), [norm[0]], np.full(k, -np.inf)])
        hi = np.concatenate([np.zeros(3 * n), [norm[1]], np.zeros(k)])
        cost = np.zeros(self.ncols)
        cost[self.col_s] = 1.0
        col_lo = np.concatenate([np.zeros(n), np.full(n, 1.0 if paper else 0.0), [-np.inf], np.zeros(len(cols))])
        self.h = new_highs(method=self.method)
        if self.method == "auto":  # from the slack basis: measured 2x faster each way (n = 800)
            self.h.setOptionValue("simplex_strategy", 1 if paper else 4)
        for key, value in self.options.items():
            self.h.setOptionValue(key, value)
        return solve_lp(cost, a, lo, hi, col_lo, np.inf, time_limit=self.clock.left(), highs=self.h)

    def _resolve(self, primal: bool) -> SolveResult:
        # new columns at 0 keep the basis primal feasible: primal simplex (measured 5-10x
        # fewer iterations than dual there); changed coefficients or new rows: dual simplex
        self.h.setOptionValue("simplex_strategy", 4 if primal else 1)
        r = resolve(self.h, time_limit=self.clock.left())
        self.stats.record(r)
        return r

    def _solve(self, r: SolveResult | None) -> SolveResult:
        if r is None:
            r = self._resolve(primal=False)
        else:
            self.stats.record(r)
        while r.status == 0:
            new = self._violated(r.x)
            if new.size:
                self.in_model[new] = True
                add_rows(self.h, self._to_highs(_pair_rows(self.cone, new, self.nx) @ self.t), -np.inf, 0.0)
            else:
                blocks = self._price(float(r.objective))
                if blocks.size == 0:
                    break
                self._add_blocks(blocks)
            self.stats.rounds += 1
            r = self._resolve(primal=new.size == 0)
        self.stats.rows22 = int(self.in_model.sum())
        self.stats.blocks = int(self.present.sum())
        return r

    def _violated(self, col_value: NDArray[np.float64]) -> NDArray[np.intp]:
        """Non-implied (22) pairs not yet in the model that the solution violates (relative 1e-9)."""
        cone = self.cone
        z = self.point(col_value)[cone.n :]
        idx = np.flatnonzero(self.candidate & ~self.in_model)
        lhs = z[cone.pi[idx]]
        excess = lhs - self.c22[idx] * z[cone.pj[idx]]
        floor = 1e-6 * float(z.max(initial=0.0))
        return idx[excess > 1e-9 * np.maximum(lhs, floor)]

    def _reset(self) -> None:
        """Forget the HiGHS model (blocks, rows (22) and basis); the next solve starts afresh."""
        self.h = None
        self.hcol[:] = -1
        self.ncols = 2 * self.cone.n + 1
        self.present[:] = False
        self.in_model[:] = False

    def paper(self, lam: float) -> SolveResult:
        """Solve the paper's LP for ``lam`` (rows (18), (20), (22), (25), (26)).

        Every lambda starts from a fresh model on the initial blocks: re-solving from the
        previous lambda's basis was measured about 10x slower (GloVe, r = 10, n = 2,000:
        465 s of HiGHS time for the three lambdas warm-started, 399 s of it the
        lambda = 0.1 -> 1.0 re-solve, against 43 s fresh).
        """
        if self.kind == "normalised":
            raise RuntimeError("a normalised-fit model cannot solve the paper LP")  # internal misuse
        self._reset()
        self.kind = "paper"
        return self._solve(self._build(lam))

    def normalised(self, t: float, c: NDArray[np.float64]) -> SolveResult:
        r"""Solve :math:`\min s` s.t. :math:`a - t b \le c\, s`, :math:`\sum b = n`, x in the cone."""
        if self.h is None:
            self.kind = "normalised"
            return self._solve(self._build(None, t, c))
        if self.kind != "normalised":
            raise RuntimeError("a paper-fit model cannot solve the normalised LP")  # internal misuse
        for u in range(self.cone.n):
            self.h.changeCoeff(self.row_obj + u, self.col_b + u, -t)
            self.h.changeCoeff(self.row_obj + u, self.col_s, -float(c[u]))
        return self._solve(None)


def _polish(cone: _Cone, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Clip negatives and put every bounded z exactly inside its rows (25), (26).

    The LP meets those rows only to its tolerance; clipping makes them exact (the box
    is never empty: :math:`c^{26} \\le 1 \\le c^{25}`), which leaves the repair only the
    (22) residuals of the solver to absorb.
    """
    x = np.maximum(np.asarray(x, dtype=np.float64), 0.0).copy()
    n = cone.n
    f = np.flatnonzero(cone.bounded)
    yw = x[cone.fw[f]]
    z = x[n + f]
    x[n + f] = np.clip(z, np.exp(cone.log26[f]) * yw, np.exp(cone.log25[f]) * yw)
    return x


def _dinkelbach(
    model: _FastModel, x0: NDArray[np.float64], rtol: float
) -> tuple[NDArray[np.float64], dict[str, Any]]:
    r"""Dinkelbach-type iterations for :math:`t^\star = \min_{x \in C} \max_u a_u(x)/b_u(x)`.

    The scaled variant of Crouzeix, Ferland and Schaible: from the incumbent
    :math:`x_k` of value :math:`t_k`, solve

    .. math:: F(t) = \min s \ \text{s.t.}\ a_u(x) - t\, b_u(x) \le s\, b_u(x_k)\ (\forall u),
              \ \sum_u b_u(x) = n,\ x \in C

    at :math:`t = t_k`; its solution has value :math:`\le t_k` and becomes the incumbent
    (superlinear convergence, finite on an LP). When an iteration improves by less than
    ``rtol`` relative, the next LP is solved at :math:`t = t_k(1 - \text{rtol})`: if
    :math:`F > 0` there, no point of the cone has value :math:`\le t` (every direction
    of C with positive rows scales onto the normalisation), which certifies
    :math:`t^\star > t_k(1 - \text{rtol})`; otherwise its solution improves by at least
    ``rtol`` and the iterations go on.
    """
    cone = model.cone
    x, t = x0, float(_ratios(cone, x0).max())
    its, status, lower, final, shift = 0, "certified", None, None, False
    while True:
        b = cone.matrix(x).sum(axis=1)
        t_try = t * (1.0 - rtol) if shift else t
        r = model.normalised(t_try, b / b.mean())
        its += 1
        if r.status != 0:
            status = STATUS_NAMES.get(r.status, "numerical/other")
            break
        final = float(r.objective)
        if shift and final > 0:
            lower = t_try
            break
        x_new = _polish(cone, model.point(r.x))
        t_new = float(_ratios(cone, x_new).max())
        if t_new < t:
            shift = not t_new < t * (1.0 - rtol)
            x, t = x_new, t_new
        elif shift:  # feasible at t(1 - rtol) by the solver, yet no better point: numerics
            status = "stalled"
            break
        else:
            shift = True
    info = {
        "t": t,
        "lower_bound": lower,
        "certified": lower is not None,
        "iterations": its,
        "status": status,
        "final_objective": final,
    }
    return x, info


# --------------------------------------------------------------------------- fits
@dataclass(frozen=True)
class _Candidate:
    """One member of the family considered by a fit (its matrix is formed only for the winner)."""

    name: str  # "exponential", "paper" or "normalised"
    lam: float | None
    losses: NDArray[np.float64]  # element losses of H (before the tolerance repair)
    x: NDArray[np.float64] | None  # (Y, z) at the LP level; None for the exact EM

    def score(self, quantile: float | None) -> float:
        return _score(self.losses, quantile)


def _score(losses: NDArray[np.float64], quantile: float | None) -> float:
    """Worst-case loss, or the inverted-CDF quantile of the element losses."""
    if quantile is None:
        return float(losses.max())
    return float(np.sort(losses)[quantile_rank(len(losses), quantile) - 1])


def _eta(epsilon: float, d_min: float) -> float:
    """The repair margin: ``epsilon * eta * d_min = REPAIR_ROOM`` (within [1e-9, 0.5])."""
    return float(min(0.5, max(1e-9, REPAIR_ROOM / (epsilon * d_min))))


@dataclass
class _Fit:
    matrix: NDArray[np.float64]
    info: dict[str, Any]
    score: float


def _fit(
    space: MetricSpace,
    inner: float,
    free: NDArray[np.bool_],
    fit: str,
    lambdas: tuple[float, ...],
    quantile: float | None,
    formulation: str,
    clock: _Clock,
    with_em: bool = True,
) -> _Fit:
    """Every candidate of one fit at inner level ``inner`` (guarantee ``2 inner``), repaired.

    Should the repair's spread check ever fail (measured spread: 1e-16 against a room of
    1e-6), the fit is redone at a 100 times larger eta, twice at most.
    """
    eta, retries = _eta(2.0 * inner, space.d_min), 2
    while True:
        try:
            return _fit_at(space, inner, eta, free, fit, lambdas, quantile, formulation, clock, with_em)
        except _SpreadError:
            if retries == 0 or eta >= 0.5:
                raise
            eta, retries = min(0.5, 100 * eta), retries - 1


class _SpreadError(PrivacyViolationError):
    """The tolerance repair refused the winner (row sums spread beyond its margin)."""


def _fit_at(
    space: MetricSpace,
    inner: float,
    eta: float,
    free: NDArray[np.bool_],
    fit: str,
    lambdas: tuple[float, ...],
    quantile: float | None,
    formulation: str,
    clock: _Clock,
    with_em: bool,
) -> _Fit:
    d = space.distances
    guarantee = 2.0 * inner
    level = inner * (1.0 - eta)
    cone = _cone(d, free, level)
    stats = _Stats()
    em = _mechanism_rows(np.exp(-inner * d))
    candidates = [_Candidate("exponential", None, element_losses(em, d), None)]
    del em  # n x n: rebuilt only if the EM wins
    paper: dict[str, Any] = {}
    model = _FastModel(cone, clock, stats) if formulation == "fast" else None
    for lam in lambdas:
        if model is not None:
            r = model.paper(lam)
            x = None if r.x is None else model.point(r.x)
        else:
            x, r = _full_paper(cone, lam, clock, stats)
        entry: dict[str, Any] = {"status": STATUS_NAMES.get(r.status, "numerical/other"), "message": r.message}
        if x is not None:
            x = _polish(cone, x)
            cand = _Candidate("paper", lam, _ratios(cone, x), x)
            candidates.append(cand)
            entry.update(objective=r.objective, loss=cand.score(quantile))
        paper[repr(float(lam))] = entry
    normalised: dict[str, Any] | None = None
    if fit == "normalised":
        # start from the best point of the family found so far (EM is x = 1)
        points = [c.x for c in candidates if c.x is not None] + [np.ones(cone.n + cone.nfree)]
        x0 = min(points, key=lambda p: float(_ratios(cone, p).max()))
        if model is not None:  # a fresh model: measured 2x faster than switching the paper one
            x, normalised = _dinkelbach(_FastModel(cone, clock, stats), x0, FIT_RTOL)
        else:
            x, normalised = _full_bisection(cone, x0, clock, stats, FIT_RTOL)
        if not normalised["certified"]:
            normalised["note"] = "the optimum was not certified; the best point found is used"
        x = _polish(cone, x)  # x0 may be the unpolished EM point x = 1
        candidates.append(_Candidate("normalised", None, _ratios(cone, x), x))
    if stats.optimal == 0:
        raise SolverError(
            f"constopt: no LP reached optimality (last: {stats.message}); the exponential mechanism "
            "is not returned in its place silently: build it explicitly, or allow more time",
            status=STATUS_NAMES.get(stats.status, "numerical/other"),
        )
    scores = [c.score(quantile) for c in candidates]
    # without the EM candidate, the best LP candidate is returned whatever its loss
    first = 0 if with_em else 1
    if len(candidates) == 1:  # only EM: every LP of the fit failed (intermediate LPs may not have)
        raise SolverError(
            "constopt: no LP candidate of the fit reached optimality ("
            + "; ".join(f"lambda {k}: {v['message']}" for k, v in paper.items())
            + (
                "); the exponential mechanism is not returned in its place silently: build it explicitly"
                if with_em
                else "), and exponential_candidate=False leaves the exponential mechanism out"
            ),
            status=STATUS_NAMES.get(stats.status, "numerical/other"),
        )
    order = np.argsort(scores[first:], kind="stable") + first
    best = candidates[int(order[0])]
    em_score = scores[0]
    matrix, winner, score = None, "exponential", em_score
    if best.name != "exponential":
        repaired = _repair(cone, best.x, d, guarantee, eta, formulation)
        rep_score = _score(element_losses(repaired, d), quantile)
        if rep_score <= em_score or not with_em:
            matrix, winner, score = repaired, best.name, rep_score
        else:
            del repaired
    if matrix is None:
        matrix = _mechanism_rows(np.exp(-inner * d))
    info: dict[str, Any] = {
        # every LP optimal and, for the normalised fit, the optimum certified
        "optimal": stats.optimal == stats.lps and (normalised is None or bool(normalised["certified"])),
        "winner": winner,
        "lambda": best.lam if winner == "paper" else None,
        "losses": {
            "exponential": em_score,
            "paper": {k: v.get("loss") for k, v in paper.items()},
            "normalised": scores[-1] if fit == "normalised" else None,
            "returned": score,
        },
        "paper": paper,
        "normalised": normalised,
        "inner_epsilon": inner,
        "lp_epsilon": level,
        "eta": eta,
        "lp": _lp_info(cone, stats, formulation),
    }
    return _Fit(matrix, info, score)


def _repair(
    cone: _Cone, x: NDArray[np.float64], d: NDArray[np.float64], guarantee: float, eta: float, formulation: str
) -> NDArray[np.float64]:
    r"""The winner's H made exactly ``guarantee``-mDP.

    ``fast``: :func:`~metricdp.mechanisms.lp.repair.repair_free` on :math:`M_{\text{full}}`
    at the LP level, in :math:`O(n^2 + \#(22))`. Its precondition holds for the polished
    point (:func:`_polish`): two fixed entries of a column by the triangle inequality, a
    free and a fixed one by rows (25) and (26), which the clipping makes exact and the
    cap ``LOG_CAP`` only tightens; only rows (22) carry the solver's tolerance, and the
    repair lifts exactly those. ``full`` (the reference): the column envelope of
    :func:`~metricdp.mechanisms.lp.repair.repair` on H, :math:`O(n^3)`.
    """
    if formulation == "fast":
        return repair_free(cone.matrix(x), d, cone.level, guarantee, rows=cone.fu, cols=cone.fw, overwrite=True)
    try:
        return repair(_mechanism_rows(cone.matrix(x)), d, guarantee, eta=eta)
    except PrivacyViolationError as exc:
        if "spread" not in str(exc):
            raise
        raise _SpreadError(str(exc)) from exc


def _lp_info(cone: _Cone, stats: _Stats, formulation: str) -> dict[str, Any]:
    """LP statistics, with the paper's counts (Theorem 1) beside the rows actually solved."""
    n, nf = cone.n, cone.nfree
    bounded = int(cone.bounded.sum())
    counts = {
        "variables": n + nf + 1,
        "free_entries": nf,
        "rows_18": n,
        "rows_20": n,
        "rows_22": len(cone.pi),
        "rows_25": bounded,
        "rows_26": bounded,
    }
    return {
        "formulation": formulation,
        "variables": stats.variables,
        "constraints": stats.constraints,
        "nonzeros": stats.nonzeros,
        "solve_seconds": stats.seconds,
        "status": stats.status,
        "highs_status": stats.highs_status,
        "lps_solved": stats.lps,
        "rounds": stats.rounds,
        "rows_22_implied": int(cone.implied.sum()),
        "rows_22_solved": len(cone.pi) if formulation == "full" else stats.rows22,
        "dropped_terms": int((cone.g < DROP_TOL).sum()),
        "outputs_in_model": cone.n if formulation == "full" else stats.blocks,
        "paper_counts": counts,
    }


# --------------------------------------------------------------------------- public builder
def _check_lambdas(lambdas: object, fit: str) -> tuple[float, ...]:
    try:
        values = [float(v) for v in lambdas]  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ValidationError(f"lambdas must be a sequence of numbers, got {lambdas!r}") from None
    for v in values:
        if not (math.isfinite(v) and v >= 0):
            raise ValidationError(f"every lambda must be finite and >= 0, got {v!r}")
    if fit == "paper" and not values:
        raise ValidationError("the paper fit needs at least one lambda")
    return tuple(dict.fromkeys(values))  # duplicates removed, order kept


def constopt(
    space: MetricSpace,
    epsilon: float,
    *,
    neighbours: int = 10,
    replacement: ArrayLike | tuple[ArrayLike, ArrayLike] | None = None,
    fit: str = "normalised",
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    quantile: float | None = None,
    calibrate: bool = False,
    time_limit: float | None = None,
    formulation: str = "fast",
    exponential_candidate: bool = True,
) -> Mechanism:
    r"""ConstOPTMech (Imola et al., UAI 2022, Algorithm 1): an LP mechanism of small size.

    Entries :math:`M[u,v]` with :math:`u \in I(v)` are LP variables; all others are fixed
    to :math:`Y_v e^{-\varepsilon' d(u,v)}` with :math:`\varepsilon' = \varepsilon/2`
    and one variable :math:`Y_v \ge 0` per column. The result is

    .. math:: H[u,v] = M_{\text{full}}[u,v] \Big/ \sum_{w} M_{\text{full}}[u,w],

    which is :math:`\varepsilon`-mDP when :math:`M_{\text{full}}` satisfies the privacy
    rows at :math:`\varepsilon'` (the paper's Theorem 2: normalising changes a ratio by
    :math:`s_v/s_u \le e^{\varepsilon' d(u,v)}`). The reduced LP is the one of the
    paper's Theorem 1 proof: variables Y, the free entries and k; rows

    * (18) :math:`\sum_v M_{\text{full}}[w,v]\,(d(w,v) + \lambda) \le k` for every w.
      The paper's equation (6) prints the penalty as :math:`\lambda \sum_u M_{uu}`; it
      is meant to penalise rows that sum to more than 1, and is read here as
      :math:`\lambda` times the row sum of w;
    * (20) every row of :math:`M_{\text{full}}` sums to at least 1;
    * (22) :math:`M[u,w] \le e^{\varepsilon' d(u,v)} M[v,w]` for :math:`u \ne v`, both in
      :math:`I(w)`;
    * (25) :math:`M[u,w] \le Y_w \min_{v \notin I(w)} e^{\varepsilon'(d(u,v) - d(v,w))}`
      for :math:`u \in I(w)`;
    * (26) :math:`Y_w \max_{u \notin I(w)} e^{-\varepsilon'(d(u,w) + d(u,v))} \le M[v,w]`
      for :math:`v \in I(w)`;

    rows between two fixed entries hold by the triangle inequality and are not built.

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
        The mDP level of the result, > 0.
    neighbours : int, optional
        r of the default replacement :math:`I_{NN,r}` (:func:`nearest_neighbour_replacement`);
        ignored when ``replacement`` is given. ``r >= n - 1`` frees every off-diagonal
        entry (r is capped at ``n - 1``, the value recorded in ``params``).
    replacement : bool array (n, n) or (rows, cols), optional
        A user replacement function: ``mask[u, v]`` (or the pairs ``(rows[k], cols[k])``)
        True when :math:`u \in I(v)`, i.e. ``M[u, v]`` is free. Any set is valid, the
        diagonal included (Theorem 2 holds for every I; a free diagonal entry is one more
        variable). A column that is entirely free has no fixed entry and no :math:`Y_v`.
    fit : {"normalised", "paper"}
        ``paper``: the reduced LP for every lambda, keeping the H of lowest loss.
        ``normalised`` (default): additionally minimise the worst-case loss of H itself
        exactly (to relative ``FIT_RTOL``; a generalised linear-fractional program over
        the cone of the family, see the module docstring and ``docs/proofs/constopt.md``).
    lambdas : sequence of float
        Penalties of the paper fit (default ``(0.001, 0.1, 1.0)`` as in the paper's
        experiments); may be empty for the normalised fit.
    quantile : float in (0, 1], optional
        Compare the candidates by this quantile of the element losses (inverted CDF)
        instead of the worst case. The normalised fit still minimises the worst case.
    calibrate : bool
        Find by bisection the largest inner level p in [eps/2, eps] whose result passes
        the exact audit at ``epsilon`` (:func:`~metricdp.mechanisms.calibration.largest_passing`)
        and return it when its loss is lower. Privacy then rests on that audit.
    time_limit : float, optional
        Seconds for all the LPs of the build together.
    formulation : {"fast", "full"}
        ``full``: every LP in one piece as the paper writes it, each solved from scratch,
        and plain bisection for the normalised fit (the reference). ``fast`` (default):
        column generation from a small model for each lambda, one warm-started model for
        the normalised fit, rows (26) as bounds, rows (22) implied by (25) and (26) left out, column generation
        over output columns, and Dinkelbach-type iterations for the normalised fit
        (:class:`_FastModel`), and the :math:`O(n^2)` tolerance repair
        :func:`~metricdp.mechanisms.lp.repair.repair_free`. Both reach optima of the
        same LPs; the paper fit's losses agree up to ties between optimal vertices.
    exponential_candidate : bool
        ``True`` (default): the exponential mechanism at eps is a candidate, so the
        result is never worse than it. ``False``: the best LP candidate of the fit is
        returned even where the exponential mechanism would beat it (to measure the fit
        itself, as the paper's ablation does); privacy is unchanged.

    Returns
    -------
    Mechanism
        Name ``"constopt"``; ``info["winner"]`` says which candidate was returned
        (``"normalised"``, ``"paper"`` with ``info["lambda"]``, or ``"exponential"``
        when no LP candidate beat the exponential mechanism at ``epsilon``, which is
        itself the member Y = 1 of the family); ``info["losses"]`` holds every
        candidate's loss, ``info["lp"]`` the LP statistics (``paper_counts`` are the
        counts of the paper's LP, Theorem 1 / Corollary 1).

    Raises
    ------
    ValidationError
        Bad arguments (each names the culprit).
    SolverError
        When no LP candidate of the fit reached optimality (time limit, numerical
        trouble), even if intermediate LPs of its column generation did. The
        exponential mechanism is never returned in its place silently.
    PrivacyViolationError
        When the repaired matrix fails the independent audit (never expected).

    Notes
    -----
    *Solver tolerance.* Every LP is solved at :math:`\varepsilon'(1-\eta)` with
    :math:`\varepsilon \eta\, d_{\min} = 10^{-6}`; the chosen candidate is then
    repaired at :math:`\varepsilon` and audited by
    :func:`~metricdp.mechanisms.base.certify`. ``fast``:
    :func:`~metricdp.mechanisms.lp.repair.repair_free` lifts only the free entries of
    :math:`M_{\text{full}}` (envelope over the pairs of rows (22), :math:`O(n^2)`; rows
    (25), (26) are exact after clipping and fixed entries are exact by construction)
    and normalises (Theorem 2). ``full``: :func:`~metricdp.mechanisms.lp.repair.repair`
    on H (column envelope, row normalisation, checked spread; :math:`O(n^3)`). A
    candidate is compared before the repair; the repaired winner is returned only if it
    still beats the exponential mechanism.

    References
    ----------
    J. Imola, S. Kasiviswanathan, S. White, A. Aggarwal, N. Teissier. Balancing Utility
    and Scalability in Metric Differential Privacy. UAI 2022 (Algorithm 1, Theorems 1-2).
    J.-P. Crouzeix, J. A. Ferland, S. Schaible. An algorithm for generalized fractional
    programs. J. Optim. Theory Appl. 47 (1985).

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> space = MetricSpace.from_points([[0.0], [1.0], [2.5], [4.0], [4.2]])
    >>> mech = constopt(space, 1.0, neighbours=2)
    >>> mech.name, mech.audit().epsilon <= 1.0
    ('constopt', True)
    >>> mech.worst_case_loss() <= mech.info["losses"]["exponential"]
    True
    """
    space = check_space(space)
    epsilon = check_epsilon(epsilon)
    if fit not in _FITS:
        raise ValidationError(f"fit must be one of {', '.join(_FITS)}, got {fit!r}")
    if formulation not in _FORMULATIONS:
        raise ValidationError(f"formulation must be one of {', '.join(_FORMULATIONS)}, got {formulation!r}")
    lams = _check_lambdas(lambdas, fit)
    q = None if quantile is None else check_quantile(quantile)
    if not isinstance(calibrate, bool | np.bool_):
        raise ValidationError(f"calibrate must be True or False, got {calibrate!r}")
    if not isinstance(exponential_candidate, bool | np.bool_):
        raise ValidationError(f"exponential_candidate must be True or False, got {exponential_candidate!r}")
    clock = _Clock(time_limit)
    free = _free_mask(space, replacement, neighbours)
    if epsilon * space.diameter > 700:
        raise ValidationError(
            f"epsilon * diameter = {epsilon * space.diameter:.4g} > 700: exp(-eps d) underflows in "
            "double precision and no finite matrix is exactly eps-mDP there; rescale the distances"
        )

    def run(inner: float) -> _Fit:
        return _fit(space, inner, free, fit, lams, q, formulation, clock, bool(exponential_candidate))

    result = run(epsilon / 2)
    info = result.info
    if calibrate:
        result, info = _calibrate(space, epsilon, run, result)
    params = {
        "neighbours": None if replacement is not None else min(int(neighbours), space.n - 1),
        "replacement": "user" if replacement is not None else "nearest_neighbours",
        "free_entries": int(free.sum()),
        "fit": fit,
        "lambdas": list(lams),
        "quantile": q,
        "formulation": formulation,
        "calibrate": bool(calibrate),
        "exponential_candidate": bool(exponential_candidate),
    }
    return certify(result.matrix, space, epsilon, "constopt", params, info)


def _calibrate(
    space: MetricSpace, epsilon: float, run: Any, base: _Fit
) -> tuple[_Fit, dict[str, Any]]:
    """Largest inner level in [eps/2, eps] whose result passes the audit; keep it if better."""
    from ..calibration import largest_passing

    cache: dict[float, _Fit] = {epsilon / 2: base}

    def build(p: float) -> NDArray[np.float64]:
        if p not in cache:
            cache[p] = run(p)
        return cache[p].matrix

    cal = largest_passing(build, space.distances, epsilon, epsilon / 2, epsilon, rtol=1e-3, max_iter=14)
    chosen = cache[cal.parameter]
    used = chosen.score < base.score
    result = chosen if used else base
    info = dict(result.info)
    info["calibration"] = {
        "inner_epsilon": cal.parameter,
        "epsilon_audit": cal.epsilon_audit,
        "iterations": cal.iterations,
        "loss": chosen.score,
        "uncalibrated_loss": base.score,
        "used": bool(used),
    }
    return result, info
