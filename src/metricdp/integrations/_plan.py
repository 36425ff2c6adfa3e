"""The driver's one pass over an input file before any engine runs.

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
column against the mechanism's labels (the local engine's message: count and first
line numbers), and cuts the file into :class:`Piece` s at record boundaries. Every
engine partition then releases exactly one piece with the same record definition
(:mod:`._pieces`), so the three engines accept the same files and release the same
records.

Memory is one chunk (``chunk_bytes``) plus one record; time is linear in the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError
from ..streaming.files import UnknownValues
from ..tabular import csvsplit
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader
from ..tabular.formats import TABLE_FORMATS, format_of
from ..tabular.leaks import LeakRule, check_table
from ..tabular.parquet import input_compression, open_parquet
from ._labels import Labels, field_text

__all__ = [
    "DEFAULT_PIECE_BYTES", "LabelCheck", "Piece", "Plan", "ValueCheck", "Withheld", "changed", "plan_file",
    "plan_table", "read_piece", "row_group_pieces",
]

#: Input bytes per engine partition (CSV; Parquet: row groups adding up to about as much). Large enough that
#: a partition's fixed cost (a task, a part file) is small against its work, small enough that a file of a
#: few GB gives every core of a small cluster several partitions.
DEFAULT_PIECE_BYTES = 64 * 2**20


class Withheld:
    """What an accounted release (:mod:`metricdp.streaming.accounted`) writes of a piece of ``rows`` records.

    ``keep``: the rows written (``numpy.packbits``; None: every row, drawn by the worker), ``kept`` their
    count, ``given`` for a consistent release the kept rows' releases drawn by the driver (the piece type's
    own layout: :meth:`_given`). Mixed into the pieces of every engine release (:class:`Piece`,
    :class:`._points.PointPiece`), so the selection is decoded in one place.
    """

    rows: int
    keep: bytes | None
    kept: int | None
    given: bytes | None

    @property
    def written(self) -> int:
        """The rows this piece's part must hold."""
        return self.rows if self.kept is None else self.kept

    def selection(self) -> tuple[NDArray[np.bool_] | None, NDArray[Any] | None]:
        """The rows written (None: all) and, for a consistent release, their releases."""
        if self.keep is None:
            return None, None
        keep = np.unpackbits(np.frombuffer(self.keep, dtype=np.uint8), count=self.rows).astype(bool)
        return keep, None if self.given is None else self._given(self.given)

    def _given(self, given: bytes) -> NDArray[Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class Piece(Withheld):
    """One partition's share of the file.

    CSV: bytes ``[start, stop)`` (whole records), ``first`` the file line number of
    ``start``. Parquet: row groups ``[start, stop)``, ``first`` the 1-based number of
    the piece's first row. ``rows``: the records the driver counted in it.
    """

    index: int
    start: int
    stop: int
    rows: int
    first: int
    #: an accounted release (:class:`Withheld`); for consistent releases the given releases are int32 codes
    keep: bytes | None = None
    kept: int | None = None
    given: bytes | None = None

    def _given(self, given: bytes) -> NDArray[np.intp]:
        return np.frombuffer(given, dtype=np.int32).astype(np.intp)


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


def plan_file(
    src: Path, column: str, mechanism: Any, *, piece_bytes: int = DEFAULT_PIECE_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES, keep: Sequence[str] = (), drop: Sequence[str] = (),
    max_record: int | None = None,
) -> Plan:
    """Check ``src`` entirely and cut it into pieces of about ``piece_bytes`` bytes.

    ``keep``/``drop`` plan the columns that leave as the local engine plans them.

    Raises
    ------
    ValidationError
        the local engine's errors, with its messages: a missing or repeated column, a
        bad ``keep``/``drop`` name, any refusal of :mod:`metricdp.tabular.csv` (line and
        byte offset), a value that is not a label (count and first line numbers).
    """
    return plan_table(src, column, lambda: LabelCheck(mechanism), piece_bytes=piece_bytes, chunk_bytes=chunk_bytes,
                      keep=keep, drop=drop, max_record=max_record)


class ValueCheck(Protocol):
    """What the driver's pass checks in the released column: one per kind of release.

    :class:`LabelCheck` (every value a label of the mechanism) and
    :class:`._numbers.NumberCheck` (every value a releasable number on the grid); the
    pass itself (:func:`plan_table`: record definition, column plan, pieces) is the
    same for both.
    """

    def check_type(self, kind: Any, where: str, column: str) -> None:
        """Refuse a Parquet column whose type the release cannot write (before any row is read)."""

    def csv(self, chunk: Any) -> None:
        """Note the refused values of a CSV chunk's located fields (:class:`metricdp.tabular.csv.CsvReader`)."""

    def parquet(self, col: Any, seen: int) -> None:
        """Note the refused values of a Parquet batch's column, ``seen`` rows after the first."""

    def error(self, where: str, column: str, *, csv: bool) -> ValidationError | None:
        """The local engine's one error for every refused value noted (None: none)."""


def plan_table(
    src: Path, column: str, values: Callable[[], ValueCheck], *, piece_bytes: int = DEFAULT_PIECE_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES, keep: Sequence[str] = (), drop: Sequence[str] = (),
    max_record: int | None = None, leak: LeakRule | None = None,
) -> Plan:
    """Read ``src`` once, check every value of ``column`` with ``values()`` and cut the file into pieces.

    The one planner of every engine release: the record definition, the column plan and
    the pieces are the local engine's whatever is released; ``values`` (called once,
    after the file is found) says which values are refused and how (see
    :class:`ValueCheck`). ``leak`` is what leaves by name and content, checked as the local
    engine checks it (:func:`metricdp.tabular.leaks.check_table`; default: the labels rule).
    Raises the local engine's ValidationError, nothing written.
    """
    if piece_bytes < 1:
        raise ValidationError(f"piece_bytes must be >= 1, got {piece_bytes}")
    check_table(src, leak or LeakRule.labels(column), keep=keep, drop=drop, max_record=max_record)
    fmt = format_of(src, TABLE_FORMATS)
    st = os.stat(src)
    check = values()
    if fmt == "csv":
        return _plan_csv(src, column, check, piece_bytes, chunk_bytes, st, keep, drop, max_record)
    return _plan_parquet(src, column, check, piece_bytes, st, keep, drop)


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


# ------------------------------------------------------------------------------------ CSV
def _plan_csv(
    src: Path, column: str, check: ValueCheck, piece_bytes: int, chunk_bytes: int, st: os.stat_result,
    keep: Sequence[str], drop: Sequence[str], max_record: int | None,
) -> Plan:
    where = str(src)
    cutter = Cutter(piece_bytes)
    rows = 0
    with src.open("rb") as inp:
        reader = CsvReader(inp, where, chunk_bytes=chunk_bytes, max_record=max_record)
        header = reader.header()
        cols = plan_columns(header.names, [column], keep=keep, drop=drop, where=where)
        col = cols.index(column)
        for chunk in reader.chunks(col):
            cutter.add(chunk)
            check.csv(chunk)
            rows += len(chunk.records.starts)
        cap = reader.cap
    refused = check.error(where, column, csv=True)
    if refused is not None:
        raise refused
    pieces = [Piece(i, *cut) for i, cut in enumerate(cutter.pieces())]
    head = csvsplit.header_bytes(header, cols.dropped_indices)  # the header the local engine writes
    return Plan(where, "csv", tuple(header.names), col, head, tuple(pieces), rows, st.st_size, st.st_mtime_ns,
                columns=cols, max_record=cap)


# -------------------------------------------------------------------------------- Parquet
def _plan_parquet(
    src: Path, column: str, check: ValueCheck, piece_bytes: int, st: os.stat_result, keep: Sequence[str],
    drop: Sequence[str],
) -> Plan:
    pa = import_optional("pyarrow", extra="parquet")
    where = str(src)
    pf = open_parquet(src)
    schema = pf.schema_arrow
    cols = plan_columns(schema.names, [column], keep=keep, drop=drop, where=where)
    j = cols.index(column)
    check.check_type(schema.field(j).type, where, column)
    seen = 0
    try:
        for batch in pf.iter_batches(columns=[column], batch_size=1_000_000):
            col = batch.column(0)
            check.parquet(col, seen)
            seen += len(col)
    except (OSError, pa.ArrowException) as ex:
        raise ValidationError(f"{where}: not a readable Parquet file ({ex})") from None
    refused = check.error(where, column, csv=False)
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
            pieces.append(Piece(len(pieces), start, g + 1, rows, first + 1))
            first += rows
            start, rows, size = g + 1, 0, 0
    return tuple(pieces)


# --------------------------------------------------------------------------------- labels
class LabelCheck:
    """The values of a labels release: every one a label of the mechanism (the local engine's lookup,
    :mod:`metricdp.streaming.labels`; a refused value's message: count, first lines or rows, some values)."""

    def __init__(self, mechanism: Any) -> None:
        self.mechanism = mechanism
        self.labels = Labels(mechanism)
        self.unknown = UnknownValues()

    def check_type(self, kind: Any, where: str, column: str) -> None:
        out_values(self.mechanism, kind, where, column)  # labels writable as the column's type

    def csv(self, chunk: Any) -> None:
        recs = chunk.records
        idx, _quoted = self.labels.codes(chunk.buf, recs)
        bad = np.flatnonzero(idx < 0)
        if len(bad):
            vals = [field_text(chunk.buf, int(recs.fs[i]), int(recs.fe[i])) for i in bad[:40_000]]
            self.unknown.add(chunk.first_line + recs.lines[bad], vals)

    def parquet(self, col: Any, seen: int) -> None:
        pa = import_optional("pyarrow", extra="parquet")
        idx, as_text = self.labels.parquet_codes(col)
        bad = np.flatnonzero(idx < 0)
        if len(bad):
            vals = as_text.take(pa.array(bad[:40_000])).to_pylist()
            self.unknown.add(seen + bad + 1, ["null" if v is None else v for v in vals])

    def error(self, where: str, column: str, *, csv: bool) -> ValidationError | None:
        return self.unknown.error(where, column, "line(s)" if csv else "row(s)") if self.unknown.rows else None


def out_values(mechanism: Any, typ: Any, where: str, column: str) -> Any:
    """The mechanism's output labels as an Arrow array of the column's type (or a ValidationError)."""
    pa = import_optional("pyarrow", extra="parquet")
    labels = list(mechanism.labels)
    outs = pa.array(list(getattr(mechanism, "output_labels", None) or labels), type=pa.string())
    try:
        return outs.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as ex:
        raise ValidationError(
            f"{where}: column {column!r} has type {typ}; the mechanism's labels cannot be written as it ({ex})"
        ) from None
