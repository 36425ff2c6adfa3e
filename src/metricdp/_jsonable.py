"""The one JSON cleaner of metricdp: standard JSON only.

Mechanism files, ``--json`` output, experiment records and benchmark rows are written
through :func:`jsonable` and ``json.dumps(..., allow_nan=False)``: mappings become
objects with string keys, tuples and arrays become lists, numpy scalars become Python
numbers, paths become strings, and the non-finite floats, which standard JSON cannot
hold, become the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (read back with
``float(value)``).

>>> import numpy as np
>>> jsonable({"a": np.float64("inf"), 2: (np.int64(3), float("nan"))})
{'a': 'inf', '2': [3, 'nan']}
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

__all__ = ["jsonable"]


def jsonable(obj: Any) -> Any:
    """``obj`` as values ``json.dumps(..., allow_nan=False)`` accepts (see the module docstring)."""
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, dict) or hasattr(obj, "items"):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj
