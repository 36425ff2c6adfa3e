r"""Packing lower bounds on the loss of every :math:`\varepsilon`-mDP mechanism.

Imola, Kasiviswanathan, White, Aggarwal, Teissier, "Balancing utility and scalability
in metric differential privacy", UAI 2022, Theorem 3 (eqs. 7 and 8), with two
strengthenings proved below: the radius :math:`r^*` of a packing *in the finite space*
(instead of half the packing's separation) and a bound on the quantile loss
:math:`L_q` (the paper bounds only the worst case :math:`L`).

Definitions
-----------
For a finite metric space :math:`(W, d)` and :math:`S \subseteq W`, the closed balls are
:math:`B(s, r) = \{y \in W : d(s, y) \le r\}` and

.. math::

    N(w, S) = \sum_{s \in S} e^{-\varepsilon d(w, s)}, \qquad
    r^*(S) = \min_{s \ne s' \in S} \; \min_{y \in W} \max(d(s, y), d(s', y)).

The balls :math:`B(s, r)`, :math:`s \in S`, are pairwise disjoint for every
:math:`r < r^*(S)`: a common point y of B(s, r) and B(s', r) has
:math:`\max(d(s,y), d(s',y)) \le r < r^*`. Always :math:`d(s,s')/2 \le r^*` for the
closest pair (triangle inequality) and :math:`r^* \le \min d(s,s')` (take y = s'); for a
two-point space at distance D, :math:`r^* = D` where the paper's packing radius is D/2.

Theorem (worst case). For every :math:`\varepsilon`-mDP M and every S with
:math:`|S| \ge 2`,

.. math::

    L(M) \ge r^* \max_{w \in W} \Bigl(1 - \frac{1}{N(w, S)}\Bigr)   \quad\text{(eq. 7)},
    \qquad
    L(M) \ge r^* \Bigl(1 - \frac{1}{1 + (|S|-1) e^{-\varepsilon Q}}\Bigr) \quad\text{(eq. 8)},

with :math:`Q = \max_{s, s' \in S} d(s, s')`.

*Proof.* Fix :math:`r < r^*` and :math:`w \in W`. For :math:`s \in S`,
:math:`L(M) \ge L(M, s) = \sum_v d(s,v) M[s,v] \ge r \Pr[M(s) \notin B(s, r)]`, so
:math:`\Pr[M(s) \in B(s,r)] \ge 1 - L(M)/r`. By mDP, applied to every output in the
ball, :math:`\Pr[M(w) \in B(s,r)] \ge e^{-\varepsilon d(w,s)} \Pr[M(s) \in B(s,r)]`. The
balls are disjoint, so

.. math::

    1 \ge \sum_{s \in S} \Pr[M(w) \in B(s,r)] \ge (1 - L(M)/r)\, N(w, S),

which gives :math:`L(M) \ge r (1 - 1/N(w,S))` (trivially true when L(M) >= r). The
right-hand side is continuous in r, so it holds at :math:`r = r^*` too. Eq. 8 is eq. 7
at :math:`w \in S`, where :math:`N(w,S) \ge 1 + (|S|-1) e^{-\varepsilon Q}`; it is never
larger than eq. 7 and is reported only for comparison with the paper.

Theorem (quantile). Let :math:`L_q(M)` be the inverted-CDF quantile of
:mod:`metricdp.loss`: the :math:`\lceil qn \rceil`-th smallest of the n element losses
(:func:`metricdp.loss.quantile_rank`). Then
:math:`G = \{w : L(M, w) \le L_q(M)\}` has :math:`|G| \ge \lceil qn \rceil`, so at most
:math:`k = n - \lceil qn \rceil` points lie outside G, and

.. math::

    L_q(M) \ge r^* \max_{w \in W} \Bigl(1 - \frac{1}{N_k(w, S)}\Bigr), \qquad
    N_k(w, S) = N(w, S) - (\text{sum of the } k \text{ largest } e^{-\varepsilon d(w,s)},\ s \in S),

where a term with :math:`N_k(w,S) \le 1` contributes 0.

*Proof.* Repeat the proof above with the packing points inside G only: for
:math:`s \in S \cap G`, :math:`\Pr[M(s) \in B(s,r)] \ge 1 - L(M,s)/r \ge 1 - L_q(M)/r`,
hence :math:`1 \ge (1 - L_q(M)/r) \sum_{s \in S \cap G} e^{-\varepsilon d(w,s)}`. At most k
points of S are outside G, so the sum is at least :math:`N_k(w,S)` (removing the k
largest terms is the worst case). If :math:`N_k > 1` this gives
:math:`L_q(M) \ge r(1 - 1/N_k)` (trivially when :math:`L_q \ge r`); let
:math:`r \to r^*`. At q = 1, k = 0 and the bound is the worst-case one: both functions
share one code path, so they return the same value.

Candidate packings
------------------
The bound holds for every S; the strongest over these candidates is reported:

* the prefixes :math:`S_c` (c = 2..n) of a farthest-point (k-center, Gonzalez) order that
  starts at the two farthest points (so :math:`S_2` is the paper's two-farthest-points
  packing), with :math:`r^*(S_c)` maintained incrementally;
* every pair {s, s'} (worst case only: for q < 1 a pair gives 0). For a pair the maximum
  over w is attained at an endpoint (:math:`e^{-a} + e^{-b} \le 1 + e^{-(a+b)}` and
  :math:`a + b \ge d(s,s')`), so the pair bound is
  :math:`r^*(\{s,s'\}) / (1 + e^{\varepsilon d(s,s')})`. Pairs are scanned in decreasing
  order of the upper bound :math:`d/(1 + e^{\varepsilon d})` (since :math:`r^* \le d`) and
  the scan stops as soon as no remaining pair can win, so the pair search is exact.

Including every pair makes the result never weaker than
:math:`\tfrac{\rho}{2}\, e^{-\varepsilon\rho}/(1 + e^{-\varepsilon\rho})` for
:math:`\rho = r^*` of the two farthest points (and than the paper's form with the
diameter D in place of :math:`\rho`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from ._validation import check_epsilon, check_quantile
from .loss import quantile_rank
from .spaces import MetricSpace, check_space

__all__ = ["PackingBound", "lower_bound", "lower_bound_quantile", "packing_radius"]

_BLOCK = 256  # columns of the (n, block) working arrays
_PAIR_CHUNK = 512  # pairs per exact r* evaluation in the pair scan


@dataclass(frozen=True)
class PackingBound:
    """A lower bound on the loss of every eps-mDP mechanism and the packing behind it.

    Attributes
    ----------
    value : float
        The bound (same unit as the distances).
    packing : ndarray of int
        Indices of the packing S that achieved it (empty when ``value`` is 0).
    radius : float
        :math:`r^*(S)` (0 when ``value`` is 0).
    kind : str
        ``"eq7"`` (Theorem 3 eq. 7 on a k-center packing), ``"eq8"``, ``"two-point"``
        (eq. 7 on a pair found by the exact pair scan) or ``"none"`` (no candidate gives
        a positive bound: the quantile bound when too many points may lie outside G).
    witness : int
        The w attaining the maximum over w (-1 with ``kind="none"``).
    epsilon : float
    quantile : float
        1.0 for the worst-case bound.
    dropped : int
        k, the number of largest terms removed from N(w, S) (0 for the worst case).
    """

    value: float
    packing: NDArray[np.intp] = field(repr=False)
    radius: float
    kind: str
    witness: int = -1
    epsilon: float = math.nan
    quantile: float = 1.0
    dropped: int = 0

    def as_dict(self) -> dict[str, object]:
        """JSON-serialisable summary (what ``metricdp evaluate --json`` can print)."""
        return {
            "value": self.value,
            "packing": [int(i) for i in self.packing],
            "radius": self.radius,
            "kind": self.kind,
            "witness": self.witness,
            "epsilon": self.epsilon,
            "quantile": self.quantile,
            "dropped": self.dropped,
        }


def packing_radius(distances: NDArray[np.float64], packing: NDArray[np.intp]) -> float:
    r"""Exact :math:`r^*(S) = \min_{s \ne s'} \min_y \max(d(s,y), d(s',y))` (inf if |S| < 2).

    Blocked over the pairs of S: O(|S|^2 n) time, O(block n) memory.
    """
    d = np.asarray(distances, dtype=np.float64)
    s = np.asarray(packing, dtype=np.intp)
    if len(s) < 2:
        return math.inf
    i, j = np.triu_indices(len(s), 1)
    best = math.inf
    for a in range(0, len(i), _PAIR_CHUNK):
        rows_i, rows_j = s[i[a : a + _PAIR_CHUNK]], s[j[a : a + _PAIR_CHUNK]]
        best = min(best, float(np.maximum(d[rows_i], d[rows_j]).min()))
    return best


def _farthest_first(d: NDArray[np.float64]) -> NDArray[np.intp]:
    """Gonzalez order starting at the two farthest points (ties: smallest index)."""
    n = len(d)
    a = int(np.unravel_index(int(np.argmax(d)), d.shape)[0])
    order = np.empty(n, dtype=np.intp)
    order[0] = a
    gap = d[a].copy()
    for k in range(1, n):  # O(n) per step, n steps: O(n^2)
        nxt = int(np.argmax(gap))
        order[k] = nxt
        np.minimum(gap, d[nxt], out=gap)
    return order


def _prefix_radii(d: NDArray[np.float64], order: NDArray[np.intp]) -> NDArray[np.float64]:
    r"""``radii[c - 1] = r*(first c points of order)`` (inf for c = 1), incrementally.

    Adding point p can only lower r* through a pair (p, s) with
    :math:`\max(d(p,y), d(s,y)) < r^*` for some y: it needs d(p, y) < r* (so only such y
    are scanned) and d(p, s) < 2 r* (because max(d(p,y), d(s,y)) >= d(p,s)/2).
    """
    n = len(order)
    radii = np.full(n, np.inf)
    cur = math.inf
    for k in range(1, n):
        p = order[k]
        prev = order[:k]
        if math.isinf(cur):
            cand, ys = prev, np.arange(n)
        else:
            cand = prev[d[p, prev] < 2.0 * cur]
            ys = np.flatnonzero(d[p] < cur)
        if cand.size and ys.size:
            cur = min(cur, float(np.maximum(d[p, ys][None, :], d[np.ix_(cand, ys)]).min()))
        radii[k] = cur
    return radii


def _ratio(nm1: NDArray[np.float64]) -> NDArray[np.float64]:
    """1 - 1/N from N - 1 (kept separately so that N = 1 + tiny is not rounded to 1)."""
    return nm1 / (1.0 + nm1)


def _prefix_worst(
    d: NDArray[np.float64], order: NDArray[np.intp], radii: NDArray[np.float64], epsilon: float
) -> tuple[float, int, int]:
    """Best eq. 7 value over the prefixes: (value, c, witness w)."""
    n = len(order)
    pos = np.empty(n, dtype=np.intp)
    pos[order] = np.arange(n)
    running = np.zeros(n)  # sum over the prefix of exp(-eps d(w, s)), self term excluded
    best, best_c, best_w = 0.0, 0, -1
    for start in range(0, n, _BLOCK):
        cols = order[start : start + _BLOCK]
        terms = np.exp(-epsilon * d[:, cols])
        terms[cols, np.arange(len(cols))] = 0.0  # self term (= 1) handled through `inside`
        cum = np.cumsum(terms, axis=1)
        cum += running[:, None]
        running = cum[:, -1].copy()
        c = np.arange(start, start + len(cols))  # prefix sizes c + 1
        inside = pos[:, None] <= c[None, :]
        nm1 = np.where(inside, cum, cum - 1.0)  # N(w, S) - 1
        wbest = np.argmax(nm1, axis=0)
        finite = np.where(np.isfinite(radii[c]), radii[c], 0.0)  # c = 1: no pair, no bound
        vals = finite * _ratio(nm1[wbest, np.arange(len(c))])
        j = int(np.argmax(vals))
        if vals[j] > best:
            best, best_c, best_w = float(vals[j]), int(c[j]) + 1, int(wbest[j])
    return best, best_c, best_w


def _prefix_quantile(
    d: NDArray[np.float64], order: NDArray[np.intp], radii: NDArray[np.float64], epsilon: float, drop: int
) -> tuple[float, int, int]:
    """Best quantile value over the prefixes with the ``drop`` largest terms removed.

    A running top-``drop`` buffer per w (shape (n, drop)) holds the largest terms of the
    prefix; one O(n drop) vectorised update per added point.
    """
    n = len(order)
    rows = np.arange(n)
    top = np.zeros((n, drop))  # terms are > 0, so zeros are "empty" slots
    top_sum = np.zeros(n)
    total = np.zeros(n)
    best, best_c, best_w = 0.0, 0, -1
    for k in range(n):
        x = np.exp(-epsilon * d[:, order[k]])  # includes the self term 1 at w = order[k]
        total += x
        slot = np.argmin(top, axis=1)
        low = top[rows, slot]
        repl = x > low
        top[rows[repl], slot[repl]] = x[repl]
        top_sum += np.where(repl, x - low, 0.0)
        c = k + 1
        if c < drop + 2 or not math.isfinite(radii[k]):
            continue
        nk = total - top_sum
        w = int(np.argmax(nk))
        if nk[w] > 1.0:
            val = float(radii[k] * (1.0 - 1.0 / nk[w]))
            if val > best:
                best, best_c, best_w = val, c, w
    return best, best_c, best_w


def _pair_scan(d: NDArray[np.float64], epsilon: float, floor: float) -> tuple[float, int, int]:
    """Exact best pair bound r*({i,j}) / (1 + exp(eps d_ij)) if it beats ``floor``."""
    upper_all = d * expit(-epsilon * d)  # r* <= d: an upper bound on each pair's value
    i, j = np.nonzero(np.triu(upper_all > floor, 1))  # only pairs that could beat `floor`
    dij, upper = d[i, j], upper_all[i, j]
    order = np.argsort(-upper, kind="stable")
    best, bi, bj = floor, -1, -1
    for a in range(0, len(order), _PAIR_CHUNK):
        sel = order[a : a + _PAIR_CHUNK]
        if upper[sel[0]] <= best:
            break
        r = np.maximum(d[i[sel]], d[j[sel]]).min(axis=1)
        vals = r * expit(-epsilon * dij[sel])
        t = int(np.argmax(vals))
        if vals[t] > best:
            best, bi, bj = float(vals[t]), int(i[sel[t]]), int(j[sel[t]])
    return best, bi, bj


def _exact_value(
    d: NDArray[np.float64], packing: NDArray[np.intp], radius: float, epsilon: float, drop: int
) -> tuple[float, int]:
    """(value, witness) of one packing of radius r*, recomputed without running sums."""
    terms = np.exp(-epsilon * d[:, packing])  # (n, c)
    if drop == 0:
        member = np.zeros(len(d), dtype=bool)
        member[packing] = True
        terms[packing, np.arange(len(packing))] = 0.0
        others = terms.sum(axis=1)
        nm1 = np.where(member, others, others - 1.0)
    else:
        kept = np.sort(terms, axis=1)[:, : len(packing) - drop]  # the c - k smallest terms
        nm1 = kept.sum(axis=1) - 1.0
    w = int(np.argmax(nm1))
    if not (nm1[w] > 0.0) or not math.isfinite(radius):
        return 0.0, -1
    return float(radius * _ratio(nm1[w])), w


def _bound(space: MetricSpace, epsilon: float, q: float) -> PackingBound:
    d = np.asarray(space.distances, dtype=np.float64)
    n = len(d)
    drop = n - quantile_rank(n, q)
    order = _farthest_first(d)
    radii = _prefix_radii(d, order)
    if drop == 0:
        value, c, _ = _prefix_worst(d, order, radii, epsilon)
    else:
        value, c, _ = _prefix_quantile(d, order, radii, epsilon, drop)
    empty = np.empty(0, dtype=np.intp)
    result = PackingBound(0.0, empty, 0.0, "none", -1, epsilon, q, drop)
    if c >= 2:
        packing = np.sort(order[:c])
        radius = float(radii[c - 1])  # exact: the incremental pruning discards no candidate
        value, w = _exact_value(d, packing, radius, epsilon, drop)
        if value > 0.0:
            result = PackingBound(value, packing, radius, "eq7", w, epsilon, q, drop)
            if drop == 0:
                # eq. 8 never beats eq. 7 mathematically (rounding aside); the pair of
                # farthest points starts `order`, so Q = the diameter for c >= 2.
                eq8 = radius * expit(math.log(c - 1) - epsilon * float(d.max()))
                if eq8 > value * (1 + 1e-12):
                    result = PackingBound(float(eq8), packing, radius, "eq8", int(packing[0]), epsilon, q, 0)
    if drop == 0:
        pair_value, a, b = _pair_scan(d, epsilon, result.value)
        if a >= 0 and pair_value > result.value:
            pair = np.array([a, b], dtype=np.intp)
            radius = packing_radius(d, pair)
            value, w = _exact_value(d, pair, radius, epsilon, 0)
            if value > result.value:
                result = PackingBound(value, pair, radius, "two-point", w, epsilon, q, drop)
    return result


def lower_bound(space: MetricSpace, epsilon: float) -> PackingBound:
    r"""Lower bound on the worst-case loss :math:`L(M)` of every eps-mDP mechanism on ``space``.

    Imola et al., UAI 2022, Theorem 3, eqs. 7-8, at the finite-space packing radius
    :math:`r^*` (see the module docstring for the proof that :math:`r^*` is valid, and
    why it is at least the paper's r = D/2 and equals D on a two-point space). The
    strongest bound over the k-center prefixes and every pair is returned.

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
        The mDP level, > 0.

    Returns
    -------
    PackingBound
        ``value`` is the bound; ``packing``, ``radius`` (r*), ``kind`` and ``witness``
        say how it was attained.

    Examples
    --------
    Two points at distance 1: the bound is the exact optimum
    :math:`e^{-\varepsilon}/(1 + e^{-\varepsilon})`.

    >>> from metricdp.spaces import MetricSpace
    >>> b = lower_bound(MetricSpace.from_distances([[0, 1], [1, 0]]), 1.0)
    >>> round(b.value, 12) == round(1 / (1 + math.e), 12), b.radius
    (True, 1.0)
    """
    return _bound(check_space(space), check_epsilon(epsilon), 1.0)


def lower_bound_quantile(space: MetricSpace, epsilon: float, q: float = 0.95) -> PackingBound:
    r"""Lower bound on the quantile loss :math:`L_q(M)` of every eps-mDP mechanism.

    :math:`L_q` is the inverted-CDF quantile of :mod:`metricdp.loss` (the
    :math:`\lceil qn \rceil`-th smallest element loss), so at most
    :math:`k = n - \lceil qn \rceil` elements have a larger loss; the bound is
    :math:`r^* \max_w (1 - 1/N_k(w, S))` with the k largest terms of N(w, S) removed,
    0 where :math:`N_k \le 1` (proof in the module docstring). At q = 1 it equals
    :func:`lower_bound`.

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
    q : float in (0, 1]

    Returns
    -------
    PackingBound
        ``dropped`` is k; ``kind`` is ``"none"`` and ``value`` 0 when no candidate
        packing gives a positive bound.
    """
    space = check_space(space)
    epsilon = check_epsilon(epsilon)
    q = check_quantile(q, name="q")
    return _bound(space, epsilon, q)
