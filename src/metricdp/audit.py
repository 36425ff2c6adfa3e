r"""Independent privacy audit of a finite mechanism.

The audit reads only a matrix and a distance matrix; it never calls a builder. It
answers two questions, both from the definitions:

* :func:`audit_epsilon` -- the smallest :math:`\varepsilon` with
  :math:`M[u,w] \le e^{\varepsilon d(u,v)} M[v,w]` for all u, v, w,
  i.e. :math:`\max_{w,\,u\ne v} (\log M[u,w] - \log M[v,w]) / d(u,v)`, infinite when
  some :math:`M[u,w] > 0 = M[v,w]`.
* :func:`epsilon_tight` -- the smallest :math:`\varepsilon \ge 0` at which M is
  :math:`(\varepsilon,\delta)`-mDP: for every ordered pair the hockey-stick divergence
  :math:`\sum_w \max(0, M[u,w] - e^{\varepsilon d(u,v)} M[v,w]) \le \delta`.

The matrix may be rectangular, (n, m): n inputs with the (n, n) metric d and m outputs
(a separate output set, :mod:`metricdp.outputs`); privacy is then over the inputs for
every output w, and nothing here reads a distance to an output.

**Extended metrics (policy graphs).** ``distances`` may hold ``+inf`` between the
components of a policy graph (:meth:`metricdp.spaces.MetricSpace.from_graph` with
``policy=True``; docs/proofs/policy_graphs.md). The definition of eps-mDP constrains the
pairs at finite distance only, so every function here splits the inputs into the classes of
"at finite distance" (:func:`finite_components`) and applies itself to each class's rows
(all outputs kept), exactly as on a finite space: a pair at infinite distance is skipped,
never approximated, and :class:`AuditResult` reports the number of components and of
unprotected pairs. A finite distance matrix takes exactly the code path it always took.

The audit bounds every pair's level with two BLAS matrix products, then evaluates only the
pairs that can reach the maximum (:func:`audit`); eps_tight is blocked numpy over the n^3
triples. No Python loop runs over pairs or triples.
"""

from __future__ import annotations

import itertools
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._resources import scan_threads
from ._validation import check_delta
from .errors import ValidationError

__all__ = [
    "AuditResult", "audit", "audit_epsilon", "epsilon_tight", "finite_components", "hockey_stick", "row_log_sums",
]

