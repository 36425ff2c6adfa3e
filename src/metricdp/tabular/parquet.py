"""Parquet files: opening one (one place that turns pyarrow's many exception types into one error) and the
compression a release of one writes; the reader and writer of a release are :mod:`metricdp.tabular.formats.parquet`."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

from .._optional import import_optional
from ..errors import ValidationError

__all__ = ["input_compression", "open_parquet", "read_parquet"]


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
