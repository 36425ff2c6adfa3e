r"""Compiled passes of the structured interior-point method (numba, the optional ``fast`` extra).

Each kernel computes, in one pass over the (m, n, n) cubes of :mod:`.ipm`, what the
numpy code there computes in several (which stays the reference the tests compare them
with, and runs when numba is missing: ``KERNELS`` is None):

* :func:`gx` -- :meth:`.ipm._LP.gx`: :math:`(Gx)[w,u,v] = a_{uv} x[u,w] - x[v,w]` on the
  kept rows, 0 elsewhere;
* :func:`gtz` -- :meth:`.ipm._LP.gtz`: :math:`(G^\top q)[u,w] = \sum_v a_{uv} q[w,u,v] -
  \sum_{u'} q[w,u',u]`;
* :func:`hop` -- :meth:`.ipm._Factor.hop`: :math:`G^\top (D \circ Gx) + D_x \circ x`
  without the cube :math:`Gx` (each row's value is used at once, twice);
* :func:`hinv` -- :meth:`.ipm._Factor.hinv`: :math:`C_w^\top (C_w f_w)` per block for the
  lower triangular :math:`C_w`, skipping the zero triangle (half the flops of the dense
  batched product);
* :func:`scaled_rhs_gtz` -- :math:`G^\top ((k\,z \circ r + r_c) / s)` of
  :func:`.ipm._direction` without the cube it divides;
* :func:`centre_target`, :func:`combine` -- Gondzio's corrector of :func:`.ipm._gondzio`
  (its target on the privacy rows; the sum of two steps with its ratio tests);
* :func:`normal_blocks` -- the blocks :math:`H_w` of :class:`.ipm._Factor` with their
  regularisation;
* :func:`slack_steps` -- :math:`ds = -(G\,dx + k\,r)`, :math:`dz = (r_c - z \circ ds)/s`
  and the two ratio tests :math:`\min(ds/s)`, :math:`\min(dz/z)` in one pass.

The kernels do the same float operations as numpy up to the order of the sums (a kernel
adds along v in index order, numpy's einsum pairwise): the iterates differ by rounding
only, which the method's tolerances absorb, and nothing exact depends on them (the
simplex finish, the repair and the audit do).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["KERNELS"]

KERNELS: Any = None

njit: Any
try:  # pragma: no cover - exercised when numba is installed
    import numba

    def njit(**options: Any) -> Any:
        def wrap(fn: Any) -> Any:
            try:
                return numba.njit(**options)(fn)
            except RuntimeError:  # no cache locator
                return numba.njit(**{**options, "cache": False})(fn)

        return wrap

except ImportError:  # pragma: no cover
    njit = None


if njit is not None:  # pragma: no branch

    @njit(cache=True, nogil=True)
    def gx(a: Any, keep: Any, x: Any) -> Any:
        """(G x)[w, u, v] for x (n, m); 0 on the rows left out."""
        n, m = x.shape
        out = np.zeros((m, n, n))
        for w in range(m):
            for u in range(n):
                xu = x[u, w]
                for v in range(n):
                    if keep[u, v]:
                        out[w, u, v] = a[u, v] * xu - x[v, w]
        return out

    @njit(cache=True, nogil=True)
    def gtz(a: Any, keep: Any, q: Any) -> Any:
        """(G^T q)[u, w] for q (m, n, n) (rows left out ignored)."""
        m, n, _ = q.shape
        out = np.zeros((n, m))
        for w in range(m):
            for u in range(n):
                acc = 0.0
                for v in range(n):
                    if keep[u, v]:
                        qv = q[w, u, v]
                        acc += a[u, v] * qv
                        out[v, w] -= qv
                out[u, w] += acc
        return out

    @njit(cache=True, nogil=True)
    def hop(a: Any, keep: Any, d: Any, dx: Any, x: Any) -> Any:
        """G^T (d * G x) + dx * x, (n, m)."""
        n, m = x.shape
        out = np.zeros((n, m))
        for w in range(m):
            for u in range(n):
                xu = x[u, w]
                acc = 0.0
                for v in range(n):
                    if keep[u, v]:
                        q = d[w, u, v] * (a[u, v] * xu - x[v, w])
                        acc += a[u, v] * q
                        out[v, w] -= q
                out[u, w] += acc + dx[u, w] * xu
        return out

    @njit(cache=True, nogil=True)
    def hinv(cinv: Any, f: Any) -> Any:
        """C_w^T C_w f[:, w] per block w, C_w lower triangular; (n, m)."""
        n, m = f.shape
        out = np.zeros((n, m))
        t = np.empty(n)
        for w in range(m):
            c = cinv[w]
            for i in range(n):
                acc = 0.0
                for j in range(i + 1):
                    acc += c[i, j] * f[j, w]
                t[i] = acc
            for i in range(n):
                ti = t[i]
                for j in range(i + 1):
                    out[j, w] += c[i, j] * ti
        return out

    @njit(cache=True, nogil=True)
    def scaled_rhs_gtz(a: Any, keep: Any, z: Any, r: Any, rc: Any, s: Any, k: float) -> Any:
        """G^T ((k z r + rc) / s), (n, m); k = 0 reads no r (a corrector)."""
        m, n, _ = z.shape
        out = np.zeros((n, m))
        for w in range(m):
            for u in range(n):
                acc = 0.0
                for v in range(n):
                    if keep[u, v]:
                        num = rc[w, u, v]
                        if k != 0.0:
                            num += z[w, u, v] * r[w, u, v]
                        qv = num / s[w, u, v]
                        acc += a[u, v] * qv
                        out[v, w] -= qv
                out[u, w] += acc
        return out

    @njit(cache=True, nogil=True)
    def slack_steps(a: Any, keep: Any, dx: Any, r: Any, rc: Any, s: Any, z: Any, k: float) -> Any:
        """(ds, dz, min ds/s, min dz/z) on the kept rows (0 elsewhere; minima at most 0
        when no kept row, never read then)."""
        m, n, _ = s.shape
        ds = np.zeros((m, n, n))
        dz = np.zeros((m, n, n))
        lo_s = 0.0
        lo_z = 0.0
        for w in range(m):
            for u in range(n):
                xu = dx[u, w]
                for v in range(n):
                    if keep[u, v]:
                        g = a[u, v] * xu - dx[v, w]
                        if k != 0.0:
                            g += r[w, u, v]
                        dsv = -g
                        sv = s[w, u, v]
                        zv = z[w, u, v]
                        dzv = (rc[w, u, v] - zv * dsv) / sv
                        ds[w, u, v] = dsv
                        dz[w, u, v] = dzv
                        q = dsv / sv
                        if q < lo_s:
                            lo_s = q
                        q = dzv / zv
                        if q < lo_z:
                            lo_z = q
        return ds, dz, lo_s, lo_z

    @njit(cache=True, nogil=True)
    def centre_target(keep: Any, s: Any, z: Any, ds: Any, dz: Any, tp: float, td: float, smu: float) -> Any:
        """Gondzio's target of the privacy rows at the trial point: with v = (s + tp ds)(z +
        td dz), max(clip(v, 0.1 smu, 10 smu) - v, -10 smu) on the kept rows, 0 elsewhere."""
        m, n, _ = s.shape
        out = np.zeros((m, n, n))
        lo = 0.1 * smu
        hi = 10.0 * smu
        for w in range(m):
            for u in range(n):
                for v in range(n):
                    if keep[u, v]:
                        val = (s[w, u, v] + tp * ds[w, u, v]) * (z[w, u, v] + td * dz[w, u, v])
                        c = min(max(val, lo), hi) - val
                        out[w, u, v] = max(c, -hi)
        return out

    @njit(cache=True, nogil=True)
    def combine(keep: Any, s: Any, z: Any, ds1: Any, dz1: Any, ds2: Any, dz2: Any) -> Any:
        """(ds1 + ds2, dz1 + dz2, min ds/s, min dz/z) with the minima on the kept rows."""
        m, n, _ = s.shape
        ds = ds1 + ds2
        dz = dz1 + dz2
        lo_s = 0.0
        lo_z = 0.0
        for w in range(m):
            for u in range(n):
                for v in range(n):
                    if keep[u, v]:
                        q = ds[w, u, v] / s[w, u, v]
                        if q < lo_s:
                            lo_s = q
                        q = dz[w, u, v] / z[w, u, v]
                        if q < lo_z:
                            lo_z = q
        return ds, dz, lo_s, lo_z

    @njit(cache=True, nogil=True)
    def normal_blocks(a: Any, keep: Any, d: Any, dx: Any, reg: float) -> Any:
        """The blocks H_w = G_w^T diag(d_w) G_w + diag(dx[:, w]) plus ``reg`` times each
        block's largest diagonal entry on its diagonal, and those largest entries."""
        m, n, _ = d.shape
        h = np.zeros((m, n, n))
        big = np.zeros(m)
        diag = np.empty(n)
        for w in range(m):
            for u in range(n):
                diag[u] = dx[u, w]
            for u in range(n):
                for v in range(n):
                    if keep[u, v]:
                        dv = d[w, u, v]
                        av = a[u, v]
                        da = dv * av
                        h[w, u, v] -= da
                        h[w, v, u] -= da
                        diag[u] += da * av
                        diag[v] += dv
            top = 0.0
            for u in range(n):
                if diag[u] > top:
                    top = diag[u]
            for u in range(n):
                h[w, u, u] += diag[u] + reg * top
            big[w] = top
        return h, big

    KERNELS = {
        "centre_target": centre_target,
        "combine": combine,
        "normal_blocks": normal_blocks,
        "gx": gx,
        "gtz": gtz,
        "hop": hop,
        "hinv": hinv,
        "scaled_rhs_gtz": scaled_rhs_gtz,
        "slack_steps": slack_steps,
    }
