"""A DP histogram prior over grid cells, charged per person: each person's rows bounded, eps charged once.

``grid --prior-out`` counts the rows per cell and adds two-sided geometric noise to each
count. Per row, that is eps-DP for adding or removing one row; a person with k rows would
be protected at k eps only. :func:`accounted_prior` makes it a per-person release:

1. **first pass** (:func:`~metricdp.pipeline.first_pass.first_pass`): who each row
   belongs to and its point, every coordinate checked; each row's cell (rows outside the
   grid dropped or moved to the nearest cell as the caller says);
2. **cap**: at most ``K = max_rows_per_user`` rows per person, chosen uniformly at random
   (:func:`~metricdp.accounting.accountant.bound_contributions`);
3. **charge**: every person with a row left is charged ``eps`` ONCE, in the ledger (unit
   :data:`DP_UNIT`: a DP eps never adds up with an eps per km) or against ``budget``; under
   ``refuse`` a person over the budget stops the run before any noise is drawn, under
   ``drop`` their rows leave the histogram;
4. **noise**: each count gets two-sided geometric noise at ``eps / K``
   (:func:`~metricdp.location.grid.private_prior`); then ``publish`` writes it, and the
   charge is committed (given back if anything failed before ``publish`` returned).

**Why eps per person.** Adding or removing one person changes the vector of counts by at
most ``K`` in L1 (at most K of their rows are counted, each in one cell). Geometric noise
at ``eps / K`` per count makes the vector of noisy counts ``(eps / K) * K = eps``-DP for
that change (the per-count likelihood ratios multiply to at most ``exp((eps / K) * L1)``),
and clamping and normalising are post-processing. Changing a person's rows (same number)
is a removal and an addition: ``2 eps``. The cap and the charge depend on each person's
number of rows only, never on where they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress
from .._random import check_rng
from ..accounting.accountant import bound_contributions
from ..accounting.composition import to_units
from ..errors import BudgetExceededError, ValidationError
from ..pipeline.first_pass import first_pass
from ..pipeline.points import PointPairs
from ..pipeline.run import Source
from .accounted import Accounting

__all__ = ["DP_UNIT", "AccountedPrior", "accounted_prior"]

#: The ledger unit of a standard-DP charge (per person, any change of their rows): never summed with an eps per km.
DP_UNIT = "DP"


@dataclass(frozen=True)
class AccountedPrior:
    """What :func:`accounted_prior` published: the prior, the noisy counts and the accounting."""

    prior: NDArray[np.float64]
    noisy: NDArray[np.int64]
    rows_in: int
    rows_counted: int
    withheld_cap: int
    withheld_budget: int
    persons: int
    persons_over: int
    epsilon: float
    count_epsilon: float
    max_rows_per_user: int
    run_id: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"rows_in": self.rows_in, "rows_counted": self.rows_counted, "withheld_cap": self.withheld_cap,
                "withheld_budget": self.withheld_budget, "persons": self.persons, "persons_over": self.persons_over,
                "epsilon_per_person": self.epsilon, "epsilon_per_count": self.count_epsilon,
                "max_rows_per_user": self.max_rows_per_user, "ledger_run": self.run_id}


def _no_release(values: NDArray[np.float64], first_row: int) -> NDArray[np.float64]:
    raise AssertionError("a prior's first pass releases nothing")  # pragma: no cover


def accounted_prior(
    src: Path,
    fmt: str,
    grid: Any,
    lat: str,
    lon: str,
    epsilon: str | Fraction,
    acc: Accounting,
    publish: Callable[[NDArray[np.float64]], None],
    *,
    unknown: str = "refuse",
    rng: object = None,
    chunk_rows: int = 1_000_000,
    progress: Progress | None = None,
) -> AccountedPrior:
    """Publish an ``epsilon``-DP-per-person histogram prior of ``src``'s rows over ``grid`` (module docstring).

    ``acc`` gives the user column, the cap (required: the noise is scaled to it), the
    budget or ledger and the policy; ``publish(prior)`` writes the prior (atomically).
    """
    from ..location.grid import MIN_PRIOR_EPSILON, assign_cells, private_prior

    if acc.max_rows_per_user is None:
        raise ValidationError("a per-person prior needs a bound on each person's rows (max rows per user): the "
                              "noise is scaled to it")
    if acc.consistent:
        raise ValidationError("consistent releases do not apply to a histogram prior")
    k = int(acc.max_rows_per_user)
    try:
        eps = Fraction(epsilon)
    except (ValueError, ZeroDivisionError):
        raise ValidationError(f"the prior's epsilon must be a positive number, got {epsilon!r}") from None
    if eps <= 0 or eps / k < Fraction(MIN_PRIOR_EPSILON):
        raise ValidationError(f"the prior's epsilon {float(eps):g} over {k} rows per person is {float(eps / k):.3g} "
                              f"per count, below the smallest ({MIN_PRIOR_EPSILON:g})")
    source = check_rng(rng)
    read = first_pass(PointPairs(lat, lon, _no_release, where=str(src)), Source.of(src, chunk_rows=chunk_rows),
                      acc.user_column, keep_values=True, progress=progress)
    persons, codes, pts = read.persons, read.codes, read.values
    cells = assign_cells(grid, pts, unknown)  # type: ignore[arg-type]
    if unknown == "refuse" and (cells < 0).any():
        raise ValidationError(f"{src}: {int((cells < 0).sum()):,} rows are outside the grid")
    inside = np.flatnonzero(cells >= 0)
    keep = np.zeros(codes.size, dtype=bool)
    keep[inside[bound_contributions(codes[inside], k, source)]] = True
    present = np.unique(codes[keep])  # persons with a row counted: each charged eps once
    granted, run_id, over = _charge(persons, present, float(eps), acc)
    counted = keep & np.isin(codes, present[granted])
    counts = np.bincount(cells[counted], minlength=grid.n).astype(np.int64)
    try:
        prior, noisy = private_prior(counts, eps / k, rng=source)
        publish(prior)
    except BaseException:
        if run_id is not None and acc.ledger is not None:
            acc.ledger.abort(run_id)
        raise
    if run_id is not None and acc.ledger is not None:
        acc.ledger.commit(run_id)
    return AccountedPrior(prior, noisy, int(codes.size), int(counted.sum()), int(inside.size - keep.sum()),
                          int(keep.sum() - counted.sum()), int(present.size), over, float(eps), float(eps / k), k,
                          run_id)


def _charge(persons: Any, present: NDArray[Any], eps: float, acc: Accounting) -> tuple[NDArray[np.bool_], str | None,
                                                                                       int]:
    """Charge ``eps`` once to each person in ``present`` (codes into ``persons``): (granted mask, run id, over)."""
    n = int(present.size)
    if acc.ledger is not None:
        import pyarrow as pa

        ids = persons.take(pa.array(present.astype(np.int64)))
        order = np.argsort(np.asarray(ids.cast(pa.large_string()).to_numpy(zero_copy_only=False), dtype=str),
                           kind="stable")
        res = acc.ledger.reserve(ids, eps, np.ones(n, dtype=np.int64), policy=acc.policy, mechanism=acc.mechanism,
                                 unit=DP_UNIT)
        granted = np.empty(n, dtype=bool)
        granted[order] = res.grant.granted > 0  # the grant lists persons sorted by id
        return granted, res.run_id, int(res.grant.over)
    if acc.budget is not None and to_units(eps) > to_units(acc.budget, "budget", budget=True):
        if acc.policy == "refuse":
            raise BudgetExceededError(f"{n:,} of {n:,} persons would exceed their budget", over=n, persons=n)
        return np.zeros(n, dtype=bool), None, n
    return np.ones(n, dtype=bool), None, 0
