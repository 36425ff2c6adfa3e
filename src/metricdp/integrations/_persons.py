"""The engines count rows per person in one distributed pass.

An accounted release must know every row's person before it draws anything
(:mod:`metricdp.streaming.accounted`). On the local engine one sequential pass reads the
user column (:func:`metricdp.streaming.persons.scan_persons`); on Dask and Spark each
partition reads the user column of its own piece (:class:`PersonCount`, run by
:func:`._pieces.release_piece` like a release) with the local engine's reader of the
format and the local pass's own collector (:class:`metricdp.streaming.persons.PersonCollector`:
an empty or over-long id refused with its line or row; typed ids as UTF-8 text without
NUL), and returns the piece's distinct ids (Arrow ``binary``, sorted) and one small code
per row. The driver merges them
(:func:`merge_counts`) through the constructor of the per-person table,
:func:`metricdp.streaming.persons.person_table`: the distinct ids of the whole file as the
local pass holds them (Arrow ``binary``, sorted bytewise), the per-row codes into them (so
the plan is the local pass's plan, row for row) and the rows per person.

What crosses the wire per piece: its distinct ids and 4 bytes per row; the driver holds
the distinct ids of the file (Arrow, never a string per id) and 8 bytes per row (the plan
needs them), as the local pass.

:func:`metricdp.integrations.persons.count_per_person` is the aggregation alone: the
table's ids as a pyarrow string array and the rows per person as int64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._optional import import_optional
from ..errors import EngineError, ValidationError
from ..tabular.columns import ColumnPlan
from ._plan import Piece, Plan, cut_file, engine_format

if TYPE_CHECKING:
    from ..streaming.persons import PersonTable

__all__ = ["PersonCount", "PersonsDone", "merge_counts", "start_counted"]


@dataclass(frozen=True)
class PersonsDone:
    """One piece's persons: distinct ids (pyarrow binary, order of first sight) and a code per row (int32)."""

    index: int
    ids: Any
    codes: bytes
    rows: int


@dataclass(frozen=True)
class PersonCount:
    """The job of a counting pass: read ``user_column`` of a piece (the chunk is asked for it by name)."""

    user_column: str

    def count(self, job: Any, piece: Piece) -> PersonsDone:
        """The piece's distinct ids and codes (raises the local pass's ValidationError on a bad id).

        The piece is read by its format (:class:`~metricdp.tabular.formats.Parts`) and its user
        column encoded by the local pass's own collector, with its checks and messages.
        """
        from ..streaming.persons import PersonCollector

        plan = job.plan
        chunk = plan.parts.read(piece, plan.layout)
        collector = PersonCollector(plan.path, self.user_column, 0)
        collector.add(chunk)
        found = collector.finish()
        codes = np.asarray(found.codes, dtype=np.int32)
        return PersonsDone(piece.index, found.ids, codes.tobytes(), int(codes.size))


def merge_counts(results: Sequence[PersonsDone]) -> PersonTable:
    """The file's persons from its pieces' (in piece order), built by the one constructor of the per-person table.

    Every piece's distinct ids go into :func:`metricdp.streaming.persons.person_table` at
    once, each with its rows in that piece: the constructor sums the repeats and sorts
    bytewise, as the local pass sorts. One ``index_in`` of the same concatenation into the
    table's ids then gives each piece id its code, and each row's code is a ``take``
    through its piece's ids: no lookup per piece, no text per id, Arrow binary throughout.
    """
    from ..streaming.persons import person_table

    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    every = pa.concat_arrays([r.ids for r in results]) if results else pa.array([], type=pa.binary())
    local = [np.frombuffer(r.codes, dtype=np.int32) for r in results]
    sizes = np.array([len(r.ids) for r in results], dtype=np.int64)
    base = np.cumsum(sizes) - sizes  # where each piece's ids start in ``every``
    at = np.repeat(base, [c.size for c in local]) + (np.concatenate(local) if local else np.zeros(0, np.int64))
    table = person_table(every, np.bincount(at, minlength=len(every)).astype(np.int64))
    code = np.asarray(pc.index_in(every, value_set=table.ids).to_numpy(zero_copy_only=False), dtype=np.int64)
    return replace(table, codes=code[at])


