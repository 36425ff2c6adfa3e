"""Release one numeric column of a CSV or Parquet file of any size on a fixed-step grid.

The file layer is :mod:`metricdp.streaming.files`'s: the same record definition
(:mod:`metricdp.tabular.csv`), the same column plan (``keep``/``drop``, the returned
:class:`~metricdp.streaming.files.ReleaseStats` names every column that left with true
values), the same byte-exact CSV splice (:mod:`metricdp.streaming.csvsplit`: every byte
outside the released and dropped columns is copied), the same Parquet batch writer, the
same atomic output (:func:`metricdp.io.atomic_write`: a temporary file renamed at the
end, nothing published on error) and one random source for the whole file. What differs
is how a field becomes an input: it is read as a number and mapped to its rank on the
grid (:class:`~metricdp.mechanisms.numeric.NumericGrid`), and the release is a rank of a
:class:`~metricdp.mechanisms.numeric.NumberMechanism` written as the grid point's text.

What a number is
----------------
:func:`metricdp.io.parse_decimal`, the one CSV number rule: Python's ``float`` of a plain
ASCII decimal (sign, digits, point, exponent; surrounding ASCII blanks allowed; no ``_``,
no non-ASCII digits). The fast path casts a chunk with Arrow (``fast_float``, correctly
rounded like ``float``); a chunk the cast refuses (a blank-padded or quoted number, or a
bad field) is read field by field, the fields matching the plain-decimal pattern still by
Arrow and every other field by :func:`~metricdp.io.parse_decimal` itself. Parquet
integer, floating and decimal columns are read as numbers, string columns as text.

Refused values
--------------
A field that is not a number, is NaN or infinite, lies outside the range, or lies off the
grid stops the release: the rest of the file is still read so that the one error gives
the count and the first lines (file, line, column, value, reason), and nothing is
written. ``out_of_range="clamp"`` moves values outside the range to its nearest end
instead (clamping is 1-Lipschitz, so the guarantee ``epsilon |x - x'|`` holds for every
pair of real values), ``off_grid="round"`` moves an off-grid value to the nearest grid
point (then the guarantee is ``epsilon (|x - x'| + step)``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._progress import Progress, report
from .._random import check_rng, warn_unless_secure
from ..errors import ValidationError
from ..io import atomic_write
from ..mechanisms._kernel_loader import LAZY, lattice_kernels
from ..mechanisms.numeric import NumberMechanism, inexact_integers
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader
from ..tabular.leaks import LeakRule, check_table
from ..tabular.parquet import ReleaseWriter, open_parquet
from . import csvsplit
from .accounted import Settlement
from .files import DEFAULT_CHUNK_ROWS, ReleaseStats, _label_table, file_format
from .number_text import _SHOW, BadNumbers, _field_text, parse_numbers
from .prefetch import prefetch, write_behind

if TYPE_CHECKING:
    from .accounted import Accounting

__all__ = ["OFF_GRID", "OUT_OF_RANGE", "BadNumbers", "parse_numbers", "privatize_numbers_file"]

OUT_OF_RANGE = ("error", "clamp")
OFF_GRID = ("error", "round")
def _status(mechanism: NumberMechanism, numbers: NDArray[np.float64], not_number: NDArray[np.bool_],
            empty: NDArray[np.bool_], out_of_range: str, off_grid: str) -> tuple[NDArray[np.intp], NDArray[np.int8]]:
    ranks, st = mechanism.grid.ranks(numbers, clamp=out_of_range == "clamp", snap=off_grid == "round")
    status = np.where(st == 0, 0, st + 1).astype(np.int8)  # grid codes 1..3 -> reasons 2..4
    status[not_number] = 1
    status[empty] = 5
    return ranks, status


def privatize_numbers_file(
    mechanism: NumberMechanism,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    rng: object = None,
    out_of_range: Literal["error", "clamp"] = "error",
    off_grid: Literal["error", "round"] = "error",
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    inputs: Sequence[str | PathLike[str]] = (),
    progress: Progress | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    max_record: int | None = None,
    accounting: Accounting | None = None,
) -> ReleaseStats:
    """Replace every value of ``column`` by a release of ``mechanism``; write ``out`` (same format).

    See the module docstring for the number rule, the refusals and the options.
    ``accounting`` makes it a release per person (:mod:`metricdp.streaming.accounted_numbers`:
    a first pass over the user and released columns that refuses what the release would
    refuse before any budget is reserved, withheld rows left out, the ledger reserved
    before and committed after the publish); :attr:`ReleaseStats.accounting` is then its report.

    Raises
    ------
    ValidationError
        A missing column, a bad ``keep``/``drop`` name, values that cannot be released
        (count, first lines and reasons), a malformed file (line and byte offset).
    UnsafeOutputError
        ``out`` is a device, a directory, the input, ... (nothing written).
    """
    if not isinstance(mechanism, NumberMechanism):
        raise ValidationError(f"mechanism must be a NumberMechanism, got {type(mechanism).__name__}")
    if out_of_range not in OUT_OF_RANGE:
        raise ValidationError(f"out_of_range must be one of {', '.join(OUT_OF_RANGE)}, got {out_of_range!r}")
    if off_grid not in OFF_GRID:
        raise ValidationError(f"off_grid must be one of {', '.join(OFF_GRID)}, got {off_grid!r}")
    src = Path(input_path)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    if chunk_rows < 1 or chunk_bytes < 1:
        raise ValidationError(f"chunk_rows and chunk_bytes must be >= 1, got {chunk_rows}, {chunk_bytes}")
    fmt = file_format(src)
    # what leaves, by name and content, before anything is written or reserved
    check_table(src, LeakRule.numbers(column, mechanism), keep=keep, drop=drop, max_record=max_record)
    warn_unless_secure(rng, stacklevel=2)
    source = check_rng(rng)  # ONE stream for the whole file
    t0 = time.perf_counter()
    plans: list[ColumnPlan] = []

    def make_plan(names: Sequence[str]) -> ColumnPlan:
        plans.append(plan_columns(names, [column], keep=keep, drop=drop, where=str(src)))
        return plans[0]

    def tick(rows: int) -> None:
        report(progress, rows, None, "releasing")

    def classify(numbers: NDArray[np.float64], bad: NDArray[np.bool_], empty: NDArray[np.bool_]) -> Any:
        return _status(mechanism, numbers, bad, empty, out_of_range, off_grid)

    def release(ranks: NDArray[np.intp]) -> NDArray[np.intp]:
        return mechanism.draw(ranks, source)

    def every_row(_start: int, ranks: NDArray[np.intp]) -> tuple[None, NDArray[np.intp]]:
        return None, release(ranks)

    run = None
    if accounting is not None:  # the first pass and the plan: budget reserved, nothing drawn for the file yet
        from ..tabular.header import table_header
        from .accounted_numbers import start_numbers

        make_plan(table_header(src, [column]))  # the column plan's errors before the first pass
        run = start_numbers(mechanism, src, fmt, column, accounting, classify, release, source,
                            chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record, progress=progress)
    select = every_row if run is None else run.select
    with Settlement(run), atomic_write(out, "wb", inputs=[src, *inputs]) as fh:
        if fmt == "csv":
            rows = _csv(mechanism, src, column, fh, select, classify, tick, make_plan, chunk_rows, chunk_bytes,
                        max_record)
        else:
            rows = _parquet(mechanism, src, column, fh, select, classify, tick, make_plan, chunk_rows)
        if run is not None:
            run.publishing()  # checks the input is unchanged; from here on the spend stays
    return ReleaseStats(rows, time.perf_counter() - t0, fmt, plans[0], None if run is None else run.report())


#: Inputs of at least this many bytes are read and written by the compiled kernels (numba, when installed):
#: importing numba costs about 0.3-0.5 s, which the kernels win back only over tens of MB.
COMPILED_FROM_BYTES = 32 * 2**20
_KERNELS: Any = LAZY  # loaded for a large input only (None: numpy)


def _csv(mechanism: NumberMechanism, src: Path, column: str, fh: IO[bytes], select: Any, classify: Any, tick: Any,
         make_plan: Any, chunk_rows: int, chunk_bytes: int, max_record: int | None) -> int:
    outs = mechanism.output_labels
    n_out = len(outs)
    table, table_off = _label_table(outs)
    where = str(src)
    bad_rows = BadNumbers()
    kernels = lattice_kernels(_KERNELS) if src.stat().st_size >= COMPILED_FROM_BYTES else None
    rows = seen = 0
    with src.open("rb") as inp:
        reader = CsvReader(inp, where, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record,
                           kernels=kernels)
        header = reader.header()
        plan: ColumnPlan = make_plan(header.names)
        col, dropped = plan.index(column), plan.dropped_indices

        def parsed() -> Iterator[tuple[Any, Any, Any, Any]]:  # read ahead in a worker thread (no randomness there)
            for chunk in reader.chunks(col):
                recs = chunk.records
                numbers, quoted = _chunk_numbers(chunk, kernels)
                empty = recs.fe == recs.fs
                ranks, status = classify(numbers[0], numbers[1], empty)
                yield chunk, ranks, status, quoted

        fh.write(csvsplit.header_bytes(header, dropped))
        with write_behind() as submit:  # splicing and writing in a writer thread, in order
            for chunk, ranks, status, quoted in prefetch(parsed()):
                recs = chunk.records
                refused = np.flatnonzero(status)
                if refused.size:
                    texts = [_field_text(chunk.data, int(recs.fs[i]), int(recs.fe[i])) for i in refused[:_SHOW]]
                    bad_rows.add(chunk.first_line + recs.lines[refused], texts, status[refused])
                if bad_rows.rows:
                    continue  # scanned for the error's counts; nothing more is written
                keep = None
                if len(ranks):
                    keep, drawn = select(seen, ranks)
                    seen += len(ranks)
                    rows += len(drawn)
                    released = drawn + n_out * quoted if keep is None else drawn + n_out * quoted[keep]
                else:
                    released = np.zeros(0, dtype=np.intp)
                submit(_write_chunk, fh, chunk, col, dropped, released, keep, table, table_off, kernels)
                if len(ranks):
                    tick(rows)
    if bad_rows.rows:
        raise bad_rows.error(where, column, mechanism.grid, "line")
    return rows


def _write_chunk(fh: IO[bytes], chunk: Any, col: int, dropped: tuple[int, ...], released: NDArray[np.intp],
                 keep: NDArray[np.bool_] | None, table: NDArray[np.uint8], table_off: NDArray[np.int64],
                 kernels: Any) -> None:
    """The chunk's records with the released labels (``released``: table entries of the kept records) spliced in.

    A withheld record (``keep`` False) goes whole, line break included: its field is never written.
    """
    recs, buf = chunk.records, chunk.buf
    removal = len(table_off) - 2  # the empty entry
    starts, stops, row, kind = csvsplit.edits_for(recs, col, dropped)
    if keep is not None:
        full = np.full(len(keep), removal, dtype=np.intp)
        full[keep] = released
        released = full
        starts, stops, row, kind = csvsplit.without_records(buf, recs, ~keep, starts, stops, row, kind)
    choice = np.full(len(starts), removal, dtype=np.intp)
    if len(released):
        choice[kind == 0] = released[row[kind == 0]]
    if kernels is not None:
        fh.write(kernels["splice_table"](buf, recs.end, starts, stops, table, table_off, choice).data)
    else:
        csvsplit.splice_to(fh, buf, recs.end, starts, stops, table, table_off, choice)


def _chunk_numbers(chunk: Any, kernels: Any) -> tuple[tuple[NDArray[np.float64], NDArray[np.bool_]],
                                                      NDArray[np.bool_]]:
    """((numbers, not a number), quoted) of a chunk's released fields, by the one number rule.

    The compiled ``parse_decimals`` reads plain decimals of up to 15 digits exactly as
    :func:`metricdp.io.parse_decimal` does; a chunk with any other field is read by
    :func:`~metricdp.streaming.number_text.parse_numbers` whole.
    """
    recs, buf = chunk.records, chunk.buf
    if kernels is not None:
        numbers, ok = kernels["parse_decimals"](buf, recs.fs, recs.fe)
        if ok.all():
            none = np.zeros(len(ok), dtype=bool)
            return (numbers, none), none
    pa = import_optional("pyarrow", extra="parquet")
    data_, offs, quoted, raw_quoted = csvsplit.field_values(buf, recs.fs, recs.fe)
    values = pa.Array.from_buffers(pa.string(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data_)])
    return parse_numbers(values, quoted, raw_quoted), quoted


def _inexact_integers(col: Any, numbers: NDArray[np.float64]) -> NDArray[np.bool_]:
    """:func:`~metricdp.mechanisms.numeric.inexact_integers` of an Arrow integer column (nulls as 0)."""
    pc = import_optional("pyarrow.compute", extra="parquet")
    return inexact_integers(np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False)), numbers)


def _parquet(mechanism: NumberMechanism, src: Path, column: str, fh: IO[bytes], select: Any, classify: Any,
             tick: Any, make_plan: Any, chunk_rows: int) -> int:
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    where = str(src)
    pf = open_parquet(src)
    schema = pf.schema_arrow
    plan: ColumnPlan = make_plan(schema.names)
    j = plan.index(column)
    field = schema.field(j)
    kind = field.type
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
    if not (numeric or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise ValidationError(f"{where}: column {column!r} has type {kind}; numbers or text expected")
    written = [k for k, name in enumerate(schema.names) if name in set(plan.written)]
    bad_rows = BadNumbers()
    rows = seen = 0
    with ReleaseWriter(pf, written, j, list(mechanism.output_labels), fh, where,
                       "the released grid points") as writer:
        for batch in pf.iter_batches(batch_size=chunk_rows):
            col = batch.column(j)
            empty = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            inexact = None
            if numeric:
                # safe=False: an integer past 2**53 rounds; _inexact_integers marks those that moved
                # a decimal goes through its text: Arrow's decimal -> float64 cast is not correctly rounded
                # (14.0891 misses by an ulp), its string -> float64 cast is, like parse_decimal
                exact = pc.cast(col, pa.string()) if pa.types.is_decimal(kind) else col
                filled = pc.fill_null(pc.cast(exact, pa.float64(), safe=False), 0.0)
                numbers = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.float64)
                not_number = np.zeros(len(col), dtype=bool)
                if pa.types.is_integer(kind):
                    inexact = _inexact_integers(col, numbers)
            else:
                numbers, not_number = parse_numbers(pc.fill_null(col.cast(pa.string()), "0"))
            ranks, status = classify(numbers, not_number, empty)
            if inexact is not None and inexact.any():
                status[inexact & (status == 0)] = 4  # the float is a grid point, the integer is not
            refused = np.flatnonzero(status)
            if refused.size:
                texts = ["null" if v is None else str(v) for v in col.take(pa.array(refused[:_SHOW])).to_pylist()]
                bad_rows.add(seen + refused + 1, texts, status[refused])
            if bad_rows.rows:
                seen += len(col)
                continue
            keep, drawn = select(seen, ranks)
            seen += len(col)
            rows += writer.write(batch, keep, drawn)
            tick(rows)
    if bad_rows.rows:
        raise bad_rows.error(where, column, mechanism.grid, "row")
    return rows
