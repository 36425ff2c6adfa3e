"""Apache Parquet: row groups read as Arrow batches; the release keeps the schema, its metadata and the codec.

Written: the input's written columns with their types and values, the released columns
replaced (a label cast to the column's type, a point as float64), the schema's metadata and
the compression codec of the input's first column chunk; row groups become the release's
chunks (Parquet has no byte-level identity to keep).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from os import PathLike
from pathlib import Path
from typing import IO, Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from ..._optional import import_optional
from ...errors import ValidationError
from ._base import Appender, BatchChunk, BatchWriter, Chunk, Column, Format, Parts, Reader, Writer, WriteSpec, arrow
from ._parts import BatchParts

__all__ = ["FORMAT", "ParquetFormat", "ParquetParts", "input_compression", "open_parquet", "read_parquet"]


def _unreadable(path: Path, ex: BaseException) -> ValidationError:
    return ValidationError(f"{path}: not a readable Parquet file ({ex})")


def open_parquet(path: str | PathLike[str]) -> Any:
    """A ``pyarrow.parquet.ParquetFile`` of ``path`` (streamed by row group), or one ValidationError."""
    p = Path(path)
    pq = import_optional("pyarrow.parquet", extra="parquet")
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    try:  # without pre-buffering: the buffered reader keeps every row group read, ~20 bytes a row
        return pq.ParquetFile(p, pre_buffer=False)
    except Exception as ex:  # pyarrow raises several unrelated types for bad files
        raise _unreadable(p, ex) from None


def read_parquet(path: str | PathLike[str]) -> Any:
    """A small Parquet file read whole as a ``pyarrow.Table``, or one ValidationError."""
    pf = open_parquet(path)
    try:
        return pf.read()
    except Exception as ex:  # a corrupt row group surfaces only when read
        raise _unreadable(Path(path), ex) from None


def input_compression(metadata: Any) -> str:
    """The compression a release writes: the input's (its first column chunk), ``snappy`` for an empty file."""
    if not (metadata.num_row_groups and metadata.num_columns):
        return "snappy"
    codec = str(metadata.row_group(0).column(0).compression).lower()
    return "none" if codec == "uncompressed" else codec


class ParquetReader(Reader):
    """A Parquet file opened for one pass."""

    def __init__(self, path: Path, chunk_rows: int) -> None:
        self.where = str(path)
        self.file = open_parquet(path)
        self.schema = self.file.schema_arrow
        self.names = tuple(self.schema.names)
        self._rows = chunk_rows
        self._columns: list[str] | None = None

    def project(self, columns: Sequence[str]) -> None:
        self._columns = list(columns)

    def chunks(self) -> Iterator[Chunk]:
        pa, _ = arrow()
        first = 0
        batches = self.file.iter_batches(batch_size=self._rows, columns=self._columns)
        while True:
            try:  # a corrupt row group surfaces only when read
                batch = next(batches, None)
            except (OSError, pa.ArrowException) as ex:
                raise _unreadable(Path(self.where), ex) from None
            if batch is None:
                return
            yield BatchChunk(batch, first)
            first += batch.num_rows


