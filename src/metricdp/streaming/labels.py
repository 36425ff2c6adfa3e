"""Label indices of a released column's values, and the error for values that are not labels.

Shared by the release (:mod:`.files`) and its first pass (:mod:`.persons`), so both read
and refuse a column the same way: CSV fields located by :mod:`.csvsplit` (quoted ones
unquoted one by one), Parquet columns cast to text, :func:`pyarrow.compute.index_in`
against the mechanism's labels (-1: not a label).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from . import csvsplit

__all__ = ["UnknownValues", "csv_label_indices", "parquet_label_indices"]

_SHOW = 5  # line numbers / values shown in an error
_KEEP_DISTINCT = 10_000  # distinct unknown values remembered for the error


class UnknownValues:
    """Rows whose value is not a label: count, first line numbers, some distinct values."""

    def __init__(self) -> None:
        self.rows = 0
        self.lines: list[int] = []
        self.values: set[str] = set()

    def add(self, lines: NDArray[np.int64], values: Sequence[str]) -> None:
        self.rows += len(lines)
        take = _SHOW - len(self.lines)
        if take > 0:
            self.lines.extend(int(x) for x in lines[:take])
        for v in values:
            if len(self.values) >= _KEEP_DISTINCT:
                break
            self.values.add(v)

    def error(self, where: str, column: str, unit: str) -> ValidationError:
        vals = sorted(self.values)
        shown = ", ".join(repr(v) for v in vals[:10])
        more = len(vals) - 10
        at_least = "at least " if len(self.values) >= _KEEP_DISTINCT else ""
        shown += f" and {at_least}{more} more" if more > 0 else ""
        first = ", ".join(str(x) for x in self.lines)
        return ValidationError(
            f"{where}: column {column!r}: {at_least}{len(vals)} value(s) not in the space's labels: {shown} "
            f"({self.rows:,} row(s); first at {unit} {first}); nothing written"
        )


def csv_label_indices(pa: Any, pc: Any, buf: NDArray[np.uint8], fs: NDArray[np.int64], fe: NDArray[np.int64],
                      value_set: Any, lookup: dict[bytes, int], *, with_quoted: bool = False) -> Any:
    """Label index of each field ``buf[fs:fe]`` (-1: not a label); with ``with_quoted``, also which were quoted."""
    data_, offs, quoted, raw_quoted = csvsplit.field_values(buf, fs, fe)
    values = pa.Array.from_buffers(pa.binary(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data_)])
    idx = np.asarray(pc.fill_null(pc.index_in(values, value_set=value_set), -1).to_numpy(zero_copy_only=False),
                     dtype=np.intp)
    if quoted.any():
        idx[quoted] = [lookup.get(v, -1) for v in raw_quoted]
    return (idx, quoted) if with_quoted else idx


def parquet_label_indices(pa: Any, pc: Any, col: Any, labels: Sequence[str]) -> tuple[NDArray[np.intp], Any]:
    """Label index of each value of a Parquet column (-1: not a label, null included), and the values as text."""
    as_text = col if pa.types.is_string(col.type) else pc.cast(col, pa.string())
    value_set = pa.array(list(labels), type=pa.string())
    idx = np.asarray(pc.fill_null(pc.index_in(as_text, value_set=value_set), -1).to_numpy(zero_copy_only=False),
                     dtype=np.intp)
    return idx, as_text
