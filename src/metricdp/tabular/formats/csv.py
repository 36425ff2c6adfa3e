"""CSV: the one record definition read in chunks, and a writer that copies every byte it does not release.

Reading is :class:`metricdp.tabular.csv.CsvReader` (RFC 4180, LF/CRLF; every refusal with
its line and byte offset). Writing splices the released fields into the input's bytes
(:mod:`metricdp.tabular.csvsplit`): quoting, spacing, line endings, blank lines and a
byte-order mark of every other column stay as they were; a released field is quoted when
the input's was or when it must be; a dropped column goes with one delimiter; a row not
kept goes whole, line break included. :class:`CsvAppender` writes the input with one field
more per record, every other byte kept the same way.

A whole file: :func:`scan_csv` validates it and counts its records, :func:`iter_csv_rows`
streams its rows and :func:`read_csv` returns a small file's rows, parsed by Python's csv
module only after the record definition validated the bytes, and cross-checked record by
record: after validation the two definitions agree.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import IO, Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from ...errors import ValidationError
from .. import csvsplit
from ..csv import (
    DEFAULT_CHUNK_BYTES,
    CsvReader,
    Header,
    check_names,
    max_record_bytes,
)
from ..csv import Chunk as RawChunk
from ..csv import _fail as _record_error
from ._base import (
    Appender,
    Chunk,
    Column,
    Format,
    Layout,
    Parts,
    Points,
    Reader,
    Released,
    Span,
    Writer,
    WriteSpec,
    arrow,
    changed,
)
from ._parts import Cutter, RecordParts, read_bytes

__all__ = ["FORMAT", "CsvChunk", "CsvFormat", "CsvLayout", "CsvParts", "CsvScan", "iter_csv_rows", "read_csv",
           "read_piece", "scan_csv", "splice_released"]


class CsvChunk(Chunk):
    """Records of a CSV file: ``raw`` (bytes, records) and where they are."""

    unit: ClassVar[str] = "line"

    def __init__(self, raw: RawChunk, index: dict[str, int], first: int, kernels: Any) -> None:
        self.raw, self._index, self.first, self._kernels = raw, index, first, kernels
        self.rows = len(raw.records.starts)

    def places(self, rows: NDArray[np.intp]) -> NDArray[np.int64]:
        return self.raw.first_line + self.raw.records.lines[np.asarray(rows, dtype=np.intp)]

    def span(self, name: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Start and stop of the column's fields in :attr:`raw`'s buffer (quotes included)."""
        return self.raw.records.field(self._index[name])

    def column(self, name: str) -> Any:
        pa, _ = arrow()
        fs, fe = self.span(name)
        data, offs, quoted, raw_quoted = csvsplit.field_values(self.raw.buf, fs, fe)
        if quoted.any():  # rare: rebuild the offsets with the unquoted texts in place
            parts = []
            texts = iter(raw_quoted)
            raw = data.tobytes()
            for k in range(len(fs)):
                parts.append(next(texts) if quoted[k] else raw[offs[k]:offs[k + 1]])
            lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
            offs = np.zeros(len(parts) + 1, dtype=np.int64)
            np.cumsum(lens, out=offs[1:])
            data = np.frombuffer(b"".join(parts), dtype=np.uint8)
            offs = offs.astype(np.int32) if offs[-1] < 2**31 else offs
        typ = pa.string() if offs.dtype == np.int32 else pa.large_string()
        return pa.Array.from_buffers(typ, len(fs), [None, pa.py_buffer(offs), pa.py_buffer(data)])

    def spans(self, name: str) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]] | None:
        """The column's fields where they lie when none is quoted (an unquoted field's bytes are its text; the
        reader refused a NUL and invalid UTF-8); None when one is."""
        fs, fe = self.span(name)
        buf = self.raw.buf
        if fs.size and ((fe > fs) & (buf[np.minimum(fs, max(len(buf) - 1, 0))] == csvsplit.QUOTE)).any():
            return None
        return buf, fs, fe

    def quoted(self, name: str) -> NDArray[np.bool_]:
        fs, fe = self.span(name)
        buf = self.raw.buf
        return (fe > fs) & (buf[np.minimum(fs, max(len(buf) - 1, 0))] == csvsplit.QUOTE)

    def decimals(self, name: str) -> tuple[NDArray[np.float64], NDArray[np.bool_]] | None:
        if self._kernels is None:
            return None
        fs, fe = self.span(name)
        values, ok = self._kernels["parse_decimals"](self.raw.buf, fs, fe)
        return np.asarray(values, dtype=np.float64), np.asarray(ok, dtype=bool)

    def values(self, name: str, rows: NDArray[np.intp]) -> list[Any]:
        return self.texts(name, rows)  # a text format's values are its texts: these rows' only

    def texts(self, name: str, rows: NDArray[np.intp]) -> list[str]:
        """The texts of ``rows`` only: their fields' bounds alone are computed (a content check samples a few
        hundred rows of a chunk of tens of thousands), then read as Python ints."""
        fs, fe = self.raw.records.field(self._index[name], np.asarray(rows, dtype=np.intp))
        data = self.raw.data
        out = []
        for a, b in zip(fs.tolist(), fe.tolist(), strict=True):
            raw = data[a:b]
            if raw[:1] == b'"':
                raw = raw[1:-1].replace(b'""', b'"')
            out.append(raw.decode("utf-8", errors="replace"))
        return out


