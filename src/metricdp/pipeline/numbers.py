"""Numbers: a numeric column released on a mechanism's grid (the one number rule, the grid's refusals).

A value is read by the one number rule (:func:`metricdp.io.parse_decimal`; a typed integer,
float or decimal column as its number, a decimal through its text, whose cast is correctly
rounded); a value that is not a number, not finite, outside the range or off the grid is
refused (``out_of_range="clamp"`` and ``off_grid="round"`` move it instead, see
:mod:`metricdp.streaming.numbers`), and the error gives the count per reason and the first
places. The release of a grid point is the mechanism's draw from its row
(:meth:`~metricdp.mechanisms.numeric.NumberMechanism.draw`), written as the output label.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ..mechanisms.numeric import NumberMechanism, inexact_integers
from ..tabular.formats import Chunk, arrow
from ..tabular.leaks import LeakRule
from .kind import CodedColumn, Parsed, Refusals
from .number_text import BadNumbers, parse_numbers

__all__ = ["OFF_GRID", "OUT_OF_RANGE", "Numbers", "check_choices", "read_numbers"]

OUT_OF_RANGE = ("error", "clamp")
OFF_GRID = ("error", "round")


def read_numbers(chunk: Chunk, column: str, where: str) -> tuple[NDArray[np.float64], NDArray[np.bool_],
                                                                  NDArray[np.bool_], NDArray[np.bool_]]:
    """``(numbers, not a number, empty, inexact integer)`` of a chunk's column, by the one number rule.

    A chunk whose format read every value as a plain decimal (:meth:`~metricdp.tabular.formats.Chunk.decimals`)
    needs no Arrow: pyarrow is imported only past that point.
    """
    quick = chunk.decimals(column)
    n = chunk.rows
    none = np.zeros(n, dtype=bool)
    if quick is not None and quick[1].all():
        return quick[0], none, none, none
    pa, pc = arrow()
    col = chunk.column(column)
    kind = col.type
    empty = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        # safe=False: an integer past 2**53 rounds; inexact_integers marks those that moved.
        # a decimal goes through its text: Arrow's decimal -> float64 cast is not correctly rounded
        exact = pc.cast(col, pa.string()) if pa.types.is_decimal(kind) else col
        numbers = np.asarray(pc.fill_null(pc.cast(exact, pa.float64(), safe=False), 0.0)
                             .to_numpy(zero_copy_only=False), dtype=np.float64)
        inexact = none
        if pa.types.is_integer(kind):
            inexact = inexact_integers(np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False)), numbers)
        return numbers, none, empty, inexact
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise ValidationError(f"{where}: column {column!r} has type {kind}; numbers or text expected")
    quoted = chunk.quoted(column)
    lengths = np.asarray(pc.fill_null(pc.binary_length(col), 0).to_numpy(zero_copy_only=False))
    empty = empty | ((lengths == 0) & (none if quoted is None else ~quoted))
    text = pc.fill_null(col, "0")
    raw = [] if quoted is None or not quoted.any() else \
        [v.encode("utf-8") for v in text.take(pa.array(np.flatnonzero(quoted))).to_pylist()]
    numbers, bad = parse_numbers(text, quoted, raw)
    return numbers, bad, empty, none


def check_choices(out_of_range: str, off_grid: str) -> None:
    """``out_of_range`` is one of :data:`OUT_OF_RANGE`, ``off_grid`` one of :data:`OFF_GRID` (the error names
    the parameter)."""
    for name, value, allowed in (("out_of_range", out_of_range, OUT_OF_RANGE), ("off_grid", off_grid, OFF_GRID)):
        if value not in allowed:
            raise ValidationError(f"the parameter {name!r} must be one of {', '.join(allowed)}, got {value!r}")


class _Bad(Refusals):
    def __init__(self, column: str, grid: Any) -> None:
        self._bad, self._column, self._grid = BadNumbers(), column, grid

    @property
    def rows(self) -> int:  # type: ignore[override]
        return self._bad.rows

    def add(self, places: NDArray[np.int64], texts: list[str], reasons: NDArray[np.int8] | None) -> None:
        assert reasons is not None
        self._bad.add(places, texts, reasons)

    def error(self, where: str, unit: str) -> ValidationError:
        return self._bad.error(where, self._column, self._grid, unit)


class Numbers(CodedColumn):
    """The column ``column`` released by ``mechanism`` (a :class:`NumberMechanism`) from ``source``."""

    compiled = True
    refuses_empty = True
    outputs_are = "the released grid points"

    def __init__(self, mechanism: NumberMechanism, column: str, source: Any, *, out_of_range: str = "error",
                 off_grid: str = "error", where: str = "input") -> None:
        if not isinstance(mechanism, NumberMechanism):
            raise ValidationError(f"mechanism must be a NumberMechanism, got {type(mechanism).__name__}")
        check_choices(out_of_range, off_grid)
        super().__init__(mechanism, column, source, tuple(mechanism.output_labels))
        self.out_of_range, self.off_grid, self.where = out_of_range, off_grid, where

    @property
    def unit(self) -> str:
        return f"unit of {self.column!r}"

    def rule(self) -> LeakRule:
        return LeakRule.numbers(self.column, self.mechanism)

    def classify(self, numbers: NDArray[np.float64], not_number: NDArray[np.bool_], empty: NDArray[np.bool_],
                 inexact: NDArray[np.bool_] | None = None) -> tuple[NDArray[np.intp], NDArray[np.int8]]:
        """Grid ranks and a reason per value (0: released; 1 not a number, 2 not finite, 3 out of range,
        4 off the grid, 5 empty)."""
        ranks, st = self.mechanism.grid.ranks(numbers, clamp=self.out_of_range == "clamp",
                                              snap=self.off_grid == "round")
        status = np.where(st == 0, 0, st + 1).astype(np.int8)  # grid codes 1..3 -> reasons 2..4
        if inexact is not None:
            status[inexact & (status == 0)] = 4  # the float is a grid point, the integer is not
        status[not_number] = 1
        status[empty] = 5
        return ranks, status

    def parse(self, chunk: Chunk) -> Parsed:
        ranks, status = self.classify(*read_numbers(chunk, self.column, self.where))
        refused = np.flatnonzero(status)
        return Parsed(ranks, refused, status[refused])

    def refusals(self) -> Refusals:
        return _Bad(self.column, self.mechanism.grid)

    def release(self, values: NDArray[np.intp], first_row: int) -> NDArray[np.intp]:
        return self.mechanism.draw(values, self.source)
