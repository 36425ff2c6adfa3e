"""Release the (lat, lon) columns of a CSV or Parquet file of any size, chunk by chunk.

The file layer of :mod:`metricdp.streaming.files`, for two numeric columns instead of one
label column: the same record definition (:class:`metricdp.tabular.csv.CsvReader`), the
same column plan (:func:`metricdp.tabular.columns.plan_columns`: ``keep``/``drop`` and the
columns that leave with true values), the same byte-exact splicing of CSV
(:mod:`metricdp.tabular.csvsplit`: every byte outside the two released and the dropped
columns is copied), the same atomic output (:func:`metricdp.io.atomic_write`). Memory is
bounded by a chunk (``chunk_rows`` rows; for CSV also ``chunk_bytes`` of input).

What a chunk's rows become is the caller's :class:`~metricdp.location.release.PointSettings`
(the exact lattice or the float sampler, with a region or a snapping set; on any engine) or
its own ``release(latlon, first_row)`` (the local engine): this module reads, parses,
formats and writes. Coordinates are parsed by the one CSV number rule
(:func:`metricdp.io.parse_decimal`: pyarrow's stricter cast first, Python's for a chunk it
refuses, so an error names the data row, line and value); released values are written
with ``digits`` decimals, or in full (``repr``) where ``full(rounded)`` says rounding would
change them in a way that matters (outside a region, off a snapping set).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from os import PathLike
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress
from .._random import check_rng
from ..errors import ValidationError
from ..location.release import PointSettings, full_precision, make_release, validator
from ..pipeline.engine import Engine, check_engine, cluster_seed, on_cluster
from ..pipeline.points import PointPairs, Release
from ..pipeline.run import ReleaseStats, Source, release_pass
from ..tabular.columns import ColumnPlan
from ..tabular.csv import DEFAULT_CHUNK_BYTES
from ..tabular.decimal_text import format_fixed
from ..tabular.formats._base import Full

if TYPE_CHECKING:
    from .accounted import Accounting

__all__ = ["Full", "Release", "ReleaseStats", "format_fixed", "privatize_points_file"]


def privatize_points_file(
    input_path: str | PathLike[str],
    lat: str,
    lon: str,
    out: str | PathLike[str],
    release: Release | PointSettings,
    *,
    digits: int = 6,
    full: Full | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    chunk_rows: int | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_record: int | None = None,
    inputs: Sequence[str | PathLike[str]] = (),
    progress: Progress | None = None,
    plan_check: Callable[[ColumnPlan], None] | None = None,
    accounting: Accounting | None = None,
    validate: Callable[[NDArray[np.float64], int], None] | None = None,
    rng: object = None,
    epsilon: float | None = None,
    engine: str = "local",
    scheduler: str | None = None,
    master: str | None = None,
) -> ReleaseStats:
    """Replace every (lat, lon) of ``input_path`` by ``release`` of it; write ``out``.

    ``release`` is a :class:`~metricdp.location.release.PointSettings` (the release drawn
    from ``rng``, one source for the file, :func:`~metricdp.location.release.make_release`;
    ``full``, ``validate`` and ``epsilon`` then default to the settings')
    or, on the local engine only, any function ``release(latlon, first_row)``.

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
    release, in the units of the budget). :attr:`ReleaseStats.accounting` is then its report.
    ``engine``, ``scheduler`` and ``master`` as in :func:`metricdp.streaming.files.privatize_file`
    (on a cluster, :func:`metricdp.integrations._points.privatize_points_engine`: ``release``
    must be settings, which the workers receive; ``out`` not GeoJSON).

    Raises
    ------
    ValidationError
        A missing column, a bad ``keep``/``drop``, a value that is not a number (data row,
        line, value), a malformed file, whatever ``release`` refuses, an option of another engine.
    EngineError
        the cluster failed (nothing written).
    """
    source = Source.of(input_path, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record)
    written = source.output_format(out)  # GeoJSON: written by the local engine only
    runs_on = check_engine(engine, scheduler, master, chunk_rows,
                           [(written is not source.format, f"an output in {written.name} ({out})")])
    settings = release if isinstance(release, PointSettings) else None
    if settings is not None:
        epsilon = settings.epsilon if epsilon is None else epsilon
        full = full_precision(settings) if full is None else full
        validate = validator(settings) if validate is None else validate
    if runs_on is not Engine.local:
        if settings is None:
            raise ValidationError(f"engine={runs_on.value!r} releases on its workers: give the release's "
                                  "PointSettings, not a function")
        from ..integrations._points import privatize_points_engine

        return on_cluster(partial(
            privatize_points_engine, runs_on.value, input_path, lat, lon, out, settings, seed=cluster_seed(rng),
            digits=digits, keep=keep, drop=drop, inputs=inputs, plan_check=plan_check, max_record=max_record,
            scheduler=scheduler, master=master, accounting=accounting, progress=progress), source.format.name, None)
    random = check_rng(rng)  # ONE source: the releases, and the cap's and the budget's choices
    drawn = make_release(release, random) if isinstance(release, PointSettings) else release
    kind = PointPairs(lat, lon, drawn, digits=digits, full=full, epsilon=epsilon, where=str(input_path),
                      validate=validate)
    # what leaves (plan_check first), by name and content, before anything is written or reserved
    plan = source.plan(kind, keep, drop, plan_check)
    run = None
    if accounting is not None:  # the first pass and the plan: budget reserved, nothing drawn for the file yet
        from ..pipeline.first_pass import start_accounted

        run = start_accounted(kind, source, accounting, random, progress=progress, columns=plan)
    return release_pass(kind, source, out, plan, inputs=inputs, progress=progress,
                        select=None if run is None else run.select, run=run)