class CsvTableReader(Reader):
    """A CSV file opened for one pass."""

    def __init__(self, path: Path, *, chunk_rows: int, chunk_bytes: int, max_record: int | None,
                 kernels: Any) -> None:
        self._fh = path.open("rb")
        try:
            self._reader = CsvReader(self._fh, str(path), chunk_rows=chunk_rows, chunk_bytes=chunk_bytes,
                                     max_record=max_record, kernels=kernels)
            self.header: Header = self._reader.header()
        except BaseException:
            self._fh.close()
            raise
        self.names, self.line = self.header.names, self.header.line
        self._kernels = kernels

    def chunks(self) -> Iterator[Chunk]:
        index = {n: k for k, n in enumerate(self.names)}
        first = 0
        for raw in self._reader.chunks(0):
            chunk = CsvChunk(raw, index, first, self._kernels)
            first += chunk.rows
            yield chunk

    def close(self) -> None:
        self._fh.close()


class CsvWriter(Writer):
    """The input's bytes with the released fields spliced in (module docstring)."""

    def __init__(self, fh: IO[bytes], spec: WriteSpec, kernels: Any) -> None:
        source = spec.source
        if not isinstance(source, CsvTableReader):
            raise ValidationError(f"{spec.where}: a CSV output is written from a CSV input")
        self._fh, self._kernels = fh, kernels
        header = source.header
        self._dropped = spec.plan.dropped_indices
        self._index = {n: k for k, n in enumerate(header.names)}
        fh.write(csvsplit.header_bytes(header, self._dropped))

    def write(self, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released]) -> int:
        return splice_released(self._fh, cast(CsvChunk, chunk), self._index, self._dropped, keep, released,
                               self._kernels)


