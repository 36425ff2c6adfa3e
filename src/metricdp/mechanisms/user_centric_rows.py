r"""Row generation for the user-centric LP: the full LP's optimum and certificate from its active rows.

The LP of :mod:`metricdp.mechanisms.user_centric` has :math:`n^2` adversary rows of n + 1
entries (:math:`n^3` non-zeros: 64 million on a 20 x 20 grid) and, with eps,
:math:`n^2(n-1)` privacy rows; at an optimum only a few of each output's rows bind.
:func:`solve_rows` therefore holds only the *active* rows in the HiGHS model:

1. **Start**: the n row sums, the quality row, for each output w the adversary rows of
   the :data:`START_GUESSES` guesses nearest to w (w itself first: the guess that costs
   exactly the quality loss), and with eps the privacy rows of every output between
   nearest neighbours (:func:`_nearest_pairs`; on a grid its four neighbours), most of
   the rows that bind: on a 6 x 6 grid (eps 0.6 per cell, a Dirichlet(0.5) prior, Q =
   planar Laplace's loss, below :math:`E_0`) the generation then needs 8 rounds instead of 67
   and ends holding fewer rows (4,811 against 11,293, of the full LP's 46,656 adversary and privacy rows).
2. **Separate** (the whole LP, every round): the adversary rows by one dense product,
   :math:`G = (\pi \circ K)^\top d` (:math:`G[w,\hat x] = \sum_x \pi(x) K[x,w]
   d(x,\hat x)`, :math:`n^3` flops), a row (w, x̂) violated when :math:`z_w - G[w,\hat x]`
   exceeds :func:`adversary_tolerance`; the privacy rows by a blocked scan of every
   triple (x, x', w), violated when :math:`K[x,w] - f(x,x') K[x',w] >`
   :data:`~metricdp.lp.core.VIOLATION_TOL` (``f`` the solved LP's factors). Of the
   violated rows of each output at most :data:`ADVERSARY_PER_OUTPUT` adversary and
   :data:`~metricdp.lp.rowpool.ROWS_PER_OUTPUT` privacy rows are added, the most violated
   first (:func:`~metricdp.lp.rowpool.most_violated`'s rule, for the reason given there).
0. **The blind case**: when the blind guess's error :math:`E_0` is at most Q, the constant
   mechanism on that guess is optimal; one solve of a model holding its adversary rows
   certifies it, and it is returned (:func:`_blind_guess`).
3. **Re-solve** warm (dual simplex from the previous basis: added rows enter basic) and
   go to 2; **stop** when no row of the full LP is violated beyond its tolerance.

**Why the result is the full LP's optimum.** Each model is a relaxation of the full LP
(a subset of its rows, the same columns and bounds), so its optimum is at least the full
LP's (a maximisation of :math:`\sum z`). At the stop the model's optimum meets every row
of the full LP to the tolerance, so it is feasible for the full LP (to that tolerance)
and attains at least its optimum: it is optimal. Termination: every round adds at least
one row not in the model (a row in the model is never a candidate), and there are
finitely many rows.

**Certificate over the full LP** (:func:`certificate`; proof in
``docs/proofs/user_centric.md`` §6): give every row outside the model a zero dual. The
weak-duality bound of :func:`~metricdp.lp.certificate.ranged_bound` is valid for *any*
multipliers, and a zero multiplier contributes nothing to :math:`c - A^\top y` nor to the
row terms, so the bound of the full LP at exactly eps is evaluated from the active rows
alone, rewritten at exactly eps (the solve ran at :math:`\varepsilon(1-\eta)` with
capped factors; rows whose exact exponent exceeds :data:`EXP_CAP` are given a zero dual
too). Memory is the active rows plus a few dense (n, n) arrays and one scan block, never
the full LP.

**Substitution** (``substitute=True``, with eps): the model is solved in OPTMech's variables
:math:`K[x,w] = X[x,w] + e^{-\ell d(x,w)} X[w,w]`, :math:`X \ge 0` (:func:`_substitution`),
which makes the privacy rows (w, x, w) bounds; the certificate adds those rows with
multipliers from the reduced costs (:func:`_peak_rows`; proof in §8). The same optimum and a
certificate as tight, but not the default: the optimum's columns need not peak on their
own output, and the substituted rows are denser (a row sum has 2n - 1 entries).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from .._progress import Progress, report
from .._resources import check_allocation
from ..errors import InfeasibleError, SolverTimeLimitError
from ..lp._solve import LOG_CAP, LPModel, SolveResult, require_optimal
from ..lp.certificate import ranged_bound
from ..lp.core import VIOLATION_TOL, WARM_OPTIONS
from ..lp.deadline import Deadline
from ..lp.pairs import pair_blocks
from ..lp.rowpool import ROWS_PER_OUTPUT, most_violated

__all__ = [
    "ADVERSARY_PER_OUTPUT", "BYTES_PER_NONZERO", "EXP_CAP", "OPTIONS", "START_GUESSES", "ActiveRows", "RowSolution",
    "adversary_tolerance", "certificate", "solve_rows",
]

#: Adversary rows per output in the first model: the guesses nearest to the output (itself
#: first). The rows that bind at the optimum are the adversary's best guesses, near the
#: output when the quality bound keeps the mechanism local; the generation adds the others.
START_GUESSES = 5
#: Ties of :func:`_nearest_pairs` (float rounding of equal distances).
NEAREST_RTOL = 1e-9
#: Violated adversary rows added per output per round (the most violated first).
ADVERSARY_PER_OUTPUT = 10
#: Relative accuracy of the adversary rows at the stop: a row (w, x̂) is violated when
#: :math:`z_w - G[w,\hat x]` exceeds this times :math:`\max(\sum_w z_w, \max d)/n`, so the
#: n outputs together lose at most this fraction of the objective (far below the 1e-9 the
#: certificate is held to; the certificate does not rely on it).
ADVERSARY_RTOL = 1e-12
#: Bytes per stored non-zero of the model (HiGHS's copies included: CSC, row-wise, factor work).
BYTES_PER_NONZERO = 64.0
#: Exponents e^{eps d} above this are not written in the certificate's rows (the row's dual is
#: set to zero instead: a relaxation, the bound stays valid).
EXP_CAP = 700.0
#: Tight tolerances: the certificate's bound is valid for any duals, these make it tight.
OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


@dataclass(frozen=True)
class ActiveRows:
    """The rows of a model after its n + 1 fixed rows (row sums, quality), in the model's order.

    ``adversary`` (k, 2): (w, x̂) of each adversary row; ``privacy`` (k, 3): (x, x', w) of
    each privacy row; ``order``: 0 for an adversary row and 1 for a privacy row, one entry
    per model row after the fixed ones (rows are appended a block of each kind a round).
    """

    adversary: NDArray[np.intp]
    privacy: NDArray[np.intp]
    order: NDArray[np.int8]


@dataclass(frozen=True)
class RowSolution:
    """The full LP's optimum from :func:`solve_rows`: K (n, n) as solved, z (n), the last
    solve (its row duals follow the model's rows: n sums, quality, then ``rows``), rounds."""

    matrix: NDArray[np.float64]
    z: NDArray[np.float64]
    result: SolveResult
    rows: ActiveRows
    rounds: int
    kernel: NDArray[np.float64] | None = None


def adversary_tolerance(z: NDArray[np.float64], dmax: float) -> float:
    """The violation above which an adversary row is added (:data:`ADVERSARY_RTOL`)."""
    return ADVERSARY_RTOL * max(float(z.sum()), dmax) / len(z)


def _adversary_block(pi: NDArray, d: NDArray, w: NDArray[np.intp], xh: NDArray[np.intp]) -> sp.csr_matrix:
    """Rows :math:`z_w - \\sum_x \\pi(x) d(x,\\hat x) K[x,w] \\le 0` for the pairs (w[k], xh[k])."""
    n, r = len(pi), len(w)
    coef = -(pi[:, None] * d[:, xh]).T  # (r, n): the entry of K[x, w[k]]
    rows = np.repeat(np.arange(r), n + 1)
    cols = np.concatenate([np.arange(n)[None, :] * n + w[:, None], n * n + w[:, None]], axis=1).ravel()
    vals = np.concatenate([coef, np.ones((r, 1))], axis=1).ravel()
    a = sp.csr_matrix((vals, (rows, cols)), shape=(r, n * n + n))
    a.eliminate_zeros()
    return a


def _privacy_block(n: int, x: NDArray[np.intp], xp: NDArray[np.intp], w: NDArray[np.intp],
                   factor: NDArray[np.float64]) -> sp.csr_matrix:
    """Rows ``K[x,w] - factor[x,x'] K[x',w] <= 0`` for the triples (x[k], xp[k], w[k])."""
    r = len(w)
    rows = np.repeat(np.arange(r), 2)
    cols = np.stack([x * n + w, xp * n + w], axis=1).ravel()
    vals = np.stack([np.ones(r), -factor[x, xp]], axis=1).ravel()
    return sp.csr_matrix((vals, (rows, cols)), shape=(r, n * n + n))


def _nearest_pairs(d: NDArray[np.float64]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Ordered pairs (x, x') with x' a nearest neighbour of x or x one of x' (ties within
    :data:`NEAREST_RTOL`): the four neighbours of a grid cell."""
    off = np.where(np.eye(len(d), dtype=bool), np.inf, d)
    near = off <= off.min(axis=1, keepdims=True) * (1.0 + NEAREST_RTOL)
    u, v = np.nonzero(near | near.T)
    return u, v


def _fixed_rows(pi: NDArray, d: NDArray) -> sp.csr_matrix:
    """The n row sums and the quality row :math:`\\sum_{x,w} \\pi(x) d(x,w) K[x,w]`."""
    n = len(pi)
    nk = n * n
    sums = sp.csr_matrix((np.ones(nk), (np.repeat(np.arange(n), n), np.arange(nk))), shape=(n, nk + n))
    qual = sp.csr_matrix(np.r_[(pi[:, None] * d).ravel(), np.zeros(n)][None, :])
    return sp.vstack([sums, qual], format="csr")


def _violated_adversary(k: NDArray, z: NDArray, pi: NDArray, d: NDArray, in_model: NDArray[np.bool_],
                        tol: float, per_output: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(w, x̂) of the most violated adversary rows not in the model, at most ``per_output`` per w."""
    g = (pi[:, None] * k).T @ d  # g[w, xh]
    viol = np.where(in_model, -np.inf, z[:, None] - g)
    top = min(per_output, viol.shape[1])
    idx = np.argpartition(-viol, top - 1, axis=1)[:, :top]
    w = np.repeat(np.arange(len(z)), top)
    xh = idx.ravel()
    keep = viol[w, xh] > tol
    return w[keep], xh[keep]


def _violated_privacy(k: NDArray, factor: NDArray, active: set[int], per_output: int
                      ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """(x, x', w) of the most violated privacy rows not in the model, at most ``per_output`` per w
    (a blocked scan of every triple: one (n, n, block) temporary at a time)."""
    n = k.shape[0]
    found: list[NDArray[np.intp]] = []
    for start, stop in pair_blocks(n, n * n):  # blocks of outputs w
        kb = k[:, start:stop]
        viol = kb[:, None, :] - factor[:, :, None] * kb[None, :, :]  # viol[x, x', j]
        x, xp, j = np.nonzero(viol > VIOLATION_TOL)
        found.append(np.stack([x, xp, j + start], axis=1))
    hits = np.concatenate(found) if found else np.zeros((0, 3), np.intp)
    if active and len(hits):
        code = (hits[:, 0] * n + hits[:, 1]) * n + hits[:, 2]
        hits = hits[~np.isin(code, np.fromiter(active, dtype=np.int64, count=len(active)))]
    if len(hits) == 0:
        return hits[:, 0], hits[:, 1], hits[:, 2]
    pu, pv = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    pair, w = most_violated(k, factor, pu, pv, hits[:, 0] * n + hits[:, 1], hits[:, 2], per_output)
    return pu[pair], pv[pair], w


def solve_rows(
    d: NDArray[np.float64], pi: NDArray[np.float64], quality: float, level: float | None, *,
    deadline: Deadline, what: str = "user-centric", progress: Progress | None = None, substitute: bool = False,
) -> RowSolution:
    """The user-centric LP at ``level`` (None: no privacy rows; factors capped at
    :data:`~metricdp.lp._solve.LOG_CAP`) by row generation (module docstring).

    Raises the typed error of a failed solve (:func:`~metricdp.lp._solve.require_optimal`;
    infeasible: :class:`~metricdp.errors.InfeasibleError`), :class:`ResourceLimitError` when
    the active rows would exceed the memory limit, :class:`SolverTimeLimitError` past the
    deadline. ``progress`` is told each round: rows held, rows added, the objective.
    ``substitute``: solve in the substituted variables (module docstring); ignored without ``level``.
    """
    n = len(pi)
    nk = n * n
    dmax = float(d.max())
    factor = np.exp(np.minimum(level * d, LOG_CAP)) if level is not None else None
    near = np.argsort(d, axis=1, kind="stable")[:, :min(START_GUESSES, n)]  # w itself first (d = 0)
    w0 = np.repeat(np.arange(n), near.shape[1])
    xh0 = near.ravel()
    blind = _blind_guess(d, pi, quality)
    if blind is not None:  # the rows (w, blind) of every output: the model's optimum is then the blind bound
        fresh = ~np.any(near == blind, axis=1)
        w0, xh0 = np.r_[w0, np.flatnonzero(fresh)], np.r_[xh0, np.full(int(fresh.sum()), blind)]
    adv_in = np.zeros((n, n), dtype=bool)
    adv_in[w0, xh0] = True
    priv_active: set[int] = set()
    adv_rows = [np.stack([w0, xh0], axis=1)]
    priv_rows: list[NDArray[np.intp]] = []
    order = [np.zeros(len(w0), np.int8)]
    blocks0 = [_fixed_rows(pi, d), _adversary_block(pi, d, w0, xh0)]
    if factor is not None and blind is None:  # the blind case needs no privacy row (its optimum is 0-mDP)
        u, v = _nearest_pairs(d)
        px, pxp, pw = np.repeat(u, n), np.repeat(v, n), np.tile(np.arange(n), len(u))
        priv_active.update(((px * n + pxp) * n + pw).tolist())
        priv_rows.append(np.stack([px, pxp, pw], axis=1))
        order.append(np.ones(len(pw), np.int8))
        blocks0.append(_privacy_block(n, px, pxp, pw, factor))
    a = sp.vstack(blocks0, format="csr")
    nonzeros = a.nnz
    check_allocation(BYTES_PER_NONZERO * nonzeros + 8.0 * 8 * nk, f"{what} LP's first {a.shape[0]:,} rows")
    lo = np.r_[np.ones(n), np.full(a.shape[0] - n, -np.inf)]
    hi = np.r_[np.ones(n), [quality], np.zeros(a.shape[0] - n - 1)]
    c = np.r_[np.zeros(nk), -np.ones(n)]
    col_hi = np.r_[np.ones(nk), np.full(n, dmax)]
    kernel = None if factor is None or blind is not None or not substitute else 1.0 / factor
    sub = _substitution(kernel, n)
    lp = LPModel(options=OPTIONS)
    result = lp.load(c, a @ sub, lo, hi, 0.0, col_hi, time_limit=deadline.require(what))
    rounds = 1
    if blind is not None:
        _optimal(result, what, quality, level)
        rows = ActiveRows(np.concatenate(adv_rows), np.concatenate(priv_rows) if priv_rows else
                          np.zeros((0, 3), np.intp), np.concatenate(order))
        k, z = np.zeros((n, n)), np.zeros(n)
        k[:, blind], z[blind] = 1.0, float(pi @ d[:, blind])
        report(progress, rounds, None, f"{what}: round {rounds}: {lp.num_rows:,} rows held, objective "
               f"{z[blind]:.10g}: the blind guess meets the quality bound, its constant mechanism is optimal")
        return RowSolution(k, z, result, rows, rounds, kernel)
    while True:
        x = _optimal(result, what, quality, level)
        report(progress, rounds, None, f"{what}: round {rounds}: {lp.num_rows:,} rows held, objective "
               f"{-float(result.objective or 0.0):.10g}, {deadline.describe()}")
        x = sub @ x
        k, z = x[:nk].reshape(n, n), x[nk:]
        w, xh = _violated_adversary(k, z, pi, d, adv_in, adversary_tolerance(z, dmax), ADVERSARY_PER_OUTPUT)
        if factor is not None:
            px, pxp, pw = _violated_privacy(k, factor, priv_active, ROWS_PER_OUTPUT)
        else:
            px = pxp = pw = np.zeros(0, np.intp)
        if len(w) == 0 and len(pw) == 0:
            rows = ActiveRows(np.concatenate(adv_rows), np.concatenate(priv_rows) if priv_rows else
                              np.zeros((0, 3), np.intp), np.concatenate(order))
            return RowSolution(k.copy(), z.copy(), result, rows, rounds, kernel)
        blocks = []
        if len(w):
            adv_in[w, xh] = True
            adv_rows.append(np.stack([w, xh], axis=1))
            order.append(np.zeros(len(w), np.int8))
            blocks.append(_adversary_block(pi, d, w, xh))
        if len(pw):
            assert factor is not None
            priv_active.update(((px * n + pxp) * n + pw).tolist())
            priv_rows.append(np.stack([px, pxp, pw], axis=1))
            order.append(np.ones(len(pw), np.int8))
            blocks.append(_privacy_block(n, px, pxp, pw, factor))
        new = sp.vstack(blocks, format="csr")
        nonzeros += new.nnz
        check_allocation(BYTES_PER_NONZERO * nonzeros + 8.0 * 8 * nk,
                         f"{what} LP's {lp.num_rows + new.shape[0]:,} active rows ({nonzeros:,} non-zeros)")
        if rounds == 1:  # the re-solves: dual simplex with Devex pricing (lp.core.WARM_OPTIONS)
            lp.set_options(WARM_OPTIONS)
        lp.add_rows(new @ sub, -np.inf, 0.0)
        try:
            result = lp.resolve(time_limit=deadline.require(what))
        except SolverTimeLimitError as exc:
            exc.result = result
            raise
        rounds += 1


def _substitution(kernel: NDArray[np.float64] | None, n: int) -> sp.csr_matrix:
    r"""T with (K, z) = T (X, z): :math:`K[x,w] = X[x,w] + \kappa[x,w] X[w,w]` (x != w),
    :math:`K[w,w] = X[w,w]`; the identity without ``kernel`` :math:`\kappa`."""
    nk = n * n
    if kernel is None:
        return sp.identity(nk + n, format="csr")
    x, w = np.nonzero(~np.eye(n, dtype=bool))
    rows = np.r_[np.arange(nk + n), x * n + w]
    cols = np.r_[np.arange(nk + n), w * n + w]
    return sp.csr_matrix((np.r_[np.ones(nk + n), kernel[x, w]], (rows, cols)), shape=(nk + n, nk + n))


def _blind_guess(d: NDArray[np.float64], pi: NDArray[np.float64], quality: float) -> int | None:
    r"""The blind guess :math:`x^* = \arg\min_{\hat x} \sum_x \pi(x) d(x, \hat x)` when its error
    :math:`E_0` is at most ``quality``, else None.

    Why: every matrix has :math:`AE \le E_0` (``docs/proofs/user_centric.md`` §2, fact (b)), and
    the constant mechanism :math:`K[x, x^*] = 1` attains it with quality loss exactly :math:`E_0`;
    it is 0-mDP, so it meets every privacy row. When :math:`E_0 \le Q` it is therefore optimal
    (§7), and one solve of the model holding the rows :math:`(w, x^*)` certifies it.
    """
    loss = pi @ d  # loss[xh]: the blind guess xh's error, = the constant mechanism's quality loss
    best = int(np.argmin(loss))
    return best if loss[best] <= quality else None


def _optimal(result: SolveResult, what: str, quality: float, level: float | None) -> NDArray[np.float64]:
    """The solution of an optimal solve; infeasibility said in the user's terms."""
    if result.status == 2:
        raise InfeasibleError(
            f"{what}: no {level!r}-mDP mechanism has expected quality loss <= {quality!r}; raise the "
            "quality bound or epsilon (optimal with objective='expected' gives the smallest bound at an epsilon)",
            status="infeasible", result=result,
        )
    return require_optimal(result, what)


def certificate(
    d: NDArray[np.float64], pi: NDArray[np.float64], quality: float, epsilon: float | None,
    solved: RowSolution,
) -> float:
    """Upper bound on the AE of every matrix meeting Q (and eps-mDP at exactly eps): the full
    LP's weak-duality bound from the solve's duals, every row outside the model at dual zero
    (module docstring; proof: ``docs/proofs/user_centric.md`` §6)."""
    n = len(pi)
    nk = n * n
    y = np.asarray(solved.result.row_dual, dtype=np.float64)
    rows = solved.rows
    adv, priv = rows.adversary, rows.privacy
    blocks = [_fixed_rows(pi, d), _adversary_block(pi, d, adv[:, 0], adv[:, 1])]
    y_fixed, y_rest = y[: n + 1], y[n + 1:]
    y_adv, y_priv = y_rest[rows.order == 0], y_rest[rows.order == 1]
    if len(priv):
        assert epsilon is not None
        expo = epsilon * d[priv[:, 0], priv[:, 1]]
        exact = np.exp(np.minimum(expo, EXP_CAP))
        y_priv = np.where(expo > EXP_CAP, 0.0, y_priv)  # such a row is left out of the bound: dual 0
        r = len(priv)
        blocks.append(sp.csr_matrix(
            (np.stack([np.ones(r), -exact], axis=1).ravel(),
             (np.repeat(np.arange(r), 2),
              np.stack([priv[:, 0] * n + priv[:, 2], priv[:, 1] * n + priv[:, 2]], axis=1).ravel())),
            shape=(r, nk + n)))
    c = np.r_[np.zeros(nk), -np.ones(n)]
    y = np.r_[y_fixed, y_adv, y_priv]
    if solved.kernel is not None:  # the rows the substitution made bounds, their multipliers from the reduced costs
        assert epsilon is not None
        a = sp.vstack(blocks, format="csr")
        peak, y_peak = _peak_rows(d, epsilon, c - a.T @ y)
        blocks.append(peak)
        y = np.r_[y, y_peak]
    a = sp.vstack(blocks, format="csr")
    k = a.shape[0]
    lo = np.r_[np.ones(n), np.full(k - n, -np.inf)]
    hi = np.r_[np.ones(n), [quality], np.zeros(k - n - 1)]
    col_hi = np.r_[np.ones(nk), np.full(n, float(d.max()))]
    bound = ranged_bound(c, a, lo, hi, np.zeros(nk + n), col_hi, y)
    return -bound


def _peak_rows(d: NDArray[np.float64], epsilon: float, reduced: NDArray[np.float64]
               ) -> tuple[sp.csr_matrix, NDArray[np.float64]]:
    r"""The privacy rows :math:`K[w,w] - e^{\varepsilon d(w,x)} K[x,w] \le 0` (x != w) at exactly eps, and
    their multipliers :math:`\nu[x,w] = -\max(r[x,w], 0)\, e^{-\varepsilon d(x,w)}`, r the reduced costs of
    K from the other rows: they cancel r on K[x,w] (``docs/proofs/user_centric.md`` §8). A row whose exponent
    exceeds :data:`EXP_CAP` gets a zero multiplier (left out of the bound)."""
    n = len(d)
    x, w = np.nonzero(~np.eye(n, dtype=bool))
    expo = epsilon * d[x, w]
    exact = np.exp(np.minimum(expo, EXP_CAP))
    r = len(x)
    a = sp.csr_matrix(
        (np.stack([np.ones(r), -exact], axis=1).ravel(),
         (np.repeat(np.arange(r), 2), np.stack([w * n + w, x * n + w], axis=1).ravel())),
        shape=(r, n * n + n))
    y = np.where(expo > EXP_CAP, 0.0, -np.maximum(reduced[x * n + w], 0.0) / exact)
    return a, y