class ParquetParts(BatchParts):
    """The engines' Parquet: pieces of whole row groups, parts with the input's compression codec."""

    group: ClassVar[str] = "row group"

    def open(self, path: Path) -> Any:
        return ParquetReader(path, 1_000_000)

    def groups(self, reader: Any) -> list[tuple[int, int]]:
        meta = reader.file.metadata
        return [(meta.row_group(g).num_rows, meta.row_group(g).total_byte_size) for g in range(meta.num_row_groups)]

    def chunks(self, reader: Any, columns: Sequence[str]) -> Iterator[Chunk]:
        pa, _ = arrow()
        seen = 0
        try:
            for batch in reader.file.iter_batches(columns=list(columns), batch_size=1_000_000):
                yield BatchChunk(batch, seen)
                seen += batch.num_rows
        except (OSError, pa.ArrowException) as ex:
            raise ValidationError(f"{reader.where}: not a readable Parquet file ({ex})") from None

    def batch(self, reader: Any, start: int, stop: int) -> Any:
        """Row groups ``start`` .. ``stop`` as one record batch, read column by column: each column's
        chunks are combined as it is read, so the piece is held once plus one column (a whole table
        combined at once holds every column twice)."""
        pa, _ = arrow()
        groups = list(range(start, stop))
        columns = [reader.file.read_row_groups(groups, columns=[name]).column(0).combine_chunks()
                   for name in reader.names]
        return pa.RecordBatch.from_arrays(columns, schema=reader.schema)

    def options(self, reader: Any) -> Any:
        return input_compression(reader.file.metadata)

    def sink(self, fh: Any, schema: Any, options: Any) -> Any:
        pq = import_optional("pyarrow.parquet", extra="parquet")
        return pq.ParquetWriter(fh, schema, compression=options)

    def tables(self, path: Path) -> Iterator[Any]:
        pf = open_parquet(path)
        for g in range(pf.metadata.num_row_groups):
            yield pf.read_row_group(g)


_PARTS = ParquetParts()


class ParquetAppender(Appender):
    """The input's batches with one string column more (the schema gains it); rows left out are filtered."""

    def __init__(self, fh: IO[bytes], source: Reader, column: str, texts: Sequence[str]) -> None:
        if not isinstance(source, ParquetReader):
            raise TypeError("a Parquet output is appended to from a Parquet input")  # pragma: no cover
        pa, _ = arrow()
        pq = import_optional("pyarrow.parquet", extra="parquet")
        self._schema = source.schema.append(pa.field(column, pa.string()))
        self._texts = pa.array(list(texts), type=pa.string())
        self._file = pq.ParquetWriter(fh, self._schema)

    def write(self, chunk: Chunk, choice: NDArray[np.intp]) -> None:
        pa, _ = arrow()
        batch = cast(BatchChunk, chunk).batch
        keep = choice >= 0
        if not keep.all():
            batch = batch.filter(pa.array(keep))
        new = self._texts.take(pa.array(choice[keep]))
        self._file.write_batch(pa.RecordBatch.from_arrays([*batch.columns, new], schema=self._schema))

    def close(self) -> None:
        self._file.close()


class ParquetFormat(Format):
    """Apache Parquet (pyarrow)."""

    name: ClassVar[str] = "parquet"
    suffixes: ClassVar[tuple[str, ...]] = (".parquet", ".pq")

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int = 0, max_record: int | None = None,
             kernels: Any = None) -> Reader:
        return ParquetReader(path, chunk_rows)

    def parts(self) -> Parts:
        return _PARTS

    def appender(self, fh: IO[bytes], source: Reader, column: str, texts: Sequence[str]) -> Appender:
        return ParquetAppender(fh, source, column, texts)

    def write_table(self, fh: IO[bytes], names: Sequence[str], columns: Sequence[Column]) -> None:
        """One table: texts as strings, numbers as float64 (pyarrow's default compression)."""
        pa, _ = arrow()
        pq = import_optional("pyarrow.parquet", extra="parquet")
        arrays = [pa.array(c) if isinstance(c, np.ndarray) else pa.array(list(c), pa.string()) for c in columns]
        pq.write_table(pa.Table.from_arrays(arrays, names=list(names)), fh)

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        pq = import_optional("pyarrow.parquet", extra="parquet")
        source = spec.source
        schema = getattr(source, "schema", None)
        compression = input_compression(source.file.metadata) if isinstance(source, ParquetReader) else "snappy"
        if schema is None:
            raise TypeError("a Parquet output needs a typed input")  # pragma: no cover - the pipeline pairs them
        return BatchWriter(spec, schema, lambda s: pq.ParquetWriter(fh, s, compression=compression))


FORMAT = ParquetFormat()
