r"""Structured privacy audits: an exact upper bound of a matrix's mDP level in O(n^2) work.

The independent audit of :mod:`metricdp.audit` costs :math:`n^3` (every pair u, v against
every output w) and, for mechanisms whose every pair sits near the level (the planar
Laplace, the exponential mechanism), it cannot prune: thousands of cells take hours. When
a matrix has structure, a proof can replace the scan; each function here *reads the
matrix* (never trusts the builder) and returns an upper bound of the level that
:func:`metricdp.audit.audit` would return with ``normalize=True`` (the rows divided by
their exact sums, what the exact sampler draws). The proofs are in
``docs/proofs/structured_audit.md``.

* :func:`lattice_chain_audit` -- a matrix whose rows are rows of a larger positive matrix
  indexed by the points of a full rectangle of a square lattice (the discretised planar
  Laplace seen from every box cell). Per-pair log-ratios obey the triangle inequality,
  so checking the pairs one lattice step apart, for the primitive steps of max-norm at
  most ``order``, bounds every pair through a path of such steps.
* :func:`postprocessing_audit` -- a matrix that is a regrouping of the columns of an
  already audited one (a deterministic remap: M R), checked entry by entry.
* :func:`kernel_audit` -- the exponential kernel :math:`e^{-\varepsilon' d(u,w)/2}/Z_u`
  on a metric by construction (coordinates under haversine, Euclidean or Manhattan),
  checked entry by entry against the kernel.

Every bound includes the rounding of its own float computation (stated per function), so
a returned bound at most epsilon proves the float matrix epsilon-mDP as the dense audit
defines it. The bound can exceed the exact level slightly; it never falls below it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import ValidationError

__all__ = [
    "DENSE_MAX_N", "STRUCTURE_VERSION", "StructuredAudit", "chain_cells", "chain_reach", "kernel_audit",
    "lattice_chain_audit", "lattice_steps", "postprocessing_audit", "structure_record",
]

#: Up to this many inputs the builders keep the independent dense audit (seconds at most);
#: above it, where a structured proof applies, they use it.
DENSE_MAX_N = 1500
#: Version of the ``structure`` record (:func:`structure_record`) that mechanism files keep;
#: the loader reads exactly the versions it knows and refuses the others.
STRUCTURE_VERSION = 1
#: Error of one numpy ``log``/subtraction, in ulps of the largest |value| (as in metricdp.audit).
_ULPS = 16
_EPS = float(np.finfo(np.float64).eps)
#: Relative margin for the rounding of the final O(n^2) evaluation of a bound (a few operations).
_EVAL_MARGIN = 64 * _EPS
_ROWS = 1 << 22  # elements per temporary


@dataclass(frozen=True)
class StructuredAudit:
    """An upper bound ``epsilon`` of a matrix's exact mDP level, and how it was proven.

    ``method`` names the proof (``lattice-chain``, ``post-processing``, ``kernel``);
    ``details`` holds its JSON-serialisable figures (steps, stretch, measured deviations);
    ``record`` what :func:`structure_record` keeps beyond them (the lattice cell of each input).
    """

    epsilon: float
    method: str
    details: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict, repr=False)

    def satisfies(self, epsilon: float, rtol: float = 1e-9) -> bool:
        """Whether the bound is within ``rtol`` (relative) of ``epsilon``."""
        return self.epsilon <= epsilon * (1 + rtol)


def structure_record(proof: StructuredAudit, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a mechanism file records of the structure its audit used (metadata ``structure``).

    ``{"version": 1, "proof": METHOD, ...}`` with the figures that select the proof: the
    lattice's box, the order of its steps, its cell side and each input's cell ``r * C + c``
    (``lattice-chain``), the kernel's inner epsilon
    (``kernel``), the record of the regrouped mechanism (``post-processing``: ``base``, the
    source's record, or None when the source was audited densely). The record is a claim:
    :mod:`metricdp.mechanisms.file_structure` re-derives every figure it needs from the
    file's matrix, distances and points, and refuses a file whose content does not have
    the structure it claims.
    """
    record: dict[str, Any] = {"version": STRUCTURE_VERSION, "proof": proof.method}
    if proof.method == "lattice-chain":
        record.update(order=proof.details["order"], box=list(proof.details["box"]), **proof.record)
    elif proof.method == "kernel":
        record["inner_epsilon"] = proof.details["inner_epsilon"]
    elif proof.method == "post-processing":
        record["base"] = None if base is None else dict(base)
    return record


def _slack(largest: float) -> float:
    """Absolute error bound of a difference of two numpy logs whose values are at most ``largest``."""
    return _ULPS * _EPS * max(largest, 1.0)


