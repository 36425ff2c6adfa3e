"""The two families of the engines' side of a format (:class:`~._base.Parts`): records on lines, typed batches.

* :class:`RecordParts` -- records on lines (CSV, JSON lines): the driver's pass finds
  where each record starts and :class:`Cutter` cuts at record boundaries; a piece is a
  byte range of whole records, read again by the format's own reader; a part is the
  piece's records as the format writes them; the output is the layout's ``header`` then
  the parts, concatenated.
* :class:`BatchParts` -- typed record batches (Parquet row groups, Arrow IPC record
  batches): a piece is a run of whole groups read as one batch; a part is written by
  :class:`~._base.BatchWriter`; the output is the parts' batches in one file.
"""

from __future__ import annotations

import shutil
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from ...errors import EngineError, ValidationError
from ..columns import ColumnPlan
from ._base import BatchChunk, BatchWriter, Chunk, Layout, Parts, Released, Span, WriteSpec, arrow, changed

__all__ = ["BatchLayout", "BatchParts", "Cutter", "RecordParts", "group_pieces", "one_batch", "read_bytes"]


class Cutter:
    """Cuts records into pieces of whole records of at least ``piece_bytes`` bytes (the last may be shorter).

    :meth:`add` takes a run of records: the file offset where each starts, the offset where the
    last ends (line break and blank lines after it included) and the line of each. A piece ends
    at the end of the first record reaching ``piece_bytes``; pieces are cut inside a chunk too,
    so the reads stay the format's size while small ``piece_bytes`` still give many pieces. One
    ``searchsorted`` per piece, none per record.
    """

    def __init__(self, piece_bytes: int) -> None:
        if piece_bytes < 1:
            raise ValidationError(f"piece_bytes must be >= 1, got {piece_bytes}")
        self.piece_bytes = piece_bytes
        self.cut: list[Span] = []
        self.start = self.line = -1
        self.rows = self.end = 0

    def add(self, starts: NDArray[np.int64], end: int, lines: NDArray[np.int64]) -> None:
        n = len(starts)
        if n == 0:
            return
        ends = np.append(np.asarray(starts[1:], dtype=np.int64), int(end))
        k0 = 0
        while k0 < n:
            if self.start < 0:
                self.start, self.line = int(starts[k0]), int(lines[k0])
            k = k0 + int(np.searchsorted(ends[k0:], self.start + self.piece_bytes))
            if k >= n:  # the piece goes on in the next run
                self.rows += n - k0
                break
            self.rows += k - k0 + 1
            self.cut.append((self.start, int(ends[k]), self.rows, self.line))
            self.start, self.rows = -1, 0
            k0 = k + 1
        self.end = int(ends[-1])

    def pieces(self) -> list[Span]:
        """Every piece, the last one (shorter than ``piece_bytes``) included."""
        if self.start >= 0 and self.rows:
            self.cut.append((self.start, self.end, self.rows, self.line))
            self.start, self.rows = -1, 0
        return self.cut


def read_bytes(where: str, start: int, stop: int) -> bytes:
    """Bytes ``[start, stop)`` of the file; fewer means it changed since the plan (:func:`changed`)."""
    with open(where, "rb") as fh:
        fh.seek(start)
        data = fh.read(stop - start)
    if len(data) != stop - start:
        raise changed(where, f"bytes {start:,} to {stop:,}")
    return data


class RecordParts(Parts):
    """Records on lines (CSV, JSON lines): a piece is a byte range of whole records (:class:`Cutter`), a part
    is the piece's records as the format writes them, the output is the layout's ``header`` then the parts."""

    def join(self, layout: Layout, parts: Sequence[Path], fh: IO[bytes], rows: int) -> None:
        fh.write(getattr(layout, "header", b""))
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, fh, 4 * 2**20)


@dataclass(frozen=True)
class BatchLayout(Layout):
    """A typed format's layout: the output's schema (the written columns, the input's metadata) and the
    writer's options (Parquet: the input's compression codec)."""

    schema: Any = None
    options: Any = None


def group_pieces(groups: Sequence[tuple[int, int]], piece_bytes: int) -> list[Span]:
    """Runs of whole groups ``(rows, bytes)``, each ending at the first group that brings it to ``piece_bytes``
    bytes or at the last group; ``first`` the 1-based number of the run's first row."""
    pieces: list[Span] = []
    start = rows = size = first = 0
    for g, (n, nbytes) in enumerate(groups):
        rows += n
        size += nbytes
        if size >= piece_bytes or g == len(groups) - 1:
            pieces.append((start, g + 1, rows, first + 1))
            first += rows
            start, rows, size = g + 1, 0, 0
    return pieces


