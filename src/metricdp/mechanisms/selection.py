r"""Selection under central differential privacy: the exponential mechanism and the
subsampled exponential mechanism (SSEM) for output spaces too large to enumerate.

Convention (Lantz, Boyd and Page, AISec 2015, Section 2; McSherry and Talwar, FOCS 2007):
a quality :math:`q(D, z)` of output :math:`z` on dataset :math:`D`, with sensitivity

.. math:: \Delta q = \max_{z}\max_{D \sim D'} |q(D, z) - q(D', z)|,

and a parameter :math:`\varepsilon` *in the exponent*. The exponential mechanism (EM)
releases :math:`z` with probability proportional to :math:`\mu(z)\, e^{\varepsilon q(D, z)}`
over the whole output space; the SSEM draws :math:`m` candidates :math:`z_1..z_m`
independently from a base distribution :math:`\mu` that does not depend on the data and
releases :math:`z_i` with probability

.. math:: \frac{e^{\varepsilon q(D, z_i)}}{\sum_{j=1}^m e^{\varepsilon q(D, z_j)}}

(a candidate drawn twice counts twice). Both are :math:`2\varepsilon\Delta q`-DP
(McSherry and Talwar, Theorem 6; Lantz et al., Theorem 4), which is what the functions
here report as ``Selection.epsilon``. Callers either give that total (``epsilon=``) and
get the exponent :math:`\varepsilon_{\text{total}}/(2\Delta q)`, or give the exponent
(``exponent=``) and read the total.

Proof of the SSEM's level (Theorem 4). Fix the candidate list :math:`z_1..z_m`. For
neighbouring :math:`D, D'`, each numerator changes by at most :math:`e^{\varepsilon\Delta q}`
and the denominator, a sum of such terms, by at most :math:`e^{\varepsilon\Delta q}` the
other way, so the probability of releasing index :math:`i` changes by at most
:math:`e^{2\varepsilon\Delta q}`. The released *value* is a sum over the indices holding
it, so the same factor holds for it. The list is drawn from :math:`\mu` independently of
the data, and a mixture, with data-independent weights, of mechanisms that are each
:math:`2\varepsilon\Delta q`-DP is :math:`2\varepsilon\Delta q`-DP. The base must not
depend on the data, or the argument fails. tests/mechanisms/test_selection.py checks the level
exactly on tiny spaces (:func:`subsampled_distribution` enumerates every candidate
multiset).

Accuracy (:func:`candidates_for_accuracy`): see docs/proofs/ssem_accuracy.md.

The metric-DP SSEM of :mod:`metricdp.mechanisms.subsampled` is the special case
:math:`q(x, z) = -d(x, z)`, exponent :math:`\varepsilon/2`, and uses the same core
(:func:`draw_base`, :func:`exponential_choice`, :func:`compositions`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, logsumexp

from .._random import RandomSource, check_rng
from .._validation import check_epsilon, check_int
from ..errors import ResourceLimitError, ValidationError
from ..sampling import draw_exact
from .lattice_laplace import BitStream, bernoulli_exp_minus

__all__ = [
    "Accuracy",
    "Selection",
    "candidates_for_accuracy",
    "compositions",
    "draw_base",
    "exponent_for",
    "exponential_choice",
    "exponential_mechanism",
    "exponential_probabilities",
    "multiset_probabilities",
    "privacy_of",
    "subsampled_distribution",
    "subsampled_exponential_mechanism",
]

#: Largest number of candidate multisets :func:`subsampled_distribution` enumerates.
MAX_MULTISETS = 2_000_000

#: ``quality(data, candidates) -> qualities``: one score per candidate (rows of an array).
Quality = Callable[[Any, NDArray[Any]], ArrayLike]
#: ``base(rng, m) -> candidates``: m independent draws of the data-independent base.
BaseSampler = Callable[[RandomSource, int], NDArray[Any]]


# ------------------------------------------------------------------ accounting
def privacy_of(exponent: float, sensitivity: float) -> float:
    r"""The DP level :math:`2\varepsilon\Delta q` of the EM and the SSEM (Theorem 4).

    >>> privacy_of(0.25, 2.0)
    1.0
    """
    return 2.0 * check_epsilon(exponent, "exponent") * check_epsilon(sensitivity, "sensitivity")


def exponent_for(epsilon: float, sensitivity: float) -> float:
    r"""The exponent :math:`\varepsilon/(2\Delta q)` whose mechanism is ``epsilon``-DP.

    Rounded down where float division rounded up, so that the reported
    :func:`privacy_of` never exceeds ``epsilon``.

    >>> exponent_for(1.0, 2.0)
    0.25
    """
    eps = check_epsilon(epsilon)
    delta = check_epsilon(sensitivity, "sensitivity")
    exponent = eps / (2.0 * delta)
    while 2.0 * exponent * delta > eps:
        exponent = float(np.nextafter(exponent, 0.0))
    return exponent


def _exponent(epsilon: float | None, exponent: float | None, sensitivity: float) -> float:
    if (epsilon is None) == (exponent is None):
        raise ValidationError("give exactly one of epsilon (the total DP level) and exponent")
    if exponent is not None:
        return check_epsilon(exponent, "exponent")
    return exponent_for(float(epsilon), sensitivity)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Selection:
    """One release of :func:`exponential_mechanism` or :func:`subsampled_exponential_mechanism`.

    Attributes
    ----------
    output : object
        The released candidate (a row of the candidates).
    index : int
        Its position among the candidates scored.
    quality : float
        q(D, output) (private: for experiments, not for release).
    epsilon : float
        Total DP level spent, :math:`2\\varepsilon\\Delta q`.
    exponent, sensitivity : float
    candidates : int
        Number of candidates scored (m for the SSEM, the space's size for the EM).
    """

    output: Any
    index: int
    quality: float
    epsilon: float
    exponent: float
    sensitivity: float
    candidates: int


# ------------------------------------------------------------------ core
def exponential_choice(scores: ArrayLike, exponent: float, rng: RandomSource) -> NDArray[np.intp]:
    r"""Index drawn with probability :math:`\propto e^{\varepsilon\,\text{score}}`, per row.

    ``scores`` of shape (m,) gives one index (a 0-d array), shape (r, m) one per row.
    Weights are shifted by each row's largest score (nothing overflows, the best has
    weight 1) and the index is drawn exactly in proportion to the float weights
    (:func:`metricdp.sampling.draw_exact`: random words and integers, no float uniform).
    A row with a weight that ``exp`` would underflow (more than 700 nats below the best) is
    drawn exactly in the log domain instead (:func:`_log_domain_choice`): no candidate's
    weight is ever 0, however deep.

    >>> int(exponential_choice([0.0, -1e9], 1.0, np.random.default_rng(0)))
    0
    """
    s = np.asarray(scores, dtype=np.float64)
    one = s.ndim == 1
    s = np.atleast_2d(s)
    if s.shape[1] == 0:
        raise ValidationError("nothing to choose from: no candidates")
    if not np.all(np.isfinite(s)):
        raise ValidationError("scores must be finite")
    m = s.shape[1]
    with np.errstate(over="ignore"):
        logw = exponent * (s - s.max(axis=1, keepdims=True))  # <= 0, the best at 0
    if np.isneginf(logw).any():
        # a weight e^-inf would be drawn never from these data and maybe from a neighbour's: an
        # unbounded privacy loss. Refused rather than rounded into a false guarantee.
        raise ValidationError(
            f"exponent {exponent:g} times a score gap exceeds the float range: the exponential mechanism's "
            "weights cannot be represented; choose a smaller epsilon"
        )
    pick = np.zeros(s.shape[0], dtype=np.intp)
    if m > 1:
        # rows whose weights all stay normal floats: the vectorised exact table; rows with a
        # weight that exp would underflow: exact in the log domain (no weight is ever 0)
        deep = logw.min(axis=1) < -_LOG_DEEP
        if (~deep).any():
            pick[~deep] = draw_exact(np.exp(logw[~deep]), rng)
        if deep.any():
            bits = BitStream(rng)
            pick[deep] = [_log_domain_choice(row, bits) for row in logw[deep]]
    return pick[0] if one else pick


#: Below this log-weight (relative to the best) ``exp`` leaves the normal floats.
_LOG_DEEP = 700.0


def _log_domain_choice(logw: NDArray[np.float64], bits: BitStream) -> int:
    r"""Index i with probability exactly :math:`e^{a_i} / \sum_j e^{a_j}` for log-weights :math:`a \le 0`.

    Rejection: i uniform (exact integers), accepted with probability :math:`e^{a_i}` by the
    exact Bernoulli(:math:`e^{-\gamma}`) of Canonne, Kamath and Steinke (NeurIPS 2020) on the
    rational :math:`\gamma = -a_i`; the best index has :math:`a = 0` and is always accepted, so
    at most m tries are expected. No weight underflows, however deep.
    """
    m = len(logw)
    while True:
        i = bits.below(m)
        if logw[i] == 0.0 or bernoulli_exp_minus(bits, Fraction(-float(logw[i]))):
            return int(i)


def draw_base(cdf: NDArray[np.float64], u: NDArray[np.float64]) -> NDArray[np.intp]:
    """Indices of a finite base distribution by inverse CDF of uniforms ``u``.

    ``side="right"`` with u scaled by the float total: zero-weight points are never drawn.
    """
    return np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), len(cdf) - 1)


def exponential_probabilities(scores: ArrayLike, exponent: float, base: ArrayLike | None = None) -> NDArray[np.float64]:
    r"""The EM's exact output distribution :math:`\propto \mu(z) e^{\varepsilon q(z)}` (log-sum-exp)."""
    s = np.asarray(scores, dtype=np.float64)
    logw = exponent * s
    if base is not None:
        mu = np.asarray(base, dtype=np.float64)
        logw = logw + np.log(np.where(mu > 0, mu, 1.0)) + np.where(mu > 0, 0.0, -np.inf)
    return np.exp(logw - logsumexp(logw))


