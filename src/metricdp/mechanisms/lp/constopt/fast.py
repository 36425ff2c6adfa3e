r"""ConstOPTMech's fast formulation: one warm-started model with column and row generation.

:class:`FastModel` solves the paper's reduced LP (one penalty at a time) or the
normalised fit's parametric LPs on a HiGHS model (through :class:`.._solve.LPModel`)
that holds only the output columns and rows (22) that matter, priced from the duals;
:func:`dinkelbach` drives it to the normalised fit's optimum (Crouzeix, Ferland and
Schaible 1985). Same optima as the reference formulation (:mod:`.reference`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from .._solve import STATUS_NAMES, LPModel, SolveResult
from ..deadline import Deadline
from .cone import Cone, dense_rows, pair_rows, polish, ratios
from .stats import FitStats

__all__ = ["FAST_OPTIONS", "FastModel", "dinkelbach"]

#: Blocks priced in per round: the most negative ``max(PRICE_BATCH_MIN, n // PRICE_BATCH_DIVISOR)``.
PRICE_BATCH_MIN, PRICE_BATCH_DIVISOR = 20, 40

#: HiGHS options of the fast model: presolve only re-substitutes the A/B rows, at a cost
#: that grows to minutes at n = 2,000.
FAST_OPTIONS: dict[str, Any] = {"presolve": "off"}


class FastModel:
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
      (25) and (26) (:class:`Cone`; over 98% are implied on GloVe and Gaussian spaces).

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
        self,
        cone: Cone,
        deadline: Deadline,
        stats: FitStats,
        method: str = "auto",
        options: dict[str, Any] | None = None,
    ) -> None:
        n, nf = cone.n, cone.nfree
        self.cone, self.deadline, self.stats, self.method = cone, deadline, stats, method
        self.options = dict(FAST_OPTIONS if options is None else options)
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
        self.da = sp.csc_matrix(dense_rows(cone, True) @ self.t)
        self.db = sp.csc_matrix(dense_rows(cone, False) @ self.t)
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
        self.lp: LPModel | None = None
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
        return sp.vstack([r25, pair_rows(cone, pairs, self.nx) @ self.t], format="csr")

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
        lp = self._model()
        entries.resize((lp.num_rows, len(cols)))
        lp.add_cols(np.zeros(len(cols)), 0.0, np.inf, entries)
        lp.add_rows(self._to_highs(self._block_rows(blocks)), -np.inf, 0.0)

    def _model(self) -> LPModel:
        if self.lp is None:  # internal misuse: solve first
            raise RuntimeError("the fast model has no HiGHS model yet")
        return self.lp

    def _price(self, r: SolveResult) -> NDArray[np.intp]:
        """Absent blocks whose best direction has a negative reduced cost, most negative first."""
        cone, n = self.cone, self.cone.n
        objective = float(r.objective)  # type: ignore[arg-type]
        y = np.asarray(r.row_dual, dtype=np.float64)
        rc = -(self.da.T @ y[:n] + self.db.T @ y[n : 2 * n])
        gain = np.minimum(rc[n:], 0.0) * np.where(np.isfinite(self.width), self.width, 0.0)
        rho = rc[:n] + np.bincount(cone.fw, weights=gain, minlength=n)
        absent = np.flatnonzero(~self.present & (rho < -1e-7 * max(1.0, abs(objective))))
        batch = max(PRICE_BATCH_MIN, n // PRICE_BATCH_DIVISOR)
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
        self.lp = LPModel(method=self.method)
        if self.method == "auto":  # from the slack basis: measured 2x faster each way (n = 800)
            self.lp.set_options({"simplex_strategy": 1 if paper else 4})
        self.lp.set_options(self.options)
        return self.lp.load(cost, a, lo, hi, col_lo, np.inf, time_limit=self.deadline.solve_limit())

    def _resolve(self, primal: bool) -> SolveResult:
        # new columns at 0 keep the basis primal feasible: primal simplex (measured 5-10x
        # fewer iterations than dual there); changed coefficients or new rows: dual simplex
        lp = self._model()
        lp.set_options({"simplex_strategy": 4 if primal else 1})
        r = lp.resolve(time_limit=self.deadline.solve_limit())
        self.stats.record(r)
        return r

    def _solve(self, r: SolveResult | None) -> SolveResult:
        if r is None:
            r = self._resolve(primal=False)
        else:
            self.stats.record(r)
        while r.status == 0:
            new = self._violated(r.optimum("constopt")[0])
            if new.size:
                self.in_model[new] = True
                self._model().add_rows(self._to_highs(pair_rows(self.cone, new, self.nx) @ self.t), -np.inf, 0.0)
            else:
                blocks = self._price(r)
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
        self.lp = None
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
        if self.lp is None:
            self.kind = "normalised"
            return self._solve(self._build(None, t, c))
        if self.kind != "normalised":
            raise RuntimeError("a paper-fit model cannot solve the normalised LP")  # internal misuse
        n = self.cone.n
        rows = self.row_obj + np.arange(n)
        self._model().change_coeffs(np.r_[rows, rows], np.r_[self.col_b + np.arange(n), np.full(n, self.col_s)],
                                    np.r_[np.full(n, -t), -np.asarray(c, dtype=np.float64)])
        return self._solve(None)


def dinkelbach(
    model: FastModel, x0: NDArray[np.float64], rtol: float
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
    x, t = x0, float(ratios(cone, x0).max())
    its, status, lower, final, shift = 0, "certified", None, None, False
    while True:
        b = cone.matrix(x).sum(axis=1)
        t_try = t * (1.0 - rtol) if shift else t
        r = model.normalised(t_try, b / b.mean())
        its += 1
        if r.status != 0:
            status = STATUS_NAMES.get(r.status, "numerical/other")
            break
        xr, final = r.optimum("constopt")
        if shift and final > 0:
            lower = t_try
            break
        x_new = polish(cone, model.point(xr))
        t_new = float(ratios(cone, x_new).max())
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
