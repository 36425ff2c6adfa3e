"""Parquet's readers of a whole file live with the format (:mod:`metricdp.tabular.formats.parquet`); this module
gives them to a module that imports them from here."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name in ("open_parquet", "read_parquet", "input_compression"):
        from .formats import parquet

        return getattr(parquet, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
