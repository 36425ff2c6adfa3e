"""Release the (lat, lon) columns of a CSV or Parquet file of any size, chunk by chunk.

The file layer of :mod:`metricdp.streaming.files`, for two numeric columns instead of one
label column: the same record definition (:class:`metricdp.tabular.csv.CsvReader`), the
same column plan (:func:`metricdp.tabular.columns.plan_columns`: ``keep``/``drop`` and the
columns that leave with true values), the same byte-exact splicing of CSV
(:mod:`metricdp.streaming.csvsplit`: every byte outside the two released and the dropped
columns is copied), the same atomic output (:func:`metricdp.io.atomic_write`). Memory is
bounded by a chunk (``chunk_rows`` rows; for CSV also ``chunk_bytes`` of input).

What a chunk's rows become is the caller's ``release(latlon, first_row)`` (the exact
lattice or the float sampler, with a region or a snapping set): this module reads, parses,
formats and writes. Coordinates are parsed by the one CSV number rule
(:func:`metricdp.io.parse_decimal`: pyarrow's stricter cast first, Python's for a chunk it
refuses, so an error names the data row, line and value); released values are written
with ``digits`` decimals, or in full (``repr``) where ``full(rounded)`` says rounding would
change them in a way that matters (outside a region, off a snapping set).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._progress import Progress, report
from ..errors import ValidationError
from ..io import atomic_write
from ..mechanisms._kernel_loader import LAZY, lattice_kernels
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader, Records
from ..tabular.formats import TABLE_FORMATS, format_of
from ..tabular.header import table_header
from ..tabular.leaks import LeakRule, check_table
from ..tabular.parquet import input_compression, open_parquet
from . import csvsplit
from .accounted import Settlement
from .files import DEFAULT_CHUNK_ROWS
from .point_columns import column_floats, parse_column
from .prefetch import prefetch, write_behind

if TYPE_CHECKING:
    from .accounted import Accounting, AccountingReport

__all__ = ["GeoJsonSink", "PointStats", "Release", "edits_for_columns", "format_fixed", "privatize_points_file"]

_KERNELS: Any = LAZY  # the compiled splice, loaded at first use (None: numpy)

#: ``release(latlon (k, 2), first_row) -> released (k, 2)``; ``first_row`` numbers rows in errors (1-based).
Release = Callable[[NDArray[np.float64], int], NDArray[np.float64]]
#: ``select(start, latlon (k, 2)) -> (keep (k,) or None, released (kept, 2))``: rows ``start..start+k`` (0-based)
#: of the file, which of them are written (None: all) and their releases.
Select = Callable[[int, NDArray[np.float64]], tuple[NDArray[np.bool_] | None, NDArray[np.float64]]]
#: ``full(rounded (k, 2)) -> mask (k,)``: rows to write at full precision instead of rounded.
Full = Callable[[NDArray[np.float64]], NDArray[np.bool_]]


@dataclass(frozen=True)
class PointStats:
    """Rows released, seconds, the input format, the column plan (what left with true values), the accounting."""

    rows: int
    seconds: float
    format: str
    columns: ColumnPlan
    accounting: AccountingReport | None = None

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


# ------------------------------------------------------------------------ formatting
def format_fixed(values: NDArray[np.float64], digits: int) -> tuple[NDArray[np.uint8], NDArray[np.int64],
                                                                    NDArray[np.float64]]:
    """Decimal texts of ``values`` with ``digits`` decimals (|value| < 1e3), vectorised.

    Returns ``(data, offsets, rounded)``: text k is ``data[offsets[k]:offsets[k+1]]`` and
    ``rounded[k]`` the float that text denotes (``n / 10**digits``, correctly rounded), so
    a check on ``rounded`` is a check on what a reader of the file gets.

    >>> data, off, r = format_fixed(np.array([48.85660049, -0.5, 2.0]), 3)
    >>> bytes(data).decode(), off.tolist(), r.tolist()
    ('48.857-0.5002.000', [0, 6, 12, 17], [48.857, -0.5, 2.0])
    """
    if not 0 <= digits <= 15:
        raise ValidationError(f"digits must be in 0..15, got {digits}")
    scaled = np.rint(values * 10.0**digits)
    if not np.all(np.abs(scaled) < 1e3 * 10.0**digits):
        raise ValidationError("format_fixed: values must lie in (-1000, 1000)")
    n = scaled.astype(np.int64)
    neg = n < 0
    m = np.abs(n)
    int_part, frac = np.divmod(m, 10**digits)
    width_int = 3
    cols = 1 + width_int + (1 + digits if digits else 0)
    chars = np.zeros((len(n), cols), dtype=np.uint8)
    keep = np.zeros((len(n), cols), dtype=bool)
    chars[:, 0] = ord("-")
    keep[:, 0] = neg  # the rounded value's sign: -0.0000001 at 6 digits is 0.000000
    for c in range(width_int):  # hundreds, tens, units
        p = 10 ** (width_int - 1 - c)
        chars[:, 1 + c] = ord("0") + (int_part // p) % 10
        keep[:, 1 + c] = (int_part >= p) | (c == width_int - 1)
    if digits:
        chars[:, 1 + width_int] = ord(".")
        keep[:, 1 + width_int] = True
        for c in range(digits):
            chars[:, 2 + width_int + c] = ord("0") + (frac // 10 ** (digits - 1 - c)) % 10
        keep[:, 2 + width_int:] = True
    offsets = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=offsets[1:])
    rounded = n / 10.0**digits
    return chars[keep], offsets, rounded


def _format_full(values: NDArray[np.float64]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    texts = [repr(float(v)).encode() for v in values]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    return np.frombuffer(b"".join(texts), dtype=np.uint8), offsets


def _texts(values: NDArray[np.float64], digits: int, full: Full | None) -> tuple[
    NDArray[np.uint8], NDArray[np.int64]
]:
    """Texts of the released (k, 2) values, lat column then lon column, as one table."""
    flat = np.concatenate([values[:, 0], values[:, 1]])
    data, off, rounded = format_fixed(flat, digits)
    exact = full(np.column_stack(np.split(rounded, 2))) if full is not None else np.zeros(len(values), dtype=bool)
    if not exact.any():
        return data, off
    rows = np.flatnonzero(np.concatenate([exact, exact]))
    fdata, foff = _format_full(flat[rows])
    lens = np.diff(off)
    lens[rows] = np.diff(foff)
    new_off = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=new_off[1:])
    out = np.empty(int(new_off[-1]), dtype=np.uint8)
    is_full = np.zeros(len(lens), dtype=bool)
    is_full[rows] = True
    src_idx = csvsplit._gather_index(off[:-1][~is_full], lens[~is_full])
    dst_idx = csvsplit._gather_index(new_off[:-1][~is_full], lens[~is_full])
    out[dst_idx] = data[src_idx]
    out[csvsplit._gather_index(new_off[:-1][is_full], lens[is_full])] = fdata
    return out, new_off


class GeoJsonSink:
    """A FeatureCollection written feature by feature (RFC 7946: Point coordinates [lon, lat]).

    Properties are the written non-coordinate columns (CSV: their texts; Parquet: their
    values, ``null`` for nulls). Memory: one chunk of features.
    """

    def __init__(self, fh: IO[bytes], lat: str, lon: str) -> None:
        self.fh, self.lat, self.lon, self.first = fh, lat, lon, True
        fh.write(b'{"type":"FeatureCollection","features":[\n')

    def write(self, released: NDArray[np.float64], digits: int, full: Full | None,
              properties: dict[str, list[Any]]) -> None:
        import json

        data, off = _texts(released, digits, full)
        n = len(released)
        raw = bytes(data)
        names = list(properties)
        columns = [properties[k] for k in names]
        parts = []
        for r in range(n):
            la, lo = raw[off[r]:off[r + 1]].decode(), raw[off[n + r]:off[n + r + 1]].decode()
            props = json.dumps(dict(zip(names, (c[r] for c in columns), strict=True)), ensure_ascii=False,
                               allow_nan=False, default=str)
            parts.append(f'{"" if self.first and r == 0 else ","}{{"type":"Feature","geometry":{{"type":"Point",'
                         f'"coordinates":[{lo},{la}]}},"properties":{props}}}\n')
        self.first = self.first and n == 0
        self.fh.write("".join(parts).encode("utf-8"))

    def close(self) -> None:
        self.fh.write(b"]}\n")


def _csv_properties(chunk: Any, columns: Sequence[tuple[int, str]]) -> dict[str, list[str]]:
    """The texts of the given (index, name) columns of a chunk, unquoted."""
    out: dict[str, list[str]] = {}
    for k, name in columns:
        fs, fe = chunk.records.field(k)
        out[name] = [_unquote(bytes(chunk.buf[a:b])) for a, b in zip(fs, fe, strict=True)]
    return out


def _unquote(raw: bytes) -> str:
    if raw[:1] == b'"':
        raw = raw[1:-1].replace(b'""', b'"')
    return raw.decode("utf-8")


def _write_compiled(fh: IO[bytes], buf: NDArray[np.uint8], end: int, starts: NDArray[np.int64],
                    stops: NDArray[np.int64], row: NDArray[np.intp], kind: NDArray[np.intp],
                    released: NDArray[np.float64], digits: int, full: Full | None) -> bool:
    """The chunk's output by the compiled splice (same bytes as format_fixed + splice); False: use numpy.

    Used only when numba is there and no row needs full precision (then numpy writes the chunk).
    """
    kernels = lattice_kernels(_KERNELS)
    if kernels is None or not 0 <= digits <= 15:
        return False
    scaled = np.rint(released * 10.0**digits)
    if not np.all(np.abs(scaled) < 1e3 * 10.0**digits):
        return False  # format_fixed raises the error
    n = scaled.astype(np.int64)
    if full is not None and full(n / 10.0**digits).any():
        return False
    out = kernels["splice_points"](buf, end, starts, stops, row, kind, np.ascontiguousarray(n[:, 0]),
                                    np.ascontiguousarray(n[:, 1]), digits)
    fh.write(out.data)
    return True


# ----------------------------------------------------------------------------- CSV
def edits_for_columns(records: Records, columns: Sequence[int], dropped: tuple[int, ...]) -> tuple[
    NDArray[np.int64], NDArray[np.int64], NDArray[np.intp], NDArray[np.intp]
]:
    """:func:`metricdp.streaming.csvsplit.edits_for` for several replaced columns.

    Returns ``(starts, stops, row, kind)`` sorted by start: ``kind`` is the position in
    ``columns`` of a replaced field, ``-1`` for a removed range (a dropped column with one
    delimiter, as :func:`~metricdp.streaming.csvsplit.edits_for` removes it).
    """
    n = len(records.starts)
    if not dropped and len(set(columns)) == len(columns):  # the fields in column order in every row: no sort
        order_cols = sorted(range(len(columns)), key=lambda p: columns[p])
        spans = [records.field(columns[p]) for p in order_cols]
        k = len(columns)
        return (np.column_stack([a for a, _ in spans]).ravel(), np.column_stack([b for _, b in spans]).ravel(),
                np.repeat(np.arange(n, dtype=np.intp), k), np.tile(np.array(order_cols, dtype=np.intp), n))
    ds, de, drows, _ = csvsplit.edits_for(records, None, dropped)
    parts_s, parts_e, parts_k, parts_r = [ds], [de], [np.full(len(ds), -1, dtype=np.intp)], [drows]
    for pos, col in enumerate(columns):
        fs, fe = records.field(col)
        parts_s.append(fs)
        parts_e.append(fe)
        parts_k.append(np.full(n, pos, dtype=np.intp))
        parts_r.append(np.arange(n, dtype=np.intp))
    starts = np.concatenate(parts_s)
    order = np.argsort(starts, kind="stable")
    return (starts[order], np.concatenate(parts_e)[order], np.concatenate(parts_r)[order],
            np.concatenate(parts_k)[order])


def write_csv_chunk(fh: IO[bytes], chunk: Any, columns: tuple[int, int], dropped: tuple[int, ...],
                    released: NDArray[np.float64], digits: int, full: Full | None,
                    keep: NDArray[np.bool_] | None = None) -> None:
    """The chunk's records with the two coordinate fields replaced by ``released`` and dropped columns removed.

    ``keep`` (a mask per record, ``released`` then holds the kept records' releases): the
    other records are left out whole, line break included (a withheld row leaves no trace).
    """
    recs = chunk.records
    n = len(recs.starts)
    starts, stops, row, kind = edits_for_columns(recs, list(columns), dropped)
    if keep is not None and not keep.all():
        # every record gets a (k, 2) row; a withheld one repeats a kept release (never written, never a true value)
        rows = np.empty((n, 2), dtype=np.float64)
        rows[keep] = released
        rows[~keep] = released[0] if len(released) else 0.0
        released = rows
        # removals are kind -1 here, 1 in csvsplit: shift by 2 around the call
        starts, stops, row, kind = csvsplit.without_records(chunk.buf, recs, ~keep, starts, stops, row, kind + 2)
        kind = kind - 2
    if not _write_compiled(fh, chunk.buf, recs.end, starts, stops, row, kind, released, digits, full):
        table, table_off = _texts(released, digits, full)
        table_off = np.append(table_off, table_off[-1])  # entry 2n: empty (a removed range)
        choice = np.where(kind < 0, 2 * n, kind * n + row).astype(np.intp)
        csvsplit.splice_to(fh, chunk.buf, recs.end, starts, stops, table, table_off, choice)


def _csv(src: Path, fh: IO[bytes], lat: str, lon: str, select: Select, make_plan: Any, digits: int,
         full: Full | None, chunk_rows: int, chunk_bytes: int, max_record: int | None,
         tick: Callable[[int], None], geojson: bool) -> tuple[int, int]:
    where = str(src)
    rows = seen = 0
    with src.open("rb") as inp:
        reader = CsvReader(inp, where, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record,
                           kernels=lattice_kernels(_KERNELS))
        header = reader.header()
        plan: ColumnPlan = make_plan(header.names)
        i, j, dropped = plan.index(lat), plan.index(lon), plan.dropped_indices
        sink = GeoJsonSink(fh, lat, lon) if geojson else None
        props = [(k, name) for k, name in enumerate(header.names) if name in set(plan.written) and k not in (i, j)]
        if sink is None:
            fh.write(csvsplit.header_bytes(header, dropped))
        def parsed() -> Iterator[tuple[Any, NDArray[np.float64]]]:  # read ahead in a worker thread
            first = 1
            for chunk in reader.chunks(i):
                n = len(chunk.records.starts)
                if n:
                    yield chunk, np.column_stack([parse_column(chunk, i, lat, where, first),
                                                  parse_column(chunk, j, lon, where, first)])
                    first += n

        with write_behind() as submit:  # formatting, splicing and writing in a writer thread, in order
            for chunk, pts in prefetch(parsed()):
                n = len(chunk.records.starts)
                keep, released = select(seen, pts)
                seen += n
                rows += len(released)
                if sink is not None:
                    properties = _csv_properties(chunk, props)
                    if keep is not None:
                        properties = {k: [v for v, w in zip(c, keep, strict=True) if w]
                                      for k, c in properties.items()}
                    sink.write(released, digits, full, properties)
                else:
                    submit(write_csv_chunk, fh, chunk, (i, j), dropped, released, digits, full, keep)
                tick(rows)
        if sink is not None:
            sink.close()
    return rows, seen


# ------------------------------------------------------------------------- Parquet
def _parquet(src: Path, fh: IO[bytes], lat: str, lon: str, select: Select, make_plan: Any,
             chunk_rows: int, tick: Callable[[int], None], geojson: bool, digits: int,
             full: Full | None) -> tuple[int, int]:
    pa = import_optional("pyarrow", extra="parquet")
    pq = import_optional("pyarrow.parquet", extra="parquet")
    where = str(src)
    pf = open_parquet(src)
    schema = pf.schema_arrow
    plan: ColumnPlan = make_plan(schema.names)
    i, j = plan.index(lat), plan.index(lon)
    written = [k for k, name in enumerate(schema.names) if name in set(plan.written)]
    fields = [pa.field(schema.field(k).name, pa.float64()) if k in (i, j) else schema.field(k) for k in written]
    out_schema = pa.schema(fields, metadata=schema.metadata)
    compression = input_compression(pf.metadata)
    rows = seen = 0
    sink = GeoJsonSink(fh, lat, lon) if geojson else None
    writer = None if sink is not None else pq.ParquetWriter(fh, out_schema, compression=compression)
    try:
        for batch in pf.iter_batches(batch_size=chunk_rows):
            if not batch.num_rows:
                continue
            pts = np.column_stack([column_floats(batch, i, lat, where, seen + 1),
                                   column_floats(batch, j, lon, where, seen + 1)])
            keep, released = select(seen, pts)
            seen += batch.num_rows
            if keep is not None:  # a withheld row is left out of the output
                batch = batch.filter(pa.array(keep))
            rows += batch.num_rows
            if sink is not None:
                sink.write(released, digits, full, {schema.names[k]: batch.column(k).to_pylist() for k in written
                                                    if k not in (i, j)})
                tick(rows)
                continue
            new = {i: pa.array(released[:, 0], pa.float64()), j: pa.array(released[:, 1], pa.float64())}
            columns = [new.get(k, batch.column(k)) for k in written]
            writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=out_schema))  # type: ignore[union-attr]
            tick(rows)
        if sink is not None:
            sink.close()
    finally:
        if writer is not None:
            writer.close()
    return rows, seen


# ------------------------------------------------------------------------ entry point
def privatize_points_file(
    input_path: str | PathLike[str],
    lat: str,
    lon: str,
    out: str | PathLike[str],
    release: Release,
    *,
    digits: int = 6,
    full: Full | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_record: int | None = None,
    inputs: Sequence[str | PathLike[str]] = (),
    progress: Progress | None = None,
    plan_check: Callable[[ColumnPlan], None] | None = None,
    accounting: Accounting | None = None,
    validate: Callable[[NDArray[np.float64], int], None] | None = None,
    rng: object = None,
    epsilon: float | None = None,
) -> PointStats:
    """Replace every (lat, lon) of ``input_path`` by ``release`` of it; write ``out``.

    ``out`` has the input's format, or is a GeoJSON FeatureCollection when it ends in
    ``.geojson`` (one Point feature per row, the other written columns as properties).

    ``plan_check`` sees the column plan before anything is released. A column that the
    user did not ``keep`` and that looks like a coordinate by name, or holds the true
    coordinates (within the noise scale ``2/epsilon`` km; 1 km when ``epsilon`` is not
    given) in most rows, is refused before anything is written or reserved
    (:mod:`metricdp.tabular.leaks`). Nothing is published unless the whole file
    went through: errors leave ``out`` as it was.

    ``accounting`` makes it a release per person (:mod:`metricdp.streaming.accounted_points`:
    a first pass over the user and coordinate columns, each chunk of points checked by
    ``validate`` before the budget is reserved; withheld rows left out; the ledger
    reserved before and committed after the publish; ``rng`` the source of the cap's and
    the budget's random choices: pass the release's own source; ``epsilon`` the eps of one
    release, in the units of the budget). :attr:`PointStats.accounting` is then its report.

    Raises
    ------
    ValidationError
        A missing column, a bad ``keep``/``drop``, a value that is not a number (data row,
        line, value), a malformed file, or whatever ``release`` refuses.
    """
    src = Path(input_path)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    if chunk_rows < 1 or chunk_bytes < 1:
        raise ValidationError(f"chunk_rows and chunk_bytes must be >= 1, got {chunk_rows}, {chunk_bytes}")
    fmt = format_of(src, TABLE_FORMATS)
    t0 = time.perf_counter()
    plans: list[ColumnPlan] = []

    def make_plan(names: Sequence[str]) -> ColumnPlan:
        plan = plan_columns(names, [lat, lon], keep=keep, drop=drop, where=str(src))
        if plan_check is not None:
            plan_check(plan)
        plans.append(plan)
        return plan

    make_plan(table_header(src, [lat, lon]))  # the column plan (and plan_check) before anything else
    # what leaves, by name and content, before anything is written or reserved
    check_table(src, LeakRule.points(lat, lon, epsilon), keep=keep, drop=drop, max_record=max_record)

    def tick(rows: int) -> None:
        report(progress, rows, None, "releasing")

    def every_row(start: int, pts: NDArray[np.float64]) -> tuple[None, NDArray[np.float64]]:
        return None, release(pts, start + 1)

    run = None
    if accounting is not None:  # the first pass and the plan: budget reserved, nothing drawn for the file yet
        from .._random import check_rng
        from .accounted_points import AccountedPointsRun

        if epsilon is None:
            raise ValidationError("an accounted release needs the epsilon of one release")
        eps = float(epsilon)
        run = AccountedPointsRun.start_points(src, fmt, lat, lon, eps, accounting, release, validate,
                                              check_rng(rng), chunk_rows=chunk_rows, chunk_bytes=chunk_bytes,
                                              max_record=max_record, progress=progress)
    select: Select = every_row if run is None else run.select

    geojson = Path(out).suffix.lower() == ".geojson"
    with Settlement(run), atomic_write(out, "wb", inputs=[src, *inputs]) as fh:
        if fmt == "csv":
            rows, seen = _csv(src, fh, lat, lon, select, make_plan, digits, full, chunk_rows, chunk_bytes,
                              max_record, tick, geojson)
        else:
            rows, seen = _parquet(src, fh, lat, lon, select, make_plan, chunk_rows, tick, geojson, digits, full)
        if seen == 0:
            raise ValidationError(f"{src}: no data rows")
        if run is not None:
            run.publishing()  # checks the input is unchanged; from here on the spend stays
    return PointStats(rows, time.perf_counter() - t0, fmt, plans[-1], None if run is None else run.report())
