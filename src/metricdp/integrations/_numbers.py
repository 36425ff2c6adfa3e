"""``privatize-numbers --engine dask|spark``: a numeric column released on a grid, piece by piece on a cluster.

The shape of :mod:`._run` (plan, pieces, parts, check, join, publish) with the number
rule of the local engine (:mod:`metricdp.streaming.numbers`) in place of the label lookup:

1. the driver reads the input once with the local engine's record definition and column
   plan (:class:`~metricdp.tabular.csv.CsvReader`, :func:`~metricdp.tabular.columns.plan_columns`),
   parses every field of the column by the one number rule
   (:func:`~metricdp.streaming.number_text.parse_numbers`) and places it on the grid by
   the release's own rule (:func:`metricdp.streaming.numbers._status`: range, grid,
   ``out_of_range``, ``off_grid``), so a value the local engine refuses is refused here
   with the local engine's one error (count per reason, first lines) before any task
   runs; it cuts the file into :class:`~._plan.Piece` s of whole records (CSV: byte
   ranges; Parquet: runs of row groups);
2. each task (:func:`release_numbers_piece`) re-reads its piece with the same record
   definition, places it on the grid again (a value that is no longer releasable means
   the file changed: refused), draws its releases from
   :func:`~metricdp.integrations.partition_rng` ``(seed, piece)`` (secure by default) and
   writes the local engine's bytes for those records: CSV fields spliced with the grid
   points' text (quoted where the input field was), every other byte kept, dropped
   columns removed; Parquet row groups with the column replaced, the schema kept;
3. the driver checks every part's row count, joins the parts and publishes atomically.

With ``accounting`` the driver plans per person as the local engine plans
(:func:`metricdp.streaming.accounted_numbers.start_numbers`: one reservation per job) and
each piece carries the rows it writes (and, for consistent releases, their releases).

Same output as the local engine: for a given input the engines write the local engine's
bytes everywhere but in the released fields, which are draws of the same law; where a
release is determined (a consistent repeat of a paid release, read back from the ledger)
the output is the local engine's byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError
from ..streaming import csvsplit
from ..tabular.columns import plan_columns
from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader
from ..tabular.formats import TABLE_FORMATS, format_of
from ..tabular.parquet import input_compression, open_parquet
from ._plan import DEFAULT_PIECE_BYTES, Cutter, Piece, Plan, changed, read_piece

__all__ = ["NumberRule", "plan_numbers", "release_numbers_piece"]

#: ``classify(numbers, not_number, empty) -> (ranks, status)`` (status 0: releasable).
Classify = Callable[[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]], tuple[NDArray[np.intp], Any]]


@dataclass(frozen=True)
class NumberRule:
    """How a field becomes a grid rank: the local engine's ``out_of_range`` and ``off_grid``."""

    out_of_range: str = "error"
    off_grid: str = "error"

    def classify(self, mechanism: Any) -> Classify:
        from ..streaming.numbers import OFF_GRID, OUT_OF_RANGE, _status

        if self.out_of_range not in OUT_OF_RANGE:
            raise ValidationError(f"out_of_range must be one of {', '.join(OUT_OF_RANGE)}, got {self.out_of_range!r}")
        if self.off_grid not in OFF_GRID:
            raise ValidationError(f"off_grid must be one of {', '.join(OFF_GRID)}, got {self.off_grid!r}")

        def classify(numbers: NDArray[np.float64], bad: NDArray[np.bool_], empty: NDArray[np.bool_]) -> Any:
            return _status(mechanism, numbers, bad, empty, self.out_of_range, self.off_grid)

        return classify


# ------------------------------------------------------------------------------ one chunk
def csv_ranks(buf: NDArray[np.uint8], recs: Any, classify: Classify) -> tuple[NDArray[np.intp], Any, Any]:
    """Grid ranks, status and quoted flags of the located field of each record (the local engine's rule)."""
    from ..streaming.number_text import parse_numbers

    pa = import_optional("pyarrow", extra="parquet")
    data, offs, quoted, raw_quoted = csvsplit.field_values(buf, recs.fs, recs.fe)
    values = pa.Array.from_buffers(pa.string(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
    numbers, not_number = parse_numbers(values, quoted, raw_quoted)
    ranks, status = classify(numbers, not_number, recs.fe == recs.fs)
    return ranks, status, quoted


def _numeric(kind: Any) -> bool:
    pa = import_optional("pyarrow", extra="parquet")
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind))


def parquet_ranks(col: Any, classify: Classify) -> tuple[NDArray[np.intp], Any]:
    """Grid ranks and status of a Parquet column's values (the local engine's rule: text, numbers, decimals)."""
    from ..mechanisms.numeric import inexact_integers
    from ..streaming.number_text import parse_numbers

    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    kind = col.type
    empty = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    inexact = None
    if _numeric(kind):
        exact = pc.cast(col, pa.string()) if pa.types.is_decimal(kind) else col  # decimals through their text
        numbers = np.asarray(pc.fill_null(pc.cast(exact, pa.float64(), safe=False), 0.0)
                             .to_numpy(zero_copy_only=False), dtype=np.float64)
        not_number = np.zeros(len(col), dtype=bool)
        if pa.types.is_integer(kind):
            inexact = inexact_integers(np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False)), numbers)
    else:
        numbers, not_number = parse_numbers(pc.fill_null(col.cast(pa.string()), "0"))
    ranks, status = classify(numbers, not_number, empty)
    if inexact is not None and inexact.any():
        status[inexact & (status == 0)] = 4  # the float is a grid point, the integer is not
    return ranks, status


