"""JSON lines (``.jsonl``, ``.ndjson``): one JSON object per line, read in chunks of lines, written one object per row.

**The table a file holds.** The first object's keys, in their order, are the header;
every other line holds an object with exactly those keys (in any order). A value is a
string, a number, a boolean or ``null`` (missing); a key holds one of those types on
every line (a number may be an integer on one line and a fraction on another). Lines
holding only spaces are not rows; a byte-order mark before the first line is skipped.

**Refused**, each as one :class:`~metricdp.errors.ValidationError` naming the file and
the line (nothing is released, written or spent): a line that is not JSON, not UTF-8,
longer than the record cap (:func:`metricdp.tabular.csv.max_record_bytes`), or not an
object; a missing or an extra key; a key given twice; a nested value (an array or an
object: a table has no cells inside cells, and a release of one part of it would write
the rest of it true); a key whose type changes; ``NaN``/``Infinity`` and numbers beyond
float range; integers beyond 64 bits (write them as strings).

**Types.** A column is read as Arrow ``string``, ``int64`` (integers), ``float64`` (a
chunk with a fraction in it) or ``bool``. Written: each row one object, the written
columns' keys in header order; a kept value exactly as it was read (``1.0`` stays
``1.0``, a string stays a string), a released value from
:meth:`~metricdp.tabular.formats.Released.arrays` at the input column's type (a label
``"3"`` of an integer column is written ``3``; a point as a float).
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from ...errors import ValidationError
from ..csv import BOM, DEFAULT_CHUNK_BYTES, MAX_RECORD_ENV, max_record_bytes
from ._base import BatchChunk, Chunk, Format, Layout, Parts, Reader, Released, Span, Writer, WriteSpec, arrow, changed
from ._parts import Cutter, RecordParts, read_bytes

__all__ = ["FORMAT", "JsonlChunk", "JsonlFormat", "JsonlLayout", "JsonlParts", "JsonlReader"]

_INT64 = (-(2**63), 2**63 - 1)
#: a \uD800-\uDFFF escape: a lone surrogate is not text (checked only on the lines that hold one)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_NAMES = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "an array",
          dict: "an object"}


_KIND_OF: dict[type, str] = {str: "string", bool: "boolean", int: "number", float: "number"}


def _kind(value: object) -> str | None:
    """``"string"``, ``"number"``, ``"boolean"``, None (null); anything else is nested."""
    return None if value is None else _KIND_OF.get(type(value), "nested")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Twice(key)
        out[key] = value
    return out


class _Twice(Exception):
    """A key given twice in one object (json.loads would keep the last one silently)."""


def _constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


#: one decoder for every line (``json.loads`` with options builds one per call)
_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)


class _Lines:
    """The file's lines, each at most the record cap, with their numbers; blank lines skipped."""

    def __init__(self, fh: IO[bytes], where: str, cap: int, number: int = 0, offset: int = 0) -> None:
        self._fh, self.where, self._cap = fh, where, cap
        self.number = number
        self.offset = offset

    def next(self) -> tuple[bytes, int] | None:
        """The next non-blank line (its bytes, its number), or None at the end."""
        while True:
            raw = self._fh.readline(self._cap + 1)
            if not raw:
                return None
            self.number += 1
            if len(raw) > self._cap and not raw.endswith(b"\n"):
                raise ValidationError(
                    f"{self.where}: line {self.number} is longer than the cap of {self._cap:,} bytes (byte offset "
                    f"{self.offset:,}; set {MAX_RECORD_ENV} to raise it)")
            if self.number == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
                self.offset += len(BOM)
            start = self.offset
            self.offset += len(raw)
            if raw.strip():
                return raw, start
            # a blank line is not a row


