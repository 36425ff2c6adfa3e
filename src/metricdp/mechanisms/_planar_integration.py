r"""Numerical integration of the planar Laplace over cells: the masses behind the discretised mechanism.

:func:`metricdp.mechanisms.planar_laplace.planar_laplace` integrates the planar Laplace
density over the cells of a grid through translation invariance: the plane seen from an
input is cut into bounded atoms (:func:`_axis_atoms`), each atom rectangle is integrated
once in polar form (:func:`_region_masses`) and every cell region, seen from every input,
is a sum of atoms (:func:`_axis_intervals`, :func:`_interval_masses`). Proof and accuracy:
``docs/proofs/planar_laplace.md``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError

_TWO_PI = 2.0 * math.pi
_AXES = np.array([0.0, 0.5 * math.pi, math.pi, 1.5 * math.pi])
_MAX_NODES = 256  # Gauss-Legendre nodes per angular piece, at most
#: Accuracy below which the integration is refused. The floor of the rule is about 1e-14
#: for 1e-3 <= eps * cell <= 20 and 1e-11 at eps * cell = 1e-6, where rounding in the
#: angles of thin far-away atoms dominates; the reached accuracy sets eta.
_WORST_ACCURACY = 1e-9
_REGION_CHUNK = 512  # regions integrated together: (chunk, 8, nodes) temporaries


_SERIES = 1.0 / np.arange(2, 34)  # coefficients of x - log1p(x) = sum_k (-1)^k x^k / k


def _minus_log_survival(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """g(x) = x - log1p(x) = -log((1 + x) e^{-x}), accurate for small x (inf at inf).

    For x < 1/4 the alternating series (32 terms: truncation < 1e-18 relative) avoids
    the cancellation of ``x - log1p(x)``, which would cost all relative accuracy of a
    cell mass when eps * cell is small.
    """
    with np.errstate(invalid="ignore"):
        out = np.where(np.isinf(x), np.inf, x - np.log1p(x))
    small = np.flatnonzero(x < 0.25)
    xs = np.take(x, small)
    acc = np.zeros_like(xs)
    for coef in _SERIES[::-1]:  # Horner on x^2 (1/2 - x (1/3 - x (1/4 - ...)))
        acc = coef - xs * acc
    np.put(out, small, xs * xs * acc)
    return out


def _region_masses(
    lo_x: NDArray, hi_x: NDArray, lo_y: NDArray, hi_y: NDArray, s: float, nodes: int
) -> NDArray[np.float64]:
    r"""Mass of axis-parallel rectangles (bounds may be infinite) under the planar Laplace
    of rate ``s`` centred at the origin, which is never on a rectangle's boundary.

    Polar form: :math:`\frac{1}{2\pi}\int_0^{2\pi} [S(t_{in}(\theta)) - S(t_{out}(\theta))]\,d\theta`
    with the radial survival :math:`S(t) = (1 + s t) e^{-s t}` and the ray's entry and exit
    parameters from the slab method (:math:`t_{in} = 0` when the origin is inside). The
    integrand is smooth between the angles of the finite corners and the four axis
    directions (where an exit or entry switches side or goes to infinity), so the
    circle is cut at those 8 angles and each piece gets ``nodes`` Gauss-Legendre nodes.
    The difference is formed as :math:`S(t_{in})(1 - e^{g(s t_{in}) - g(s t_{out})})` with
    ``expm1`` and :math:`g = -\log S` from :func:`_minus_log_survival`, so tiny masses
    (far away, or near the centre when eps * cell is small) keep their relative accuracy.
    """
    gx, gw = np.polynomial.legendre.leggauss(nodes)
    out = np.empty(len(lo_x))
    for start in range(0, len(lo_x), _REGION_CHUNK):
        sl = slice(start, start + _REGION_CHUNK)
        x0, x1, y0, y1 = lo_x[sl], hi_x[sl], lo_y[sl], hi_y[sl]
        cx = np.stack([x0, x1, x0, x1], axis=1)
        cy = np.stack([y0, y0, y1, y1], axis=1)
        finite = np.isfinite(cx) & np.isfinite(cy)
        with np.errstate(invalid="ignore"):
            corner = np.mod(np.arctan2(cy, cx), _TWO_PI)
        corner = np.where(finite, corner, 0.0)  # an infinite corner adds no angle beyond the axes
        cuts = np.sort(np.concatenate([corner, np.broadcast_to(_AXES, (len(x0), 4))], axis=1), axis=1)
        a = cuts
        b = np.concatenate([cuts[:, 1:], cuts[:, :1] + _TWO_PI], axis=1)
        half = (b - a) / 2.0
        theta = ((a + b) / 2.0)[:, :, None] + half[:, :, None] * gx  # (m, 8, nodes)
        weight = half[:, :, None] * gw
        c, sn = np.cos(theta), np.sin(theta)
        with np.errstate(divide="ignore", invalid="ignore"):
            tx0, tx1 = x0[:, None, None] / c, x1[:, None, None] / c
            ty0, ty1 = y0[:, None, None] / sn, y1[:, None, None] / sn
        t_in = np.maximum(np.maximum(np.minimum(tx0, tx1), np.minimum(ty0, ty1)), 0.0)
        t_out = np.minimum(np.maximum(tx0, tx1), np.maximum(ty0, ty1))
        hit = t_out > t_in
        g_in = _minus_log_survival(s * np.where(hit, t_in, 0.0))
        g_out = _minus_log_survival(s * np.where(hit, t_out, 1.0))
        with np.errstate(invalid="ignore"):
            val = np.exp(-g_in) * -np.expm1(g_in - g_out)
        val = np.where(hit, val, 0.0)
        out[sl] = (val * weight).sum(axis=(1, 2)) / _TWO_PI
    return out


def _axis_atoms(size: int, s: float, reach: float) -> tuple[NDArray, NDArray]:
    """A partition of the line (in cells, relative to an input) into bounded atoms.

    Unit atoms [k - 1/2, k + 1/2] for |k| < size, then on each side tail atoms whose
    length doubles up to ``max(1, 4 / s)`` (so the density varies by at most e^{-4 sqrt 2}
    across an atom and a fixed Gauss-Legendre rule stays accurate) until ``reach``.
    """
    lengths = []
    total, length, cap = 0.0, 1.0, max(1.0, 4.0 / s)
    while size - 0.5 + total < reach:
        lengths.append(length)
        total += length
        length = min(2.0 * length, cap)
    edges = size - 0.5 + np.concatenate([[0.0], np.cumsum(lengths)])
    pos_lo, pos_hi = edges[:-1], edges[1:]
    k = np.arange(-(size - 1), size, dtype=np.float64)
    lo = np.concatenate([-pos_hi[::-1], k - 0.5, pos_lo])
    hi = np.concatenate([-pos_lo[::-1], k + 0.5, pos_hi])
    return lo, hi


def _axis_intervals(size: int, atom_lo: NDArray, atom_hi: NDArray) -> tuple[NDArray, NDArray[np.intp]]:
    """Which atoms make up each cell interval seen from each input coordinate.

    Cell r seen from input i spans [r - i - 1/2, r - i + 1/2], extended to -inf for the
    first and +inf for the last cell (outside the grid a release is snapped to the
    nearest cell; beyond the atoms' reach the mass is below 1e-26 of any cell's and is
    dropped, then restored by the normalisation). Returns the (intervals, atoms)
    indicator of the unique intervals and, for every (i, r), the index of its interval.
    """
    i, r = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    lo = np.where(r == 0, -np.inf, r - i - 0.5)
    hi = np.where(r == size - 1, np.inf, r - i + 0.5)
    pairs, index = np.unique(np.stack([lo.ravel(), hi.ravel()], axis=1), axis=0, return_inverse=True)
    member = (atom_lo[None, :] >= pairs[:, :1]) & (atom_hi[None, :] <= pairs[:, 1:])
    return member.astype(np.float64), index.reshape(size, size)


def _interval_masses(
    x_atoms: tuple[NDArray, NDArray],
    y_atoms: tuple[NDArray, NDArray],
    x_member: NDArray,
    y_member: NDArray,
    s: float,
    accuracy: float,
) -> tuple[NDArray[np.float64], float, int]:
    """Mass of every (y interval) x (x interval) region, as sums of atom rectangles.

    The Gauss-Legendre nodes are doubled until the relative change of every region
    mass between ``nodes`` and ``2 nodes`` is at most ``accuracy``. Region masses are
    sums of positive atom masses (matrix products of indicators, no differences), so
    they keep the atoms' relative accuracy.
    """
    # The atoms are symmetric about 0 (atom i mirrors atom len - 1 - i) and so is the
    # density: integrate the quadrant of atoms with centre <= 0 and mirror (4x fewer).
    nx, ny = len(x_atoms[0]), len(y_atoms[0])
    hx, hy = (nx + 1) // 2, (ny + 1) // 2
    xl, xh = (np.repeat(a[:hx], hy) for a in x_atoms)
    yl, yh = (np.tile(a[:hy], hx) for a in y_atoms)
    fold_x = np.minimum(np.arange(nx), nx - 1 - np.arange(nx))
    fold_y = np.minimum(np.arange(ny), ny - 1 - np.arange(ny))

    def regions(nodes: int) -> NDArray[np.float64]:
        quadrant = _region_masses(xl, xh, yl, yh, s, nodes).reshape(hx, hy)
        atoms = quadrant[fold_x[:, None], fold_y[None, :]]
        return y_member @ atoms.T @ x_member.T

    nodes = 16
    coarse = regions(nodes)
    while True:
        fine = regions(2 * nodes)
        if not np.all(fine > np.finfo(np.float64).tiny):
            raise ValidationError(
                f"epsilon * cell = {s:.4g} with a grid this large: a cell mass underflows float64; "
                "use a smaller epsilon or fewer cells"
            )
        err = float(np.max(np.abs(fine - coarse) / fine))
        if err <= accuracy or 2 * nodes >= _MAX_NODES:
            break
        nodes, coarse = 2 * nodes, fine
    if err > _WORST_ACCURACY:
        raise ValidationError(
            f"planar-laplace: numerical integration reached only {err:.2g} relative accuracy "
            f"with {2 * nodes} nodes per piece at epsilon * cell = {s:.4g}; change epsilon or the cell size"
        )
    return fine, err, 2 * nodes
