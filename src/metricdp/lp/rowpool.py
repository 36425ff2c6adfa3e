r"""The privacy rows held by a constraint-generation model, and which rows a round adds or drops.

One concept: the *row pool* of :func:`.core._solve_fast` (OPTMech's worst case): the rows
(u, v, w) in the HiGHS model, in the model's order after its fixed rows, and the two rules
that keep that model small:

* **Most violated per output** (:func:`most_violated`): a round adds at most
  :data:`ROWS_PER_OUTPUT` of the violated rows of each output column w, those of largest
  relative violation :math:`(M[u,w] - f[u,v] M[v,w]) / M[u,w]` first, instead of all of
  them. Why: each round's vertex violates thousands of rows, nearly all of which never bind
  (a few percent of the rows added carry a nonzero dual at the end), and the
  dual simplex's cost per iteration grows with the rows held. Why per output: every row
  (u, v, w) touches only column w of M (and, after the substitution, only X[., w]), so a cap
  per column spreads the rows over the blocks of the LP instead of piling them on the
  columns of largest violation.
* **Drop rows slack for a while** (:meth:`RowPool.drop_slack`): a row that has been strictly
  slack with a zero dual (so its slack variable is basic) at :data:`DROP_AFTER` consecutive
  optima is deleted from the model (and may come back later if violated). Deleting a basic
  row keeps the basis a basis of the smaller model (the row's basic slack goes with it), so
  the next re-solve stays warm; a row is dropped at most once (``RowPool.dropped``), so the
  generation terminates. Only where no factor is capped (:data:`DROP_AFTER`).

**Why the optimum is unchanged.** Neither rule changes where the generation stops: it stops
only when *no* allowed row is violated by more than :data:`.core.VIOLATION_TOL`, and then
the last optimum is optimal for a relaxation of the full LP (the rows in the model) and
feasible for the full LP to the tolerance, hence optimal for it -- the argument of
:func:`.core._solve_fast`, which never needed every violated row in every round. A dropped
row was basic, so its dual was 0 and the last optimum stays optimal for the smaller model:
the objective of the rounds never decreases. Termination: each round adds at least one row
not in the model; a row enters at most twice (once before and once after its one drop), and
there are finitely many rows.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ._solve import LPModel

__all__ = ["DROP_AFTER", "ROWS_PER_OUTPUT", "SLACK_TOL", "RowPool", "most_violated"]

#: Rows a round adds per output column (:func:`most_violated`). Fewer rows a round mean more
#: rounds but cheaper re-solves; anything from 10 to 40 does alike, while adding every
#: violated row costs far more CPU; at small eps the gain comes only with the drops
#: (:data:`DROP_AFTER`). The evidence: benchmarks/RESULTS.md#docstrings-lp-rowpool.
ROWS_PER_OUTPUT = 20

#: Consecutive optima at which a row is surely slack before it is dropped
#: (:meth:`RowPool.drop_slack`). :func:`.core.solve_raw` drops rows only where no factor is
#: capped (:data:`._solve.LOG_CAP`): with drops and the per-output cap together the
#: capped-factor test (30 points, eps 0.3 per unit, factors up to e^20) does not finish in
#: reasonable time, while each rule alone solves it quickly (the cause is not known). At 1
#: or 2 the dropped rows come back and the rounds more than double.
#: The evidence: benchmarks/RESULTS.md#docstrings-lp-rowpool.
DROP_AFTER = 3

#: Relative slack above which a row with a zero dual is surely basic (:meth:`RowPool.drop_slack`):
#: far above the rounding of M's entries (1e-16 relative), so a row at its bound (nonbasic)
#: is never taken for a slack one; a basic row below it merely stays in the model.
SLACK_TOL = 1e-9


def most_violated(
    p: NDArray[np.float64],
    factor: NDArray[np.float64],
    pu: NDArray[np.intp],
    pv: NDArray[np.intp],
    k: NDArray[np.intp],
    w: NDArray[np.intp],
    per_output: int,
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    r"""Of the violated rows (pair k, output w), at most ``per_output`` per output w: those of
    largest relative violation :math:`(M[u,w] - f[u,v] M[v,w]) / M[u,w]` (u = pu[k], v =
    pv[k]; ties by their order in the scan). Returned in that order, grouped by w.
    """
    if len(k) == 0:
        return k, w
    u, v = pu[k], pv[k]
    top = p[u, w]
    rel = (top - factor[u, v] * p[v, w]) / np.where(top > 0, top, 1.0)
    order = np.lexsort((-rel, w))  # by output, most violated first within it
    ws = w[order]
    starts = np.flatnonzero(np.r_[True, ws[1:] != ws[:-1]])
    rank = np.arange(len(ws)) - np.repeat(starts, np.diff(np.r_[starts, len(ws)]))
    keep = order[rank < per_output]
    return k[keep], w[keep]


class RowPool:
    """The privacy rows (pair index k into (pu, pv), output w) of a model after its ``fixed``
    rows, in the model's row order; rows already dropped once; consecutive basic optima."""

    def __init__(self, pu: NDArray[np.intp], pv: NDArray[np.intp], in_model: NDArray[np.bool_], fixed: int) -> None:
        self.pu, self.pv, self.in_model, self.fixed = pu, pv, in_model, fixed
        self.k = np.zeros(0, np.intp)
        self.w = np.zeros(0, np.intp)
        self.age = np.zeros(0, np.int64)
        self.dropped = np.zeros_like(in_model)

    def __len__(self) -> int:
        return len(self.k)

    def add(self, k: NDArray[np.intp], w: NDArray[np.intp]) -> None:
        """Record rows appended to the model (in this order)."""
        self.in_model[k, w] = True
        self.k, self.w = np.r_[self.k, k], np.r_[self.w, w]
        self.age = np.r_[self.age, np.zeros(len(k), np.int64)]

    def triples(self) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
        """(u, v, w) of the rows, in the model's order."""
        return self.pu[self.k], self.pv[self.k], self.w.copy()

    def drop_slack(
        self, lp: LPModel, row_dual: NDArray[np.float64], p: NDArray[np.float64], factor: NDArray[np.float64],
        after: int | None = None,
    ) -> int:
        r"""Age the rows that are *surely basic* at the model's optimum (``row_dual`` of every
        row of ``lp``; ``p`` its M): a zero dual and a relative slack
        :math:`(f[u,v] M[v,w] - M[u,w]) / M[u,w]` above :data:`SLACK_TOL` (a nonbasic row sits
        at its bound, slack 0); delete from ``lp`` the rows surely basic at ``after``
        consecutive optima (default :data:`DROP_AFTER`) that were never dropped before. Returns
        how many were deleted."""
        if len(self.k) == 0:
            return 0
        after = DROP_AFTER if after is None else after
        u, v, w = self.pu[self.k], self.pv[self.k], self.w
        top = p[u, w]
        slack = factor[u, v] * p[v, w] - top
        basic = (row_dual[self.fixed:] == 0) & (slack > SLACK_TOL * np.where(top > 0, top, 1.0))
        self.age = np.where(basic, self.age + 1, 0)
        gone = np.flatnonzero((self.age >= after) & ~self.dropped[self.k, w])
        if len(gone) == 0:
            return 0
        lp.delete_rows(gone + self.fixed)
        self.in_model[self.k[gone], w[gone]] = False
        self.dropped[self.k[gone], w[gone]] = True
        keep = np.ones(len(self.k), dtype=bool)
        keep[gone] = False
        self.k, self.w, self.age = self.k[keep], w[keep], self.age[keep]
        return len(gone)
