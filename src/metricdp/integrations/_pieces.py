"""What one engine partition does: release one :class:`~._plan.Piece` into one part file.

The same function runs in a Dask task and in a Spark task, so both engines read records
exactly as the local engine does (:mod:`metricdp.tabular.csvsplit`) and write what it
writes: a CSV piece's bytes with the released column's fields spliced in and every
other byte kept; a Parquet piece's row groups with the column replaced (types and
values of the other columns untouched, no pandas round trip).

The piece is re-checked against the driver's count (bytes, records, labels) and the
file's size and mtime: a file edited between the driver's pass and the job is refused,
never released differently from what was checked. A part is written to a name unique
to the attempt and renamed into place, so a retried or speculative attempt never
leaves a torn part. Errors are returned, not raised (:class:`Failed`): the driver turns
them into one typed error, and the engines log no worker tracebacks.
"""

from __future__ import annotations

import os
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import MetricDPError, ValidationError
from ..streaming.labels import parquet_label_indices
from ._common import partition_rng
from ._labels import Labels, field_text, sample
from ._plan import Piece, Plan, changed, check_unchanged, out_values, read_piece

__all__ = ["Done", "Failed", "Job", "parquet_part", "part_path", "release_piece", "released"]


@dataclass(frozen=True)
class Job:
    """What every partition of one release shares (sent with each task: small)."""

    plan: Plan  # without its pieces (each task carries its own)
    column_name: str
    seed: int | None
    scratch: str
    rule: Any = None  # a numbers release (:class:`._numbers.NumberRule`); None: labels


@dataclass(frozen=True)
class Done:
    index: int
    rows: int
    nbytes: int


@dataclass(frozen=True)
class Failed:
    """A partition's error: ``input`` True for a problem of the file (a ValidationError);
    ``detail`` the worker's traceback (shown by the CLI's ``--debug`` only)."""

    index: int
    input: bool
    message: str
    detail: str = ""


def part_path(scratch: str, index: int, fmt: str) -> str:
    return os.path.join(scratch, f"{index:08d}.{fmt}")


def release_piece(job: Job, piece: Piece, mechanism: Any) -> Done | Failed:
    """Release ``piece`` with ``mechanism`` into its part file; never raises."""
    try:
        check_unchanged(job.plan)
        count = getattr(job.rule, "count", None)  # ._persons.PersonCount (not imported here: no cycle)
        if count is not None:  # the counting pass of an accounted release: no part file
            return count(job, piece)
        if job.rule is not None:  # ._numbers.NumberRule (not imported here: it imports this module)
            data, rows = job.rule.release(job, piece, mechanism)
        elif job.plan.fmt == "csv":
            data, rows = _release_csv(job, piece, mechanism)
        else:
            data, rows = _release_parquet(job, piece, mechanism)
        final = part_path(job.scratch, piece.index, job.plan.fmt)
        tmp = f"{final}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, final)
        return Done(piece.index, rows, len(data))
    except ValidationError as ex:
        return Failed(piece.index, True, str(ex), traceback.format_exc())
    except MetricDPError as ex:
        return Failed(piece.index, False, str(ex), traceback.format_exc())
    except Exception as ex:  # any other worker-side failure: reported by the driver in one line
        return Failed(piece.index, False, f"{type(ex).__name__}: {ex}", traceback.format_exc())


def _changed(job: Job, what: str) -> ValidationError:
    return changed(job.plan.path, what)


def _release_csv(job: Job, piece: Piece, mechanism: Any) -> tuple[bytes, int]:
    plan = job.plan
    _, buf, recs = read_piece(plan.path, piece.start, piece.stop, first_line=piece.first, rows=piece.rows,
                              ncols=len(plan.names), column=plan.column, max_record=plan.max_record)
    labels = Labels(mechanism)
    idx, quoted = labels.codes(buf, recs)
    bad = np.flatnonzero(idx < 0)
    if len(bad):
        i = int(bad[0])
        raise _changed(job, f"line {piece.first + int(recs.lines[i])}: "
                            f"{field_text(buf, int(recs.fs[i]), int(recs.fe[i]))!r} is not a label")
    keep, out = released(job, piece, idx, lambda codes, rng: sample(mechanism, codes, rng))
    dropped = plan.columns.dropped_indices if plan.columns is not None else ()
    return labels.splice(buf, recs, plan.column, dropped, out, quoted, keep).tobytes(), len(out)


def released(job: Job, piece: Piece, codes: NDArray[np.intp],
             draw: Callable[[NDArray[np.intp], Any], NDArray[np.intp]]) -> tuple[Any, NDArray[np.intp]]:
    """The rows written (None: all) and their releases: the driver's (a consistent release) or ``draw`` of the
    kept rows' ``codes`` from the piece's own stream (:func:`~metricdp.integrations.partition_rng`)."""
    keep, given = piece.selection()
    if given is not None:
        return keep, given
    return keep, draw(codes if keep is None else codes[keep], partition_rng(job.seed, piece.index))


def _release_parquet(job: Job, piece: Piece, mechanism: Any) -> tuple[bytes, int]:
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")

    def codes(col: Any) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        idx, _ = parquet_label_indices(pa, pc, col, mechanism.labels)
        return idx, idx < 0

    return parquet_part(job, piece, codes, "is not a label",
                        lambda kind: out_values(mechanism, kind, job.plan.path, job.column_name),
                        lambda idx, rng: sample(mechanism, idx, rng))


def parquet_part(
    job: Job, piece: Piece, codes: Callable[[Any], tuple[NDArray[np.intp], NDArray[np.bool_]]], refused: str,
    outs: Callable[[Any], Any], draw: Callable[[NDArray[np.intp], Any], NDArray[np.intp]],
) -> tuple[bytes, int]:
    """A Parquet piece's part file and its rows: the piece's row groups with the released column replaced.

    ``codes(column)`` gives each value's output index and a mask of values that cannot be released
    (refused as a changed file: the driver checked them all, the first one named as ``row N {refused}``);
    ``outs(type)`` the outputs as an Arrow array of the column's type; ``draw(codes, rng)`` the releases.
    Every other column, the schema and its metadata and the compression are the input's.
    """
    pa = import_optional("pyarrow", extra="parquet")
    pq = import_optional("pyarrow.parquet", extra="parquet")
    plan = job.plan
    table = pq.ParquetFile(plan.path).read_row_groups(list(range(piece.start, piece.stop)))
    j = plan.column
    if table.num_rows != piece.rows or table.schema.names != list(plan.names):
        raise _changed(job, f"row groups {piece.start} to {piece.stop - 1}")
    idx, bad = codes(table.column(j).combine_chunks())
    if bad.any():
        raise _changed(job, f"row {piece.first + int(np.flatnonzero(bad)[0])} {refused}")
    field = table.schema.field(j)
    values = outs(field.type)
    keep, out = released(job, piece, idx, draw)
    if keep is not None:
        table = table.filter(pa.array(keep))
    table = table.set_column(j, field, values.take(pa.array(out, type=pa.int64()))).select(plan.schema.names)
    table = table.replace_schema_metadata(plan.schema.metadata)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=plan.compression)
    return sink.getvalue().to_pybytes(), len(out)
