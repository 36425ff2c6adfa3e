"""``privatize-points --engine dask|spark``: (lat, lon) releases of one file, piece by piece on a cluster.

The shape of :mod:`metricdp.integrations._run` for two numeric columns:

1. the driver opens the output atomically and reads the input once with the local
   engine's record definition (:class:`metricdp.tabular.csv.CsvReader`), cutting it into
   pieces of whole records (CSV: byte ranges; Parquet: runs of row groups), with the
   local engine's column plan and errors;
2. each task releases one piece exactly as the local engine releases a chunk
   (:func:`metricdp.streaming.point_columns.parse_column`, :func:`~metricdp.location.release.make_release`,
   :func:`~metricdp.streaming.points.write_csv_chunk`) into a part file, drawing from
   :func:`~metricdp.integrations.partition_rng` ``(seed, piece)`` (secure by default) with
   its own lattice tables;
3. each part must hold the rows the driver counted; the driver joins the parts in
   order (CSV: the header, then the parts' bytes; Parquet: their row groups) and
   publishes. Any failure is one typed error and nothing is written.

Per person (``accounting``): the driver runs the local engine's first pass and plan
(:func:`~metricdp.pipeline.first_pass.start_accounted`: every row's
coordinates validated, the budget reserved once for the job or the run refused before
anything is drawn), each piece carries the rows it writes (``numpy.packbits``) and, for
consistent releases, their releases (drawn or read back from the ledger by the driver);
the workers draw the others; ``publishing`` before the rename, ``commit`` after, the
reservation given back on any failure before. A withheld row is left out whole, as the
local engine leaves it out.
"""

from __future__ import annotations

import io
import os
import shutil
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import EngineError, MetricDPError, ValidationError
from ..location.release import PointSettings, full_precision, make_release
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import Chunk, CsvReader
from ..tabular.formats import TABLE_FORMATS, format_of
from ..tabular.leaks import LeakRule, check_file
from ._common import check_seed, partition_rng
from ._plan import DEFAULT_PIECE_BYTES, Cutter, Withheld

__all__ = ["PointJob", "PointPiece", "privatize_points_engine"]

_PIECE_ROWS = 2_000_000  # Parquet: rows per piece (whole row groups)


@dataclass(frozen=True)
class PointPiece(Withheld):
    index: int
    start: int  # CSV: byte offset; Parquet: first row group
    stop: int  # CSV: byte offset (exclusive); Parquet: last row group + 1
    first_line: int
    first_row: int
    rows: int
    #: an accounted release (:class:`._plan.Withheld`); for consistent releases the given releases are float64
    #: points, (kept, 2)
    keep: bytes | None = None
    kept: int | None = None
    given: bytes | None = None

    def _given(self, given: bytes) -> NDArray[np.float64]:
        return np.frombuffer(given, dtype=np.float64).reshape(-1, 2)


@dataclass(frozen=True)
class PointJob:
    """What every task shares (small: sent with each task)."""

    path: str
    fmt: str
    lat: int
    lon: int
    lat_name: str
    lon_name: str
    names: tuple[str, ...]
    dropped: tuple[int, ...]
    written: tuple[int, ...]
    settings: PointSettings
    digits: int
    seed: int | None
    scratch: str
    max_record: int | None
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class _Done:
    index: int
    rows: int


@dataclass(frozen=True)
class _Failed:
    index: int
    input: bool
    message: str
    detail: str = ""


def _part(scratch: str, index: int, fmt: str) -> str:
    return os.path.join(scratch, f"{index:08d}.{fmt}")


