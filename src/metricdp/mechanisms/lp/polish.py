r"""The scaled finish of the mechanism LP beyond the exponent cap (issue 37: exact where eps * d > 20).

One concept: re-solve the mechanism LP (Bordenabe et al., CCS 2014, Sec. 4; Imola et al.,
UAI 2022, LP (1)) *uncapped* and *in relative precision*, starting from a solution of the
capped LP (``core.solve_raw``), so that an optimum whose entries span
:math:`1 \ldots e^{-60}` (and whose loss may be :math:`10^{-10}`) comes out to 1e-9
relative instead of HiGHS's absolute tolerances.

**Why the capped LP is not enough.** Every factor of the constraint-generation LP is capped
at :data:`~._solve.LOG_CAP` (:math:`e^{20}`), which makes rows stricter and moves the
optimum by up to :math:`n e^{-20} d_{\max}` absolute; and HiGHS's tolerances are absolute
(1e-9 on rows and reduced costs), so entries below 1e-9 are not resolved at all. Where
:math:`\lambda d_{\max} > 20` the optimum itself may be that small (the mechanism is nearly
the identity): measured against the exact rational optimum, 8e-6 to 127 relative.

**The scaled LP.** The plain variables :math:`M` (and k for the worst case) are scaled by a
reference point :math:`R > 0` (each column by its entry: :math:`M[u,w] = R[u,w] Z[u,w]`),
so every variable of the optimum near R is O(1); k by the reference's worst loss and the
objective to a largest cost of 1. Each privacy row :math:`M[u,w] - e^{\lambda d(u,v)}
M[v,w] \le 0`, uncapped, then reads :math:`R[u,w] Z[u,w] - e^{\lambda d} R[v,w] Z[v,w] \le
0` and is divided by its largest coefficient (so coefficients lie in (0, 1]: rows in
*scaled form*, no :math:`e^{\lambda d}` reaches HiGHS); row sums and loss rows likewise.
HiGHS's absolute tolerances on Z are then relative tolerances on M. Rows with
:math:`\lambda d > 700` (``exp`` near overflow) are left out: a relaxation, which the
repair and the audit check.

R is the column envelope (:func:`~.repair.envelope`) of the starting solution at
:math:`\lambda`: positive wherever a column is used (the entries that the capped LP left at
0 beside positive ones get the scale that privacy forces on them) and 1 in unused columns,
floored at :data:`MIN_COEF` of its row's largest (HiGHS drops matrix entries below 1e-12:
a dropped row-sum coefficient let it move mass there unseen, "unbounded" passes). Each pass
re-solves with R := the last solution's envelope, as iterative refinement does, until the
objective settles (:data:`SETTLE`) or :data:`PASSES` passes.

**Rows.** A pass starts from the rows that R nearly meets with equality and the kernel rows
(w, v, w) of every allowed pair (the bounds of ``core._solve_fast``'s substitution, most of
the binding rows: at GloVe n = 100, eps 4 they left no violated row, where the near-binding
rows alone led to 113k generated rows), and adds, round by round, every row the pass's
solution violates by more than :data:`VIOLATION_TOL` in scaled form (warm dual simplex),
until none is: the same constraint-generation argument as ``core._solve_fast``, so the
pass's optimum is the full (uncapped) LP's to the scaled tolerance. A violated row whose
two scaled coefficients differ by more than 1/:data:`MIN_COEF` would be voided by HiGHS;
it is left to the next pass (rescaled), and the pass counts as unsettled.

**Certificate.** The last pass's duals, unscaled, are multipliers of OPTMech's LP at eps
(:func:`dual_bound`, weak duality: valid whatever their accuracy), so the build carries a
certified lower bound. It is tight where the optimum's entries stay above the scale floor
(two points at eps 25: 1e-9), loose beyond (GloVe n = 100 at eps 4: 8.6e-8 with the
capped solve's duals).

**Safety.** Nothing here is trusted for privacy: the caller repairs the result at eps and
audits it, exactly as the capped solution. The caller keeps the capped solution when a pass
fails (numerical trouble, a time limit) and compares the two repaired losses.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from ...errors import RepairError, SolverError
from ._solve import LOG_CAP, LPModel, SolveResult
from .certificate import bound_from_multipliers, optmech_lp
from .deadline import Deadline
from .pairs import pair_blocks
from .repair import envelope, repair

__all__ = ["PASSES", "SETTLE", "VIOLATION_TOL", "Polished", "beyond_cap", "dual_bound", "finish", "polish"]

#: Largest number of rescaled passes (iterative refinement rounds).
PASSES = 4
#: A pass whose objective moved by at most this (relative) from the previous one ends the finish.
SETTLE = 1e-12
#: A privacy row is added when violated by more than this in its scaled form (largest
#: coefficient 1 at the pass's reference point): the accuracy HiGHS meets rows to (``_OPTIONS``).
VIOLATION_TOL = 1e-10
#: Rows nearly met with equality at the reference point seed a pass.
SEED_RTOL = 1e-6
#: Smallest ratio of the two coefficients of a scaled privacy row handed to HiGHS (its
#: ``small_matrix_value`` is set to 1e-12 and it drops smaller entries, which would leave the
#: row void and the generation adding it forever).
MIN_COEF = 1e-11
#: Rounds of row generation within one pass.
MAX_ROUNDS = 50
_EXP_MAX = 700.0
_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10, "small_matrix_value": 1e-12}


class Polished(NamedTuple):
    """The finish's last solution: the matrix M, its LP objective, the last solve and passes run."""

    matrix: NDArray[np.float64]
    objective: float
    result: SolveResult
    passes: int
    privacy_rows: int
    #: (u, v, w) of the last solve's privacy rows and the multipliers of its inequality rows
    #: (worst case: the n loss rows first) in the units of ``certificate.optmech_lp``.
    rows: tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]] | None = None
    y_ub: NDArray[np.float64] | None = None


