"""How the engines plan a file, read a piece of it, write its part and join the parts, per file format.

A release is the same for every format (:func:`._pieces.release_piece`: parse with the
kind, select, release, render); what differs is where a piece's rows come from and how
its part is written, and each format says it here once, on the format layer's own
objects (:mod:`metricdp.tabular.formats`):

* a byte-keeping format (CSV): the driver reads the file by the one record definition
  (:class:`metricdp.tabular.csv.CsvReader`) and cuts it at record boundaries
  (:class:`._plan.Cutter`); a piece is a byte range of whole records, read again into a
  :class:`~metricdp.tabular.formats.csv.CsvChunk`; its part is those bytes with the
  released fields spliced in (:func:`~metricdp.tabular.formats.csv.splice_released`:
  every other byte kept, dropped columns removed, withheld records left out whole); the
  output is the header the driver planned, then the parts;
* a typed format (Parquet): the driver reads the released columns batch by batch; a
  piece is a run of row groups (:func:`._plan.row_group_pieces`), one
  :class:`~metricdp.tabular.formats.BatchChunk`; its part is written by the typed
  writer (:class:`~metricdp.tabular.formats.BatchWriter`: the written columns in header
  order, the released ones replaced, the schema's metadata kept); the output is the
  parts' row groups, with the input's compression codec.

The table :data:`PARTS` maps a format's name to its pass, its reader and its writer of parts.
"""

from __future__ import annotations

import io
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import EngineError, ValidationError
from ..pipeline.kind import Kind
from ..tabular import csvsplit
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader
from ..tabular.csv import Chunk as RawChunk
from ..tabular.formats import BatchChunk, BatchWriter, Chunk, Released, WriteSpec, arrow, format_of, release_format
from ..tabular.formats.csv import CsvChunk, splice_released
from ..tabular.leaks import check_file
from ..tabular.parquet import input_compression, open_parquet
from ._plan import DEFAULT_PIECE_BYTES, Cutter, KindCheck, Piece, Plan, changed, read_piece, row_group_pieces

__all__ = ["PARTS", "Parts", "plan_file"]


def plan_file(
    src: Path, kind: Kind, *, piece_bytes: int = DEFAULT_PIECE_BYTES, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    keep: Sequence[str] = (), drop: Sequence[str] = (), max_record: int | None = None, values: bool = True,
    plan_check: Callable[[ColumnPlan], None] | None = None,
) -> Plan:
    """Read ``src`` once, check every value of ``kind``'s columns and cut the file into pieces.

    The one planner of every engine release: the record definition, the column plan and
    the pieces are the local engine's whatever is released. ``kind`` (a pipeline kind
    that never draws here) says which values are refused and how (:class:`KindCheck`;
    ``values=False``: none read here, each worker refuses its piece's), and what a kept
    column must not hold (:meth:`~metricdp.pipeline.kind.Kind.rule`, checked by name and
    content as the local engine checks it). ``keep``/``drop`` plan the columns that leave
    as the local engine plans them; ``plan_check`` sees that plan before anything is read.

    Raises
    ------
    ValidationError
        the local engine's errors, with its messages: a missing or repeated column, a
        bad ``keep``/``drop`` name, any refusal of :mod:`metricdp.tabular.csv` (line and
        byte offset), a kept column that holds the released values, the values the kind
        refuses (count and first line numbers or rows), "nothing written".
    """
    if piece_bytes < 1:
        raise ValidationError(f"piece_bytes must be >= 1, got {piece_bytes}")
    columns = list(kind.columns)
    format_of(src, tuple(PARTS))  # the formats the engines cut into pieces: the others refused by their suffix
    fmt = release_format(src)
    names = fmt.names(src, max_record=max_record)  # the local engine's header and its errors
    cols = plan_columns(names, columns, keep=keep, drop=drop, where=str(src))
    if plan_check is not None:
        plan_check(cols)
    check_file(src, cols, kind.rule(), max_record=max_record)
    return PARTS[fmt.name].plan(src, KindCheck(kind, values), piece_bytes=piece_bytes, chunk_bytes=chunk_bytes,
                                keep=keep, drop=drop, max_record=max_record)


