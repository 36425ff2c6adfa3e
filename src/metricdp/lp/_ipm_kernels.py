r"""Compiled passes of the structured interior-point method (numba, the optional ``fast`` extra).

Each kernel computes, in one pass over the (m, n, n) cubes of :mod:`.ipm`, what the
numpy code there computes in several (which stays the reference the tests compare them
with, and runs when numba is missing: ``KERNELS`` is None):

* :func:`gx` -- :meth:`.ipm_newton._LP.gx`: :math:`(Gx)[w,u,v] = a_{uv} x[u,w] - x[v,w]` on the
  kept rows, 0 elsewhere;
* :func:`gtz` -- :meth:`.ipm_newton._LP.gtz`: :math:`(G^\top q)[u,w] = \sum_v a_{uv} q[w,u,v] -
  \sum_{u'} q[w,u',u]`;
* :func:`hop` -- :meth:`.ipm_newton._Factor.hop`: :math:`G^\top (D \circ Gx) + D_x \circ x`
  without the cube :math:`Gx` (each row's value is used at once, twice);
* :func:`hinv` -- :meth:`.ipm_newton._Factor.hinv`: :math:`C_w^\top (C_w f_w)` per block for the
  lower triangular :math:`C_w`, skipping the zero triangle (half the flops of the dense
  batched product);
* :func:`scaled_rhs_gtz` -- :math:`G^\top ((k\,z \circ r + r_c) / s)` of
  :func:`.ipm._direction` without the cube it divides;
* :func:`centre_target`, :func:`combine` -- Gondzio's corrector of :func:`.ipm._gondzio`
  (its target on the privacy rows; the sum of two steps with its ratio tests);
* :func:`normal_blocks` -- the blocks :math:`H_w` of :class:`.ipm_newton._Factor` with their
  regularisation, from z and s without the cube z / s;
* :func:`primal_state` -- the privacy rows' primal residual, complementarity products, the
  residual's largest entry and the products' sum of :func:`.ipm._residuals` (one pass where
  numpy makes six);
* :func:`corrector_rhs`, :func:`advance`, :func:`trial_sum` -- Mehrotra's corrector
  target, the step to the next iterate, and the complementarity sum at a trial point of
  :func:`.ipm._run` (one pass each);
* :func:`slack_steps` -- :math:`ds = -(G\,dx + k\,r)`, :math:`dz = (r_c - z \circ ds)/s`
  and the two ratio tests :math:`\min(ds/s)`, :math:`\min(dz/z)` in one pass;
* :func:`mehrotra_rhs_gtz`, :func:`mehrotra_steps`, :func:`advance_state` -- the passes of one
  Mehrotra iteration of :func:`.ipm._run` without the cubes r, s z and :math:`r_c`: each is
  recomputed where it is read, from the iterate and the predictor's steps (a pass over
  the cubes costs its memory traffic, not its flops), and the next iterate's residual
  summary and :math:`G^\top z` come out of the pass that forms it.

The kernels do the same float operations as numpy up to the order of the sums (a kernel
adds along v in index order, numpy's einsum pairwise): the iterates differ by rounding
only, which the method's tolerances absorb, and nothing exact depends on them (the
simplex finish, the repair and the audit do).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._numba import njit

__all__ = ["KERNELS"]

KERNELS: Any = None


#: Floating-point freedoms of the kernels: sums and minima may be reassociated (so LLVM
#: vectorises them) and products contracted into fused multiply-adds; no assumption about
#: NaN or infinity (the method's finite check must still see them).
FASTMATH = {"nsz", "arcp", "contract", "reassoc"}

if njit is not None:  # pragma: no branch

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def gx(a: Any, mask: Any, xt: Any) -> Any:
        """(G x)[w, u, v] for xt = x^T (m, n); 0 on the rows left out."""
        m, n = xt.shape
        out = np.empty((m, n, n))
        for w in range(m):
            xw = xt[w]
            for u in range(n):
                xu = xw[u]
                for v in range(n):
                    out[w, u, v] = (a[u, v] * xu - xw[v]) * mask[u, v]
        return out

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def gtz(a: Any, mask: Any, q: Any) -> Any:
        """(G^T q)^T as (m, n) for q (m, n, n) (rows left out ignored)."""
        m, n, _ = q.shape
        out = np.zeros((m, n))
        for w in range(m):
            ow = out[w]
            for u in range(n):
                acc = 0.0
                for v in range(n):
                    qv = q[w, u, v] * mask[u, v]
                    acc += a[u, v] * qv
                    ow[v] -= qv
                ow[u] += acc
        return out

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def hop(a: Any, d: Any, dxt: Any, xt: Any) -> Any:
        """(G^T (d * G x) + dx * x)^T as (m, n); ``d`` must be 0 on the rows left out."""
        m, n = xt.shape
        out = np.zeros((m, n))
        for w in range(m):
            xw = xt[w]
            ow = out[w]
            for u in range(n):
                xu = xw[u]
                acc = 0.0
                for v in range(n):
                    q = d[w, u, v] * (a[u, v] * xu - xw[v])
                    acc += a[u, v] * q
                    ow[v] -= q
                ow[u] += acc + dxt[w, u] * xu
        return out

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def hinv(cinv: Any, ft: Any) -> Any:
        """(C_w^T C_w f_w) per block w as (m, n), C_w lower triangular, ft = f^T (m, n)."""
        m, n = ft.shape
        out = np.zeros((m, n))
        t = np.empty(n)
        for w in range(m):
            c = cinv[w]
            fw = ft[w]
            ow = out[w]
            for i in range(n):
                acc = 0.0
                for j in range(i + 1):
                    acc += c[i, j] * fw[j]
                t[i] = acc
            for i in range(n):
                ti = t[i]
                for j in range(i + 1):
                    ow[j] += c[i, j] * ti
        return out

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def scaled_rhs_gtz(a: Any, z: Any, r: Any, rc: Any, s: Any, k: float) -> Any:
        """(G^T ((k z r + rc) / s))^T as (m, n); z and rc must be 0 on the rows left out."""
        m, n, _ = z.shape
        out = np.zeros((m, n))
        for w in range(m):
            ow = out[w]
            for u in range(n):
                acc = 0.0
                for v in range(n):
                    qv = (rc[w, u, v] + k * z[w, u, v] * r[w, u, v]) / s[w, u, v]
                    acc += a[u, v] * qv
                    ow[v] -= qv
                ow[u] += acc
        return out

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def slack_steps(a: Any, mask: Any, dxt: Any, r: Any, rc: Any, s: Any, z: Any, k: float) -> Any:
        """(ds, dz, min ds/s, min dz/z): ds = -(G dx + k r), dz = (rc - z ds) / s, 0 on the
        rows left out (z and rc must be 0 there; s > 0 everywhere); dxt = dx^T (m, n)."""
        m, n, _ = s.shape
        ds = np.empty((m, n, n))
        dz = np.empty((m, n, n))
        lo_s = 0.0
        lo_z = 0.0
        for w in range(m):
            xw = dxt[w]
            for u in range(n):
                xu = xw[u]
                for v in range(n):
                    mk = mask[u, v]
                    dsv = -(a[u, v] * xu - xw[v] + k * r[w, u, v]) * mk
                    sv = s[w, u, v]
                    zv = z[w, u, v]
                    dzv = (rc[w, u, v] - zv * dsv) / sv
                    ds[w, u, v] = dsv
                    dz[w, u, v] = dzv
                    lo_s = min(lo_s, dsv / sv)
                    lo_z = min(lo_z, dzv / (zv + (1.0 - mk)))
        return ds, dz, lo_s, lo_z

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def centre_target(mask: Any, s: Any, z: Any, ds: Any, dz: Any, tp: float, td: float, smu: float) -> Any:
        """Gondzio's target of the privacy rows at the trial point: with v = (s + tp ds)(z +
        td dz), max(clip(v, 0.1 smu, 10 smu) - v, -10 smu) on the kept rows, 0 elsewhere."""
        m, n, _ = s.shape
        out = np.empty((m, n, n))
        lo = 0.1 * smu
        hi = 10.0 * smu
        for w in range(m):
            for u in range(n):
                for v in range(n):
                    val = (s[w, u, v] + tp * ds[w, u, v]) * (z[w, u, v] + td * dz[w, u, v])
                    c = min(max(val, lo), hi) - val
                    out[w, u, v] = max(c, -hi) * mask[u, v]
        return out

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def combine(mask: Any, s: Any, z: Any, ds1: Any, dz1: Any, ds2: Any, dz2: Any) -> Any:
        """(ds1 + ds2, dz1 + dz2, min ds/s, min dz/z) with the minima on the kept rows
        (the steps 0 on the rows left out)."""
        m, n, _ = s.shape
        ds = np.empty((m, n, n))
        dz = np.empty((m, n, n))
        lo_s = 0.0
        lo_z = 0.0
        for w in range(m):
            for u in range(n):
                for v in range(n):
                    a1 = ds1[w, u, v] + ds2[w, u, v]
                    a2 = dz1[w, u, v] + dz2[w, u, v]
                    ds[w, u, v] = a1
                    dz[w, u, v] = a2
                    lo_s = min(lo_s, a1 / s[w, u, v])
                    lo_z = min(lo_z, a2 / (z[w, u, v] + (1.0 - mask[u, v])))
        return ds, dz, lo_s, lo_z

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def normal_blocks(a: Any, d: Any, s: Any, divide: bool, dxt: Any, reg: float, h: Any) -> Any:
        """The blocks H_w = G_w^T diag(e_w) G_w + diag(dx[:, w]) plus ``reg`` times each
        block's largest diagonal entry on its diagonal, and those largest entries, where
        e = d / s if ``divide`` (the scaling z / s read from the iterate without its cube)
        and e = d otherwise (``s`` then not read); e must be 0 on the rows left out. The
        blocks are written into ``h`` (m, n, n), a buffer the caller keeps: a cube allocated
        here (numba's allocator) costs fresh pages, several times the pass itself."""
        m, n, _ = d.shape
        big = np.zeros(m)
        diag = np.empty(n)
        for w in range(m):
            hw = h[w]
            dw = d[w]
            sw = s[w]
            for u in range(n):
                diag[u] = dxt[w, u]
            for u in range(n):
                acc = 0.0
                for v in range(n):
                    dv = dw[u, v] / sw[u, v] if divide else dw[u, v]
                    hw[u, v] = -dv * a[u, v]
                    acc += dv * a[u, v] * a[u, v]
                    diag[v] += dv
                diag[u] += acc
            for u in range(n):
                for v in range(u):
                    t = hw[u, v] + hw[v, u]
                    hw[u, v] = t
                    hw[v, u] = t
            top = 0.0
            for u in range(n):
                top = max(top, diag[u])
            for u in range(n):
                hw[u, u] += diag[u] + reg * top
            big[w] = top
        return big

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def primal_state(a: Any, mask: Any, xt: Any, s: Any, z: Any) -> Any:
        """(r, sz, max |r|, sum sz): the privacy rows' primal residual r = G x + s and
        complementarity products s z (0 on the rows left out: z is 0 there), in one pass."""
        m, n = xt.shape
        r = np.empty((m, n, n))
        sz = np.empty((m, n, n))
        top = 0.0
        total = 0.0
        for w in range(m):
            xw = xt[w]
            for u in range(n):
                xu = xw[u]
                for v in range(n):
                    sv = s[w, u, v]
                    rv = (a[u, v] * xu - xw[v] + sv) * mask[u, v]
                    pv = sv * z[w, u, v]
                    r[w, u, v] = rv
                    sz[w, u, v] = pv
                    top = max(top, abs(rv))
                    total += pv
        return r, sz, top, total

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def corrector_rhs(mask: Any, sz: Any, ds: Any, dz: Any, smu: float) -> Any:
        """Mehrotra's target of the privacy rows: (smu - s z - ds dz) on the kept rows, 0 elsewhere."""
        m, n, _ = sz.shape
        out = np.empty((m, n, n))
        for w in range(m):
            for u in range(n):
                for v in range(n):
                    out[w, u, v] = (smu - sz[w, u, v] - ds[w, u, v] * dz[w, u, v]) * mask[u, v]
        return out

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def advance(s: Any, ds: Any, z: Any, dz: Any, ap: float, ad: float) -> Any:
        """(s + ap ds, z + ad dz, sum of their products): the next iterate's privacy part."""
        m, n, _ = s.shape
        s2 = np.empty((m, n, n))
        z2 = np.empty((m, n, n))
        for w in range(m):
            for u in range(n):
                for v in range(n):
                    s2[w, u, v] = s[w, u, v] + ap * ds[w, u, v]
                    z2[w, u, v] = z[w, u, v] + ad * dz[w, u, v]
        return s2, z2

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def trial_sum(s: Any, ds: Any, z: Any, dz: Any, ap: float, ad: float) -> float:
        """sum (s + ap ds)(z + ad dz) without the trial point."""
        m, n, _ = s.shape
        acc = 0.0
        for w in range(m):
            for u in range(n):
                for v in range(n):
                    acc += (s[w, u, v] + ap * ds[w, u, v]) * (z[w, u, v] + ad * dz[w, u, v])
        return acc

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def mehrotra_rhs_gtz(a: Any, mask: Any, xt: Any, s: Any, z: Any, dsa: Any, dza: Any, smu: float,
                         corrector: bool) -> Any:
        """:func:`scaled_rhs_gtz` with k = 1 for Mehrotra's two directions, without the cubes
        r and rc: r = G x + s is recomputed from x and s, and rc is -s z (the predictor,
        ``corrector`` False; ``dsa``, ``dza`` not read) or smu - s z - dsa dza (the corrector,
        dsa and dza the predictor's steps); both 0 on the rows left out."""
        m, n, _ = z.shape
        out = np.zeros((m, n))
        for w in range(m):
            xw = xt[w]
            ow = out[w]
            for u in range(n):
                xu = xw[u]
                acc = 0.0
                for v in range(n):
                    mk = mask[u, v]
                    sv = s[w, u, v]
                    zv = z[w, u, v]
                    rv = (a[u, v] * xu - xw[v] + sv) * mk
                    pv = sv * zv
                    rc = ((smu - pv - dsa[w, u, v] * dza[w, u, v]) * mk) if corrector else -pv
                    qv = (rc + zv * rv) / sv
                    acc += a[u, v] * qv
                    ow[v] -= qv
                ow[u] += acc
        return out

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def mehrotra_steps(a: Any, mask: Any, dxt: Any, xt: Any, s: Any, z: Any, dsa: Any, dza: Any, smu: float,
                       corrector: bool, ds: Any, dz: Any) -> Any:
        """:func:`slack_steps` with k = 1 for Mehrotra's two directions (r and rc recomputed
        as in :func:`mehrotra_rhs_gtz`), with the three sums of the trial complementarity
        :func:`trial_sum` expands: (min ds/s, min dz/z, sum s dz, sum ds z, sum ds dz), with
        ds and dz written into the caller's buffers ``ds``, ``dz`` (see :func:`normal_blocks`)."""
        m, n, _ = s.shape
        lo_s = 0.0
        lo_z = 0.0
        s_dz = 0.0
        ds_z = 0.0
        ds_dz = 0.0
        for w in range(m):
            xw = xt[w]
            dw = dxt[w]
            for u in range(n):
                xu = xw[u]
                du = dw[u]
                for v in range(n):
                    mk = mask[u, v]
                    sv = s[w, u, v]
                    zv = z[w, u, v]
                    rv = (a[u, v] * xu - xw[v] + sv) * mk
                    pv = sv * zv
                    rc = ((smu - pv - dsa[w, u, v] * dza[w, u, v]) * mk) if corrector else -pv
                    dsv = -(a[u, v] * du - dw[v] + rv) * mk
                    inv = 1.0 / sv
                    dzv = (rc - zv * dsv) * inv
                    ds[w, u, v] = dsv
                    dz[w, u, v] = dzv
                    lo_s = min(lo_s, dsv * inv)
                    lo_z = min(lo_z, dzv / (zv + (1.0 - mk)))
                    s_dz += sv * dzv
                    ds_z += dsv * zv
                    ds_dz += dsv * dzv
        return lo_s, lo_z, s_dz, ds_z, ds_dz

    @njit(cache=True, nogil=True, fastmath=FASTMATH)
    def advance_state(a: Any, mask: Any, xt: Any, s: Any, ds: Any, z: Any, dz: Any, ap: float, ad: float,
                      s2: Any, z2: Any) -> Any:
        """:func:`advance` and the next iterate's :func:`primal_state` summary in one pass:
        s2 = s + ap ds, z2 = z + ad dz (the caller's buffers, see :func:`normal_blocks`) and
        (max |r|, sum s z, (G^T z)^T) at the new point, xt = the new x^T, r = G x + s (0 on
        the rows left out, where z and dz are 0)."""
        m, n, _ = s.shape
        gz = np.zeros((m, n))
        top = 0.0
        total = 0.0
        for w in range(m):
            xw = xt[w]
            gw = gz[w]
            for u in range(n):
                xu = xw[u]
                acc = 0.0
                for v in range(n):
                    mk = mask[u, v]
                    sv = s[w, u, v] + ap * ds[w, u, v]
                    zv = z[w, u, v] + ad * dz[w, u, v]
                    s2[w, u, v] = sv
                    z2[w, u, v] = zv
                    rv = (a[u, v] * xu - xw[v] + sv) * mk
                    top = max(top, abs(rv))
                    total += sv * zv
                    qv = zv * mk
                    acc += a[u, v] * qv
                    gw[v] -= qv
                gw[u] += acc
        return top, total, gz

    KERNELS = {
        "corrector_rhs": corrector_rhs,
        "advance": advance,
        "trial_sum": trial_sum,
        "centre_target": centre_target,
        "combine": combine,
        "normal_blocks": normal_blocks,
        "primal_state": primal_state,
        "gx": gx,
        "gtz": gtz,
        "hop": hop,
        "hinv": hinv,
        "scaled_rhs_gtz": scaled_rhs_gtz,
        "slack_steps": slack_steps,
        "mehrotra_rhs_gtz": mehrotra_rhs_gtz,
        "mehrotra_steps": mehrotra_steps,
        "advance_state": advance_state,
    }
