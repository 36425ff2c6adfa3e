"""Memory estimates before allocation: refuse with the size and the limit, never a MemoryError later.

The limit is ``METRICDP_MEMORY_LIMIT`` from the environment (bytes, or a number with a
unit: ``8GiB``, ``500MB``), else half of this machine's physical memory. Builders and
spaces call :func:`check_allocation` with their estimate before allocating their dense
n x n arrays.

>>> format_bytes(9.6e9)
'9.6 GB'
>>> parse_bytes("1.5GiB") == 1.5 * 2**30
True
"""

from __future__ import annotations

import math
import os
import re

from .errors import ResourceLimitError, ValidationError

__all__ = ["ENV_VAR", "check_allocation", "format_bytes", "memory_limit", "parse_bytes"]

ENV_VAR = "METRICDP_MEMORY_LIMIT"
_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}


def parse_bytes(text: str) -> float:
    """``"8GiB"`` -> bytes; a ValidationError naming the text otherwise."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValidationError(f"{ENV_VAR} must be a size such as 8GiB or 500MB, got {text!r}")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not (math.isfinite(value) and value > 0):
        raise ValidationError(f"{ENV_VAR} must be a positive size, got {text!r}")
    return value


def format_bytes(n: float) -> str:
    """Bytes in decimal units with 2 significant digits (``9.6 GB``)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2g} {unit}"
    return f"{n:.0f} B"


def memory_limit() -> float:
    """Bytes any one dense allocation plan may need (see the module docstring)."""
    text = os.environ.get(ENV_VAR)
    if text:
        return parse_bytes(text)
    try:
        return 0.5 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platforms without sysconf
        return 8e9


def check_allocation(nbytes: float, what: str) -> None:
    """Refuse (ResourceLimitError) a plan of ``nbytes`` over the limit; ``what`` says what needs it."""
    limit = memory_limit()
    if nbytes > limit:
        raise ResourceLimitError(
            f"{what} need {format_bytes(nbytes)}; the limit is {format_bytes(limit)} "
            f"(set {ENV_VAR} to change it)"
        )