# ------------------------------------------------------------------------------ driver
def _plan(src: Path, lat: str, lon: str, keep: Sequence[str], drop: Sequence[str],
          plan_check: Callable[[ColumnPlan], None] | None, piece_bytes: int,
          max_record: int | None) -> tuple[ColumnPlan, tuple[str, ...], bytes, list[PointPiece]]:
    """The column plan, the names, the output header (CSV) and the pieces, in one pass over the file."""
    where = str(src)
    fmt = format_of(src, TABLE_FORMATS)
    pieces: list[PointPiece] = []
    if fmt == "csv":
        from ..tabular.csvsplit import header_bytes

        with src.open("rb") as fh:
            reader = CsvReader(fh, where, max_record=max_record)
            header = reader.header()
            plan = plan_columns(header.names, [lat, lon], keep=keep, drop=drop, where=where)
            if plan_check is not None:
                plan_check(plan)
            head = header_bytes(header, plan.dropped_indices)
            cutter = Cutter(piece_bytes)
            for chunk in reader.chunks(plan.index(lat)):
                cutter.add(chunk)
            first_row = 1
            for start, stop, rows, first_line in cutter.pieces():
                pieces.append(PointPiece(len(pieces), start, stop, first_line, first_row, rows))
                first_row += rows
        return plan, tuple(header.names), head, pieces
    pq = import_optional("pyarrow.parquet", extra="parquet")
    pf = pq.ParquetFile(src)
    names = tuple(pf.schema_arrow.names)
    plan = plan_columns(names, [lat, lon], keep=keep, drop=drop, where=where)
    if plan_check is not None:
        plan_check(plan)
    g0, rows, acc = 0, 0, 0
    for g in range(pf.metadata.num_row_groups):
        acc += pf.metadata.row_group(g).num_rows
        if acc >= _PIECE_ROWS or g == pf.metadata.num_row_groups - 1:
            pieces.append(PointPiece(len(pieces), g0, g + 1, 0, rows + 1, acc))
            rows += acc
            g0, acc = g + 1, 0
    return plan, names, b"", pieces


def privatize_points_engine(
    engine: str,
    input_path: str | PathLike[str],
    lat: str,
    lon: str,
    out: str | PathLike[str],
    settings: PointSettings,
    *,
    seed: int | None = None,
    digits: int = 6,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    inputs: Sequence[str | PathLike[str]] = (),
    plan_check: Callable[[ColumnPlan], None] | None = None,
    piece_bytes: int | None = None,
    max_record: int | None = None,
    scheduler: str | None = None,
    master: str | None = None,
    accounting: Any = None,
    on_report: Callable[[Any], None] | None = None,
) -> tuple[int, ColumnPlan]:
    """Release (lat, lon) of ``input_path`` into ``out`` on ``engine`` ("dask" or "spark"); (rows written, column plan).

    ``accounting`` (:class:`~metricdp.streaming.accounted.Accounting`) makes it a release
    per person, planned by the driver as the local engine plans it (module docstring);
    ``on_report`` gets its report.

    Raises
    ------
    ValidationError
        the file is refused as the local engine refuses it (one line naming file, row,
        line), or changed while it was released.
    EngineError
        the cluster failed: the root cause in one line. Nothing is written.
    """
    from ..io import atomic_write, scratch_directory
    from ..streaming.accounted import Settlement

    if engine not in ("dask", "spark"):
        raise ValidationError(f"engine must be dask or spark, got {engine!r}")
    src, target = Path(input_path), Path(out)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    if target.suffix.lower() == ".geojson":
        raise ValidationError(f"{target}: GeoJSON output is written by the local engine only")
    seed = check_seed(seed)
    run = None
    with Settlement() as settlement, atomic_write(target, "wb", inputs=[src, *inputs]) as fh:
        stat = src.stat()
        plan, names, head, pieces = _plan(src, lat, lon, keep, drop, plan_check,
                                          piece_bytes or DEFAULT_PIECE_BYTES, max_record)
        # what leaves, by name and content, as the local engine checks it, before any piece runs
        check_file(src, plan, LeakRule.points(lat, lon, settings.epsilon), max_record=max_record)
        rows = sum(p.rows for p in pieces)
        if rows == 0:
            raise ValidationError(f"{src}: no data rows")
        fmt = format_of(src, TABLE_FORMATS)
        if accounting is not None:
            settlement.run = run = _accounted(src, fmt, lat, lon, settings, accounting, seed, max_record)
            pieces = _selected(run, pieces)
        scratch = scratch_directory(target)
        try:
            job = PointJob(str(src), fmt, plan.index(lat), plan.index(lon), lat, lon, names,
                           plan.dropped_indices, tuple(k for k, n in enumerate(names) if n in set(plan.written)),
                           settings, digits, seed, str(scratch), max_record, stat.st_size, stat.st_mtime_ns)
            runner = _run_dask if engine == "dask" else _run_spark
            results = runner(job, pieces, scheduler if engine == "dask" else master)
            _check(engine, pieces, results)
            _join(job, pieces, head, fh)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if run is not None:
            run.seen = run.rows  # every piece was released as planned (_check)
            run.publishing()  # the input must be the one planned; from here on the spend stays
    if run is not None and on_report is not None:
        on_report(run.report())
    return sum(p.written for p in pieces), plan


