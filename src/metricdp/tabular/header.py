"""The column names of a table file (any format a release reads), read without reading its rows.

Commands plan what leaves (:mod:`metricdp.tabular.columns`) before any work starts, so
a bad ``keep``/``drop`` name or a duplicated column is refused before a cluster spins up.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path

from .formats import release_format

__all__ = ["table_header"]


def table_header(path: str | PathLike[str], released: Sequence[str] = ()) -> tuple[str, ...]:
    """Header names of a file a release reads (:meth:`metricdp.tabular.formats.Format.header`: a CSV's first
    record, a schema's names, the first JSON object's keys).

    Empty or duplicated names are refused (a duplicated ``released`` column said so; a CSV's
    header line named).
    """
    p = Path(path)
    return release_format(p).header(p, released=released)
