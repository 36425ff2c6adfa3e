"""The reservation of an accounted trace release: each person's worst case, granted before anything is drawn.

One function for every engine (:func:`reserve`): the local chunk loop
(:func:`metricdp.streaming.traces.release_traces_file`) calls it with the counts of its first pass, the Dask
and Spark path (:mod:`metricdp.integrations._traces`) with the same counts of its driver's check pass (fixes
per person and, per place, the distinct (person, cell) pairs with their first rows), the persons
coded as the local engine codes them: a spread budget's eps per person, the worst cases and,
per place, the memo's hits are the local run's. The worst cases
(:meth:`~.trace_states.TraceMechanism.worst`), the grants and the refusals are
``docs/proofs/trace_accounting.md``'s; the module docstring of :mod:`.traces` says what is
withheld and why the reservation is what the ledger keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..accounting.accountant import grant
from ..accounting.composition import from_units, to_units
from ..errors import BudgetExceededError, ValidationError
from .trace_places import Places, memoized
from .trace_states import PerPlace, ThinShare, TraceMechanism

__all__ = ["Grants", "Reserved", "budget_of", "reserve"]


class Reserved:
    """A reservation in the ledger, settled with the publish: committed whole, or given back on a failure
    (the input changed since the first pass included: its reservation may not cover what was read)."""

    def __init__(self, ledger: Any, run_id: str, path: Path, identity: tuple[int, ...]) -> None:
        self.ledger, self.run_id, self.published = ledger, run_id, False
        self.path, self.identity = path, identity

    def publishing(self) -> None:
        from ..streaming.accounted import _identity

        if _identity(self.path) != self.identity:
            raise ValidationError(f"{self.path}: the file changed while it was released; nothing written, "
                                  "nothing spent")
        self.published = True

    def report(self) -> None:
        return None

    def commit(self) -> None:
        self.ledger.commit(self.run_id)

    def abort(self) -> None:
        if not self.published:
            self.ledger.abort(self.run_id)


@dataclass(frozen=True)
class Grants:
    """A reservation of the run: each person's ``granted`` pieces (in the order of the ids reserved), the persons
    ``over``, the ledger's run (or None) and its id, and, per place, the pairs a committed run paid for
    (:mod:`.trace_places`)."""

    granted: NDArray[np.int64]
    over: int
    run: Reserved | None
    run_id: str | None
    memo: tuple[NDArray[np.bool_], NDArray[np.float64], list[bytes] | None] | None


def budget_of(mech: TraceMechanism, budget: float | None, ledger: Any) -> float | None:
    """The budget a release is accounted against: ``budget``, or, with neither a budget nor a ledger, the
    mechanism's spread (each person's parameters come from their counts, so the run is accounted against it).
    A release is accounted when this is not None or a ledger is given."""
    if mech.spread is not None and budget is None and ledger is None:
        return mech.spread
    return budget


def reserve(mech: TraceMechanism, ids: NDArray[Any], rows: NDArray[np.int64], seen: Places, *, shown: NDArray[Any],
            where: str, unit: str, path: Path, identity: tuple[int, ...], budget: float | None, ledger: Any,
            policy: str, run_id: str | None) -> Grants:
    """Each person's worst case reserved (in the ledger, or against ``budget``); per place, the places a committed
    run paid for are read back from the ledger's memo first and are not reserved.

    ``ids`` are the persons' canonical ids (:func:`~metricdp.accounting.accountant.canonical_ids`), ``rows`` their
    fixes and ``seen`` their distinct cells (per place), all in one order, the persons' codes; ``shown`` their ids
    as an error names them. ``path`` and ``identity``: the file whose change the publish refuses.
    """
    n = ids.size
    try:
        mech.fit(rows[:n], seen.per_person(n))  # a spread budget: each person's eps from their counts
    except ThinShare as ex:
        raise ValidationError(f"{where}: person {shown[ex.code].item()!r}: {ex}") from None
    memo = None
    places = np.zeros(n, dtype=np.int64)
    if isinstance(mech, PerPlace):
        memo = memoized(seen, mech, ids, ledger)
        places = seen.per_person(n, ~memo[0])
    requested = np.asarray(mech.worst(rows[:n], places), dtype=np.int64)
    least = mech.least()
    asked = "drop" if mech.within_grant else policy  # the predictive mechanism runs within any grant of least
    piece = mech.piece
    if ledger is None:
        g = grant(np.arange(n), requested, piece, np.full(n, to_units(budget, "budget", budget=True)), asked)
        granted, run = g.granted, None
    else:
        eps = float(from_units(piece))
        if to_units(eps) != piece:  # pragma: no cover - the grid's multiples survive a float
            raise ValidationError(f"eps {eps!r} is not exact on the accounting grid")
        r = ledger.reserve(ids, eps, requested, policy=asked, run_id=run_id, mechanism=f"trace {mech.name}",
                           unit=unit)
        _uniq, inverse = np.unique(ids, return_inverse=True)
        granted = r.grant.granted[inverse.ravel()]
        run = Reserved(ledger, r.run_id, path, identity)
    short = int(((granted < least) & (requested > 0)).sum()) if mech.within_grant else \
        int((granted < requested).sum())
    if mech.within_grant and short and policy == "refuse":
        if run is not None:
            ledger.abort(run.run_id)
        raise BudgetExceededError(f"{short} of {n} persons cannot pay one fresh release within their privacy "
                                  "budget; nothing was spent", over=short, persons=n)
    return Grants(granted, short, run, None if run is None else run.run_id, memo)
