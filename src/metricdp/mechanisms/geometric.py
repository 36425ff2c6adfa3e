r"""The geometric mechanism of Alvim et al., :math:`\Pr \propto e^{-\varepsilon d(u,v)}`.

Alvim, Chatzikokolakis, Palamidessi, Pazii, *Invited Paper: Local Differential Privacy on
Metric Spaces: Optimizing the Trade-off with Utility*, CSF 2018 (the geometric
mechanism on a metric space).

On a finite space with every row normalised on its own, :math:`e^{-\varepsilon d(u,v)}/Z_u`
is **not** :math:`\varepsilon`-mDP in general: the ratio of two rows carries
:math:`Z_v / Z_u`, up to :math:`e^{\varepsilon d(u,v)}`, so the guarantee lies between
:math:`\varepsilon` and :math:`2\varepsilon`. Two exact forms are provided.

**(a) Lattice form** (``form="lattice"``; the default when the space lies on a square
lattice :math:`h\mathbb{Z}^2 + o` under the Euclidean metric, ``space.cell`` = h). In
cell units, with :math:`\alpha = \varepsilon h` and the space's bounding box of
R x C cells, the mechanism for input u (lattice point :math:`p_u`):

1. draws q on the discrete torus :math:`\mathbb{Z}_{N_0} \times \mathbb{Z}_{N_1}`,
   :math:`N_0 = R + 2T`, :math:`N_1 = C + 2T`, with
   :math:`\Pr[q] = e^{-\alpha\,\tau(q - p_u)} / Z_T`, where
   :math:`\tau(x) = \min_{k} \lVert x + (k_0 N_0, k_1 N_1) \rVert_2` is the torus
   (quotient) metric and :math:`Z_T = \sum_{x} e^{-\alpha \tau(x)}` is finite and **the
   same for every row** (translation invariance);
2. takes the representative of q in the box extended by T cells,
   :math:`[-T, R-1+T] \times [-T, C-1+T]`, clamps it to the box, and releases the point
   of the space nearest to that cell (ties broken deterministically by the exact
   Euclidean distance transform). For a full rectangular grid this is exactly the
   nearest point of the space.

*Privacy (exact).* :math:`\tau` is a metric and :math:`\tau(x) \le \lVert x \rVert_2`, so
:math:`\tau(q - p_u) \ge \tau(q - p_v) - \lVert p_u - p_v \rVert_2` and
:math:`\Pr_u[q] \le e^{\alpha \lVert p_u - p_v\rVert} \Pr_v[q] = e^{\varepsilon d(u,v)}
\Pr_v[q]`; step 2 is a deterministic function of q (post-processing). Nothing is left out
of the normaliser: every torus point is released somewhere, so there is no truncation
to account for in the privacy proof at all.

*Faithfulness (the "mass left out").* Compared with the geometric mechanism of the
infinite lattice (one normaliser Z, each release remapped the same way), every row
differs in total variation by at most

.. math::

    \tau_T = \Pr_{z}[\lVert z \rVert_\infty > T]
    \le \frac{8\, r^{T+1} (1 + T(1 - r))}{(1 + r)^2}, \qquad r = e^{-\alpha},

(couple the two through the same offset z: they release the same point whenever
:math:`\lVert z\rVert_\infty \le T`; the bound uses :math:`8m` lattice points at
Chebyshev radius m, :math:`\lVert z\rVert_2 \ge \lVert z \rVert_\infty` and
:math:`Z \ge \sum_z e^{-\alpha\lVert z\rVert_1} = ((1+r)/(1-r))^2`). T is the smallest
integer :math:`\ge 2\max(R, C)` with :math:`\tau_T \le 10^{-15}`
(:func:`lattice_truncation_radius`). Full proof: ``docs/proofs/geometric_lattice.md``.

*Computation.* The clamp makes every box cell the image of a point, a ray segment
(edge) or a product of two segments (corner) of offsets per axis, so each entry is one
of: a table value, a difference of two 1-d reverse cumulative sums, or an
inclusion-exclusion of four 2-d reverse cumulative sums, all over tables of
:math:`(R+T)(C+T)` terms built once (never per input). The subtracted terms are tails
at offsets beyond T cells, at most :math:`\max(R,C)\, e^{-\alpha (T+1)/3}` (below
:math:`10^{-5} \max(R, C)`) of the kept ones since :math:`T \ge 2\max(R,C)`, so there is
no cancellation; the
float matrix is entrywise within about :math:`10^{-13}` (relative) of the exact one,
far inside the audit's :math:`10^{-9}` relative slack for :math:`\alpha \ge 10^{-3}`, and
:func:`~metricdp.mechanisms.base.certify` audits it anyway.

**(b) Clamped form** (``form="clamped"``; the default for 1-d points on a line: the points of the space
are :math:`h r_u` for the ranks :math:`r_u = 0, \dots, n-1` of an equally spaced line, and
:math:`h\lvert r_u - r_v\rvert \le d(u, v)` up to 1e-12 relative -- ages 0..99, readings on a
fixed step). The release for u is the point of rank :math:`\min(n-1, \max(0, r_u + Z))`
with Z two-sided geometric, :math:`\Pr[Z = k] = \frac{1-\alpha}{1+\alpha}\alpha^{\lvert k
\rvert}`, :math:`\alpha = e^{-\varepsilon h}` (the truncated geometric mechanism of Ghosh,
Roughgarden and Sundararajan, STOC 2009): interior columns :math:`\frac{1-\alpha}{1+\alpha}
\alpha^{\lvert r_u - j\rvert}`, the end columns the tails :math:`\alpha^{r_u}/(1+\alpha)` and
:math:`\alpha^{n-1-r_u}/(1+\alpha)`.

*Privacy (exact).* :math:`\Pr[r_u + Z = k] \le e^{\varepsilon h \lvert r_u - r_v\rvert}
\Pr[r_v + Z = k]` for every integer k (the ratio of :math:`\alpha^{\lvert k - r_u\rvert}` and
:math:`\alpha^{\lvert k - r_v\rvert}`, triangle inequality), and the clamp is a function of
:math:`r_u + Z` (post-processing), so the mechanism is :math:`\varepsilon h\lvert r_u -
r_v\rvert \le \varepsilon d(u,v)`-private between u and v; the float matrix computes every
power as one ``exp`` (relative error a few ulps) and :func:`~metricdp.mechanisms.base.certify`
audits it.

**(c) Row-normalised form** (``form="row-normalised"``; the default on every other
space): :math:`M_p[u,v] = e^{-p\,d(u,v)}/Z_u(p)` at the largest p in
:math:`[\varepsilon/2, \varepsilon]` whose matrix passes the exact audit at
:math:`\varepsilon` (bisection, :func:`~metricdp.mechanisms.calibration.largest_passing`).
At :math:`p = \varepsilon/2` it is the exponential mechanism at :math:`\varepsilon`, which
passes, so the search always succeeds.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.ndimage import distance_transform_edt
from scipy.sparse import csr_matrix

from .._validation import check_epsilon
from ..errors import ValidationError
from ..spaces import MetricSpace, check_space
from .base import Mechanism, certify
from .calibration import largest_passing
from .exponential import _check_representable, exponential_matrix
from .registry import declared

__all__ = ["MASS_LEFT_OUT", "geometric", "lattice_tail_bound", "lattice_truncation_radius"]

#: Largest total-variation distance allowed between a row of the lattice form and the
#: infinite-lattice geometric mechanism (the "mass left out").
MASS_LEFT_OUT = 1e-15

#: Refuse (or, with form="auto", skip) the lattice form beyond this many table terms or
#: box entries: it stays a few seconds below it.
_LATTICE_WORK_LIMIT = 2e8
_CHUNK = 1 << 22  # elements per temporary
#: Lattice distances may exceed the space's by at most this (relative) before the space
#: is not treated as a lattice: the proof bounds ratios by the lattice distance.
_LATTICE_DIST_RTOL = 1e-12

Form = Literal["auto", "lattice", "clamped", "row-normalised"]


def lattice_tail_bound(alpha: float, radius: int) -> float:
    r"""Upper bound on :math:`\Pr[\lVert z \rVert_\infty > T]`, z on :math:`\mathbb{Z}^2` with
    :math:`\Pr[z] \propto e^{-\alpha \lVert z\rVert_2}`.

    .. math:: \tau_T \le \frac{8\, r^{T+1}(1 + T(1-r))}{(1+r)^2}, \qquad r = e^{-\alpha}.

    Proof in the module docstring and ``docs/proofs/geometric_lattice.md``. Evaluated in
    log space (no underflow).

    Examples
    --------
    >>> lattice_tail_bound(1.0, 40) < 1e-15
    True
    """
    alpha = check_epsilon(alpha, "alpha")
    t = float(radius)
    one_minus_r = -math.expm1(-alpha)
    log_bound = (
        math.log(8.0) - alpha * (t + 1.0) + math.log1p(t * one_minus_r) - 2.0 * math.log1p(math.exp(-alpha))
    )
    return math.exp(log_bound)


def lattice_truncation_radius(alpha: float, minimum: int = 0, mass: float = MASS_LEFT_OUT) -> int:
    """The smallest integer T >= ``minimum`` with ``lattice_tail_bound(alpha, T) <= mass``.

    The bound is strictly decreasing in T (its log has derivative
    ``-alpha + (1-r)/(1 + T(1-r)) < 0`` since ``1 - r < alpha``), so bisection finds it.
    """
    alpha = check_epsilon(alpha, "alpha")
    mass = check_epsilon(mass, "mass")  # mass <= 0 would never be reached: the loop below would not end
    lo = max(0, int(minimum))
    if lattice_tail_bound(alpha, lo) <= mass:
        return lo
    hi = max(1, lo)
    while lattice_tail_bound(alpha, hi) > mass:
        hi *= 2
        if hi > 1 << 996:  # float(T) would overflow: at such alpha no table is feasible anyway
            raise ValidationError(f"alpha = {alpha:.3g} is too small: the truncation radius exceeds 10^300")
    while hi - lo > 1:  # invariant: lo fails, hi passes
        mid = (lo + hi) // 2
        if lattice_tail_bound(alpha, mid) <= mass:
            hi = mid
        else:
            lo = mid
    return hi


def _lattice_coordinates(space: MetricSpace) -> NDArray[np.int64] | None:
    """Integer cell coordinates (origin at the bounding box corner), or None if not a lattice.

    The lattice distance h * ||k_u - k_v|| must not exceed the space's distance by more
    than ``_LATTICE_DIST_RTOL`` (relative): the privacy proof bounds ratios by it.
    """
    pts = space.points
    if space.cell is None or pts is None or space.metric != "euclidean" or pts.shape[1] != 2:
        return None
    h = float(space.cell)
    rel = (pts - pts.min(axis=0)) / h
    k = np.rint(rel).astype(np.int64)
    diff = (k[:, None, :] - k[None, :, :]).astype(np.float64)
    d_lat = h * np.hypot(diff[..., 0], diff[..., 1])
    if np.any(d_lat > space.distances * (1 + _LATTICE_DIST_RTOL)):
        return None
    return k


def _axis_terms(size: int, radius: int) -> tuple[NDArray[np.bool_], NDArray[np.int64], NDArray[np.int64]]:
    """Per axis, for input coordinate a and box coordinate x (both in [0, size)): the
    offsets t = |i - a| over the representatives i that clamp to x.

    Returns ``(window, start, end)`` arrays of shape (size, size): a single offset
    ``start`` (interior x) or the segment [start, end] = [start, start + T] (x on an
    edge). For size 1 the only cell collects i in [-T, T]: the segment [0, T] with the
    offsets t >= 1 counted twice (folded into the tables by ``_multiplicity``).
    """
    a = np.arange(size)[:, None]
    x = np.arange(size)[None, :]
    if size == 1:
        window = np.ones((1, 1), dtype=bool)
        start = np.zeros((1, 1), dtype=np.int64)
    else:
        low = np.broadcast_to(x == 0, (size, size))
        high = np.broadcast_to(x == size - 1, (size, size))
        start = np.where(low, a, np.where(high, size - 1 - a, np.abs(x - a))).astype(np.int64)
        window = low | high
    end = np.where(window, start + radius, start)
    return window, start, end


def _multiplicity(size: int, length: int) -> NDArray[np.float64]:
    out = np.ones(length)
    if size == 1:
        out[1:] = 2.0  # i and -i clamp to the same (only) cell
    return out


def _torus_tau(size: int, radius: int, length: int) -> NDArray[np.float64]:
    """Torus distance min(t, N - t) of offsets t in [0, length), N = size + 2 T."""
    t = np.arange(length)
    return np.minimum(t, size + 2 * radius - t).astype(np.float64)


def _kernel(alpha: float, rows: NDArray[np.float64], cols: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.exp(-alpha * np.hypot(rows[:, None], cols[None, :]))


def _torus_normaliser(alpha: float, size0: int, size1: int, radius: int) -> float:
    """Z_T: the sum of exp(-alpha tau(x)) over the whole torus, by torus-distance classes."""

    def classes(size: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        n_per = size + 2 * radius
        tau = np.arange(n_per // 2 + 1, dtype=np.float64)
        mult = np.full(len(tau), 2.0)
        mult[0] = 1.0
        if n_per % 2 == 0:
            mult[-1] = 1.0
        return tau, mult

    tau0, m0 = classes(size0)
    tau1, m1 = classes(size1)
    step = max(1, _CHUNK // len(tau1))
    parts = [
        float((_kernel(alpha, tau0[i : i + step], tau1) * m0[i : i + step, None] * m1[None, :]).sum())
        for i in range(0, len(tau0), step)
    ]
    return math.fsum(parts)


def _nearest_point_of_cells(k: NDArray[np.int64], size0: int, size1: int) -> NDArray[np.int64]:
    """For every cell of the size0 x size1 box (row-major), the index of a nearest point.

    Exact Euclidean distance transform (scipy.ndimage); ties go to whichever point it
    returns, a deterministic function of the cell (all the privacy proof needs: the
    remap is post-processing). The identity on a full grid.
    """
    cells = size0 * size1
    space_of_cell = np.full(cells, -1, dtype=np.int64)
    space_of_cell[k[:, 0] * size1 + k[:, 1]] = np.arange(len(k))
    if len(k) == cells:
        return space_of_cell
    empty = np.ones((size0, size1), dtype=bool)
    empty[k[:, 0], k[:, 1]] = False
    idx = distance_transform_edt(empty, return_distances=False, return_indices=True)
    return space_of_cell[(idx[0] * size1 + idx[1]).ravel()]


def _lattice_matrix(k: NDArray[np.int64], alpha: float, radius: int) -> NDArray[np.float64]:
    """The lattice form's matrix for the space with cell coordinates ``k`` (see module doc)."""
    n = len(k)
    size0, size1 = int(k[:, 0].max()) + 1, int(k[:, 1].max()) + 1
    T = radius
    len0, len1 = size0 + T, size1 + T
    tau0, tau1 = _torus_tau(size0, T, len0), _torus_tau(size1, T, len1)
    mult0, mult1 = _multiplicity(size0, len0), _multiplicity(size1, len1)

    # Point x window: 1-d reverse cumulative sums along the window's axis (zero row appended).
    f0 = _kernel(alpha, tau0, tau1[:size1]) * mult0[:, None] * mult1[None, :size1]  # (len0, size1)
    point = f0[:size0]
    rev0 = np.zeros((len0 + 1, size1))
    rev0[:-1] = np.cumsum(f0[::-1], axis=0)[::-1]
    f1 = _kernel(alpha, tau0[:size0], tau1) * mult0[:size0, None] * mult1[None, :]  # (size0, len1)
    rev1 = np.zeros((size0, len1 + 1))
    rev1[:, :-1] = np.cumsum(f1[:, ::-1], axis=1)[:, ::-1]

    # Window x window (corners): 2-d reverse cumulative sums, kept only at the indices
    # used (segment starts < size, segment ends + 1 in [T + 1, size + T]); streamed by
    # row chunks so memory stays O(chunk * len1).
    keep0 = np.r_[np.arange(size0), np.arange(T + 1, len0 + 1)]
    keep1 = np.r_[np.arange(size1), np.arange(T + 1, len1 + 1)]
    pos0 = np.full(len0 + 1, -1, dtype=np.int64)
    pos0[keep0] = np.arange(len(keep0))
    pos1 = np.full(len1 + 1, -1, dtype=np.int64)
    pos1[keep1] = np.arange(len(keep1))
    row_tail = np.zeros((len0 + 1, len(keep1)))
    step = max(1, _CHUNK // len1)
    for i in range(0, len0, step):
        block = _kernel(alpha, tau0[i : i + step], tau1) * mult0[i : i + step, None] * mult1[None, :]
        tail = np.zeros((block.shape[0], len1 + 1))
        tail[:, :-1] = np.cumsum(block[:, ::-1], axis=1)[:, ::-1]
        row_tail[i : i + len(block)] = tail[:, keep1]
    rr_full = np.zeros_like(row_tail)
    rr_full[:-1] = np.cumsum(row_tail[:-1][::-1], axis=0)[::-1]
    rr = rr_full[keep0]

    z_torus = _torus_normaliser(alpha, size0, size1, T)
    win0, start0, end0 = _axis_terms(size0, T)
    win1, start1, end1 = _axis_terms(size1, T)

    cells = size0 * size1
    nearest = _nearest_point_of_cells(k, size0, size1)
    remap = csr_matrix((np.ones(cells), (nearest, np.arange(cells))), shape=(n, cells))

    xs, ys = np.divmod(np.arange(cells), size1)
    out = np.empty((n, n))
    rows_per = max(1, _CHUNK // cells)
    for lo in range(0, n, rows_per):
        a = k[lo : lo + rows_per, 0][:, None]
        b = k[lo : lo + rows_per, 1][:, None]
        w0, s0, e0 = win0[a, xs], start0[a, xs], end0[a, xs]
        w1, s1, e1 = win1[b, ys], start1[b, ys], end1[b, ys]
        block = np.empty(w0.shape)
        sel = ~w0 & ~w1
        block[sel] = point[s0[sel], s1[sel]]
        sel = w0 & ~w1
        block[sel] = rev0[s0[sel], s1[sel]] - rev0[e0[sel] + 1, s1[sel]]
        sel = ~w0 & w1
        block[sel] = rev1[s0[sel], s1[sel]] - rev1[s0[sel], e1[sel] + 1]
        sel = w0 & w1
        i0, j0 = pos0[s0[sel]], pos0[e0[sel] + 1]
        i1, j1 = pos1[s1[sel]], pos1[e1[sel] + 1]
        block[sel] = rr[i0, i1] - rr[j0, i1] - rr[i0, j1] + rr[j0, j1]
        out[lo : lo + rows_per] = np.asarray(remap @ block.T).T
    # One normaliser for every row (the torus is translation invariant); each row of the
    # unnormalised matrix sums to z_torus mathematically, so rows sum to 1 up to rounding.
    return out / z_torus


def _line_ranks(space: MetricSpace) -> tuple[NDArray[np.int64], float] | None:
    """(ranks 0..n-1, step h) when the space is an equally spaced line (module docstring, (b)), else None.

    From the distances alone: the point farthest from point 0 is an end of a line; ranks
    are its distances in steps of the smallest positive distance. The line's distance
    ``h |r_u - r_v|`` may exceed the space's by at most ``_LATTICE_DIST_RTOL`` (relative):
    the privacy proof bounds ratios by it.
    """
    d = space.distances
    n = space.n
    positive = d[d > 0]
    if n < 2 or positive.size == 0:
        return None
    h = float(positive.min())
    end = int(np.argmax(d[0]))
    steps = d[end] / h
    r = np.rint(steps).astype(np.int64)
    if not np.array_equal(np.sort(r), np.arange(n)):
        return None
    line = h * np.abs(r[:, None] - r[None, :]).astype(np.float64)
    if np.any(line > d * (1 + _LATTICE_DIST_RTOL)):
        return None
    return r, h


def _clamped_matrix(ranks: NDArray[np.int64], alpha_log: float) -> NDArray[np.float64]:
    """The clamped two-sided geometric matrix on ranks (module docstring, (b)); ``alpha_log`` = eps h."""
    n = len(ranks)
    j = np.arange(n)
    gap = np.abs(ranks[:, None] - j[None, :]).astype(np.float64)
    a = math.exp(-alpha_log)
    body = -math.expm1(-alpha_log) / (1.0 + a)  # (1 - alpha) / (1 + alpha), without cancellation
    out = body * np.exp(-alpha_log * gap)
    out[:, 0] = np.exp(-alpha_log * ranks) / (1.0 + a)
    out[:, n - 1] = np.exp(-alpha_log * (n - 1 - ranks)) / (1.0 + a)
    # columns are in rank order; put them back in the space's order
    return out[:, ranks]


def _row_normalised(distances: NDArray[np.float64], parameter: float) -> NDArray[np.float64]:
    """exp(-p d(u,v)) / Z_u(p): the exponential mechanism at inner parameter 2p."""
    return exponential_matrix(distances, 2.0 * parameter)


@declared("geometric")
def geometric(space: MetricSpace, epsilon: float, *, form: Form = "auto") -> Mechanism:
    r"""The geometric mechanism, exactly :math:`\varepsilon`-mDP.

    Alvim et al., CSF 2018: :math:`\Pr \propto e^{-\varepsilon d(u,v)}`. See the module
    docstring for both forms and their proofs.

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
        The mDP guarantee, > 0.
    form : {"auto", "lattice", "clamped", "row-normalised"}, optional
        ``auto`` (default) uses the lattice form when the space lies on a square lattice in
        the Euclidean plane (``space.cell`` is set) and the tables stay small
        (:math:`(R+T)(C+T)` and :math:`n R C` at most 2e8), else the clamped form when the
        points are 1-d and equally spaced (ages, readings on a step), else the
        row-normalised form. ``clamped`` also takes a line given by its distances.

    Returns
    -------
    Mechanism
        Named ``geometric``. ``params``: ``form``, ``parameter`` (the geometric parameter
        actually used: :math:`\varepsilon` for the lattice form, the calibrated p for the
        row-normalised one) and, for the lattice form, ``cell``, ``truncation_radius``
        (T, in cells), ``mass_left_out`` (the bound :math:`\tau_T`), ``lattice_box``
        ([R, C]) and ``torus_period`` ([R + 2T, C + 2T]).

    Raises
    ------
    ValidationError
        Bad ``epsilon`` or ``form``, ``form="lattice"`` on a space that is not a lattice
        (or whose tables would be too large), or probabilities that underflow float64.

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> m = geometric(MetricSpace.grid(3, 3, cell=150.0), 0.004)
    >>> m.params["form"], m.params["truncation_radius"], m.audit().epsilon <= 0.004 * (1 + 1e-9)
    ('lattice', 65, True)
    """
    epsilon = check_epsilon(epsilon)
    space = check_space(space)
    params: dict[str, Any] = {}
    info: dict[str, Any] = {}
    if form in ("auto", "lattice"):
        k = _lattice_coordinates(space)
        reason = None
        if k is None:
            reason = "the space is not a subset of a square lattice in the Euclidean plane"
        else:
            assert space.cell is not None  # _lattice_coordinates returned a lattice
            h = float(space.cell)
            alpha = epsilon * h
            size0, size1 = int(k[:, 0].max()) + 1, int(k[:, 1].max()) + 1
            try:
                radius = lattice_truncation_radius(alpha, minimum=2 * max(size0, size1))
            except ValidationError as ex:
                radius, reason = 0, f"epsilon * cell = {alpha:.3g}: {ex}"
            work = max((size0 + radius) * (size1 + radius), space.n * size0 * size1)
            if reason is None and work > _LATTICE_WORK_LIMIT:
                # radius is an exact int that can overflow a float at tiny alpha
                terms = f"{work:.3g}" if work < 1e300 else f"about 10^{len(str(work)) - 1}"
                reason = (
                    f"the lattice tables would need {terms} terms (epsilon * cell = {alpha:.3g}, "
                    f"truncation radius {radius} cells, box {size0} x {size1}), "
                    f"over {_LATTICE_WORK_LIMIT:.0e}"
                )
        if reason is not None:
            if form == "lattice":
                raise ValidationError(f"geometric form='lattice' is not available: {reason}")
            info["lattice_form_skipped"] = reason
        else:
            matrix = _lattice_matrix(k, alpha, radius)  # type: ignore[arg-type]
            params.update(
                form="lattice",
                parameter=epsilon,
                cell=h,
                truncation_radius=radius,
                mass_left_out=lattice_tail_bound(alpha, radius),
                lattice_box=[size0, size1],
                torus_period=[size0 + 2 * radius, size1 + 2 * radius],
            )
            _check_representable(matrix, "geometric", epsilon)
            return certify(matrix, space, epsilon, "geometric", params, info)

    one_d = space.points is not None and space.points.shape[1] == 1
    if form == "clamped" or (form == "auto" and one_d):
        line = _line_ranks(space)
        if line is not None:
            ranks, h = line
            matrix = _clamped_matrix(ranks, epsilon * h)
            params.update(form="clamped", parameter=epsilon, step=h)
            _check_representable(matrix, "geometric", epsilon)
            return certify(matrix, space, epsilon, "geometric", params, info)
        if form == "clamped":
            raise ValidationError("geometric form='clamped' needs an equally spaced line (points h*0, h*1, ...)")
    d = space.distances
    # p = epsilon/2 is the exponential mechanism at epsilon: refuse it clearly if it underflows.
    _check_representable(_row_normalised(d, epsilon / 2), "geometric", epsilon)
    cal = largest_passing(lambda p: _row_normalised(d, p), d, epsilon, epsilon / 2, epsilon)
    params.update(form="row-normalised", parameter=cal.parameter)
    info["calibration"] = {
        "parameter": cal.parameter,
        "bracket": [epsilon / 2, epsilon],
        "iterations": cal.iterations,
        "epsilon_audit": cal.epsilon_audit,
    }
    return certify(cal.matrix, space, epsilon, "geometric", params, info)