def _parse(raw: bytes, where: str, line: int, offset: int) -> Any:
    """The line's JSON value; malformed JSON, bad UTF-8, a key twice, NaN: one error naming the line."""
    try:
        text = raw.decode("utf-8").rstrip("\r\n")  # an error's column counts on this line
    except UnicodeDecodeError as ex:
        raise ValidationError(f"{where}: line {line} is not UTF-8 (byte offset {offset + ex.start:,})") from None
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as ex:
        raise ValidationError(f"{where}: line {line} is not JSON: {ex.msg} (column {ex.colno})") from None
    except _Twice as ex:
        raise ValidationError(f"{where}: line {line} gives the key {ex.args[0]!r} twice") from None
    except ValueError as ex:
        raise ValidationError(f"{where}: line {line}: {ex}") from None
    if _SURROGATE.search(raw):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(f"{where}: line {line} holds a lone surrogate escape (not text)") from None
    return value


class JsonlChunk(BatchChunk):
    """Rows of a JSON-lines file: a record batch of the header's columns (typed as the module docstring says),
    each column's values as read (``values``: what the writer writes back), each row's line (``lines``), the
    file offset where each row starts (``offsets``) and where the chunk ends (``end``: the next row's start)."""

    unit: ClassVar[str] = "line"
    offsets: NDArray[np.int64]
    end: int

    def __init__(self, values: dict[str, list[Any]], lines: NDArray[np.int64], first: int,
                 kinds: dict[str, str | None]) -> None:
        pa, _ = arrow()
        arrays = []
        for name, column in values.items():
            kind = kinds.get(name)
            if kind == "number":
                typ = pa.int64() if all(type(v) is int or v is None for v in column) else pa.float64()
            else:
                typ = pa.bool_() if kind == "boolean" else pa.string()
            arrays.append(pa.array(column, type=typ))
        super().__init__(pa.RecordBatch.from_arrays(arrays, names=list(values)), first)
        self.read, self.lines = values, lines  # the values as read (1.0 stays 1.0 when written back)

    def places(self, rows: NDArray[np.intp]) -> NDArray[np.int64]:
        return self.lines[np.asarray(rows, dtype=np.intp)]

    def texts(self, name: str, rows: NDArray[np.intp]) -> list[str]:
        values = self.read[name]
        out = []
        for r in np.asarray(rows, dtype=np.intp):
            v = values[int(r)]
            out.append(v if isinstance(v, str) else json.dumps(v))
        return out


