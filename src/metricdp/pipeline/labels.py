"""Labels: a column of a finite space's labels, released through a mechanism's rows.

A value is a label when its text equals one of the mechanism's labels (a typed column is
compared by its text); anything else, a missing value included, is refused, and the error
gives the count, some of the values and the first places. The release of row ``i`` is a
draw from the mechanism's row of its label (:meth:`~metricdp.mechanisms.base.Mechanism.sample`),
written as the text of the output label.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import PrivacyLeakWarning, ValidationError
from ..tabular.formats import Chunk, arrow
from ..tabular.leaks import LeakRule
from .kind import CodedColumn, Parsed, Refusals

__all__ = ["Labels", "UnknownValues"]


_SHOW = 5  # line numbers / values shown in an error
_KEEP_DISTINCT = 10_000  # distinct unknown values remembered for the error


class UnknownValues:
    """Rows whose value is not a label: count, first line numbers, some distinct values."""

    def __init__(self) -> None:
        self.rows = 0
        self.lines: list[object] = []  # line or row numbers, or the rows' names (a DataFrame's index labels)
        self.values: set[str] = set()

    def add(self, lines: NDArray[np.int64], values: Sequence[str]) -> None:
        self.rows += len(lines)
        take = _SHOW - len(self.lines)
        if take > 0:
            self.lines.extend(x.item() if isinstance(x, np.generic) else x for x in lines[:take])
        for v in values:
            if len(self.values) >= _KEEP_DISTINCT:
                break
            self.values.add(v)

    def error(self, where: str, column: str, unit: str) -> ValidationError:
        vals = sorted(self.values)
        shown = ", ".join(repr(v) for v in vals[:10])
        more = len(vals) - 10
        at_least = "at least " if len(self.values) >= _KEEP_DISTINCT else ""
        shown += f" and {at_least}{more} more" if more > 0 else ""
        first = ", ".join(str(x) for x in self.lines)
        return ValidationError(
            f"{where}: column {column!r}: {at_least}{len(vals)} value(s) not in the space's labels: {shown} "
            f"({self.rows:,} row(s); first at {unit} {first}); nothing written"
        )


class _Unknown(Refusals):
    def __init__(self, column: str) -> None:
        self._values, self._column = UnknownValues(), column

    @property
    def rows(self) -> int:  # type: ignore[override]
        return self._values.rows

    def add(self, places: NDArray[np.int64], texts: list[str], reasons: NDArray[np.int8] | None) -> None:
        self._values.add(places, texts)

    def error(self, where: str, unit: str) -> ValidationError:
        return self._values.error(where, self._column, f"{unit}(s)")


class Labels(CodedColumn):
    """The column ``column`` released by ``mechanism`` (a finite mechanism with labels), from ``source``."""

    show = 4 * 10_000  # distinct unknown values remembered for the error
    outputs_are = "the mechanism's labels"

    def __init__(self, mechanism: Any, column: str, source: Any, *, where: str = "input") -> None:
        pa, _ = arrow()
        self.where = where
        self.labels = tuple(str(x) for x in mechanism.labels)
        super().__init__(mechanism, column, source,
                         tuple(str(x) for x in getattr(mechanism, "output_labels", self.labels)))
        self._value_set = pa.array(list(self.labels), type=pa.string())

    @property
    def unit(self) -> str:
        from ..units import space_unit

        return space_unit(self.mechanism.space, self.mechanism.metadata)

    def rule(self) -> LeakRule:
        return LeakRule.labels(self.column)

    def parse(self, chunk: Chunk) -> Parsed:
        pa, pc = arrow()
        col = chunk.column(self.column)
        try:
            text = col if pa.types.is_string(col.type) else pc.cast(col, pa.string())
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # a list, a struct, ...: no text to compare
            raise ValidationError(f"{self.where}: column {self.column!r} has type {col.type}; its values cannot be "
                                  "read as text") from None
        idx = np.asarray(pc.fill_null(pc.index_in(text, value_set=self._value_set), -1)
                         .to_numpy(zero_copy_only=False), dtype=np.intp)
        return Parsed(idx, np.flatnonzero(idx < 0))

    def refusals(self) -> Refusals:
        return _Unknown(self.column)

    def release(self, values: NDArray[np.intp], first_row: int) -> NDArray[np.intp]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # the seeded source was announced once
            return np.asarray(self.mechanism.sample(values, self.source), dtype=np.intp)
