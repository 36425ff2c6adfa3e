r"""The scaled finish of the mechanism LP beyond the exponent cap: exact where eps * d > 20.

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
the identity), and the capped solve can be off by orders of magnitude relative to the
exact rational optimum.

**The scaled, substituted LP.** The variables are ``core._solve_fast``'s substitution,
uncapped: :math:`M[u,w] = K[u,w] M[w,w] + X[u,w]` (u != w), :math:`X \ge 0`, with the
kernel :math:`K[u,w] = e^{-\lambda \delta[w,u]}` (:func:`kernel_distances`: the metric
when every pair is allowed, the shortest chain of allowed rows otherwise), so that the
kernel rows (w, u, w), most of the binding ones, are the bounds :math:`X \ge 0` and cost
the simplex nothing (the unsubstituted pass needed 10k dual simplex iterations at GloVe
n = 100, eps 4; this one a few hundred). Every variable is scaled by a reference point
:math:`R > 0`: :math:`X[u,w] = R[u,w] V[u,w]`, :math:`M[w,w] = R[w,w] V[w,w]`, so every
variable of the optimum near R is O(1); k by the reference's worst loss and the objective
to a largest cost of :data:`COST_SCALE`. Each privacy row :math:`M[u,w] - e^{\lambda
d(u,v)} M[v,w] \le 0` (u != w), uncapped, reads :math:`R[w,w](K[u,w] - e^{\lambda d}
K[v,w]) V[w,w] + R[u,w] V[u,w] - e^{\lambda d} R[v,w] V[v,w] \le 0` and is divided by its
largest coefficient (rows in *scaled form*: no :math:`e^{\lambda d}` reaches HiGHS); row
sums and loss rows likewise. HiGHS's absolute tolerances on V are then relative
tolerances on M. Rows with :math:`\lambda d > 700` (``exp`` near overflow) are left out:
a relaxation, which the repair and the audit check.

R is the column envelope (:func:`~.repair.envelope`) of the starting solution at
:math:`\lambda`: positive wherever a column is used (the entries that the capped LP left at
0 beside positive ones get the scale that privacy forces on them) and 1 in unused columns;
it is not floored (:data:`SCALE_FLOOR` only keeps it positive): a floor at 1e-11 of the
row gave entries of :math:`e^{-60}` a scale 1e15 times their size, and HiGHS, dropping
matrix entries below 1e-12, then lost the loss row's k (two points at eps 60: certified
only to :math:`1/(1+e^{20})`). Each pass re-solves with R := the last solution's envelope,
as iterative refinement does, until a pass is certified by its own duals
(:data:`CERTIFIED`), the objective settles (:data:`SETTLE`) or :data:`PASSES` passes; a
pass in numerical trouble is solved once more with HiGHS's own scaling off (``_RETRY``).

**Rows.** A pass starts from the rows that R nearly meets with equality, and adds, round
by round, every row the pass's solution violates by more than :data:`VIOLATION_TOL` in
scaled form (warm dual simplex), until none is: the same constraint-generation argument as
``core._solve_fast``, so the pass's optimum is the full (uncapped) LP's to the scaled
tolerance. A violated row whose two scaled coefficients differ by more than
1/:data:`MIN_COEF` would be voided by HiGHS; it is left to the next pass (rescaled), and
the pass counts as unsettled.

**The exact vertex.** HiGHS reports the optimal basis's point and duals to its tolerances
only; :func:`.basis.vertex` solves the basis's own square systems again (sparse LU,
refinement in extended precision), so the pass returns the basis's vertex and duals to
rounding (HiGHS's point and duals are kept where the two points differ by more than
:data:`VERTEX_RTOL`: an ill-conditioned basis).

**Certificate.** The last pass's duals, unscaled, are multipliers of OPTMech's LP at eps
(:func:`dual_bound` via :func:`~.certificate.bound_from_duals`, weak duality: valid
whatever their accuracy), with the entry bounds that a feasible loss gives
(``optmech_lp``'s ``cap``: the repaired candidate's loss, doubled). Tight where the basis
is optimal, to about 1e-11 relative where the capped solve's duals give bounds orders of
magnitude looser (HiGHS's dual tolerance, 1e-10 absolute in scaled units, is far above the
optimum's tiny entries in plain ones).

**Safety.** Nothing here is trusted for privacy: the caller repairs the result at eps and
audits it, exactly as the capped solution. The caller keeps the capped solution when a pass
fails (numerical trouble, a time limit) and compares the two repaired losses.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from ..errors import RepairError, SolverError
from ._solve import LOG_CAP, LPModel, SolveResult
from .basis import vertex
from .certificate import bound_from_duals
from .deadline import Deadline
from .pairs import pair_blocks
from .repair import envelope, repair

__all__ = ["CERTIFIED", "PASSES", "SETTLE", "VIOLATION_TOL", "Polished", "beyond_cap", "dual_bound", "finish", "polish"]

#: Largest number of rescaled passes (iterative refinement rounds).
PASSES = 4
#: A pass whose objective moved by at most this (relative) from the previous one ends the finish.
SETTLE = 1e-12
#: A pass whose own duals certify its objective to this (relative) ends the finish.
CERTIFIED = 1e-10
#: A privacy row is added when violated by more than this in its scaled form (largest
#: coefficient 1 at the pass's reference point): the accuracy HiGHS meets rows to (``_OPTIONS``).
VIOLATION_TOL = 1e-10
#: Rows nearly met with equality at the reference point seed a pass.
SEED_RTOL = 1e-6
#: Smallest ratio of the two coefficients of a scaled privacy row handed to HiGHS (its
#: ``small_matrix_value`` is set to 1e-12 and it drops smaller entries, which would leave the
#: row void and the generation adding it forever).
MIN_COEF = 1e-11
#: Smallest scale of an entry relative to its row's largest: only keeps scales positive
#: and their reciprocals (the bounds M <= 1) finite.
SCALE_FLOOR = 1e-280
#: Rounds of row generation within one pass.
MAX_ROUNDS = 50
#: The largest cost handed to HiGHS: its dual feasibility tolerance (1e-10 at least) is
#: absolute, so reduced costs 1e-10 below zero pass as optimal; with costs this large that
#: is 1e-10 / COST_SCALE relative to the objective, where the certificate needs it.
COST_SCALE = 1e4
_EXP_MAX = 700.0
#: HiGHS's smallest matrix entry (``small_matrix_value``: its least allowed value); smaller
#: ones are dropped here (:func:`_drop_small`), not silently by HiGHS.
SMALL = 1e-12
#: The basis's vertex (:func:`.basis.vertex`) replaces HiGHS's point only when every
#: variable agrees to this (relative, or absolute below 1): otherwise the basis is too
#: ill-conditioned for either and HiGHS's own point and duals are kept.
VERTEX_RTOL = 1e-6
_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10, "small_matrix_value": SMALL}
#: A pass that failed is solved once more with HiGHS's own scaling off (the rows and
#: columns are scaled here already): HiGHS's scaling on top of ours can stop in numerical
#: trouble at a large eps * d_max where the unscaled run certifies the optimum; off by
#: default it can stall (the city-and-towns space of test_optimal with LOG_CAP = 25),
#: hence a retry only, with an iteration limit.
_RETRY = {"simplex_scale_strategy": 0}
#: The retry's simplex iterations, per variable and row of the pass's first LP.
RETRY_ITERATIONS = 5


class Polished(NamedTuple):
    """The finish's last solution: the matrix M, its LP objective, the last solve and passes run."""

    matrix: NDArray[np.float64]
    objective: float
    result: SolveResult
    passes: int
    privacy_rows: int
    #: (u, v, w) of the last solve's privacy rows, and the duals of its rows and columns in
    #: the units of ``core._solve_fast``'s substituted LP (rows: the row sums, the loss rows
    #: in the worst case, then the privacy rows written M[u,w] - e^{level d(u,v)} M[v,w] <= 0;
    #: columns X[u,w] at u * n + w): what :func:`~.certificate.bound_from_duals` takes.
    rows: tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]] | None = None
    row_dual: NDArray[np.float64] | None = None
    col_dual: NDArray[np.float64] | None = None
    level: float = 0.0