class JsonlReader(Reader):
    """A JSON-lines file opened for one pass; the first object's keys are its ``names``.

    ``span`` (an engine's piece: ``(start, stop, first line, first row)``, with the file's
    ``names`` and ``kinds`` as the driver read them) reads those bytes only, from that line.
    """

    def __init__(self, path: Path, *, chunk_rows: int, chunk_bytes: int, max_record: int | None,
                 span: tuple[int, int, int, int] | None = None, names: tuple[str, ...] = (),
                 kinds: dict[str, str | None] | None = None) -> None:
        self.where = str(path)
        self.cap = max_record_bytes(max_record)
        self._first = 0
        if span is None:
            if not path.is_file():
                raise ValidationError(f"{path}: no such file")
            self._fh: IO[bytes] = path.open("rb")
            self._lines = _Lines(self._fh, self.where, self.cap)
        else:
            start, stop, line, self._first = span
            self._fh = io.BytesIO(read_bytes(self.where, start, stop))
            self._lines = _Lines(self._fh, self.where, self.cap, line - 1, start)
        try:
            got = self._lines.next()
            if got is None:
                raise ValidationError(f"{path}: empty file (no JSON object)")
            first = self._object(*got)
        except BaseException:
            self._fh.close()
            raise
        self.names = names or tuple(first)
        self._keys = frozenset(self.names)
        self._kinds: dict[str, str | None] = dict(kinds) if kinds is not None else dict.fromkeys(self.names)
        self._pending: tuple[dict[str, Any], int, int] | None = (first, self._lines.number, got[1])
        self._rows, self._bytes = chunk_rows, chunk_bytes

    @property
    def kinds(self) -> dict[str, str | None]:
        """The type of each key seen so far (None: only nulls)."""
        return dict(self._kinds)

    def _object(self, raw: bytes, offset: int) -> dict[str, Any]:
        line = self._lines.number
        value = _parse(raw, self.where, line, offset)
        if not isinstance(value, dict):
            what = "null" if value is None else _NAMES.get(type(value), type(value).__name__)
            raise ValidationError(f"{self.where}: line {line} is {what}, not a JSON object (one object per line)")
        return value

    def _check_row(self, obj: dict[str, Any], line: int) -> None:
        """The header's keys, one type per key, no nested value, numbers in range (module docstring)."""
        if obj.keys() != self._keys:
            missing = [k for k in self.names if k not in obj]
            if missing:
                raise ValidationError(f"{self.where}: line {line} has no key {missing[0]!r} (every line holds the "
                                      f"first line's keys)")
            extra = next(k for k in obj if k not in self._keys)
            raise ValidationError(f"{self.where}: line {line} has the key {extra!r}, which the first line has not")
        for key, value in obj.items():
            kind = _kind(value)
            if kind is None:
                continue
            if kind == "nested":
                raise ValidationError(f"{self.where}: line {line}: key {key!r} holds {_NAMES[type(value)]}; "
                                      "only strings, numbers, booleans and null are read")
            if type(value) is int and not _INT64[0] <= value <= _INT64[1]:
                raise ValidationError(f"{self.where}: line {line}: key {key!r} is an integer beyond 64 bits; "
                                      "write it as a string")
            if type(value) is float and not math.isfinite(value):
                raise ValidationError(f"{self.where}: line {line}: key {key!r} is a number beyond float range")
            known = self._kinds[key]
            if known is None:
                self._kinds[key] = kind
            elif known != kind:
                raise ValidationError(f"{self.where}: line {line}: key {key!r} is {_NAMES[type(value)]}; earlier "
                                      f"lines hold {known}s")

    def _columns(self, objs: list[dict[str, Any]], lines: list[int]) -> dict[str, list[Any]]:
        """The chunk's columns, checked as :meth:`_check_row` checks each row: a column at a time while
        every row is fine, row by row (the first culprit named) when one is not."""
        fine = all(o.keys() == self._keys for o in objs)
        values = {k: [o[k] for o in objs] for k in self.names} if fine else {}
        kinds: dict[str, str] = {}
        for key, column in values.items():
            types = set(map(type, column)) - {type(None)}
            found = {_KIND_OF.get(t, "nested") for t in types}
            known = self._kinds[key]
            if len(found) > 1 or "nested" in found or (found and known is not None and known not in found):
                fine = False
                break
            if found:
                kinds[key] = found.pop()
            if int in types and not all(_INT64[0] <= v <= _INT64[1] for v in column if type(v) is int):
                fine = False
                break
            if float in types and not all(math.isfinite(v) for v in column if type(v) is float):
                fine = False
                break
        if not fine:  # one of these rows is refused: find the first
            for obj, line in zip(objs, lines, strict=True):
                self._check_row(obj, line)
            raise AssertionError("a row of the chunk is refused")  # pragma: no cover - the rows' check raised
        self._kinds.update(kinds)
        return values

    def chunks(self) -> Iterator[Chunk]:
        first = self._first
        while self._pending is not None:
            objs: list[dict[str, Any]] = []
            lines: list[int] = []
            starts: list[int] = []
            size = 0
            while self._pending is not None and len(lines) < self._rows and size < self._bytes:
                obj, line, start = self._pending
                objs.append(obj)
                lines.append(line)
                starts.append(start)
                got = self._lines.next()
                if got is None:
                    self._pending = None
                else:
                    size += len(got[0])
                    try:
                        self._pending = (self._object(*got), self._lines.number, got[1])
                    except ValidationError:
                        self._columns(objs, lines)  # an earlier row's refusal comes first
                        raise
            chunk = JsonlChunk(self._columns(objs, lines), np.asarray(lines, dtype=np.int64), first,
                               dict(self._kinds))
            chunk.offsets = np.asarray(starts, dtype=np.int64)
            chunk.end = self._lines.offset if self._pending is None else self._pending[2]
            first += chunk.rows
            yield chunk

    def close(self) -> None:
        self._fh.close()