def _accounted(src: Path, fmt: str, lat: str, lon: str, settings: PointSettings, accounting: Any,
               seed: int | None, max_record: int | None) -> Any:
    """The driver's first pass and plan (the local engine's: :mod:`metricdp.pipeline.first_pass`)."""
    from ..location.release import validator
    from ..pipeline.first_pass import start_accounted
    from ..pipeline.points import PointPairs
    from ..pipeline.run import Source
    from ._run import driver_source

    source = driver_source(seed)
    kind = PointPairs(lat, lon, make_release(settings, source), epsilon=float(settings.epsilon), where=str(src),
                      validate=validator(settings))
    return start_accounted(kind, Source.of(src, max_record=max_record), accounting, source)


def _selected(run: Any, pieces: Sequence[PointPiece]) -> list[PointPiece]:
    """Each piece with the rows it writes (and their releases, for consistent releases)."""
    from dataclasses import replace

    out, offset = [], 0
    for p in pieces:
        keep = run.plan.keep[offset : offset + p.rows]
        given = None
        if run.group_release is not None:
            given = np.ascontiguousarray(run.group_release[run.plan.group[offset : offset + p.rows][keep]],
                                         dtype=np.float64).tobytes()
        out.append(replace(p, keep=np.packbits(keep).tobytes(), kept=int(keep.sum()), given=given))
        offset += p.rows
    if offset != run.rows:
        raise run._changed()
    return out


def _check(engine: str, pieces: Sequence[PointPiece], results: Sequence[Any]) -> None:
    failed = [r for r in results if isinstance(r, _Failed)]
    if failed:
        first = min(failed, key=lambda r: (not r.input, r.index))
        if first.input:
            raise ValidationError(first.message)
        raise EngineError(f"the {engine} job failed in partition {first.index}: {first.message[:400]}")
    if len(results) != len(pieces):
        raise EngineError(f"the {engine} job returned {len(results)} partition(s) for {len(pieces)}")
    for piece, done in zip(pieces, results, strict=True):
        if done.index != piece.index or done.rows != piece.written:
            raise EngineError(f"the {engine} job wrote {done.rows} row(s) for partition {piece.index} where the "
                              f"input has {piece.written:,}; nothing written")


def _join(job: PointJob, pieces: Sequence[PointPiece], head: bytes, fh: Any) -> None:
    parts = [_part(job.scratch, p.index, job.fmt) for p in pieces]
    if job.fmt == "csv":
        fh.write(head)
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, fh, 4 * 2**20)
        return
    from ..tabular.parquet import input_compression

    pq = import_optional("pyarrow.parquet", extra="parquet")
    compression = input_compression(pq.ParquetFile(job.path).metadata)  # the local engine's codec rule
    writer = None
    try:
        for part in parts:
            pf = pq.ParquetFile(part)
            if writer is None:
                writer = pq.ParquetWriter(fh, pf.schema_arrow, compression=compression)
            for g in range(pf.metadata.num_row_groups):
                writer.write_table(pf.read_row_group(g))
    finally:
        if writer is not None:
            writer.close()


# ------------------------------------------------------------------------------ worker
def release_points_piece(job: PointJob, piece: PointPiece) -> _Done | _Failed:
    """Release one piece into its part file; never raises (errors are returned)."""
    try:
        st = os.stat(job.path)
        if st.st_size != job.size or st.st_mtime_ns != job.mtime_ns:
            raise ValidationError(f"{job.path}: the file changed while it was being released; nothing written")
        release = make_release(job.settings, partition_rng(job.seed, piece.index))
        full = full_precision(job.settings)
        data, rows = (_csv_piece if job.fmt == "csv" else _parquet_piece)(job, piece, release, full)
        final = _part(job.scratch, piece.index, job.fmt)
        tmp = f"{final}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as out:
            out.write(data)
        os.replace(tmp, final)
        return _Done(piece.index, rows)
    except ValidationError as ex:
        return _Failed(piece.index, True, str(ex), traceback.format_exc())
    except MetricDPError as ex:
        return _Failed(piece.index, False, str(ex), traceback.format_exc())
    except Exception as ex:  # any other worker-side failure: one line at the driver
        return _Failed(piece.index, False, f"{type(ex).__name__}: {ex}", traceback.format_exc())


