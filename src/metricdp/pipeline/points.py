"""Points: a (latitude, longitude) pair of columns released together by a point release.

Coordinates are read by the one number rule (a text format's plain decimals by the
compiled reader where loaded, every other field by :func:`metricdp.io.parse_decimal`, so an
error names the data row, the line and the value; a typed column as float64, a missing
value refused). What a chunk's rows become is the caller's ``release(latlon, first_row)``
(the exact lattice or the float sampler, with a region or a snapping set); released values
are written with ``digits`` decimals in text, or in full where ``full(rounded)`` says
rounding would change them in a way that matters (outside a region, off a snapping set),
and as float64 in a typed format.
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ..io import parse_decimal
from ..tabular.formats import Chunk, Points, Released, arrow
from ..tabular.formats._base import Full
from ..tabular.leaks import LeakRule
from .kind import Kind, Parsed, Refusals

__all__ = ["PointPairs", "Release", "Validate", "read_coordinate", "read_points_file"]

#: ``release(latlon (k, 2), first_row) -> released (k, 2)``; ``first_row`` numbers rows in errors (1-based).
Release = Callable[[NDArray[np.float64], int], NDArray[np.float64]]
#: ``validate(latlon (k, 2), first_row)``: raises on a row the release would refuse (1-based rows).
Validate = Callable[[NDArray[np.float64], int], None]


def read_coordinate(chunk: Chunk, name: str, where: str) -> NDArray[np.float64]:
    """The column's values as floats by the one number rule; an error names the data row, line and value."""
    quick = chunk.decimals(name)
    if quick is not None and quick[1].all():
        return quick[0]
    pa, pc = arrow()
    col = chunk.column(name)
    if col.null_count:
        i = int(np.flatnonzero(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))[0])
        raise ValidationError(f"{where}: {_row(chunk, i)}: column {name!r} is empty")
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        try:
            return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
        except (TypeError, ValueError, pa.ArrowInvalid):
            raise ValidationError(f"{where}: column {name!r} is not numeric ({col.type})") from None
    quoted = chunk.quoted(name)
    if quoted is None or not quoted.any():
        try:
            return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # something pyarrow refuses: Python's rule decides, row by row, and names the culprit
    out = np.empty(len(col), dtype=np.float64)
    for k, text in enumerate(col.to_pylist()):
        try:
            out[k] = parse_decimal(text)
        except ValueError:
            raise ValidationError(f"{where}: {_row(chunk, k)}: column {name!r} is {text!r}, not a number") from None
    return out


def read_points_file(path: str | PathLike[str], *, what: str = "points") -> NDArray[np.float64]:
    """The (lat, lon) of every row of a table of points (any format a release reads; columns ``lat`` and
    ``lon``, matched without case or surrounding spaces; any others ignored), by the one number rule.

    For a small public file (a snapping set): the whole file is read. ``what`` starts the errors.
    """
    from ..tabular.formats import release_format

    src = Path(path)
    if not src.is_file():
        raise ValidationError(f"{what} {src}: no such file")
    with release_format(src, what=f"{what} {src}:").open(src, chunk_rows=1_000_000, chunk_bytes=2**21,
                                                       max_record=None) as reader:
        names = {n.strip().lower(): n for n in reader.names}
        for c in ("lat", "lon"):
            if c not in names:
                raise ValidationError(f"{src}: no column {c!r} ({what}); available: "
                                      f"{', '.join(map(repr, reader.names))}")
        parts = [np.column_stack([read_coordinate(chunk, names["lat"], str(src)),
                                  read_coordinate(chunk, names["lon"], str(src))])
                 for chunk in reader.chunks() if chunk.rows]
    if not parts:
        raise ValidationError(f"{what} {src}: no points")
    return np.concatenate(parts)


def _row(chunk: Chunk, k: int) -> str:
    """How an error names row ``k`` of ``chunk``: its data row (and line), or the name its chunk gives it."""
    place = chunk.places(np.array([k]))[0]
    if chunk.unit == "line":
        return f"data row {chunk.first + k + 1} (line {place})"
    return f"data row {place}"


class _Never(Refusals):
    """Points refuse a bad value at once (the error names it); nothing is gathered."""

    def add(self, places: NDArray[np.int64], texts: list[str], reasons: NDArray[np.int8] | None) -> None:
        raise AssertionError("points refuse at once")  # pragma: no cover

    def error(self, where: str, unit: str) -> ValidationError:
        raise AssertionError("points refuse at once")  # pragma: no cover


class PointPairs(Kind):
    """The ``(lat, lon)`` columns released by ``release``, written with ``digits`` decimals (``full``: in full).

    ``epsilon`` scales the content check of kept columns (a column within ``2/epsilon`` km of
    the true coordinates in most rows is refused; 1 km when not given).
    """

    compiled = True
    refuses_empty = True
    width = 2
    unit = "km"

    def __init__(self, lat: str, lon: str, release: Release, *, digits: int = 6, full: Full | None = None,
                 epsilon: float | None = None, where: str = "input", validate: Validate | None = None) -> None:
        if lat == lon:
            raise ValidationError(f"the parameter 'lat' and the parameter 'lon' name the same column {lat!r}")
        self.lat, self.lon, self._release = lat, lon, release
        self.columns = (lat, lon)
        self.geometry = (lat, lon)
        self.digits, self.full, self._epsilon, self.where = digits, full, epsilon, where
        self._validate = validate

    @property
    def epsilon(self) -> float:
        if self._epsilon is None:
            raise ValidationError("an accounted release needs the epsilon of one release")
        return float(self._epsilon)

    def parse_empty(self) -> NDArray[np.float64]:
        return np.zeros((0, 2))

    def check(self, values: NDArray[np.float64], first_row: int) -> None:
        if self._validate is not None:
            self._validate(values, first_row + 1)

    def rule(self) -> LeakRule:
        return LeakRule.points(self.lat, self.lon, self._epsilon)

    def parse(self, chunk: Chunk) -> Parsed:
        if not chunk.rows:
            return Parsed(np.zeros((0, 2)), np.zeros(0, dtype=np.intp))
        pts = np.column_stack([read_coordinate(chunk, self.lat, self.where),
                               read_coordinate(chunk, self.lon, self.where)])
        return Parsed(pts, np.zeros(0, dtype=np.intp))

    def refusals(self) -> Refusals:
        return _Never()

    def release(self, values: NDArray[np.float64], first_row: int) -> NDArray[np.float64]:
        return self._release(values, first_row + 1)

    def render(self, released: NDArray[np.float64]) -> list[Released]:
        return [Points(self.lat, self.lon, np.asarray(released, dtype=np.float64), self.digits, self.full)]

    def check_written(self, rows: int, where: str) -> None:
        if rows == 0:
            raise ValidationError(f"{where}: no data rows")
