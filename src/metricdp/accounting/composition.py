"""Composition of metric-DP releases per person: what k releases of one person cost.

A mechanism ``M`` is eps-mDP w.r.t. a metric ``d`` when ``P[M(x) in S] <= exp(eps d(x, x'))
P[M(x') in S]`` for all inputs ``x, x'`` and output sets ``S``. The theorems used here are
proved in ``docs/proofs/composition.md``:

* **sequential composition** -- a person with values ``x_1..x_k`` released independently by
  eps_i-mDP mechanisms is protected by the joint release w.r.t. the summed distance
  ``sum_i eps_i d(x_i, x'_i)`` (:func:`joint_bound`); a change of each value by at most a
  distance ``r`` costs at most ``(sum_i eps_i) r``, so the person's epsilon *per unit of
  distance* is ``sum_i eps_i`` (:func:`per_person_epsilon`); one value reported ``k`` times
  at eps is ``(k eps)``-mDP (:func:`repeated`);
* **parallel composition** -- releases of disjoint persons compose by the maximum: each
  person's guarantee depends only on their own releases (:func:`parallel`);
* **post-processing** -- any function of a release costs nothing more; memoized
  (consistent) repeats of one release cost nothing more against alternatives with the same
  equality pattern, which the repeats disclose (:func:`consistent_epsilon`).

Epsilons are *accounted* as integers on a grid of :data:`UNITS_PER_EPS` units per eps
(:func:`to_units`): sums of per-row epsilons are exact (no float drift over millions of rows
or across runs in a database), a release's eps is rounded *up* to the grid and a budget
*down*, so the accounted spend never undercounts. The grid starts from the decimal a person
typed (Python's shortest ``repr`` of the float), so ten releases at 0.1 fit a budget of 1,
as the person who set the budget means; the binary float 0.1 exceeds the decimal by 5.6e-18,
which is 1e-17 relative, far below what any audit of a mechanism resolves.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_number
from ..errors import ValidationError

__all__ = [
    "MAX_UNITS",
    "UNITS_PER_EPS",
    "EpsilonSummary",
    "consistent_epsilon",
    "from_units",
    "joint_bound",
    "parallel",
    "per_person_epsilon",
    "per_person_units",
    "repeated",
    "sequential",
    "summarize",
    "to_units",
]

#: Accounting grid: one eps is this many integer units (an eps of 1e-12 is one unit).
UNITS_PER_EPS = 10**12
#: Largest accounted total (units): 2**62 leaves room for one more sum in int64; it is
#: 4.6 million eps, far beyond any meaningful budget.
MAX_UNITS = 2**62


def to_units(eps: Any, name: str = "epsilon", *, budget: bool = False) -> int:
    """An eps (> 0, finite) as integer accounting units: rounded up, or down for a ``budget``.

    >>> to_units(0.1), to_units(1.0, budget=True), 10 * to_units(0.1) <= to_units(1.0, budget=True)
    (100000000000, 1000000000000, True)
    >>> to_units(1e-13)  # never free: at least one unit
    1
    """
    value = check_number(eps, name, minimum=0.0, open_minimum=True)
    exact = Decimal(repr(value)) * UNITS_PER_EPS
    units = int(exact.to_integral_value(rounding=ROUND_FLOOR if budget else ROUND_CEILING))
    if units > MAX_UNITS:
        raise ValidationError(f"{name} {value!r} is too large to account (at most {MAX_UNITS / UNITS_PER_EPS:g})")
    if budget and units == 0:
        raise ValidationError(f"{name} {value!r} is below the accounting grid (1e-12)")
    return max(units, 1)


def from_units(units: ArrayLike) -> NDArray[np.float64]:
    """Accounting units back to eps (float64, for reports)."""
    return np.asarray(units, dtype=np.float64) / UNITS_PER_EPS


def sequential(eps: ArrayLike) -> float:
    """The eps per unit distance of independent releases at ``eps`` (one person): their sum.

    >>> sequential([0.5, 0.25, 0.25])
    1.0
    """
    values = np.asarray(eps, dtype=np.float64).ravel()
    units = _units_of(values, "epsilon")
    return float(from_units(units.sum()))


def repeated(eps: Any, k: int) -> float:
    """One value reported ``k`` times independently at ``eps``: ``k * eps``-mDP (exactly accounted).

    >>> repeated(0.1, 10)
    1.0
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
        raise ValidationError(f"k must be an integer >= 0, got {k!r}")
    return float(from_units(int(k) * to_units(eps)))