def compositions(n: int, m: int) -> NDArray[np.int64]:
    """All count vectors (c_1..c_n) >= 0 with sum m, shape (C(n+m-1, m), n).

    Built one coordinate at a time (a loop over n, vectorised over the partial vectors).
    """
    comps = np.zeros((1, 0), dtype=np.int64)
    left = np.array([m], dtype=np.int64)
    for _ in range(n - 1):
        reps = left + 1
        parent = np.repeat(np.arange(len(comps)), reps)
        offsets = np.repeat(np.cumsum(reps) - reps, reps)
        value = np.arange(int(reps.sum()), dtype=np.int64) - offsets
        comps = np.column_stack([comps[parent], value])
        left = left[parent] - value
    return np.column_stack([comps, left])


def multiset_probabilities(comps: NDArray[np.int64], mu: NDArray[np.float64]) -> NDArray[np.float64]:
    """Multinomial probability of each count vector under m i.i.d. draws from ``mu``."""
    m = int(comps[0].sum())
    log_mu = np.log(np.where(mu > 0, mu, 1.0))
    return np.exp(gammaln(m + 1) - gammaln(comps + 1).sum(axis=1) + (comps * log_mu).sum(axis=1))


def subsampled_distribution(
    scores: ArrayLike, exponent: float, candidates: int, base: ArrayLike | None = None
) -> NDArray[np.float64]:
    r"""The SSEM's exact output distribution on a finite space, by enumerating multisets.

    .. math::

        P[z] = \sum_{c} \binom{m}{c_1 \dots c_N} \prod_j \mu_j^{c_j}
               \frac{c_z e^{\varepsilon q_z}}{\sum_j c_j e^{\varepsilon q_j}}

    over the count vectors c of m draws. ``scores`` may be (N,) or (r, N) (one
    distribution per row, e.g. per dataset).

    Raises
    ------
    ResourceLimitError
        More than ``MAX_MULTISETS`` multisets, C(N + m - 1, m).
    """
    s = np.asarray(scores, dtype=np.float64)
    one = s.ndim == 1
    s = np.atleast_2d(s)
    n = s.shape[1]
    m = check_int(candidates, "candidates", minimum=1)
    mu = np.full(n, 1.0 / n) if base is None else np.asarray(base, dtype=np.float64) / np.sum(base)
    count = math.comb(n + m - 1, m)
    if count > MAX_MULTISETS:
        raise ResourceLimitError(f"{count} candidate multisets (N = {n}, m = {m}) exceed {MAX_MULTISETS}")
    comps = compositions(n, m)
    comps = comps[comps[:, mu == 0].sum(axis=1) == 0]
    prob = multiset_probabilities(comps, mu)
    c = comps.astype(np.float64)
    present = c > 0
    out = np.zeros_like(s)
    for r in range(len(s)):  # rows are datasets (few); the multisets are vectorised
        best = np.where(present, s[r][None, :], -np.inf).max(axis=1, keepdims=True)
        w = np.where(present, np.exp(np.where(present, exponent * (s[r][None, :] - best), 0.0)), 0.0) * c
        out[r] = prob @ (w / w.sum(axis=1, keepdims=True))
    return out[0] if one else out