class Parts(ABC):
    """One format's pass of the driver, its pieces read by a worker, its parts written and joined."""

    @abstractmethod
    def plan(self, src: Path, check: KindCheck, *, piece_bytes: int, chunk_bytes: int, keep: Sequence[str],
             drop: Sequence[str], max_record: int | None) -> Plan:
        """The driver's one pass (:func:`plan_file`): every value seen by ``check``, the file cut into
        pieces; ``check``'s error for the refused values, the local engine's errors for the rest."""

    @abstractmethod
    def chunk(self, plan: Plan, piece: Piece, kernels: Any = None) -> Chunk:
        """The piece's rows; a piece that is not what the driver counted is refused (:func:`._plan.changed`)."""

    @abstractmethod
    def write(self, plan: Plan, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released],
              kernels: Any = None) -> bytes:
        """The part file of ``chunk``: its rows where ``keep`` (all when None) with the ``released`` columns."""

    @abstractmethod
    def join(self, plan: Plan, parts: Sequence[Path], fh: IO[bytes]) -> None:
        """The output: the ``parts`` in order (and what the format puts around them) into ``fh``."""


def _written(plan: Plan) -> ColumnPlan:
    """The plan's columns (a plan made without one writes every column)."""
    return plan.columns if plan.columns is not None else ColumnPlan(plan.names, (), (), (), ())


class _SplicedParts(Parts):
    """A text format whose writer keeps every byte it does not release (CSV)."""

    def plan(self, src: Path, check: KindCheck, *, piece_bytes: int, chunk_bytes: int, keep: Sequence[str],
             drop: Sequence[str], max_record: int | None) -> Plan:
        st = os.stat(src)
        where = str(src)
        columns = list(check.kind.columns)
        cutter = Cutter(piece_bytes)
        rows = 0
        with src.open("rb") as inp:
            reader = CsvReader(inp, where, chunk_bytes=chunk_bytes, max_record=max_record)
            header = reader.header()
            cols = plan_columns(header.names, columns, keep=keep, drop=drop, where=where)
            col = cols.index(columns[0])
            index = {n: k for k, n in enumerate(header.names)}
            for chunk in reader.chunks(col):
                cutter.add(chunk)
                check.add(CsvChunk(chunk, index, rows, None))
                rows += len(chunk.records.starts)
            cap = reader.cap
        refused = check.error(where)
        if refused is not None:
            raise refused
        pieces, row = [], 0
        for i, (start, stop, n, first_line) in enumerate(cutter.pieces()):
            pieces.append(Piece(i, start, stop, n, first_line, row))
            row += n
        head = csvsplit.header_bytes(header, cols.dropped_indices)  # the header the local engine writes
        return Plan(where, "csv", tuple(header.names), col, head, tuple(pieces), rows, st.st_size, st.st_mtime_ns,
                    columns=cols, max_record=cap)

    def chunk(self, plan: Plan, piece: Piece, kernels: Any = None) -> Chunk:
        data, buf, recs = read_piece(plan.path, piece.start, piece.stop, first_line=piece.first, rows=piece.rows,
                                     ncols=len(plan.names), column=plan.column, max_record=plan.max_record)
        index = {n: k for k, n in enumerate(plan.names)}
        return CsvChunk(RawChunk(data, buf, recs, piece.start, piece.first), index, piece.row, kernels)

    def write(self, plan: Plan, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released],
              kernels: Any = None) -> bytes:
        out = io.BytesIO()
        index = {n: k for k, n in enumerate(plan.names)}
        splice_released(out, cast(CsvChunk, chunk), index, _written(plan).dropped_indices, keep, released, kernels)
        return out.getvalue()

    def join(self, plan: Plan, parts: Sequence[Path], fh: IO[bytes]) -> None:
        fh.write(plan.header)
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, fh, 4 * 2**20)