def _scan(m: NDArray[np.float64], scale: NDArray[np.float64], logf: NDArray[np.float64], pu: NDArray[np.intp],
          pv: NDArray[np.intp], tol: float, near: bool) -> tuple[NDArray[np.intp], NDArray[np.intp], int]:
    """(pair index, w) of the rows violated by more than ``tol`` in the scaled row (its largest
    coefficient 1 at the reference ``scale``), and how many more are violated whose smaller
    scaled coefficient is below :data:`MIN_COEF` (HiGHS would drop it: left to the next
    pass, rescaled); ``near``: rows of ``m`` met within ``tol`` of equality relative to their
    right-hand side. In blocks of pairs."""
    ks, ws = [], []
    skipped = 0
    for start, stop in pair_blocks(len(pu), m.shape[1]):
        u, v = pu[start:stop], pv[start:stop]
        f = np.exp(logf[start:stop])[:, None]
        lhs, rhs = m[u], f * m[v]
        if near:
            hit = (lhs >= (1.0 - tol) * rhs) & (rhs > 0)
        else:
            a, b = scale[u], f * scale[v]
            hit = lhs - rhs > tol * np.maximum(a, b)
            small = np.minimum(a, b) < MIN_COEF * np.maximum(a, b)
            skipped += int((hit & small).sum())
            hit &= ~small
        k, w = np.nonzero(hit)
        ks.append(k + start)
        ws.append(w)
    return np.concatenate(ks), np.concatenate(ws), skipped


def polish(
    matrix: NDArray[np.float64],
    distances: NDArray[np.float64],
    level: float,
    allowed: NDArray[np.bool_],
    loss: NDArray[np.float64],
    prior: NDArray[np.float64] | None,
    deadline: Deadline,
    what: str,
) -> Polished | None:
    r"""The uncapped mechanism LP at ``level`` solved in relative precision from ``matrix``.

    Square only (``matrix`` n x n, ``loss`` n x n); privacy rows of the ``allowed`` ordered
    pairs for every output. Returns ``None`` when no pass reached an optimum (the caller then
    keeps its own solution); raises only the deadline's time-out.
    """
    d = np.asarray(distances, dtype=np.float64)
    pu, pv = np.nonzero(allowed & (level * d < _EXP_MAX))
    logf = level * d[pu, pv]
    worst = prior is None
    ref = np.maximum(np.asarray(matrix, dtype=np.float64), 0.0)
    best: Polished | None = None
    last = math.inf
    for passes in range(1, PASSES + 1):
        out = _pass(ref, d, level, pu, pv, logf, loss, prior, worst, deadline, what)
        if out is None:
            break
        m, obj, result, rows, clean, triples, y_ub = out
        best = Polished(m, obj, result, passes, rows, triples, y_ub)
        if clean and abs(obj - last) <= SETTLE * abs(obj):
            break
        last, ref = obj, np.maximum(m, 0.0)
    return best