# ------------------------------------------------------------------ mechanisms
def _scores(quality: Quality, data: Any, cand: NDArray[Any]) -> NDArray[np.float64]:
    q = np.asarray(quality(data, cand), dtype=np.float64)
    if q.shape != (len(cand),):
        raise ValidationError(f"quality must return one score per candidate ({len(cand)}), got shape {q.shape}")
    if not np.all(np.isfinite(q)):
        i = int(np.flatnonzero(~np.isfinite(q))[0])
        raise ValidationError(f"quality of candidate {i} is {q[i]!r}; qualities must be finite")
    return q


def exponential_mechanism(
    data: Any,
    quality: Quality,
    outputs: ArrayLike,
    *,
    sensitivity: float,
    epsilon: float | None = None,
    exponent: float | None = None,
    rng: object = None,
) -> Selection:
    r"""The exponential mechanism over an enumerated output space (uniform base).

    Releases row z of ``outputs`` with probability :math:`\propto e^{\varepsilon q(D,z)}`;
    :math:`2\varepsilon\Delta q`-DP (McSherry and Talwar, FOCS 2007, Theorem 6).

    Parameters
    ----------
    data : object
        The private dataset D, passed to ``quality`` only.
    quality : callable ``(data, outputs) -> scores``
        Vectorised over the rows of ``outputs``; sensitivity at most ``sensitivity``.
    outputs : array (N, ...)
        Every output.
    sensitivity : float
        :math:`\Delta q` (the caller's proof).
    epsilon, exponent : float
        Exactly one: the total DP level, or the exponent.
    rng : None, int or Generator
        ``None`` draws from the OS's secure source.

    Examples
    --------
    >>> sel = exponential_mechanism(np.array([0.0, 0.1]), lambda d, z: -np.abs(z[:, 0] - d.mean()),
    ...                             np.array([[0.0], [5.0]]), sensitivity=1.0, epsilon=2.0, rng=0)
    >>> sel.epsilon, sel.candidates
    (2.0, 2)
    """
    delta = check_epsilon(sensitivity, "sensitivity")
    eps = _exponent(epsilon, exponent, delta)
    out = np.asarray(outputs)
    if out.ndim == 0 or len(out) == 0:
        raise ValidationError("outputs must be a non-empty array of candidates (one per row)")
    q = _scores(quality, data, out)
    i = int(exponential_choice(q, eps, check_rng(rng)))
    return Selection(out[i], i, float(q[i]), 2.0 * eps * delta, eps, delta, len(out))