class _BatchParts(Parts):
    """A typed format of Arrow record batches (Parquet)."""

    def plan(self, src: Path, check: KindCheck, *, piece_bytes: int, chunk_bytes: int, keep: Sequence[str],
             drop: Sequence[str], max_record: int | None) -> Plan:
        pa, _ = arrow()
        st = os.stat(src)
        where = str(src)
        columns = list(check.kind.columns)
        pf = open_parquet(src)
        schema = pf.schema_arrow
        cols = plan_columns(schema.names, columns, keep=keep, drop=drop, where=where)
        j = cols.index(columns[0])
        check.check_type(schema, where)
        seen = 0
        try:
            for batch in pf.iter_batches(columns=columns, batch_size=1_000_000):
                check.add(BatchChunk(batch, seen))
                seen += batch.num_rows
        except (OSError, pa.ArrowException) as ex:
            raise ValidationError(f"{where}: not a readable Parquet file ({ex})") from None
        refused = check.error(where)
        if refused is not None:
            raise refused
        meta = pf.metadata
        pieces = row_group_pieces(meta, piece_bytes)
        total = sum(p.rows for p in pieces)
        if total != seen:
            raise ValidationError(f"{where}: the row groups hold {total:,} rows but {seen:,} were read")
        written = set(cols.written)
        out_schema = pa.schema([f for f in schema if f.name in written], metadata=schema.metadata)
        return Plan(where, "parquet", tuple(schema.names), j, b"", pieces, seen, st.st_size, st.st_mtime_ns,
                    columns=cols, schema=out_schema, compression=input_compression(meta))

    def chunk(self, plan: Plan, piece: Piece, kernels: Any = None) -> Chunk:
        pa, _ = arrow()
        pq = import_optional("pyarrow.parquet", extra="parquet")
        table = pq.ParquetFile(plan.path).read_row_groups(list(range(piece.start, piece.stop)))
        if table.num_rows != piece.rows or table.schema.names != list(plan.names):
            raise changed(plan.path, f"row groups {piece.start} to {piece.stop - 1}")
        batch = pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], schema=table.schema)
        return BatchChunk(batch, piece.row)

    def write(self, plan: Plan, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released],
              kernels: Any = None) -> bytes:
        pa, _ = arrow()
        pq = import_optional("pyarrow.parquet", extra="parquet")
        schema = cast(BatchChunk, chunk).batch.schema
        if plan.schema is not None:
            schema = schema.with_metadata(plan.schema.metadata or {})
        sink = pa.BufferOutputStream()
        # the typed writer reads the column plan and the schema only: no reader of the whole input behind it
        spec = WriteSpec(cast(Any, None), _written(plan), tuple(c for r in released for c in r.columns), plan.path)
        writer = BatchWriter(spec, schema, lambda s: pq.ParquetWriter(sink, s, compression=plan.compression))
        writer.write(chunk, keep, released)
        writer.close()
        return cast(bytes, sink.getvalue().to_pybytes())

    def join(self, plan: Plan, parts: Sequence[Path], fh: IO[bytes]) -> None:
        pq = import_optional("pyarrow.parquet", extra="parquet")
        writer, rows = None, 0
        try:
            for part in parts:
                pf = pq.ParquetFile(part)
                if writer is None:  # the parts' schema: the released columns' types are the release's
                    writer = pq.ParquetWriter(fh, pf.schema_arrow, compression=plan.compression)
                for g in range(pf.metadata.num_row_groups):
                    table = pf.read_row_group(g)
                    writer.write_table(table)
                    rows += table.num_rows
            if writer is None:
                writer = pq.ParquetWriter(fh, plan.schema, compression=plan.compression)
        finally:
            if writer is not None:
                writer.close()
        expected = sum(p.written for p in plan.pieces)
        if rows != expected:
            raise EngineError(f"the parts hold {rows:,} rows where the input has {expected:,}; nothing written")


#: format name -> how the engines read its pieces and write and join its parts.
PARTS: dict[str, Parts] = {"csv": _SplicedParts(), "parquet": _BatchParts()}
