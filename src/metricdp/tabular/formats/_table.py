"""A small table read whole, in any format a release reads: its checked names, its columns and its rows' places.

For the public files a command reads before any release (the POINTS of a space, output
points, a trace table): every format's reader, chunk by chunk as in a release, each column
concatenated. The values are the format's (:meth:`Chunk.column`: a text format gives
strings, its caller parses them); an error names a row by :attr:`Table.places` in the
format's unit (:func:`place`: a CSV's file line, a Parquet file's data row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...errors import ValidationError
from ..csv import DEFAULT_CHUNK_BYTES
from ._base import Format, arrow, checked_names, place

__all__ = ["Table", "read_table"]


@dataclass(frozen=True)
class Table:
    """A file read whole: ``names`` (every column of the file, checked), the ``columns`` read (Arrow arrays,
    by name), each row's place (``places``, in ``format.unit``) and the ``format`` that read it."""

    names: tuple[str, ...]
    columns: dict[str, Any]
    places: NDArray[np.int64]
    format: Format

    @property
    def rows(self) -> int:
        """How many rows the file holds."""
        return len(self.places)

    def place(self, row: int) -> str:
        """How an error names row ``row`` (0-based): ``line 12``, ``row 12``."""
        return place(self.format.unit, int(self.places[row]))


def read_table(path: str | PathLike[str], fmt: Format, columns: Sequence[str] | None = None) -> Table:
    """``path`` read whole by ``fmt``'s reader: every column, or only ``columns`` (each must be one of the file's).

    Raises :class:`ValidationError` naming the file: missing, unreadable or malformed (the
    format's refusals, with their line or row), an empty or duplicated column name (a CSV's
    header line named), a column asked for that the file lacks.
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    pa, _ = arrow()
    with fmt.open(p, chunk_rows=1_000_000, chunk_bytes=DEFAULT_CHUNK_BYTES, max_record=None) as reader:
        names = checked_names(reader, str(p))
        wanted = list(names if columns is None else columns)
        missing = [c for c in wanted if c not in names]
        if missing:
            raise ValidationError(f"{p}: no column {missing[0]!r} (columns: {', '.join(map(repr, names))})")
        reader.project(wanted)
        parts: dict[str, list[Any]] = {c: [] for c in wanted}
        places: list[NDArray[np.int64]] = []
        for chunk in reader.chunks():
            places.append(chunk.places(np.arange(chunk.rows)))
            for c in wanted:
                parts[c].append(chunk.column(c))
    read = {c: (pa.chunked_array(v).combine_chunks() if v else pa.array([], pa.string())) for c, v in parts.items()}
    return Table(names, read, np.concatenate(places) if places else np.zeros(0, dtype=np.int64), fmt)