def splice_released(fh: IO[bytes], chunk: CsvChunk, index: dict[str, int], dropped: tuple[int, ...],
                    keep: NDArray[np.bool_] | None, released: Sequence[Released], kernels: Any = None) -> int:
    """Write ``chunk``'s records to ``fh`` with the ``released`` fields spliced in, the ``dropped`` columns
    removed and the records not ``keep`` left out whole; returns the records written."""
    raw = chunk.raw
    recs, buf, n = raw.records, raw.buf, chunk.rows
    names = [c for item in released for c in item.columns]
    starts, stops, row, kind = csvsplit.edits_for_columns(recs, [index[c] for c in names], dropped)
    if keep is not None and not keep.all():  # removals are kind -1 here, 1 in csvsplit: shifted around the call
        starts, stops, row, kind = csvsplit.without_records(buf, recs, ~keep, starts, stops, row, kind + 2)
        kind = kind - 2
    kept = None if keep is None else np.flatnonzero(keep)
    rows_out = n if kept is None else len(kept)
    if kernels is not None and len(released) == 1 and isinstance(released[0], Points):
        fixed = _fixed(released[0], n, kept)
        if fixed is not None:  # formatted and spliced in one compiled pass (the same bytes as below)
            fh.write(kernels["splice_points"](buf, recs.end, starts, stops, row, kind, fixed[0], fixed[1],
                                              released[0].digits).data)
            return rows_out
    datas, offs, per_column, base = [], [], [], 0
    for item in released:
        quoted = [chunk.quoted(c) for c in item.columns]
        data, off, choices = item.table([q if q is None or kept is None else q[kept] for q in quoted])
        datas.append(data)
        offs.append(off)
        for ch in choices:
            if kept is None:
                per_column.append(ch + base if base else ch)
            else:  # a withheld row's fields go with its record: any entry will do
                full = np.zeros(n, dtype=np.intp)
                full[kept] = ch + base
                per_column.append(full)
        base += len(off) - 1
    table, table_off = _joined(datas, offs)
    removal = len(table_off) - 2
    choice = np.full(len(starts), removal, dtype=np.intp)
    edited = kind >= 0
    if len(per_column) == 1:
        choice[edited] = per_column[0][row[edited]]
    elif per_column:
        choice[edited] = np.stack(per_column)[kind[edited], row[edited]]
    if kernels is not None:
        fh.write(kernels["splice_table"](buf, recs.end, starts, stops, table, table_off, choice).data)
    else:
        csvsplit.splice_to(fh, buf, recs.end, starts, stops, table, table_off, choice)
    return rows_out


def _fixed(points: Points, n: int, kept: NDArray[np.intp] | None) -> tuple[NDArray[np.int64],
                                                                            NDArray[np.int64]] | None:
    """The released coordinates as integers of ``10**-digits`` for every record (the withheld ones 0), or None
    when the compiled pass cannot write them (digits outside 0..15, a value the fixed text refuses, a row to be
    written in full)."""
    digits = points.digits
    if not 0 <= digits <= 15:
        return None
    scaled = np.rint(points.values * 10.0**digits)
    if not np.all(np.abs(scaled) < 1e3 * 10.0**digits):
        return None  # format_fixed raises the error
    ints = scaled.astype(np.int64)
    if points.full is not None and points.full(ints / 10.0**digits).any():
        return None
    if kept is None:
        return np.ascontiguousarray(ints[:, 0]), np.ascontiguousarray(ints[:, 1])
    lat, lon = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    lat[kept], lon[kept] = ints[:, 0], ints[:, 1]
    return lat, lon


def _joined(datas: list[NDArray[np.uint8]], offsets: list[NDArray[np.int64]]) -> tuple[
    NDArray[np.uint8], NDArray[np.int64]
]:
    """Tables laid end to end, and one empty entry after them (a removed range)."""
    if len(datas) == 1:
        off = offsets[0].astype(np.int64, copy=False)
        return datas[0], np.append(off, off[-1])
    parts, shift = [np.zeros(1, dtype=np.int64)], 0
    for off in offsets:
        parts.append(off[1:].astype(np.int64) + shift)
        shift += int(off[-1])
    joined = np.concatenate(parts)
    return np.concatenate(datas) if datas else np.zeros(0, dtype=np.uint8), np.append(joined, joined[-1])


class _PRead:
    """A read-only view of a descriptor from offset 0 (``pread``: the writer's position is not touched)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.pos = fd, 0

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = max(os.fstat(self.fd).st_size - self.pos, 0)
        data = os.pread(self.fd, n, self.pos)
        self.pos += len(data)
        return data


def _readable(fh: IO[bytes]) -> bool:
    """The output can be read back through its descriptor (Linux's unnamed temporary file is read-write)."""
    try:
        import fcntl  # POSIX only

        return (fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) & os.O_ACCMODE) == os.O_RDWR
    except (ImportError, OSError, ValueError, AttributeError):  # pragma: no cover - other platforms
        return False