def subsampled_exponential_mechanism(
    data: Any,
    quality: Quality,
    base: BaseSampler,
    candidates: int,
    *,
    sensitivity: float,
    epsilon: float | None = None,
    exponent: float | None = None,
    rng: object = None,
) -> Selection:
    r"""The subsampled exponential mechanism (Lantz, Boyd and Page, AISec 2015, Algorithm 1).

    Draws m candidates from ``base`` (never enumerating the space), scores them with
    ``quality`` and releases one by the exponential mechanism on the list;
    :math:`2\varepsilon\Delta q`-DP (Theorem 4, proof in the module docstring) when
    ``base`` does not look at ``data``.

    Parameters
    ----------
    data : object
        The private dataset D, passed to ``quality`` only.
    quality : callable ``(data, candidates) -> scores``
    base : callable ``(rng, m) -> candidates``
        m independent draws of the data-independent base distribution :math:`\mu`.
    candidates : int
        m >= 1.
    sensitivity : float
        :math:`\Delta q`.
    epsilon, exponent : float
        Exactly one: the total DP level, or the exponent.
    rng : None, int or Generator

    Examples
    --------
    >>> def base(rng, m):
    ...     return (np.asarray(rng.random(m)) * 10).reshape(m, 1)
    >>> sel = subsampled_exponential_mechanism(np.array([3.0]), lambda d, z: -np.abs(z[:, 0] - d[0]), base, 50,
    ...                                        sensitivity=10.0, exponent=1.0, rng=0)
    >>> sel.epsilon, sel.candidates
    (20.0, 50)
    """
    delta = check_epsilon(sensitivity, "sensitivity")
    eps = _exponent(epsilon, exponent, delta)
    m = check_int(candidates, "candidates", minimum=1)
    source = check_rng(rng)
    cand = np.asarray(base(source, m))
    if cand.ndim == 0 or len(cand) != m:
        raise ValidationError(f"base must return {m} candidates (one per row), got shape {cand.shape}")
    q = _scores(quality, data, cand)
    i = int(exponential_choice(q, eps, source))
    return Selection(cand[i], i, float(q[i]), 2.0 * eps * delta, eps, delta, m)