class JsonlWriter(Writer):
    """One JSON object per released row, the written columns in header order (module docstring)."""

    def __init__(self, fh: IO[bytes], spec: WriteSpec) -> None:
        self._fh, self._where = fh, spec.where
        self._names = list(spec.plan.written)

    def write(self, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released]) -> int:
        pa, _ = arrow()
        rows = np.arange(chunk.rows, dtype=np.intp) if keep is None else np.flatnonzero(keep)
        new: dict[str, list[Any]] = {}
        for item in released:
            types = [chunk.column(c).type for c in item.columns]
            new.update(zip(item.columns, (a.to_pylist() for a in item.arrays(types, self._where)), strict=True))
        read = chunk.read if isinstance(chunk, JsonlChunk) else None
        columns: list[list[Any]] = []
        for name in self._names:
            if name in new:
                columns.append(new[name])
            elif read is not None:  # as read: 1.0 stays 1.0
                columns.append([read[name][r] for r in rows.tolist()])
            else:  # another format's chunk (a library caller's choice of output)
                columns.append(chunk.column(name).take(pa.array(rows)).to_pylist())
        text = "".join(json.dumps(dict(zip(self._names, row, strict=True)), ensure_ascii=False, allow_nan=False,
                                  default=str) + "\n" for row in zip(*columns, strict=True))
        self._fh.write(text.encode("utf-8"))
        return len(rows)


@dataclass(frozen=True)
class JsonlLayout(Layout):
    """A JSON-lines piece's reading: the type of each key in the whole file, the record cap asked for."""

    kinds: dict[str, str | None] = field(default_factory=dict)
    max_record: int | None = None


class JsonlParts(RecordParts):
    """The engines' JSON lines: pieces of whole lines cut at rows, parts written one object per row and
    concatenated (no header: the first object's keys are the header)."""

    def cut(self, path: Path, columns: Any, *, piece_bytes: int, chunk_bytes: int, max_record: int | None,
            check: Any = None) -> tuple[list[Span], Layout]:
        cutter = Cutter(piece_bytes)
        with JsonlReader(path, chunk_rows=100_000, chunk_bytes=chunk_bytes, max_record=max_record) as reader:
            for chunk in reader.chunks():
                got = cast(JsonlChunk, chunk)
                cutter.add(got.offsets, got.end, got.lines)
                if check is not None:
                    check.add(chunk)
            kinds = reader.kinds
        return cutter.pieces(), JsonlLayout(str(path), columns, kinds, max_record)

    def read(self, piece: Any, layout: Layout, kernels: Any = None) -> Chunk:
        lay = cast(JsonlLayout, layout)
        span = (piece.start, piece.stop, piece.first, piece.row)
        with JsonlReader(Path(lay.where), chunk_rows=piece.rows, chunk_bytes=piece.stop - piece.start + 1,
                         max_record=lay.max_record, span=span, names=lay.columns.header, kinds=lay.kinds) as reader:
            chunks = list(reader.chunks())
        if len(chunks) != 1 or chunks[0].rows != piece.rows:
            raise changed(lay.where, f"{sum(c.rows for c in chunks):,} rows where {piece.rows:,} were counted")
        return chunks[0]

    def write(self, layout: Layout, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released],
              kernels: Any = None) -> bytes:
        out = io.BytesIO()
        spec = WriteSpec(cast(Any, None), layout.columns, tuple(c for r in released for c in r.columns), layout.where)
        JsonlWriter(out, spec).write(chunk, keep, released)
        return out.getvalue()


_PARTS = JsonlParts()


class JsonlFormat(Format):
    """JSON lines: one JSON object per line (module docstring)."""

    name: ClassVar[str] = "jsonl"
    suffixes: ClassVar[tuple[str, ...]] = (".jsonl", ".ndjson")
    unit: ClassVar[str] = JsonlChunk.unit

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
             max_record: int | None = None, kernels: Any = None) -> Reader:
        return JsonlReader(path, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record)

    def parts(self) -> Parts:
        return _PARTS

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        return JsonlWriter(fh, spec)


FORMAT = JsonlFormat()