@dataclass(frozen=True)
class CsvLayout(Layout):
    """A CSV piece's reading and its output: ``header`` the output's first bytes (the header record as in the
    file, a byte-order mark and blank lines before it included, dropped columns' names removed), ``cap`` the
    record cap the driver applied."""

    header: bytes = b""
    cap: int | None = None


class CsvParts(RecordParts):
    """The engines' CSV: pieces of whole records by the one record definition, parts spliced byte for byte.

    The driver reads the file with :class:`~metricdp.tabular.csv.CsvReader` and cuts it at
    record boundaries; a worker reads its byte range again with the same definition into a
    :class:`CsvChunk`, and writes its records with the released fields spliced in
    (:func:`splice_released`: every other byte kept, dropped columns removed, withheld
    records left out whole); the output is the planned header, then the parts.
    """

    def cut(self, path: Path, columns: Any, *, piece_bytes: int, chunk_bytes: int, max_record: int | None,
            check: Any = None) -> tuple[list[Span], Layout]:
        where = str(path)
        cutter = Cutter(piece_bytes)
        rows = 0
        with path.open("rb") as inp:
            reader = CsvReader(inp, where, chunk_bytes=chunk_bytes, max_record=max_record)
            header = reader.header()
            index = {n: k for k, n in enumerate(header.names)}
            for raw in reader.chunks(0):
                recs = raw.records
                n = len(recs.starts)
                if n:
                    starts = raw.offset + np.asarray(recs.starts, dtype=np.int64)
                    lines = raw.first_line + np.asarray(recs.lines, dtype=np.int64)
                    starts[0], lines[0] = raw.offset, raw.first_line  # blank lines before a record go with it
                    cutter.add(starts, raw.offset + int(recs.end), lines)
                if check is not None:
                    check.add(CsvChunk(raw, index, rows, None))
                rows += n
            cap = reader.cap
        head = csvsplit.header_bytes(header, columns.dropped_indices)  # the header the local engine writes
        return cutter.pieces(), CsvLayout(where, columns, head, cap)

    def read(self, piece: Any, layout: Layout, kernels: Any = None) -> Chunk:
        names = layout.columns.header
        data, buf, recs = read_piece(layout.where, piece.start, piece.stop, first_line=piece.first, rows=piece.rows,
                                     ncols=len(names), max_record=cast(CsvLayout, layout).cap)
        index = {n: k for k, n in enumerate(names)}
        return CsvChunk(RawChunk(data, buf, recs, piece.start, piece.first), index, piece.row, kernels)

    def write(self, layout: Layout, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released],
              kernels: Any = None) -> bytes:
        out = io.BytesIO()
        cols = layout.columns
        index = {n: k for k, n in enumerate(cols.header)}
        splice_released(out, cast(CsvChunk, chunk), index, cols.dropped_indices, keep, released, kernels)
        return out.getvalue()


def read_piece(where: str, start: int, stop: int, *, first_line: int, rows: int, ncols: int, column: int = 0,
               max_record: int | None) -> tuple[bytes, NDArray[np.uint8], Any]:
    """A piece's bytes ``[start, stop)`` (from line ``first_line``), as an array, and its records, split by the
    one record definition; anything but the ``rows`` whole records the driver counted means the file changed
    since the plan (:func:`~._base.changed`: a worker never releases a file it did not plan)."""
    data = read_bytes(where, start, stop)
    buf = np.frombuffer(data, dtype=np.uint8)
    recs = csvsplit.split_records(buf, eof=True, ncols=ncols, column=column, max_records=len(buf) + 1, where=where,
                                  first_line=first_line, first_offset=start, max_record=max_record)
    if recs.end != len(buf) or len(recs.starts) != rows:
        raise changed(where, f"{len(recs.starts):,} records where {rows:,} were counted")
    return data, buf, recs


_PARTS = CsvParts()


