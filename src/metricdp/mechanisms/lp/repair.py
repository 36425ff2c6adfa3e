r"""Tolerance repair: turn an LP solution into an exactly eps-mDP stochastic matrix.

A simplex or interior-point solution meets each privacy row only to about 1e-7, and a
zero returned beside a positive entry of the same column is infinitely far from mDP
(issue 14, item 5). :func:`repair` removes both defects without trusting the solver.
The proof is in its docstring and in ``docs/proofs/lp_repair.md``.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ...errors import PrivacyViolationError, ValidationError

__all__ = ["ROUNDING_RESERVE", "envelope", "repair"]

_ULP = 2.0**-53
#: Log-space reserve per unit of (1 + eps * diameter) kept for float rounding (see the
#: "Floating point" paragraph of :func:`repair`): 64 unit roundoffs.
ROUNDING_RESERVE = 64 * _ULP
_ROW_BLOCK = 64  # rows of the envelope updated together: (64, n) stays in cache
_PAIR_BLOCK = 1 << 22  # elements per temporary of the pairwise spread check


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
    out = p.copy()  # the v = u term

    def rows(start: int) -> None:
        stop = min(start + _ROW_BLOCK, n)
        best = out[start:stop]
        k = kernel[start:stop]
        tmp = np.empty_like(best)
        for v in sources:
            np.multiply(k[:, v : v + 1], p[v], out=tmp)
            np.maximum(best, tmp, out=best)

    workers = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(rows, range(0, n, _ROW_BLOCK)))
    return out


def repair(matrix: ArrayLike, distances: ArrayLike, epsilon: float, *, eta: float) -> NDArray[np.float64]:
    r"""Make an (approximate) LP solution an exactly ``epsilon``-mDP row-stochastic matrix.

    The LP is solved at :math:`\varepsilon_1 = \varepsilon(1-\eta)`; its solution P meets
    the privacy rows only up to the solver's tolerance and may hold exact zeros. The
    repair is (line references to this function's body):

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

    Parameters
    ----------
    matrix : array of shape (n, n)
        The LP solution (rows approximately stochastic, possibly tiny negatives).
    distances : array of shape (n, n)
        A metric (validated by the space that produced it).
    epsilon : float
        The privacy level the result must meet exactly.
    eta : float in (0, 1)
        The LP was solved at ``epsilon * (1 - eta)``.

    Returns
    -------
    ndarray of shape (n, n)
        Row-stochastic and exactly ``epsilon``-mDP (proof above).

    Raises
    ------
    PrivacyViolationError
        When the spread condition fails (re-solve at a larger ``eta``), or when an
        underflow or a subnormal entry would void the proof.
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
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValidationError(f"matrix must be square, got shape {p.shape}")
    if d.shape != p.shape:
        raise ValidationError(f"distances has shape {d.shape} but matrix has shape {p.shape}")
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

    clipped = np.maximum(p, 0.0)  # step 1
    if not clipped.any():
        raise ValidationError("matrix is all zero: nothing to repair")
    env = envelope(clipped, d, eps1)  # step 2

    positive_cols = clipped.max(axis=0) > 0
    if not np.all(env[:, positive_cols] > 0):
        raise PrivacyViolationError(
            "repair: exp(-eps * d) underflowed and left a zero in a positive column "
            f"(eps * diameter = {epsilon * float(d.max()):.4g}); the proof needs it positive"
        )
    pos = env[env > 0]
    if pos.size and float(pos.min()) < np.finfo(np.float64).tiny:
        raise PrivacyViolationError(
            f"repair: an entry {float(pos.min()):.3g} is subnormal; its rounding error voids the proof"
        )

    sums = env.sum(axis=1)  # step 3
    log_s = np.log(sums)
    margin_d = epsilon * eta  # per unit distance
    off = ~np.eye(n, dtype=bool)
    reserve = ROUNDING_RESERVE * (1.0 + epsilon * float(d.max()))
    spread = float(log_s.max() - log_s.min())  # step 4
    if spread > margin_d * float(d[off].min()) - reserve and not _pairwise_ok(log_s, d, margin_d, reserve):
        raise PrivacyViolationError(
            f"repair: row sums after the envelope spread by a factor exp({spread:.3g}), more than "
            f"exp(eps * eta * d_min) = exp({margin_d * float(d[off].min()):.3g}) allows; "
            "solve the LP at a smaller eps (larger eta) or with tighter tolerances"
        )
    return env / sums[:, None]


def _pairwise_ok(log_s: NDArray, d: NDArray, margin_d: float, reserve: float) -> bool:
    """``log s_v - log s_u <= margin_d * d(u,v) - reserve`` for all u != v (blocked)."""
    n = len(log_s)
    block = max(1, _PAIR_BLOCK // n)
    for start in range(0, n, block):
        stop = min(start + block, n)
        lhs = log_s[None, :] - log_s[start:stop, None]  # (u, v): log s_v - log s_u
        rhs = margin_d * d[start:stop] - reserve
        bad = lhs > rhs
        idx = np.arange(start, stop)
        bad[idx - start, idx] = False  # u == v: no constraint
        if bad.any():
            return False
    return True
