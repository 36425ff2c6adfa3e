"""The column names of a table file (CSV or Parquet), read without reading its rows.

Commands plan what leaves (:mod:`metricdp.tabular.columns`) before any work starts, so
a bad ``keep``/``drop`` name or a duplicated column is refused before a cluster spins up.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path

from .csv import check_names, csv_header
from .formats import TABLE_FORMATS, format_of
from .parquet import open_parquet

__all__ = ["table_header"]


def table_header(path: str | PathLike[str], released: Sequence[str] = ()) -> tuple[str, ...]:
    """Header names of a ``.csv`` (the first record, validated) or the schema names of a Parquet file.

    Empty or duplicated names are refused (a duplicated ``released`` column said so).
    """
    p = Path(path)
    if format_of(p, TABLE_FORMATS) == "csv":
        return csv_header(p, released=released)
    names = tuple(open_parquet(p).schema_arrow.names)
    check_names(names, str(p), released)
    return names