# ------------------------------------------------------------------------------ driver
def plan_numbers(
    src: Path, column: str, mechanism: Any, rule: NumberRule, *, piece_bytes: int = DEFAULT_PIECE_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES, keep: Sequence[str] = (), drop: Sequence[str] = (),
    max_record: int | None = None,
) -> Plan:
    """Check every value of ``column`` of ``src`` as the local engine would and cut the file into pieces.

    Raises
    ------
    ValidationError
        the local engine's errors, with its messages: the column plan's, the record
        definition's (line and byte offset), the values that cannot be released (count
        per reason, first lines or rows, "nothing written").
    """
    if piece_bytes < 1:
        raise ValidationError(f"piece_bytes must be >= 1, got {piece_bytes}")
    fmt = format_of(src, TABLE_FORMATS)
    st = os.stat(src)
    classify = rule.classify(mechanism)
    if fmt == "csv":
        return _plan_csv(src, column, mechanism, classify, piece_bytes, chunk_bytes, st, keep, drop, max_record)
    return _plan_parquet(src, column, mechanism, classify, piece_bytes, st, keep, drop)


def _plan_csv(src: Path, column: str, mechanism: Any, classify: Classify, piece_bytes: int, chunk_bytes: int,
              st: os.stat_result, keep: Sequence[str], drop: Sequence[str], max_record: int | None) -> Plan:
    from ..streaming.number_text import _SHOW, BadNumbers, _field_text

    where = str(src)
    bad = BadNumbers()
    cutter = Cutter(piece_bytes)
    rows = 0
    with src.open("rb") as inp:
        reader = CsvReader(inp, where, chunk_bytes=chunk_bytes, max_record=max_record)
        header = reader.header()
        cols = plan_columns(header.names, [column], keep=keep, drop=drop, where=where)
        col = cols.index(column)
        for chunk in reader.chunks(col):
            recs = chunk.records
            cutter.add(chunk)
            _, status, _ = csv_ranks(chunk.buf, recs, classify)
            refused = np.flatnonzero(status)
            if refused.size:
                texts = [_field_text(chunk.data, int(recs.fs[i]), int(recs.fe[i])) for i in refused[:_SHOW]]
                bad.add(chunk.first_line + recs.lines[refused], texts, status[refused])
            rows += len(recs.starts)
        cap = reader.cap
    if bad.rows:
        raise bad.error(where, column, mechanism.grid, "line")
    pieces = [Piece(i, *cut) for i, cut in enumerate(cutter.pieces())]
    head = csvsplit.header_bytes(header, cols.dropped_indices)
    return Plan(where, "csv", tuple(header.names), col, head, tuple(pieces), rows, st.st_size, st.st_mtime_ns,
                columns=cols, max_record=cap)


