"""Apache Parquet: row groups read as Arrow batches; the release keeps the schema, its metadata and the codec.

Written: the input's written columns with their types and values, the released columns
replaced (a label cast to the column's type, a point as float64), the schema's metadata and
the compression codec of the input's first column chunk; row groups become the release's
chunks (Parquet has no byte-level identity to keep).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, ClassVar

from ..._optional import import_optional
from ..parquet import input_compression, open_parquet
from ._base import BatchChunk, BatchWriter, Chunk, Format, Reader, Writer, WriteSpec

__all__ = ["FORMAT", "ParquetFormat"]


class ParquetReader(Reader):
    """A Parquet file opened for one pass."""

    def __init__(self, path: Path, chunk_rows: int) -> None:
        self.file = open_parquet(path)
        self.schema = self.file.schema_arrow
        self.names = tuple(self.schema.names)
        self._rows = chunk_rows

    def chunks(self) -> Iterator[Chunk]:
        first = 0
        for batch in self.file.iter_batches(batch_size=self._rows):
            yield BatchChunk(batch, first)
            first += batch.num_rows


class ParquetFormat(Format):
    """Apache Parquet (pyarrow)."""

    name: ClassVar[str] = "parquet"
    suffixes: ClassVar[tuple[str, ...]] = (".parquet", ".pq")

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int = 0, max_record: int | None = None,
             kernels: Any = None) -> Reader:
        return ParquetReader(path, chunk_rows)

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        pq = import_optional("pyarrow.parquet", extra="parquet")
        source = spec.source
        schema = getattr(source, "schema", None)
        compression = input_compression(source.file.metadata) if isinstance(source, ParquetReader) else "snappy"
        if schema is None:
            raise TypeError("a Parquet output needs a typed input")  # pragma: no cover - the pipeline pairs them
        return BatchWriter(spec, schema, lambda s: pq.ParquetWriter(fh, s, compression=compression))


FORMAT = ParquetFormat()
