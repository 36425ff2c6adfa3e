"""What one engine partition does: release one :class:`~._plan.Piece` into one part file.

The same function runs in a Dask task and in a Spark task, so both engines read records
exactly as the local engine does (:mod:`metricdp.streaming.csvsplit`) and write what it
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
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._optional import import_optional
from ..errors import MetricDPError, ValidationError
from ._common import partition_rng
from ._labels import Labels, field_text, sample
from ._plan import Piece, Plan, changed, check_unchanged, out_values, read_piece

__all__ = ["Done", "Failed", "Job", "part_path", "release_piece"]


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
        if job.rule is not None:
            from ._numbers import release_numbers_piece

            data, rows = release_numbers_piece(job, piece, mechanism)
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
    keep, released = _released(job, piece, mechanism, idx)
    dropped = plan.columns.dropped_indices if plan.columns is not None else ()
    return labels.splice(buf, recs, plan.column, dropped, released, quoted, keep).tobytes(), len(released)


def _released(job: Job, piece: Piece, mechanism: Any, idx: Any) -> tuple[Any, Any]:
    """The rows written (None: all) and their releases: the driver's (consistent) or fresh draws."""
    keep, given = piece.selection()
    if given is not None:
        return keep, given
    return keep, sample(mechanism, idx if keep is None else idx[keep], partition_rng(job.seed, piece.index))


def _release_parquet(job: Job, piece: Piece, mechanism: Any) -> tuple[bytes, int]:
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    pq = import_optional("pyarrow.parquet", extra="parquet")
    plan = job.plan
    table = pq.ParquetFile(plan.path).read_row_groups(list(range(piece.start, piece.stop)))
    j = plan.column
    if table.num_rows != piece.rows or table.schema.names != list(plan.names):
        raise _changed(job, f"row groups {piece.start} to {piece.stop - 1}")
    col = table.column(j).combine_chunks()
    as_text = col if pa.types.is_string(col.type) else pc.cast(col, pa.string())
    value_set = pa.array(list(mechanism.labels), type=pa.string())
    idx = np.asarray(pc.fill_null(pc.index_in(as_text, value_set=value_set), -1).to_numpy(zero_copy_only=False),
                     dtype=np.intp)
    if (idx < 0).any():
        raise _changed(job, f"row {piece.first + int(np.flatnonzero(idx < 0)[0])} is not a label")
    field = table.schema.field(j)
    outs = out_values(mechanism, field.type, plan.path, job.column_name)
    keep, released = _released(job, piece, mechanism, idx)
    if keep is not None:
        table = table.filter(pa.array(keep))
    table = table.set_column(j, field, outs.take(pa.array(released))).select(plan.schema.names)
    table = table.replace_schema_metadata(plan.schema.metadata)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=plan.compression)
    return sink.getvalue().to_pybytes(), len(released)
