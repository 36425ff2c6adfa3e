r"""The Bayes-optimal adversary's inference error and re-identification probability.

Shokri, Theodorakopoulos, Le Boudec, Hubaux, "Quantifying location privacy" (IEEE S&P
2011, Section IV-C, *correctness*) and Shokri et al., "Protecting location privacy:
optimal strategy against localization attacks" (CCS 2012, eq. 4): an adversary who
knows the mechanism M and a prior :math:`\pi` sees an output y and guesses
:math:`\hat x(y)`. Its *expected inference error* is
:math:`\sum_{x,y} \pi(x) M[x,y]\, d(x, \hat x(y))`, and the smallest achievable one,

.. math:: \mathrm{AE}(M, \pi) = \sum_y \min_z \sum_x \pi(x)\, M[x, y]\, d(x, z),

is attained by a deterministic guess (a randomised guess averages deterministic ones).
Yu, Liu, Pu, "Dynamic differential location privacy with personalized error bounds"
(PIVE, NDSS 2017) requires AE above a threshold beside eps. The probability that the
adversary names the exact input (its MAP guess; Bayes vulnerability) is

.. math:: \mathrm{RI}(M, \pi) = \sum_y \max_x \pi(x)\, M[x, y].

Both are computed exactly from the matrix (one BLAS product for AE, O(n^2 m)), for
square or rectangular M (guesses range over the inputs). For reference
:func:`adversary_report` also gives the same quantities without observing anything:
:math:`\min_z \sum_x \pi(x) d(x,z)` and :math:`\max_x \pi(x)`.

AE equals the expected loss of the Bayesian remap of M for the same prior
(:mod:`metricdp.remap`): the optimal guess *is* the remap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_probability_vector, check_stochastic
from .errors import ValidationError
from .mechanisms.base import Mechanism
from .remap import posterior_costs
from .units import space_unit

__all__ = ["AdversaryResult", "adversary_error", "adversary_report", "reidentification_probability"]


@dataclass(frozen=True)
class AdversaryResult:
    """Outcome of :func:`adversary_error`.

    ``expected_error`` is AE; ``guesses[y]`` the optimal guess for output y (smallest
    index among ties); ``reidentification`` is RI and ``map_guesses[y]`` the MAP guess.
    """

    expected_error: float
    guesses: NDArray[np.intp]
    reidentification: float
    map_guesses: NDArray[np.intp]


def adversary_error(matrix: ArrayLike, distances: ArrayLike, prior: ArrayLike) -> AdversaryResult:
    """AE and RI of a mechanism matrix (n x m) for a prior over its n inputs and a distance (n x n).

    Examples
    --------
    Two points at distance 1, randomised response with probability 3/4 of the truth and
    a uniform prior: the adversary guesses what it sees, wrong with probability 1/4.

    >>> r = adversary_error([[0.75, 0.25], [0.25, 0.75]], [[0, 1], [1, 0]], [0.5, 0.5])
    >>> r.expected_error, r.reidentification, r.guesses.tolist()
    (0.25, 0.75, [0, 1])
    """
    m = check_stochastic(matrix, name="matrix", square=False)
    d = np.asarray(distances, dtype=np.float64)
    n = m.shape[0]
    if d.shape != (n, n):
        raise ValidationError(f"distances must be ({n}, {n}) over the inputs, got {d.shape}")
    pi = check_probability_vector(prior, n, name="prior")
    costs = posterior_costs(m, pi, d)  # (m outputs, n guesses)
    guesses = np.argmin(costs, axis=1).astype(np.intp)
    joint = pi[:, None] * m  # (n, m): Pr[x, y]
    map_guesses = np.argmax(joint, axis=0).astype(np.intp)
    return AdversaryResult(
        expected_error=float(costs[np.arange(len(costs)), guesses].sum()),
        guesses=guesses,
        reidentification=float(joint.max(axis=0).sum()),
        map_guesses=map_guesses,
    )


def reidentification_probability(matrix: ArrayLike, prior: ArrayLike) -> float:
    """RI: the probability that the MAP adversary names the exact input."""
    m = check_stochastic(matrix, name="matrix", square=False)
    pi = check_probability_vector(prior, m.shape[0], name="prior")
    return float((pi[:, None] * m).max(axis=0).sum())


def adversary_report(mechanism: Mechanism, prior: ArrayLike) -> dict[str, Any]:
    """What ``metricdp evaluate --prior FILE`` prints about the adversary (JSON-ready).

    Keys: ``adversary_expected_error`` (AE), ``adversary_reidentification`` (RI),
    ``prior_only_error`` and ``prior_only_reidentification`` (the same without seeing
    an output), ``expected_loss`` (the mechanism's own expected loss under the prior),
    ``unit`` (``"km"`` for haversine spaces, else the file's declared unit or ``""``)
    and ``exact`` (False when the matrix is a Monte-Carlo estimate, whose AE/RI are
    estimates too).

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> from metricdp.mechanisms.krr import krr
    >>> m = krr(MetricSpace.from_distances([[0, 1], [1, 0]]), 1.0)
    >>> rep = adversary_report(m, [0.5, 0.5])
    >>> round(rep["adversary_reidentification"], 6), rep["prior_only_reidentification"]
    (0.731059, 0.5)
    """
    if not isinstance(mechanism, Mechanism):
        raise ValidationError(f"mechanism must be a Mechanism, got {type(mechanism).__name__}")
    d = np.asarray(mechanism.distances)
    result = adversary_error(mechanism.matrix, d, prior)
    pi = check_probability_vector(prior, mechanism.n, name="prior")
    return {
        "adversary_expected_error": result.expected_error,
        "adversary_reidentification": result.reidentification,
        "prior_only_error": float((pi @ d).min()),
        "prior_only_reidentification": float(pi.max()),
        "expected_loss": float(mechanism.expected_loss(pi)),
        "unit": space_unit(mechanism.space, mechanism.metadata),
        "exact": bool(mechanism.exact),
    }
