"""Bin a CSV or Parquet file of (lat, lon) rows to the cells of a :class:`~metricdp.location.grid.CellGrid`.

The file layer is the one ``privatize`` streams with (:mod:`metricdp.tabular.formats`):
chunks of complete, validated rows, memory bounded by a chunk, the output written by the
format's :class:`~metricdp.tabular.formats.Appender` to an unnamed file published whole at
the end (:func:`metricdp.io.atomic_write`), so an error leaves nothing behind.

The output is the input with one column more, the cell label (``cell`` by default),
appended at the end of every record: in a CSV every input byte is kept as it was
(quoting, ``\\r\\n``, a byte-order mark), in Parquet the schema gains a string column.
Rows outside the grid follow ``unknown`` (:mod:`metricdp.location.grid`): ``refuse`` scans
the whole file so that the error gives the count and the first places (a text format's
lines, another's data rows), ``drop``
leaves them out (their record and its line break), ``nearest`` gives them the nearest cell.

The labelled file holds the rows' TRUE coordinates (nothing in it is released): it is
the input of ``privatize --column cell``, which must be told to ``--drop`` them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress, report
from ..errors import ValidationError
from ..io import atomic_write, parse_decimal
from ..tabular.csv import DEFAULT_CHUNK_BYTES, check_names
from ..tabular.formats import Appender, Chunk, Format, arrow, place, table_format
from .grid import CellGrid, Unknown, assign_cells

__all__ = ["BinStats", "bin_file", "read_label_column"]

_SHOW = 5  # line numbers shown in an error


@dataclass(frozen=True)
class BinStats:
    """What :func:`bin_file` did: rows read, written, dropped, moved to the nearest cell; per-cell counts."""

    rows: int
    written: int
    dropped: int
    nearest: int
    counts: NDArray[np.int64]
    seconds: float
    format: str


class _Counted(Appender):
    """No output (``out=None``): the rows are counted, nothing is written."""

    def write(self, chunk: Chunk, choice: NDArray[np.intp]) -> None:
        return None


class _Outside:
    """Rows outside the grid (for ``refuse``): the count and the first line numbers."""

    def __init__(self) -> None:
        self.rows = 0
        self.lines: list[int] = []

    def add(self, lines: NDArray[np.int64]) -> None:
        self.rows += len(lines)
        self.lines.extend(int(x) for x in lines[: max(0, _SHOW - len(self.lines))])


def bin_file(
    grid: CellGrid,
    input_path: str | PathLike[str],
    lat: str,
    lon: str,
    out: str | PathLike[str] | None,
    *,
    unknown: Unknown = "refuse",
    cell_column: str = "cell",
    chunk_rows: int = 1_000_000,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    inputs: Sequence[str | PathLike[str]] = (),
    progress: Progress | None = None,
) -> BinStats:
    """Write ``out``: ``input_path`` with the cell label of each row's (``lat``, ``lon``) appended.

    ``out=None`` writes nothing (the counts only, e.g. for a prior).

    Raises
    ------
    ValidationError
        a missing column, ``cell_column`` already a column, a coordinate that is not a
        number in range (file, line, column), rows outside the grid under ``refuse``
        (count and first lines), a malformed file; nothing is written.
    """
    src = Path(input_path)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    if unknown not in ("refuse", "drop", "nearest"):
        raise ValidationError(f"unknown must be refuse, drop or nearest, got {unknown!r}")
    if not cell_column or cell_column != cell_column.strip():
        raise ValidationError(f"the cell column's name must be non-empty without edge spaces, got {cell_column!r}")
    fmt = table_format(src)
    if out is not None and table_format(Path(out)) is not fmt:
        raise ValidationError(f"{out}: the labelled output has the input's format ({fmt.name}); name it .{fmt.name}")
    t0 = time.perf_counter()
    counts = np.zeros(grid.n, dtype=np.int64)
    outside = _Outside()
    tally = {"rows": 0, "written": 0, "dropped": 0, "nearest": 0}

    def cells_of(latlon: NDArray[np.float64], lines: NDArray[np.int64]) -> NDArray[np.int64]:
        """Cell per row (-1: drop), the tallies and counts updated."""
        located = grid.locate(latlon)
        miss = located < 0
        tally["rows"] += len(located)
        if unknown == "refuse":
            if miss.any():
                outside.add(lines[miss])
            idx = located
        elif unknown == "drop":
            tally["dropped"] += int(miss.sum())
            idx = located
        else:
            tally["nearest"] += int(miss.sum())
            idx = assign_cells(grid, latlon, "nearest") if miss.any() else located
        kept = idx[idx >= 0]
        counts[:] += np.bincount(kept, minlength=grid.n)
        tally["written"] += len(kept)
        dt = time.perf_counter() - t0
        rate = tally["rows"] / dt if dt > 0 else 0.0
        report(progress, tally["rows"], None, f"{tally['rows']:,} rows, {rate:,.0f} rows/s")
        return idx

    sink: Any = contextlib.nullcontext() if out is None else atomic_write(out, "wb", inputs=[src, *inputs])
    with sink as fh, fmt.open(src, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=None) as reader:
        _columns(reader.names, lat, lon, cell_column, str(src))
        appender = _Counted() if fh is None else fmt.appender(fh, reader, cell_column, grid.labels)
        try:
            for chunk in reader.chunks():
                if chunk.rows == 0:  # blank lines only: written as they are
                    appender.write(chunk, np.zeros(0, dtype=np.intp))
                    continue
                places = chunk.places(np.arange(chunk.rows))
                latlon = np.column_stack([_coordinates(chunk, c, places, fmt, str(src), (lat, lon))
                                          for c in (lat, lon)])
                _check_range(latlon, places, str(src), (lat, lon), fmt.unit)
                idx = cells_of(latlon, places)
                if not outside.rows:  # else scanned for the error's counts; nothing more is written
                    appender.write(chunk, idx)
        finally:
            appender.close()
        if outside.rows:
            first = ", ".join(str(x) for x in outside.lines)
            raise ValidationError(
                f"{src}: {outside.rows:,} row(s) outside the grid of {grid.region.name} (first at {fmt.unit}(s) "
                f"{first}); nothing written: drop them, move them to the nearest cell, or use a larger region"
            )
    return BinStats(tally["rows"], tally["written"], tally["dropped"], tally["nearest"], counts,
                    time.perf_counter() - t0, fmt.name)


def _columns(names: Sequence[str], lat: str, lon: str, cell_column: str, where: str) -> tuple[int, int]:
    check_names(names, where)
    for c in (lat, lon):
        if c not in names:
            raise ValidationError(f"{where}: no column {c!r} (columns: {', '.join(repr(n) for n in names)})")
    if lat == lon:
        raise ValidationError(f"{where}: the latitude and longitude columns are the same column {lat!r}")
    if cell_column in names:
        raise ValidationError(f"{where}: a column {cell_column!r} already exists; name the cell column otherwise")
    return list(names).index(lat), list(names).index(lon)


def _check_range(
    latlon: NDArray[np.float64], lines: NDArray[np.int64], where: str, names: tuple[str, str], unit: str
) -> None:
    bad = ~np.isfinite(latlon).all(axis=1) | (np.abs(latlon[:, 0]) > 90) | (np.abs(latlon[:, 1]) > 180)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        a, b = float(latlon[i, 0]), float(latlon[i, 1])
        raise ValidationError(
            f"{where}: {place(unit, int(lines[i]))}: ({names[0]}, {names[1]}) = ({a!r}, {b!r}) "
            "is not a latitude in [-90, 90] and a longitude in [-180, 180]"
        )


# ---------------------------------------------------------------------------- coordinates
def _coordinates(chunk: Chunk, column: str, places: NDArray[np.int64], fmt: Format, where: str,
                 latlon: tuple[str, str]) -> NDArray[np.float64]:
    """The column's values as floats: a text format's by :func:`_parsed`, a typed format's numbers cast (a
    column of another type is refused by its type, before any value of either coordinate is read)."""
    if not fmt.typed:
        return _parsed(chunk, column, places, where, fmt.unit)
    pa, _ = arrow()
    for name in latlon:  # both columns' types first, then this one's values
        kind = chunk.column(name).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
            raise ValidationError(f"{where}: column {name!r} has type {kind}; coordinates must be numbers")
    col = chunk.column(column)
    if col.null_count:
        first = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
        raise ValidationError(f"{where}: {place(fmt.unit, int(places[first]))}: column {column!r} is null")
    # safe=False: an integer past 2**53 rounds (it is far outside [-180, 180] and refused below)
    return np.asarray(col.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=np.float64)


def _parsed(chunk: Chunk, column: str, places: NDArray[np.int64], where: str, unit: str) -> NDArray[np.float64]:
    """A text format's fields as floats: Arrow's parser for plain fields, :func:`parse_decimal` for quoted ones;
    the first field that is not a plain decimal number is named (line, column, value)."""
    pa, pc = arrow()
    values = chunk.column(column)
    quoted = chunk.quoted(column)
    if quoted is None:
        quoted = np.zeros(len(values), dtype=bool)
    plain = ~quoted
    out = np.full(len(values), np.nan)
    try:
        some = values.filter(pa.array(plain)) if quoted.any() else values  # quoted ones are read below
        if pc.all(pc.match_substring_regex(some, r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")).as_py() is False:
            raise ValueError
        out[plain] = np.asarray(pc.cast(some, pa.float64(), safe=True).to_numpy(zero_copy_only=False))
    except (ValueError, pa.ArrowInvalid):
        texts = values.to_pylist()
        for i in np.flatnonzero(plain):  # the error path only: find the culprit
            try:
                out[i] = parse_decimal(texts[i]) if texts[i] and texts[i].strip() == texts[i] else float("x")
            except ValueError:
                raise ValidationError(f"{where}: {place(unit, int(places[i]))}: column {column!r} is not a number: "
                                      f"{texts[i]!r}") from None
    if quoted.any():
        at = np.flatnonzero(quoted)
        for i, text in zip(at, values.take(pa.array(at)).to_pylist(), strict=True):
            try:
                out[i] = parse_decimal(text)
            except ValueError:
                raise ValidationError(
                    f"{where}: {place(unit, int(places[i]))}: column {column!r} is not a number: {text!r}"
                ) from None
    return out


# ------------------------------------------------------------------------ reading labels
def read_label_column(path: str | PathLike[str], column: str, labels: Sequence[str]) -> NDArray[np.intp]:
    """The index into ``labels`` of every row's ``column`` value (CSV or Parquet, streamed by chunk).

    A value that is not a label is an error naming the file, the line (CSV) or row
    (Parquet) and the value.
    """
    pa, pc = arrow()
    src = Path(path)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    where = str(src)
    value_set = pa.array(list(labels), type=pa.string())
    parts: list[NDArray[np.intp]] = []

    def check(idx: NDArray[np.intp], at: NDArray[np.int64], values: Any, unit: str) -> None:
        bad = np.flatnonzero(idx < 0)
        if len(bad):
            raise ValidationError(f"{where}: {place(unit, int(at[bad[0]]))}: column {column!r} has {values(bad[0])!r}, "
                                  "not a label of the mechanism's points")

    fmt = table_format(src)
    with fmt.open(src, chunk_rows=1_000_000, chunk_bytes=DEFAULT_CHUNK_BYTES, max_record=None) as reader:
        if column not in reader.names:
            raise ValidationError(f"{where}: no column {column!r}")
        reader.project([column])
        for chunk in reader.chunks():
            col = chunk.column(column)
            text = col if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) else \
                pc.cast(col, pa.string())
            idx = np.asarray(pc.fill_null(pc.index_in(text, value_set=value_set.cast(text.type)), -1)
                             .to_numpy(zero_copy_only=False), dtype=np.intp)
            check(idx, chunk.places(np.arange(chunk.rows)), lambda i, v=text: v[int(i)].as_py(), fmt.unit)
            parts.append(idx)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.intp)