class BatchParts(Parts):
    """Typed record batches (Parquet row groups, Arrow IPC record batches): a piece is a run of whole groups
    read as one batch, a part is written by :class:`BatchWriter` (the written columns in header order, the
    released ones replaced, the schema's metadata kept), the output is the parts' batches in one file.

    A format gives its groups (:meth:`groups`), reads a run of them (:meth:`batch`), the driver's chunks of
    some columns (:meth:`chunks`), and opens a writer (:meth:`sink`) and a part's tables (:meth:`tables`).
    """

    #: what a group is called in an error
    group: ClassVar[str] = "group"

    @abstractmethod
    def open(self, path: Path) -> Any:
        """The file's reader (:class:`Reader` with ``schema``); an unreadable file is one ValidationError."""

    @abstractmethod
    def groups(self, reader: Any) -> list[tuple[int, int]]:
        """``(rows, bytes)`` of every group, in order."""

    @abstractmethod
    def chunks(self, reader: Any, columns: Sequence[str]) -> Iterator[Chunk]:
        """The file's rows, chunk by chunk, with ``columns`` at least."""

    @abstractmethod
    def batch(self, reader: Any, start: int, stop: int) -> Any:
        """Groups ``[start, stop)`` as one record batch."""

    @abstractmethod
    def sink(self, fh: Any, schema: Any, options: Any) -> Any:
        """A writer of ``schema`` to ``fh`` (``write_table``, ``close``)."""

    @abstractmethod
    def tables(self, path: Path) -> Iterator[Any]:
        """A part file's rows, as tables, in order."""

    def options(self, reader: Any) -> Any:
        """The writer's options taken from the input (:class:`BatchLayout`)."""
        return None

    def cut(self, path: Path, columns: ColumnPlan, *, piece_bytes: int, chunk_bytes: int, max_record: int | None,
            check: Any = None) -> tuple[list[Span], Layout]:
        pa, _ = arrow()
        where = str(path)
        with self.open(path) as reader:
            schema = reader.schema
            seen = None
            if check is not None:
                seen = 0
                for chunk in self.chunks(reader, check.columns):
                    if not chunk.rows:
                        continue
                    if not seen:  # the type is checked where the local engine meets it: with the first row
                        check.check_type(schema, where)
                    check.add(chunk)
                    seen += chunk.rows
            # a run of groups without a row has nothing to release: no worker, as the local engine meets no row
            pieces = [p for p in group_pieces(self.groups(reader), piece_bytes) if p[2]]
            options = self.options(reader)
        total = sum(p[2] for p in pieces)
        if seen is not None and total != seen:
            raise ValidationError(f"{where}: the {self.group}s hold {total:,} rows but {seen:,} were read")
        written = set(columns.written)
        out = pa.schema([f for f in schema if f.name in written], metadata=schema.metadata)
        return pieces, BatchLayout(where, columns, out, options)

    def read(self, piece: Any, layout: Layout, kernels: Any = None) -> Chunk:
        pa, _ = arrow()
        what = f"{self.group}s {piece.start + 1} to {piece.stop}"
        try:
            with self.open(Path(layout.where)) as reader:
                batch = self.batch(reader, piece.start, piece.stop)
        except (ValidationError, IndexError, OSError, pa.ArrowException):
            raise changed(layout.where, what) from None
        if batch.num_rows != piece.rows or batch.schema.names != list(layout.columns.header):
            raise changed(layout.where, what)
        return BatchChunk(batch, piece.row)

    def write(self, layout: Layout, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released],
              kernels: Any = None) -> bytes:
        pa, _ = arrow()
        typed = cast(BatchLayout, layout)
        schema = cast(BatchChunk, chunk).batch.schema.with_metadata(typed.schema.metadata or {})
        sink = pa.BufferOutputStream()
        # the typed writer reads the column plan and the schema only: no reader of the whole input behind it
        spec = WriteSpec(cast(Any, None), layout.columns, tuple(c for r in released for c in r.columns),
                         layout.where)
        writer = BatchWriter(spec, schema, lambda s: self.sink(sink, s, typed.options))
        writer.write(chunk, keep, released)
        writer.close()
        return cast(bytes, sink.getvalue().to_pybytes())

    def join(self, layout: Layout, parts: Sequence[Path], fh: IO[bytes], rows: int) -> None:
        typed = cast(BatchLayout, layout)
        writer, got = None, 0
        try:
            for part in parts:
                for table in self.tables(part):
                    if writer is None:  # the parts' schema: the released columns' types are the release's
                        writer = self.sink(fh, table.schema, typed.options)
                    writer.write_table(table)
                    got += table.num_rows
            if writer is None:
                writer = self.sink(fh, typed.schema, typed.options)
        finally:
            if writer is not None:
                writer.close()
        if got != rows:
            raise EngineError(f"the parts hold {got:,} rows where the input has {rows:,}; nothing written")


def one_batch(table: Any) -> Any:
    """A table's rows as one record batch (its columns' chunks combined)."""
    pa, _ = arrow()
    return pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], schema=table.schema)
