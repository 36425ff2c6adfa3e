"""Privatize one column of a CSV or Parquet file of any size, chunk by chunk.

Memory is bounded by a chunk (``chunk_rows`` rows; for CSV also ``chunk_bytes`` of
input), whatever the file size. Labels are mapped to indices with
:func:`pyarrow.compute.index_in`, releases come from the mechanism's public
:meth:`~metricdp.mechanisms.base.Mechanism.sample`, and the output goes chunk by chunk
to a temporary file renamed into place at the end (:func:`metricdp.io.atomic_write`).
A value that is not one of the mechanism's labels stops the release: the rest of the
file is still scanned so that the error gives the count and the first line numbers, and
nothing is written.

What is read
------------
CSV through the one record definition of :mod:`metricdp.tabular.csv` (a bare ``\\r``, a
ragged row, a stray quote, a byte-order mark past the first byte, a NUL, invalid UTF-8 or
a record over the cap is one error with line and byte offset, before anything is
published); the suffix decides the format (:func:`metricdp.tabular.formats.format_of`).

What is kept
------------
Every column but the released one leaves with its true values unless ``drop`` names it
(a column that holds the released values under another name is refused unless ``keep``
names it: :mod:`metricdp.tabular.leaks`); the returned :class:`ReleaseStats` carries the
:class:`~metricdp.tabular.columns.ColumnPlan` that names them.

* CSV: every byte outside the released and dropped columns is copied unchanged (quoting,
  spaces, ``\\r\\n``, blank lines, a byte-order mark) -- see :mod:`metricdp.tabular.csvsplit`.
  A released value is quoted when the input field was quoted or when it must be; a
  dropped column goes with one delimiter.
* Parquet: schema, schema metadata, column types and values of the other columns and
  the compression codec of the first column chunk; row groups become ``chunk_rows``
  rows each (Parquet has no byte-level identity to keep).

Randomness
----------
One source for the whole file (``rng=None``: the OS secure source; an int seed or a
Generator: one reproducible stream consumed chunk after chunk, with a
:class:`~metricdp.errors.PrivacyLeakWarning`), so chunking changes nothing about the
distribution: every row gets an independent release from its row of the mechanism.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from os import PathLike
from typing import Any

from .._progress import Progress
from .._random import check_rng, warn_unless_secure
from ..io import atomic_write
from ..pipeline.engine import Engine, check_engine, cluster_seed, on_cluster
from ..pipeline.first_pass import start_accounted
from ..pipeline.labels import Labels, UnknownValues
from ..pipeline.run import DEFAULT_CHUNK_ROWS, Pass, ReleaseStats, Source, release_pass
from ..tabular import csvsplit
from ..tabular.csv import DEFAULT_CHUNK_BYTES, max_record_bytes
from .accounted import Accounting, OnePassRun, Settlement

__all__ = [
    "DEFAULT_CHUNK_BYTES", "DEFAULT_CHUNK_ROWS", "Accounting", "ReleaseStats", "UnknownValues",
    "privatize_file",
]


def privatize_file(
    mechanism: Any,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    rng: object = None,
    chunk_rows: int | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    inputs: Sequence[str | PathLike[str]] = (),
    progress: Progress | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    max_record: int | None = None,
    accounting: Accounting | None = None,
    one_pass: bool = True,
    engine: str = "local",
    scheduler: str | None = None,
    master: str | None = None,
) -> ReleaseStats:
    """Replace every value of ``column`` by a release of ``mechanism``; write ``out``.

    ``out`` has the input's format. ``inputs`` are further files of the same command
    (the mechanism file) that ``out`` must not be. ``drop`` names columns left out of
    ``out``, ``keep`` columns written unreleased on purpose; the returned
    :attr:`ReleaseStats.columns` names every column that left with true values
    (:func:`metricdp.tabular.columns.plan_columns`). ``max_record`` caps a CSV record's
    bytes (:func:`metricdp.tabular.csv.max_record_bytes`). See the module docstring for
    what is kept and how randomness is drawn. ``accounting`` makes it a release per
    person (:mod:`metricdp.streaming.accounted`: withheld rows left out, the ledger
    reserved before and committed after the publish); :attr:`ReleaseStats.accounting` is
    then its report. Such a release reads the file once, the plan coming after the
    release pass, unless it is ``consistent`` or ``one_pass`` is False (a first pass over
    the user column, then the plan, then the release: the same law of what is published).

    ``engine`` (:mod:`metricdp.pipeline.engine`) runs it here, chunk by chunk (``"local"``:
    ``chunk_rows`` rows, default :data:`DEFAULT_CHUNK_ROWS`), or on a cluster:
    ``"dask"`` (``scheduler``: an existing scheduler's address, default a local cluster;
    :func:`metricdp.integrations.dask.privatize_file_dask`) or ``"spark"`` (``master``,
    default ``local[*]``; :func:`metricdp.integrations.spark.privatize_file_spark`), whose
    partitions draw from ``rng`` (None or an int seed) as
    :func:`metricdp.integrations.partition_rng` says. The output and the returned stats
    are the same on every engine.

    Raises
    ------
    ValidationError
        a missing/ambiguous column, a bad ``keep``/``drop`` name, a value that is not a
        label (count and first line numbers), a malformed file or one the CSV record
        definition refuses (:mod:`metricdp.tabular.csv`: line and byte offset), an
        option of another engine.
    UnsafeOutputError
        ``out`` is a device, a directory, the input, ... (nothing written).
    EngineError
        the cluster failed (nothing written).
    """
    runs_on = check_engine(engine, scheduler, master, chunk_rows)
    source = Source.of(input_path, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record)
    kind = Labels(mechanism, column, None, where=source.where)
    # what leaves, by name and content, before anything is written or reserved
    plan = source.plan(kind, keep, drop)
    if runs_on is not Engine.local:
        from ..integrations._engines import engine_runner
        from ..integrations._rule import LabelRule
        from ..integrations._run import release_on

        return on_cluster(partial(
            release_on, engine_runner(runs_on.value, scheduler, master), LabelRule(), mechanism, input_path, column,
            out, seed=cluster_seed(rng), inputs=inputs, keep=keep, drop=drop, max_record=max_record,
            accounting=accounting, progress=progress), source.format.name, plan)
    warn_unless_secure(rng, stacklevel=2)
    kind.source = check_rng(rng)  # ONE stream for the whole file (an int seed is not restarted per chunk)

    if accounting is None:
        return release_pass(kind, source, out, plan, inputs=inputs, progress=progress)
    if accounting.consistent or not one_pass:  # the first pass and the plan: budget reserved, nothing drawn yet
        run = start_accounted(kind, source, accounting, kind.source, progress=progress, columns=plan)
        return release_pass(kind, source, out, plan, inputs=inputs, progress=progress, select=run.select, run=run)
    return _one_read(kind, source, out, plan, OnePassRun(mechanism, source.path, column, accounting, kind.release,
                                                         kind.source), inputs, progress)


def _one_read(kind: Labels, source: Source, out: str | PathLike[str], plan: Any, one: OnePassRun,
              inputs: Sequence[str | PathLike[str]], progress: Progress | None) -> ReleaseStats:
    """The one-read accounted release (:class:`~metricdp.streaming.accounted.OnePassRun`): every row released
    while the persons are read, the plan after the pass, the withheld rows then removed from the output."""
    import time

    t0 = time.perf_counter()
    out_format = source.output_format(out)

    read = Pass(kind, source, plan, out_format, progress, beside=one.persons.add, opened=one.persons.start_reader)
    with Settlement(None) as settlement, atomic_write(out, "wb", inputs=[source.path, *inputs]) as fh:
        rows, _ = read.run(fh, kind.every_row)
        # reserved from here (under refuse, an over-budget person raised: nothing reserved)
        settlement.run = run = one.plan()
        if not run.written_all:
            kept = (out_format.withhold(fh, run.plan.keep, source.where, _record_cap(kind, source.max_record))
                    if len(plan.written) >= 2 else None)
            if kept is not None:
                rows = kept
                run.seen = run.rows  # the kept records keep their releases (OnePassRun's docstring)
            else:  # rows withheld: released again, without them (OnePassRun's docstring)
                fh.seek(0)
                fh.truncate()
                again = Pass(kind, source, plan, out_format, progress)
                rows, _ = again.run(fh, run.select)
        run.publishing()  # checks the input is unchanged; from here on the spend stays
    return ReleaseStats(rows, time.perf_counter() - t0, source.format.name, plan, run.report())


def _record_cap(kind: Labels, max_record: int | None) -> int:
    """The longest record of the output: the input's cap plus the longest released field (quoted)."""
    return max_record_bytes(max_record) + max((len(csvsplit.encode_field(x, quoted=True)) for x in kind.outputs),
                                              default=0)
