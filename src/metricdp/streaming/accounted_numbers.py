"""A streamed release of a numeric column accounted per person: the protocol of :mod:`.accounted` for numbers.

:func:`~metricdp.streaming.numbers.privatize_numbers_file` with ``accounting=`` runs the
protocol of :mod:`metricdp.accounting.plan` as ``privatize`` does for labels
(:mod:`metricdp.streaming.accounted`), the true value of a row being its rank on the grid:

1. **first pass** (:func:`scan_numbers`): the user column and the released column are
   read; every value is parsed and placed on the grid by the release's own rule, so a
   value the release would refuse is refused here with the same error (count, first
   lines, reasons) *before* anything is reserved. Each row keeps a small integer code of
   its person and, with ``consistent``, its rank;
2. **plan**, **release pass**, **publish**: :class:`~metricdp.streaming.accounted.AccountedRun`
   unchanged (a rank is a label index: one release per fresh (person, rank) group,
   memoized in the ledger under a keyed hash, withheld rows not written, the input
   compared row by row and by identity before the atomic rename).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._progress import Progress, report
from ..accounting.plan import plan_release
from ..errors import ValidationError
from ..tabular import csvsplit
from ..tabular.csv import CsvReader
from ..tabular.parquet import open_parquet
from .accounted import AccountedRun, Accounting, _identity
from .persons import FIRST_PASS, SCAN_BYTES, _as_text, _refuse_empty, id_book

__all__ = ["scan_numbers", "start_numbers"]

#: ``classify(numbers, not_number, empty) -> (ranks, status)`` (status 0: releasable).
Classify = Callable[[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]], tuple[NDArray[np.intp], Any]]


def _user_column(names: list[str], where: str, user: str, column: str) -> None:
    if user == column:
        raise ValidationError(f"{where}: the user column {user!r} is the released column; name the column that "
                              "says who each row belongs to")
    if user not in names:
        shown = ", ".join(repr(h) for h in names[:20])
        raise ValidationError(f"{where}: no user column {user!r} (columns: {shown})")


def scan_numbers(src: Path, fmt: str, user_column: str, column: str, classify: Classify, grid: Any, *,
                 keep_ranks: bool = False, chunk_rows: int = 1_000_000, chunk_bytes: int = SCAN_BYTES,
                 max_record: int | None = None, progress: Progress | None = None,
                 ) -> tuple[Any, NDArray[np.signedinteger[Any]], NDArray[np.intp] | None]:
    """``(persons, codes, ranks)``: ids (Arrow binary, sorted), a code per row, (``keep_ranks``) the ranks."""
    from .number_text import _SHOW, BadNumbers, _field_text, parse_numbers

    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    where = str(src)
    book = id_book(pa, pc, src.stat().st_size)  # the compiled id table for large inputs
    found: list[NDArray[np.intp]] = []
    bad_rows = BadNumbers()
    seen = 0
    if fmt == "csv":
        with src.open("rb") as inp:
            reader = CsvReader(inp, where, chunk_rows=chunk_rows, chunk_bytes=max(chunk_bytes, SCAN_BYTES),
                               max_record=max_record)
            names = list(reader.header().names)
            _user_column(names, where, user_column, column)
            ucol, col = names.index(user_column), names.index(column)
            for chunk in reader.chunks(ucol):
                recs, buf = chunk.records, chunk.buf
                if not len(recs.starts):
                    continue
                data, offs, quoted, raw_quoted = csvsplit.field_values(buf, recs.fs, recs.fe)
                ids = pa.Array.from_buffers(pa.binary(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
                if quoted.any():
                    ids = pc.replace_with_mask(ids, pa.array(quoted), pa.array(raw_quoted, type=pa.binary()))
                lines = chunk.first_line + recs.lines
                _refuse_empty(np.asarray(pc.binary_length(ids).to_numpy(zero_copy_only=False)), where, user_column,
                              lines, "line(s)")
                book.add(ids)
                fs, fe = recs.field(col)
                vdata, voffs, vquoted, vraw = csvsplit.field_values(buf, fs, fe)
                values = pa.Array.from_buffers(pa.string(), len(voffs) - 1,
                                               [None, pa.py_buffer(voffs), pa.py_buffer(vdata)])
                numbers, not_number = parse_numbers(values, vquoted, vraw)
                ranks, status = classify(numbers, not_number, fe == fs)
                refused = np.flatnonzero(status)
                if refused.size:
                    texts = [_field_text(chunk.data, int(fs[i]), int(fe[i])) for i in refused[:_SHOW]]
                    bad_rows.add(lines[refused], texts, status[refused])
                if keep_ranks:
                    found.append(np.asarray(ranks, dtype=np.intp))
                seen += len(recs.starts)
                report(progress, seen, None, FIRST_PASS)
        unit = "line"
    else:
        pf = open_parquet(src)
        names = list(pf.schema_arrow.names)
        _user_column(names, where, user_column, column)
        utype, kind = pf.schema_arrow.field(user_column).type, pf.schema_arrow.field(column).type
        if not (pa.types.is_integer(utype) or pa.types.is_string(utype) or pa.types.is_large_string(utype)
                or pa.types.is_binary(utype) or pa.types.is_dictionary(utype)):
            raise ValidationError(f"{where}: user column {user_column!r} has type {utype}: person ids must be "
                                  "integers or text")
        numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
        if not (numeric or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise ValidationError(f"{where}: column {column!r} has type {kind}; numbers or text expected")
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=[user_column, column]):
            ids, col_ = batch.column(0), batch.column(1)
            rows = seen + 1 + np.arange(len(ids), dtype=np.int64)
            if ids.null_count:
                _refuse_empty(np.where(np.asarray(ids.is_null().to_numpy(zero_copy_only=False)), 0, 1), where,
                              user_column, rows, "row(s)")
            as_bin = _as_text(pa, pc, ids, where, user_column, seen)
            _refuse_empty(np.asarray(pc.binary_length(as_bin).to_numpy(zero_copy_only=False)), where, user_column,
                          rows, "row(s)")
            book.add(as_bin)
            empty = np.asarray(col_.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            if numeric:
                numbers = np.asarray(pc.fill_null(pc.cast(col_, pa.float64()), 0.0).to_numpy(zero_copy_only=False),
                                     dtype=np.float64)
                not_number = np.zeros(len(col_), dtype=bool)
            else:
                numbers, not_number = parse_numbers(pc.fill_null(col_.cast(pa.string()), "0"))
            ranks, status = classify(numbers, not_number, empty)
            refused = np.flatnonzero(status)
            if refused.size:
                texts = ["null" if v is None else str(v) for v in col_.take(pa.array(refused[:_SHOW])).to_pylist()]
                bad_rows.add(rows[refused], texts, status[refused])
            if keep_ranks:
                found.append(np.asarray(ranks, dtype=np.intp))
            seen += len(ids)
            report(progress, seen, None, FIRST_PASS)
        unit = "row"
    if bad_rows.rows:
        raise bad_rows.error(where, column, grid, unit)
    persons, codes = book.finish()
    ranks_out = None
    if keep_ranks:
        ranks_out = np.concatenate(found) if found else np.zeros(0, dtype=np.intp)
    return persons, codes, ranks_out


def start_numbers(mechanism: Any, src: Path, fmt: str, column: str, acc: Accounting, classify: Classify,
                  release: Callable[[NDArray[np.intp]], NDArray[np.intp]], source: Any, *, chunk_rows: int,
                  chunk_bytes: int, max_record: int | None, progress: Progress | None = None) -> AccountedRun:
    """First pass and plan: the budget is reserved (or the run refused) before anything is drawn."""
    identity = _identity(src)
    persons, codes, ranks = scan_numbers(src, fmt, acc.user_column, column, classify, mechanism.grid,
                                         keep_ranks=acc.consistent, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes,
                                         max_record=max_record, progress=progress)
    if codes.size == 0:
        raise ValidationError(f"{src}: no data rows")
    plan = plan_release(codes, float(mechanism.epsilon), budget=acc.budget, ledger=acc.ledger,
                        max_rows_per_user=acc.max_rows_per_user, policy=acc.policy, consistent=acc.consistent,
                        true_values=ranks, scope=acc.scope, rng=source, run_id=acc.run_id, mechanism=acc.mechanism,
                        persons=persons, unit=f"unit of {column!r}")
    try:
        group_release = None
        if acc.consistent and ranks is not None:
            fresh_rows = plan.group_row[plan.fresh]
            drawn = release(ranks[fresh_rows]) if fresh_rows.size else np.zeros(0, dtype=np.intp)
            group_release = np.asarray(plan.releases(np.asarray(drawn, dtype=np.int64)), dtype=np.intp)
    except BaseException:
        plan.abort()
        raise
    return AccountedRun(src, plan, len(persons), ranks, group_release, release, identity)
