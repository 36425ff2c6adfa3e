"""What the driver's one pass over an input file makes before any engine runs: the plan and its pieces.

Dask's and Spark's own readers guess: pandas infers an index when the data rows have
one field more than the header (every column then shifts left and true values are
written under another column's name), Spark drops the extra field, splits records at
line breaks inside quotes, trims blanks on write. So the engines do not read the file
with them. The driver reads it once with the local engine's reader and record
definition (:class:`metricdp.tabular.csv.CsvReader`: RFC 4180, records end in ``\\n``
or ``\\r\\n``; a bare ``\\r``, a stray quote, a field-count mismatch, a NUL, a BOM
inside, invalid UTF-8, an over-long record each refused with file, line and byte
offset), plans the columns that leave as the local engine does
(:func:`metricdp.tabular.columns.plan_columns`), checks every value of the released
column(s) with the release's own kind (:mod:`metricdp.pipeline`: its parse, its refusals,
the local engine's message with the count and first line numbers: :class:`KindCheck`),
and cuts the file into :class:`Piece` s at record boundaries (:class:`Cutter`; the pass
itself, per format, is :func:`._parts.plan_file`'s). Every engine partition then
releases exactly one piece with the same record definition (:mod:`._pieces`), so the
three engines accept the same files and release the same records.

Memory is one chunk (``chunk_bytes``) plus one record; time is linear in the file.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ..pipeline.kind import Kind
from ..tabular import csvsplit
from ..tabular.columns import ColumnPlan
from ..tabular.formats import BatchChunk, Chunk, arrow

__all__ = [
    "DEFAULT_PIECE_BYTES", "Cutter", "KindCheck", "Piece", "Plan", "changed", "check_unchanged", "read_piece",
    "row_group_pieces",
]

#: Input bytes per engine partition (CSV; Parquet: row groups adding up to about as much). Large enough that
#: a partition's fixed cost (a task, a part file) is small against its work, small enough that a file of a
#: few GB gives every core of a small cluster several partitions.
DEFAULT_PIECE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Piece:
    """One partition's share of the file.

    CSV: bytes ``[start, stop)`` (whole records), ``first`` the file line number of
    ``start``. Parquet: row groups ``[start, stop)``, ``first`` the 1-based number of
    the piece's first row. ``rows``: the records the driver counted in it; ``row``: the
    0-based number of its first data row in the file (a worker's error names data rows).

    An accounted release (:mod:`metricdp.streaming.accounted`) sets ``keep``, the rows
    written (``numpy.packbits``; None: every row, drawn by the worker), ``kept`` their
    count and, for consistent releases, ``given``: the kept rows' releases drawn by the
    driver (:meth:`given_bytes`: numpy's own format, so a kind's releases keep their dtype
    and shape -- codes or (k, 2) points).
    """

    index: int
    start: int
    stop: int
    rows: int
    first: int
    row: int = 0
    keep: bytes | None = None
    kept: int | None = None
    given: bytes | None = None

    @property
    def written(self) -> int:
        """The rows this piece's part must hold."""
        return self.rows if self.kept is None else self.kept

    def selection(self) -> tuple[NDArray[np.bool_] | None, NDArray[Any] | None]:
        """The rows written (None: all) and, for a consistent release, their releases."""
        if self.keep is None:
            return None, None
        keep = np.unpackbits(np.frombuffer(self.keep, dtype=np.uint8), count=self.rows).astype(bool)
        if self.given is None:
            return keep, None
        return keep, np.load(io.BytesIO(self.given), allow_pickle=False)

    @staticmethod
    def given_bytes(released: NDArray[Any]) -> bytes:
        """``released`` as :attr:`given` holds it (codes as int32: a quarter of the wire's bytes)."""
        out = io.BytesIO()
        np.save(out, released.astype(np.int32) if released.dtype.kind in "iu" else released, allow_pickle=False)
        return out.getvalue()


@dataclass(frozen=True)
class Plan:
    """What the driver checked: the header, the pieces and the row count.

    ``header`` is the output's first bytes: the header record as in the file (a
    byte-order mark and blank lines before it included), dropped columns' names removed;
    ``size``/``mtime_ns`` identify the version of the file that was checked (a
    partition that finds another one refuses it); ``columns`` says what leaves
    (:func:`metricdp.tabular.columns.plan_columns`); ``schema`` is the output's
    (Parquet); ``max_record`` the CSV record cap the driver applied.
    """

    path: str
    fmt: str
    names: tuple[str, ...]
    column: int
    header: bytes
    pieces: tuple[Piece, ...]
    rows: int
    size: int
    mtime_ns: int
    columns: ColumnPlan | None = None
    schema: Any = None
    compression: str = "snappy"
    max_record: int | None = None


class Cutter:
    """Cuts a CSV's chunks of records into pieces of whole records of at least ``piece_bytes`` bytes (the last
    may be shorter), at record boundaries inside a chunk as well: the reads stay the local engine's size (its
    messages for an over-long record depend on it) while small ``piece_bytes`` still give many pieces.

    A piece ends at the end of the first record reaching ``piece_bytes`` (its line break and any blank lines
    after it included); :meth:`pieces` gives ``(start, stop, rows, first_line)`` per piece, in file order.
    One ``searchsorted`` per piece, none per record.
    """

    def __init__(self, piece_bytes: int) -> None:
        if piece_bytes < 1:
            raise ValidationError(f"piece_bytes must be >= 1, got {piece_bytes}")
        self.piece_bytes = piece_bytes
        self.cut: list[tuple[int, int, int, int]] = []
        self.start = self.line = -1
        self.rows = self.end = 0

    def add(self, chunk: Any) -> None:
        recs = chunk.records
        n = len(recs.starts)
        if n == 0:
            return
        ends = chunk.offset + np.append(np.asarray(recs.starts[1:], dtype=np.int64), int(recs.end))
        k0 = 0
        while k0 < n:
            if self.start < 0:
                self.start = chunk.offset + (int(recs.starts[k0]) if k0 else 0)
                self.line = chunk.first_line + (int(recs.lines[k0]) if k0 else 0)
            k = k0 + int(np.searchsorted(ends[k0:], self.start + self.piece_bytes))
            if k >= n:  # the piece goes on in the next chunk
                self.rows += n - k0
                self.end = int(ends[-1])
                return
            self.rows += k - k0 + 1
            self.cut.append((self.start, int(ends[k]), self.rows, self.line))
            self.start, self.rows = -1, 0
            k0 = k + 1
        self.end = int(ends[-1])

    def pieces(self) -> list[tuple[int, int, int, int]]:
        """Every piece, the last one (shorter than ``piece_bytes``) included."""
        if self.start >= 0 and self.rows:
            self.cut.append((self.start, self.end, self.rows, self.line))
            self.start, self.rows = -1, 0
        return self.cut


class KindCheck:
    """The driver's reading of the released values: the kind's own parse, its refusals gathered for one error.

    What the local engine's pass (:class:`metricdp.pipeline.run.Pass`) does with each chunk,
    without releasing: a chunk's refused rows noted with their places and some of their
    texts; :meth:`error` is the local engine's one error for all of them. ``values=False``
    counts the rows only (a kind whose workers refuse a bad value of their piece).
    """

    def __init__(self, kind: Kind, values: bool = True) -> None:
        self.kind, self.values = kind, values
        self.refused = kind.refusals()
        self.unit = "line"

    def check_type(self, schema: Any, where: str) -> None:
        """Refuse a typed column the kind cannot read or write back (before any row is read)."""
        pa, _ = arrow()
        kind = self.kind
        fields = [schema.field(c) for c in kind.columns]
        empty = BatchChunk(pa.RecordBatch.from_pylist([], schema=pa.schema(fields)), 0)
        try:
            values = kind.parse(empty).values  # the kind's own type errors (numbers: "numbers or text expected")
        except pa.ArrowException:
            values = None  # a type the kind cannot read as text: the cast below names the column and its type
        for item in kind.render(values if values is not None else np.zeros(0, dtype=np.intp)):
            item.arrays([schema.field(c).type for c in item.columns], where)
        if values is None:
            name = kind.columns[0]
            raise ValidationError(f"{where}: column {name!r} has type {schema.field(name).type}; "
                                  "its values cannot be read as text")

    def add(self, chunk: Chunk) -> None:
        """Note the rows of ``chunk`` that the kind refuses."""
        self.unit = chunk.unit
        if not self.values:
            return
        got = self.kind.parse(chunk)
        if got.refused.size:
            shown = got.refused[:self.kind.show]
            self.refused.add(chunk.places(got.refused), chunk.texts(self.kind.columns[0], shown), got.reasons)

    def error(self, where: str) -> ValidationError | None:
        """The local engine's one error for every refused value noted (None: none)."""
        return self.refused.error(where, self.unit) if self.refused.rows else None


def check_unchanged(plan: Plan) -> None:
    """Refuse a file that is not the version the plan checked (size or mtime differ)."""
    try:
        st = os.stat(plan.path)
    except OSError as ex:
        raise ValidationError(f"{plan.path}: cannot be read any more ({ex.strerror}); nothing written") from None
    if (st.st_size, st.st_mtime_ns) != (plan.size, plan.mtime_ns):
        raise changed(plan.path)


def changed(path: object, what: str = "") -> ValidationError:
    """The one error of a file that differs from what the driver planned (a worker's check)."""
    return ValidationError(f"{path}: the file changed while it was being released{f' ({what})' if what else ''}; "
                           "nothing written")


def read_piece(path: str, start: int, stop: int, *, first_line: int, rows: int, ncols: int, column: int,
               max_record: int | None) -> tuple[bytes, NDArray[np.uint8], Any]:
    """A CSV piece's bytes, as an array, and its records, split by the local engine's rules.

    The piece (bytes ``start`` to ``stop``, from line ``first_line``) must hold exactly the
    ``rows`` whole records the driver counted: anything else means the file changed since
    the plan, and :func:`changed` says so (a worker never releases a file it did not plan).
    """
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(stop - start)
    if len(data) != stop - start:
        raise changed(path, f"bytes {start:,} to {stop:,}")
    buf = np.frombuffer(data, dtype=np.uint8)
    recs = csvsplit.split_records(buf, eof=True, ncols=ncols, column=column, max_records=len(buf) + 1, where=path,
                                  first_line=first_line, first_offset=start, max_record=max_record)
    if recs.end != len(buf) or len(recs.starts) != rows:
        raise changed(path, f"{len(recs.starts):,} records where {rows:,} were counted")
    return data, buf, recs


def row_group_pieces(meta: Any, piece_bytes: int) -> tuple[Piece, ...]:
    """A Parquet file's pieces: runs of whole row groups, each ending at the first group that brings it to
    ``piece_bytes`` bytes (uncompressed) or at the last group; ``first`` the 1-based number of its first row."""
    pieces: list[Piece] = []
    start = rows = size = first = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        rows += group.num_rows
        size += group.total_byte_size
        if size >= piece_bytes or g == meta.num_row_groups - 1:
            pieces.append(Piece(len(pieces), start, g + 1, rows, first + 1, first))
            first += rows
            start, rows, size = g + 1, 0, 0
    return tuple(pieces)
