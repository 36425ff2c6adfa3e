"""Released coordinates as decimal text: a fixed number of decimals, vectorised, or in full where asked.

:func:`format_fixed` writes what every text output of points holds (CSV fields, GeoJSON
coordinates); :func:`point_texts` lays a chunk's (lat, lon) texts out as one table, lat
column first, for :class:`~metricdp.tabular.formats.Points`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from .csvsplit import _gather_index

__all__ = ["format_fixed", "point_texts"]


def format_fixed(values: NDArray[np.float64], digits: int) -> tuple[NDArray[np.uint8], NDArray[np.int64],
                                                                    NDArray[np.float64]]:
    """Decimal texts of ``values`` with ``digits`` decimals (|value| < 1e3), vectorised.

    Returns ``(data, offsets, rounded)``: text k is ``data[offsets[k]:offsets[k+1]]`` and
    ``rounded[k]`` the float that text denotes (``n / 10**digits``, correctly rounded), so
    a check on ``rounded`` is a check on what a reader of the file gets.

    >>> data, off, r = format_fixed(np.array([48.85660049, -0.5, 2.0]), 3)
    >>> bytes(data).decode(), off.tolist(), r.tolist()
    ('48.857-0.5002.000', [0, 6, 12, 17], [48.857, -0.5, 2.0])
    """
    if not 0 <= digits <= 15:
        raise ValidationError(f"digits must be in 0..15, got {digits}")
    scaled = np.rint(values * 10.0**digits)
    if not np.all(np.abs(scaled) < 1e3 * 10.0**digits):
        raise ValidationError("format_fixed: values must lie in (-1000, 1000)")
    n = scaled.astype(np.int64)
    neg = n < 0
    m = np.abs(n)
    int_part, frac = np.divmod(m, 10**digits)
    width_int = 3
    cols = 1 + width_int + (1 + digits if digits else 0)
    chars = np.zeros((len(n), cols), dtype=np.uint8)
    keep = np.zeros((len(n), cols), dtype=bool)
    chars[:, 0] = ord("-")
    keep[:, 0] = neg  # the rounded value's sign: -0.0000001 at 6 digits is 0.000000
    for c in range(width_int):  # hundreds, tens, units
        p = 10 ** (width_int - 1 - c)
        chars[:, 1 + c] = ord("0") + (int_part // p) % 10
        keep[:, 1 + c] = (int_part >= p) | (c == width_int - 1)
    if digits:
        chars[:, 1 + width_int] = ord(".")
        keep[:, 1 + width_int] = True
        for c in range(digits):
            chars[:, 2 + width_int + c] = ord("0") + (frac // 10 ** (digits - 1 - c)) % 10
        keep[:, 2 + width_int:] = True
    offsets = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=offsets[1:])
    rounded = n / 10.0**digits
    return chars[keep], offsets, rounded


def _format_full(values: NDArray[np.float64]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    texts = [repr(float(v)).encode() for v in values]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    return np.frombuffer(b"".join(texts), dtype=np.uint8), offsets


def point_texts(values: NDArray[np.float64], digits: int,
                full: Callable[[NDArray[np.float64]], NDArray[np.bool_]] | None) -> tuple[
    NDArray[np.uint8], NDArray[np.int64]
]:
    """Texts of the released (k, 2) values, lat column then lon column, as one table."""
    flat = np.concatenate([values[:, 0], values[:, 1]])
    data, off, rounded = format_fixed(flat, digits)
    exact = full(np.column_stack(np.split(rounded, 2))) if full is not None else np.zeros(len(values), dtype=bool)
    if not exact.any():
        return data, off
    rows = np.flatnonzero(np.concatenate([exact, exact]))
    fdata, foff = _format_full(flat[rows])
    lens = np.diff(off)
    lens[rows] = np.diff(foff)
    new_off = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=new_off[1:])
    out = np.empty(int(new_off[-1]), dtype=np.uint8)
    is_full = np.zeros(len(lens), dtype=bool)
    is_full[rows] = True
    src_idx = _gather_index(off[:-1][~is_full], lens[~is_full])
    dst_idx = _gather_index(new_off[:-1][~is_full], lens[~is_full])
    out[dst_idx] = data[src_idx]
    out[_gather_index(new_off[:-1][is_full], lens[is_full])] = fdata
    return out, new_off


