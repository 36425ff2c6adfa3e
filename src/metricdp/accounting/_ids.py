"""Person ids as the bytes a ledger hashes: from numpy, Python lists or pyarrow arrays.

An id is hashed as its text, UTF-8 (``str(id)``: the integer 7 and the string "7" are one
person), lone surrogates included (:func:`utf8`: bytes that were not UTF-8, read with
``surrogateescape``, hash as those bytes). :func:`id_bytes` lays every id's bytes out as one
buffer and offsets, the layout of an Arrow binary array, so a million ids are hashed in one
compiled loop (:func:`~._hmac.hmac_framed`); an Arrow array gives its own buffers and its
ids are never turned into Python strings one by one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ValidationError
from .accountant import canonical_ids
from .composition import to_units

__all__ = ["arrow_demand", "arrow_text", "id_bytes", "is_arrow", "utf8"]


def utf8(text: str) -> bytes:
    """UTF-8, lone surrogates (undecodable bytes read with ``surrogateescape``) included."""
    return text.encode("utf-8", "surrogatepass")


def is_arrow(values: Any) -> bool:
    """A pyarrow Array or ChunkedArray (without importing pyarrow)."""
    return type(values).__module__.startswith("pyarrow")


def _arrow_binary(values: Any) -> Any:
    """An Arrow array of ids as one ``large_binary`` array (chunks combined)."""
    import pyarrow as pa

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if not (pa.types.is_binary(arr.type) or pa.types.is_string(arr.type) or pa.types.is_large_binary(arr.type)
            or pa.types.is_large_string(arr.type)):
        raise ValidationError(f"persons given as an Arrow array must be binary or text, got {arr.type}")
    if arr.null_count:
        raise ValidationError("persons must not be null")
    return arr.cast(pa.large_binary())


def arrow_text(values: Any) -> NDArray[Any]:
    """An Arrow array of ids as a numpy array of their texts."""
    import pyarrow as pa

    arr = _arrow_binary(values)
    return np.asarray(arr.cast(pa.large_string()).to_numpy(zero_copy_only=False), dtype=str) if len(arr) else (
        np.zeros(0, dtype=str))


def arrow_demand(persons: Any, eps: Any, counts: ArrayLike | None) -> tuple[Any, NDArray[np.int64], int]:
    """:func:`~.accountant.demand` for an Arrow array of distinct ids with their counts."""
    import pyarrow.compute as pc

    arr = _arrow_binary(persons)
    units = to_units(eps)
    c = np.asarray(counts) if counts is not None else None
    if c is None or c.shape != (len(arr),) or (c.size and (c.dtype.kind not in "iu" or int(c.min()) < 0)):
        raise ValidationError(f"persons given as an Arrow array need counts, one integer >= 0 per person ({len(arr)})")
    if len(pc.unique(arr)) != len(arr):
        raise ValidationError("persons must be distinct when counts are given")
    return arr, c.astype(np.int64), units


def id_bytes(persons: Any) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """Every id's UTF-8 bytes (``str(id)`` for integers) as one buffer and offsets into it."""
    if is_arrow(persons):
        arr = _arrow_binary(persons)
        bufs = arr.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
        return data, offs
    raw = [utf8(p) for p in canonical_ids(persons).astype(str).tolist()]
    lengths = np.fromiter((len(x) for x in raw), dtype=np.int64, count=len(raw))
    offs = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offs[1:])
    return np.frombuffer(b"".join(raw), dtype=np.uint8), offs
