"""The engines count rows per person in one distributed pass.

An accounted release must know every row's person before it draws anything
(:mod:`metricdp.streaming.accounted`). On the local engine one sequential pass reads the
user column (:func:`metricdp.streaming.persons.scan_persons`); on Dask and Spark each
partition reads the user column of its own piece (:class:`PersonCount`, run by
:func:`._pieces.release_piece` like a release) with the local engine's record definition
and the local pass's rules for an id (an empty or over-long id refused with its line or
row; Parquet ids as UTF-8 text without NUL), and returns the piece's distinct ids (Arrow
``binary``, in order of first sight) and one small code per row. The driver merges them
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
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import EngineError, ValidationError
from ..tabular import csvsplit
from ._plan import Cutter, Piece, Plan, read_piece, row_group_pieces

__all__ = ["PersonCount", "PersonCounts", "PersonsDone", "merge_counts", "start_counted"]


@dataclass(frozen=True)
class PersonsDone:
    """One piece's persons: distinct ids (pyarrow binary, order of first sight) and a code per row (int32)."""

    index: int
    ids: Any
    codes: bytes
    rows: int


@dataclass(frozen=True)
class PersonCounts:
    """The persons of a file, as the local pass holds them: distinct ids (Arrow ``binary``, sorted bytewise),
    rows per person, and (for a plan) every row's code into the ids."""

    ids: Any
    counts: NDArray[np.int64]
    codes: NDArray[np.int64] | None = None

    @property
    def persons(self) -> NDArray[Any]:
        """The distinct ids as numpy text (built on demand: the plan and the ledger take :attr:`ids`)."""
        from ..streaming.persons import text_view

        return text_view(self.ids)


@dataclass(frozen=True)
class PersonCount:
    """The job of a counting pass: read ``user_column`` (column ``user`` of the plan's names) of a piece."""

    user_column: str
    user: int

    def count(self, job: Any, piece: Piece) -> PersonsDone:
        """The piece's distinct ids and codes (raises the local pass's ValidationError on a bad id)."""
        pa = import_optional("pyarrow", extra="parquet")
        pc = import_optional("pyarrow.compute", extra="parquet")
        ids = self._csv_ids(job, piece) if job.plan.fmt == "csv" else self._parquet_ids(job, piece)
        enc = pc.dictionary_encode(ids)
        codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int32)
        return PersonsDone(piece.index, enc.dictionary.cast(pa.binary()), codes.tobytes(), int(codes.size))

    def _csv_ids(self, job: Any, piece: Piece) -> Any:
        from ..streaming.persons import _refuse_empty

        pa = import_optional("pyarrow", extra="parquet")
        pc = import_optional("pyarrow.compute", extra="parquet")
        plan = job.plan
        _, buf, recs = read_piece(plan.path, piece.start, piece.stop, first_line=piece.first, rows=piece.rows,
                                  ncols=len(plan.names), column=self.user, max_record=plan.max_record)
        raw, offs, quoted, raw_quoted = csvsplit.field_values(buf, recs.fs, recs.fe)
        ids = pa.Array.from_buffers(pa.binary(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(raw)])
        if quoted.any():
            ids = pc.replace_with_mask(ids, pa.array(quoted), pa.array(raw_quoted, type=pa.binary()))
        _refuse_empty(np.asarray(pc.binary_length(ids).to_numpy(zero_copy_only=False)), plan.path, self.user_column,
                      piece.first + recs.lines, "line(s)")
        return ids

    def _parquet_ids(self, job: Any, piece: Piece) -> Any:
        from ..streaming.persons import _as_text, _refuse_empty

        pa = import_optional("pyarrow", extra="parquet")
        pc = import_optional("pyarrow.compute", extra="parquet")
        pq = import_optional("pyarrow.parquet", extra="parquet")
        plan = job.plan
        pf = pq.ParquetFile(plan.path)
        utype = pf.schema_arrow.field(self.user_column).type
        if not (pa.types.is_integer(utype) or pa.types.is_string(utype) or pa.types.is_large_string(utype)
                or pa.types.is_binary(utype) or pa.types.is_dictionary(utype)):
            raise ValidationError(f"{plan.path}: user column {self.user_column!r} has type {utype}: person ids must "
                                  "be integers or text")
        ids = pf.read_row_groups(list(range(piece.start, piece.stop)), columns=[self.user_column]).column(0)
        ids = ids.combine_chunks()
        if len(ids) != piece.rows:
            raise ValidationError(f"{plan.path}: the file changed while it was being released; nothing written")
        rows = piece.first + np.arange(len(ids), dtype=np.int64)
        if ids.null_count:
            _refuse_empty(np.where(np.asarray(ids.is_null().to_numpy(zero_copy_only=False)), 0, 1), plan.path,
                          self.user_column, rows, "row(s)")
        as_bin = _as_text(pa, pc, ids, plan.path, self.user_column, piece.first - 1)
        _refuse_empty(np.asarray(pc.binary_length(as_bin).to_numpy(zero_copy_only=False)), plan.path,
                      self.user_column, rows, "row(s)")
        return as_bin


