r"""The Newton system of the structured interior-point method (:mod:`.ipm`): the scaled
LP's products with its privacy rows and the block factorisation of its normal equations.

One concept: the linear algebra of one iteration. :class:`_LP` holds the scaled LP (its
scaling is in :mod:`.ipm`) and the products :math:`Gx`, :math:`G^\top q`; :class:`_Factor`
factors the normal equations of one iterate and solves them, refined; the iteration
driver (directions, step lengths, the stopping test) is :mod:`.ipm`.

**The structure.** Write :math:`G` for the privacy rows, with slacks :math:`s \ge 0`
(:math:`Gx + s = 0`) and duals :math:`z \ge 0`, and :math:`x = \mathrm{vec}\,M \ge 0`
with duals :math:`z_x`. Eliminating :math:`\Delta s, \Delta z, \Delta z_x` from the
Newton system leaves

.. math::

    H \Delta x + E^\top \Delta y + L_r^\top \Delta q = f,\quad
    H = G^\top (Z S^{-1}) G + Z_x X^{-1},

with E the n row sums and :math:`L_r` the n loss rows (worst case; :math:`\Delta q`
their dual step). Row (u, v, w) of G touches only column w of M, so H is block diagonal:
m dense n x n blocks :math:`H_w`. Each is factored (LAPACK Cholesky, a tiny diagonal
regularisation) and inverted through its triangular factor :math:`C_w = R_w^{-1}`
(:math:`H_w^{-1} = C_w^\top C_w`); the coupling rows then give a Schur complement of size
n (expected: :math:`\sum_w H_w^{-1}`) or 2n + 1 (worst: the row sums, the loss rows and
t), formed as the Gram product :math:`B^\top B` of the stacked :math:`C_w` (and their
loss-weighted copies): positive semidefinite by construction. The blocks are independent,
so contiguous ranges of them are factored in up to :data:`FACTOR_THREADS` threads and
their Gram products summed (:func:`_invert_blocks`). Per iteration
:math:`O(m n^3)` flops and :math:`O(m n^2)` memory, with every privacy row present from
the start (no row generation). Each direction is refined against the unregularised
system (iterative refinement with the same factors), which is what keeps the solve
accurate when the diagonal spreads over 20 orders of magnitude near the optimum.

**The passes over the cubes** (the products with G and :math:`G^\top`, the block build, the
block solves) run as compiled kernels when numba is installed (:mod:`._ipm_kernels`, one
pass each where numpy makes several; :data:`KERNELS`); the numpy code is their reference
and the fallback.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_factor as _cho_factor
from scipy.linalg import cho_solve as _cho_solve
from scipy.linalg.lapack import dpotrf as _potrf
from scipy.linalg.lapack import dtrtri as _trtri

from .._resources import usable_cpus
from ..errors import SolverNumericalError

__all__ = ["KERNELS", "REFINE_REL", "REFINE_TOL", "REGULARISATION", "load_kernels"]

Array = NDArray[np.float64]

#: Relative regularisation of each block H_w (times its largest diagonal entry); the
#: refinement against the unregularised system removes its effect on the direction.
REGULARISATION = 1e-13

#: Refinement steps per Newton solve at most; stops earlier once the largest residual of
#: the reduced system is below :data:`REFINE_TOL` (or :data:`REFINE_REL` times ``tol``) of
#: the right-hand side's largest entry.
REFINE_STEPS = 3

#: Relative residual of the reduced system at which the refinement stops (the floor).
REFINE_TOL = 1e-12

#: The refinement's stopping residual, relative to the method's ``tol``, where that is
#: looser than :data:`REFINE_TOL`. A direction that solves the Newton system to a relative
#: residual :math:`\delta` moves the residuals and the gap the step reaches by about
#: :math:`\delta` relative, so a run to ``tol`` needs :math:`\delta \ll` ``tol``, not
#: :math:`10^{-12}`. At the finish's ``tol`` (:data:`~.ipm_finish.IPM_TOL`) the unrefined
#: solve is already far below this, and the refinement (about half of the block solves
#: and every product with the unregularised H) is skipped.
REFINE_REL = 1e-4

#: The compiled passes of :mod:`._ipm_kernels` (None: numpy), loaded by :func:`load_kernels`
#: on the first solve, so that importing the LP package does not import numba (a slow import).
KERNELS: Any = None
_KERNELS_LOADED = False


def load_kernels() -> None:
    """Set :data:`KERNELS` from :mod:`._ipm_kernels` (once; None where numba is missing)."""
    global KERNELS, _KERNELS_LOADED
    if not _KERNELS_LOADED:
        from ._ipm_kernels import KERNELS as compiled

        KERNELS, _KERNELS_LOADED = compiled, True


class _LP:
    """The scaled LP and its structured products (see the module docstring)."""

    def __init__(
        self,
        distances: NDArray[np.float64],
        level: float,
        allowed: NDArray[np.bool_],
        loss: NDArray[np.float64],
        prior: NDArray[np.float64] | None,
    ) -> None:
        self.n, self.m = loss.shape
        with np.errstate(under="ignore"):
            a = np.exp(-level * distances)
        keep = allowed & (a > 0)
        np.fill_diagonal(keep, False)
        self.a = np.where(keep, a, 0.0)
        self.keep = keep
        self.maskf = keep.astype(np.float64)
        self.mask = np.broadcast_to(keep.astype(np.float64), (self.m, self.n, self.n))
        self.unmask = np.broadcast_to((~keep).astype(np.float64), (self.m, self.n, self.n))
        self.rows = int(keep.sum()) * self.m
        self.scale = float(loss.max()) if loss.max() > 0 else 1.0
        self.loss = loss / self.scale
        self.worst = prior is None
        self.c = np.zeros_like(self.loss) if prior is None else prior[:, None] * self.loss
        self.ncomp = self.rows + self.n * self.m + (self.n if self.worst else 0)

    def gx(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """G x as [w, u, v]: a[u,v] x[u,w] - x[v,w] (0 on rows left out)."""
        if KERNELS is not None:
            return np.asarray(KERNELS["gx"](self.a, self.maskf, np.ascontiguousarray(x.T)))
        xt = x.T
        out = self.a[None, :, :] * xt[:, :, None]
        out -= xt[:, None, :]
        out *= self.mask
        return out

    def gtz(self, q: NDArray[np.float64]) -> NDArray[np.float64]:
        """G^T q as [u, w] for q [w, u, v] (zero on rows left out)."""
        if KERNELS is not None:
            return np.asarray(KERNELS["gtz"](self.a, self.maskf, np.ascontiguousarray(q)).T)
        return np.einsum("wuv,uv->uw", q, self.a) - q.sum(axis=1).T


#: Threads that factor the blocks (each a contiguous range of outputs; LAPACK releases
#: the GIL, and the ranges' Gram products are summed): at most 2, so that a build leaves
#: room to other work on a small shared machine, and never more than this process may use.
#: (The compiled passes stay on one thread: numba's parallel passes (OpenMP threads) cost
#: several times the serial ones when the machine is busy.)
FACTOR_THREADS = min(2, usable_cpus())

_POOL: ThreadPoolExecutor | None = None


def _invert_range(h: Array, cinv: Array, loss_t: Array | None, lo: int, hi: int) -> Array | None:
    """Blocks lo..hi-1: the Cholesky factor R_w of H_w and C_w = R_w^{-1} into ``cinv``;
    returns the Gram sum of their stacked C_w (and loss-weighted copies), None when a
    block is not positive definite. One LAPACK potrf and trtri per block: numpy's batched
    Cholesky is slower, and its batched inverse (an LU per block) far slower when the
    machine is busy, OpenBLAS threading each 100 x 100 factorisation."""
    for w in range(lo, hi):
        r, info = _potrf(h[w], lower=1, clean=1)
        if info != 0:
            return None
        c, info = _trtri(r, lower=1)
        if info != 0:
            return None
        cinv[w] = c
    part = cinv[lo:hi]
    if loss_t is not None:
        part = np.concatenate([part, part * loss_t[lo:hi, None, :]], axis=2)
    flat = part.reshape((hi - lo) * part.shape[1], part.shape[2])
    return np.asarray(flat.T @ flat)


def _invert_blocks(h: Array, cinv: Array, loss_t: Array | None) -> Array | None:
    """:func:`_invert_range` over all blocks, split over :data:`FACTOR_THREADS` threads."""
    global _POOL
    m = h.shape[0]
    parts = max(1, min(FACTOR_THREADS, m // 8))
    if parts == 1:
        return _invert_range(h, cinv, loss_t, 0, m)
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=FACTOR_THREADS, thread_name_prefix="metricdp-ipm")
    cuts = np.linspace(0, m, parts + 1).astype(int)
    jobs = [_POOL.submit(_invert_range, h, cinv, loss_t, int(a), int(b)) for a, b in itertools.pairwise(cuts)]
    parts_done = [job.result() for job in jobs]  # every range finished before any retry writes
    total: Array | None = None
    for part in parts_done:
        if part is None:
            return None
        total = part if total is None else total + part
    return total


class _Factor:
    """The factored normal equations of one iteration (block inverses + Schur complement).

    ``d`` (m, n, n): z/s of the privacy rows, or z itself when ``slack`` s is given (the
    compiled block build then divides as it reads, and the cube z/s is formed only if the
    refinement needs it); ``dx`` (n, m): z_x/x; ``dl`` (n,): z_L/s_L of the loss rows
    (worst case; empty otherwise); ``refine_tol``: the refinement's relative residual;
    ``blocks``: an (m, n, n) buffer the compiled block build may write H into (reused
    across iterations: it is not kept).
    """

    def __init__(
        self, lp: _LP, d: Array, dx: Array, dl: Array, refine_tol: float = REFINE_TOL, *, slack: Array | None = None,
        blocks: Array | None = None,
    ) -> None:
        n, m = lp.n, lp.m
        self.lp, self.dx, self.dl, self.refine_tol = lp, dx, dl, refine_tol
        self._d: Array | None = d if slack is None else None
        self._z, self._s = d, slack
        self.dxt = np.ascontiguousarray(dx.T)
        idx = np.arange(n)
        if KERNELS is not None:
            divide = self._s is not None
            h = np.empty((m, n, n)) if blocks is None else blocks
            big = KERNELS["normal_blocks"](lp.a, self._z, self._s if divide else self._z, divide, self.dxt,
                                           REGULARISATION, h)
            big = big[:, None]
        else:
            d = self.d
            da = d * lp.a[None, :, :]
            h = -(da + da.transpose(0, 2, 1))
            diag = (da * lp.a[None, :, :]).sum(axis=2) + d.sum(axis=1) + dx.T  # [w, u]
            big = diag.max(axis=1, keepdims=True)
            h[:, idx, idx] += diag + REGULARISATION * big
        self.cinv = np.empty_like(h)
        loss_t = lp.loss.T if lp.worst else None
        gram = _invert_blocks(h, self.cinv, loss_t)
        if gram is None:
            h[:, idx, idx] += 1e-8 * big
            gram = _invert_blocks(h, self.cinv, loss_t)
            if gram is None:
                raise SolverNumericalError(
                    "interior point: a block of the normal equations is not positive definite",
                    status="numerical/other",
                )
        k = gram.shape[0]
        if lp.worst:
            gram[n:, n:] += np.diag(1.0 / dl)
        gram[np.arange(k), np.arange(k)] *= 1.0 + 1e-14
        self._cho: tuple[Array, bool] | None
        try:
            self._cho = _cho_factor(gram, lower=True)
        except np.linalg.LinAlgError:
            self._cho = None
        self._gram = gram
        # the Schur system's response to t: P b = (0, 1) (worst case)
        self.bt = self._schur_solve(np.r_[np.zeros(n), np.ones(n)]) if lp.worst else np.zeros(0)

    @property
    def d(self) -> Array:
        """z/s of the privacy rows (formed on first use when the factor was given z and s)."""
        if self._d is None:
            assert self._s is not None
            self._d = self._z / self._s
        return self._d

    def _schur_solve(self, rhs: Array) -> Array:
        if self._cho is not None:
            return np.asarray(_cho_solve(self._cho, rhs))
        return np.asarray(np.linalg.lstsq(self._gram, rhs, rcond=None)[0])

    def hinv(self, f: Array) -> Array:
        """H^{-1} f block by block, f [u, w]."""
        if KERNELS is not None:
            return np.asarray(KERNELS["hinv"](self.cinv, np.ascontiguousarray(f.T)).T)
        cf = np.matmul(self.cinv, f.T[:, :, None])
        return np.asarray(np.matmul(self.cinv.transpose(0, 2, 1), cf)[:, :, 0].T)

    def hop(self, dx: Array) -> Array:
        """The unregularised H dx."""
        if KERNELS is not None:
            return np.asarray(KERNELS["hop"](self.lp.a, self.d, self.dxt, np.ascontiguousarray(dx.T)).T)
        return self.lp.gtz(self.d * self.lp.gx(dx)) + self.dx * dx

    def solve(self, f: Array, e: Array, g4: Array, g5: float) -> tuple[Array, Array, Array, float]:
        """(dx, dy, dq, dt) of the reduced system (module docstring), refined against the
        unregularised operator:

        H dx + E^T dy + L^T dq = f,  E dx = e,  L dx - dt - dq / D_L = g4,  1^T dq = g5

        (expected objective: no dq, dt; ``g4`` empty).
        """
        sol = self._solve_once(f, e, g4, g5)
        scale = max(float(np.abs(f).max()), float(np.abs(e).max()), 1e-300)
        for _ in range(REFINE_STEPS):
            r1, r2, r4, r5 = self._residual(sol, f, e, g4, g5)
            worst = max(float(np.abs(r1).max()), float(np.abs(r2).max()), float(np.abs(r4).max(initial=0.0)), abs(r5))
            if worst <= self.refine_tol * scale:
                break
            c = self._solve_once(r1, r2, r4, r5)
            sol = (sol[0] + c[0], sol[1] + c[1], sol[2] + c[2], sol[3] + c[3])
        return sol

    def _residual(
        self, sol: tuple[Array, Array, Array, float], f: Array, e: Array, g4: Array, g5: float
    ) -> tuple[Array, Array, Array, float]:
        dx, dy, dq, dt = sol
        lp = self.lp
        r1 = f - self.hop(dx) - dy[:, None]
        r2 = e - dx.sum(axis=1)
        if not lp.worst:
            return r1, r2, g4, 0.0
        r1 -= dq[:, None] * lp.loss
        r4 = g4 - ((lp.loss * dx).sum(axis=1) - dt - dq / self.dl)
        return r1, r2, r4, g5 - float(dq.sum())

    def _solve_once(self, f: Array, e: Array, g4: Array, g5: float) -> tuple[Array, Array, Array, float]:
        lp, n = self.lp, self.lp.n
        h = self.hinv(f)
        rhs_y = h.sum(axis=1) - e
        if not lp.worst:
            dy = self._schur_solve(rhs_y)
            return self.hinv(f - dy[:, None]), dy, np.zeros(0), 0.0
        rhs_q = (lp.loss * h).sum(axis=1) - g4
        a = self._schur_solve(np.r_[rhs_y, rhs_q])
        dt = (float(a[n:].sum()) - g5) / float(self.bt[n:].sum())
        sol = a - self.bt * dt
        dy, dq = sol[:n], sol[n:]
        dx = self.hinv(f - dy[:, None] - dq[:, None] * lp.loss)
        return dx, dy, dq, dt
