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

from ..pipeline.labels import _KEEP_DISTINCT, UnknownValues
from ..tabular import csvsplit

__all__ = ["_KEEP_DISTINCT", "UnknownValues", "csv_label_indices", "parquet_label_indices"]


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
