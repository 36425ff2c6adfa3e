"""The one definition of a CSV record, shared by the byte splitter and every CSV reader.

Grammar (RFC 4180, ``,`` delimiter, ``"`` quote, UTF-8):

* a field is unquoted (no ``"`` in it) or quoted (starts and ends with ``"``; an inner
  ``"`` is written ``""``; ``,``, ``\\n`` and ``\\r`` inside are data);
* a record ends at ``\\n`` outside quotes, optionally preceded by ``\\r`` (LF and CRLF,
  mixed freely); an empty line is no record (Python's :mod:`csv` and pyarrow skip it);
* the first non-empty record is the header; every other record has exactly as many
  fields as the header.

Refused, each with ONE :class:`~metricdp.errors.ValidationError` naming the file, the
line and the byte offset (never read differently by two readers, never passed through
unreleased): a ``\\r`` outside quotes not followed by ``\\n`` (a classic-Mac record end,
which Python's csv module reads as a record end and a ``\\n`` splitter does not), a
``"`` that neither opens, closes nor escapes, a quoted field open at the end of the file,
a record with another number of fields than the header (a trailing ``,`` adds one),
a byte-order mark anywhere but the first byte of the file, a NUL byte, invalid UTF-8,
an empty or duplicated header name, and a record (the header included) longer than
:func:`max_record_bytes`.

Quote state is a parity: a byte is inside quotes exactly when an odd number of ``"``
precede it in the record stream (an ``""`` escape toggles twice). Chunks are cut after
a record, where the parity is even, so no state crosses a chunk. When no record ends in
the bytes at hand, further reads are scanned alone (the parity carried over) until one
holds a line break outside quotes, then joined once: every byte is scanned a bounded
number of times -- linear time -- and at most ``max_record_bytes`` plus one read are ever
pending: memory is bounded by the chunk and the cap.

The reader: :class:`CsvReader` streams chunks of records. The CSV format of the release
pipeline (:mod:`metricdp.tabular.formats.csv`) reads through it, and so do its readers of
a whole file (``scan_csv``, ``read_csv``).
"""

from __future__ import annotations

import codecs
import itertools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError

__all__ = [
    "DEFAULT_CHUNK_BYTES", "DEFAULT_MAX_RECORD_BYTES", "MAX_RECORD_ENV", "Chunk", "CsvReader", "Header", "Records",
    "check_names", "check_utf8", "max_record_bytes", "split_records",
]

QUOTE, COMMA, LF, CR = 34, 44, 10, 13
BOM: Final = codecs.BOM_UTF8

#: Default cap on one record's bytes (the header included). Large enough for any sane
#: field (a 32 MiB text cell), small enough that a hostile file cannot make a reader
#: hold gigabytes for one record.
DEFAULT_MAX_RECORD_BYTES: Final = 32 * 2**20
#: Environment variable overriding the default cap (bytes, or with a KiB/MiB/GiB/KB/MB/GB unit).
MAX_RECORD_ENV: Final = "METRICDP_CSV_MAX_RECORD"
#: Bytes read at a time (a chunk holds at most this much input plus one record); 1-4 MiB
#: were the fastest for privatize in the label-release benchmark (benchmarks/RESULTS.md).
DEFAULT_CHUNK_BYTES: Final = 2 * 2**20

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def max_record_bytes(value: int | None = None) -> int:
    """The record cap: ``value`` when given, else :data:`MAX_RECORD_ENV`, else the default.

    Raises :class:`ValidationError` for a value below 1 or an unreadable variable.
    """
    if value is None:
        raw = os.environ.get(MAX_RECORD_ENV, "").strip()
        if not raw:
            return DEFAULT_MAX_RECORD_BYTES
        m = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", raw)
        if m is None or m.group(2).lower() not in _UNITS:
            raise ValidationError(f"{MAX_RECORD_ENV}={raw!r}: expected a number of bytes, e.g. 64MiB")
        value = int(m.group(1)) * _UNITS[m.group(2).lower()]
    if value < 1:
        raise ValidationError(f"the CSV record cap must be >= 1 byte, got {value}")
    return int(value)


_Fail = Callable[[int, str], ValidationError]


def _fail(where: str, line: int, offset: int, message: str) -> ValidationError:
    """``FILE: line N: what (byte offset B)``; a ``message`` starting "has" reads ``line N has ...``."""
    sep = " " if message.startswith("has ") else ": "
    return ValidationError(f"{where}: line {line}{sep}{message} (byte offset {offset:,})")


@dataclass(frozen=True)
class Records:
    """The complete records at the start of a buffer (see :func:`split_records`).

    ``end`` is the buffer offset just past the last complete record (its line break
    included); ``starts``/``stops`` delimit each non-empty record's bytes without the
    line break; ``lines`` are their 0-based line offsets within the buffer; ``delims``
    are the positions of the ``,`` outside quotes and ``first[i]`` the index in
    ``delims`` of record ``i``'s first one (``ncols - 1`` per record);
    ``fs``/``fe`` delimit the wanted column's field (quotes included).
    """

    end: int
    starts: NDArray[np.int64]
    stops: NDArray[np.int64]
    lines: NDArray[np.int64]
    fs: NDArray[np.int64]
    fe: NDArray[np.int64]
    delims: NDArray[np.int64]
    first: NDArray[np.int64]
    ncols: int

    def field(self, k: int, rows: NDArray[np.intp] | None = None) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Start and stop of field ``k`` (0-based, quotes included) in every record, or in records ``rows`` only
        (the same bounds as every record's taken at ``rows``: a few records' cost, not the chunk's)."""
        if not 0 <= k < self.ncols:
            raise IndexError(k)
        starts, stops, first = self.starts, self.stops, self.first
        if rows is not None:
            starts, stops, first = starts[rows], stops[rows], first[rows]
        fs = starts if k == 0 else self.delims[first + k - 1] + 1
        fe = stops if k == self.ncols - 1 else self.delims[first + k]
        return fs.astype(np.int64, copy=False), fe.astype(np.int64, copy=False)


def split_records(
    buf: NDArray[np.uint8],
    *,
    eof: bool,
    ncols: int | None,
    column: int,
    max_records: int,
    where: str,
    first_line: int = 1,
    first_offset: int = 0,
    max_record: int | None = None,
    kernels: Any = None,
) -> Records:
    """Split and validate the complete records at the start of ``buf`` (at most ``max_records`` lines).

    ``buf`` starts at a record boundary (``first_line``/``first_offset``: the file's line
    number and byte offset of ``buf[0]``). Without ``eof`` a trailing partial record is
    left for the next call (``end`` stops before it). ``ncols=None`` splits records
    without counting fields (the header). Every refusal of the module docstring that
    concerns the bytes up to ``end`` is raised here, except UTF-8 (:func:`check_utf8`).

    ``kernels`` (the compiled kernels of :mod:`metricdp.mechanisms._lattice_kernels`, for
    callers that loaded them): a buffer with no quote, carriage return, NUL or 0xEF byte
    is split in one compiled pass with the same result; any other buffer, and every
    refusal, is this function's numpy code.
    """
    cap = max_record_bytes(max_record)
    if kernels is not None and ncols is not None:
        ok, end_, starts_, stops_, lines_, d_, first_ = kernels["split_plain"](buf, ncols, max_records, eof, cap)
        if ok:
            plain = Records(end_, starts_, stops_, lines_, starts_, stops_, d_, first_, ncols)
            fs_, fe_ = plain.field(column)
            return Records(end_, starts_, stops_, lines_, fs_, fe_, d_, first_, ncols)
    q = np.flatnonzero(buf == QUOTE)
    nl = np.flatnonzero(buf == LF)
    struct_nl = nl[(np.searchsorted(q, nl) & 1) == 0]
    if len(struct_nl) > max_records:
        struct_nl = struct_nl[:max_records]
    ends = struct_nl
    end = int(struct_nl[-1]) + 1 if len(struct_nl) else 0

    def fail(pos: int, message: str) -> ValidationError:
        return _fail(where, first_line + int(np.searchsorted(nl, pos)), first_offset + pos, message)

    if eof and len(struct_nl) < max_records and end < len(buf):
        if len(q) & 1:
            _check_quotes(buf, q, len(buf), fail)  # a stray quote, else an open field
            raise fail(int(q[-1]), "a quoted field is not closed before the end of the file")
        ends = np.append(struct_nl, len(buf))
        end = len(buf)
    region_q = q[q < end]
    _check_quotes(buf, region_q, end, fail)
    _check_bytes(buf, end, region_q, fail, at_file_start=first_offset == 0)
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    stops = ends.astype(np.int64)
    has_cr = (stops > starts) & (buf[np.maximum(stops - 1, 0)] == CR)
    stops = stops - has_cr
    keep = stops > starts
    starts, stops = starts[keep], stops[keep]
    lines = np.searchsorted(nl, starts).astype(np.int64)
    long = np.flatnonzero(stops - starts > cap)
    if len(long):
        i = int(long[0])
        raise fail(int(starts[i]), f"a record of {int(stops[i] - starts[i]):,} bytes is over the cap of {cap:,} "
                                   f"bytes (set {MAX_RECORD_ENV} to raise it)")
    d = np.flatnonzero(buf[:end] == COMMA)
    d = d[(np.searchsorted(region_q, d) & 1) == 0].astype(np.int64)
    first = np.searchsorted(d, starts).astype(np.int64)
    if ncols is None:  # records only (the header)
        return Records(end, starts, stops, lines, starts, stops, d, first, 0)
    count = np.searchsorted(d, stops) - first
    bad = np.flatnonzero(count != ncols - 1)
    if len(bad):
        i = int(bad[0])
        trailing = " (a trailing ',' adds an empty field)" if count[i] >= ncols and buf[stops[i] - 1] == COMMA else ""
        raise fail(int(starts[i]), f"has {count[i] + 1} fields, expected {ncols} as in the header{trailing}")
    recs = Records(end, starts, stops, lines, starts, stops, d, first, ncols)
    fs, fe = recs.field(column)
    return Records(end, starts, stops, lines, fs, fe, d, first, ncols)


def _check_quotes(buf: NDArray[np.uint8], q: NDArray[np.int64], end: int, fail: _Fail) -> None:
    """Every quote opens a field, closes one, or is half of a ``""`` escape (RFC 4180)."""
    if not len(q):
        return
    k = np.arange(len(q))
    prev = np.where(q > 0, buf[np.maximum(q - 1, 0)], LF)
    nxt = np.where(q + 1 < end, buf[np.minimum(q + 1, len(buf) - 1)], LF)
    opener = (k & 1) == 0
    prev_is_closer = np.zeros(len(q), dtype=bool)
    prev_is_closer[1:] = q[1:] - 1 == q[:-1]
    ok_open = (prev == COMMA) | (prev == LF) | ((prev == QUOTE) & prev_is_closer)
    ok_close = (nxt == COMMA) | (nxt == LF) | (nxt == CR) | (nxt == QUOTE)
    bad = np.flatnonzero(np.where(opener, ~ok_open, ~ok_close))
    if len(bad):
        raise fail(int(q[bad[0]]), "a '\"' inside an unquoted field or after a closing quote (not RFC 4180 CSV)")


def _check_bytes(buf: NDArray[np.uint8], end: int, q: NDArray[np.int64], fail: _Fail, *, at_file_start: bool) -> None:
    """No NUL, no BOM after the file's first byte, no ``\\r`` outside quotes but before ``\\n``."""
    region = buf[:end]
    nul = np.flatnonzero(region == 0)
    if len(nul):
        raise fail(int(nul[0]), "a NUL byte (not a text CSV file)")
    ef = np.flatnonzero(region[: max(end - 2, 0)] == BOM[0])
    if len(ef):
        ef = ef[(region[ef + 1] == BOM[1]) & (region[ef + 2] == BOM[2]) & ((ef > 0) | (not at_file_start))]
        if len(ef):
            raise fail(int(ef[0]), "a byte-order mark (U+FEFF) inside the file (two files concatenated?)")
    cr = np.flatnonzero(region == CR)
    if len(cr):
        outside = (np.searchsorted(q, cr) & 1) == 0
        nxt = buf[np.minimum(cr + 1, len(buf) - 1)]
        bare = np.flatnonzero(outside & ((cr + 1 >= end) | (nxt != LF)))
        if len(bare):
            raise fail(int(cr[bare[0]]), "a carriage return (\\r) that does not end a line with \\n: records "
                                         "must end in \\n or \\r\\n (a classic-Mac CSV? convert its line endings)")


#: UTF-8 is validated this many bytes at a time (the decoded text of one piece is the only copy).
_UTF8_PIECE = 8 * 2**20


def check_utf8(data: bytes | memoryview, where: str, offset: int, first_line: int = 1) -> None:
    """Raise a :class:`ValidationError` naming the line and byte offset of the first invalid UTF-8 byte.

    Decoded in pieces (a character cut by a piece boundary is finished by the next
    piece), so memory stays at one piece whatever the record size.
    """
    view = memoryview(data)
    start = 0
    while start < len(view):
        stop = min(start + max(_UTF8_PIECE, 4), len(view))  # >= 4: a whole character always fits
        try:
            _, used = codecs.utf_8_decode(view[start:stop], "strict", stop == len(view))
        except UnicodeDecodeError as ex:
            at = start + ex.start
            line = first_line + bytes(view[:at]).count(b"\n")
            raise ValidationError(f"{where}: line {line}: not valid UTF-8 at byte offset {offset + at:,} "
                                  f"(byte 0x{bytes(view[at : at + 1]).hex()})") from None
        start += used


def _unquote(raw: bytes) -> str:
    if raw[:1] == b'"':
        raw = raw[1:-1].replace(b'""', b'"')
    return raw.decode("utf-8")


@dataclass(frozen=True)
class Header:
    """The header record: its names, and the raw bytes before the first data record.

    ``raw`` holds everything from the start of the file through the header's line
    break (a byte-order mark and blank lines before it included) so that a writer can
    copy it unchanged; ``record`` locates the header's fields in ``raw``.
    """

    names: tuple[str, ...]
    raw: bytes
    record: Records
    line: int


@dataclass(frozen=True)
class Chunk:
    """Complete records read from a file: ``data[:records.end]`` is the bytes they span.

    ``offset`` and ``first_line`` are the file's byte offset and line number of ``data[0]``.
    """

    data: bytes
    buf: NDArray[np.uint8]
    records: Records
    offset: int
    first_line: int


class CsvReader:
    """Stream one CSV file's records under the module's definition: header first, then chunks.

    ``chunk_rows`` caps the records of one chunk, ``chunk_bytes`` the bytes read at a
    time; ``max_record`` the bytes of one record (default :func:`max_record_bytes`);
    ``kernels`` the compiled split of :func:`split_records` (same records, same refusals).
    Memory: one read plus at most one record pending. Time: linear in the file.
    """

    def __init__(
        self,
        fh: IO[bytes],
        where: str,
        *,
        chunk_rows: int = 1_000_000,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        max_record: int | None = None,
        kernels: Any = None,
    ) -> None:
        if chunk_rows < 1 or chunk_bytes < 1:
            raise ValidationError(f"chunk_rows and chunk_bytes must be >= 1, got {chunk_rows}, {chunk_bytes}")
        self._fh, self.where = fh, where
        self._rows, self._bytes = chunk_rows, max(chunk_bytes, 4)  # >= 4: a byte-order mark arrives whole
        self.cap = max_record_bytes(max_record)
        self._kernels = kernels  # the compiled split, for a caller that loaded the kernels (see split_records)
        self._pending = b""
        self._eof = False
        self._consumed = 0  # file bytes before _pending
        self._lines = 0  # line breaks before _pending
        self._header: Header | None = None

    def _read(self) -> None:
        """Read one chunk more into what is pending."""
        data = self._fh.read(self._bytes)
        self._eof = not data
        self._pending = self._pending + data if self._pending else data

    def _read_record(self) -> None:
        """Read until a record ends in what is pending (or the file does), each byte scanned once.

        ``_pending`` holds no complete record. Only the new bytes are scanned for a line
        break outside quotes (the quote parity carried over), the reads are kept apart
        and joined once: time linear in the record, memory twice the record at the join,
        and a record over the cap refused as soon as the bytes read exceed it.
        """
        parts = [self._pending]
        size = len(self._pending)
        parity = int(np.count_nonzero(np.frombuffer(self._pending, dtype=np.uint8) == QUOTE)) & 1
        while True:
            if size > self.cap + self._bytes:
                raise _fail(self.where, self._lines + 1, self._consumed, f"a record longer than the cap of "
                                                                         f"{self.cap:,} bytes (set {MAX_RECORD_ENV} "
                                                                         "to raise it)")
            data = self._fh.read(max(self._bytes, min(size, 64 * 2**20)))
            if not data:
                self._eof = True
                break
            parts.append(data)
            size += len(data)
            arr = np.frombuffer(data, dtype=np.uint8)
            q = np.flatnonzero(arr == QUOTE)
            nl = np.flatnonzero(arr == LF)
            if np.any(((np.searchsorted(q, nl) + parity) & 1) == 0):
                break
            parity ^= len(q) & 1
        self._pending = b"".join(parts)

    def _advance(self, n: int) -> None:
        self._lines += self._pending.count(b"\n", 0, n)
        self._pending, self._consumed = self._pending[n:], self._consumed + n

    def header(self) -> Header:
        """The header (read once); an empty file, empty or duplicated names are refused."""
        if self._header is not None:
            return self._header
        prefix = b""
        while True:
            if not self._eof and len(self._pending) < self._bytes:
                self._read()
            if self._consumed == 0 and self._pending.startswith(BOM):
                prefix, self._pending, self._consumed = BOM, self._pending[3:], 3
            buf = np.frombuffer(self._pending, dtype=np.uint8)
            head = split_records(buf, eof=self._eof, ncols=None, column=0, max_records=1, where=self.where,
                                 first_line=self._lines + 1, first_offset=self._consumed, max_record=self.cap)
            if head.end == 0:
                if self._eof:
                    raise ValidationError(f"{self.where}: empty file (no header row)")
                self._read_record()
                continue
            if len(head.starts) == 0:  # a blank line before the header: kept, skipped
                prefix += self._pending[: head.end]
                self._advance(head.end)
                continue
            break
        check_utf8(memoryview(self._pending)[: head.end], self.where, self._consumed, self._lines + 1)
        a, b = int(head.starts[0]), int(head.stops[0])
        cuts = [a, *(int(x) for x in head.delims[head.delims < b]), b]
        names = tuple(_unquote(self._pending[s + (i > 0) : e]) for i, (s, e) in enumerate(itertools.pairwise(cuts)))
        line = self._lines + 1 + int(head.lines[0])
        shift = len(prefix)
        rec = Records(shift + head.end, head.starts + shift, head.stops + shift, head.lines, head.fs + shift,
                      head.fe + shift, head.delims + shift, head.first, len(names))
        self._header = Header(names, prefix + self._pending[: head.end], rec, line)
        self._advance(head.end)
        return self._header

    def chunks(self, column: int = 0) -> Iterator[Chunk]:
        """Chunks of complete, validated records (``column``: the field located as ``fs``/``fe``)."""
        ncols = len(self.header().names)
        need_more = False
        while True:
            if not self._eof and need_more:
                self._read_record()
            elif not self._eof and len(self._pending) < self._bytes:
                self._read()
            need_more = False
            buf = np.frombuffer(self._pending, dtype=np.uint8)
            recs = split_records(buf, eof=self._eof, ncols=ncols, column=column, max_records=self._rows,
                                 where=self.where, first_line=self._lines + 1, first_offset=self._consumed,
                                 max_record=self.cap, kernels=self._kernels)
            if recs.end == 0:
                if self._eof:
                    return
                need_more = True
                continue
            check_utf8(memoryview(self._pending)[: recs.end], self.where, self._consumed, self._lines + 1)
            yield Chunk(self._pending, buf, recs, self._consumed, self._lines + 1)
            self._advance(recs.end)
            if self._eof and not self._pending:
                return


def check_names(names: Sequence[str], where: str, released: Sequence[str] = (), line: int | None = None) -> None:
    """Every header name non-empty and unique (a duplicated released column said so); ``line``: the header's."""
    seen: set[str] = set()
    if line is not None:
        where = f"{where}: line {line}"
    for i, name in enumerate(names):
        if name == "":
            raise ValidationError(f"{where}: header column {i + 1} has an empty name")
        if name in seen:
            what = "the released column" if name in released else "column"
            raise ValidationError(f"{where}: {what} {name!r} appears more than once in the header")
        seen.add(name)


def names_of(names: Sequence[str]) -> str:
    """``'a', 'b'`` for messages."""
    return ", ".join(repr(n) for n in names)
