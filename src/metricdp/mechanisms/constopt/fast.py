r"""ConstOPTMech's fast formulation: one warm-started model with column and row generation.

:class:`FastModel` solves the paper's reduced LP (one penalty at a time) or the
normalised fit's parametric LPs on a HiGHS model (through :class:`metricdp.lp._solve.LPModel`)
that holds only the output columns and rows (22) that matter, priced from the duals;
:mod:`.fast_fits` drives it (the paper's penalties side by side, Dinkelbach's iterations to
the normalised fit's optimum). Same optima as the reference formulation (:mod:`.reference`).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from ...lp._solve import LPModel, SolveResult
from ...lp.deadline import Deadline
from .certificate import paper_bound
from .cone import Cone, dense_rows, pair_rows
from .stats import FitStats

__all__ = ["DENSE_OPTIONS", "DENSE_SWITCH", "FAST_OPTIONS", "SCALE_MAX_WIDTH", "FastModel"]

#: Blocks priced in per round: the most negative ``max(PRICE_BATCH_MIN, n // PRICE_BATCH_DIVISOR)``.
PRICE_BATCH_MIN, PRICE_BATCH_DIVISOR = 20, 40

#: The dense regime: when more than this fraction of the absent blocks price
#: out negative, every block goes in at once; a paper-fit model is then rebuilt with all
#: of them and solved from scratch. Why: at large eps most outputs are released, and
#: pricing blocks in a batch at a time costs tens of rounds on an ever larger model, where
#: one model with every block solves from scratch (:data:`DENSE_OPTIONS`); at small eps
#: few outputs are released and the switch never triggers.
#: Adding every negatively priced block to the live model instead is no substitute (about
#: twice the iterations of the fresh model).
#: The evidence: benchmarks/RESULTS.md#docstrings-constopt-fast-dense-switch.
DENSE_SWITCH = 0.5

#: The variable of a free entry is its fraction of the room between rows (26) and (25)
#: (``v = e / width``, rows (25) become ``v <= Y_w``) when every room is at most this.
#: Why: unscaled, e spans several orders of magnitude at large eps, and HiGHS's dual
#: tolerance (1e-7) on its reduced cost then stops the paper LP measurably above its
#: optimum, which the scaled model reaches to rounding. With rooms up to e^20 (LOG_CAP
#: reached) the scaled model is numerically troubled, so there the unscaled variables are
#: kept. The evidence: benchmarks/RESULTS.md#docstrings-constopt-fast-scale-max-width.
SCALE_MAX_WIDTH = 1e6

#: Beyond :data:`SCALE_MAX_WIDTH`, the variable of a free entry is ``e / min(width, ROOM_CAP)``:
#: scaled as far as HiGHS stays reliable. Why: with rooms up to e^20 (large GloVe spaces at
#: large eps) the unscaled model stops well above the optimum and depends on the solve path;
#: a cap of 1e2 to 1e4 comes nearer (1e4 nearest, at the same cost), while 1e6 runs into
#: numerical trouble. What remains is closed by :meth:`FastModel.certified`.
ROOM_CAP = 1e4

#: A paper LP whose certified gap (:meth:`FastModel.dual_bound`) exceeds this relative to
#: its objective is re-solved from its basis with :data:`EXACT_OPTIONS` (ConstOPTMech's LPs are exact to 1e-9).
CERTIFY_RTOL = 1e-9

#: HiGHS tolerances of that re-solve, and the defaults restored after it.
EXACT_OPTIONS: dict[str, Any] = {"dual_feasibility_tolerance": 1e-10, "primal_feasibility_tolerance": 1e-10}
LOOSE_OPTIONS: dict[str, Any] = {"dual_feasibility_tolerance": 1e-7, "primal_feasibility_tolerance": 1e-7}

#: HiGHS options of the fast model: presolve only re-substitutes the A/B rows, at a cost
#: that grows to minutes at n = 2,000.
FAST_OPTIONS: dict[str, Any] = {"presolve": "off"}

#: HiGHS options of a dense-regime model (every block, :data:`DENSE_SWITCH`): IPX's interior
#: point, then its crossover to an optimal basis (a vertex with its duals, as the dual
#: simplex returns; later rounds re-solve from that basis by simplex). Why: the model's
#: 2n dense rows make each of the dual simplex's thousands of iterations (about one per
#: row) work on a dense block of about 2n x n, while the interior point needs tens of
#: iterations and the crossover a few hundred pivots: same optima for less work.
#: Only on scaled variables (:data:`SCALE_MAX_WIDTH`): unscaled, IPX called the feasible
#: GloVe n = 400, eps 4 models infeasible; should it fail anyway short of the time limit
#: (infeasible, unbounded: impossible for this feasible, bounded LP; numerical trouble, an
#: iteration limit), the dual simplex solves the model again.
DENSE_OPTIONS: dict[str, Any] = {"solver": "ipm", "run_crossover": "on"}


class FastModel:
    r"""A warm-started HiGHS model for the paper LPs or the normalised fit (``fast`` formulation).

    Variables ``x = (Y, e)`` with each free entry written from the side of its rows (26)
    or (25): :math:`z_f = c^{26}_f Y_w + e_f` (lower side) or
    :math:`z_f = c^{25}_f Y_w - e_f` (upper side), :math:`e \ge 0`, so one of its rows
    becomes a bound and the other is :math:`e_f \le (c^{25}_f - c^{26}_f) Y_w`; ``e`` is
    scaled by that room when :data:`SCALE_MAX_WIDTH` allows. The side of a block's entries
    is the one of its best direction at the pricing that brings it in (the sign of the
    reduced cost of z), or, for the next lambda after a model in the dense regime, the
    side each entry took in the previous lambda's optimum (:meth:`sides`; with its blocks,
    the *seed* of the next model; outside the dense regime a seed is slower than a fresh
    start, so only the dense regime seeds): a seeded model skips the first rounds (every
    block goes in at once) and an entry that sits at the bound its variable starts from
    costs no simplex pivot (benchmarks/RESULTS.md#docstrings-constopt-fast-fastmodel).
    Auxiliary ``A, B, s``. Rows:

    * ``a(x) - A = 0`` and ``b(x) - B = 0`` (the dense rows);
    * objective rows: paper fit :math:`A_u + \lambda B_u - s \le 0` with :math:`B \ge 1`
      (rows (18), (20)); normalised fit :math:`A_u - t B_u - c_u s \le 0` with
      :math:`\sum_u B_u = n`, :math:`B \ge 0` (a model is one or the other, fixed by its
      first solve). A new t and c change ``2n`` coefficients of the live model, whose
      basis warm-starts the next solve; a new :math:`\lambda` starts a fresh model
      (:meth:`paper`: a fresh model is far faster than the warm start there);
    * per output column ``w`` in the model (a *block*: :math:`Y_w` and the :math:`e_f` of
      its free entries): rows (25), and the rows (22) of its pairs that are not implied by
      (25) and (26) (:class:`Cone`; on GloVe and Gaussian spaces nearly all are implied).

    **Column generation over outputs.** At the optimum most outputs are never released
    (:math:`Y_w = 0` for most w), so only some blocks are in the
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

    **The dense regime** (large eps, :data:`DENSE_SWITCH`): when most outputs are released,
    adding blocks a batch per round takes tens of rounds on an ever larger model, while
    one model with every block solves from scratch: most rows (18) and (20) are then
    tight, and each dual simplex iteration works on a dense block of about 2n rows by n
    columns, so that model goes to the interior point and its crossover
    (:data:`DENSE_OPTIONS`). The alternatives timed and not used (other pricing rules,
    warm starts across lambdas, a Dantzig-Wolfe master, dropping small dense terms,
    seeding the normalised fit) are in
    benchmarks/RESULTS.md#docstrings-constopt-fast-fastmodel.
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
        self.c25 = np.where(bounded, np.exp(cone.log25), 0.0)
        self.c26 = np.where(bounded, np.exp(cone.log26), 0.0)
        self.fb = np.flatnonzero(bounded)
        self.dza = sp.csc_matrix(dense_rows(cone, True))
        self.dzb = sp.csc_matrix(dense_rows(cone, False))
        self.width = np.where(bounded, self.c25 - self.c26, np.inf)  # room of e_f
        finite = self.width[self.fb]
        self.scaled = bool(finite.size == 0 or finite.max() <= SCALE_MAX_WIDTH)
        # e_f's variable is e_f / escale_f: its room when scaled, else its room capped at ROOM_CAP
        self.escale = np.where(bounded, self.width if self.scaled else np.minimum(self.width, ROOM_CAP), 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):  # rows (25): v <= ratio25 Y (a zero room: 1)
            self.ratio25 = np.where(self.escale > 0, self.width / self.escale, 1.0)
        self.size = np.bincount(cone.fw, minlength=n)
        self.start = np.cumsum(self.size) - self.size
        self.c22 = np.exp(cone.log22)
        self.candidate = ~cone.implied
        self.eager22 = int(self.candidate.sum()) <= 2 * nf + 1000
        self.col_a, self.col_b, self.col_s = 0, n, 2 * n
        self.row_obj = 2 * n  # objective rows; the normalisation row is 3n
        # the state of one model (the arrays above are read-only from here: fork shares them)
        self.seed: tuple[NDArray[np.intp], NDArray[np.bool_]] | None = None
        self.rcz = np.zeros(nf)  # reduced costs of z at the last pricing
        self.kind = ""  # "paper" or "normalised", fixed by the first solve
        self.lam: float | None = None
        self.lp: LPModel | None = None
        self.up = np.zeros(nf, dtype=bool)  # side of each free entry's variable (see the class docstring)
        self.in_model = np.zeros(len(cone.pi), dtype=bool)
        self.present = np.zeros(n, dtype=bool)
        self.hcol = np.full(nx, -1, dtype=np.intp)  # HiGHS column of each x variable
        self.ncols = 2 * n + 1
        self.rows25: list[NDArray[np.intp]] = []  # HiGHS rows (25), in blocks as added
        self.new25 = 0

    def fork(self, stats: FitStats) -> FastModel:
        """A model of the same cone with no HiGHS model yet, this one's seed and its own ``stats``.

        Shares the read-only coefficient arrays (no copy); every array a solve writes is
        its own, so a fork solves in another thread beside this one (:func:`.fast_fits.solve_papers`).
        """
        twin = copy.copy(self)
        twin.stats, twin.kind, twin.lam, twin.rcz = stats, "", None, np.zeros(self.cone.nfree)
        twin.up, twin.in_model, twin.present, twin.hcol = (
            self.up.copy(), self.in_model.copy(), self.present.copy(), self.hcol.copy())
        twin._reset()
        return twin

    @property
    def t(self) -> sp.csr_matrix:
        """``x_(Y,z) = T x_(Y,e)`` for the current sides: ``z_f = c26 Y_w + e_f`` (lower side)
        or ``z_f = c25 Y_w - e_f`` (upper side); a free entry without fixed entry in its
        column is ``z_f = e_f``."""
        n, nx, fb = self.cone.n, self.nx, self.fb
        up = self.up[fb]
        sign = np.ones(self.cone.nfree)
        sign[fb] = self.escale[fb]
        sign[fb[up]] *= -1.0
        return sp.csr_matrix(
            (np.concatenate([np.ones(n), sign, np.where(up, self.c25[fb], self.c26[fb])]),
             (np.concatenate([np.arange(nx), n + fb]), np.concatenate([np.arange(nx), self.cone.fw[fb]]))),
            shape=(nx, nx),
        )

    def _dense(self, cols: NDArray[np.intp]) -> tuple[sp.csc_matrix, sp.csc_matrix]:
        """Columns ``cols`` (over x) of the dense rows a(x), b(x) at the current sides."""
        t = sp.csc_matrix(self.t)[:, cols]
        return sp.csc_matrix(self.dza @ t), sp.csc_matrix(self.dzb @ t)

    # ------------------------------------------------------------------ blocks
    def _initial_blocks(self) -> NDArray[np.intp]:
        """Outputs to start from: the most-chosen neighbours, then cover every row."""
        cone, n = self.cone, self.cone.n
        chosen = np.zeros(n, dtype=bool)
        if self.seed is not None:  # the blocks of an earlier solve, on their sides
            chosen[self.seed[0]] = True
            self.up[:] = self.seed[1]
        else:
            chosen[np.argsort(-self.size, kind="stable")[: max(20, n // 10)]] = True
        chosen |= cone.free.all(axis=0)  # a column without fixed entry has no Y: always in
        # every row needs a positive coefficient in its row sum b_u among the chosen blocks
        yb = self.dzb[:, :n].tocsr()
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
        k = self.new25 = len(f)  # rows (25) come first (:meth:`dual_bound` tells them apart)
        r25 = sp.csr_matrix(
            (np.concatenate([np.ones(k), -self.ratio25[f]]),
             (np.concatenate([np.arange(k), np.arange(k)]), np.concatenate([cone.n + f, cone.fw[f]]))),
            shape=(k, self.nx),
        )
        pairs = np.flatnonzero(self.candidate & mask[cone.fw[cone.pi]]) if self.eager22 else np.empty(0, np.intp)
        self.in_model[pairs] = True
        return sp.vstack([r25, self._pairs(pairs)], format="csr")

    def _pairs(self, pairs: NDArray[np.intp]) -> sp.csr_matrix:
        r"""Rows (22) of ``pairs`` over x, each divided by its largest coefficient.

        Over the scaled variables a row's coefficients reach :math:`c^{22} \cdot` width,
        up to :math:`e^{40}`, beyond HiGHS's ``large_matrix_value`` (1e15): dividing a
        ``<= 0`` row by a positive number leaves it the same row.
        """
        rows = sp.csr_matrix(pair_rows(self.cone, pairs, self.nx) @ self.t)
        rows.eliminate_zeros()
        # row maxima; an empty row (every coefficient underflowed to 0, e.g. at eps = 1e-308) keeps 1
        big = abs(rows).max(axis=1).toarray().ravel()
        big[big == 0] = 1.0
        return sp.csr_matrix(sp.diags(1.0 / big) @ rows)

    def _to_highs(self, rows: sp.csr_matrix) -> sp.csr_matrix:
        """Rows over x rewritten over the HiGHS columns (every column used is present)."""
        rows = sp.csr_matrix(rows)
        return sp.csr_matrix((rows.data, self.hcol[rows.indices], rows.indptr), shape=(rows.shape[0], self.ncols))

    def _add_blocks(self, blocks: NDArray[np.intp]) -> None:
        n = self.cone.n
        f = np.flatnonzero(np.isin(self.cone.fw, blocks) & self.cone.bounded)
        self.up[f] = self.rcz[f] < 0  # the side of the block's best direction at the pricing
        cols = self._block_columns(blocks)
        self.hcol[cols] = self.ncols + np.arange(len(cols))
        self.ncols += len(cols)
        self.present[blocks] = True
        da, db = self._dense(cols)
        entries = sp.vstack([da, db, sp.csr_matrix((n + 1, len(cols)))], format="csc")
        lp = self._model()
        entries.resize((lp.num_rows, len(cols)))
        lp.add_cols(np.zeros(len(cols)), 0.0, np.inf, entries)
        start = lp.num_rows
        lp.add_rows(self._to_highs(self._block_rows(blocks)), -np.inf, 0.0)
        self.rows25.append(start + np.arange(self.new25))

    def _model(self) -> LPModel:
        if self.lp is None:  # internal misuse: solve first
            raise RuntimeError("the fast model has no HiGHS model yet")
        return self.lp

    def _price(self, r: SolveResult) -> NDArray[np.intp]:
        """Absent blocks whose best direction has a negative reduced cost, most negative first."""
        cone, n = self.cone, self.cone.n
        objective = float(r.objective)  # type: ignore[arg-type]
        y = np.asarray(r.row_dual, dtype=np.float64)
        rc = -(self.dza.T @ y[:n] + self.dzb.T @ y[n : 2 * n])  # over (Y, z)
        self.rcz = rcz = rc[n:]
        gain = rcz * self.c26 + np.minimum(rcz, 0.0) * np.where(np.isfinite(self.width), self.width, 0.0)
        rho = rc[:n] + np.bincount(cone.fw, weights=gain, minlength=n)
        absent = np.flatnonzero(~self.present & (rho < -1e-7 * max(1.0, abs(objective))))
        if len(absent) > DENSE_SWITCH * int((~self.present).sum()):
            return np.flatnonzero(~self.present)
        batch = max(PRICE_BATCH_MIN, n // PRICE_BATCH_DIVISOR)
        return absent[np.argsort(rho[absent], kind="stable")[:batch]]

    def sides(self, col_value: ArrayLike) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        """The blocks in the model and, per free entry, whether a solution is nearer its upper bound."""
        x = self.point(col_value)
        n = self.cone.n
        y = x[self.cone.fw]
        up = np.where(y > 0, x[n:] - self.c26 * y > 0.5 * np.where(self.cone.bounded, self.width, 0.0) * y, self.up)
        return np.flatnonzero(self.present), up & self.cone.bounded

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
        self.rows25 = [3 * n + 1 + np.arange(self.new25)]
        da, db = self._dense(cols)
        top = sp.hstack([base, sp.vstack([da, db, sp.csr_matrix((n + 1, len(cols)))])])
        a = sp.vstack([top, rows], format="csr")
        k = rows.shape[0]
        norm = (-np.inf, np.inf) if paper else (float(n), float(n))
        lo = np.concatenate([np.zeros(2 * n), np.full(n, -np.inf), [norm[0]], np.full(k, -np.inf)])
        hi = np.concatenate([np.zeros(3 * n), [norm[1]], np.zeros(k)])
        cost = np.zeros(self.ncols)
        cost[self.col_s] = 1.0
        col_lo = np.concatenate([np.zeros(n), np.full(n, 1.0 if paper else 0.0), [-np.inf], np.zeros(len(cols))])
        self.lp = LPModel(method=self.method)
        # the dense regime (a rebuild, or seeded from one) on scaled variables: interior point
        ipm = self.method == "auto" and paper and len(blocks) == n and self.scaled
        if self.method == "auto":  # from the slack basis: the faster simplex for each kind of model
            self.lp.set_options(DENSE_OPTIONS if ipm else {"simplex_strategy": 1 if paper else 4})
        self.lp.set_options(self.options)
        r = self.lp.load(cost, a, lo, hi, col_lo, np.inf, time_limit=self.deadline.solve_limit())
        if ipm and r.status != 0 and r.model_status != "kTimeLimit":  # feasible (x = 1): IPX failed
            self.lp.set_options({"solver": "simplex", "simplex_strategy": 1})
            r = self.lp.resolve(time_limit=self.deadline.solve_limit())
        return r

    def _resolve(self, primal: bool) -> SolveResult:
        # new columns at 0 keep the basis primal feasible: primal simplex (several times
        # fewer iterations than dual there); changed coefficients or new rows: dual simplex
        lp = self._model()
        options: dict[str, Any] = {"simplex_strategy": 4 if primal else 1}
        if self.method == "auto":  # after an interior point build (DENSE_OPTIONS): simplex again
            options["solver"] = "simplex"
        lp.set_options(options)
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
                self._model().add_rows(self._to_highs(self._pairs(new)), -np.inf, 0.0)
            else:
                blocks = self._price(r)
                if blocks.size == 0:
                    break
                if self.present.sum() + blocks.size == self.cone.n and self.kind == "paper":
                    # the dense regime: a fresh model with every block, on the pricing's sides
                    self.up[:] = self.rcz < 0
                    self.seed = (np.arange(self.cone.n), self.up & self.cone.bounded)
                    self.stats.rounds += 1
                    r = self._rebuild()
                    continue
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
        self.rows25 = []
        self.present[:] = False
        self.in_model[:] = False
        self.up[:] = False

    def _rebuild(self) -> SolveResult:
        lam = self.lam
        self._reset()
        r = self._build(lam)
        self.stats.record(r)
        return r

    def paper(self, lam: float) -> SolveResult:
        """Solve the paper's LP for ``lam`` (rows (18), (20), (22), (25), (26)).

        Every lambda starts from a fresh model on the initial blocks: re-solving from the
        previous lambda's basis is about 10x slower on large spaces outside the dense
        regime (benchmarks/RESULTS.md#docstrings-constopt-fast-paper); in it, a near
        lambda is solved warm by :meth:`paper_warm`.
        """
        if self.kind == "normalised":
            raise RuntimeError("a normalised-fit model cannot solve the paper LP")  # internal misuse
        self._reset()
        self.kind = "paper"
        self.lam = lam
        r = self._solve(self._build(lam))
        if r.status == 0 and r.x is not None and self.present.all():  # seeds only in the dense regime
            self.seed = self.sides(r.x)
        return r

    def paper_warm(self, lam: float) -> SolveResult:
        r"""The paper's LP for ``lam`` from this model's last paper optimum, when that was in
        the dense regime; otherwise (or should the warm start fail short of the time limit)
        :meth:`paper` from a fresh model.

        A new penalty changes only the n coefficients :math:`\lambda` of :math:`B_u` in the
        objective rows (18). Every :math:`B_u` at its bound 1 keeps the basis matrix, so the
        previous optimal basis stays dual feasible there and the dual simplex restores
        primal feasibility from it; with every block present, no pricing follows. Why only
        for a near penalty (:func:`.fast_fits.solve_papers`): a small step in lambda leaves
        the dual simplex little to restore, faster than a fresh interior point, while a far
        one (lambda 0.001 to 1.0) leaves it more than the fresh interior point costs.
        """
        if self.kind != "paper" or self.lp is None or self.lam is None or not self.present.all():
            return self.paper(lam)  # (also after a :meth:`certified` re-solve that was not kept)
        n = self.cone.n
        self._model().change_coeffs(self.row_obj + np.arange(n), self.col_b + np.arange(n), np.full(n, float(lam)))
        self.lam = lam
        r = self._solve(None)
        if r.status != 0 and r.model_status != "kTimeLimit":
            return self.paper(lam)
        if r.x is not None and self.present.all():
            self.seed = self.sides(r.x)
        return r

    def dual_bound(self, r: SolveResult) -> float:
        """A certified lower bound of the paper LP's optimum (every block, every row) from
        the duals of ``r``, this model's last paper solve (:func:`.certificate.paper_bound`)."""
        return paper_bound(self, r)

    def certified(self, r: SolveResult) -> tuple[SolveResult, float]:
        """``r`` (this model's last paper solve) and its :meth:`dual_bound`; when the bound is
        more than :data:`CERTIFY_RTOL` relative below the objective, one more dual simplex
        from the optimal basis with :data:`EXACT_OPTIONS`' tighter tolerances, kept when it is
        optimal and its certified gap is smaller (otherwise the basis it left is discarded:
        the next warm start begins from a fresh model). Why: unscaled (rooms beyond
        :data:`SCALE_MAX_WIDTH`) the default tolerances stop measurably above the optimum, and
        the tight ones from a cold start are unreliable (HiGHS called such models unbounded),
        but from the near-optimal basis they finish in few pivots.
        """
        bound = self.dual_bound(r)
        obj = float(r.objective) if r.objective is not None else np.nan
        if r.status != 0 or not obj - bound > CERTIFY_RTOL * abs(obj) or self.lp is None:
            return r, bound
        r2 = self.tight()
        bound2 = self.dual_bound(r2) if r2.status == 0 else -np.inf
        if r2.status == 0 and r2.objective is not None and float(r2.objective) - bound2 < obj - bound:
            if self.present.all() and r2.x is not None:
                self.seed = self.sides(r2.x)
            return r2, bound2
        self.lp = None  # its basis is no longer the kept optimum's: no warm start from it
        return r, bound

    def tight(self) -> SolveResult:
        """The last LP once more, by dual simplex from its basis with :data:`EXACT_OPTIONS`'
        tolerances (the default options restored after)."""
        lp = self._model()
        lp.set_options({**EXACT_OPTIONS, "solver": "simplex", "simplex_strategy": 1})
        r = lp.resolve(time_limit=self.deadline.solve_limit())
        self.stats.record(r)
        lp.set_options(LOOSE_OPTIONS)
        return r

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
