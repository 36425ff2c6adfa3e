"""``privatize-points --engine dask|spark``: (lat, lon) releases of one file, piece by piece on a cluster.

The engines' file path (:mod:`metricdp.integrations._run`) with the local engine's kind of
points (:class:`metricdp.pipeline.points.PointPairs`) for two numeric columns:

1. the driver opens the output atomically and reads the input once with the local
   engine's record definition, cutting it into pieces of whole records (CSV: byte
   ranges; Parquet: runs of row groups), with the local engine's column plan, its check
   of what leaves, and its errors (:func:`._plan.plan_file`);
2. each task releases one piece exactly as the local engine releases a chunk
   (:func:`._pieces.release_piece`: the coordinates read by the one number rule, a bad
   one refused with its data row and line, the release of
   :func:`~metricdp.location.release.make_release` drawing from
   :func:`~metricdp.integrations.partition_rng` ``(seed, piece)``, secure by default, with
   its own lattice tables, written with ``digits`` decimals or as float64) into a part file;
3. each part must hold the rows the driver counted; the driver joins the parts in
   order (CSV: the header, then the parts' bytes; Parquet: their row groups) and
   publishes. Any failure is one typed error and nothing is written.

Per person (``accounting``): the driver runs the local engine's first pass and plan
(:func:`~metricdp.pipeline.first_pass.start_accounted`: every row's
coordinates validated, the budget reserved once for the job or the run refused before
anything is drawn), each piece carries the rows it writes and, for consistent releases,
their releases (drawn or read back from the ledger by the driver); the workers draw the
others; ``publishing`` before the rename, ``commit`` after, the reservation given back
on any failure before. A withheld row is left out whole, as the local engine leaves it out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress
from ..errors import ValidationError
from ..location.release import PointSettings, full_precision, make_release
from ..pipeline.kind import Kind
from ..tabular.columns import ColumnPlan
from ._plan import Plan
from ._rule import Rule

__all__ = ["PointRule", "privatize_points_engine"]


def _drawn_by_workers(latlon: NDArray[np.float64], first_row: int) -> NDArray[np.float64]:
    raise AssertionError("the driver's kind reads coordinates only")  # pragma: no cover - never drawn


@dataclass(frozen=True)
class PointRule(Rule):
    """A release of the ``(lat, lon)`` columns by ``settings``, written with ``digits`` decimals.

    The driver reads no coordinate (:attr:`checked` False): each worker refuses the first
    bad one of its piece, named by its data row and line, as the local engine names it.
    """

    lat: str
    lon: str
    settings: PointSettings
    digits: int = 6
    checked: ClassVar[bool] = False
    counts_persons: ClassVar[bool] = False  # the first pass validates every row before anything is reserved

    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Kind:
        from ..location.release import validator
        from ..pipeline.points import PointPairs

        release = _drawn_by_workers if source is None else make_release(self.settings, source)
        return PointPairs(self.lat, self.lon, release, digits=self.digits, full=full_precision(self.settings),
                          epsilon=float(self.settings.epsilon), where=where, validate=validator(self.settings))

    def check_planned(self, plan: Plan) -> None:
        if plan.rows == 0:
            raise ValidationError(f"{plan.path}: no data rows")


def privatize_points_engine(
    engine: str,
    input_path: str | PathLike[str],
    lat: str,
    lon: str,
    out: str | PathLike[str],
    settings: PointSettings,
    *,
    seed: int | None = None,
    digits: int = 6,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    inputs: Sequence[str | PathLike[str]] = (),
    plan_check: Callable[[ColumnPlan], None] | None = None,
    piece_bytes: int | None = None,
    max_record: int | None = None,
    scheduler: str | None = None,
    master: str | None = None,
    accounting: Any = None,
    on_report: Callable[[Any], None] | None = None,
    progress: Progress | None = None,
) -> tuple[int, ColumnPlan]:
    """Release (lat, lon) of ``input_path`` into ``out`` on ``engine`` ("dask" or "spark"); (rows written, column plan).

    ``accounting`` (:class:`~metricdp.streaming.accounted.Accounting`) makes it a release
    per person, planned by the driver as the local engine plans it (module docstring);
    ``on_report`` gets its report; ``progress`` (:data:`metricdp._progress.Progress`) is
    told by the driver the rows done as partitions complete.

    Raises
    ------
    ValidationError
        the file is refused as the local engine refuses it (one line naming file, row,
        line), or changed while it was released.
    EngineError
        the cluster failed: the root cause in one line. Nothing is written.
    """
    from ._engines import engine_runner
    from ._run import release_file

    if engine not in ("dask", "spark"):
        raise ValidationError(f"engine must be dask or spark, got {engine!r}")
    src, target = Path(input_path), Path(out)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    runner = engine_runner(engine, scheduler, master)
    from .dask import one_cluster
    from .spark import one_context

    with one_cluster() if engine == "dask" else one_context():
        rows, plan = release_file(
            engine.capitalize(), runner, None, src, lat, target, seed=seed, inputs=inputs, piece_bytes=piece_bytes,
            keep=keep, drop=drop, max_record=max_record, accounting=accounting, on_report=on_report,
            rule=PointRule(lat, lon, settings, digits), progress=progress, plan_check=plan_check,
        )
    return rows, cast(ColumnPlan, plan.columns)  # the planner's: never None