class _Pass(NamedTuple):
    matrix: NDArray[np.float64]
    objective: float
    result: SolveResult
    clean: bool
    rows: tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]
    row_dual: NDArray[np.float64] | None
    col_dual: NDArray[np.float64] | None


def _scan(m: NDArray[np.float64], scale: NDArray[np.float64], logf: NDArray[np.float64], pu: NDArray[np.intp],
          pv: NDArray[np.intp], tol: float, near: bool) -> tuple[NDArray[np.intp], NDArray[np.intp], int]:
    """(pair index, w) of the rows violated by more than ``tol`` in the scaled row (its largest
    coefficient 1 at the reference ``scale``), and how many more are violated whose smaller
    scaled coefficient is below :data:`MIN_COEF` (HiGHS would drop it: left to the next
    pass, rescaled); ``near``: rows of ``m`` met within ``tol`` of equality relative to their
    right-hand side. Rows (w, v, w) are left out (bounds of the substituted LP). In blocks of pairs."""
    ks, ws = [np.zeros(0, np.intp)], [np.zeros(0, np.intp)]
    skipped = 0
    for start, stop in pair_blocks(len(pu), m.shape[1]):
        u, v = pu[start:stop], pv[start:stop]
        f = np.exp(logf[start:stop])[:, None]
        lhs, rhs = m[u], f * m[v]
        kernel = u[:, None] == np.arange(m.shape[1])[None, :]
        if near:
            hit = (lhs >= (1.0 - tol) * rhs) & (rhs > 0) & ~kernel
        else:
            a, b = scale[u], f * scale[v]
            hit = (lhs - rhs > tol * np.maximum(a, b)) & ~kernel
            small = np.minimum(a, b) < MIN_COEF * np.maximum(a, b)
            skipped += int((hit & small).sum())
            hit &= ~small
        k, w = np.nonzero(hit)
        ks.append(k + start)
        ws.append(w)
    return np.concatenate(ks), np.concatenate(ws), skipped