def _plan_parquet(src: Path, column: str, mechanism: Any, classify: Classify, piece_bytes: int, st: os.stat_result,
                  keep: Sequence[str], drop: Sequence[str]) -> Plan:
    from ..streaming.number_text import _SHOW, BadNumbers

    pa = import_optional("pyarrow", extra="parquet")
    where = str(src)
    pf = open_parquet(src)
    schema = pf.schema_arrow
    cols = plan_columns(schema.names, [column], keep=keep, drop=drop, where=where)
    j = cols.index(column)
    kind = schema.field(j).type
    if not (_numeric(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise ValidationError(f"{where}: column {column!r} has type {kind}; numbers or text expected")
    out_values(mechanism, kind, where, column)
    bad = BadNumbers()
    seen = 0
    try:
        for batch in pf.iter_batches(columns=[column], batch_size=1_000_000):
            col = batch.column(0)
            _, status = parquet_ranks(col, classify)
            refused = np.flatnonzero(status)
            if refused.size:
                texts = ["null" if v is None else str(v) for v in col.take(pa.array(refused[:_SHOW])).to_pylist()]
                bad.add(seen + refused + 1, texts, status[refused])
            seen += len(col)
    except (OSError, pa.ArrowException) as ex:
        raise ValidationError(f"{where}: not a readable Parquet file ({ex})") from None
    if bad.rows:
        raise bad.error(where, column, mechanism.grid, "row")
    meta = pf.metadata
    pieces: list[Piece] = []
    start = rows = size = first = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        rows += group.num_rows
        size += group.total_byte_size
        if size >= piece_bytes or g == meta.num_row_groups - 1:
            pieces.append(Piece(len(pieces), start, g + 1, rows, first + 1))
            first += rows
            start, rows, size = g + 1, 0, 0
    if first != seen:
        raise ValidationError(f"{where}: the row groups hold {first:,} rows but {seen:,} were read")
    written = set(cols.written)
    out_schema = pa.schema([f for f in schema if f.name in written], metadata=schema.metadata)
    return Plan(where, "parquet", tuple(schema.names), j, b"", tuple(pieces), seen, st.st_size, st.st_mtime_ns,
                columns=cols, schema=out_schema, compression=input_compression(meta))


def out_values(mechanism: Any, kind: Any, where: str, column: str) -> Any:
    """The grid points a release may take, as an Arrow array of the column's type (the local engine's error)."""
    pa = import_optional("pyarrow", extra="parquet")
    try:
        return pa.array(mechanism.output_labels, type=pa.string()).cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as ex:
        raise ValidationError(
            f"{where}: column {column!r} has type {kind}; the released grid points cannot be written as it ({ex})"
        ) from None


# ------------------------------------------------------------------------------ worker
def release_numbers_piece(job: Any, piece: Piece, mechanism: Any) -> tuple[bytes, int]:
    """The part file's bytes of ``piece`` and its rows (called by :func:`._pieces.release_piece`)."""
    classify = job.rule.classify(mechanism)
    if job.plan.fmt == "csv":
        return _release_csv(job, piece, mechanism, classify)
    return _release_parquet(job, piece, mechanism, classify)


def _changed(job: Any, what: str) -> ValidationError:
    return changed(job.plan.path, what)


def _draws(job: Any, piece: Piece, mechanism: Any, ranks: NDArray[np.intp]) -> tuple[Any, NDArray[np.intp]]:
    """The rows written (None: all) and their output indices: the driver's (consistent) or fresh draws."""
    from ._common import partition_rng

    keep, given = piece.selection()
    if given is not None:
        return keep, given
    chosen = ranks if keep is None else ranks[keep]
    if chosen.size == 0:
        return keep, chosen
    return keep, np.asarray(mechanism.draw(np.asarray(chosen, dtype=np.intp), partition_rng(job.seed, piece.index)),
                            dtype=np.intp)


def _release_csv(job: Any, piece: Piece, mechanism: Any, classify: Classify) -> tuple[bytes, int]:
    from ..streaming.files import _label_table

    plan = job.plan
    _, buf, recs = read_piece(plan.path, piece.start, piece.stop, first_line=piece.first, rows=piece.rows,
                              ncols=len(plan.names), column=plan.column, max_record=plan.max_record)
    ranks, status, quoted = csv_ranks(buf, recs, classify)
    if status.any():
        raise _changed(job, f"line {piece.first + int(recs.lines[int(np.flatnonzero(status)[0])])} cannot be released")
    keep, drawn = _draws(job, piece, mechanism, ranks)
    n_out = len(mechanism.output_labels)
    table, offsets = _label_table(mechanism.output_labels)
    dropped = plan.columns.dropped_indices if plan.columns is not None else ()
    starts, stops, row, kind = csvsplit.edits_for(recs, plan.column, dropped)
    if keep is None:
        per_row = drawn + n_out * quoted
    else:  # a withheld record goes whole, line break included: its field is never written
        per_row = np.full(len(ranks), 2 * n_out, dtype=np.intp)
        per_row[keep] = drawn + n_out * quoted[keep]
        starts, stops, row, kind = csvsplit.without_records(buf, recs, ~keep, starts, stops, row, kind)
    choice = np.full(len(starts), 2 * n_out, dtype=np.intp)
    if len(per_row):
        field = kind == 0
        choice[field] = per_row[row[field]]
    out = csvsplit.splice(buf, recs.end, starts, stops, table, offsets, choice)
    return out.tobytes(), len(drawn)


def _release_parquet(job: Any, piece: Piece, mechanism: Any, classify: Classify) -> tuple[bytes, int]:
    pa = import_optional("pyarrow", extra="parquet")
    pq = import_optional("pyarrow.parquet", extra="parquet")
    plan = job.plan
    table = pq.ParquetFile(plan.path).read_row_groups(list(range(piece.start, piece.stop)))
    j = plan.column
    if table.num_rows != piece.rows or table.schema.names != list(plan.names):
        raise _changed(job, f"row groups {piece.start} to {piece.stop - 1}")
    col = table.column(j).combine_chunks()
    ranks, status = parquet_ranks(col, classify)
    if status.any():
        raise _changed(job, f"row {piece.first + int(np.flatnonzero(status)[0])} cannot be released")
    field = table.schema.field(j)
    outs = out_values(mechanism, field.type, plan.path, job.column_name)
    keep, drawn = _draws(job, piece, mechanism, ranks)
    if keep is not None:
        table = table.filter(pa.array(keep))
    table = table.set_column(j, field, outs.take(pa.array(drawn, type=pa.int64())))
    table = table.select(plan.schema.names).replace_schema_metadata(plan.schema.metadata)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=plan.compression)
    return sink.getvalue().to_pybytes(), len(drawn)
