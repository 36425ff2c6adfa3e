"""Bin a CSV or Parquet file of (lat, lon) rows to the cells of a :class:`~metricdp.location.grid.CellGrid`.

The file layer is the one ``privatize`` streams with (:mod:`metricdp.tabular.csv`,
:mod:`metricdp.tabular.csvsplit`): chunks of complete, validated records, memory
bounded by a chunk, the output written to an unnamed file published whole at the end
(:func:`metricdp.io.atomic_write`), so an error leaves nothing behind.

The output is the input with one column more, the cell label (``cell`` by default),
appended at the end of every record: in a CSV every input byte is kept as it was
(quoting, ``\\r\\n``, a byte-order mark), in Parquet the schema gains a string column.
Rows outside the grid follow ``unknown`` (:mod:`metricdp.location.grid`): ``refuse`` scans
the whole file so that the error gives the count and the first line numbers, ``drop``
leaves them out (their record and its line break), ``nearest`` gives them the nearest cell.

The labelled file holds the rows' TRUE coordinates (nothing in it is released): it is
the input of ``privatize --column cell``, which must be told to ``--drop`` them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._progress import Progress, report
from ..errors import ValidationError
from ..io import atomic_write, parse_decimal
from ..tabular import csvsplit
from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader, check_names
from ..tabular.formats import TABLE_FORMATS, format_of
from ..tabular.parquet import open_parquet
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


class _Sink:
    """A file that keeps nothing (``out=None``)."""

    def write(self, data: Any) -> int:
        return len(data)


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
    fmt = format_of(src, TABLE_FORMATS)
    if out is not None and format_of(Path(out), TABLE_FORMATS) != fmt:
        raise ValidationError(f"{out}: the labelled output has the input's format ({fmt}); name it .{fmt}")
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

    sink: Any = contextlib.nullcontext(_Sink()) if out is None else atomic_write(out, "wb", inputs=[src, *inputs])
    with sink as fh:
        if fmt == "csv":
            _bin_csv(grid, src, lat, lon, fh, cells_of, outside, cell_column, chunk_rows, chunk_bytes)
        else:
            _bin_parquet(grid, src, lat, lon, fh, cells_of, outside, cell_column, chunk_rows)
        if outside.rows:
            first = ", ".join(str(x) for x in outside.lines)
            unit = "line(s)" if fmt == "csv" else "row(s)"
            raise ValidationError(
                f"{src}: {outside.rows:,} row(s) outside the grid of {grid.region.name} (first at {unit} {first}); "
                "nothing written: drop them, move them to the nearest cell, or use a larger region"
            )
    return BinStats(tally["rows"], tally["written"], tally["dropped"], tally["nearest"], counts,
                    time.perf_counter() - t0, fmt)


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
            f"{where}: {unit} {int(lines[i])}: ({names[0]}, {names[1]}) = ({a!r}, {b!r}) "
            "is not a latitude in [-90, 90] and a longitude in [-180, 180]"
        )


# ------------------------------------------------------------------------------------ CSV
def _numbers(buf: NDArray[np.uint8], fs: NDArray[np.int64], fe: NDArray[np.int64], lines: NDArray[np.int64],
             where: str, column: str) -> NDArray[np.float64]:
    """The fields as floats: Arrow's parser for plain fields, :func:`parse_decimal` for quoted ones; the
    first field that is not a plain decimal number is named (line, column, value)."""
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    data, offs, quoted, raw_quoted = csvsplit.field_values(buf, fs, fe)
    values = pa.Array.from_buffers(pa.string(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
    plain = ~quoted
    out = np.full(len(fs), np.nan)
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
                raise ValidationError(f"{where}: line {int(lines[i])}: column {column!r} is not a number: "
                                      f"{texts[i]!r}") from None
    for i, raw in zip(np.flatnonzero(quoted), raw_quoted, strict=True):
        text = raw.decode("utf-8")
        try:
            out[i] = parse_decimal(text)
        except ValueError:
            raise ValidationError(
                f"{where}: line {int(lines[i])}: column {column!r} is not a number: {text!r}"
            ) from None
    return out


def _bin_csv(grid: CellGrid, src: Path, lat: str, lon: str, fh: IO[bytes], cells_of: Callable[..., Any],
             outside: _Outside, cell_column: str, chunk_rows: int, chunk_bytes: int) -> None:
    where = str(src)
    table_parts = [b"," + csvsplit.encode_field(x) for x in grid.labels] + [b""]
    table = np.frombuffer(b"".join(table_parts), dtype=np.uint8)
    table_off = np.zeros(len(table_parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in table_parts], out=table_off[1:])
    remove = grid.n
    with src.open("rb") as inp:
        reader = CsvReader(inp, where, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes)
        header = reader.header()
        j_lat, j_lon = _columns(header.names, lat, lon, cell_column, where)
        stop = int(header.record.stops[0])
        fh.write(header.raw[:stop] + b"," + csvsplit.encode_field(cell_column) + header.raw[stop:])
        for chunk in reader.chunks(j_lat):
            recs, buf = chunk.records, chunk.buf
            if len(recs.starts) == 0:
                fh.write(chunk.data[: recs.end])
                continue
            lines = chunk.first_line + recs.lines
            latlon = np.column_stack([
                _numbers(buf, *recs.field(j_lat), lines, where, lat),
                _numbers(buf, *recs.field(j_lon), lines, where, lon),
            ])
            _check_range(latlon, lines, where, (lat, lon), "line")
            idx = cells_of(latlon, lines)
            if outside.rows:
                continue  # scanned for the error's counts; nothing more is written
            drop = idx < 0
            starts = np.where(drop, recs.starts, recs.stops).astype(np.int64)
            nxt = np.append(recs.starts[1:], recs.end).astype(np.int64)
            stops = np.where(drop, nxt, recs.stops).astype(np.int64)
            choice = np.where(drop, remove, idx).astype(np.intp)
            csvsplit.splice_to(fh, buf, recs.end, starts, stops, table, table_off, choice)


# -------------------------------------------------------------------------------- Parquet
def _bin_parquet(grid: CellGrid, src: Path, lat: str, lon: str, fh: IO[bytes], cells_of: Callable[..., Any],
                 outside: _Outside, cell_column: str, chunk_rows: int) -> None:
    pa = import_optional("pyarrow", extra="parquet")
    pq = import_optional("pyarrow.parquet", extra="parquet")
    where = str(src)
    pf = open_parquet(src)
    schema = pf.schema_arrow
    j_lat, j_lon = _columns(schema.names, lat, lon, cell_column, where)
    for j, name in ((j_lat, lat), (j_lon, lon)):
        kind = schema.field(j).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
            raise ValidationError(f"{where}: column {name!r} has type {kind}; coordinates must be numbers")
    out_schema = schema.append(pa.field(cell_column, pa.string()))
    labels = pa.array(grid.labels, type=pa.string())
    seen = 0
    writer = pq.ParquetWriter(fh, out_schema)
    try:
        for batch in pf.iter_batches(batch_size=chunk_rows):
            rows = np.arange(seen + 1, seen + 1 + batch.num_rows, dtype=np.int64)
            seen += batch.num_rows
            cols = []
            for j, name in ((j_lat, lat), (j_lon, lon)):
                col = batch.column(j)
                if col.null_count:
                    first = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
                    raise ValidationError(f"{where}: row {int(rows[first])}: column {name!r} is null")
                # safe=False: an integer past 2**53 rounds (it is far outside [-180, 180] and refused below)
                cols.append(np.asarray(col.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False),
                                       dtype=np.float64))
            latlon = np.column_stack(cols)
            _check_range(latlon, rows, where, (lat, lon), "row")
            idx = cells_of(latlon, rows)
            if outside.rows:
                continue
            keep = idx >= 0
            if not keep.all():
                batch = batch.filter(pa.array(keep))
            new = labels.take(pa.array(idx[keep]))
            writer.write_batch(pa.RecordBatch.from_arrays([*batch.columns, new], schema=out_schema))
    finally:
        writer.close()


# ------------------------------------------------------------------------ reading labels
def read_label_column(path: str | PathLike[str], column: str, labels: Sequence[str]) -> NDArray[np.intp]:
    """The index into ``labels`` of every row's ``column`` value (CSV or Parquet, streamed by chunk).

    A value that is not a label is an error naming the file, the line (CSV) or row
    (Parquet) and the value.
    """
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    src = Path(path)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    where = str(src)
    value_set = pa.array(list(labels), type=pa.string())
    parts: list[NDArray[np.intp]] = []

    def check(idx: NDArray[np.intp], at: NDArray[np.int64], values: Any, unit: str) -> None:
        bad = np.flatnonzero(idx < 0)
        if len(bad):
            raise ValidationError(f"{where}: {unit} {int(at[bad[0]])}: column {column!r} has {values(bad[0])!r}, "
                                  "not a label of the mechanism's points")

    if format_of(src, TABLE_FORMATS) == "csv":
        with src.open("rb") as inp:
            reader = CsvReader(inp, where)
            names = reader.header().names
            if column not in names:
                raise ValidationError(f"{where}: no column {column!r}")
            for chunk in reader.chunks(list(names).index(column)):
                recs = chunk.records
                data, offs, quoted, raw_quoted = csvsplit.field_values(chunk.buf, recs.fs, recs.fe)
                values = pa.Array.from_buffers(pa.string(), len(offs) - 1,
                                               [None, pa.py_buffer(offs), pa.py_buffer(data)])
                idx = np.asarray(pc.fill_null(pc.index_in(values, value_set=value_set), -1)
                                 .to_numpy(zero_copy_only=False), dtype=np.intp)
                if quoted.any():
                    lookup = {lab: i for i, lab in enumerate(labels)}
                    idx[quoted] = [lookup.get(v.decode("utf-8"), -1) for v in raw_quoted]
                check(idx, chunk.first_line + recs.lines, lambda i, v=values: v[int(i)].as_py(), "line")
                parts.append(idx)
    else:
        pf = open_parquet(src)
        if column not in pf.schema_arrow.names:
            raise ValidationError(f"{where}: no column {column!r}")
        seen = 0
        for batch in pf.iter_batches(columns=[column]):
            col = batch.column(0)
            text = col if pa.types.is_string(col.type) else pc.cast(col, pa.string())
            idx = np.asarray(pc.fill_null(pc.index_in(text, value_set=value_set), -1).to_numpy(zero_copy_only=False),
                             dtype=np.intp)
            check(idx, np.arange(seen + 1, seen + 1 + len(idx)), lambda i, v=text: v[int(i)].as_py(), "row")
            seen += len(idx)
            parts.append(idx)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.intp)
