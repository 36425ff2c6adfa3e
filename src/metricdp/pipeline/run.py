"""The one chunk loop: read ahead, parse, refuse, release, write behind, publish -- for every kind and format.

What it guarantees, for every :class:`~.kind.Kind` and every format
(:mod:`metricdp.tabular.formats`):

* **what leaves** is decided before anything is published or reserved: the column plan
  (:func:`metricdp.tabular.columns.plan_columns`: released, kept, unacknowledged, dropped;
  the names checked by :func:`metricdp.tabular.leaks.check_names`) before the read, and the
  content check of every column nobody named (:class:`~metricdp.tabular.leaks.ContentScan`: the kind's
  :class:`~metricdp.tabular.leaks.LeakRule` over an even sample of each block of rows) in
  the same read, chunk by chunk, in the read-ahead thread -- the first pass of an accounted
  release, which comes before any reservation, or the release pass, whose output is not
  published until the whole file went through;
* **nothing is published unless the whole file went through**: the output is written to
  a temporary file renamed into place at the end (:func:`metricdp.io.atomic_write`); a
  refused row anywhere (a value that is not a label, a number off the grid) stops the
  release after the rest of the file is read for the error's count and first places;
* **one source of randomness for the file**: the kind's release draws chunk after chunk
  from it, so chunking changes nothing about the law of the output;
* the reading and parsing of chunk ``k + 1`` (no randomness) and the writing of chunk
  ``k - 1`` run in worker threads while chunk ``k`` is released
  (:mod:`.prefetch`).

Accounting wraps the loop through ``select`` (which rows are written, with which releases)
and the run's settlement (:mod:`metricdp.streaming.accounted`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import IO, Any

from .._progress import Progress, report
from ..errors import ValidationError
from ..io import atomic_write
from ..mechanisms._kernel_loader import LAZY, lattice_kernels
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import DEFAULT_CHUNK_BYTES
from ..tabular.formats import Chunk, Format, Reader, WriteSpec, output_format, release_format
from ..tabular.leaks import ContentScan, check_names
from .kind import Kind, Parsed, Select
from .prefetch import prefetch, write_behind

__all__ = ["COMPILED_FROM_BYTES", "DEFAULT_CHUNK_ROWS", "Pass", "ReleaseStats", "Source", "compiled",
           "release_pass"]

#: Rows per chunk. 1,000,000 rows of a few short columns is ~50-100 MB of working memory.
DEFAULT_CHUNK_ROWS = 1_000_000
#: Inputs of at least this many bytes are read and written by the compiled kernels (numba, when installed):
#: importing numba costs about 0.3-0.5 s, which the kernels win back only over tens of MB.
COMPILED_FROM_BYTES = 32 * 2**20
_KERNELS: Any = LAZY
#: Chunks read ahead and written behind where a release pipelines (0: none, all in the caller's thread)
_DEPTH = 1


@dataclass(frozen=True)
class ReleaseStats:
    """What a release did: rows released, seconds, the input's format, what left (``columns``), the accounting."""

    rows: int
    seconds: float
    format: str
    columns: ColumnPlan
    accounting: Any = None

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True)
class Source:
    """An input of a release and how it is read: the file, its format, chunk sizes, the record cap."""

    path: Path
    format: Format
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    max_record: int | None = None

    @classmethod
    def of(cls, input_path: str | PathLike[str], *, chunk_rows: int | None = None,
           chunk_bytes: int = DEFAULT_CHUNK_BYTES, max_record: int | None = None) -> Source:
        """The input ``input_path`` (a regular file of a format a release reads); bad sizes refused.

        ``chunk_rows`` None is :data:`DEFAULT_CHUNK_ROWS`.
        """
        src = Path(input_path)
        if not src.is_file():
            raise ValidationError(f"{src}: no such file")
        chunk_rows = DEFAULT_CHUNK_ROWS if chunk_rows is None else chunk_rows
        if chunk_rows < 1 or chunk_bytes < 1:
            raise ValidationError(f"chunk_rows and chunk_bytes must be >= 1, got {chunk_rows}, {chunk_bytes}")
        return cls(src, release_format(src), chunk_rows, chunk_bytes, max_record)

    @property
    def where(self) -> str:
        return str(self.path)

    def open(self, kernels: Any = None) -> Reader:
        return self.format.open(self.path, chunk_rows=self.chunk_rows, chunk_bytes=self.chunk_bytes,
                                max_record=self.max_record, kernels=kernels)

    def names(self) -> tuple[str, ...]:
        return self.format.names(self.path, max_record=self.max_record)

    def plan(self, kind: Kind, keep: Sequence[str], drop: Sequence[str],
             check: Callable[[ColumnPlan], None] | None = None) -> ColumnPlan:
        """The column plan of this input for ``kind``, seen by ``check`` first, then its names checked (the
        content: in the read, chunk by chunk)."""
        plan = plan_columns(self.names(), list(kind.columns), keep=keep, drop=drop, where=self.where)
        if check is not None:
            check(plan)
        check_names(plan.header, plan.unacknowledged, kind.rule(), self.where)
        return plan

    def output_format(self, out: str | PathLike[str]) -> Format:
        """The output's format (:func:`metricdp.tabular.formats.output_format`: the input's, or GeoJSON for points)."""
        return output_format(self.format, out)


