"""The column names of a table file (any format a release reads), read without reading its rows.

Commands plan what leaves (:mod:`metricdp.tabular.columns`) before any work starts, so
a bad ``keep``/``drop`` name or a duplicated column is refused before a cluster spins up.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path

from .csv import check_names, csv_header
from .formats import release_format

__all__ = ["table_header"]


def table_header(path: str | PathLike[str], released: Sequence[str] = ()) -> tuple[str, ...]:
    """Header names of a ``.csv`` (the first record, validated) or of another format's reader
    (:func:`metricdp.tabular.formats.release_format`: a schema's names, the first JSON object's keys).

    Empty or duplicated names are refused (a duplicated ``released`` column said so).
    """
    p = Path(path)
    fmt = release_format(p)
    if fmt.name == "csv":  # the header record, refused with its line
        return csv_header(p, released=released)
    names = fmt.names(p)
    check_names(names, str(p), released)
    return names