_BLOCK_ELEMENTS = 1 << 22  # elements per temporary (32 MiB of float64)
_ZERO_LOG = -1e300  # stands for log 0 in the audit
#: Error, in ulps of max |log m|, of a fast level log m[u,w] - log m[v,w] (see _pair_levels).
_FAST_ULPS = 16
_INFINITE_GAP = 1e299


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`.

    ``epsilon`` is the exact mDP level; ``witness`` is a triple (u, v, w) attaining it
    (``None`` when epsilon is 0). ``components`` is the number of classes of points at
    finite distance (1 on a metric space; more on a policy graph), and
    ``unprotected_pairs`` the number of unordered pairs at infinite distance, which the
    level does not cover.
    """

    epsilon: float
    witness: tuple[int, int, int] | None
    components: int = 1
    unprotected_pairs: int = 0

    def satisfies(self, epsilon: float, rtol: float = 1e-9) -> bool:
        """Whether the audited level is within ``rtol`` (relative) of ``epsilon``."""
        return self.epsilon <= epsilon * (1 + rtol)


def _inputs(matrix: ArrayLike, distances: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Matrix (n, m) with n >= 2 inputs and m >= 1 outputs, and the inputs' metric (n, n)."""
    m = np.asarray(matrix, dtype=np.float64)
    d = np.asarray(distances, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 2 or m.shape[1] < 1:
        raise ValidationError(f"matrix must be 2-d with at least 2 rows and 1 column, got shape {m.shape}")
    if d.shape != (m.shape[0], m.shape[0]):
        raise ValidationError(
            f"distances has shape {d.shape} but the matrix has {m.shape[0]} rows (inputs): expected "
            f"({m.shape[0]}, {m.shape[0]})"
        )
    if not np.all(np.isfinite(m)) or (m < 0).any():
        raise ValidationError("matrix must be finite and non-negative")
    off = ~np.eye(len(d), dtype=bool)
    if not np.all(d[off] > 0):
        raise ValidationError("distances must be positive off the diagonal")
    return m, d


def finite_components(
    distances: ArrayLike, name: str = "distances", labels: object = None
) -> tuple[int, NDArray[np.intp]]:
    """(count, component of every point): the classes of the relation "at finite distance".

    On an extended metric the relation is an equivalence (reflexive: d(u, u) = 0;
    symmetric; transitive by the triangle inequality, d(u, w) <= d(u, v) + d(v, w) <
    inf), so its classes are the connected components of the graph of finite entries and
    every pair inside one class must be finite. A matrix where that fails (d(u, v) and
    d(v, w) finite, d(u, w) infinite, or an asymmetric pattern) is no extended metric: a
    ValidationError names the pair. A finite matrix is one class (no graph is built).
    """
    d = np.asarray(distances, dtype=np.float64)
    n = d.shape[0]
    finite = np.isfinite(d)
    if finite.all():
        return 1, np.zeros(n, dtype=np.intp)
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    count, comp = connected_components(csr_matrix(finite), directed=False)
    comp = np.asarray(comp, dtype=np.intp)
    wrong = finite != (comp[:, None] == comp[None, :])
    if wrong.any():
        i, j = (int(x) for x in np.argwhere(wrong)[0])
        names = labels if labels is not None else range(n)
        a, b = (repr(str(list(names)[k])) for k in (i, j))  # type: ignore[call-overload]
        raise ValidationError(
            f"{name} is infinite at ({a}, {b}) but a chain of finite distances joins them (or d is "
            "asymmetric there): infinite distances must separate whole components (an extended metric)"
        )
    return int(count), comp


def _split(d: NDArray[np.float64]) -> tuple[int, list[NDArray[np.intp]]] | None:
    """None on a finite metric; else (number of components, the index sets of those with >= 2 points)."""
    count, comp = finite_components(d)
    if count == 1:
        return None
    order = np.argsort(comp, kind="stable")
    sizes = np.bincount(comp, minlength=count)
    groups = np.split(order, np.cumsum(sizes)[:-1])
    return count, [g for g in groups if len(g) >= 2]


def _unprotected(n: int, groups: list[NDArray[np.intp]]) -> int:
    """Unordered pairs at infinite distance: all pairs minus those inside a component."""
    return n * (n - 1) // 2 - sum(len(g) * (len(g) - 1) // 2 for g in groups)


def _workers() -> int:
    return scan_threads()


def audit(matrix: ArrayLike, distances: ArrayLike, *, normalize: bool = False) -> AuditResult:
    """Exact mDP level of ``matrix`` under ``distances`` with a witness triple.

    Parameters
    ----------
    matrix : array of shape (n, m)
        ``matrix[u, w] = Pr[M(u) = w]`` (rows need not be normalised: the audit checks
        the privacy inequalities only); m = n for a square mechanism.
    distances : array of shape (n, n)
        The metric of the inputs.
    normalize : bool
        Audit the row-normalised matrix ``matrix[u, w] / S_u`` instead, with ``S_u`` the
        exact (rational) sum of row u's floats: the distribution the exact sampler
        (:mod:`metricdp.sampling`) realizes. Float rows do not sum to exactly 1; each pair's
        level moves by :math:`(log S_v - log S_u) / d(u, v)`, with the logs from
        :func:`row_log_sums` (independent of the sampler's code).

    Notes
    -----
    A column with zeros and positive entries makes the level infinite (its witness is
    read off directly); an all-zero column constrains nothing. On the other columns every
    ordered pair first gets a rigorous upper bound of its level from two matrix products
    (:func:`_log_ratio_bounds`, O(n^3) flops in BLAS instead of O(n^3) numpy operations);
    then pairs are scanned by decreasing bound, with a fast level and its rounding error,
    until the next bound is no higher than a level already reached; the pairs that can
    still be the maximum are evaluated precisely (:func:`_refine`). Every pair left out
    has a level at most its bound, hence at most the returned level: the result is the
    exact maximum over all pairs, as a precise scan of all n^3 triples would give.

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> m = np.array([[np.e, 1.0], [1.0, np.e]]) / (1 + np.e)
    >>> round(audit(m, d).epsilon, 12)
    1.0
    """
    m, d = _inputs(matrix, distances)
    split = _split(d)
    if split is not None:  # a policy graph: each component's rows on their own (module docstring)
        count, groups = split
        best = AuditResult(0.0, None)
        for g in groups:  # one per component of >= 2 points: each is an independent finite audit
            part = audit(m[g], d[np.ix_(g, g)], normalize=normalize)
            if part.epsilon > best.epsilon:
                u, v, w = part.witness or (0, 0, 0)
                best = AuditResult(part.epsilon, (int(g[u]), int(g[v]), w))
        return AuditResult(best.epsilon, best.witness, count, _unprotected(len(d), groups))
    scale = row_log_sums(m) if normalize else None
    positive = m > 0
    mixed = np.flatnonzero(positive.any(axis=0) & ~positive.all(axis=0))
    if mixed.size:
        w = int(mixed[0])
        u, v = int(np.argmax(positive[:, w])), int(np.argmin(positive[:, w]))
        return AuditResult(float("inf"), (u, v, w))
    full = positive.all(axis=0)
    if not full.any():
        return AuditResult(0.0, None)
    logm = np.log(m[:, full])
    bound = _log_ratio_bounds(logm)
    if scale is not None:
        _add_scale(bound, scale)
    off = ~np.eye(m.shape[0], dtype=bool)
    np.divide(bound, d, out=bound, where=off)
    bound[~off] = -np.inf
    return _refine(m, logm, d, bound, scale)


def row_log_sums(matrix: ArrayLike) -> NDArray[np.float64]:
    r"""``log S_u`` for the exact sum :math:`S_u` of each row's floats (as rationals).

    ``math.fsum`` returns the correctly rounded value of an exact sum of floats (Shewchuk's
    algorithm), so :math:`\delta_u` = ``fsum(row + [-1])`` is :math:`S_u - 1` to within half
    an ulp of itself, and ``log1p`` of it errs by a few ulps of :math:`\log S_u`: for a
    row summing to 1 within :math:`10^{-9}` (what ``check_stochastic`` allows) the error is
    below :math:`10^{-23}` nats, far under the audit's own rounding allowance. Rows far from 1
    take ``log(fsum(row))`` (relative error a few ulps, plus :math:`2^{-53}`).
    """
    m = np.asarray(matrix, dtype=np.float64)
    out = np.empty(m.shape[0])
    for u, row in enumerate(m):
        total = math.fsum(row)
        if not total > 0:
            raise ValidationError(f"matrix row {u} sums to {total!r}: it cannot be normalised")
        out[u] = math.log1p(math.fsum(itertools.chain(row, (-1.0,)))) if 0.5 <= total <= 2.0 else math.log(total)
    return out


def _add_scale(levels: NDArray, scale: NDArray) -> None:
    """levels[u, v] += log S_v - log S_u (in place): the normalised matrix's log-ratios."""
    levels += scale[None, :]
    levels -= scale[:, None]


def _refine(m: NDArray, logm: NDArray, d: NDArray, bound: NDArray, scale: NDArray | None = None) -> AuditResult:
    r"""The exact maximum level, given an upper bound of every pair's level.

    Pairs are scanned by decreasing bound with the fast level
    :math:`\max_w (\log m_{uw} - \log m_{vw}) / d(u,v)`, which errs by at most
    ``err = 16 ulp(max |log m|) / d(u,v)``; ``floor``, the largest fast level minus its
    error, is a lower bound of the answer (and at least 0: the audited epsilon is never
    negative). The scan stops at the first bound <= floor: every pair left out has a
    level at most floor, which a scanned pair reaches. The maximum is then among the
    scanned pairs whose fast level plus error reaches floor, and those are evaluated
    precisely (:func:`_precise_pair_levels`).
    """
    n = m.shape[0]
    flat = bound.ravel()  # our own array: scanned pairs are marked -inf in it
    shift = np.zeros(n) if scale is None else scale
    slack = _fast_slack(float(np.abs(logm).max()) + 2 * float(np.abs(shift).max()))
    chunk = max(1, _BLOCK_ELEMENTS // (2 * logm.shape[1]))
    step = chunk * _workers()
    floor = 0.0
    kept: list[tuple[NDArray, NDArray]] = []

    def fast(idx: NDArray) -> tuple[NDArray, NDArray]:
        us, vs = np.divmod(idx, n)
        diff = logm[us]
        diff -= logm[vs]
        dist = d[us, vs]
        return (diff.max(axis=1) + (shift[vs] - shift[us])) / dist, slack / dist

    def scan(order: NDArray, pool: ThreadPoolExecutor) -> bool:
        """Scan ``order`` (decreasing bounds) step by step; False once a bound <= floor."""
        nonlocal floor
        for start in range(0, len(order), step):
            if flat[order[start]] <= floor:
                return False
            parts = [order[s : s + chunk] for s in range(start, min(start + step, len(order)), chunk)]
            for idx, (lev, err) in zip(parts, pool.map(fast, parts), strict=True):
                floor = max(floor, float(np.max(lev - err)))
                kept.append((idx, lev + err))
        return True

    with ThreadPoolExecutor(_workers()) as pool:
        # The highest bounds first: their levels usually rule out almost every other pair.
        top = np.argpartition(-flat, min(step, flat.size - 1))[:step]
        top = top[np.argsort(-flat[top], kind="stable")]
        top = top[flat[top] > 0]
        if scan(top, pool) and len(top) == step:
            flat[top] = -np.inf
            rest = np.flatnonzero(flat > floor)
            if len(rest) > n * n // 16:
                # Most pairs still open (a matrix whose pairs are all near its level):
                # one dense pass over every pair costs less than gathering rows.
                levels, err = _pair_levels(m[:, m[0] > 0], d, scale)  # the full columns
                floor = max(floor, float(np.max(levels - err)))
                upper = (levels + err).ravel()
                idx = np.flatnonzero(upper >= floor)
                kept = [(idx, upper[idx])]
            else:
                scan(rest[np.argsort(-flat[rest], kind="stable")], pool)
    best, witness = 0.0, None
    for idx, upper in kept:
        idx = idx[upper >= floor]
        for s in range(0, len(idx), _pair_chunk(m.shape[1])):
            sub = idx[s : s + _pair_chunk(m.shape[1])]
            us, vs = np.divmod(sub, n)
            lev, ws = _precise_pair_levels(m[us], m[vs], d[us, vs], shift[vs] - shift[us])
            i = int(np.argmax(lev))
            if lev[i] > best:
                best, witness = float(lev[i]), (int(us[i]), int(vs[i]), int(ws[i]))
    return AuditResult(best, witness)


#: Powers p of the two bounds of :func:`_log_ratio_bounds`: a small p stays tight where
#: log-ratios spread over hundreds of nats, a large p where they do not.
_POWERS = (4.0, 32.0)
#: Absolute slack (nats) added to every bound; the rounding it covers is below 1e-11.
_BOUND_MARGIN = 1e-9


def _log_ratio_bounds(logm: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""Upper bounds ``B[u, v] >= g(u, v) = max_w log(m[u,w] / m[v,w])``, shape (n, n).

    ``logm`` is ``np.log(m)`` of a strictly positive m (n rows, k columns). For p > 0 the maximum is at most
    the power mean: :math:`e^{p\,g(u,v)} \le \sum_w (m[u,w]/m[v,w])^p`. With
    :math:`\ell = \log m`, column centres :math:`c_w` (the column means),
    :math:`\alpha_u = \max_w (\ell_{uw} - c_w)` and :math:`\beta_v = \max_w (c_w - \ell_{vw})`,

    .. math:: \sum_w e^{p(\ell_{uw} - \ell_{vw})} = e^{p(\alpha_u + \beta_v)} (A B^T)_{uv},
              \quad A_{uw} = e^{p(\ell_{uw} - c_w - \alpha_u)},\ B_{vw} = e^{p(c_w - \ell_{vw} - \beta_v)},

    and A, B lie in [0, 1], so nothing overflows and :math:`A B^T` is one BLAS product.
    Hence :math:`g(u,v) \le \alpha_u + \beta_v + \log((A B^T)_{uv}) / p`, within
    :math:`\log(k)/p` of g when no term underflows, and also (each term being at most 1)
    :math:`g(u,v) \le \alpha_u + \beta_v`; the smallest of these bounds, for the powers
    in ``_POWERS``, is returned.

    **Rounding.** Every :math:`|\ell| \le 745`, so the computed arguments
    :math:`\ell - c - \alpha` (three roundings of numbers below 2,910 in absolute value)
    err by less than :math:`2^{-53}\cdot 9000 < 10^{-12}` and log by at most 4 ulp
    (< 7e-13); p (a power of two: exact) times that and exp's few ulps change each factor
    by a relative :math:`e^{64\cdot 10^{-12}}`; the sum of
    k non-negative products errs by at most :math:`k\, 2^{-53}` relative. A factor or
    product below :math:`2^{-1022}` may be flushed to zero (underflow, or denormals read as
    zero): each of the k terms then loses at most :math:`2^{-990}`, which is added back as
    :math:`k\,2^{-990}`. With the relative error folded in as a factor :math:`1 + 2k\,2^{-52}`,
    every remaining error is below :math:`10^{-11}` nats, and ``_BOUND_MARGIN`` (1e-9) is
    added to the result. So B is an upper bound of the exact real g of the float matrix.
    """
    n, k = logm.shape
    c = logm.mean(axis=0)
    ell = logm - c  # ell_uw - c_w
    alpha = ell.max(axis=1)
    beta = (-ell).max(axis=1)
    relative = 1.0 + 2.0 * k * np.finfo(np.float64).eps
    lost = k * 2.0**-990
    out = np.full((n, n), np.inf)
    rows = max(1, _BLOCK_ELEMENTS // max(n, k))
    with np.errstate(under="ignore"):  # underflow is accounted for by `lost`
        for p in _POWERS:
            b_factor = np.exp(p * (-ell - beta[:, None]))
            for start in range(0, n, rows):
                sl = slice(start, start + rows)
                t = np.exp(p * (ell[sl] - alpha[sl, None])) @ b_factor.T
                t *= relative
                t += lost
                np.log(t, out=t)
                t /= p
                trivial = alpha[sl, None] + beta[None, :]
                t += trivial
                np.minimum(t, trivial, out=t)  # every term is at most 1
                t += _BOUND_MARGIN
                np.minimum(out[sl], t, out=out[sl])
    return out


def _fast_slack(largest: float) -> float:
    """Error bound of g = log m[u,w] - log m[v,w] when max |log m| = ``largest`` (see _pair_levels)."""
    return _FAST_ULPS * np.finfo(np.float64).eps * max(largest, 1.0)


def _pair_chunk(k: int) -> int:
    """Pairs per chunk of the precise levels: four (pairs, k) temporaries, k = outputs."""
    return max(1, _BLOCK_ELEMENTS // (4 * k))


def _precise_log_ratio(a: NDArray, b: NDArray) -> NDArray:
    """log(a / b) for positive a, b, accurate to a few ulps of the result.

    Within a factor 2, a - b is exact (Sterbenz's lemma), so log1p((a - b) / b) carries
    only the rounding of one division and of log1p, relative to the result itself, even
    when a / b is within 1e-15 of 1. Outside it, |log(a / b)| >= log 2 and
    log a - log b errs by a few ulps of |log a| <= 745, i.e. < 1e-12 of the result.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        near = (a <= 2 * b) & (b <= 2 * a)
        far = np.log(np.where(near, 1.0, a)) - np.log(np.where(near, 1.0, b))
        close = np.log1p(np.where(near, (a - b) / np.where(near, b, 1.0), 0.0))
    return np.where(near, close, far)


def _precise_pair_levels(
    a: NDArray, b: NDArray, dist: NDArray, shift: NDArray | None = None
) -> tuple[NDArray, NDArray[np.intp]]:
    """Level (max_w log(a_w / b_w) + shift) / dist of each row pair, and the maximising w.

    ``shift`` (log S_v - log S_u for the normalised matrix) does not depend on w.
    """
    pos = a > 0
    ratio = np.where(pos & (b > 0), _precise_log_ratio(np.where(pos, a, 1.0), np.where(b > 0, b, 1.0)), -np.inf)
    ratio = np.where(pos & (b == 0), np.inf, ratio)
    ws = np.argmax(ratio, axis=1)
    best = ratio[np.arange(len(a)), ws]
    if shift is not None:
        best = best + shift
    return best / dist, ws


def _pair_levels(
    m: NDArray[np.float64], d: NDArray[np.float64], scale: NDArray | None = None
) -> tuple[NDArray, NDArray]:
    """Fast mDP level of every ordered pair ((n, n), -inf on the diagonal) and its error bound.

    The division by d(u,v) does not depend on w, so the level of a pair is
    g(u, v) / d(u, v) with g(u, v) = max_w log M[u,w] - log M[v,w]: one subtraction and
    one max per triple. Zeros become a sentinel far below any log of a positive float64
    (>= -745), so M[u,w] > 0 = M[v,w] gives g >= 1e300 - 745 (read as infinite) and
    0 = M[u,w] contributes nothing. Each log errs by at most 4 ulp of its value (numpy's
    documented bound for its SIMD functions), the subtraction and
    the division by another ulp each, so |level - true level| <= 16 ulp(max |log M|) / d,
    the returned error bound (``_FAST_ULPS``): small against the level unless
    eps d(u, v) is tiny, which is when the candidates are recomputed precisely.
    """
    n, k = m.shape
    positive = m > 0
    with np.errstate(divide="ignore"):
        logm = np.where(positive, np.log(np.where(positive, m, 1.0)), _ZERO_LOG)
    block = max(1, _BLOCK_ELEMENTS // (n * k))  # (block, n, k) temporaries
    gap = np.empty((n, n))

    def scan(start: int) -> None:
        rows = logm[start : start + block]
        gap[start : start + block] = (rows[:, None, :] - logm[None, :, :]).max(axis=2)

    with ThreadPoolExecutor(_workers()) as pool:
        list(pool.map(scan, range(0, n, block)))
    off = ~np.eye(n, dtype=bool)
    if scale is not None:  # the normalised matrix: g(u, v) + log S_v - log S_u (finite gaps only)
        _add_scale(gap, scale)
    levels = np.full((n, n), -np.inf)
    levels[off] = np.where(gap[off] > _INFINITE_GAP, np.inf, gap[off] / d[off])
    largest = float(np.abs(logm[positive]).max()) if positive.any() else 0.0
    slack = _fast_slack(largest + (0.0 if scale is None else 2 * float(np.abs(scale).max())))
    err = np.where(off, slack / np.where(off, d, 1.0), 0.0)
    return levels, err


def audit_epsilon(matrix: ArrayLike, distances: ArrayLike, *, normalize: bool = False) -> float:
    """The smallest epsilon at which ``matrix`` is exactly epsilon-mDP (``inf`` if none).

    ``normalize`` as in :func:`audit`: the level of the rows divided by their exact sums.
    """
    return audit(matrix, distances, normalize=normalize).epsilon


def hockey_stick(matrix: ArrayLike, distances: ArrayLike, epsilon: float) -> NDArray[np.float64]:
    r"""All pairwise hockey-stick divergences at ``epsilon``, shape (n, n) for an (n, m) matrix.

    ``out[u, v] = sum_w max(0, M[u,w] - exp(epsilon d(u,v)) M[v,w])``: the largest
    :math:`\Pr[M(u)\in S] - e^{\varepsilon d(u,v)} \Pr[M(v)\in S]` over sets S.
    """
    m, d = _inputs(matrix, distances)
    split = _split(d)
    if split is None:
        return _hockey_rows(m, d, float(epsilon), np.arange(m.shape[0]))
    # at d = inf, e^{eps d} M[v, w] is inf where M[v, w] > 0 and 0 where it is 0 (the limit):
    # the divergence is the mass of M(u) outside the support of M(v)
    out = m @ (m == 0).T.astype(np.float64)
    for g in split[1]:
        out[np.ix_(g, g)] = _hockey_rows(m[g], d[np.ix_(g, g)], float(epsilon), np.arange(len(g)))
    np.fill_diagonal(out, 0.0)
    return out


def _hockey_rows(m: NDArray, d: NDArray, epsilon: float, rows: NDArray[np.intp]) -> NDArray[np.float64]:
    n, k = m.shape
    out = np.empty((len(rows), n))
    block = max(1, _BLOCK_ELEMENTS // (n * k))  # (block, n, k) temporaries

    def work(start: int) -> None:
        us = rows[start : start + block]
        scale = np.exp(np.minimum(epsilon * d[us], 700.0))  # (b, v); capped: no inf * 0
        diff = m[us][:, None, :] - scale[:, :, None] * m[None, :, :]  # (b, v, w)
        np.maximum(diff, 0.0, out=diff)
        out[start : start + block] = diff.sum(axis=2)

    with ThreadPoolExecutor(_workers()) as pool:
        list(pool.map(work, range(0, len(rows), block)))
    return out


def _pair_tight(a: NDArray, b: NDArray, dist: NDArray, delta: float) -> NDArray[np.float64]:
    """Exact smallest eps >= 0 with sum_w max(0, a_w - e^{eps d} b_w) <= delta, per pair row.

    As a function of t = e^{eps d}, the divergence is convex, piecewise linear and
    non-increasing, with breakpoints at the ratios r_w = a_w / b_w. With the ratios
    sorted in decreasing order, the divergence at t = r_k is sum_{j<k} (a_j - r_k b_j),
    non-decreasing in k; K = the last k where it is <= delta puts the solution on the piece
    [r_{K+1}, r_K] where the terms j <= K are active: t* = (A_K - delta) / B_K with the
    inclusive cumulative sums A_K, B_K.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(b > 0, a / b, np.where(a > 0, np.inf, 0.0))
    order = np.argsort(-r, axis=1, kind="stable")
    rs = np.take_along_axis(r, order, axis=1)
    a_s = np.take_along_axis(a, order, axis=1)
    b_s = np.take_along_axis(b, order, axis=1)
    big_a = np.cumsum(a_s, axis=1)
    big_b = np.cumsum(b_s, axis=1)
    # divergence at t = r_k (k = 0..n-1, zero based): terms j < k
    prev_a = np.concatenate([np.zeros((len(a), 1)), big_a[:, :-1]], axis=1)
    prev_b = np.concatenate([np.zeros((len(a), 1)), big_b[:, :-1]], axis=1)
    with np.errstate(invalid="ignore"):
        hs_at = np.where(np.isinf(rs), np.inf, prev_a - np.where(prev_b > 0, rs * prev_b, 0.0))
    hs_at = np.where(np.isinf(rs) & (prev_b == 0), prev_a, hs_at)
    # infinite ratios always contribute a_w; if they alone exceed delta: infinite
    inf_mass = np.where(np.isinf(rs), a_s, 0.0).sum(axis=1)
    ok = hs_at <= delta
    # K = the last k with hs(r_k) <= delta (hs(r_0) = 0, so one exists)
    k_count = ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
    # on the piece [r_{K+1}, r_K] the terms j <= K are active (inclusive cumulative sums)
    idx = np.arange(len(a))
    act_a = big_a[idx, k_count]
    act_b = big_b[idx, k_count]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = np.where(act_b > 0, (act_a - delta) / act_b, 0.0)
    t = np.where(act_a <= delta, 0.0, t)
    with np.errstate(divide="ignore"):
        eps = np.where(t > 1.0, np.log(np.maximum(t, 1.0)) / dist, 0.0)
    return np.where(inf_mass > delta, np.inf, eps)


def epsilon_tight(matrix: ArrayLike, distances: ArrayLike, delta: float = 1e-3) -> float:
    r"""The smallest :math:`\varepsilon \ge 0` at which ``matrix`` is :math:`(\varepsilon,\delta)`-mDP.

    Exact: pairs are first screened by bisection on the global level (a pair whose
    divergence is <= delta at a level below the answer cannot set the maximum), then
    the surviving pairs are solved exactly by :func:`_pair_tight`.

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> m = np.array([[0.75, 0.25], [0.25, 0.75]])
    >>> round(epsilon_tight(m, d, 0.0), 12) == round(float(np.log(3)), 12)
    True
    """
    delta = check_delta(delta)
    m, d = _inputs(matrix, distances)
    split = _split(d)
    if split is not None:  # a policy graph: the pairs at finite distance, component by component
        return max((epsilon_tight(m[g], d[np.ix_(g, g)], delta) for g in split[1]), default=0.0)
    n = m.shape[0]
    if delta == 0.0:
        return audit(m, d).epsilon
    # Every pair's delta = 0 level (from the audit) bounds its level at any delta from
    # above. Pairs are taken by decreasing bound; a pair whose bound is <= the best exact
    # level found so far cannot raise it, so the scan stops there. Within a chunk, pairs
    # whose divergence at the current best is already <= delta are dropped before the
    # exact (sorting) solve.
    levels, err = _pair_levels(m, d)
    u_idx, v_idx = np.nonzero(levels + err > 0)
    bound = (levels + err)[u_idx, v_idx]
    order = np.argsort(-bound, kind="stable")
    u_idx, v_idx, bound = u_idx[order], v_idx[order], bound[order]
    best = 0.0
    chunk = max(4 * n, 1)
    for start in range(0, len(bound), chunk):
        if bound[start] <= best:
            break
        sl = slice(start, start + chunk)
        us, vs, bs = u_idx[sl], v_idx[sl], bound[sl]
        keep = bs > best
        us, vs = us[keep], vs[keep]
        keep = _pair_hockey(m, d, best, us, vs) > delta
        us, vs = us[keep], vs[keep]
        for s in range(0, len(us), _pair_chunk(m.shape[1])):
            part = slice(s, s + _pair_chunk(m.shape[1]))
            eps = _pair_tight(m[us[part]], m[vs[part]], d[us[part], vs[part]], delta)
            best = max(best, float(eps.max()))
    return best


def _pair_hockey(m: NDArray, d: NDArray, epsilon: float, us: NDArray[np.intp], vs: NDArray[np.intp]) -> NDArray:
    """Hockey-stick divergence of the listed ordered pairs at ``epsilon``, in chunks."""
    out = np.empty(len(us))
    chunk = max(1, _BLOCK_ELEMENTS // m.shape[1])
    scale = np.exp(np.minimum(epsilon * d[us, vs], 700.0))

    def work(start: int) -> None:
        sl = slice(start, start + chunk)
        diff = m[us[sl]] - scale[sl, None] * m[vs[sl]]
        np.maximum(diff, 0.0, out=diff)
        out[sl] = diff.sum(axis=1)

    with ThreadPoolExecutor(_workers()) as pool:
        list(pool.map(work, range(0, len(us), chunk)))
    return out
