"""What one engine partition does: release one :class:`~._plan.Piece` into one part file.

The same function runs in a Dask task and in a Spark task, for every kind of value and
every format, and it is the local engine's release of one chunk
(:class:`metricdp.pipeline.run.Pass`) on the piece:

1. read the piece into a :class:`~metricdp.tabular.formats.Chunk` by the local engine's
   reader (the format's :class:`~metricdp.tabular.formats.Parts`: CSV records by the one
   record definition, JSON lines by their own, a typed format's groups as one batch);
2. parse it with the release's kind (:class:`metricdp.pipeline.kind.Kind`: labels,
   numbers, points); a value the driver checked and the kind now refuses means the file
   changed (refused, named with its line or row);
3. select the rows written (an accounted release: the driver's selection and, for
   consistent releases, its releases) and release the others from the piece's own stream
   (:func:`~metricdp.integrations.partition_rng`);
4. render the releases and write the part with the format's writer: a CSV piece's bytes
   with the released fields spliced in and every other byte kept; a typed piece's rows
   with the released columns replaced (types and values of the other columns untouched,
   no pandas round trip).

The piece is re-checked against the driver's count (bytes, rows) and the file's size
and mtime: a file edited between the driver's pass and the job is refused, never
released differently from what was checked. A part is written to a name unique to the
attempt and renamed into place, so a retried or speculative attempt never leaves a torn
part. Errors are returned, not raised (:class:`Failed`): the driver turns them into one
typed error, and the engines log no worker tracebacks.
"""

from __future__ import annotations

import os
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MetricDPError, ValidationError
from ..pipeline.kind import Kind
from ._common import partition_rng
from ._plan import Piece, Plan, changed, check_unchanged
from ._rule import LabelRule, Rule

__all__ = ["Done", "Failed", "Job", "part_path", "release_piece"]

_LABELS = LabelRule()


@dataclass(frozen=True)
class Job:
    """What every partition of one release shares (sent with each task: small).

    ``rule`` is the kind of release (:class:`._rule.Rule`; None: labels), or the counting
    pass of an accounted release (:class:`._persons.PersonCount`: no part file).
    """

    plan: Plan  # without its pieces (each task carries its own)
    column_name: str
    seed: int | None
    scratch: str
    rule: Any = None


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


def release_piece(job: Job, piece: Piece, mechanism: Any) -> Any:
    """Release ``piece`` with ``mechanism`` into its part file (:class:`Done`); never raises (:class:`Failed`)."""
    try:
        check_unchanged(job.plan)
        count = getattr(job.rule, "count", None)  # ._persons.PersonCount (not imported here: no cycle)
        if count is not None:  # the counting pass of an accounted release: no part file
            return count(job, piece)
        data, rows = _release(job, piece, mechanism)
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


def _release(job: Job, piece: Piece, mechanism: Any) -> tuple[bytes, int]:
    """The part file's bytes of ``piece`` and the rows it holds (module docstring, steps 1 to 4)."""
    plan = job.plan
    rule: Rule = job.rule or _LABELS
    kind = rule.kind(job.column_name, plan.path, mechanism, partition_rng(job.seed, piece.index))
    parts, layout = plan.parts, plan.layout
    kernels = _kernels(kind, plan)
    chunk = parts.read(piece, layout, kernels)
    got = kind.parse(chunk)
    if got.refused.size:  # the driver found none: the file is not the one it checked
        first = got.refused[:1]
        text = chunk.texts(kind.columns[0], first)[0]
        raise changed(plan.path, f"{chunk.unit} {int(chunk.places(first)[0])}: {text!r} {rule.refused}")
    keep, released = _selected(kind, piece, got.values)
    return parts.write(layout, chunk, keep, kind.render(released), kernels), len(released)


def _selected(kind: Kind, piece: Piece, values: Any) -> tuple[Any, Any]:
    """The rows written (None: all) and their releases: the driver's (a consistent release) or ``kind``'s
    draws for the kept rows from the piece's own stream (none drawn for no rows)."""
    keep, given = piece.selection()
    if given is not None:
        return keep, given
    chosen = values if keep is None else values[keep]
    if len(chosen) == 0:
        return keep, chosen
    first = piece.row + (0 if keep is None else int(np.argmax(keep)))  # the first kept row, for errors
    return keep, kind.release(chosen, first)


def _kernels(kind: Kind, plan: Plan) -> Any:
    """The compiled kernels for a kind that has them, on an input large enough that the local engine loads them
    (:data:`metricdp.pipeline.run.COMPILED_FROM_BYTES`); None: numpy."""
    from ..pipeline.run import COMPILED_FROM_BYTES

    if not kind.compiled or plan.size < COMPILED_FROM_BYTES:
        return None
    from ..mechanisms._kernel_loader import lattice_kernels

    return lattice_kernels()
