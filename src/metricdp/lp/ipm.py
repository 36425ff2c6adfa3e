r"""A structured primal-dual interior-point method for the OPTMech LP.

One concept: Mehrotra's predictor-corrector method on the mechanism LP written so that
its normal equations split into one dense block per output. The result is an *interior*
point, never a mechanism: :mod:`.ipm_finish` turns it into an exact vertex.

**The LP** (Bordenabe et al., CCS 2014, Sec. 4; Imola et al., UAI 2022, LP (1)), M of
shape (n, m) for n inputs and m outputs (m = n, the square case, or a separate output
set), at level :math:`\lambda`:

.. math::

    \min\ c^\top M \ \text{(expected)}\quad\text{or}\quad \min t,\ \ \textstyle\sum_w
    L[u,w] M[u,w] \le t \ \text{(worst)},\qquad \sum_w M[u,w] = 1,\ M \ge 0,

    a_{uv} M[u,w] - M[v,w] \le 0 \quad\text{for every allowed ordered pair } (u, v)
    \text{ and every output } w,\qquad a_{uv} = e^{-\lambda d(u,v)} .

**Scaling (no exponent cap).** Each privacy row :math:`M[u,w] \le e^{\lambda d}
M[v,w]` is divided by its factor, so its coefficients are :math:`a_{uv} \in (0, 1]` and
1: every row has norm between 1 and :math:`\sqrt 2`, whatever :math:`\lambda d`. Where
:math:`\lambda d > 745` the float :math:`a_{uv}` underflows to 0 and the row reads
:math:`-M[v,w] \le 0`, which the bound :math:`M \ge 0` already states: such rows are left
out. This relaxes the true row by at most :math:`e^{-745} M[u,w]` in probability, far
below every tolerance downstream, and the exact finish (:mod:`.ipm_finish`), the repair
and the audit check the true rows anyway. Coefficients between :math:`10^{-308}` and 1
are kept as they are (gradual underflow): their products with the iterates are at worst
denormal, never inf or NaN. The loss is scaled by its largest entry so the objective is
O(1).

**The structure** (the normal equations' blocks, their factors and the Schur complement
of the coupling rows, the refinement): :mod:`.ipm_newton`. Per iteration
:math:`O(m n^3)` flops and :math:`O(m n^2)` memory, with every privacy row present from
the start (no row generation).

**The method.** Infeasible primal-dual path following with Mehrotra's predictor-
corrector and up to :data:`CORRECTORS` Gondzio centrality correctors (each reusing the
iteration's factors), separate primal and dual step lengths, step factor 0.995 (0.9995 once the
gap is small), a starting point by Mehrotra's heuristic on a strictly feasible
kernel-shaped primal (:func:`_start`). It stops when the relative primal and dual
residuals and the relative duality gap are all below ``tol``.

**The passes over the cubes** (the products with G and :math:`G^\top`, the block build, the
block solves, the slack and dual steps with their ratio tests, Gondzio's target) run as
compiled kernels when numba is installed (:mod:`._ipm_kernels`, one pass each where numpy
makes several; :data:`.ipm_newton.KERNELS`); the numpy code here is their reference and
the fallback. With the kernels an iteration (:func:`_mehrotra`) writes no cube it can
recompute: the primal residual r, the products s z and Mehrotra's targets are formed
where they are read, the next iterate's residual summary comes out of the pass that
forms it, and the cubes that are written go into buffers kept across iterations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress, report
from .._resources import check_allocation
from .._threads import blas_threads
from ..errors import SolverNumericalError
from . import ipm_newton as _newton
from .deadline import Deadline
from .ipm_newton import _LP, REFINE_REL, REFINE_TOL, _Factor, load_kernels

__all__ = ["IPMResult", "ipm_bytes", "load_kernels", "solve_ipm"]

Array = NDArray[np.float64]

#: Floor of the denominator of the relative gap (scaled loss, max entry 1): relative
#: above it, absolute below it. Optima far below the loss scale are common (large eps d:
#: the optimum is about d / (1 + e^(eps d))), so 1 + |objective| was too loose there.
GAP_FLOOR = 1e-4

#: Gondzio centrality correctors per iteration at most (each one Newton solve with the
#: factors at hand; kept only while it lengthens the step). Off: correctors save
#: iterations (about a third on a 6 x 6 grid) but not time once the elementwise passes are
#: compiled, since a corrector costs a refined solve, about what the factorisation saves;
#: on a 10 x 10 grid each one added makes the build slower.
CORRECTORS = 0

#: BLAS threads while the method runs. Every BLAS call here is small (n x n blocks, an
#: (m n) x n Gram product), where OpenBLAS's spinning worker threads only cost: one thread
#: is several times faster than two when the machine is busy (see benchmarks/RESULTS.md).
BLAS_THREADS = 1

#: (m, n, n) float64 arrays alive at once (slacks and duals of two iterates, the two
#: directions' steps, the blocks, their inverse factors, z / s of the refinement,
#: temporaries of the elementwise passes): the memory estimate.
_LIVE_CUBES = 14


def ipm_bytes(n: int, m: int) -> float:
    """Bytes the interior-point method needs for n inputs and m outputs (estimate)."""
    return 8.0 * _LIVE_CUBES * m * n * n + 8.0 * 64 * n * max(n, m)


@dataclass
class IPMResult:
    """An interior point of the mechanism LP (:func:`solve_ipm`), in the LP's own units.

    Attributes
    ----------
    matrix : ndarray (n, m)
        The primal iterate M (row sums 1 and privacy rows met to the residual reached).
    slack, dual : ndarray (m, n, n)
        Privacy-row slacks s and duals z, indexed [w, u, v] (scaled rows; 1 and 0 for the
        rows left out).
    row_dual : ndarray (n,)
        Duals y of the row sums (unscaled loss; the dual objective is -sum y).
    objective, dual_objective : float
        Primal and dual objective (unscaled loss).
    gap, primal_residual, dual_residual : float
        Relative duality gap and relative residuals at the last iterate.
    iterations : int
    seconds : float
    converged : bool
        All three measures below ``tol``.
    history : list of tuples
        (iteration, seconds, primal objective, dual objective, gap, primal res, dual res).
    loss_dual : ndarray (n,)
        Duals of the loss rows (worst case; empty for the expected objective).
    scale : float
        The loss scale (largest loss entry) that ``dual`` is to be multiplied by.
    """

    matrix: NDArray[np.float64]
    slack: NDArray[np.float64]
    dual: NDArray[np.float64]
    row_dual: NDArray[np.float64]
    objective: float
    dual_objective: float
    gap: float
    primal_residual: float
    dual_residual: float
    iterations: int
    seconds: float
    converged: bool
    history: list[tuple[float, ...]] = field(default_factory=list)
    loss_dual: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    scale: float = 1.0


@dataclass
class _Point:
    """A primal-dual iterate (loss-row parts ``sl``, ``zl`` empty for the expected objective)."""

    x: Array  # (n, m)
    s: Array  # (m, n, n) privacy slacks, 1 on rows left out
    y: Array  # (n,) row-sum duals
    z: Array  # (m, n, n) privacy duals, 0 on rows left out
    zx: Array  # (n, m) duals of x >= 0
    t: float  # the worst-case bound (0 for the expected objective)
    sl: Array  # (n,) loss-row slacks
    zl: Array  # (n,) loss-row duals


@dataclass
class _Step:
    """A direction: the changes of every field of :class:`_Point`."""

    x: Array
    s: Array
    y: Array
    z: Array
    zx: Array
    t: float
    sl: Array
    zl: Array
    #: min(ds / s) and min(dz / z) over the kept privacy rows when a kernel computed them
    lows: tuple[float, float] | None = None
    #: (<s, dz>, <ds, z>, <ds, dz>) over the privacy rows when a kernel computed them
    dots: tuple[float, float, float] | None = None

    def __add__(self, o: _Step) -> _Step:
        return _Step(self.x + o.x, self.s + o.s, self.y + o.y, self.z + o.z, self.zx + o.zx, self.t + o.t,
                     self.sl + o.sl, self.zl + o.zl)


@dataclass
class _Residuals:
    rd: Array  # dual: c + E^T y + G^T z + L^T z_L - z_x, (n, m)
    re: Array  # row sums - 1, (n,)
    ri: Array  # G x + s, (m, n, n)
    ril: Array  # L x - t + s_L, (n,) or empty
    rdt: float  # 1 - sum z_L
    sz: Array  # s z of the privacy rows, (m, n, n) (0 on the rows left out)
    sz_sum: float  # its sum
    ri_max: float  # max |ri|


#: The cubes r and s z of a :class:`_Residuals` built from a summary (:func:`_residuals`).
_NO_CUBE = np.zeros(0)


def _residuals(lp: _LP, p: _Point, summary: tuple[float, float, Array] | None = None) -> _Residuals:
    """The residuals at ``p``, with the privacy rows' complementarity products (one
    compiled pass over the cubes where numba is installed). ``summary``: (max |r|,
    sum s z, G^T z) of ``p`` already computed (the compiled iteration's last pass,
    :func:`_mehrotra`); the cubes r and s z are then not formed (empty fields), as the
    compiled directions recompute them where they read them."""
    kernels = _newton.KERNELS
    if summary is not None:
        ri, sz, (ri_max, sz_sum, gz) = _NO_CUBE, _NO_CUBE, summary
    elif kernels is not None:
        ri, sz, ri_max, sz_sum = kernels["primal_state"](lp.a, lp.maskf, np.ascontiguousarray(p.x.T), p.s, p.z)
        gz = lp.gtz(p.z)
    else:
        ri, sz = lp.gx(p.x) + p.s * lp.mask, p.s * p.z
        ri_max, sz_sum = np.abs(ri).max(), sz.sum()
        gz = lp.gtz(p.z)
    rd = lp.c + p.y[:, None] + gz - p.zx
    if lp.worst:
        rd += p.zl[:, None] * lp.loss
        return _Residuals(rd, p.x.sum(axis=1) - 1.0, ri, (lp.loss * p.x).sum(axis=1) - p.t + p.sl,
                          1.0 - float(p.zl.sum()), sz, float(sz_sum), float(ri_max))
    return _Residuals(rd, p.x.sum(axis=1) - 1.0, ri, np.zeros(0), 0.0, sz, float(sz_sum), float(ri_max))


def _direction(
    lp: _LP, p: _Point, r: _Residuals, fac: _Factor, rc: Array, rcx: Array, rcl: Array, *, residuals: bool = True
) -> _Step:
    """The Newton step for the complementarity targets (rc, rcx, rcl), with the current
    residuals (``residuals=False``: a centrality corrector, residuals left alone)."""
    k = 1.0 if residuals else 0.0
    # rc, ri, z and ds vanish on the rows left out (s = 1 there): no mask needed below
    kernels = _newton.KERNELS
    if kernels is not None:
        ri = r.ri if residuals else rc  # (read only when k = 1)
        f = -k * r.rd - kernels["scaled_rhs_gtz"](lp.a, p.z, ri, rc, p.s, k).T + rcx / p.x
        g4 = -(k * r.ril + rcl / p.zl) if lp.worst else np.zeros(0)
        dx, dy, dq, dt = fac.solve(f, -k * r.re, g4, k * r.rdt)
        ds, dz, lo_s, lo_z = kernels["slack_steps"](lp.a, lp.maskf, np.ascontiguousarray(dx.T), ri, rc, p.s, p.z, k)
        dzx = (rcx - p.zx * dx) / p.x
        dsl = (-k * r.ril - (lp.loss * dx).sum(axis=1) + dt) if lp.worst else np.zeros(0)
        return _Step(dx, ds, dy, dz, dzx, dt, dsl, dq, (float(lo_s), float(lo_z)))
    if residuals:
        q = p.z * r.ri
        q += rc
        q /= p.s
    else:
        q = rc / p.s
    f = -k * r.rd - lp.gtz(q) + rcx / p.x
    g4 = -(k * r.ril + rcl / p.zl) if lp.worst else np.zeros(0)
    dx, dy, dq, dt = fac.solve(f, -k * r.re, g4, k * r.rdt)
    ds = lp.gx(dx)
    if residuals:
        ds += r.ri
    np.negative(ds, out=ds)
    dz = p.z * ds
    np.subtract(rc, dz, out=dz)
    dz /= p.s
    dzx = (rcx - p.zx * dx) / p.x
    dsl = (-k * r.ril - (lp.loss * dx).sum(axis=1) + dt) if lp.worst else np.zeros(0)
    return _Step(dx, ds, dy, dz, dzx, dt, dsl, dq)


def _mehrotra(
    lp: _LP, p: _Point, r: _Residuals, fac: _Factor, aff: _Step | None, smu: float, rcx: Array, rcl: Array,
    out: tuple[Array, Array] | None = None,
) -> _Step:
    r"""Mehrotra's predictor (``aff`` None: privacy targets :math:`-sz`) or corrector
    (targets :math:`\sigma\mu - sz - ds_a dz_a` from the predictor ``aff``) by the compiled
    passes, which recompute r, s z and the targets where they read them: the same step as
    :func:`_direction` with the targets formed, without three cubes written and read.
    ``out``: two (m, n, n) buffers for ds and dz (default: new ones)."""
    kernels = _newton.KERNELS
    xt = np.ascontiguousarray(p.x.T)
    dsa, dza = (p.s, p.z) if aff is None else (aff.s, aff.z)  # (not read by the predictor)
    corrector = aff is not None
    f = -r.rd - kernels["mehrotra_rhs_gtz"](lp.a, lp.maskf, xt, p.s, p.z, dsa, dza, smu, corrector).T + rcx / p.x
    g4 = -(r.ril + rcl / p.zl) if lp.worst else np.zeros(0)
    dx, dy, dq, dt = fac.solve(f, -r.re, g4, r.rdt)
    ds, dz = (np.empty_like(p.s), np.empty_like(p.s)) if out is None else out
    lo_s, lo_z, s_dz, ds_z, ds_dz = kernels["mehrotra_steps"](
        lp.a, lp.maskf, np.ascontiguousarray(dx.T), xt, p.s, p.z, dsa, dza, smu, corrector, ds, dz)
    dzx = (rcx - p.zx * dx) / p.x
    dsl = (-r.ril - (lp.loss * dx).sum(axis=1) + dt) if lp.worst else np.zeros(0)
    return _Step(dx, ds, dy, dz, dzx, dt, dsl, dq, (float(lo_s), float(lo_z)),
                 (float(s_dz), float(ds_z), float(ds_dz)))


def _ratio(v: Array, dv: Array) -> float:
    """Largest step in (0, 1] keeping v + step dv >= 0 (v > 0): -1 / min(dv / v), one
    division and one reduction (a masked division is several times slower)."""
    if v.size == 0:
        return 1.0
    worst = float(np.min(np.divide(dv, v)))
    return 1.0 if worst >= -1.0 else -1.0 / worst


def _lengths(p: _Point, zpad: Array, d: _Step) -> tuple[float, float]:
    """Primal and dual step to the boundary. ``zpad`` is z with the rows left out read
    as 1 (``z + lp.unmask``: there s = 1, z = ds = dz = 0), so the division stays finite."""
    if d.lows is not None:
        rs, rz = (1.0 if lo >= -1.0 else -1.0 / lo for lo in d.lows)
    else:
        rs, rz = _ratio(p.s, d.s), _ratio(zpad, d.z)
    ap = min(_ratio(p.x, d.x), rs, _ratio(p.sl, d.sl))
    ad = min(_ratio(p.zx, d.zx), rz, _ratio(p.zl, d.zl))
    return ap, ad


def _trial_mu_sum(p: _Point, sz_sum: float, d: _Step, ap: float, ad: float) -> float:
    r"""Sum of the complementarity products at the trial point, by dot products: for the
    privacy rows :math:`\sum (s + a_p ds)(z + a_d dz) = \sum sz + a_d \langle s, dz\rangle
    + a_p \langle ds, z\rangle + a_p a_d \langle ds, dz\rangle` (no temporaries)."""
    rest = float(((p.x + ap * d.x) * (p.zx + ad * d.zx)).sum() + ((p.sl + ap * d.sl) * (p.zl + ad * d.zl)).sum())
    if d.dots is not None:
        return sz_sum + ad * d.dots[0] + ap * d.dots[1] + ap * ad * d.dots[2] + rest
    if _newton.KERNELS is not None:
        return float(_newton.KERNELS["trial_sum"](p.s, d.s, p.z, d.z, ap, ad)) + rest
    priv = sz_sum + ad * float(np.vdot(p.s, d.z)) + ap * float(np.vdot(d.s, p.z)) + ap * ad * float(np.vdot(d.s, d.z))
    return priv + rest


def _products(lp: _LP, p: _Point, d: _Step, ap: float, ad: float) -> tuple[Array, Array, Array]:
    """Complementarity products at the trial point (p + ap d primal, ad d dual)."""
    return ((p.s + ap * d.s) * (p.z + ad * d.z), (p.x + ap * d.x) * (p.zx + ad * d.zx),
            (p.sl + ap * d.sl) * (p.zl + ad * d.zl))


def _gondzio(
    lp: _LP, p: _Point, zpad: Array, r: _Residuals, fac: _Factor, d: _Step, ap: float, ad: float, smu: float
) -> tuple[_Step, float, float]:
    """Gondzio's centrality corrector: aim at longer steps and pull the trial point's
    outlying products back into [0.1, 10] sigma mu (large ones by at most 10 sigma mu)."""
    tp, td = min(1.0, 1.5 * ap + 0.1), min(1.0, 1.5 * ad + 0.1)

    def target(v: Array) -> Array:
        return np.maximum(np.clip(v, 0.1 * smu, 10.0 * smu) - v, -10.0 * smu)

    if _newton.KERNELS is not None:
        ts = _newton.KERNELS["centre_target"](lp.maskf, p.s, p.z, d.s, d.z, tp, td, smu)
        vx, vl = (p.x + tp * d.x) * (p.zx + td * d.zx), (p.sl + tp * d.sl) * (p.zl + td * d.zl)
        c = _direction(lp, p, r, fac, ts, target(vx), target(vl), residuals=False)
        ds, dz, lo_s, lo_z = _newton.KERNELS["combine"](lp.maskf, p.s, p.z, d.s, d.z, c.s, c.z)
        cand = _Step(d.x + c.x, ds, d.y + c.y, dz, d.zx + c.zx, d.t + c.t, d.sl + c.sl, d.zl + c.zl,
                     (float(lo_s), float(lo_z)))
    else:
        vs, vx, vl = _products(lp, p, d, tp, td)
        cand = d + _direction(lp, p, r, fac, target(vs) * lp.mask, target(vx), target(vl), residuals=False)
    return (cand, *_lengths(p, zpad, cand))


def _start(lp: _LP, distances_to_anchor: Array, level: float) -> _Point:
    r"""Mehrotra's starting-point heuristic on a strictly feasible primal.

    Primal: :math:`M[u,w] \propto e^{-\lambda d(u, a(w))/4}` (rows normalised), which
    meets every privacy row with slack: the ratio :math:`M[u,w]/M[v,w]` is at most
    :math:`e^{\lambda d(u,v)/4}` times the ratio of row normalisers, itself at most
    :math:`e^{\lambda d(u,v)/4}` (triangle inequality), so at most
    :math:`e^{\lambda d(u,v)/2}`. Duals: :math:`z = 0`, :math:`z_L = 1/n` (so
    :math:`\sum z_L = 1`), y the least-squares choice making :math:`z_x = c + y +
    z_L L` small. Then Mehrotra's shifts: every primal and every dual vector moved by
    :math:`\max(-1.5 \min, 0)`, then by half the complementarity over the other side's
    sum, so no product starts near 0 (rows left out take no part).
    """
    n, m = lp.n, lp.m
    x = np.exp(-0.25 * level * distances_to_anchor)
    x /= x.sum(axis=1, keepdims=True)
    on = lp.mask > 0
    s = -lp.gx(x)
    zl = np.full(n, 1.0 / n) if lp.worst else np.zeros(0)
    base = lp.c + (zl[:, None] * lp.loss if lp.worst else 0.0)
    y = -base.mean(axis=1)
    zx = base + y[:, None]
    z = np.zeros((m, n, n))
    lossu = (lp.loss * x).sum(axis=1)
    t = float(lossu.max()) if lp.worst else 0.0
    sl = t - lossu if lp.worst else np.zeros(0)
    prim, dual = [x, s[on], sl], [zx, z[on], zl]
    dp = max(-1.5 * min(float(v.min(initial=np.inf)) for v in prim), 0.0)
    dd = max(-1.5 * min(float(v.min(initial=np.inf)) for v in dual), 0.0)
    prim, dual = [v + dp for v in prim], [v + dd for v in dual]
    pd = sum(float((a * b).sum()) for a, b in zip(prim, dual, strict=True))
    sp_, sd_ = sum(float(v.sum()) for v in prim), sum(float(v.sum()) for v in dual)
    prim = [v + 0.5 * pd / max(sd_, 1e-300) for v in prim]
    dual = [v + 0.5 * pd / max(sp_, 1e-300) for v in dual]
    s = np.ones((m, n, n))
    s[on] = prim[1]
    z[on] = dual[1]
    return _Point(prim[0], s, y, z, dual[0], t, prim[2], dual[2])


def solve_ipm(
    distances: Array,
    level: float,
    allowed: NDArray[np.bool_],
    loss: Array,
    prior: Array | None,
    *,
    anchor: NDArray[np.intp] | None = None,
    tol: float = 1e-9,
    max_iter: int = 200,
    deadline: Deadline | float | None = None,
    progress: Progress | None = None,
    what: str = "optimal",
) -> IPMResult:
    r"""Solve the scaled mechanism LP by the structured interior-point method.

    ``distances`` (n, n) between inputs; ``level`` :math:`\lambda` of the privacy rows;
    ``allowed`` (n, n) the ordered pairs whose rows are imposed; ``loss`` (n, m); ``prior``
    (n,) for the expected objective, None for the worst case; ``anchor`` a(w) per output
    (None: square), used only by the starting point. Stops at relative gap and residuals
    below ``tol`` or after ``max_iter`` iterations (then ``converged`` is False: the caller
    decides). ``progress(iteration, max_iter, message)`` after every iteration. The memory
    (:func:`ipm_bytes`) is checked first (:func:`~metricdp._resources.check_allocation`).

    Raises SolverTimeLimitError when ``deadline`` passes, SolverNumericalError when an
    iterate is not finite or a block is not positive definite.
    """
    deadline = Deadline.of(deadline)
    n, m = loss.shape
    check_allocation(ipm_bytes(n, m), f"{what}: the interior-point method for n = {n}, m = {m}")
    load_kernels()
    with blas_threads(BLAS_THREADS):
        return _run(distances, level, allowed, loss, prior, anchor, tol, max_iter, deadline, progress, what)


def _run(
    distances: Array, level: float, allowed: NDArray[np.bool_], loss: Array, prior: Array | None,
    anchor: NDArray[np.intp] | None, tol: float, max_iter: int, deadline: Deadline, progress: Progress | None,
    what: str,
) -> IPMResult:
    """The iterations of :func:`solve_ipm` (arguments checked there)."""
    t0 = time.perf_counter()
    d = np.asarray(distances, np.float64)
    lp = _LP(d, level, allowed, np.asarray(loss, np.float64), prior)
    p = _start(lp, d if anchor is None else d[:, anchor], level)
    refine_tol = max(REFINE_TOL, REFINE_REL * tol)
    history: list[tuple[float, ...]] = []
    it = 0
    summary: tuple[float, float, Array] | None = None
    # the compiled passes write into these cubes, reused every iteration: the blocks H,
    # the predictor's and the corrector's ds and dz, and the next iterate's s and z (the
    # previous iterate's, swapped in). Fresh cubes cost fresh pages, several times a pass.
    compiled = _newton.KERNELS is not None
    cube = (lp.m, lp.n, lp.n)
    bufs = [np.empty(cube) for _ in range(7)] if compiled else []
    while True:
        r = _residuals(lp, p, summary)
        sz, sz_sum = r.sz, r.sz_sum
        mu_sum = sz_sum + float((p.x * p.zx).sum() + (p.sl * p.zl).sum())
        mu = mu_sum / lp.ncomp
        pobj = p.t if lp.worst else float((lp.c * p.x).sum())
        dobj = -float(p.y.sum())
        pres = max(float(np.abs(r.re).max()), r.ri_max, float(np.abs(r.ril).max(initial=0.0)))
        dres = max(float(np.abs(r.rd).max()), abs(r.rdt))
        gap = max(abs(pobj - dobj), mu_sum) / max(abs(pobj), abs(dobj), GAP_FLOOR)
        history.append((it, time.perf_counter() - t0, pobj * lp.scale, dobj * lp.scale, gap, pres, dres))
        report(progress, it, max_iter,
               f"{what}: interior point iteration {it}: objective {pobj * lp.scale:.10g}, gap {gap:.1e}, "
               f"residuals {pres:.1e} / {dres:.1e}, {deadline.describe()}")
        if not (np.isfinite(pres) and np.isfinite(dres) and np.isfinite(gap)):
            raise SolverNumericalError(f"{what}: the interior-point method produced a non-finite iterate",
                                       status="numerical/other")
        converged = pres <= tol and dres <= tol and gap <= tol
        if converged or it >= max_iter:
            break
        deadline.require(what)
        it += 1
        fac = _Factor(lp, p.z, p.zx / p.x, p.zl / p.sl if lp.worst else np.zeros(0), refine_tol, slack=p.s,
                      blocks=bufs[0] if compiled else None)
        # predictor (affine scaling), then Mehrotra's sigma and corrector
        zpad = p.z if compiled else p.z + lp.unmask  # the kernels' ratio tests read no zpad
        rcx, rcl = -p.x * p.zx, -p.sl * p.zl
        if compiled:
            aff = _mehrotra(lp, p, r, fac, None, 0.0, rcx, rcl, (bufs[1], bufs[2]))
        else:
            aff = _direction(lp, p, r, fac, -sz, rcx, rcl)
        ap, ad = _lengths(p, zpad, aff)
        mu_aff = _trial_mu_sum(p, sz_sum, aff, ap, ad) / lp.ncomp
        smu = min(1.0, (mu_aff / mu) ** 3) * mu
        rcx, rcl = smu - p.x * p.zx - aff.x * aff.zx, smu - p.sl * p.zl - aff.sl * aff.zl
        if compiled:
            step = _mehrotra(lp, p, r, fac, aff, smu, rcx, rcl, (bufs[3], bufs[4]))
        else:
            rc = aff.s * aff.z
            rc += sz
            np.subtract(smu, rc, out=rc)
            rc *= lp.mask
            step = _direction(lp, p, r, fac, rc, rcx, rcl)
        ap, ad = _lengths(p, zpad, step)
        for _ in range(CORRECTORS):
            cand, ap2, ad2 = _gondzio(lp, p, zpad, r, fac, step, ap, ad, smu)
            if min(ap2, ad2) < min(ap, ad) + 0.01:
                break
            step, ap, ad = cand, ap2, ad2
        gamma = 0.9995 if gap < 1e-5 else 0.995
        ap, ad = min(1.0, gamma * ap), min(1.0, gamma * ad)
        x2 = p.x + ap * step.x
        if compiled:
            s2, z2 = bufs[5], bufs[6]
            ri_max, sz_sum2, gzt = _newton.KERNELS["advance_state"](
                lp.a, lp.maskf, np.ascontiguousarray(x2.T), p.s, step.s, p.z, step.z, ap, ad, s2, z2)
            summary = (float(ri_max), float(sz_sum2), gzt.T)
            bufs[5], bufs[6] = p.s, p.z  # the old iterate's cubes: the next one's buffers
        else:
            s2, z2 = p.s + ap * step.s, p.z + ad * step.z
        p = _Point(x2, s2, p.y + ad * step.y, z2, p.zx + ad * step.zx, p.t + ap * step.t,
                   p.sl + ap * step.sl, p.zl + ad * step.zl)
    return IPMResult(
        matrix=p.x, slack=p.s, dual=p.z, row_dual=p.y * lp.scale, objective=pobj * lp.scale,
        dual_objective=dobj * lp.scale, gap=gap, primal_residual=pres, dual_residual=dres, iterations=it,
        seconds=time.perf_counter() - t0, converged=bool(converged), history=history, loss_dual=p.zl,
        scale=lp.scale,
    )