def merge_counts(results: Sequence[PersonsDone]) -> PersonCounts:
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
    return PersonCounts(table.ids, table.counts, code[at])


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
                        mechanism: Any, progress: Any = None) -> PersonCounts:
    """One distributed pass over the user column of ``plan``'s pieces: the file's persons and row codes.

    ``progress`` (:data:`metricdp._progress.Progress`) is told as the partitions complete.
    """
    from ._pieces import Job

    job = Job(replace(plan, pieces=()), column, None, "", PersonCount(user_column, user_index(plan, user_column,
                                                                                               column)))
    results = list(runner(job, plan.pieces, mechanism, progress)) if plan.pieces else []
    found = merge_counts(_check(engine, plan.pieces, results))
    if found.codes is None or found.codes.size != plan.rows:
        raise EngineError(f"the {engine} job counted persons for {0 if found.codes is None else found.codes.size:,} "
                          f"rows where the input has {plan.rows:,}")
    return found


def start_counted(src: Path, identity: tuple[int, ...], persons: PersonCounts, epsilon: float, acc: Any,
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


def pieces_of(src: Path, user_column: str, fmt: str, piece_bytes: int, max_record: int | None) -> Plan:
    """The file cut into pieces of whole records, without a released column (a counting pass only)."""
    import os

    from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader
    from ..tabular.parquet import open_parquet

    st = os.stat(src)
    where = str(src)
    if fmt == "csv":
        cutter = Cutter(piece_bytes)
        with src.open("rb") as inp:
            reader = CsvReader(inp, where, chunk_bytes=DEFAULT_CHUNK_BYTES, max_record=max_record)
            names = tuple(reader.header().names)
            _has_user(names, user_column, where)
            for chunk in reader.chunks(names.index(user_column)):
                cutter.add(chunk)
            cap = reader.cap
        pieces = [Piece(i, *cut) for i, cut in enumerate(cutter.pieces())]
        return Plan(where, "csv", names, -1, b"", tuple(pieces), sum(p.rows for p in pieces), st.st_size,
                    st.st_mtime_ns, max_record=cap)
    pf = open_parquet(src)
    names = tuple(pf.schema_arrow.names)
    _has_user(names, user_column, where)
    groups = row_group_pieces(pf.metadata, piece_bytes)
    return Plan(where, "parquet", names, -1, b"", groups, sum(p.rows for p in groups), st.st_size, st.st_mtime_ns)


def _has_user(names: Sequence[str], user_column: str, where: str) -> None:
    if user_column not in names:
        raise ValidationError(f"{where}: no user column {user_column!r} (columns: "
                              f"{', '.join(repr(h) for h in names[:20])})")
