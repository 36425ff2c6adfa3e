"""Parquet files: opening one (one place that turns pyarrow's many exception types into one error) and
writing a release of one (:class:`ReleaseWriter`)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError

__all__ = ["ReleaseWriter", "input_compression", "open_parquet", "read_parquet"]


def _unreadable(path: Path, ex: BaseException) -> ValidationError:
    return ValidationError(f"{path}: not a readable Parquet file ({ex})")


def open_parquet(path: str | PathLike[str]) -> Any:
    """A ``pyarrow.parquet.ParquetFile`` of ``path`` (streamed by row group), or one ValidationError."""
    p = Path(path)
    pq = import_optional("pyarrow.parquet", extra="parquet")
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    try:
        return pq.ParquetFile(p)
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


class ReleaseWriter:
    """The output of a Parquet release: the input's written columns with their schema and metadata, the
    released column's values taken from ``outputs`` and cast to its type, the input's compression.

    ``pf`` the input (:func:`open_parquet`), ``written`` the indices of its columns that are written (in
    order), ``j`` the released column's index, ``outputs`` the texts of the mechanism's outputs; ``refused``
    says what cannot be written as the column's type, for the error. Used as a context manager: the file's
    footer is written on leaving it, also after an error (the caller's atomic write discards the file then).
    """

    def __init__(self, pf: Any, written: list[int], j: int, outputs: list[str], fh: IO[bytes], where: str,
                 refused: str) -> None:
        pa = import_optional("pyarrow", extra="parquet")
        pq = import_optional("pyarrow.parquet", extra="parquet")
        schema = pf.schema_arrow
        field = schema.field(j)
        try:
            self._values = pa.array(outputs, type=pa.string()).cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as ex:
            raise ValidationError(
                f"{where}: column {field.name!r} has type {field.type}; {refused} cannot be written as it ({ex})"
            ) from None
        self._pa, self._j, self._written = pa, j, written
        self._schema = pa.schema([schema.field(k) for k in written], metadata=schema.metadata)
        self._writer = pq.ParquetWriter(fh, self._schema, compression=input_compression(pf.metadata))

    def __enter__(self) -> ReleaseWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._writer.close()

    def write(self, batch: Any, keep: NDArray[np.bool_] | None, released: NDArray[np.intp]) -> int:
        """Write ``batch``'s rows where ``keep`` (all if None), the column replaced by ``outputs[released]``."""
        pa = self._pa
        if keep is not None:  # a withheld row is left out of the output
            batch = batch.filter(pa.array(keep))
        new = self._values.take(pa.array(released))
        columns = [new if k == self._j else batch.column(k) for k in self._written]
        self._writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=self._schema))
        return len(released)
