"""A kind of value: how a released column is parsed from a chunk, released and rendered back.

A :class:`Kind` is what differs between releasing labels, numbers and points; the chunk
loop (:mod:`.run`), the formats and the accounting are the same for every kind.
:meth:`Kind.parse` runs in the read-ahead thread and draws nothing; :meth:`Kind.release`
runs in the caller's thread, chunk after chunk, from one source of randomness.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ..tabular.formats import Chunk, Coded, Released
from ..tabular.leaks import LeakRule

__all__ = ["CodedColumn", "Kind", "Parsed", "Refusals", "Select"]

#: ``select(first_row, values) -> (keep or None, releases of the kept rows)``: which rows of a chunk are
#: written (None: all) and their releases; the accounting's wrapper, or every row released.
Select = Callable[[int, Any], tuple[NDArray[np.bool_] | None, Any]]


@dataclass(frozen=True)
class Parsed:
    """A chunk's released column(s) read: ``values`` for the release, the ``refused`` rows and why.

    ``reasons`` (one small code per refused row, the kind's own) may be None when a kind
    has one reason only.
    """

    values: Any
    refused: NDArray[np.intp]
    reasons: NDArray[np.int8] | None = None


class Refusals(ABC):
    """The rows a release refuses, gathered over the whole file for one error."""

    rows: int = 0

    @abstractmethod
    def add(self, places: NDArray[np.int64], texts: list[str], reasons: NDArray[np.int8] | None) -> None:
        """Note refused rows: their line or row numbers, some of their texts, their reasons."""

    @abstractmethod
    def error(self, where: str, unit: str) -> ValidationError:
        """The one error naming the file, the column, the count and the first places."""


class Kind(ABC):
    """One kind of released value (module docstring). ``columns``: the released columns, in order."""

    columns: tuple[str, ...]
    #: the (lat, lon) columns of a release of points (a geometry output needs them)
    geometry: tuple[str, str] | None = None
    #: read and write a large input with the compiled kernels (numbers and points)
    compiled: bool = False
    #: values shown of a chunk's refused rows
    show: int = 5
    #: numbers per released row for the accounting's consistent groups (a point: 2; None: one code)
    width: int | None = None
    #: an input with no data rows is refused (a release of nothing is a mistake for this kind)
    refuses_empty: bool = False

    @property
    @abstractmethod
    def epsilon(self) -> float:
        """The eps of one release of one row, in the units of :attr:`unit` (what the ledger is charged)."""

    @property
    @abstractmethod
    def unit(self) -> str:
        """The unit of distance ``epsilon`` is per (the ledger's unit)."""

    @abstractmethod
    def parse_empty(self) -> Any:
        """Parsed values of no rows (the shape :meth:`parse` gives)."""

    def check(self, values: Any, first_row: int) -> None:  # noqa: B027 - most kinds refuse in parse
        """Refuse, in the accounting's first pass, a chunk the release would refuse (points: outside a region)."""

    @abstractmethod
    def rule(self) -> LeakRule:
        """What a kept column must not hold (:mod:`metricdp.tabular.leaks`)."""

    @abstractmethod
    def parse(self, chunk: Chunk) -> Parsed:
        """The chunk's released values, and the rows that cannot be released (no randomness here)."""

    @abstractmethod
    def refusals(self) -> Refusals:
        """A fresh gatherer of refused rows."""

    @abstractmethod
    def release(self, values: Any, first_row: int) -> Any:
        """The release of ``values`` (rows ``first_row..`` of the file, 0-based)."""

    @abstractmethod
    def render(self, released: Any) -> list[Released]:
        """The released values as the formats write them."""

    def every_row(self, first_row: int, values: Any) -> tuple[None, Any]:
        """The :data:`Select` of a release that writes every row: each released from this kind."""
        return None, self.release(values, first_row)

    def check_written(self, rows: int, where: str) -> None:  # noqa: B027 - most kinds publish any outcome
        """Refuse an outcome the kind cannot publish (points: a file with no data rows)."""


class CodedColumn(Kind):
    """One column released by a mechanism's rows, each release an index into its ``outputs`` (labels, grid points).

    What :class:`~.labels.Labels` and :class:`~.numbers.Numbers` share: the column, the
    mechanism whose eps is charged, the source it draws from, parsed values as indices,
    releases rendered as the output texts (``outputs_are`` names them in an error).
    """

    outputs_are: str

    def __init__(self, mechanism: Any, column: str, source: Any, outputs: tuple[str, ...]) -> None:
        self.mechanism, self.column, self.source, self.outputs = mechanism, column, source, outputs
        self.columns = (column,)
        self._cache: dict[str, Any] = {}

    @property
    def epsilon(self) -> float:
        return float(self.mechanism.epsilon)

    def parse_empty(self) -> NDArray[np.intp]:
        return np.zeros(0, dtype=np.intp)

    def render(self, released: NDArray[np.intp]) -> list[Released]:
        return [Coded(self.column, released, self.outputs, self.outputs_are, self._cache)]
