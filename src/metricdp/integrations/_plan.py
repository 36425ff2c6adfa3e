"""The driver's one pass over an input file before any engine runs.

Dask's and Spark's own readers guess: pandas infers an index when the data rows have
one field more than the header (every column then shifts left and true values are
written under another column's name), Spark drops the extra field, splits records at
line breaks inside quotes, trims blanks on write. So the engines do not read the file
with them. The driver reads it once with the local engine's record definition
(:mod:`metricdp.streaming.csvsplit`, RFC 4180: records end in ``\\n`` or ``\\r\\n``,
every quote checked, the same field count on every record), and refuses what the local
engine refuses with the local engine's message; it adds the record rules the local
layer is getting (a bare ``\\r`` outside quotes, a NUL byte: refused with line and byte
offset), checks UTF-8 and every value of the released column against the mechanism's
labels (the count and first line numbers, as the local engine says it), and cuts the
file into :class:`Piece` s at record boundaries. Every engine partition then releases
exactly one piece with the same record definition (:mod:`._pieces`), so the three
engines accept the same files and release the same records.

Memory is one chunk (``chunk_bytes``) plus one record; time is linear in the file.
"""

from __future__ import annotations

import codecs
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError
from ..streaming import csvsplit
from ..streaming.files import DEFAULT_CHUNK_BYTES, _Unknown, check_header, file_format
from ._labels import Labels, field_text

__all__ = ["DEFAULT_PIECE_BYTES", "Piece", "Plan", "plan_file"]

#: Input bytes per engine partition (CSV; Parquet: row groups adding up to about as much). Large enough that
#: a partition's fixed cost (a task, a part file) is small against its work, small enough that a file of a
#: few GB gives every core of a small cluster several partitions.
DEFAULT_PIECE_BYTES = 64 * 2**20
_BOM = b"\xef\xbb\xbf"
_NUL, _CR = 0, 13


@dataclass(frozen=True)
class Piece:
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


