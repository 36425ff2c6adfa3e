"""Import optional dependencies with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MetricDPError

__all__ = ["import_optional"]


def import_optional(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise naming ``pip install 'metricdp[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MetricDPError(
            f"this needs the optional package {module.split('.')[0]!r}: pip install 'metricdp[{extra}]'"
        ) from None
