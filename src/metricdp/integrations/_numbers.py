"""``privatize-numbers --engine dask|spark``: a numeric column released on a grid, piece by piece on a cluster.

The shape of :mod:`._run` (plan, pieces, parts, check, join, publish) with the number
rule of the local engine (:mod:`metricdp.streaming.numbers`) in place of the label lookup:

1. the driver reads the input once with the local engine's record definition and column
   plan (:class:`~metricdp.tabular.csv.CsvReader`, :func:`~metricdp.tabular.columns.plan_columns`),
   parses every field of the column by the one number rule
   (:func:`~metricdp.streaming.number_text.parse_numbers`) and places it on the grid by
   the release's own rule (:func:`metricdp.streaming.numbers._status`: range, grid,
   ``out_of_range``, ``off_grid``), so a value the local engine refuses is refused here
   with the local engine's one error (count per reason, first lines) before any task
   runs; it cuts the file into :class:`~._plan.Piece` s of whole records (CSV: byte
   ranges; Parquet: runs of row groups);
2. each task (:meth:`NumberRule.release`) re-reads its piece with the same record
   definition, places it on the grid again (a value that is no longer releasable means
   the file changed: refused), draws its releases from
   :func:`~metricdp.integrations.partition_rng` ``(seed, piece)`` (secure by default) and
   writes the local engine's bytes for those records: CSV fields spliced with the grid
   points' text (quoted where the input field was), every other byte kept, dropped
   columns removed; Parquet row groups with the column replaced, the schema kept;
3. the driver checks every part's row count, joins the parts and publishes atomically.

With ``accounting`` the driver plans per person as the local engine plans
(:func:`metricdp.pipeline.first_pass.start_accounted`: one reservation per job) and
each piece carries the rows it writes (and, for consistent releases, their releases).

Same output as the local engine: for a given input the engines write the local engine's
bytes everywhere but in the released fields, which are draws of the same law; where a
release is determined (a consistent repeat of a paid release, read back from the ledger)
the output is the local engine's byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError
from ..tabular import csvsplit
from ..tabular.csv import DEFAULT_CHUNK_BYTES
from ..tabular.leaks import LeakRule
from ._labels import Outputs
from ._pieces import parquet_part, released
from ._plan import DEFAULT_PIECE_BYTES, Piece, Plan, changed, plan_table, read_piece

__all__ = ["NumberCheck", "NumberRule", "plan_numbers"]

#: ``classify(numbers, not_number, empty) -> (ranks, status)`` (status 0: releasable).
Classify = Callable[[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]], tuple[NDArray[np.intp], Any]]


@dataclass(frozen=True)
class NumberRule:
    """How a field becomes a grid rank: the local engine's ``out_of_range`` and ``off_grid``."""

    out_of_range: str = "error"
    off_grid: str = "error"

    def classify(self, mechanism: Any) -> Classify:
        from ..pipeline.numbers import Numbers

        return Numbers(mechanism, "", None, out_of_range=self.out_of_range, off_grid=self.off_grid).classify

    def release(self, job: Any, piece: Piece, mechanism: Any) -> tuple[bytes, int]:
        """The part file's bytes of ``piece`` and its rows (called by :func:`._pieces.release_piece`)."""
        classify = self.classify(mechanism)
        if job.plan.fmt == "csv":
            return _release_csv(job, piece, mechanism, classify)
        return _release_parquet(job, piece, mechanism, classify)


# ------------------------------------------------------------------------------ one chunk
def csv_ranks(buf: NDArray[np.uint8], recs: Any, classify: Classify) -> tuple[NDArray[np.intp], Any, Any]:
    """Grid ranks, status and quoted flags of the located field of each record (the local engine's rule)."""
    from ..streaming.number_text import parse_numbers

    pa = import_optional("pyarrow", extra="parquet")
    data, offs, quoted, raw_quoted = csvsplit.field_values(buf, recs.fs, recs.fe)
    values = pa.Array.from_buffers(pa.string(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
    numbers, not_number = parse_numbers(values, quoted, raw_quoted)
    ranks, status = classify(numbers, not_number, recs.fe == recs.fs)
    return ranks, status, quoted


def _numeric(kind: Any) -> bool:
    pa = import_optional("pyarrow", extra="parquet")
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind))


def parquet_ranks(col: Any, classify: Classify) -> tuple[NDArray[np.intp], Any]:
    """Grid ranks and status of a Parquet column's values (the local engine's rule: text, numbers, decimals)."""
    from ..mechanisms.numeric import inexact_integers
    from ..streaming.number_text import parse_numbers

    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    kind = col.type
    empty = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    inexact = None
    if _numeric(kind):
        exact = pc.cast(col, pa.string()) if pa.types.is_decimal(kind) else col  # decimals through their text
        numbers = np.asarray(pc.fill_null(pc.cast(exact, pa.float64(), safe=False), 0.0)
                             .to_numpy(zero_copy_only=False), dtype=np.float64)
        not_number = np.zeros(len(col), dtype=bool)
        if pa.types.is_integer(kind):
            inexact = inexact_integers(np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False)), numbers)
    else:
        numbers, not_number = parse_numbers(pc.fill_null(col.cast(pa.string()), "0"))
    ranks, status = classify(numbers, not_number, empty)
    if inexact is not None and inexact.any():
        status[inexact & (status == 0)] = 4  # the float is a grid point, the integer is not
    return ranks, status


