"""Release the (lat, lon) columns of a CSV or Parquet file of any size, chunk by chunk.

The file layer of :mod:`metricdp.streaming.files`, for two numeric columns instead of one
label column: the same record definition (:class:`metricdp.tabular.csv.CsvReader`), the
same column plan (:func:`metricdp.tabular.columns.plan_columns`: ``keep``/``drop`` and the
columns that leave with true values), the same byte-exact splicing of CSV
(:mod:`metricdp.tabular.csvsplit`: every byte outside the two released and the dropped
columns is copied), the same atomic output (:func:`metricdp.io.atomic_write`). Memory is
bounded by a chunk (``chunk_rows`` rows; for CSV also ``chunk_bytes`` of input).

What a chunk's rows become is the caller's ``release(latlon, first_row)`` (the exact
lattice or the float sampler, with a region or a snapping set): this module reads, parses,
formats and writes. Coordinates are parsed by the one CSV number rule
(:func:`metricdp.io.parse_decimal`: pyarrow's stricter cast first, Python's for a chunk it
refuses, so an error names the data row, line and value); released values are written
with ``digits`` decimals, or in full (``repr``) where ``full(rounded)`` says rounding would
change them in a way that matters (outside a region, off a snapping set).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress
from ..pipeline.points import PointPairs, Release
from ..pipeline.run import DEFAULT_CHUNK_ROWS, Source, release_pass
from ..tabular.columns import ColumnPlan
from ..tabular.csv import DEFAULT_CHUNK_BYTES
from ..tabular.decimal_text import format_fixed
from ..tabular.formats._base import Full

if TYPE_CHECKING:
    from .accounted import Accounting, AccountingReport

__all__ = ["Full", "PointStats", "Release", "format_fixed", "privatize_points_file"]


@dataclass(frozen=True)
class PointStats:
    """Rows released, seconds, the input format, the column plan (what left with true values), the accounting."""

    rows: int
    seconds: float
    format: str
    columns: ColumnPlan
    accounting: AccountingReport | None = None

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


def privatize_points_file(
    input_path: str | PathLike[str],
    lat: str,
    lon: str,
    out: str | PathLike[str],
    release: Release,
    *,
    digits: int = 6,
    full: Full | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_record: int | None = None,
    inputs: Sequence[str | PathLike[str]] = (),
    progress: Progress | None = None,
    plan_check: Callable[[ColumnPlan], None] | None = None,
    accounting: Accounting | None = None,
    validate: Callable[[NDArray[np.float64], int], None] | None = None,
    rng: object = None,
    epsilon: float | None = None,
) -> PointStats:
    """Replace every (lat, lon) of ``input_path`` by ``release`` of it; write ``out``.

    ``out`` has the input's format, or is a GeoJSON FeatureCollection when it ends in
    ``.geojson`` (one Point feature per row, the other written columns as properties).

    ``plan_check`` sees the column plan before anything is released. A column that the
    user did not ``keep`` and that looks like a coordinate by name, or holds the true
    coordinates (within the noise scale ``2/epsilon`` km; 1 km when ``epsilon`` is not
    given) in most rows, is refused before anything is written or reserved
    (:mod:`metricdp.tabular.leaks`). Nothing is published unless the whole file
    went through: errors leave ``out`` as it was.

    ``accounting`` makes it a release per person (:mod:`metricdp.pipeline.first_pass`:
    a first pass over the user and coordinate columns, each chunk of points checked by
    ``validate`` before the budget is reserved; withheld rows left out; the ledger
    reserved before and committed after the publish; ``rng`` the source of the cap's and
    the budget's random choices: pass the release's own source; ``epsilon`` the eps of one
    release, in the units of the budget). :attr:`PointStats.accounting` is then its report.

    Raises
    ------
    ValidationError
        A missing column, a bad ``keep``/``drop``, a value that is not a number (data row,
        line, value), a malformed file, or whatever ``release`` refuses.
    """
    kind = PointPairs(lat, lon, release, digits=digits, full=full, epsilon=epsilon, where=str(input_path),
                      validate=validate)
    source = Source.of(input_path, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record)
    # what leaves (plan_check first), by name and content, before anything is written or reserved
    plan = source.plan(kind, keep, drop, plan_check)
    run = None
    if accounting is not None:  # the first pass and the plan: budget reserved, nothing drawn for the file yet
        from .._random import check_rng
        from ..pipeline.first_pass import start_accounted

        run = start_accounted(kind, source, accounting, check_rng(rng), progress=progress, columns=plan)
    stats = release_pass(kind, source, out, plan, inputs=inputs, progress=progress,
                         select=None if run is None else run.select, run=run)
    return PointStats(stats.rows, stats.seconds, stats.format, plan, stats.accounting)
