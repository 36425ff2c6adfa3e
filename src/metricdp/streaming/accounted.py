"""A streamed release accounted per person: one read (or first pass, plan, release pass), publish, commit.

:func:`~metricdp.streaming.files.privatize_file` with ``accounting=`` runs the protocol
of :mod:`metricdp.accounting.plan` over a file of any size, in one of two ways.

**One read** (:class:`OnePassRun`, every release but ``consistent``: a row's release does
not depend on the plan):

1. **release pass**: every row is read once, gets a fresh release and is written to the
   temporary output; meanwhile each chunk's user column (already split) is encoded
   (:class:`~metricdp.streaming.persons.PersonCollector`: a small integer code per row);
2. **plan** on the codes (:func:`~metricdp.accounting.plan.plan_release`: cap, budget).
   Under ``refuse`` a person over budget stops the run here: nothing reserved, the
   temporary output removed, nothing published. Otherwise the spend is *reserved*;
3. when the plan withholds rows (cap, ``drop``), their records are removed from the
   temporary output (CSV: a copy of the kept records; Parquet: the output emptied and the
   kept rows released again from the input, as in step 3 below); when it keeps every
   row, the output of step 1 is the release.

:class:`OnePassRun` proves that the law of what is published is unchanged. Cost: one read
of the file instead of two; a CSV with rows withheld adds a copy of the output.

**Two passes** (:class:`AccountedRun`, ``consistent``: the groups' releases come from the plan):

1. **first pass** (:func:`~metricdp.pipeline.first_pass.first_pass`): the user column and
   the released column are read and refused as the release will refuse them; each row becomes a small
   integer code of its person;
2. **plan** (:func:`~metricdp.accounting.plan.plan_release` on the codes): cap, consistent
   groups, memo, budget. Under ``refuse`` a person over budget stops the run here,
   before anything is drawn, written or spent; otherwise the spend is *reserved* in the
   ledger. For consistent releases the groups' releases are drawn now (one per fresh
   group) and memoized under the reservation;
3. **release pass**: every row is read again; a withheld row is not written at all, a
   kept row gets a fresh release (or its group's). No column is added: the output has
   the input's columns, so no person id or true value leaves that did not leave before.

Then, either way, **publish**: the input's size, times and inode are compared with those
before the first read (a file changed in between would break the link between plan and
rows: refused), :meth:`~metricdp.accounting.plan.Plan.publishing`, the atomic rename, then
:meth:`~metricdp.accounting.plan.Plan.commit`. Any failure before ``publishing`` aborts the
reservation; after it the spend stays (an interrupted publish counts as spent, never the
reverse: ``docs/proofs/composition.md``, Section 5). A ``kill -9`` before the plan leaves
nothing reserved and no file (the temporary output is unnamed or removed).

Randomness: the cap's and the budget's choices of rows and every release come from the
one source of the release (the OS secure source by default).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..accounting.accountant import Policy
from ..accounting.composition import EpsilonSummary
from ..accounting.ledger import Ledger
from ..accounting.plan import Plan, plan_release
from ..errors import MetricDPError, ValidationError
from ..tabular.header import table_header
from ..units import space_unit
from .persons import PersonCollector

__all__ = ["AccountedRun", "Accounting", "AccountingReport", "OnePassRun", "Settlement"]


@dataclass(frozen=True)
class Accounting:
    """How a release is accounted per person (see :func:`~metricdp.accounting.plan.plan_release`).

    ``scope`` names the mechanism in the memo (a hash of its file, say: a memoized
    release is only reused by the same mechanism); ``mechanism`` describes the run in the
    ledger.
    """

    user_column: str
    budget: float | None = None
    ledger: Ledger | None = None
    max_rows_per_user: int | None = None
    policy: Policy = "refuse"
    consistent: bool = False
    scope: str = ""
    mechanism: str = ""
    run_id: str | None = None
    #: The additive loss of one release (a lattice's snapping: eps x its distance cost), 0 for none; a release
    #: whose one additive loss exceeds the budget is refused before anything is reserved (``plan_release``).
    additive: float = 0.0


@dataclass(frozen=True)
class AccountingReport:
    """What an accounted release did: rows, withheld rows, and the per-person eps (run and total)."""

    rows_in: int
    rows_released: int
    withheld_cap: int
    withheld_budget: int
    persons_in: int
    persons_over: int
    fresh_releases: int
    run: EpsilonSummary
    total: EpsilonSummary | None
    run_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"rows_in": self.rows_in, "rows_released": self.rows_released, "withheld_cap": self.withheld_cap,
                "withheld_budget": self.withheld_budget, "persons_in": self.persons_in,
                "persons_released": self.run.persons, "persons_over": self.persons_over,
                "fresh_releases": self.fresh_releases, "eps_per_person_run": self.run.as_dict(),
                "eps_per_person_total": None if self.total is None else self.total.as_dict(),
                "ledger_run": self.run_id, **self.extra}


def _check_columns(src: Path, column: str, acc: Accounting) -> None:
    header = table_header(src, [column])
    if acc.user_column == column:
        raise ValidationError(f"{src}: the user column {column!r} is the released column; name the column "
                              "that says who each row belongs to")
    if acc.user_column not in header:
        shown = ", ".join(repr(h) for h in header[:20])
        raise ValidationError(f"{src}: no user column {acc.user_column!r} (columns: {shown})")


def _identity(path: Path) -> tuple[int, ...]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Settlement:
    """The end of an accounted release (the module docstring's **publish**), around the atomic write.

    Leaving the block by an error gives the reservation back unless ``publishing()`` was
    reached (``run.abort()``: after it the spend stays, the safe side); leaving it normally
    commits the spend (``run.commit()``), after the atomic write inside the block renamed
    the output. ``run`` (anything with ``abort`` and ``commit``) may be set inside the
    block, where the plan comes after the release pass; None settles nothing.
    """

    def __init__(self, run: Any = None) -> None:
        self.run = run

    def __enter__(self) -> Settlement:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self.run is None:
            return
        if kind is None:
            self.run.commit()
        else:
            self.run.abort()


class AccountedRun:
    """One accounted release in progress: the plan and the rows' codes (module docstring)."""

    def __init__(self, src: Path, plan: Plan, persons_in: int, labels: NDArray[np.intp] | None,
                 group_release: NDArray[np.intp] | None, release: Any, identity: tuple[int, ...]) -> None:
        self.src, self.plan, self.persons_in = src, plan, persons_in
        self.labels, self.group_release, self.release = labels, group_release, release
        self.identity = identity
        self.rows = int(plan.keep.size)
        self.seen = 0
        self.published = False

    @property
    def written_all(self) -> bool:
        """Every row is released (nothing withheld by the cap or the budget)."""
        return self.plan.withheld_cap + self.plan.withheld_budget == 0

    def _changed(self) -> ValidationError:
        return ValidationError(f"{self.src}: the file changed while it was being released (the first pass read "
                               f"{self.rows:,} rows); nothing written, nothing spent")

    def select(self, start: int, values: NDArray[Any]) -> tuple[NDArray[np.bool_], NDArray[Any]]:
        """Rows ``start..start+len(values)`` of the release pass (0-based): which are written, and their releases.

        ``release(values, first_row)`` draws the kept rows' releases (``first_row``: the first kept row, for
        errors); a consistent run's rows get their group's release, and their values must be those planned.
        """
        stop = start + len(values)
        if stop > self.rows:
            raise self._changed()
        keep = self.plan.keep[start:stop]
        self.seen = stop
        if self.group_release is not None and self.labels is not None:
            if not np.array_equal(values, self.labels[start:stop]):
                raise self._changed()
            return keep, self.group_release[self.plan.group[start:stop][keep]]
        if not keep.any():
            return keep, values[:0]
        return keep, self.release(values[keep], start + int(np.argmax(keep)))

    def publishing(self) -> None:
        """The point of no return (just before the atomic rename): the input must be the one planned."""
        if self.seen != self.rows or _identity(self.src) != self.identity:
            raise self._changed()
        self.plan.publishing()
        self.published = True

    def abort(self) -> None:
        """The release failed before :meth:`publishing`: give the reservation back (else keep it spent)."""
        if not self.published:
            with contextlib.suppress(MetricDPError):  # a failed refund leaves the spend recorded: the safe side
                self.plan.abort()

    def commit(self) -> None:
        self.plan.commit()

    def report(self) -> AccountingReport:
        p = self.plan
        return AccountingReport(self.rows, int(p.keep.sum()), p.withheld_cap, p.withheld_budget, self.persons_in,
                                p.persons_over, p.fresh_count, p.run, p.total,
                                None if p.reservation is None else p.reservation.run_id,
                                {"memo_hits": int(p.memo_hit.sum())} if self.group_release is not None else {})


class OnePassRun:
    """An accounted release whose releases do not depend on the plan (not ``consistent``): one read.

    The release pass draws and writes a release for *every* row while :attr:`persons`
    encodes each chunk's user column; :meth:`plan` then plans on the codes (cap, budget,
    reservation) and returns the :class:`AccountedRun` that publishes. When the plan keeps
    every row, what was written is the release (``written_all``); when it withholds rows,
    the caller removes the withheld records from its temporary output (a CSV: a copy of
    the kept records, their releases unchanged) or empties it and releases again with
    :meth:`AccountedRun.select` (Parquet, or an output it cannot read back).

    Why the releases drawn before the plan are harmless, and the law of what is published
    unchanged: the withheld rows' releases are written only to the unpublished temporary
    output (removed on any failure, freed by the kernel on ``kill -9``) and removed from
    it before the publish; they never leave. The plan's random choices (which rows the
    cap keeps, which groups ``drop`` withholds) are made from the codes and the source
    alone, never from the releases, and the releases were drawn row by row independently
    of each other and of the persons: so the choice of published rows is independent of
    the releases, and given the published rows, each published release is a fresh,
    independent draw of its row of the mechanism -- the joint law of (rows published,
    their releases) is the two-pass protocol's. The per-person spend, a function of the
    published rows alone, is the same. Under ``refuse`` a person over budget stops the run in :meth:`plan`:
    nothing was reserved, the temporary output is removed, nothing is published.
    """

    def __init__(self, mechanism: Any, src: Path, column: str, acc: Accounting, release: Any, source: Any) -> None:
        if acc.consistent:
            raise ValidationError("consistent releases need the plan before the release (two passes)")
        _check_columns(src, column, acc)
        self.mechanism, self.src, self.acc, self.release, self.source = mechanism, src, acc, release, source
        self.identity = _identity(src)
        self.persons = PersonCollector(str(src), acc.user_column, src.stat().st_size)

    def plan(self) -> AccountedRun:
        """The plan on the persons of every row read (under ``refuse``, raises before anything is reserved)."""
        scan = self.persons.finish()
        acc, mechanism = self.acc, self.mechanism
        plan = plan_release(scan.codes, float(mechanism.epsilon), budget=acc.budget, ledger=acc.ledger,
                            max_rows_per_user=acc.max_rows_per_user, policy=acc.policy, consistent=False,
                            rng=self.source, run_id=acc.run_id, mechanism=acc.mechanism, persons=scan.ids,
                            unit=space_unit(mechanism.space, mechanism.metadata))
        try:
            run = AccountedRun(self.src, plan, len(scan.ids), None, None, self.release, self.identity)
            if run.written_all:
                run.seen = run.rows  # every row read was written with a fresh release
        except BaseException:
            plan.abort()
            raise
        return run
