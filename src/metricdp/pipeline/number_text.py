"""The text of a numeric column: the one number rule over Arrow arrays and the refusal report.

Used by the numbers kind (:mod:`.numbers`), so the release pass and the accounting's first pass
(:mod:`.first_pass`) refuse exactly the same fields: a field is a number
when :func:`metricdp.io.parse_decimal` reads it (no ``1_000``, no non-ASCII digits, no
``nan(...)``), and :class:`BadNumbers` gathers the refused rows into one error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError
from ..io import parse_decimal

__all__ = ["BadNumbers", "parse_numbers"]

_SHOW = 5
_REASONS = {1: "not a number", 2: "not finite", 3: "outside the range", 4: "not on the grid", 5: "empty"}
#: A plain decimal in the form both Arrow's cast and ``float`` read alike (the slow path's fast lane).
_PLAIN = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


class BadNumbers:
    """Rows refused: count per reason and the first few (line, value, reason)."""

    def __init__(self) -> None:
        self.rows = 0
        self.first: list[tuple[int, str, str]] = []
        self.counts: dict[str, int] = {}

    def add(self, lines: NDArray[np.int64], values: Sequence[str], status: NDArray[np.int8]) -> None:
        self.rows += len(lines)
        for code in np.unique(status).tolist():
            self.counts[_REASONS[code]] = self.counts.get(_REASONS[code], 0) + int((status == code).sum())
        for line, value, code in zip(lines[: _SHOW - len(self.first)].tolist(), values, status.tolist(), strict=False):
            self.first.append((line, value, _REASONS[code]))

    def error(self, where: str, column: str, grid: Any, unit: str) -> ValidationError:
        shown = "; ".join(f"{unit} {line}: {value!r} ({why})" for line, value, why in self.first)
        counts = ", ".join(f"{k} {v:,}" for k, v in sorted(self.counts.items()))
        return ValidationError(
            f"{where}: column {column!r}: {self.rows:,} value(s) cannot be released on the grid {grid.lo}..{grid.hi} "
            f"step {grid.step} ({counts}); first: {shown}; nothing written"
        )


def parse_numbers(values: Any, quoted: NDArray[np.bool_] | None = None,
                  raw_quoted: Sequence[bytes] = ()) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Float values of an Arrow string array and a mask of fields that are not numbers.

    ``quoted`` marks fields whose text is in ``raw_quoted`` instead (in row order, as
    :func:`metricdp.tabular.csvsplit.field_values` returns them). The number rule is
    :func:`metricdp.io.parse_decimal` (module docstring).
    """
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    n = len(values)
    q = np.zeros(n, dtype=bool) if quoted is None else np.asarray(quoted, dtype=bool)
    if not q.any():
        try:
            out = np.asarray(pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
            bad = np.zeros(n, dtype=bool)
            for i in np.flatnonzero(np.isnan(out)).tolist():  # Arrow also reads 'nan(...)', which float() refuses
                bad[i] = _oracle_refuses(values[i].as_py())
            return out, bad
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    plain = np.asarray(pc.match_substring_regex(values, _PLAIN).to_numpy(zero_copy_only=False), dtype=bool) & ~q
    out = np.full(n, np.nan)
    bad = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(plain)
    if idx.size:
        out[idx] = pc.cast(values.take(pa.array(idx)), pa.float64()).to_numpy(zero_copy_only=False)
    others = np.flatnonzero(~plain & ~q)
    texts = values.take(pa.array(others)).to_pylist() if others.size else []
    others = np.concatenate([others, np.flatnonzero(q)])
    texts += [b.decode("utf-8") for b in raw_quoted]
    for i, text in zip(others.tolist(), texts, strict=True):  # the irregular fields only
        try:
            out[i] = parse_decimal(text)
        except ValueError:
            bad[i] = True
    return out, bad


def _oracle_refuses(text: str) -> bool:
    try:
        parse_decimal(text)
    except ValueError:
        return True
    return False