# ------------------------------------------------------------------------------ driver
def plan_numbers(
    src: Path, column: str, mechanism: Any, rule: NumberRule, *, piece_bytes: int = DEFAULT_PIECE_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES, keep: Sequence[str] = (), drop: Sequence[str] = (),
    max_record: int | None = None,
) -> Plan:
    """Check every value of ``column`` of ``src`` as the local engine would and cut the file into pieces.

    Raises
    ------
    ValidationError
        the local engine's errors, with its messages: the column plan's, the record
        definition's (line and byte offset), the values that cannot be released (count
        per reason, first lines or rows, "nothing written").
    """
    return plan_table(src, column, lambda: NumberCheck(mechanism, rule.classify(mechanism)), piece_bytes=piece_bytes,
                      chunk_bytes=chunk_bytes, keep=keep, drop=drop, max_record=max_record,
                      leak=LeakRule.numbers(column, mechanism))


class NumberCheck:
    """The values of a numbers release (:class:`._plan.ValueCheck`): every one a number the release can
    place on the grid (``classify``); a refused value's message: count per reason, first lines or rows."""

    def __init__(self, mechanism: Any, classify: Classify) -> None:
        from ..streaming.number_text import BadNumbers

        self.mechanism = mechanism
        self.classify = classify
        self.bad = BadNumbers()

    def check_type(self, kind: Any, where: str, column: str) -> None:
        pa = import_optional("pyarrow", extra="parquet")
        if not (_numeric(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise ValidationError(f"{where}: column {column!r} has type {kind}; numbers or text expected")
        out_values(self.mechanism, kind, where, column)

    def csv(self, chunk: Any) -> None:
        from ..streaming.number_text import _SHOW, _field_text

        recs = chunk.records
        _, status, _ = csv_ranks(chunk.buf, recs, self.classify)
        refused = np.flatnonzero(status)
        if refused.size:
            texts = [_field_text(chunk.data, int(recs.fs[i]), int(recs.fe[i])) for i in refused[:_SHOW]]
            self.bad.add(chunk.first_line + recs.lines[refused], texts, status[refused])

    def parquet(self, col: Any, seen: int) -> None:
        from ..streaming.number_text import _SHOW

        pa = import_optional("pyarrow", extra="parquet")
        _, status = parquet_ranks(col, self.classify)
        refused = np.flatnonzero(status)
        if refused.size:
            texts = ["null" if v is None else str(v) for v in col.take(pa.array(refused[:_SHOW])).to_pylist()]
            self.bad.add(seen + refused + 1, texts, status[refused])

    def error(self, where: str, column: str, *, csv: bool) -> ValidationError | None:
        return self.bad.error(where, column, self.mechanism.grid, "line" if csv else "row") if self.bad.rows else None


def out_values(mechanism: Any, kind: Any, where: str, column: str) -> Any:
    """The grid points a release may take, as an Arrow array of the column's type (the local engine's error)."""
    pa = import_optional("pyarrow", extra="parquet")
    try:
        return pa.array(mechanism.output_labels, type=pa.string()).cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as ex:
        raise ValidationError(
            f"{where}: column {column!r} has type {kind}; the released grid points cannot be written as it ({ex})"
        ) from None


# ------------------------------------------------------------------------------ worker
def _changed(job: Any, what: str) -> ValidationError:
    return changed(job.plan.path, what)


def _draw(mechanism: Any) -> Callable[[NDArray[np.intp], Any], NDArray[np.intp]]:
    """Fresh releases of grid ranks from ``mechanism`` (none drawn for no rows)."""

    def draw(ranks: NDArray[np.intp], rng: Any) -> NDArray[np.intp]:
        if ranks.size == 0:
            return ranks
        return np.asarray(mechanism.draw(np.asarray(ranks, dtype=np.intp), rng), dtype=np.intp)

    return draw


def _release_csv(job: Any, piece: Piece, mechanism: Any, classify: Classify) -> tuple[bytes, int]:
    plan = job.plan
    _, buf, recs = read_piece(plan.path, piece.start, piece.stop, first_line=piece.first, rows=piece.rows,
                              ncols=len(plan.names), column=plan.column, max_record=plan.max_record)
    ranks, status, quoted = csv_ranks(buf, recs, classify)
    if status.any():
        raise _changed(job, f"line {piece.first + int(recs.lines[int(np.flatnonzero(status)[0])])} cannot be released")
    keep, drawn = released(job, piece, ranks, _draw(mechanism))
    dropped = plan.columns.dropped_indices if plan.columns is not None else ()
    out = Outputs(mechanism.output_labels).splice(buf, recs, plan.column, dropped, drawn, quoted, keep)
    return out.tobytes(), len(drawn)


def _release_parquet(job: Any, piece: Piece, mechanism: Any, classify: Classify) -> tuple[bytes, int]:
    def codes(col: Any) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        ranks, status = parquet_ranks(col, classify)
        return ranks, status != 0

    return parquet_part(job, piece, codes, "cannot be released",
                        lambda kind: out_values(mechanism, kind, job.plan.path, job.column_name), _draw(mechanism))