# ------------------------------------------------------------------ accuracy
@dataclass(frozen=True)
class Accuracy:
    r"""A choice of m and the accuracy it buys (:func:`candidates_for_accuracy`).

    ``bound`` is the bound on :math:`P[q(D, z) \le \text{OPT} - 2t]` when ``good_mass``
    (:math:`\mu(S_t)`) was given, else ``nan``; ``em_bound`` the plain EM's
    :math:`e^{-\varepsilon t}/\mu(S_t)` for comparison.
    """

    candidates: int
    t: float
    exponent: float
    good_mass: float
    bound: float
    em_bound: float


def candidates_for_accuracy(
    t: float, *, exponent: float, good_mass: float | None = None, failure: float | None = None
) -> Accuracy:
    r"""The number of candidates m for accuracy t, and the bound it gives.

    With :math:`S_t = \{z : q(D,z) \ge \text{OPT} - t\}` and :math:`p = \mu(S_t)`, the
    SSEM's release satisfies (docs/proofs/ssem_accuracy.md)

    .. math::

        P[q(D, z) \le \text{OPT} - 2t] \le (1-p)^m + \frac{2m}{m+1}\,\frac{e^{-\varepsilon t}}{p},

    the plain EM's bound :math:`e^{-\varepsilon t}/p` (McSherry and Talwar, Lemma 7) at most
    doubled, plus the chance that no candidate lands in :math:`S_t`. The rule is
    :math:`m = \lceil e^{\varepsilon t}/2 \rceil` (Lantz et al.'s Lemma 3 / Theorem 6: at
    that m the second term is at most :math:`1/(mp)`); with ``good_mass`` and
    ``failure`` = :math:`\beta`, m is raised until the bound is at most :math:`\beta`
    (a ``ValidationError`` when :math:`2 e^{-\varepsilon t}/p \ge \beta`: no m can).

    Examples
    --------
    >>> a = candidates_for_accuracy(2.0, exponent=1.0)
    >>> a.candidates
    4
    """
    t = check_epsilon(t, "t")
    eps = check_epsilon(exponent, "exponent")
    m = max(1, math.ceil(math.exp(min(eps * t, 700.0)) / 2.0))
    if good_mass is None:
        if failure is not None:
            raise ValidationError("failure needs good_mass (the base's mass of S_t)")
        return Accuracy(m, t, eps, math.nan, math.nan, math.nan)
    p = float(good_mass)
    if not 0.0 < p <= 1.0:
        raise ValidationError(f"good_mass must be in (0, 1], got {good_mass!r}")

    def bound(mm: int) -> float:
        return (1.0 - p) ** mm + 2.0 * mm / (mm + 1.0) * math.exp(-eps * t) / p

    if failure is not None:
        beta = float(failure)
        if not 0.0 < beta < 1.0:
            raise ValidationError(f"failure must be in (0, 1), got {failure!r}")
        floor = 2.0 * math.exp(-eps * t) / p
        if floor >= beta:
            raise ValidationError(
                f"no m reaches failure {beta:g}: 2 e^(-exponent t)/good_mass = {floor:.4g}; increase t or exponent"
            )
        while bound(m) > beta:  # (1-p)^m halves in at most ~1/p steps: double m, then bisect
            lo, m = m, 2 * m
            if bound(m) <= beta:
                while m - lo > 1:
                    mid = (lo + m) // 2
                    lo, m = (lo, mid) if bound(mid) <= beta else (mid, m)
                break
    return Accuracy(m, t, eps, p, bound(m), math.exp(-eps * t) / p)