@dataclass
class Pass:
    """One read of the input that writes the release of every selected row to ``fh``."""

    kind: Kind
    source: Source
    plan: ColumnPlan
    out_format: Format
    progress: Progress | None = None
    #: sees each chunk in the caller's thread before it is released (the one-read accounting's persons)
    beside: Callable[[Chunk], None] | None = None
    #: sees the reader first (the persons' column type)
    opened: Callable[[Reader], None] | None = None

    def run(self, fh: IO[bytes], select: Select) -> tuple[int, int]:
        """Write the release to ``fh``; returns (rows written, rows read). Refused rows: one error at the end."""
        kind, src = self.kind, self.source
        kernels = lattice_kernels(_KERNELS) if compiled(kind, src) else None
        refused = kind.refusals()
        rows = seen = 0
        unit = "line"
        with src.open(kernels) as reader:
            if self.opened is not None:
                self.opened(reader)
            writer = self.out_format.writer(fh, WriteSpec(reader, self.plan, kind.columns, src.where,
                                                          kind.geometry), kernels=kernels)

            scan = ContentScan(kind.rule(), unnamed(self.plan, kind), src.where)

            def parsed() -> Iterator[tuple[Chunk, Parsed]]:  # read ahead in a worker thread (no randomness there)
                for chunk in reader.chunks():
                    scan.add(chunk)
                    yield chunk, kind.parse(chunk)
                scan.finish()

            try:
                # a compiled kind over a text format: reading and parsing, then writing, in worker threads
                depth = _DEPTH if kind.compiled and src.format.read_ahead else 0
                with write_behind(depth=depth) as submit:  # rendering and writing in a writer thread, in order
                    for chunk, got in prefetch(parsed(), depth=depth):
                        unit = chunk.unit
                        if self.beside is not None:
                            self.beside(chunk)
                        if got.refused.size:
                            shown = got.refused[:kind.show]
                            refused.add(chunk.places(got.refused), chunk.texts(kind.columns[0], shown),
                                        got.reasons)
                        if refused.rows:
                            seen += chunk.rows
                            continue  # read for the error's counts; nothing more is written
                        if not chunk.rows:  # blank lines only: written as they are
                            submit(_write, writer, chunk, None, kind.render(got.values))
                            continue
                        keep, released = select(seen, got.values)
                        seen += chunk.rows
                        rows += chunk.rows if keep is None else int(keep.sum())
                        submit(_write, writer, chunk, keep, kind.render(released))
                        report(self.progress, rows, None, "releasing")
            finally:
                writer.close()  # a footer even after an error: the unpublished output is removed whole
        if refused.rows:
            raise refused.error(src.where, unit)
        kind.check_written(seen, src.where)
        return rows, seen


def compiled(kind: Kind, source: Source) -> bool:
    """Whether the release of ``source`` by ``kind`` runs the compiled kernels (:data:`COMPILED_FROM_BYTES`).

    Only a format whose chunks are split and spliced by them asks for them: a format that
    reads ahead (:attr:`~metricdp.tabular.formats.Format.read_ahead`, the text format). A
    typed format reads and writes through Arrow and never calls a kernel, so for it numba
    is not imported: its import would add its time and its memory to the release for nothing.
    """
    return (kind.compiled and source.format.read_ahead
            and source.path.stat().st_size >= COMPILED_FROM_BYTES)


def unnamed(plan: ColumnPlan, kind: Kind) -> tuple[str, ...]:
    """The columns whose content is checked: written with true values and named by nobody."""
    return tuple(c for c in plan.unacknowledged if c not in kind.columns)


def _write(writer: Any, chunk: Chunk, keep: Any, released: Any) -> None:
    writer.write(chunk, keep, released)


def release_pass(kind: Kind, source: Source, out: str | PathLike[str], plan: ColumnPlan, *,
                 inputs: Sequence[str | PathLike[str]] = (), progress: Progress | None = None,
                 select: Select | None = None, run: Any = None) -> ReleaseStats:
    """Release ``source`` into ``out`` with ``kind`` (every row, or ``select``'s rows); publish when all went through.

    ``run`` is the accounting's run (:class:`metricdp.streaming.accounted.AccountedRun`):
    settled with the publish (kept) or the failure (released).
    """
    from ..streaming.accounted import Settlement

    t0 = time.perf_counter()

    one = Pass(kind, source, plan, source.output_format(out), progress)
    with Settlement(run), atomic_write(out, "wb", inputs=[source.path, *inputs]) as fh:
        rows, _seen = one.run(fh, select or kind.every_row)
        if run is not None:
            run.publishing()  # checks the input is unchanged; from here on the spend stays
    return ReleaseStats(rows, time.perf_counter() - t0, source.format.name, plan,
                        None if run is None else run.report())