def joint_bound(eps: ArrayLike, distances: ArrayLike) -> float:
    """The log-likelihood-ratio bound ``sum_i eps_i d(x_i, x'_i)`` of a joint release.

    ``eps[i]`` is the epsilon of the i-th release, ``distances[i]`` the distance between the
    person's true i-th value and the alternative one; the joint release of independent
    eps_i-mDP mechanisms satisfies ``P[out] <= exp(joint_bound) P'[out]``.

    >>> joint_bound([0.5, 0.5, 1.0], [2.0, 0.0, 1.0])
    2.0
    """
    e = np.asarray(eps, dtype=np.float64).ravel()
    d = np.asarray(distances, dtype=np.float64).ravel()
    if e.shape != d.shape:
        raise ValidationError(f"eps and distances must have the same length, got {e.size} and {d.size}")
    if not (np.isfinite(e).all() and (e > 0).all()):
        raise ValidationError("every eps must be finite and > 0")
    if not (np.isfinite(d).all() and (d >= 0).all()):
        raise ValidationError("every distance must be finite and >= 0")
    return float(e @ d)


def parallel(*eps_per_part: ArrayLike) -> float:
    """Parallel composition: releases of *disjoint* sets of persons cost the largest of them.

    Each argument holds the per-person eps of one part; a person in two parts is the
    caller's error (use :func:`per_person_epsilon` over the union instead), since their
    guarantee is then the sum, not the maximum.

    >>> parallel([0.5, 1.0], [0.75])
    1.0
    """
    parts = [np.asarray(p, dtype=np.float64).ravel() for p in eps_per_part]
    values = np.concatenate(parts) if parts else np.zeros(0)
    if values.size and not (np.isfinite(values).all() and (values >= 0).all()):
        raise ValidationError("every per-person eps must be finite and >= 0")
    return float(values.max()) if values.size else 0.0


def _units_of(eps: NDArray[np.float64], name: str) -> NDArray[np.int64]:
    """Units of each eps, converting each distinct value once (runs have one or a few)."""
    if eps.size == 0:
        return np.zeros(0, dtype=np.int64)
    distinct, inverse = np.unique(eps, return_inverse=True)
    units = np.array([to_units(v, name) for v in distinct.tolist()], dtype=np.int64)
    return units[inverse.ravel()]


def _persons(user_ids: ArrayLike) -> tuple[NDArray[Any], NDArray[np.intp]]:
    ids = np.asarray(user_ids)
    if ids.ndim != 1:
        raise ValidationError(f"user ids must be one-dimensional, got shape {ids.shape}")
    persons, inverse = np.unique(ids, return_inverse=True)
    return persons, inverse.ravel().astype(np.intp)


def per_person_units(user_ids: ArrayLike, row_eps: ArrayLike) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """Distinct persons (sorted) and each one's total spend in units, exactly.

    ``row_eps`` is one eps for every row or an array aligned with ``user_ids``. The sum is
    exact in integers: per distinct eps value, rows are counted per person with
    :func:`numpy.bincount` and multiplied by the value's units.
    """
    persons, inverse = _persons(user_ids)
    e = np.asarray(row_eps, dtype=np.float64)
    if e.ndim == 0:
        counts = np.bincount(inverse, minlength=persons.size).astype(np.int64)
        return persons, _checked_total(counts * to_units(float(e)), counts, to_units(float(e)))
    if e.shape != inverse.shape:
        raise ValidationError(f"row eps must be a number or one per row ({inverse.size}), got shape {e.shape}")
    bad = ~(np.isfinite(e) & (e > 0))
    if bad.any():
        raise ValidationError(f"every row eps must be finite and > 0, row {int(np.argmax(bad))} is {e[bad][0]!r}")
    distinct, which = np.unique(e, return_inverse=True)
    total = np.zeros(persons.size, dtype=np.int64)
    for j, value in enumerate(distinct.tolist()):
        units = to_units(value)
        counts = np.bincount(inverse[which.ravel() == j], minlength=persons.size).astype(np.int64)
        total = total + _checked_total(counts * units, counts, units)
    if (total > MAX_UNITS).any():
        raise ValidationError("a person's total eps is too large to account")
    return persons, total


