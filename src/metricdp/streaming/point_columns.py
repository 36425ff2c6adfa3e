"""The coordinate columns of a points file as floats, by the one CSV number rule.

Shared by the release pass (:mod:`.points`) and the accounting's first pass
(:mod:`.accounted_points`), which must read and refuse exactly the same fields: the error
names the data row, the line and the value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError
from ..io import parse_decimal
from ..mechanisms._kernel_loader import LAZY, lattice_kernels
from ..tabular import csvsplit

__all__ = ["column_floats", "parse_column"]

_KERNELS: Any = LAZY  # the compiled gather, loaded at first use (None: numpy)


def parse_column(chunk: Any, col: int, name: str, where: str, first_row: int) -> NDArray[np.float64]:
    """The column's values as floats by the one CSV number rule; an error names row, line and value.

    With the compiled kernels, plain decimals of up to 15 digits are read in one pass
    (``parse_decimals``: exactly ``float``'s value, see its docstring) and only the other
    fields go through Arrow and Python's rule.
    """
    fs, fe = chunk.records.field(col)
    kernels = lattice_kernels(_KERNELS)
    if kernels is None:
        return _parse_fields(chunk, fs, fe, None, name, where, first_row)
    out, ok = kernels["parse_decimals"](chunk.buf, fs, fe)
    if not ok.all():
        rest = np.flatnonzero(~ok)
        out[rest] = _parse_fields(chunk, fs[rest], fe[rest], rest, name, where, first_row)
    return np.asarray(out, dtype=np.float64)


def _parse_fields(chunk: Any, fs: NDArray[np.int64], fe: NDArray[np.int64], rows: NDArray[np.intp] | None,
                  name: str, where: str, first_row: int) -> NDArray[np.float64]:
    """Floats of the fields ``[fs, fe)`` (``rows``: their record numbers in the chunk, None: all)."""
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    recs = chunk.records
    data, offs, quoted, raw_quoted = csvsplit.field_values(chunk.buf, fs, fe)
    if not quoted.any():
        arr = pa.Array.from_buffers(pa.binary(), len(offs) - 1, [None, pa.py_buffer(offs), pa.py_buffer(data)])
        try:
            return np.asarray(pc.cast(pc.cast(arr, pa.string()), pa.float64()).to_numpy(zero_copy_only=False),
                              dtype=np.float64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # something pyarrow refuses: Python's rule decides, row by row, and names the culprit
    out = np.empty(len(fs), dtype=np.float64)
    quoted_values = iter(raw_quoted)
    for k in range(len(fs)):
        raw = next(quoted_values) if quoted[k] else bytes(chunk.buf[fs[k]:fe[k]])
        text = raw.decode("utf-8", errors="replace")
        try:
            out[k] = parse_decimal(text)
        except ValueError:
            r = k if rows is None else int(rows[k])
            line = chunk.first_line + int(recs.lines[r])
            raise ValidationError(
                f"{where}: data row {first_row + r} (line {line}): column {name!r} is {text!r}, not a number"
            ) from None
    return out


def column_floats(batch: Any, k: int, name: str, where: str, first_row: int) -> NDArray[np.float64]:
    col = batch.column(k)
    if col.null_count:
        i = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
        raise ValidationError(f"{where}: data row {first_row + i}: column {name!r} is empty")
    try:
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError(f"{where}: column {name!r} is not numeric ({col.type})") from None