def _check(engine: str, pieces: Sequence[Piece], results: Sequence[Any]) -> list[PersonsDone]:
    from ._pieces import Failed

    failed = [r for r in results if isinstance(r, Failed)]
    if failed:
        first = min(failed, key=lambda r: (not r.input, r.index))
        if first.input:
            raise ValidationError(first.message)
        raise EngineError(f"the {engine} job failed in partition {first.index} (counting rows per person): "
                          f"{' '.join(first.message.split())[:400]}")
    if len(results) != len(pieces) or any(
            not isinstance(r, PersonsDone) or r.index != p.index or r.rows != p.rows
            for r, p in zip(results, pieces, strict=False)):
        raise EngineError(f"the {engine} job's count of rows per person does not match the input's pieces")
    return list(results)


def user_index(plan: Plan, user_column: str, column: str) -> int:
    """The user column's index, with the local pass's errors."""
    if user_column == column:
        raise ValidationError(f"{plan.path}: the user column {column!r} is the released column; name the column "
                              "that says who each row belongs to")
    _has_user(plan.names, user_column, plan.path)
    return plan.names.index(user_column)


def distributed_persons(engine: str, runner: Any, plan: Plan, column: str, user_column: str,
                        mechanism: Any, progress: Any = None) -> PersonTable:
    """One distributed pass over the user column of ``plan``'s pieces: the file's persons and row codes.

    ``progress`` (:data:`metricdp._progress.Progress`) is told as the partitions complete.
    """
    from ._pieces import Job

    user_index(plan, user_column, column)  # the local pass's errors, before any piece is read
    job = Job(replace(plan, pieces=()), column, None, "", PersonCount(user_column))
    results = list(runner(job, plan.pieces, mechanism, progress)) if plan.pieces else []
    found = merge_counts(_check(engine, plan.pieces, results))
    if found.codes is None or found.codes.size != plan.rows:
        raise EngineError(f"the {engine} job counted persons for {0 if found.codes is None else found.codes.size:,} "
                          f"rows where the input has {plan.rows:,}")
    return found


def start_counted(src: Path, identity: tuple[int, ...], persons: PersonTable, epsilon: float, acc: Any,
                  source: Any, unit: str, release: Callable[[Any], Any], *, refuse_empty: bool = True) -> Any:
    """The plan of a release that needs only who each row belongs to (no consistent groups): the budget
    reserved (or the run refused) before anything is drawn, as
    :func:`metricdp.pipeline.first_pass.start_accounted` does."""
    from ..accounting.plan import plan_release
    from ..streaming.accounted import AccountedRun

    if acc.consistent:
        raise ValidationError("consistent releases need the true values: the local first pass reads them")
    codes = persons.codes if persons.codes is not None else np.zeros(0, dtype=np.int64)
    if codes.size == 0 and refuse_empty:
        raise ValidationError(f"{src}: no data rows")
    plan = plan_release(codes, float(epsilon), budget=acc.budget, ledger=acc.ledger,
                        max_rows_per_user=acc.max_rows_per_user, policy=acc.policy, consistent=False,
                        scope=acc.scope, rng=source, run_id=acc.run_id, mechanism=acc.mechanism,
                        persons=persons.ids, unit=unit)
    return AccountedRun(src, plan, len(persons.ids), None, None, release, identity)


def pieces_of(src: Path, user_column: str, piece_bytes: int, max_record: int | None) -> Plan:
    """The file cut into pieces of whole rows, without a released column (a counting pass only); a typed
    user column's type is checked here, as the local pass checks it."""
    from ..streaming.persons import PersonCollector

    fmt = engine_format(src)
    where = str(src)
    with fmt.open(src, chunk_rows=1, chunk_bytes=65536, max_record=max_record) as reader:
        names = tuple(reader.names)
        _has_user(names, user_column, where)
        PersonCollector(where, user_column, 0).start_reader(reader)
    return cut_file(src, fmt, ColumnPlan(names, (), (), names, ()), piece_bytes=piece_bytes, max_record=max_record)


def _has_user(names: Sequence[str], user_column: str, where: str) -> None:
    if user_column not in names:
        raise ValidationError(f"{where}: no user column {user_column!r} (columns: "
                              f"{', '.join(repr(h) for h in names[:20])})")