class CsvAppender(Appender):
    """The input's bytes with one field more at the end of every record (every other byte as it was: quoting,
    ``\\r\\n``, a byte-order mark); a record left out goes whole, its line break included."""

    def __init__(self, fh: IO[bytes], source: Reader, column: str, texts: Sequence[str]) -> None:
        if not isinstance(source, CsvTableReader):
            raise TypeError("a CSV output is appended to from a CSV input")  # pragma: no cover - one format
        parts = [b"," + csvsplit.encode_field(x) for x in texts] + [b""]  # the last entry: a record left out
        self._fh, self._table = fh, np.frombuffer(b"".join(parts), dtype=np.uint8)
        self._offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in parts], out=self._offsets[1:])
        self._remove = len(texts)
        header = source.header
        stop = int(header.record.stops[0])
        fh.write(header.raw[:stop] + b"," + csvsplit.encode_field(column) + header.raw[stop:])

    def write(self, chunk: Chunk, choice: NDArray[np.intp]) -> None:
        raw = cast(CsvChunk, chunk).raw
        recs, buf = raw.records, raw.buf
        if len(recs.starts) == 0:  # blank lines only
            self._fh.write(raw.data[: recs.end])
            return
        drop = choice < 0
        starts = np.where(drop, recs.starts, recs.stops).astype(np.int64)
        nxt = np.append(recs.starts[1:], recs.end).astype(np.int64)
        stops = np.where(drop, nxt, recs.stops).astype(np.int64)
        csvsplit.splice_to(self._fh, buf, recs.end, starts, stops, self._table, self._offsets,
                           np.where(drop, self._remove, choice).astype(np.intp))


class CsvFormat(Format):
    """Comma-separated values, UTF-8, one header record (:mod:`metricdp.tabular.csv`)."""

    name: ClassVar[str] = "csv"
    suffixes: ClassVar[tuple[str, ...]] = (".csv",)
    read_ahead: ClassVar[bool] = True
    unit: ClassVar[str] = CsvChunk.unit
    typed: ClassVar[bool] = False

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
             max_record: int | None = None, kernels: Any = None) -> Reader:
        return CsvTableReader(path, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record,
                              kernels=kernels)

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        return CsvWriter(fh, spec, kernels)

    def parts(self) -> Parts:
        return _PARTS

    def appender(self, fh: IO[bytes], source: Reader, column: str, texts: Sequence[str]) -> Appender:
        return CsvAppender(fh, source, column, texts)

    def write_table(self, fh: IO[bytes], names: Sequence[str], columns: Sequence[Column]) -> None:
        """A header record, then one record per row (Python's csv module, ``\\n``, UTF-8; a number as its repr)."""
        cells = [[repr(x) for x in c.tolist()] if isinstance(c, np.ndarray) else c for c in columns]
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(names)
        writer.writerows(zip(*cells, strict=True))
        text.flush()
        text.detach()

    def withhold(self, fh: IO[bytes], keep: NDArray[np.bool_], where: str, cap: int) -> int | None:
        """Remove the records not ``keep`` from the release just written to ``fh``, in place; rows kept.

        The output holds every input record (same order; at least two columns, so no record
        is empty and record ``i`` is row ``i``). It is read back by the one record
        definition and written again from its start without the withheld records (each
        goes whole, line break included): what is written never passes what was read, so
        no unread byte is overwritten; the file is then cut at its new end. A copy, not a
        second release.
        """
        if not _readable(fh):
            return None
        fh.flush()
        fd = fh.fileno()
        reader = CsvReader(cast(IO[bytes], _PRead(fd)), where, max_record=cap)
        reader.header()
        fh.seek(0)
        none, no_rows = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.intp)
        table, table_off = np.zeros(0, dtype=np.uint8), np.zeros(2, dtype=np.int64)  # entry 0: nothing
        seen, first = 0, True
        for chunk in reader.chunks(0):
            recs = chunk.records
            if first:  # the header's bytes, as written
                fh.write(os.pread(fd, chunk.offset, 0))
                first = False
            n = len(recs.starts)
            if seen + n > keep.size:
                break
            starts, stops, _row, _kind = csvsplit.without_records(chunk.buf, recs, ~keep[seen:seen + n], none, none,
                                                                  no_rows, no_rows)
            csvsplit.splice_to(fh, chunk.buf, recs.end, starts, stops, table, table_off,
                               np.zeros(len(starts), dtype=np.intp))
            seen += n
        if seen != keep.size:  # pragma: no cover - the output's records are the input's (docstring)
            raise ValidationError(f"{where}: the output of the release has {seen:,} records, not {keep.size:,}; "
                                  "nothing written, nothing spent")
        fh.truncate()
        return int(keep.sum())