def _farey(order: int) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """The primitive lattice vectors of max-norm <= ``order`` (both signs), sorted by angle, and their angles."""
    if order < 1:
        raise ValidationError(f"order must be >= 1, got {order}")
    rng = np.arange(-order, order + 1)
    a, b = (x.ravel() for x in np.meshgrid(rng, rng, indexing="ij"))
    keep = (np.gcd(a, b) == 1)
    every = np.column_stack([a[keep], b[keep]])  # both signs
    angle = np.arctan2(every[:, 1], every[:, 0])
    every, angle = every[np.argsort(angle)], np.sort(angle)
    nxt = np.roll(every, -1, axis=0)
    det = every[:, 0] * nxt[:, 1] - every[:, 1] * nxt[:, 0]
    if not np.all(det == 1):  # pragma: no cover - a property of Farey sequences
        raise AssertionError("consecutive lattice steps are not unimodular")
    return every.astype(np.intp), angle


def lattice_steps(order: int) -> tuple[NDArray[np.intp], float]:
    r"""The primitive lattice steps of max-norm <= ``order`` (one per direction pair +-s) and their stretch.

    Sorted by angle, the steps s and -s together are the Farey vectors of that order, so two
    angularly consecutive ones a, b have :math:`|\det(a, b)| = 1` (checked here, not assumed) and
    lie in one closed quadrant (the axis steps are among them). Every lattice vector x in
    their cone is then :math:`\alpha a + \beta b` with integers :math:`\alpha, \beta \ge 0`, and
    :math:`\alpha |a| + \beta |b| \le |x| / \cos(\theta/2)` for the angle :math:`\theta` between
    a and b. Returns the steps (k, 2) and the stretch :math:`1/\cos(\theta_{max}/2)`, rounded up.
    """
    every, angle = _farey(order)
    gap = np.diff(np.append(angle, angle[0] + 2 * math.pi))
    stretch = 1.0 / math.cos(float(gap.max()) / 2) * (1 + 8 * _EPS)
    half = every[(every[:, 0] > 0) | ((every[:, 0] == 0) & (every[:, 1] > 0))]
    return half.astype(np.intp), stretch


def chain_reach(order: int) -> float:
    r"""How far (in cells) a chain path of ``order`` strays from the segment between its ends: the largest
    :math:`|a - b| / 2` over angularly consecutive steps a, b.

    The path from p to q = p + :math:`\alpha a + \beta b` that takes its t-th step so that
    :math:`i_t = \lfloor t\alpha/N + 1/2 \rfloor` of the first t steps are a (N = :math:`\alpha + \beta`)
    is at :math:`p + (t/N)(q - p) + \delta_t (a - b)` with :math:`|\delta_t| \le 1/2`
    (docs/proofs/structured_audit.md, section 6).
    """
    every, _ = _farey(order)
    return float(np.max(np.hypot(*(every - np.roll(every, -1, axis=0)).T))) / 2


def chain_cells(rows: NDArray[np.intp], cols: NDArray[np.intp], box_shape: tuple[int, int],
                order: int) -> NDArray[np.bool_]:
    """Box cells (mask of the R * C, row index ``r * C + c``) within :func:`chain_reach` of the convex hull
    of the cells (rows, cols): every cell a chain path between two of them can visit, and some more.

    A cell is kept when no edge line of the hull has it farther outside than the reach (a
    distance to a line is at most the distance to the hull, so this keeps a superset). With
    fewer than 3 distinct cells, or cells on one line, every box cell is kept.
    """
    from scipy.spatial import ConvexHull, QhullError

    n_rows, n_cols = box_shape
    pts = np.unique(np.column_stack([rows, cols]), axis=0).astype(np.float64)
    every = np.ones(n_rows * n_cols, dtype=bool)
    if len(pts) < 3:
        return every
    try:
        hull = ConvexHull(pts)
    except QhullError:  # collinear cells: keep the whole box
        return every
    box_r, box_c = np.divmod(np.arange(n_rows * n_cols), n_cols)
    eq = hull.equations  # unit normal (2) and offset: <= 0 inside
    outside = np.full(n_rows * n_cols, -np.inf)
    for normal_r, normal_c, offset in eq:
        outside = np.maximum(outside, normal_r * box_r + normal_c * box_c + offset)
    return np.asarray(outside <= chain_reach(order) + 1e-6)


def _kernels() -> Any:
    from ._chain_kernels import KERNELS  # numba's import only when a large grid is audited

    return KERNELS


