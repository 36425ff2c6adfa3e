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
  spaces, ``\\r\\n``, blank lines, a byte-order mark) -- see :mod:`metricdp.streaming.csvsplit`.
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

import contextlib
import functools
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._progress import Progress, report
from .._random import check_rng, warn_unless_secure
from ..errors import PrivacyLeakWarning, ValidationError
from ..io import atomic_write
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader, max_record_bytes
from ..tabular.formats import TABLE_FORMATS, format_of
from ..tabular.leaks import LeakRule, check_table
from ..tabular.parquet import ReleaseWriter, open_parquet
from . import csvsplit
from .accounted import AccountedRun, Accounting, AccountingReport, OnePassRun, Settlement
from .labels import _KEEP_DISTINCT, UnknownValues, csv_label_indices, parquet_label_indices
from .persons import PersonCollector
from .prefetch import write_behind

#: ``select(first_row, label_indices) -> (keep or None, releases of the kept rows)``: which rows of a chunk are
#: written and with which output index (``keep=None``: every row).
Select = Callable[[int, NDArray[np.intp]], tuple[NDArray[np.bool_] | None, NDArray[np.intp]]]

__all__ = [
    "DEFAULT_CHUNK_BYTES", "DEFAULT_CHUNK_ROWS", "Accounting", "ReleaseStats", "Select", "UnknownValues",
    "check_header", "csv_label_indices", "file_format", "parquet_label_indices", "privatize_file",
]

#: Rows per chunk. 1,000,000 rows of a few short columns is ~50-100 MB of working memory.
DEFAULT_CHUNK_ROWS = 1_000_000


@dataclass(frozen=True)
class ReleaseStats:
    """What :func:`privatize_file` did: rows released, seconds, format, and what left (``columns``)."""

    rows: int
    seconds: float
    format: str
    columns: ColumnPlan | None = None
    accounting: AccountingReport | None = None

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


def file_format(path: Path) -> str:
    """``"csv"`` or ``"parquet"`` from the suffix (:func:`metricdp.tabular.formats.format_of`)."""
    return format_of(path, TABLE_FORMATS)


def check_header(names: Sequence[str], column: str, where: str) -> int:
    """Index of ``column`` in ``names``; empty or duplicate names are refused by name."""
    return plan_columns(names, [column], where=where).index(column)


