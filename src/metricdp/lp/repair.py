r"""Tolerance repair: turn an LP solution into an exactly eps-mDP stochastic matrix.

A simplex or interior-point solution meets each privacy row only to about 1e-7, and a
zero returned beside a positive entry of the same column is infinitely far from mDP
:func:`repair` removes both defects without trusting the solver.
The proof is in its docstring and in ``docs/proofs/lp_repair.md``.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._resources import scan_threads
from ..errors import RepairError, ValidationError
from .pairs import pair_blocks

__all__ = ["ROUNDING_RESERVE", "envelope", "repair", "repair_free"]

_ULP = 2.0**-53
#: Log-space reserve per unit of (1 + eps * diameter) kept for float rounding (see the
#: "Floating point" paragraph of :func:`repair`): 64 unit roundoffs.
ROUNDING_RESERVE = 64 * _ULP  # [repair:reserve]
_ROW_BLOCK = 64  # rows of the envelope updated together: (64, n) stays in cache
_ROW_CHUNK = 1 << 22  # elements per temporary of the row-wise passes of repair_free


def envelope(matrix: ArrayLike, distances: ArrayLike, level: float) -> NDArray[np.float64]:
    r"""Column-wise log-Lipschitz envelope :math:`E[u,w] = \max_v P[v,w]\, e^{-\ell d(u,v)}`.

    The smallest matrix that is entrywise :math:`\ge P` and satisfies every privacy row
    :math:`E[u,w] \le e^{\ell d(u,v)} E[v,w]` (for a metric d: see :func:`repair`).

    Blocked over rows of the output (``(64, n)`` in cache, one pass over the sources v
    each), threaded; O(n^3) multiply-max operations, no Python loop over pairs. Sources
    v whose row of P is all zero are skipped.
    """
    p = np.asarray(matrix, dtype=np.float64)
    d = np.asarray(distances, dtype=np.float64)
    n = p.shape[0]
    kernel = np.exp(-level * d)  # kernel[u, v] = e^{-level d(u,v)} (1 on the diagonal)
    sources = np.flatnonzero(p.max(axis=1) > 0)
    out = p.copy()  # the v = u term  [envelope:self-term]

    def rows(start: int) -> None:
        stop = min(start + _ROW_BLOCK, n)
        best = out[start:stop]
        k = kernel[start:stop]
        tmp = np.empty_like(best)
        for v in sources:
            np.multiply(k[:, v : v + 1], p[v], out=tmp)
            np.maximum(best, tmp, out=best)

    workers = scan_threads()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(rows, range(0, n, _ROW_BLOCK)))
    return out


def repair(matrix: ArrayLike, distances: ArrayLike, epsilon: float, *, eta: float) -> NDArray[np.float64]:
    r"""Make an (approximate) LP solution an exactly ``epsilon``-mDP row-stochastic matrix.

    The LP is solved at :math:`\varepsilon_1 = \varepsilon(1-\eta)`; its solution P meets
    the privacy rows only up to the solver's tolerance and may hold exact zeros. The
    repair is (the ``[repair:...]`` labels mark each step in this function's body;
    ``docs/proofs/lp_repair.md`` cites them):

    1. clip negatives: :math:`P \leftarrow \max(P, 0)` (``clipped``);
    2. column envelope at :math:`\varepsilon_1` (:func:`envelope`):

       .. math:: E[u,w] = \max_v P[v,w]\, e^{-\varepsilon_1 d(u,v)} ;

    3. normalise rows: :math:`H[u,w] = E[u,w] / s_u`, :math:`s_u = \sum_w E[u,w]`;
    4. check the spread of the row sums (``spread``) and raise unless

       .. math:: \log s_v - \log s_u \le \varepsilon\eta\, d(u,v) - \rho
          \quad\text{for all } u \ne v,

       which holds in particular when :math:`\log(\max s / \min s) \le
       \varepsilon\eta\, d_{\min} - \rho` (checked first; the pairwise test is the
       fallback), with the rounding reserve :math:`\rho` below.

    **Proof** that H is :math:`\varepsilon`-mDP. (a) *E dominates P*: the term v = u
    gives :math:`E \ge P` entrywise. (b) *E is* :math:`\varepsilon_1` *-mDP*: fix w, u, v
    and let x attain :math:`E[u,w] = P[x,w] e^{-\varepsilon_1 d(u,x)}`. By the triangle
    inequality :math:`d(v,x) \le d(u,v) + d(u,x)`, so

    .. math:: E[v,w] \ge P[x,w] e^{-\varepsilon_1 d(v,x)}
              \ge P[x,w] e^{-\varepsilon_1 d(u,x)} e^{-\varepsilon_1 d(u,v)}
              = e^{-\varepsilon_1 d(u,v)} E[u,w].

    In particular a column with one positive entry of P is positive everywhere (exact
    zeros from the solver are lifted), and an all-zero column stays zero (no
    constraint: 0 <= e^{...} 0). (c) *Normalisation*: for a positive column,

    .. math:: \frac{H[u,w]}{H[v,w]} = \frac{E[u,w]}{E[v,w]}\,\frac{s_v}{s_u}
              \le e^{\varepsilon_1 d(u,v)}\, e^{\varepsilon\eta d(u,v)}
              = e^{\varepsilon d(u,v)},

    by (b) and the checked spread condition. H is row-stochastic by construction and
    non-negative. Nothing here depends on how accurate the LP solution was: accuracy
    only decides whether the spread check passes (the row sums of E are
    :math:`1 + O(\text{tol})` when P is an accurate solution), and a failed check raises
    instead of returning an unproven matrix.

    **Floating point.** H's log-ratios differ from the real-arithmetic ones through
    rounding in :math:`\varepsilon_1 d` (absolute :math:`\le \varepsilon d\, u`, with u
    the unit roundoff), in ``exp``, one multiply and one divide per entry (a few u), and
    the triangle defect of float distances (:math:`\le` a few :math:`u \cdot` diameter).
    The reserve :math:`\rho = 64 u (1 + \varepsilon\,\mathrm{diam})` covers them with
    room. Positive entries must be normal floats (subnormals lose relative precision)
    and every positive column must stay positive after the envelope (an ``exp``
    underflow when :math:`\varepsilon\,\mathrm{diam} > 700` could break (b)); both are
    checked and raise. The caller's :func:`~metricdp.mechanisms.base.certify` then
    audits H independently.

    **Cost in loss.** Solving at :math:`\varepsilon(1-\eta)` instead of
    :math:`\varepsilon` costs the difference of the LP optimum between the two levels
    (relative change about :math:`\eta` times the elasticity of the loss in eps), plus
    the lift of (b), which is of the order of the solver tolerance.

    The proof works column by column over the inputs and never reads a distance to an
    output, so it holds verbatim for an (n, m) matrix of a separate output set
    (:mod:`metricdp.outputs`): rows are the n inputs with their metric d, columns any m
    outputs.

    Parameters
    ----------
    matrix : array of shape (n, n) or (n, m)
        The LP solution (rows approximately stochastic, possibly tiny negatives).
    distances : array of shape (n, n)
        The inputs' metric (validated by the space that produced it).
    epsilon : float
        The privacy level the result must meet exactly.
    eta : float in (0, 1)
        The LP was solved at ``epsilon * (1 - eta)``.

    Returns
    -------
    ndarray of the matrix's shape
        Row-stochastic and exactly ``epsilon``-mDP (proof above).

    Raises
    ------
    RepairError
        ``retryable=True`` when the spread condition fails (re-solve at a larger
        ``eta``: :class:`~.retry.RetryPolicy`); ``retryable=False`` when an underflow or
        a subnormal entry would void the proof (a larger ``eta`` cannot help).
    ValidationError
        Bad shapes, non-finite entries, ``eta`` outside (0, 1), or an all-zero matrix.

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> p = np.array([[1.0, 0.0], [0.5, 0.5]])  # exact zero: not private at any eps
    >>> h = repair(p, d, 1.0, eta=0.5)
    >>> bool((h > 0).all()), bool(np.allclose(h.sum(axis=1), 1))
    (True, True)
    """
    p = np.array(matrix, dtype=np.float64)
    d = np.asarray(distances, dtype=np.float64)
    if p.ndim != 2 or 0 in p.shape:
        raise ValidationError(f"matrix must be a non-empty 2-d array, got shape {p.shape}")
    if d.shape != (p.shape[0], p.shape[0]):
        raise ValidationError(f"distances has shape {d.shape} but matrix has {p.shape[0]} rows (inputs)")
    if not np.all(np.isfinite(p)):
        i, j = np.argwhere(~np.isfinite(p))[0]
        raise ValidationError(f"matrix is not finite at ({i}, {j}): {p[i, j]}")
    if not (math.isfinite(float(epsilon)) and float(epsilon) > 0):
        raise ValidationError(f"epsilon must be finite and > 0, got {epsilon!r}")
    if not (0.0 < float(eta) < 1.0):
        raise ValidationError(f"eta must be in (0, 1), got {eta!r}")
    epsilon, eta = float(epsilon), float(eta)
    n = p.shape[0]
    eps1 = epsilon * (1.0 - eta)

    clipped = np.maximum(p, 0.0)  # step 1  [repair:clip]
    if not clipped.any():  # [repair:all-zero]
        raise ValidationError("matrix is all zero: nothing to repair")
    env = envelope(clipped, d, eps1)  # step 2  [repair:envelope]

    # [repair:underflow]
    positive_cols = clipped.max(axis=0) > 0
    if not np.all(env[:, positive_cols] > 0):
        raise RepairError(
            "repair: exp(-eps * d) underflowed and left a zero in a positive column "
            f"(eps * diameter = {epsilon * float(d.max()):.4g}); the proof needs it positive",
            retryable=False,
        )
    pos = env[env > 0]  # [repair:subnormal]
    if pos.size and float(pos.min()) < np.finfo(np.float64).tiny:
        raise RepairError(
            f"repair: an entry {float(pos.min()):.3g} is subnormal; its rounding error voids the proof",
            retryable=False,
        )

    sums = env.sum(axis=1)  # step 3  [repair:normalise]
    log_s = np.log(sums)
    margin_d = epsilon * eta  # per unit distance
    off = ~np.eye(n, dtype=bool)
    reserve = ROUNDING_RESERVE * (1.0 + epsilon * float(d.max()))
    spread = float(log_s.max() - log_s.min())  # step 4  [repair:spread] (global test first)
    if spread > margin_d * float(d[off].min()) - reserve and not _pairwise_ok(log_s, d, margin_d, reserve):
        raise RepairError(
            f"repair: row sums after the envelope spread by a factor exp({spread:.3g}), more than "
            f"exp(eps * eta * d_min) = exp({margin_d * float(d[off].min()):.3g}) allows; "
            "solve the LP at a smaller eps (larger eta) or with tighter tolerances",
            retryable=True,
        )
    return env / sums[:, None]  # [repair:normalise]


def _pairwise_ok(log_s: NDArray, d: NDArray, margin_d: float, reserve: float) -> bool:
    """``log s_v - log s_u <= margin_d * d(u,v) - reserve`` for all u != v (blocked).  [repair:pairwise]"""
    n = len(log_s)
    for start, stop in pair_blocks(n, n):
        lhs = log_s[None, :] - log_s[start:stop, None]  # (u, v): log s_v - log s_u
        rhs = margin_d * d[start:stop] - reserve
        bad = lhs > rhs
        idx = np.arange(start, stop)
        bad[idx - start, idx] = False  # u == v: no constraint
        if bad.any():
            return False
    return True


def _free_pairs(rows: NDArray[np.intp], cols: NDArray[np.intp], n: int) -> tuple[NDArray[np.intp], ...]:
    """Free entries sorted by (column, row) and all ordered pairs (i, j), i != j, of one column.

    ``pi`` is sorted (each i's partners are contiguous), for :func:`numpy.maximum.reduceat`.
    """
    order = np.lexsort((rows, cols))
    fu, fw = rows[order], cols[order]
    size = np.bincount(fw, minlength=n)
    start = np.cumsum(size) - size
    per = size[fw]
    pi = np.repeat(np.arange(len(fu), dtype=np.intp), per)
    pj = start[fw[pi]] + np.arange(len(pi), dtype=np.intp) - np.repeat(np.cumsum(per) - per, per)
    keep = pi != pj
    return fu, fw, pi[keep], pj[keep]


def repair_free(
    matrix: ArrayLike,
    distances: ArrayLike,
    level: float,
    epsilon: float,
    *,
    rows: ArrayLike,
    cols: ArrayLike,
    overwrite: bool = False,
) -> NDArray[np.float64]:
    r"""Tolerance repair in :math:`O(n^2 + \sum_w |I(w)|^2)` for matrices with few doubtful rows.

    For ConstOPTMech (Imola et al., UAI 2022, Theorem 2) and any mechanism built the same
    way: ``matrix`` is a non-negative :math:`M_{\text{full}}` whose privacy rows at
    ``level`` :math:`\ell` are all exact except, possibly, those between two *free*
    entries of one column (``M[rows[k], cols[k]]``: the replacement function I; these
    are the rows (22) that the LP solver meets only to its tolerance). Precisely, the
    caller guarantees (**precondition**) for every column w and :math:`u \ne v` not both
    in :math:`I(w)`:

    .. math:: M[u,w] \le e^{\ell d(u,v)} M[v,w].

    (ConstOPTMech: two fixed entries :math:`Y_w e^{-\ell d(\cdot,w)}` by the triangle
    inequality, a free and a fixed one by rows (25) and (26) made exact by clipping.)
    The repair is

    1. clip negatives, :math:`P = \max(M, 0)`;
    2. lift the free entries by the envelope of the free entries of their column,

       .. math:: E[u,w] = \max\Big(P[u,w],\ \max_{x \in I(w)} P[x,w]\, e^{-\ell d(u,x)}\Big)
                 \quad (u \in I(w)),

       every other entry unchanged (one pass over the pairs of (22), no n^3 term);
    3. normalise rows, :math:`H[u,w] = E[u,w] / s_u`, :math:`s_u = \sum_w E[u,w]`.

    **Proof** that H is :math:`\varepsilon`-mDP when :math:`2\ell \le \varepsilon`.
    First, E is :math:`\ell`-mDP. Fix w. (i) u, v both free: let x attain E[u,w]; then
    :math:`E[v,w] \ge P[x,w] e^{-\ell d(v,x)} \ge P[x,w] e^{-\ell d(u,x)} e^{-\ell d(u,v)}
    = e^{-\ell d(u,v)} E[u,w]` (triangle inequality). (ii) u free, v fixed: every term of
    E[u,w] is :math:`P[x,w] e^{-\ell d(u,x)} \le e^{\ell (d(x,v) - d(u,x))} P[v,w] \le
    e^{\ell d(u,v)} E[v,w]` by the precondition for (x, v) and the triangle inequality
    (x = u: the precondition itself). (iii) u fixed, v free: :math:`E[u,w] = P[u,w] \le
    e^{\ell d(u,v)} P[v,w] \le e^{\ell d(u,v)} E[v,w]` (precondition, :math:`E \ge P`).
    (iv) both fixed: the precondition. Second, Theorem 2 of the paper: since E is
    :math:`\ell`-mDP, :math:`s_v \le e^{\ell d(u,v)} s_u` (sum the rows over w), so

    .. math:: \frac{H[u,w]}{H[v,w]} = \frac{E[u,w]}{E[v,w]} \frac{s_v}{s_u}
              \le e^{2\ell d(u,v)} \le e^{\varepsilon d(u,v)}.

    A zero column stays zero; a column with a positive free entry and no positive fixed
    one becomes positive on I(w) only, which (i)-(iv) cover. Unlike :func:`repair`, no
    spread check is needed: the row sums are controlled by Theorem 2 itself.

    **Floating point.** The precondition and (i)-(iv) hold for the computed numbers up to
    the rounding of ``exp``, products, the row sums and one division: a log-space error
    of a few unit roundoffs times :math:`1 + \varepsilon\,\mathrm{diam}` per ratio, which
    the reserve :math:`\rho` of :func:`repair` covers. It is paid from the margin: the
    function raises unless :math:`(\varepsilon - 2\ell)\, d_{\min} \ge \rho`
    (ConstOPTMech: :math:`\ell = \varepsilon(1-\eta)/2`, margin :math:`\varepsilon\eta
    d_{\min} = 10^{-6}`). Positive entries must be normal floats and every row must have
    a positive entry; both are checked. The caller's
    :func:`~metricdp.mechanisms.base.certify` audits H independently.

    Parameters
    ----------
    matrix : array of shape (n, n)
        :math:`M_{\text{full}}`, meeting the precondition (tiny negatives are clipped).
    distances : array of shape (n, n)
        A metric.
    level : float
        :math:`\ell`, the level of M's privacy rows.
    epsilon : float
        The level H must meet, at least ``2 * level`` plus the rounding margin.
    rows, cols : 1-d integer arrays
        The free entries ``(rows[k], cols[k])`` (any order, no duplicates).
    overwrite : bool
        Reuse ``matrix``'s memory (float64 C-contiguous input only) for the result.

    Returns
    -------
    ndarray of shape (n, n)
        Row-stochastic and exactly ``epsilon``-mDP (proof above).

    Raises
    ------
    RepairError
        ``retryable=True`` when the margin is below the rounding reserve (a larger
        ``eta`` widens it); ``retryable=False`` for a subnormal entry or an all-zero row.
    ValidationError
        Bad shapes, non-finite entries or free entries out of range.

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    >>> m = np.exp(-0.5 * d)  # Y = 1: the fixed form, at level 0.5
    >>> m[0, 1], m[2, 1] = 0.0, 0.9  # free entries of column 1 off by the solver
    >>> h = repair_free(m, d, 0.5, 1.0 + 1e-6, rows=[0, 2], cols=[1, 1])
    >>> bool(np.allclose(h.sum(axis=1), 1)), bool(h[0, 1] > 0)
    (True, True)
    """
    d = np.asarray(distances, dtype=np.float64)
    if overwrite and isinstance(matrix, np.ndarray) and matrix.dtype == np.float64 and matrix.flags.c_contiguous:
        p = matrix
    else:
        p = np.array(matrix, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValidationError(f"matrix must be square, got shape {p.shape}")
    if d.shape != p.shape:
        raise ValidationError(f"distances has shape {d.shape} but matrix has shape {p.shape}")
    n = p.shape[0]
    level, epsilon = float(level), float(epsilon)
    if not (math.isfinite(level) and level > 0):
        raise ValidationError(f"level must be finite and > 0, got {level!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValidationError(f"epsilon must be finite and > 0, got {epsilon!r}")
    fr, fc = (np.asarray(a) for a in (rows, cols))
    if fr.shape != fc.shape or fr.ndim != 1 or (fr.size and not np.issubdtype(fr.dtype, np.integer)):
        raise ValidationError(f"rows and cols must be 1-d integer arrays of one length, got {fr.shape}, {fc.shape}")
    if fr.size and (min(fr.min(), fc.min()) < 0 or max(fr.max(), fc.max()) >= n):
        raise ValidationError(f"free entries must lie in 0..{n - 1}")

    # one pass over rows: finiteness, clip, distance extremes (no n x n temporaries)
    step = max(1, _ROW_CHUNK // n)
    d_min, diam = math.inf, 0.0
    for s in range(0, n, step):
        block = p[s : s + step]
        if not np.all(np.isfinite(block)):
            i, j = np.argwhere(~np.isfinite(block))[0]
            raise ValidationError(f"matrix is not finite at ({s + i}, {j}): {block[i, j]}")
        np.maximum(block, 0.0, out=block)
        db = d[s : s + step]
        diam = max(diam, float(db.max()))
        idx = np.arange(s, min(s + step, n))
        off = db.copy()
        off[idx - s, idx] = np.inf
        d_min = min(d_min, float(off.min()))
    reserve = ROUNDING_RESERVE * (1.0 + epsilon * diam)  # [repair_free:margin]
    if n > 1 and not (epsilon - 2.0 * level) * d_min >= reserve:
        raise RepairError(
            f"repair_free: epsilon - 2 * level = {epsilon - 2.0 * level:.3g} leaves "
            f"{(epsilon - 2.0 * level) * d_min:.3g} at d_min, below the rounding reserve {reserve:.3g}",
            retryable=True,
        )

    # step 2: envelope of each column's free entries, one pass over their pairs  [repair_free:lift]
    fu, fw, pi, pj = _free_pairs(fr.astype(np.intp), fc.astype(np.intp), n)
    if len(pi):
        pf = p[fu, fw]
        lift = pf[pj] * np.exp(-level * d[fu[pi], fu[pj]])
        starts = np.flatnonzero(np.r_[True, pi[1:] != pi[:-1]])
        best = np.maximum.reduceat(lift, starts)
        target = pi[starts]
        p[fu[target], fw[target]] = np.maximum(pf[target], best)

    # step 3: checks and normalisation, row block by row block  [repair_free:normalise]
    tiny = np.finfo(np.float64).tiny
    for s in range(0, n, step):
        block = p[s : s + step]
        pos = block[block > 0]
        if pos.size and float(pos.min()) < tiny:
            raise RepairError(
                f"repair_free: an entry {float(pos.min()):.3g} is subnormal; its rounding error voids the proof",
                retryable=False,
            )
        sums = block.sum(axis=1)
        if not np.all(sums > 0):
            raise RepairError(f"repair_free: row {s + int(np.argmin(sums))} is all zero", retryable=False)
        block /= sums[:, None]
    return p
