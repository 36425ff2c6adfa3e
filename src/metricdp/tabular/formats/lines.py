"""Plain text (``.txt``): one document per line, read in chunks of lines, written line for line.

**The table a file holds.** One column, :data:`COLUMN`, whose value on row ``i`` is line
``i`` of the file without its ending; no header names it (the format does), and every
line is a row, a blank one included (an empty document). A line ends at ``\\n``; its
ending is every ``\\r`` and ``\\n`` at its end (``\\r\\n``, ``\\n``, or ``\\r`` on a last
line without ``\\n``), kept apart from the document; a ``\\r`` inside a line is text. A
byte-order mark before the first line is not text: it is skipped, and not written.

**Refused**, each as one :class:`~metricdp.errors.ValidationError` naming the file (nothing
is released or written): bytes that are not UTF-8 (the byte offset and the start of their
line), and a line longer than the record cap (:func:`metricdp.tabular.csv.max_record_bytes`:
a hostile line never costs more memory than the cap) with its number and offset.

**Written**: each kept row's document (the released one where the column is released)
followed by its line's ending, as read, in UTF-8: a line the release does not change is
written byte for byte as it was read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from ...errors import ValidationError
from ..csv import DEFAULT_CHUNK_BYTES, MAX_RECORD_ENV, max_record_bytes
from ._base import Chunk, Format, Reader, Released, Writer, WriteSpec, arrow

__all__ = ["COLUMN", "FORMAT", "LinesChunk", "LinesFormat", "LinesReader", "LinesWriter", "documents"]

#: The one column of a plain-text file: the line's document.
COLUMN = "text"


class LinesChunk(Chunk):
    """Lines of a plain-text file: the documents (``bodies``) and their line endings (``endings``), in order."""

    unit: ClassVar[str] = "line"

    def __init__(self, bodies: list[str], endings: list[str], first: int, where: str) -> None:
        self.bodies, self.endings, self.first, self.where = bodies, endings, first, where
        self.rows = len(bodies)

    def column(self, name: str) -> Any:
        if name != COLUMN:
            raise ValidationError(f"{self.where}: no column {name!r}; plain text has one, {COLUMN!r}")
        pa, _ = arrow()
        return pa.array(self.bodies, type=pa.string())


class LinesReader(Reader):
    """A plain-text file opened for one pass: chunks of at most ``chunk_rows`` lines and about ``chunk_bytes``."""

    def __init__(self, path: Path, *, chunk_rows: int, chunk_bytes: int, max_record: int | None) -> None:
        if not path.is_file():
            raise ValidationError(f"{path}: no such file")
        self.where, self.names = str(path), (COLUMN,)
        self._cap = max_record_bytes(max_record)
        self._rows, self._bytes = chunk_rows, chunk_bytes
        self._fh: IO[bytes] = path.open("rb")

    def _lines(self) -> Iterator[str]:
        """The file's lines with their endings, decoded (module docstring: the refusals)."""
        cap, offset = self._cap, 0
        for number in itertools.count(1):
            raw = self._fh.readline(cap + 1)
            if not raw:
                return
            if len(raw) > cap:
                raise ValidationError(
                    f"{self.where}: line {number} is longer than the cap of {cap:,} bytes (byte offset {offset:,}; "
                    f"set {MAX_RECORD_ENV} to raise it)")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as ex:
                raise ValidationError(f"{self.where}: invalid UTF-8 at byte offset {offset + ex.start} (line "
                                      f"starting at byte {offset})") from None
            if offset == 0 and line.startswith("\ufeff"):
                line = line[1:]
            offset += len(raw)
            yield line

    def chunks(self) -> Iterator[Chunk]:
        first = 0
        lines = self._lines()
        while True:
            bodies: list[str] = []
            endings: list[str] = []
            size = 0
            for line in lines:
                body = line.rstrip("\r\n")
                bodies.append(body)
                endings.append(line[len(body):])
                size += len(line)
                if len(bodies) >= self._rows or size >= self._bytes:
                    break
            if not bodies:
                return
            yield LinesChunk(bodies, endings, first, self.where)
            first += len(bodies)

    def close(self) -> None:
        self._fh.close()


class LinesWriter(Writer):
    """Each kept row's document, released or as read, then its line's ending (module docstring)."""

    def __init__(self, fh: IO[bytes], spec: WriteSpec) -> None:
        self._fh, self._where = fh, spec.where

    def write(self, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released]) -> int:
        pa, _ = arrow()
        lines = cast(LinesChunk, chunk)
        rows = range(lines.rows) if keep is None else np.flatnonzero(keep).tolist()
        texts: list[Any] = [lines.bodies[r] for r in rows]
        for item in released:
            arrays = item.arrays([pa.string()] * len(item.columns), self._where)
            for name, values in zip(item.columns, arrays, strict=True):
                if name == COLUMN:
                    texts = values.to_pylist()
        if None in texts:
            raise ValidationError(f"{self._where}: a released document is missing (plain text has no missing "
                                  "value); nothing written")
        self._fh.write("".join(t + lines.endings[r] for t, r in zip(texts, rows, strict=True)).encode("utf-8"))
        return len(texts)


class LinesFormat(Format):
    """Plain UTF-8 text, one document per line (module docstring)."""

    name: ClassVar[str] = "text"
    suffixes: ClassVar[tuple[str, ...]] = (".txt",)
    unit: ClassVar[str] = LinesChunk.unit
    typed: ClassVar[bool] = False
    named: ClassVar[bool] = False

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
             max_record: int | None = None, kernels: Any = None) -> Reader:
        return LinesReader(path, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record)

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        return LinesWriter(fh, spec)


FORMAT = LinesFormat()


def documents(path: str | Path, *, max_record: int | None = None) -> Iterator[str]:
    """The documents of a plain-text file, one per line, in order (a corpus read whole by its caller)."""
    with FORMAT.open(Path(path), chunk_rows=10_000, max_record=max_record) as reader:
        for chunk in reader.chunks():
            yield from cast(LinesChunk, chunk).bodies