def _pass(
    ref: NDArray[np.float64], d: NDArray[np.float64], level: float, pu: NDArray[np.intp], pv: NDArray[np.intp],
    logf: NDArray[np.float64], loss: NDArray[np.float64], prior: NDArray[np.float64] | None, worst: bool,
    deadline: Deadline, what: str,
) -> tuple[NDArray[np.float64], float, SolveResult, int, bool, Any, NDArray[np.float64] | None] | None:
    """One rescaled pass: scale by the envelope of ``ref``, generate rows until none is violated."""
    n = d.shape[0]
    scale = envelope(ref, d, level)
    scale[:, scale.max(axis=0) <= 0] = 1.0  # unused outputs
    # no scale below MIN_COEF of its row's largest: HiGHS would drop that row-sum coefficient
    # and move mass there unseen (an entry so small contributes < 1e-11 of the row anyway)
    scale = np.maximum(scale, MIN_COEF * scale.max(axis=1, keepdims=True))
    col = scale.ravel()
    nvar = n * n + (1 if worst else 0)
    cells = np.arange(n * n)
    if worst:
        kref = max(float(np.einsum("uw,uw->u", ref, loss).max()), 1e-300)
        col = np.r_[col, kref]
        c = np.zeros(nvar)
        c[-1] = 1.0
        sigma = kref  # true objective = sigma * HiGHS's
    else:
        assert prior is not None
        c = (prior[:, None] * loss).ravel() * col
        sigma = max(float(np.abs(c).max()), 1e-300)
        c /= sigma
    # row sums (divided by their largest coefficient), then the loss rows
    rmax = scale.max(axis=1)
    base = [sp.csr_matrix(((scale / rmax[:, None]).ravel(), (cells // n, cells)), shape=(n, nvar))]
    lo, hi = [1.0 / rmax], [1.0 / rmax]
    lmax = np.ones(n)
    if worst:
        lcoef = (loss * scale).ravel()
        lr = sp.csr_matrix((np.r_[lcoef, np.full(n, -kref)], (np.r_[cells // n, np.arange(n)],
                                                               np.r_[cells, np.full(n, n * n)])), shape=(n, nvar))
        lmax = np.maximum(np.r_[np.abs(lcoef).reshape(n, n).max(axis=1)], kref)
        base.append(sp.csr_matrix(sp.diags(1.0 / lmax) @ lr))
        lo.append(np.full(n, -np.inf))
        hi.append(np.zeros(n))

    def rows(k: NDArray[np.intp], w: NDArray[np.intp]) -> sp.csr_matrix:
        u, v = pu[k], pv[k]
        a, b = scale[u, w], np.exp(logf[k]) * scale[v, w]
        top = np.maximum(a, b)
        idx = np.arange(len(k))
        return sp.csr_matrix((np.r_[a / top, -b / top], (np.r_[idx, idx], np.r_[u * n + w, v * n + w])),
                             shape=(len(k), nvar))

    with np.errstate(over="ignore"):
        upper_m = 1.0 / col[: n * n]  # M <= 1
    upper = np.r_[upper_m, np.inf] if worst else upper_m
    lo_base, hi_base = np.concatenate(lo), np.concatenate(hi)

    def cold(k: NDArray[np.intp], w: NDArray[np.intp]) -> tuple[LPModel, SolveResult]:
        model = LPModel(method="simplex", options=_OPTIONS)
        a = sp.vstack([*base, rows(k, w)], format="csr")
        result = model.load(c, a, np.r_[lo_base, np.full(len(k), -np.inf)], np.r_[hi_base, np.zeros(len(k))],
                            0.0, upper, time_limit=deadline.require(what))
        return model, result

    k_near, w_near, _ = _scan(scale, scale, logf, pu, pv, SEED_RTOL, near=True)
    # seeds: the rows nearly met at the reference, and the kernel rows (w, v, w) of every
    # allowed pair (the bounds of the substituted LP: most binding rows, core._solve_fast)
    key = np.unique(np.r_[k_near * n + w_near, np.arange(len(pu)) * n + pu])
    k_all, w_all = np.divmod(key, n)
    model, result = cold(k_all, w_all)
    for _ in range(MAX_ROUNDS):
        if (result.x is None or not result.success) and result.status != 1:
            model, result = cold(k_all, w_all)  # warm re-solve in trouble: once more from scratch
        if result.x is None or not result.success:
            return None
        m = col[: n * n].reshape(n, n) * result.x[: n * n].reshape(n, n)
        k, w, skipped = _scan(np.maximum(m, 0.0), scale, logf, pu, pv, VIOLATION_TOL, near=False)
        if len(k) == 0:
            row_loss = (loss * m).sum(axis=1)
            obj = float(prior @ row_loss) if prior is not None else float(row_loss.max())
            u, v = pu[k_all], pv[k_all]
            y_ub = None
            if result.row_dual is not None:  # multipliers of the unscaled rows (certificate units)
                top = np.maximum(scale[u, w_all], np.exp(logf[k_all]) * scale[v, w_all])
                y = sigma * np.asarray(result.row_dual)[n:]
                y_priv = y[n if worst else 0:] / top * np.exp(logf[k_all])
                y_ub = np.r_[y[:n] / lmax, y_priv] if worst else y_priv
            return m, obj, result, len(k_all), skipped == 0, (u, v, w_all), y_ub
        k_all, w_all = np.r_[k_all, k], np.r_[w_all, w]
        model.add_rows(rows(k, w), -np.inf, 0.0)
        result = model.resolve(time_limit=deadline.require(what))
    return None


def beyond_cap(level: float, distances: NDArray[np.float64], allowed: NDArray[np.bool_],
               graph_distances: NDArray[np.float64] | None = None) -> bool:
    """Whether the capped LP at ``level`` capped a factor or a kernel entry (``core.solve_raw``)."""
    top = float(np.max(distances, where=allowed, initial=0.0))
    if graph_distances is not None:
        top = max(top, float(np.max(graph_distances)))
    return level * top > LOG_CAP or level * float(np.max(distances)) > LOG_CAP


def _loss(matrix: NDArray[np.float64], loss: NDArray[np.float64], prior: NDArray[np.float64] | None) -> float:
    row = (loss * matrix).sum(axis=1)
    return float(prior @ row) if prior is not None else float(row.max())


def finish(
    raw_matrix: NDArray[np.float64],
    distances: NDArray[np.float64],
    epsilon: float,
    eta: float,
    lam: float,
    allowed: NDArray[np.bool_],
    loss: NDArray[np.float64],
    prior: NDArray[np.float64] | None,
    deadline: Deadline,
    what: str,
    certify: bool = False,
    retry: bool = False,
) -> tuple[NDArray[np.float64], float | None, dict[str, object]]:
    r"""The repaired capped solution ``raw_matrix`` or the repaired polished one, whichever
    has the smaller loss.

    :func:`polish` from ``raw_matrix`` at ``lam`` (the LP's level), then both candidates
    through :func:`~.repair.repair` at ``epsilon`` with the same ``eta``: each returned
    candidate is proven eps-mDP by the repair, so returning either is safe. Returns the
    matrix, the polished LP objective when that one was kept (else ``None``) and a record
    for ``info["lp"]["polish"]`` (with ``certify``, OPTMech's LP, its ``dual_bound``:
    :func:`dual_bound` at ``epsilon``). A pass in numerical trouble, a polished repair that needs
    more room (unless ``retry``: then its retryable error is raised, for the retry policy to
    solve again with a larger eta) or the deadline keep the capped solution (recorded); when the capped
    solution's repair fails too, its :class:`~metricdp.errors.RepairError` is raised (the
    retry policy's to handle), so the finish never fails a build that would have passed.
    """
    record: dict[str, object] = {"kept": "capped"}
    capped: NDArray[np.float64] | None = None
    error: RepairError | None = None
    try:
        capped = repair(raw_matrix, distances, epsilon, eta=eta)
    except RepairError as exc:
        error = exc
    candidate: NDArray[np.float64] | None = None
    pol: Polished | None = None
    try:
        pol = polish(raw_matrix, distances, lam, allowed, loss, prior, deadline, what)
        if pol is None:
            record["failed"] = "no optimum"
        else:
            record.update(passes=pol.passes, privacy_rows=pol.privacy_rows)
            candidate = repair(pol.matrix, distances, epsilon, eta=eta)
    except RepairError as exc:  # the polished repair needs more room: a retry gives it, if one is left
        if retry and exc.retryable:
            raise
        record["failed"] = f"{type(exc).__name__}: {exc}"
    except SolverError as exc:  # the deadline
        record["failed"] = f"{type(exc).__name__}: {exc}"
    if candidate is None or pol is None:
        if capped is None:
            assert error is not None
            raise error
        return capped, None, record
    ours = _loss(candidate, loss, prior)
    record["loss_polished"] = ours
    if capped is not None:
        record["loss_capped"] = _loss(capped, loss, prior)
        if ours > record["loss_capped"]:  # type: ignore[operator]
            return capped, None, record
    record["kept"] = "polished"
    if certify:  # OPTMech (the LP's level is epsilon(1 - eta)): the pass's duals bound the optimum at eps
        record["dual_bound"] = dual_bound(pol, distances, epsilon, loss, prior)
    return candidate, pol.objective, record


def dual_bound(pol: Polished, distances: NDArray[np.float64], epsilon: float, loss: NDArray[np.float64],
               prior: NDArray[np.float64] | None) -> float | None:
    """A certified lower bound on OPTMech's LP optimum at ``epsilon`` from the last pass's duals.

    The pass's rows, unscaled, are rows of :func:`~.certificate.optmech_lp` (privacy rows at
    the LP's level, mapped to ``epsilon`` as :func:`~.certificate.bound_from_duals` does), so
    its multipliers go to :func:`~.certificate.bound_from_multipliers`: valid whatever their
    accuracy (weak duality), tight when the pass is.
    """
    if pol.rows is None or pol.y_ub is None:
        return None
    problem = optmech_lp(distances, epsilon, pol.rows, loss=loss, prior=prior)
    return bound_from_multipliers(problem, np.zeros(problem.a_eq.shape[0]), pol.y_ub)
