"""Apache Parquet: row groups read as Arrow batches; the release keeps the schema, its metadata and the codec.

Written: the input's written columns with their types and values, the released columns
replaced (a label cast to the column's type, a point as float64), the schema's metadata and
the compression codec of the input's first column chunk; row groups become the release's
chunks (Parquet has no byte-level identity to keep).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

from ..._optional import import_optional
from ...errors import ValidationError
from ..parquet import input_compression, open_parquet
from ._base import BatchChunk, BatchWriter, Chunk, Format, Parts, Reader, Writer, WriteSpec, arrow
from ._parts import BatchParts, one_batch

__all__ = ["FORMAT", "ParquetFormat", "ParquetParts"]


class ParquetReader(Reader):
    """A Parquet file opened for one pass."""

    def __init__(self, path: Path, chunk_rows: int) -> None:
        self.where = str(path)
        self.file = open_parquet(path)
        self.schema = self.file.schema_arrow
        self.names = tuple(self.schema.names)
        self._rows = chunk_rows

    def chunks(self) -> Iterator[Chunk]:
        first = 0
        for batch in self.file.iter_batches(batch_size=self._rows):
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
        return one_batch(reader.file.read_row_groups(list(range(start, stop))))

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


class ParquetFormat(Format):
    """Apache Parquet (pyarrow)."""

    name: ClassVar[str] = "parquet"
    suffixes: ClassVar[tuple[str, ...]] = (".parquet", ".pq")

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int = 0, max_record: int | None = None,
             kernels: Any = None) -> Reader:
        return ParquetReader(path, chunk_rows)

    def parts(self) -> Parts:
        return _PARTS

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        pq = import_optional("pyarrow.parquet", extra="parquet")
        source = spec.source
        schema = getattr(source, "schema", None)
        compression = input_compression(source.file.metadata) if isinstance(source, ParquetReader) else "snappy"
        if schema is None:
            raise TypeError("a Parquet output needs a typed input")  # pragma: no cover - the pipeline pairs them
        return BatchWriter(spec, schema, lambda s: pq.ParquetWriter(fh, s, compression=compression))


FORMAT = ParquetFormat()