def privatize_file(
    mechanism: Any,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    rng: object = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    inputs: Sequence[str | PathLike[str]] = (),
    progress: Progress | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    max_record: int | None = None,
    accounting: Accounting | None = None,
    one_pass: bool = True,
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

    Raises
    ------
    ValidationError
        a missing/ambiguous column, a bad ``keep``/``drop`` name, a value that is not a
        label (count and first line numbers), a malformed file or one the CSV record
        definition refuses (:mod:`metricdp.tabular.csv`: line and byte offset).
    UnsafeOutputError
        ``out`` is a device, a directory, the input, ... (nothing written).
    """
    src = Path(input_path)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    if chunk_rows < 1 or chunk_bytes < 1:
        raise ValidationError(f"chunk_rows and chunk_bytes must be >= 1, got {chunk_rows}, {chunk_bytes}")
    fmt = file_format(src)
    # what leaves, by name and content, before anything is written or reserved
    check_table(src, LeakRule.labels(column), keep=keep, drop=drop, max_record=max_record)
    warn_unless_secure(rng, stacklevel=2)
    source = check_rng(rng)  # ONE stream for the whole file (an int seed is not restarted per chunk)
    t0 = time.perf_counter()
    plan: list[ColumnPlan] = []

    def make_plan(names: Sequence[str]) -> ColumnPlan:
        plan.append(plan_columns(names, [column], keep=keep, drop=drop, where=str(src)))
        return plan[0]

    def release(indices: NDArray[np.intp]) -> NDArray[np.intp]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # announced once above
            return np.asarray(mechanism.sample(indices, source), dtype=np.intp)

    def every_row(_start: int, indices: NDArray[np.intp]) -> tuple[None, NDArray[np.intp]]:
        return None, release(indices)

    run: AccountedRun | None = None
    one: OnePassRun | None = None
    if accounting is not None and (accounting.consistent or not one_pass):
        # the first pass and the plan: budget reserved, nothing drawn for the file yet
        run = AccountedRun.start(mechanism, src, fmt, column, accounting, release, source,
                                 chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record,
                                 progress=progress)
    elif accounting is not None:  # one read: the release pass collects the persons, the plan comes after it
        one = OnePassRun(mechanism, src, column, accounting, release, source)

    def tick(rows: int) -> None:
        report(progress, rows, None, "releasing")

    def release_pass(fh: IO[bytes], select: Select, persons: PersonCollector | None) -> int:
        if fmt == "csv":
            return _privatize_csv(mechanism, src, column, fh, select, tick, make_plan, chunk_rows, chunk_bytes,
                                  max_record, persons)
        return _privatize_parquet(mechanism, src, column, fh, select, tick, make_plan, chunk_rows, persons)

    with Settlement(run) as settlement, atomic_write(out, "wb", inputs=[src, *inputs]) as fh:
        rows = release_pass(fh, every_row if run is None else run.select, None if one is None else one.persons)
        if one is not None:
            # reserved from here (under refuse, an over-budget person raised: nothing reserved)
            settlement.run = run = one.plan()
            if not run.written_all and fmt == "csv" and len(plan[0].written) >= 2 and _readable(fh):
                rows = _withhold_csv(fh, run.plan.keep, str(src), _record_cap(mechanism, max_record))
                run.seen = run.rows  # the kept records keep their releases (OnePassRun's docstring)
            elif not run.written_all:  # rows withheld: released again, without them (OnePassRun's docstring)
                fh.seek(0)
                fh.truncate()
                plan.clear()
                rows = release_pass(fh, run.select, None)
        if run is not None:
            run.publishing()  # checks the input is unchanged; from here on the spend stays
    return ReleaseStats(rows, time.perf_counter() - t0, fmt, plan[0], None if run is None else run.report())


# ------------------------------------------------------------------------------------ CSV
def _label_table(labels: Sequence[str]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """Encoded labels: entries 0..n-1 as needed, n..2n-1 always quoted, 2n empty (a removal)."""
    enc = [csvsplit.encode_field(x) for x in labels] + [csvsplit.encode_field(x, quoted=True) for x in labels]
    enc.append(b"")
    offsets = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in enc], out=offsets[1:])
    return np.frombuffer(b"".join(enc), dtype=np.uint8), offsets


def _privatize_csv(
    mechanism: Any, src: Path, column: str, fh: IO[bytes], select: Select, tick: Any, make_plan: Any,
    chunk_rows: int, chunk_bytes: int, max_record: int | None, persons: PersonCollector | None = None,
) -> int:
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")

    labels = list(mechanism.labels)
    outs = list(getattr(mechanism, "output_labels", labels))  # a separate output set releases its own labels
    n_out = len(outs)
    value_set = pa.array([x.encode("utf-8") for x in labels], type=pa.binary())
    lookup = {x.encode("utf-8"): i for i, x in enumerate(labels)}
    table, table_off = _label_table(outs)
    where = str(src)
    unknown = UnknownValues()
    rows = seen = 0
    with src.open("rb") as inp:
        reader = CsvReader(inp, where, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record)
        header = reader.header()
        plan: ColumnPlan = make_plan(header.names)
        col, dropped = plan.index(column), plan.dropped_indices
        fh.write(csvsplit.header_bytes(header, dropped))
        if persons is not None:
            persons.start(header.names)
        with _beside(None if persons is None else persons.add_csv) as collect:
            for chunk in reader.chunks(col):
                recs, buf = chunk.records, chunk.buf
                if collect is not None:
                    collect(chunk)
                idx, quoted = csv_label_indices(pa, pc, buf, recs.fs, recs.fe, value_set, lookup, with_quoted=True)
                bad = np.flatnonzero(idx < 0)
                if len(bad):
                    vals = [_field_text(chunk.data, int(recs.fs[i]), int(recs.fe[i]))
                            for i in bad[: 4 * _KEEP_DISTINCT]]
                    unknown.add(chunk.first_line + recs.lines[bad], vals)
                if unknown.rows:
                    continue  # scanned for the error's counts; nothing more is written
                starts, stops, row, kind = csvsplit.edits_for(recs, col, dropped)
                keep, released = select(seen, idx)
                seen += len(idx)
                if keep is None:
                    per_row = released + n_out * quoted
                else:  # a withheld record goes whole, line break included: its field is never written
                    per_row = np.full(len(idx), 2 * n_out, dtype=np.intp)
                    per_row[keep] = released + n_out * quoted[keep]
                    starts, stops, row, kind = csvsplit.without_records(buf, recs, ~keep, starts, stops, row, kind)
                choice = np.full(len(starts), 2 * n_out, dtype=np.intp)
                choice[kind == 0] = per_row[row[kind == 0]]
                csvsplit.splice_to(fh, buf, recs.end, starts, stops, table, table_off, choice)
                rows += len(released)
                if len(idx):
                    tick(rows)
    if unknown.rows:
        raise unknown.error(where, column, "line(s)")
    return rows


@contextlib.contextmanager
def _beside(add: Callable[..., None] | None) -> Iterator[Callable[..., None] | None]:
    """``add`` (a one-read release's :class:`~metricdp.streaming.persons.PersonCollector`) run beside the release.

    Encoding a chunk's ids (:class:`~metricdp.streaming.persons.PersonCollector`: a compiled
    hash table that releases the GIL) touches nothing the release touches, so on two cores it
    runs while the same chunk is released: :func:`~metricdp.streaming.prefetch.write_behind`
    keeps the chunks in order (codes in order of first sight, as in the caller's thread), and
    an error of a chunk's ids (an empty id, say) is raised at the next hand-over or when the
    block ends -- before the value column's errors, which are raised after it, as before.
    """
    if add is None:
        yield None
        return
    with write_behind(depth=1) as submit:
        yield functools.partial(submit, add)


def _readable(fh: IO[bytes]) -> bool:
    """The temporary output can be read back through its descriptor (Linux's unnamed file is opened read-write)."""
    try:
        import fcntl  # POSIX only

        return (fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) & os.O_ACCMODE) == os.O_RDWR
    except (ImportError, OSError, ValueError, AttributeError):  # pragma: no cover - other platforms
        return False


def _record_cap(mechanism: Any, max_record: int | None) -> int:
    """The longest record of the output: the input's cap plus the longest released field (quoted)."""
    outs = list(getattr(mechanism, "output_labels", mechanism.labels))
    return max_record_bytes(max_record) + max((len(csvsplit.encode_field(str(x), quoted=True)) for x in outs),
                                              default=0)


class _PRead:
    """A read-only view of a descriptor from offset 0 (``pread``: the writer's position is not touched)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.pos = fd, 0

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = max(os.fstat(self.fd).st_size - self.pos, 0)
        data = os.pread(self.fd, n, self.pos)
        self.pos += len(data)
        return data


def _withhold_csv(fh: IO[bytes], keep: NDArray[np.bool_], where: str, cap: int) -> int:
    """Remove the records not ``keep`` from the CSV just written to ``fh``, in place; returns the rows kept.

    The one-read release wrote every input record to ``fh`` (same records, same order; at
    least two columns, so no record is empty and record ``i`` of the output is row ``i``).
    The output is read back by the one record definition and written again from its
    start without the withheld records (each goes whole, line break included, as in the
    two-pass release): what is written never passes what was read (the kept bytes of a
    chunk are written after the chunk is read), so no unread byte is overwritten; the
    file is then cut at its new end. A copy, not a parse of the released column nor a
    release: far cheaper than a second release pass.
    """
    fh.flush()
    fd = fh.fileno()
    reader = CsvReader(cast(IO[bytes], _PRead(fd)), where, chunk_rows=DEFAULT_CHUNK_ROWS,
                       chunk_bytes=DEFAULT_CHUNK_BYTES, max_record=cap)
    reader.header()
    fh.seek(0)
    none, no_rows = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.intp)
    table, table_off = np.zeros(0, dtype=np.uint8), np.zeros(2, dtype=np.int64)  # entry 0: nothing
    seen = 0
    first = True
    for chunk in reader.chunks(0):
        recs = chunk.records
        if first:  # the header's bytes, as written
            fh.write(os.pread(fd, chunk.offset, 0))
            first = False
        n = len(recs.starts)
        if seen + n > keep.size:
            break
        starts, stops, _row, _kind = csvsplit.without_records(chunk.buf, recs, ~keep[seen : seen + n], none, none,
                                                              no_rows, no_rows)
        csvsplit.splice_to(fh, chunk.buf, recs.end, starts, stops, table, table_off,
                           np.zeros(len(starts), dtype=np.intp))
        seen += n
    if seen != keep.size:  # pragma: no cover - the output's records are the input's (docstring)
        raise ValidationError(f"{where}: the output of the release has {seen:,} records, not {keep.size:,}; "
                              "nothing written, nothing spent")
    fh.truncate()
    return int(keep.sum())


def _field_text(pending: bytes, a: int, b: int) -> str:
    raw = pending[a:b]
    if raw[:1] == b'"':
        raw = raw[1:-1].replace(b'""', b'"')
    return raw.decode("utf-8", errors="replace")


# -------------------------------------------------------------------------------- Parquet
def _privatize_parquet(
    mechanism: Any, src: Path, column: str, fh: IO[bytes], select: Select, tick: Any, make_plan: Any, chunk_rows: int,
    persons: PersonCollector | None = None,
) -> int:
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    where = str(src)
    pf = open_parquet(src)
    schema = pf.schema_arrow
    plan: ColumnPlan = make_plan(schema.names)
    j = plan.index(column)
    written = [k for k, name in enumerate(schema.names) if name in set(plan.written)]
    labels = list(mechanism.labels)
    unknown = UnknownValues()
    rows = seen = 0
    if persons is not None:
        persons.start(schema.names, parquet_type=schema.field(persons.column).type)
    outputs = list(getattr(mechanism, "output_labels", labels))
    with ReleaseWriter(pf, written, j, outputs, fh, where, "the mechanism's labels") as writer:
        with _beside(None if persons is None else persons.add_parquet) as collect:
            for batch in pf.iter_batches(batch_size=chunk_rows):
                if collect is not None:
                    collect(batch, seen)
                idx, as_text = parquet_label_indices(pa, pc, batch.column(j), labels)
                bad = np.flatnonzero(idx < 0)
                if len(bad):
                    vals = as_text.take(pa.array(bad[: 4 * _KEEP_DISTINCT])).to_pylist()
                    unknown.add(seen + bad + 1, ["null" if v is None else v for v in vals])
                if unknown.rows:
                    seen += len(idx)
                    continue
                keep, released = select(seen, idx)
                seen += len(idx)
                rows += writer.write(batch, keep, released)
                tick(rows)
    if unknown.rows:
        raise unknown.error(where, column, "row(s)")
    return rows