def _step_gap(log_rows: NDArray, index: NDArray[np.intp], a: int, b: int, chunk: int, compiled: Any = None) -> float:
    """max |log_rows[index[r, c], w] - log_rows[index[r + a, c + b], w]| over the pairs of box cells that both
    have a row (index >= 0) and every w."""
    if compiled is not None:
        return float(compiled.step_gap(log_rows, index, a, b))
    n_rows, n_cols = index.shape
    c0, c1 = max(0, -b), n_cols - max(0, b)  # columns c with c and c + b in the box
    src = index[: n_rows - a, c0:c1].ravel()
    dst = index[a:, c0 + b : c1 + b].ravel()
    both = (src >= 0) & (dst >= 0)
    src, dst = src[both], dst[both]
    worst = 0.0
    for s in range(0, len(src), chunk):
        diff = log_rows[src[s : s + chunk]] - log_rows[dst[s : s + chunk]]
        worst = max(worst, float(diff.max()), float(-diff.min()))
    return worst


def lattice_chain_audit(
    matrix: ArrayLike,
    distances: ArrayLike,
    box_matrix: NDArray[np.float64],
    box_shape: tuple[int, int],
    rows: NDArray[np.intp],
    cols: NDArray[np.intp],
    cell: float,
    *,
    order: int = 6,
    box_cells: NDArray[np.intp] | None = None,
) -> StructuredAudit:
    r"""Upper bound of the level of ``matrix`` (n, m), whose rows are proportional to rows of ``box_matrix``.

    Parameters
    ----------
    matrix : (n, m) array
        The mechanism; its level is over ``distances`` with rows normalised by exact sums.
    distances : (n, n) array
        The metric of the audit (any: Euclidean on the lattice, great-circle ...).
    box_matrix : (R * C, m) or (h, m) array, strictly positive
        One row per cell (r, c) of the full R x C rectangle, row index ``r * C + c``; or,
        with ``box_cells``, one row per cell of ``box_cells``.
    box_shape : (R, C)
    rows, cols : (n,) int arrays
        The lattice cell of each input: input u's row is proportional to box row
        ``rows[u] * C + cols[u]``.
    cell : float
        The lattice step h (the lattice distance is h times the Euclidean norm of the index offset).
    order : int
        Max-norm of the checked steps (more steps: a smaller stretch, more work).
    box_cells : (h,) int array, optional
        The box cells (``r * C + c``) that ``box_matrix``'s rows belong to: the inputs' cells
        and every cell of :func:`chain_cells` at least (checked), so that each chain path
        between two inputs visits only cells with a row. None: the full rectangle.

    Notes
    -----
    Let :math:`g(p, q) = \max_w \log(B_{pw}/B_{qw})`; g obeys :math:`g(p, q) \le g(p, r) + g(r, q)`.
    With :math:`\Lambda = \max` over the steps s and box pairs (p, p + s) of
    :math:`(\max(g(p,p+s), g(p+s,p)) + e)/(h|s|)` (e the rounding of the logs), every pair of
    box cells has :math:`g(p, q) \le \Lambda \sigma h |x_q - x_p|` (:func:`lattice_steps`:
    the path stays in the bounding box of p and q, inside the rectangle). The rows of the
    matrix differ from their box rows by :math:`\psi_{uw} = \log M_{uw} - \log B_{pw}`
    (measured: its per-row spread), and normalisation adds :math:`\log S_v - \log S_u`
    (from the float row sums, within :math:`\gamma_m` relative of the exact ones). The
    returned bound is the largest over u != v of
    :math:`[\Lambda \sigma d_L(u,v) + \max_w \psi_{uw} - \min_w \psi_{vw} + \log S_v - \log S_u + e']
    / d(u, v)`, an O(n^2) evaluation; the step checks cost O(k n m) for k steps.
    """
    m = np.asarray(matrix, dtype=np.float64)
    d = np.asarray(distances, dtype=np.float64)
    n, k = m.shape
    n_rows, n_cols = box_shape
    cells = np.arange(n_rows * n_cols) if box_cells is None else np.asarray(box_cells, dtype=np.intp)
    if (box_matrix.shape != (len(cells), k) or not np.all(box_matrix > 0) or (box_matrix is not m and not np.all(m > 0))
            or cells.min() < 0 or cells.max() >= n_rows * n_cols or np.unique(cells).size != len(cells)):
        raise ValidationError("lattice_chain_audit needs a strictly positive box matrix of one row per box cell")
    index = np.full(n_rows * n_cols, -1, dtype=np.intp)
    index[cells] = np.arange(len(cells))
    idx = index[rows * n_cols + cols]  # each input's box row
    if box_cells is not None and (np.any(idx < 0) or np.any(chain_cells(rows, cols, box_shape, order) & (index < 0))):
        raise ValidationError("lattice_chain_audit: a cell a chain path between two inputs can visit has no box row")
    log_rows = np.log(box_matrix)
    steps, stretch = lattice_steps(order)
    compiled = _kernels()
    largest = float(np.abs(log_rows).max())
    edge_err = _slack(largest)
    lam = 0.0
    chunk = max(1, _ROWS // max(1, k))
    grid = index.reshape(n_rows, n_cols)
    for a, b in steps:
        if a >= n_rows or abs(b) >= n_cols:
            continue
        worst = _step_gap(log_rows, grid, int(a), int(b), chunk, compiled)
        lam = max(lam, (worst + edge_err) / (cell * math.hypot(a, b)))
    lam *= 1 + 4 * _EPS
    # each input's row against its box row
    psi_hi = np.zeros(n)
    psi_lo = np.zeros(n)
    largest_m = largest
    block = max(1, _ROWS // k)
    own_rows = box_matrix is m and np.array_equal(idx, np.arange(n))  # psi = 0: each row is its own box row
    for s in range(0, 0 if own_rows else n, block):  # by blocks of rows: no second n x m array of logs
        log_m = np.log(m[s : s + block])
        largest_m = max(largest_m, float(np.abs(log_m).max()))
        psi = log_m - log_rows[idx[s : s + block]]
        psi_hi[s : s + len(psi)] = psi.max(axis=1)
        psi_lo[s : s + len(psi)] = psi.min(axis=1)
    spread = float(np.max(psi_hi - psi_lo))
    # log S_u within 2 gamma_k of log(the float row sum): any summation order of k positive
    # floats errs by at most gamma_k = k u / (1 - k u) relative (u = 2^-53), log by 2 ulps more
    gamma = k * _EPS / 2 / (1 - k * _EPS / 2)
    err = 2 * _slack(max(largest, largest_m)) + 2 * (gamma + 2 * _EPS)
    scale = np.log(m.sum(axis=1))
    hi, lo = psi_hi - scale, psi_lo - scale  # potentials of the normalised rows
    bound = 0.0
    block = max(1, _ROWS // n)
    for s in range(0, n, block):
        u = slice(s, s + block)
        d_l = cell * np.hypot(rows[u, None] - rows[None, :], cols[u, None] - cols[None, :])
        num = lam * stretch * d_l + (hi[u, None] - lo[None, :]) + err
        off = d[u] > 0
        level = np.where(off, num / np.where(off, d[u], 1.0), -np.inf)
        bound = max(bound, float(level.max()))
    bound *= 1 + _EVAL_MARGIN
    details = {"order": order, "steps": len(steps), "stretch": stretch, "step_level": lam,
               "row_spread": spread, "box": [n_rows, n_cols], "box_rows": len(cells)}
    return StructuredAudit(bound, "lattice-chain", details,
                           {"cell": float(cell), "cells": (rows * n_cols + cols).astype(int).tolist()})


def postprocessing_audit(
    matrix: ArrayLike, distances: ArrayLike, base: ArrayLike, base_level: float, targets: ArrayLike
) -> StructuredAudit:
    r"""Upper bound of the level of ``matrix`` = ``base`` with column y added into column ``targets[y]``.

    ``base`` (n, m) is a matrix whose (normalised) level is at most ``base_level``; R is the
    0/1 matrix of ``targets``. The regrouped sums :math:`G = \mathrm{base}\, R` are recomputed
    in floats (each within :math:`\gamma = c\,u/(1 - c\,u)` relative of the exact sum, c the
    largest group, u = 2^-53), ``matrix`` is compared with them entry by entry (relative
    deviation r, measured; zeros must match exactly), so every entry is within
    :math:`\theta = (1 + r)(1 + \gamma) - 1` of the exact regrouped sum, and so is every
    row sum. Then (docs/proofs/structured_audit.md)

    .. math:: \text{level} \le \text{base\_level} + 2 \log\frac{1+\theta}{1-\theta} / d_{\min}.
    """
    mat = np.asarray(matrix, dtype=np.float64)
    b = np.asarray(base, dtype=np.float64)
    t = np.asarray(targets, dtype=np.intp)
    d = np.asarray(distances, dtype=np.float64)
    n, k = b.shape
    if mat.shape != (n, k) or t.shape != (k,) or t.min() < 0 or t.max() >= k:
        raise ValidationError("postprocessing_audit: matrix, base and targets do not fit together")
    from scipy.sparse import csr_matrix  # here: importing scipy.sparse costs every command 0.15 s at start

    regroup = csr_matrix((np.ones(k), (np.arange(k), t)), shape=(k, k))
    group = np.asarray((regroup.T @ b.T).T)  # column y of base into column targets[y]
    used = np.zeros(k, dtype=bool)
    used[t] = True
    if np.any(mat[:, ~used] != 0) or not np.all(group[:, used] > 0) or not np.all(mat[:, used] > 0):
        return StructuredAudit(math.inf, "post-processing", {"note": "zeros do not match the regrouping"})
    r = float(np.max(np.abs(mat[:, used] / group[:, used] - 1.0)))
    c = int(np.bincount(t, minlength=k).max())
    gamma = c * _EPS / 2 / (1 - c * _EPS / 2)
    theta = (1 + r) * (1 + gamma) - 1 + 2 * _EPS
    if not theta < 0.5:
        return StructuredAudit(math.inf, "post-processing", {"deviation": r})
    d_min = float(d[~np.eye(n, dtype=bool)].min())
    bound = (float(base_level) + 2 * math.log((1 + theta) / (1 - theta)) / d_min) * (1 + _EVAL_MARGIN)
    return StructuredAudit(bound, "post-processing", {"base_level": float(base_level), "deviation": r,
                                                      "largest_group": c})


#: Relative error of one float distance of a metric computed from coordinates (haversine's
#: asin/sqrt/sin chain, Euclidean's and Manhattan's sums): a few ulps; 1e-13 is generous.
DISTANCE_RTOL = 1e-13
#: Coordinate metrics that are metrics by construction (the triangle inequality holds for the true values).
PROVEN_METRICS = ("euclidean", "haversine", "manhattan")


def kernel_audit(matrix: ArrayLike, distances: ArrayLike, inner_epsilon: float) -> StructuredAudit:
    r"""Upper bound of the level of ``matrix`` when it is the exponential kernel on a true metric.

    The caller has established that ``distances`` are a metric by construction computed
    from coordinates (:data:`PROVEN_METRICS`), each within :data:`DISTANCE_RTOL` (relative)
    of the true distance, so :math:`|d_{uw} - d_{vw}| \le d_{uv}(1 + \tau)` with
    :math:`\tau = \rho(1 + 2D/d_{\min})/(1 - \rho)`. Nothing about the matrix is trusted:
    :math:`\psi_{uw} = \log M_{uw} + \varepsilon' d_{uw}/2` is measured (for the kernel it is
    :math:`-\log Z_u` in every column) and its per-row spread :math:`s_u = \max_w \psi_{uw} -
    \min_w \psi_{uw}` enters the bound (docs/proofs/structured_audit.md):

    .. math:: \text{level} \le \varepsilon'(1 + \tau) + \max_{u \ne v} (s_u + s_v + e) / d_{uv},

    e the rounding of the measured spreads. O(n^2).
    """
    m = np.asarray(matrix, dtype=np.float64)
    d = np.asarray(distances, dtype=np.float64)
    n = m.shape[0]
    if m.ndim != 2 or m.shape != d.shape or n < 2 or not np.all(m > 0):
        return StructuredAudit(math.inf, "kernel", {"note": "not a positive square kernel matrix"})
    eps1 = float(inner_epsilon)
    spread = np.empty(n)
    block = max(1, _ROWS // n)
    for s in range(0, n, block):
        psi = np.log(m[s : s + block]) + (0.5 * eps1) * d[s : s + block]
        spread[s : s + len(psi)] = psi.max(axis=1) - psi.min(axis=1)
    largest = abs(math.log(float(m.min()))) + 0.5 * eps1 * float(d.max())
    err = 4 * _slack(largest)
    off = ~np.eye(n, dtype=bool)
    d_min, d_max = float(d[off].min()), float(d.max())
    rho = DISTANCE_RTOL
    tau = rho * (1 + 2 * d_max / d_min) / (1 - rho)
    worst = 0.0
    for s in range(0, n, block):
        u = slice(s, s + block)
        gap = spread[u, None] + spread[None, :] + err
        worst = max(worst, float(np.where(off[u], gap / np.where(off[u], d[u], 1.0), 0.0).max()))
    bound = (eps1 * (1 + tau) + worst) * (1 + _EVAL_MARGIN)
    return StructuredAudit(bound, "kernel", {"inner_epsilon": eps1, "row_spread": float(spread.max()),
                                             "distance_rtol": rho, "tau": tau})