@dataclass(frozen=True)
class Plan:
    """What the driver checked: the header, the pieces and the row count.

    ``header`` is the header record's bytes as in the file (a byte-order mark
    included), written first to the output; ``size``/``mtime_ns`` identify the version
    of the file that was checked (a partition that finds another one refuses it).
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
    schema: Any = None
    compression: str = "snappy"


def plan_file(
    src: Path, column: str, mechanism: Any, *, piece_bytes: int = DEFAULT_PIECE_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Plan:
    """Check ``src`` entirely and cut it into pieces of about ``piece_bytes`` bytes.

    Raises
    ------
    ValidationError
        the local engine's errors (a missing or repeated column, a record with the
        wrong field count, a stray quote, invalid UTF-8, a value that is not a label),
        and a bare carriage return or a NUL byte (line and byte offset).
    """
    if piece_bytes < 1:
        raise ValidationError(f"piece_bytes must be >= 1, got {piece_bytes}")
    fmt = file_format(src)
    st = os.stat(src)
    if fmt == "csv":
        return _plan_csv(src, column, mechanism, piece_bytes, chunk_bytes, st)
    return _plan_parquet(src, column, mechanism, piece_bytes, st)


def check_unchanged(plan: Plan) -> None:
    """Refuse a file that is not the version the plan checked (size or mtime differ)."""
    try:
        st = os.stat(plan.path)
    except OSError as ex:
        raise ValidationError(f"{plan.path}: cannot be read any more ({ex.strerror}); nothing written") from None
    if (st.st_size, st.st_mtime_ns) != (plan.size, plan.mtime_ns):
        raise ValidationError(f"{plan.path}: the file changed while it was being released; nothing written")


# ------------------------------------------------------------------------------------ CSV
def strict_bytes(buf: NDArray[np.uint8], end: int, *, where: str, first_line: int, offset: int) -> None:
    """Refuse a NUL byte, or a ``\\r`` outside quotes not followed by ``\\n``, in ``buf[:end]``.

    ``buf`` starts at a record boundary, so quote parity (an odd number of ``"`` before a
    byte: inside a quoted field) is exact. Python's csv module, pandas and Spark end a
    record at a bare ``\\r``; the byte splitter does not: refusing it keeps one
    definition of a record. ``offset`` is the file offset of ``buf[0]``.
    """
    region = buf[:end]
    nl = np.flatnonzero(region == csvsplit.LF)
    nul = np.flatnonzero(region == _NUL)
    if len(nul):
        at = int(nul[0])
        raise ValidationError(
            f"{where}: line {first_line + int(np.searchsorted(nl, at))}: a NUL byte at byte offset {offset + at:,} "
            "(not a text CSV file)"
        )
    cr = np.flatnonzero(region == _CR)
    if not len(cr):
        return
    q = np.flatnonzero(region == csvsplit.QUOTE)
    outside = (np.searchsorted(q, cr) & 1) == 0
    nxt = region[np.minimum(cr + 1, end - 1)]
    bare = np.flatnonzero(outside & ((cr + 1 >= end) | (nxt != csvsplit.LF)))
    if len(bare):
        at = int(cr[bare[0]])
        raise ValidationError(
            f"{where}: line {first_line + int(np.searchsorted(nl, at))}: a carriage return not followed by a line "
            f"feed at byte offset {offset + at:,} (records must end in \\n or \\r\\n)"
        )


def _utf8(data: bytes | memoryview, offset: int, where: str) -> None:
    try:
        codecs.utf_8_decode(data, "strict", True)
    except UnicodeDecodeError as ex:
        raise ValidationError(f"{where}: not valid UTF-8 at byte offset {offset + ex.start:,}") from None


def _plan_csv(src: Path, column: str, mechanism: Any, piece_bytes: int, chunk_bytes: int, st: os.stat_result) -> Plan:
    import csv

    labels = Labels(mechanism)
    where = str(src)
    unknown = _Unknown()
    pieces: list[Piece] = []
    rows = consumed = lines_before = 0
    ncols = col = -1
    names: list[str] = []
    header = b""
    piece_start = piece_rows = 0
    piece_line = 1
    pending = b""

    def close_piece() -> None:
        nonlocal piece_start, piece_rows, piece_line
        if consumed > piece_start:
            pieces.append(Piece(len(pieces), piece_start, consumed, piece_rows, piece_line))
        piece_start, piece_rows, piece_line = consumed, 0, lines_before + 1

    with src.open("rb") as inp:
        eof = need_more = False
        while True:
            if not eof and (need_more or len(pending) < chunk_bytes):
                data = inp.read(max(chunk_bytes, 4))  # >= 4: a byte-order mark arrives whole
                eof = not data
                pending = pending + data if pending else data
            need_more = False
            if ncols < 0:
                skip = 3 if consumed == 0 and pending.startswith(_BOM) else 0  # a BOM is not part of a name
                buf = np.frombuffer(pending, dtype=np.uint8)[skip:]
                head = csvsplit.split_records(buf, eof=eof, ncols=None, column=0, max_records=1, where=where)
                if head.end == 0 and not eof:
                    need_more = True
                    continue  # the header is longer than one read
                if len(head.starts) == 0:
                    raise ValidationError(f"{where}: empty file (no header row)")
                strict_bytes(buf, head.end, where=where, first_line=1, offset=skip)
                _utf8(pending[skip : skip + head.end], skip, where)
                text = bytes(buf[head.starts[0] : head.stops[0]]).decode("utf-8")
                names = next(csv.reader(io.StringIO(text, newline="")))
                col = check_header(names, column, where)
                ncols = len(names)
                end = skip + head.end
                header = pending[:end]
                lines_before += pending.count(b"\n", 0, end)
                pending, consumed = pending[end:], end
                piece_start, piece_line = consumed, lines_before + 1
                continue
            buf = np.frombuffer(pending, dtype=np.uint8)
            recs = csvsplit.split_records(
                buf, eof=eof, ncols=ncols, column=col, max_records=len(buf) + 1, where=where,
                first_line=lines_before + 1,
            )
            if recs.end == 0:
                if eof:
                    break
                need_more = True
                continue  # one record longer than a read: read more
            strict_bytes(buf, recs.end, where=where, first_line=lines_before + 1, offset=consumed)
            _utf8(memoryview(pending)[: recs.end], consumed, where)
            idx, _quoted = labels.codes(buf, recs)
            bad = np.flatnonzero(idx < 0)
            if len(bad):
                vals = [field_text(buf, int(recs.fs[i]), int(recs.fe[i])) for i in bad[:40_000]]
                unknown.add(lines_before + recs.lines[bad] + 1, vals)
            rows += len(idx)
            piece_rows += len(idx)
            lines_before += pending.count(b"\n", 0, recs.end)
            pending, consumed = pending[recs.end :], consumed + recs.end
            if consumed - piece_start >= piece_bytes:
                close_piece()
            if eof and not pending:
                break
    if unknown.rows:
        raise unknown.error(where, column, "line(s)")
    close_piece()
    return Plan(where, "csv", tuple(names), col, header, tuple(pieces), rows, st.st_size, st.st_mtime_ns)


# -------------------------------------------------------------------------------- Parquet
def _plan_parquet(src: Path, column: str, mechanism: Any, piece_bytes: int, st: os.stat_result) -> Plan:
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    pq = import_optional("pyarrow.parquet", extra="parquet")
    where = str(src)
    try:
        pf = pq.ParquetFile(src)
    except Exception as ex:  # pyarrow raises several unrelated types for bad files
        raise ValidationError(f"{where}: not a readable Parquet file ({ex})") from None
    schema = pf.schema_arrow
    j = check_header(schema.names, column, where)
    out_values(mechanism, schema.field(j).type, where, column)  # labels writable as the column's type
    value_set = pa.array(list(mechanism.labels), type=pa.string())
    unknown = _Unknown()
    seen = 0
    try:
        for batch in pf.iter_batches(columns=[column], batch_size=1_000_000):
            col = batch.column(0)
            as_text = col if pa.types.is_string(col.type) else pc.cast(col, pa.string())
            idx = np.asarray(
                pc.fill_null(pc.index_in(as_text, value_set=value_set), -1).to_numpy(zero_copy_only=False),
                dtype=np.intp,
            )
            bad = np.flatnonzero(idx < 0)
            if len(bad):
                vals = as_text.take(pa.array(bad[:40_000])).to_pylist()
                unknown.add(seen + bad + 1, ["null" if v is None else v for v in vals])
            seen += len(idx)
    except (OSError, pa.ArrowException) as ex:
        raise ValidationError(f"{where}: not a readable Parquet file ({ex})") from None
    if unknown.rows:
        raise unknown.error(where, column, "row(s)")
    meta = pf.metadata
    compression = "snappy"
    if meta.num_row_groups and meta.num_columns:
        compression = meta.row_group(0).column(0).compression.lower()
        compression = "none" if compression == "uncompressed" else compression
    pieces: list[Piece] = []
    start = rows = size = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        rows += group.num_rows
        size += group.total_byte_size
        if size >= piece_bytes or g == meta.num_row_groups - 1:
            first = 1 + sum(p.rows for p in pieces)
            pieces.append(Piece(len(pieces), start, g + 1, rows, first))
            start, rows, size = g + 1, 0, 0
    total = sum(p.rows for p in pieces)
    if total != seen:
        raise ValidationError(f"{where}: the row groups hold {total:,} rows but {seen:,} were read")
    return Plan(
        where, "parquet", tuple(schema.names), j, b"", tuple(pieces), total, st.st_size, st.st_mtime_ns,
        schema=schema, compression=compression,
    )


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