def _csv_piece(job: PointJob, piece: PointPiece, release: Any, full: Any) -> tuple[bytes, int]:
    from ..streaming.point_columns import parse_column
    from ..tabular.formats import Points
    from ..tabular.formats.csv import CsvChunk, splice_released
    from ._plan import read_piece

    data, buf, recs = read_piece(job.path, piece.start, piece.stop, first_line=piece.first_line, rows=piece.rows,
                                 ncols=len(job.names), column=job.lat, max_record=job.max_record)
    chunk = Chunk(data, buf, recs, piece.start, piece.first_line)
    pts = np.column_stack([parse_column(chunk, job.lat, job.lat_name, job.path, piece.first_row),
                           parse_column(chunk, job.lon, job.lon_name, job.path, piece.first_row)])
    keep, released = _released(piece, release, pts)
    out = io.BytesIO()
    index = {job.lat_name: job.lat, job.lon_name: job.lon}
    splice_released(out, CsvChunk(chunk, index, piece.first_row - 1, None), index, job.dropped, keep,
                    [Points(job.lat_name, job.lon_name, released, job.digits, full)])
    return out.getvalue(), len(released)


def _released(piece: PointPiece, release: Any, pts: NDArray[np.float64]) -> tuple[Any, NDArray[np.float64]]:
    """The rows written (None: all) and their releases: the driver's (consistent) or fresh draws."""
    keep, given = piece.selection()
    if given is not None:
        return keep, given
    if keep is None:
        return None, release(pts, piece.first_row)
    if not keep.any():
        return keep, np.zeros((0, 2))
    return keep, release(pts[keep], piece.first_row + int(np.argmax(keep)))


def _parquet_piece(job: PointJob, piece: PointPiece, release: Any, full: Any) -> tuple[bytes, int]:
    from ..streaming.point_columns import column_floats

    pa = import_optional("pyarrow", extra="parquet")
    pq = import_optional("pyarrow.parquet", extra="parquet")
    pf = pq.ParquetFile(job.path)
    table = pf.read_row_groups(list(range(piece.start, piece.stop)))
    if table.num_rows != piece.rows:
        raise ValidationError(f"{job.path}: the file changed while it was being released; nothing written")
    batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
    pts = np.column_stack([column_floats(batch, job.lat, job.lat_name, job.path, piece.first_row),
                           column_floats(batch, job.lon, job.lon_name, job.path, piece.first_row)])
    keep, released = _released(piece, release, pts)
    if keep is not None:
        table = table.filter(pa.array(keep))
    schema = pf.schema_arrow
    fields = [pa.field(schema.field(k).name, pa.float64()) if k in (job.lat, job.lon) else schema.field(k)
              for k in job.written]
    new = {job.lat: pa.array(released[:, 0], pa.float64()), job.lon: pa.array(released[:, 1], pa.float64())}
    out_table = pa.Table.from_arrays([new.get(k, table.column(k)) for k in job.written],
                                     schema=pa.schema(fields, metadata=schema.metadata))
    sink = pa.BufferOutputStream()
    pq.write_table(out_table, sink)
    return sink.getvalue().to_pybytes(), len(released)


# ------------------------------------------------------------------------------ runners
def _run_dask(job: PointJob, pieces: Sequence[PointPiece], scheduler: str | None) -> list[Any]:
    from ._run import engine_error
    from .dask import client_for

    try:
        with client_for(scheduler, len(pieces)) as client:
            token = uuid.uuid4().hex
            futures = [client.submit(release_points_piece, job, p, key=f"metricdp-points-{token}-{p.index}",
                                     pure=False) for p in pieces]
            return list(client.gather(futures))
    except Exception as ex:  # the cluster's own failure: one typed line
        raise engine_error("Dask", ex) from ex


def _run_spark(job: PointJob, pieces: Sequence[PointPiece], master: str | None) -> list[Any]:
    import sys
    import warnings

    from ._run import engine_error
    from .spark import _context

    import_optional("pyspark", extra="spark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise EngineError("the Spark engine needs Java (e.g. apt-get install openjdk-17-jre-headless)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
            sc, created = _context(master)
            try:
                return list(sc.parallelize(list(pieces), len(pieces)).map(lambda p: release_points_piece(job, p))
                            .collect())
            finally:
                if created:
                    sc.stop()
    except Exception as ex:
        raise engine_error("Spark", ex) from ex
