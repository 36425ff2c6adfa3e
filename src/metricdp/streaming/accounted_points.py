"""A streamed (lat, lon) release accounted per person: the protocol of :mod:`.accounted` for points.

:func:`~metricdp.streaming.points.privatize_points_file` with ``accounting=`` runs the
protocol of :mod:`metricdp.accounting.plan` over a file of any size, as ``privatize``
does for labels (:mod:`metricdp.streaming.accounted`):

1. **first pass** (:func:`scan_points`): the user column and the two coordinate columns
   are read; every row's coordinates are parsed and checked by the caller's ``validate``
   (finite degrees, inside the lattice's extent) *before* anything is reserved, so a bad
   row is refused with its data row and nothing is spent. Each row keeps a small integer
   code of its person; with ``consistent`` also its true (lat, lon) (16 bytes a row: the
   point is the consistent group's key and the memo's);
2. **plan** (:func:`~metricdp.accounting.plan.plan_release` with ``width=2``): cap,
   consistent groups of (person, point), memo, budget; under ``refuse`` an over-budget
   person stops the run before anything is drawn, written or spent, else the spend is
   reserved. With ``consistent`` one release per fresh group is drawn now and memoized
   under the reservation (the ledger stores it encrypted under a keyed hash of the
   person and the true point, never in clear);
3. **release pass**: a withheld row is not written at all (CSV: the record goes whole,
   line break included; Parquet and GeoJSON: the row is filtered out); a kept row gets
   a fresh release, or its group's;
4. **publish**: the input must be the one planned (size, times, inode; with
   ``consistent`` every row's coordinates compared), then ``publishing``, the atomic
   rename, ``commit``; a failure before ``publishing`` gives the reservation back.

The guarantee per person is the sum of the eps of their fresh releases (sequential
composition, ``docs/proofs/composition.md``); a consistent repeat is post-processing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._progress import Progress, report
from ..accounting.plan import check_additive, plan_release
from ..errors import ValidationError
from ..tabular import csvsplit
from ..tabular.csv import CsvReader
from ..tabular.parquet import open_parquet
from .accounted import AccountedRun, Accounting, _identity
from .persons import FIRST_PASS, SCAN_BYTES, _as_text, _refuse_empty, id_book

__all__ = ["AccountedPointsRun", "scan_points"]

#: ``validate(latlon (k, 2), first_row)``: raises on a row the release would refuse.
Validate = Callable[[NDArray[np.float64], int], None]


def _columns(names: list[str], where: str, user: str, lat: str, lon: str) -> None:
    if user in (lat, lon):
        raise ValidationError(f"{where}: the user column {user!r} is a released coordinate; name the column "
                              "that says who each row belongs to")
    if user not in names:
        shown = ", ".join(repr(h) for h in names[:20])
        raise ValidationError(f"{where}: no user column {user!r} (columns: {shown})")
    for c in (lat, lon):
        if c not in names:
            raise ValidationError(f"{where}: no column {c!r}; available: {', '.join(map(repr, names[:20]))}")


def scan_points(
    src: Path,
    fmt: str,
    user_column: str,
    lat: str,
    lon: str,
    *,
    validate: Validate | None = None,
    keep_points: bool = False,
    chunk_rows: int = 1_000_000,
    chunk_bytes: int = SCAN_BYTES,
    max_record: int | None = None,
    progress: Progress | None = None,
) -> tuple[Any, NDArray[np.signedinteger[Any]], NDArray[np.float64] | None]:
    """``(persons, codes, points)``: ids (Arrow binary, sorted), a code per row, (``keep_points``) the points.

    Coordinates are parsed by the release's own rules (:func:`~metricdp.streaming.point_columns.parse_column`,
    :func:`~metricdp.streaming.point_columns.column_floats`) and passed to ``validate`` chunk by chunk.
    """
    from .point_columns import column_floats, parse_column

    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    where = str(src)
    book = id_book(pa, pc, src.stat().st_size)  # the compiled id table for large inputs
    found: list[NDArray[np.float64]] = []
    seen = 0

    def points(pts: NDArray[np.float64]) -> None:
        nonlocal seen
        if validate is not None:
            validate(pts, seen + 1)
        if keep_points:
            found.append(pts)
        seen += len(pts)
        report(progress, seen, None, FIRST_PASS)

    if fmt == "csv":
        with src.open("rb") as inp:
            reader = CsvReader(inp, where, chunk_rows=chunk_rows, chunk_bytes=max(chunk_bytes, SCAN_BYTES),
                               max_record=max_record)
            names = list(reader.header().names)
            _columns(names, where, user_column, lat, lon)
            ucol, i, j = names.index(user_column), names.index(lat), names.index(lon)
            for chunk in reader.chunks(ucol):
                recs, buf = chunk.records, chunk.buf
                if not len(recs.starts):
                    continue
                data, offs, quoted, raw_quoted = csvsplit.field_values(buf, recs.fs, recs.fe)
                values = pa.Array.from_buffers(pa.binary(), len(offs) - 1,
                                               [None, pa.py_buffer(offs), pa.py_buffer(data)])
                if quoted.any():
                    values = pc.replace_with_mask(values, pa.array(quoted), pa.array(raw_quoted, type=pa.binary()))
                _refuse_empty(np.asarray(pc.binary_length(values).to_numpy(zero_copy_only=False)), where,
                              user_column, chunk.first_line + recs.lines, "line(s)")
                book.add(values)
                points(np.column_stack([parse_column(chunk, i, lat, where, seen + 1),
                                        parse_column(chunk, j, lon, where, seen + 1)]))
    else:
        pf = open_parquet(src)
        names = list(pf.schema_arrow.names)
        _columns(names, where, user_column, lat, lon)
        utype = pf.schema_arrow.field(user_column).type
        if not (pa.types.is_integer(utype) or pa.types.is_string(utype) or pa.types.is_large_string(utype)
                or pa.types.is_binary(utype) or pa.types.is_dictionary(utype)):
            raise ValidationError(f"{where}: user column {user_column!r} has type {utype}: person ids must be "
                                  "integers or text")
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=[user_column, lat, lon]):
            ids = batch.column(0)
            rows = seen + 1 + np.arange(len(ids), dtype=np.int64)
            if ids.null_count:
                _refuse_empty(np.where(np.asarray(ids.is_null().to_numpy(zero_copy_only=False)), 0, 1), where,
                              user_column, rows, "row(s)")
            as_bin = _as_text(pa, pc, ids, where, user_column, seen)
            _refuse_empty(np.asarray(pc.binary_length(as_bin).to_numpy(zero_copy_only=False)), where, user_column,
                          rows, "row(s)")
            book.add(as_bin)
            points(np.column_stack([column_floats(batch, 1, lat, where, seen + 1),
                                    column_floats(batch, 2, lon, where, seen + 1)]))
    persons, codes = book.finish()
    pts = None
    if keep_points:
        pts = np.concatenate(found) if found else np.zeros((0, 2))
    return persons, codes, pts


class AccountedPointsRun(AccountedRun):
    """One accounted (lat, lon) release in progress (module docstring); ``labels`` holds the true points."""

    @classmethod
    def start_points(cls, src: Path, fmt: str, lat: str, lon: str, epsilon: float, acc: Accounting,
                     release: Any, validate: Validate | None, source: Any, *, chunk_rows: int, chunk_bytes: int,
                     max_record: int | None, progress: Any = None) -> AccountedPointsRun:
        """First pass and plan: the budget is reserved (or the run refused) before anything is drawn."""
        check_additive(acc.additive, acc.ledger.budget if acc.ledger is not None else acc.budget)  # before a pass
        identity = _identity(src)
        persons, codes, pts = scan_points(src, fmt, acc.user_column, lat, lon, validate=validate,
                                          keep_points=acc.consistent, chunk_rows=chunk_rows,
                                          chunk_bytes=chunk_bytes, max_record=max_record, progress=progress)
        if codes.size == 0:
            raise ValidationError(f"{src}: no data rows")
        plan = plan_release(codes, epsilon, budget=acc.budget, ledger=acc.ledger,
                            max_rows_per_user=acc.max_rows_per_user, policy=acc.policy, consistent=acc.consistent,
                            true_values=pts, scope=acc.scope, width=2, rng=source, run_id=acc.run_id,
                            mechanism=acc.mechanism, persons=persons, unit="km", additive=acc.additive)
        try:
            group_release = None
            if acc.consistent and pts is not None:
                rows = plan.group_row[plan.fresh]
                drawn = release(pts[rows], 1) if rows.size else np.zeros((0, 2))
                group_release = np.asarray(plan.releases(np.asarray(drawn, dtype=np.float64)), dtype=np.float64)
        except BaseException:
            plan.abort()
            raise
        return cls(src, plan, len(persons), pts, group_release, release, identity)  # type: ignore[arg-type]

    def select(self, start: int, pts: NDArray[Any]) -> tuple[NDArray[np.bool_], NDArray[Any]]:
        """Rows ``start..start+len(pts)`` of the release pass: which are written, and their releases (k, 2)."""
        stop = start + len(pts)
        if stop > self.rows:
            raise self._changed()
        keep = self.plan.keep[start:stop]
        self.seen = stop
        if self.group_release is not None and self.labels is not None:
            if not np.array_equal(pts, self.labels[start:stop]):
                raise self._changed()
            return keep, self.group_release[self.plan.group[start:stop][keep]]
        if not keep.any():
            return keep, np.zeros((0, 2))
        return keep, np.asarray(self.release(pts[keep], start + 1 + int(np.argmax(keep))), dtype=np.float64)