def kernel_distances(distances: NDArray[np.float64], allowed: NDArray[np.bool_]) -> NDArray[np.float64]:
    r""":math:`\delta[w,u]`: the shortest chain of ``allowed`` rows from w to u (the metric when all are).

    The rows (w, m_1), ..., (m_k, u) of an allowed chain give :math:`M[w,x] \le e^{\ell\,
    \delta[w,u]} M[u,x]`, so the kernel rows :math:`M[u,w] \ge e^{-\ell \delta[w,u]} M[w,w]`
    are implied by the LP's own rows (OPTMech with every pair: :math:`\delta = d`;
    SpannerMech: the graph distance); Floyd-Warshall (scipy), O(n^3).
    """
    n = distances.shape[0]
    off = ~np.eye(n, dtype=bool)
    if np.array_equal(allowed & off, off):
        return distances
    from scipy.sparse.csgraph import shortest_path

    graph = sp.csr_matrix(np.where(allowed & off, distances, 0.0))
    return np.asarray(shortest_path(graph, method="FW", directed=True), dtype=np.float64)


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
    pairs for every output. Passes until one is certified by its own duals (:data:`CERTIFIED`),
    settles (:data:`SETTLE`) or fails; returns the clean pass of least objective (a pass
    that left violated rows to the next only when none is clean), ``None`` when no pass
    reached an optimum (the caller then keeps its own solution); raises only the deadline's
    time-out.
    """
    d = np.asarray(distances, dtype=np.float64)
    pu, pv = np.nonzero(allowed & (level * d < _EXP_MAX))
    logf = level * d[pu, pv]
    with np.errstate(over="ignore"):
        kernel = np.exp(-level * kernel_distances(d, allowed).T)  # K[u, w] = e^{-level delta[w, u]}
    np.fill_diagonal(kernel, 1.0)
    worst = prior is None
    ref = np.maximum(np.asarray(matrix, dtype=np.float64), 0.0)
    best: Polished | None = None
    best_key = (True, math.inf)
    last = math.inf
    for passes in range(1, PASSES + 1):
        out = _pass(ref, d, kernel, level, pu, pv, logf, loss, prior, worst, deadline, what)
        if out is None:  # numerical trouble: once more without HiGHS's scaling
            out = _pass(ref, d, kernel, level, pu, pv, logf, loss, prior, worst, deadline, what, retry=True)
        if out is None:
            break
        pol = Polished(out.matrix, out.objective, out.result, passes, len(out.rows[0]), out.rows, out.row_dual,
                       out.col_dual, level)
        key = (not out.clean, pol.objective)  # the clean pass of least objective
        if key <= best_key:  # ties: the later pass (rescaled at a better point)
            best, best_key = pol, key
        if out.clean and (abs(out.objective - last) <= SETTLE * abs(out.objective) or _certified(pol, d, loss, prior)):
            break
        last, ref = out.objective, np.maximum(out.matrix, 0.0)
    return best


def _certified(pol: Polished, d: NDArray[np.float64], loss: NDArray[np.float64],
               prior: NDArray[np.float64] | None) -> bool:
    """Whether the pass's own duals bound the LP at its level within :data:`CERTIFIED` of its
    objective (then another pass cannot improve it by more): a stopping rule only."""
    bound = dual_bound(pol, d, pol.level, loss, prior, cap=2.0 * pol.objective)
    return bound is not None and pol.objective - bound <= CERTIFIED * pol.objective


def _pass(
    ref: NDArray[np.float64], d: NDArray[np.float64], kernel: NDArray[np.float64], level: float,
    pu: NDArray[np.intp], pv: NDArray[np.intp], logf: NDArray[np.float64], loss: NDArray[np.float64],
    prior: NDArray[np.float64] | None, worst: bool, deadline: Deadline, what: str, retry: bool = False,
) -> _Pass | None:
    """One rescaled pass: substitute, scale by the envelope of ``ref``, generate rows until none is violated."""
    n = d.shape[0]
    scale = envelope(ref, d, level)
    scale[:, scale.max(axis=0) <= 0] = 1.0  # unused outputs
    scale = np.maximum(scale, SCALE_FLOOR * scale.max(axis=1, keepdims=True))
    diag = np.diag(scale).copy()
    nvar = n * n + (1 if worst else 0)
    cells = np.arange(n * n)
    on_diag = (cells % n) * (n + 1)  # the column of V[w, w] for cell (u, w)

    def weighted(a: NDArray[np.float64]) -> sp.csr_matrix:
        """Rows sum_w a[u,w] M[u,w] in V: a S on V[u,w] (u != w), a K S_ww on V[w,w]."""
        off = a * scale
        np.fill_diagonal(off, 0.0)
        vals = np.r_[off.ravel(), (a * kernel * diag[None, :]).ravel()]
        out = sp.csr_matrix((vals, (np.r_[cells // n, cells // n], np.r_[cells, on_diag])), shape=(n, nvar))
        out.eliminate_zeros()
        return out

    col = np.r_[scale.ravel(), 1.0] if worst else scale.ravel()
    if worst:
        kref = max(float(np.einsum("uw,uw->u", ref, loss).max()), 1e-300)
        col[-1] = kref
        c = np.zeros(nvar)
        c[-1] = COST_SCALE
        sigma = kref / COST_SCALE  # true objective = sigma * HiGHS's
    else:
        assert prior is not None
        cm = prior[:, None] * loss
        c = (cm * scale).ravel()
        c[np.arange(n) * (n + 1)] = diag * np.einsum("uw,uw->w", cm, kernel)
        sigma = max(float(np.abs(c).max()), 1e-300) / COST_SCALE
        c /= sigma
    sums = weighted(np.ones((n, n)))
    rmax = abs(sums).max(axis=1).toarray().ravel()
    base = [_drop_small(sp.diags(1.0 / rmax) @ sums)]
    tops = [rmax]
    lo, hi = [1.0 / rmax], [1.0 / rmax]
    if worst:
        lr = sp.hstack([weighted(np.asarray(loss, dtype=np.float64))[:, : n * n],
                        sp.csr_matrix(np.full((n, 1), -kref))], format="csr")
        lmax = abs(lr).max(axis=1).toarray().ravel()
        base.append(_drop_small(sp.diags(1.0 / lmax) @ lr))
        tops.append(lmax)
        lo.append(np.full(n, -np.inf))
        hi.append(np.zeros(n))

    def rows(k: NDArray[np.intp], w: NDArray[np.intp]) -> tuple[sp.csr_matrix, NDArray[np.float64]]:
        """Privacy rows (pu[k], pv[k], w), u != w, in V, each divided by its largest coefficient."""
        u, v = pu[k], pv[k]
        f = np.exp(logf[k])
        a_ww = diag[w] * (kernel[u, w] - f * kernel[v, w])  # on V[w,w] (K[w,w] = 1 when v = w)
        a_u = scale[u, w]
        a_v = np.where(v != w, f * scale[v, w], 0.0)
        top = np.maximum(np.maximum(np.abs(a_ww), a_u), a_v)
        idx = np.arange(len(k))
        out = sp.csr_matrix((np.r_[a_ww, a_u, -a_v] / np.r_[top, top, top],
                             (np.r_[idx, idx, idx], np.r_[w * (n + 1), u * n + w, v * n + w])), shape=(len(k), nvar))
        return _drop_small(out), top

    with np.errstate(over="ignore", divide="ignore"):
        upper = 1.0 / col  # M <= 1, hence X <= 1
    if worst:
        upper[-1] = np.inf
    lo_base, hi_base = np.concatenate(lo), np.concatenate(hi)
    in_model = pu[:, None] == np.arange(n)[None, :]  # rows (w, v, w): bounds V >= 0
    k_near, w_near, _ = _scan(scale, scale, logf, pu, pv, SEED_RTOL, near=True)
    k_all, w_all = k_near, w_near
    in_model[k_all, w_all] = True
    first, top_all = rows(k_all, w_all)
    a_all = sp.vstack([*base, first], format="csr")
    options: dict[str, object] = dict(_OPTIONS)
    if retry:
        options.update(_RETRY, simplex_iteration_limit=RETRY_ITERATIONS * (nvar + n + len(k_all)))
    model = LPModel(method="simplex", options=options)
    result = model.load(c, a_all, np.r_[lo_base, np.full(len(k_all), -np.inf)],
                        np.r_[hi_base, np.zeros(len(k_all))], 0.0, upper, time_limit=deadline.require(what))
    for _ in range(MAX_ROUNDS):
        if result.x is None or not result.success:
            return None
        m = _matrix(result.x, scale, kernel, diag)
        k, w, skipped = _scan(m, scale, logf, pu, pv, VIOLATION_TOL, near=False)
        fresh = ~in_model[k, w]
        k, w = k[fresh], w[fresh]
        if len(k) == 0:
            break
        in_model[k, w] = True
        more, top = rows(k, w)
        k_all, w_all, top_all = np.r_[k_all, k], np.r_[w_all, w], np.r_[top_all, top]
        a_all = sp.vstack([a_all, more], format="csr")
        model.add_rows(more, -np.inf, 0.0)
        result = model.resolve(time_limit=deadline.require(what))
    else:
        return None
    # the basis's own vertex and duals, to rounding (basis.py), else HiGHS's
    basis = model.basis()
    lo_all = np.r_[lo_base, np.full(len(k_all), -np.inf)]
    hi_all = np.r_[hi_base, np.zeros(len(k_all))]
    exact = None if basis is None else vertex(c, a_all, lo_all, hi_all, 0.0, upper, *basis)
    if exact is not None and np.all(np.abs(exact.x - result.x) <= VERTEX_RTOL * np.maximum(1.0, np.abs(result.x))):
        m = _matrix(exact.x, scale, kernel, diag)  # within VERTEX_RTOL of a point that met every row
    elif exact is not None:  # not HiGHS's basis after all (ill-conditioned): its own point and duals
        exact = None
    obj = _loss(m, loss, prior)
    triples = (pu[k_all], pv[k_all], w_all)
    if exact is not None:
        y, r = exact.y, exact.r
    elif result.row_dual is not None and result.col_dual is not None:
        y, r = np.asarray(result.row_dual), np.asarray(result.col_dual)
    else:
        return _Pass(m, obj, result, skipped == 0, triples, None, None)
    # duals of the scaled LP, unscaled: y_i = sigma y'_i / top_i, r_j = sigma r'_j / col_j
    return _Pass(m, obj, result, skipped == 0, triples, sigma * y / np.concatenate([*tops, top_all]), sigma * r / col)


def _drop_small(a: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """``a`` (rows scaled to a largest coefficient of 1) without its entries below HiGHS's
    ``small_matrix_value``, which HiGHS would drop silently: the LP it solves and the one
    whose basis :func:`.basis.vertex` solves again are then the same. A dropped entry is
    below 1e-12 of its row (an error of that order in the row, which the repair absorbs)."""
    out = sp.csr_matrix(a)
    out.data[np.abs(out.data) < SMALL] = 0.0
    out.eliminate_zeros()
    return out


def _matrix(x: NDArray[np.float64], scale: NDArray[np.float64], kernel: NDArray[np.float64],
            diag: NDArray[np.float64]) -> NDArray[np.float64]:
    """M from the pass's variables: M[u,w] = S[u,w] V[u,w] + K[u,w] S[w,w] V[w,w] (u != w),
    M[w,w] = S[w,w] V[w,w]; V clipped at 0 (the solver's tolerance)."""
    n = scale.shape[0]
    v = np.maximum(np.asarray(x[: n * n], dtype=np.float64).reshape(n, n), 0.0)
    dv = diag * np.diag(v)
    np.fill_diagonal(v, 0.0)
    return scale * v + kernel * dv[None, :]


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
        # the repaired candidate is eps-mDP (proven by the repair): the optimum is at most its loss
        record["dual_bound"] = dual_bound(pol, distances, epsilon, loss, prior, cap=2.0 * ours)
    return candidate, pol.objective, record


def dual_bound(pol: Polished, distances: NDArray[np.float64], epsilon: float, loss: NDArray[np.float64],
               prior: NDArray[np.float64] | None, cap: float | None = None) -> float | None:
    """A certified lower bound on OPTMech's LP optimum at ``epsilon`` from the last pass's duals.

    The pass's LP is ``core._solve_fast``'s substituted LP (uncapped, at the pass's level),
    scaled; its duals, unscaled, go to :func:`~.certificate.bound_from_duals` (privacy rows
    mapped to ``epsilon``, the bounds X >= 0 to the kernel rows): valid whatever their
    accuracy (weak duality), tight when they are the basis's own
    (:mod:`.basis`). ``cap``: a number at least OPTMech's optimum at ``epsilon`` (the loss
    of an eps-mDP mechanism), which bounds every entry (:func:`~.certificate.optmech_lp`).
    """
    if pol.rows is None or pol.row_dual is None or pol.col_dual is None:
        return None
    d = np.asarray(distances, dtype=np.float64)
    factor = np.exp(np.minimum(pol.level * d, _EXP_MAX))
    col = np.nan_to_num(pol.col_dual, nan=0.0, posinf=0.0, neginf=0.0)
    return bound_from_duals(d, epsilon, pol.rows, pol.row_dual, col, factor, loss=loss, prior=prior, cap=cap)
