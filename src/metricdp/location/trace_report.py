"""What a trace release cost each person: eps spent, fresh releases, reuses.

:class:`TraceReport` holds one row per person (arrays, so a million persons stay a few
arrays); :meth:`TraceReport.person` gives one person's :class:`PersonReport`. Every
number in it is a function of the released rows and the public parameters alone (how
many rows were fresh draws, how many repeated an earlier release, at which eps), so the
report may be published beside the release: it adds nothing to what the release shows.
Spends are integers on the accounting grid of
:func:`~metricdp.accounting.composition.to_units` (1e-12 eps), summed exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..accounting.composition import from_units
from ..errors import ValidationError

__all__ = ["PersonReport", "TraceReport"]


@dataclass(frozen=True)
class PersonReport:
    """One person's release: ``eps_spent`` (per km), ``fresh`` releases drawn, ``reused`` rows
    that repeated an earlier release (a passed prediction, a revisited place, or a prediction
    reported once the budget was spent), ``tests`` run and ``passed``."""

    person: object
    eps_spent: float
    fresh: int
    reused: int
    tests: int = 0
    passed: int = 0


@dataclass(frozen=True, eq=False)
class TraceReport:
    """Per-person accounting of a trace release, one entry per person, sorted by person."""

    persons: NDArray[np.generic]
    spent_units: NDArray[np.int64]
    fresh: NDArray[np.int64]
    reused: NDArray[np.int64]
    tests: NDArray[np.int64]
    passed: NDArray[np.int64]

    @property
    def eps_spent(self) -> NDArray[np.float64]:
        """Eps per km each person spent (from the exact units)."""
        return from_units(self.spent_units)

    def __len__(self) -> int:
        return int(self.persons.size)

    def person(self, person: object) -> PersonReport:
        """The report of one person (a :class:`~metricdp.errors.ValidationError` if absent)."""
        hit = np.flatnonzero(self.persons == np.asarray(person, dtype=self.persons.dtype))
        if hit.size != 1:
            raise ValidationError(f"person {person!r} is not in this report")
        i = int(hit[0])
        return PersonReport(self.persons[i].item(), float(self.eps_spent[i]), int(self.fresh[i]),
                            int(self.reused[i]), int(self.tests[i]), int(self.passed[i]))

    @staticmethod
    def concat(reports: list[TraceReport]) -> TraceReport:
        """The reports of disjoint sets of persons as one (persons kept in the given order)."""
        if not reports:
            empty = np.zeros(0, dtype=np.int64)
            return TraceReport(np.zeros(0), empty, empty, empty, empty, empty)
        return TraceReport(*(np.concatenate([getattr(r, f) for r in reports]) for f in
                             ("persons", "spent_units", "fresh", "reused", "tests", "passed")))