def _checked_total(total: NDArray[np.int64], counts: NDArray[np.int64], units: int) -> NDArray[np.int64]:
    if counts.size and int(counts.max()) > MAX_UNITS // units:
        raise ValidationError("a person's total eps is too large to account")
    return total


def per_person_epsilon(user_ids: ArrayLike, row_eps: ArrayLike) -> tuple[NDArray[Any], NDArray[np.float64]]:
    """Distinct persons (sorted) and each one's eps per unit distance in this release.

    Sequential composition over each person's rows (a row is one independent release):

    >>> persons, eps = per_person_epsilon(["ann", "bob", "ann", "cy", "ann"], 0.5)
    >>> persons.tolist(), eps.tolist()
    (['ann', 'bob', 'cy'], [1.5, 0.5, 0.5])
    """
    persons, units = per_person_units(user_ids, row_eps)
    return persons, from_units(units)


def consistent_epsilon(
    user_ids: ArrayLike, true_values: ArrayLike, row_eps: ArrayLike
) -> tuple[NDArray[Any], NDArray[np.float64]]:
    """Per-person eps when a person's repeated true value reuses one release (``--consistent``).

    The rows of one (person, value) pair publish one release and copies of it: the copies
    are post-processing, so the pair costs the eps of the release actually drawn, the one of
    its first row. A person's eps is the sum over their *distinct* values, against
    alternatives with the same equality pattern: identical releases disclose which rows
    share a value (``docs/proofs/composition.md``, Theorem 4).

    >>> persons, eps = consistent_epsilon(["a", "a", "a", "b"], [3, 3, 4, 3], 0.5)
    >>> persons.tolist(), eps.tolist()
    (['a', 'b'], [1.0, 0.5])
    """
    ids = np.asarray(user_ids)
    values = np.asarray(true_values)
    if values.shape[:1] != ids.shape:
        raise ValidationError(f"true values must be one per row ({ids.size}), got shape {values.shape}")
    persons, inverse = _persons(ids)
    _, value_code = np.unique(values.reshape(len(values), -1), axis=0, return_inverse=True)
    pair = inverse.astype(np.int64) * (int(value_code.max(initial=0)) + 1) + value_code.ravel()
    _, first = np.unique(pair, return_index=True)
    e = np.asarray(row_eps, dtype=np.float64)
    if e.ndim and e.shape != ids.shape:
        raise ValidationError(f"row eps must be a number or one per row ({ids.size}), got shape {e.shape}")
    first_eps = e if e.ndim == 0 else e[first]
    # every person has a first row, so the persons of ids[first] are ``persons``, in the same order
    _, units = per_person_units(ids[first], first_eps)
    return persons, from_units(units)


@dataclass(frozen=True)
class EpsilonSummary:
    """The distribution of per-person eps of a release (or of a ledger's totals)."""

    persons: int
    max: float
    median: float
    p90: float
    p99: float
    mean: float

    def as_dict(self) -> dict[str, float | int]:
        return {"persons": self.persons, "max": self.max, "median": self.median, "p90": self.p90,
                "p99": self.p99, "mean": self.mean}


def summarize(per_person_eps: ArrayLike) -> EpsilonSummary:
    """Max, median, 90th and 99th percentiles (``inverted_cdf``: an eps some person has) and mean.

    >>> summarize([0.5, 1.5, 0.5]).as_dict()
    {'persons': 3, 'max': 1.5, 'median': 0.5, 'p90': 1.5, 'p99': 1.5, 'mean': 0.8333333333333334}
    """
    e = np.asarray(per_person_eps, dtype=np.float64).ravel()
    if e.size == 0:
        return EpsilonSummary(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    if not (np.isfinite(e).all() and (e >= 0).all()):
        raise ValidationError("every per-person eps must be finite and >= 0")
    q = np.quantile(e, [0.5, 0.9, 0.99], method="inverted_cdf")
    return EpsilonSummary(int(e.size), float(e.max()), float(q[0]), float(q[1]), float(q[2]), float(e.mean()))