FORMAT = CsvFormat()


# ------------------------------------------------------------------ a whole file
@dataclass(frozen=True)
class CsvScan:
    """What :func:`scan_csv` found: the header's names, the number of records, bytes."""

    header: tuple[str, ...]
    records: int
    bytes: int


def scan_csv(
    path: str | PathLike[str], *, max_record: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> CsvScan:
    """Validate a whole CSV file under the one record definition (:mod:`metricdp.tabular.csv`); its header and
    record count.

    For engines that partition a file themselves (Dask, Spark): run this first, and a
    file that the local engine would refuse is refused before any worker reads it; the
    record count is the row count every correct release must write. Raises
    :class:`ValidationError` (one line: file, line, byte offset) on any refusal of the
    record definition. Streams: memory is one chunk plus one record.
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    n = 0
    with p.open("rb") as fh:
        reader = CsvReader(fh, str(p), chunk_bytes=chunk_bytes, max_record=max_record)
        names = reader.header().names
        check_names(names, str(p), line=reader.header().line)
        for chunk in reader.chunks():
            n += len(chunk.records.starts)
    return CsvScan(names, n, p.stat().st_size)


@contextlib.contextmanager
def iter_csv_rows(
    path: str | PathLike[str], *, max_record: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> Iterator[tuple[tuple[str, ...], Iterator[tuple[int, list[str]]]]]:
    """``with iter_csv_rows(path) as (header, rows)``: the header and a stream of ``(line, row)``
    of a CSV file of any size (the file is closed when the block ends).

    Each chunk is validated by :class:`CsvReader`, then parsed by Python's csv module
    (C speed); the two must agree on every chunk's record count and field counts, else
    the chunk is refused -- so what this yields is what the byte splitter sees. Memory:
    one chunk plus one record.
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    cap = max_record_bytes(max_record)
    if csv.field_size_limit() < cap:  # the cap is enforced above; the csv module's own limit must not be lower
        csv.field_size_limit(cap)
    with p.open("rb") as fh:
        reader = CsvReader(fh, str(p), max_record=cap, chunk_bytes=chunk_bytes)
        header = reader.header().names
        check_names(header, str(p), line=reader.header().line)

        def rows() -> Iterator[tuple[int, list[str]]]:
            for chunk in reader.chunks():
                recs = chunk.records
                text = chunk.data[: recs.end].decode("utf-8")
                got = [r for r in csv.reader(io.StringIO(text, newline=""), strict=True) if r]
                if len(got) != len(recs.starts) or any(len(r) != len(header) for r in got):  # pragma: no cover
                    raise _record_error(str(p), chunk.first_line, chunk.offset,
                                        "records read differently by two parsers")
                yield from zip((recs.lines + chunk.first_line).tolist(), got, strict=True)

        yield header, rows()


def read_csv(
    path: str | PathLike[str], *, max_record: int | None = None
) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, rows and each row's line number of a CSV file read whole (POINTS, ``estimate``):
    :func:`iter_csv_rows` collected."""
    rows: list[list[str]] = []
    lines: list[int] = []
    with iter_csv_rows(path, max_record=max_record) as (header, stream):
        for line, row in stream:
            lines.append(line)
            rows.append(row)
    return list(header), rows, lines
