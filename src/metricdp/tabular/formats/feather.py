"""Arrow IPC files (Feather v2): record batches read as chunks; the release keeps the schema and its metadata.

Read: the file's record batches in order, each cut into chunks of at most ``chunk_rows``
rows (memory-mapped: a chunk costs what its columns cost). Written: the input's written
columns with their types and values, the released columns replaced (a label cast to the
column's type, a point as float64), the schema's metadata kept, one record batch per
chunk, uncompressed (every Arrow implementation reads it; the input's codec is not
recorded in the file's schema).

A file that is not an Arrow IPC file -- a truncated one (its footer gone), a Feather v1
file, an Arrow *stream* -- is one :class:`~metricdp.errors.ValidationError` naming the
file, raised when it is opened: nothing is read, written or spent. A batch that cannot
be read later (a damaged body) is one error naming the file and the batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar, cast

from ...errors import ValidationError
from ._base import BatchChunk, BatchWriter, Chunk, Format, Parts, Reader, Writer, WriteSpec, arrow
from ._parts import BatchParts, one_batch

__all__ = ["FORMAT", "FeatherFormat", "FeatherParts", "FeatherReader"]


def _errors(pa: Any) -> tuple[type[BaseException], ...]:
    """What pyarrow raises for a file that is not, or no longer, an Arrow IPC file."""
    return pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError, OSError, ValueError


class FeatherReader(Reader):
    """An Arrow IPC file opened for one pass (memory-mapped)."""

    def __init__(self, path: Path, chunk_rows: int) -> None:
        pa, _ = arrow()
        self.where = str(path)
        if not path.is_file():
            raise ValidationError(f"{path}: no such file")
        try:
            self._source = pa.memory_map(str(path), "r")
        except _errors(pa) as ex:
            raise ValidationError(f"{path}: cannot be read ({ex})") from None
        try:
            self.file = pa.ipc.open_file(self._source)
        except _errors(pa) as ex:
            self._source.close()
            raise ValidationError(f"{path}: not a readable Arrow IPC (Feather v2) file ({_first_line(ex)})") from None
        self.schema = self.file.schema
        self.names = tuple(self.schema.names)
        self._rows = chunk_rows

    def batch(self, k: int) -> Any:
        """Record batch ``k`` (0-based), validated: a damaged body is refused here, not met as garbage values."""
        pa, _ = arrow()
        try:
            batch = self.file.get_batch(k)
            batch.validate(full=True)
        except _errors(pa) as ex:
            raise ValidationError(f"{self.where}: record batch {k + 1} of the Arrow file cannot be read "
                                  f"({_first_line(ex)})") from None
        return batch

    def chunks(self) -> Iterator[Chunk]:
        first = 0
        for k in range(self.file.num_record_batches):
            batch = self.batch(k)
            for start in range(0, batch.num_rows, self._rows):
                piece = batch.slice(start, self._rows)
                yield BatchChunk(piece, first)
                first += piece.num_rows

    def close(self) -> None:
        self._source.close()


def _first_line(ex: BaseException) -> str:
    text = str(ex).strip()
    return text.splitlines()[0] if text else type(ex).__name__


class FeatherParts(BatchParts):
    """The engines' Arrow IPC: pieces of whole record batches, parts and output uncompressed."""

    group: ClassVar[str] = "record batch"

    def open(self, path: Path) -> Any:
        return FeatherReader(path, 1_000_000)

    def groups(self, reader: Any) -> list[tuple[int, int]]:
        file = reader.file
        return [(b.num_rows, b.nbytes) for b in (file.get_batch(k) for k in range(file.num_record_batches))]

    def chunks(self, reader: Any, columns: Sequence[str]) -> Iterator[Chunk]:
        return cast(Iterator[Chunk], reader.chunks())

    def batch(self, reader: Any, start: int, stop: int) -> Any:
        pa, _ = arrow()
        return one_batch(pa.Table.from_batches([reader.batch(k) for k in range(start, stop)], schema=reader.schema))

    def sink(self, fh: Any, schema: Any, options: Any) -> Any:
        pa, _ = arrow()
        return pa.ipc.new_file(fh, schema)

    def tables(self, path: Path) -> Iterator[Any]:
        pa, _ = arrow()
        with FeatherReader(path, 1) as reader:
            for k in range(reader.file.num_record_batches):
                yield pa.Table.from_batches([reader.batch(k)])


_PARTS = FeatherParts()


class FeatherFormat(Format):
    """Arrow IPC file format, also known as Feather v2 (pyarrow)."""

    name: ClassVar[str] = "feather"
    suffixes: ClassVar[tuple[str, ...]] = (".feather", ".arrow")

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int = 0, max_record: int | None = None,
             kernels: Any = None) -> Reader:
        return FeatherReader(path, chunk_rows)

    def parts(self) -> Parts:
        return _PARTS

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        pa, _ = arrow()
        schema = getattr(spec.source, "schema", None)
        if schema is None:
            raise ValidationError(f"{spec.where}: an Arrow (Feather) output is written from a typed input "
                                  "(Arrow, Feather or Parquet)")
        return BatchWriter(spec, schema, lambda s: pa.ipc.new_file(fh, s))


FORMAT = FeatherFormat()
