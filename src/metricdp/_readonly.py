"""Arrays that no caller can make writable again: the data live in an immutable ``bytes``.

``a.setflags(write=False)`` is a request, not a guarantee: whoever reaches an array that
owns its data (``a`` itself, or ``a.base`` of a read-only view) may set the flag back
and write, and a mechanism audited at epsilon would then release from an edited matrix.
numpy refuses ``setflags(write=True)`` on an array whose memory belongs to an object
that exposes no writable buffer; a ``bytes`` object is one. So :func:`frozen` copies the
data into ``bytes`` and returns ``np.frombuffer(...).reshape(...)``: every array on its
``.base`` chain is read-only for good and the chain ends at the ``bytes``.

>>> a = frozen([[1.0, 2.0], [3.0, 4.0]])
>>> is_frozen(a), type(a.base.base).__name__
(True, 'bytes')
>>> a.setflags(write=True)
Traceback (most recent call last):
...
ValueError: cannot set WRITEABLE flag to True of this array
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

__all__ = ["frozen", "is_frozen"]


def is_frozen(a: object) -> bool:
    """True when ``a`` is an ndarray that nothing can make writable: every array on its
    ``.base`` chain is read-only and the chain ends at a ``bytes`` object."""
    b: Any = a
    if not isinstance(b, np.ndarray):
        return False
    while isinstance(b, np.ndarray):
        if b.flags.writeable:
            return False
        b = b.base
    return isinstance(b, bytes)


def frozen(a: ArrayLike, dtype: DTypeLike | None = None) -> NDArray[Any]:
    """``a`` (as ``dtype`` when given) backed by immutable ``bytes``; ``a`` itself when it already is.

    The copy is C-contiguous; a numeric or boolean dtype (an object array has no bytes).
    """
    arr = np.asarray(a) if dtype is None else np.asarray(a, dtype=dtype)
    if arr.dtype.hasobject:
        raise TypeError("an object array cannot be frozen into bytes")
    if is_frozen(arr):
        return arr
    data = np.ascontiguousarray(arr)
    return np.frombuffer(data.tobytes(), dtype=data.dtype).reshape(data.shape)
