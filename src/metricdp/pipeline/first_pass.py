"""The first pass of an accounted release, for every kind and format: who each row belongs to.

Before any budget is reserved, an accounted release reads the whole input once
(:func:`first_pass`): each chunk's user column becomes a small integer code per row
(:class:`~metricdp.streaming.persons.PersonCollector`: the same checks and messages as the
one-read release), the released column is parsed and refused exactly as the release pass
will parse and refuse it (:meth:`~.kind.Kind.parse`: a value the release would refuse stops
the run here, before anything is reserved), a kind's own check of a chunk runs (points:
outside a region), and for consistent releases the values are kept for the plan's groups.
:func:`start_accounted` then plans (:func:`~metricdp.accounting.plan.plan_release`: cap,
groups, memo, budget, with the kind's eps, unit and width) and, for consistent releases,
draws each fresh group's release once. The release pass that follows is the one chunk loop
(:mod:`.run`) with the run's :meth:`~metricdp.streaming.accounted.AccountedRun.select`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress, report
from ..errors import ValidationError
from ..tabular.columns import ColumnPlan
from ..tabular.leaks import ContentScan
from .kind import Kind
from .run import Source, unnamed

__all__ = ["FirstPass", "first_pass", "start_accounted"]


@dataclass(frozen=True)
class FirstPass:
    """What the first pass read: the persons (sorted ids), a code per row, the kept values (consistent only)."""

    persons: Any
    codes: NDArray[np.signedinteger[Any]]
    values: Any = None


def _check_user_column(names: tuple[str, ...], kind: Kind, user: str, where: str) -> None:
    if user in kind.columns:
        what = "a released coordinate" if kind.geometry is not None else "the released column"
        raise ValidationError(f"{where}: the user column {user!r} is {what}; name the column that says who each row "
                              "belongs to")
    if user not in names:
        shown = ", ".join(repr(h) for h in names[:20])
        raise ValidationError(f"{where}: no user column {user!r} (columns: {shown})")


def first_pass(kind: Kind, source: Source, user_column: str, *, keep_values: bool = False,
               progress: Progress | None = None, others: tuple[str, ...] = (), per_row: bool = True) -> FirstPass:
    """Read ``user_column`` and ``kind``'s columns of every row (module docstring); refusals as the release's.

    ``others``: the columns nobody named, whose content is checked on the way
    (:class:`~metricdp.tabular.leaks.ContentScan`). ``per_row=False``: no code per row is kept
    (the result's ``persons`` is None and its ``codes`` empty) -- a kind whose reservation needs
    only a count per person keeps that count itself in :meth:`~.kind.Kind.check` and looks its
    persons up again per chunk in the release pass, so the pass's memory grows with the persons,
    never with the rows.
    """
    from ..streaming.persons import FIRST_PASS, SCAN_BYTES, PersonCollector

    where = source.where
    collector = PersonCollector(where, user_column, source.path.stat().st_size) if per_row else None
    refused = kind.refusals()
    content = ContentScan(kind.rule(), others, where)
    found: list[Any] = []
    seen, unit = 0, "line"
    scan = Source(source.path, source.format, source.chunk_rows, max(source.chunk_bytes, SCAN_BYTES),
                  source.max_record)  # reads of at least SCAN_BYTES: few chunks, so few hashes of the ids seen
    with scan.open() as reader:
        _check_user_column(reader.names, kind, user_column, where)
        if collector is not None:
            collector.start_reader(reader)
        for chunk in reader.chunks():
            if not chunk.rows:
                continue
            unit = chunk.unit
            content.add(chunk)
            if collector is not None:
                collector.add(chunk)
            got = kind.parse(chunk)
            if got.refused.size:
                refused.add(chunk.places(got.refused), chunk.texts(kind.columns[0], got.refused[:kind.show]),
                            got.reasons)
            if not refused.rows:
                kind.check(got.values, seen)
                if keep_values:
                    found.append(got.values)
            seen += chunk.rows
            report(progress, seen, None, FIRST_PASS)
    content.finish()
    if refused.rows:
        raise refused.error(where, unit)
    persons, codes = None, np.zeros(0, dtype=np.int32)
    if collector is not None:
        rows = collector.finish()
        persons, codes = rows.ids, rows.codes
    values = None
    if keep_values:
        values = np.concatenate(found) if found else kind.parse_empty()
    return FirstPass(persons, codes, values)


def start_accounted(kind: Kind, source: Source, acc: Any, rng: Any, *, progress: Progress | None = None,
                    columns: ColumnPlan | None = None) -> Any:
    """First pass and plan of an accounted release of ``kind``: the budget reserved (or the run refused) before
    anything is drawn; returns the :class:`~metricdp.streaming.accounted.AccountedRun` whose ``select`` the
    release pass uses. ``columns``: the release's column plan, whose unnamed columns the first pass checks.
    """
    from ..accounting.plan import check_additive, plan_release
    from ..streaming.accounted import AccountedRun, _identity

    if acc.additive:
        check_additive(acc.additive, acc.ledger.budget if acc.ledger is not None else acc.budget)  # before a pass
    identity = _identity(source.path)
    read = first_pass(kind, source, acc.user_column, keep_values=acc.consistent, progress=progress,
                      others=() if columns is None else unnamed(columns, kind))
    if read.codes.size == 0 and kind.refuses_empty:
        raise ValidationError(f"{source.where}: no data rows")
    plan = plan_release(read.codes, float(kind.epsilon), budget=acc.budget, ledger=acc.ledger,
                        max_rows_per_user=acc.max_rows_per_user, policy=acc.policy, consistent=acc.consistent,
                        true_values=read.values, scope=acc.scope, width=kind.width, rng=rng, run_id=acc.run_id,
                        mechanism=acc.mechanism, persons=read.persons, unit=kind.unit, additive=acc.additive)
    try:
        group_release = None
        if acc.consistent and read.values is not None:
            rows = plan.group_row[plan.fresh]
            drawn = kind.release(read.values[rows], 0) if rows.size else kind.parse_empty()
            group_release = np.asarray(plan.releases(np.asarray(drawn)), dtype=np.asarray(drawn).dtype)
    except BaseException:
        plan.abort()
        raise
    return AccountedRun(source.path, plan, len(read.persons), read.values, group_release, kind.release, identity)
