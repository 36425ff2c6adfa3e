"""Streaming privatization of files of any size (CSV and Parquet, chunk by chunk).

:func:`~metricdp.streaming.files.privatize_file` is the entry point; the byte-exact CSV
splitter is :mod:`metricdp.tabular.csvsplit`; numeric columns on a grid are
:mod:`metricdp.streaming.numbers`. Engines for data that outgrows one
machine are in :mod:`metricdp.integrations`.
"""

from __future__ import annotations

from .._lazy import submodule_getattr
from .files import ReleaseStats, privatize_file

__all__ = ["ReleaseStats", "privatize_file"]

__getattr__ = submodule_getattr(__name__, __path__)
