"""``privatize-points --engine dask|spark``: (lat, lon) releases of one file, piece by piece on a cluster.

The one engine driver (:func:`._run.release_on`) with the local engine's kind of points
(:class:`metricdp.pipeline.points.PointPairs`) for two numeric columns: each task
releases its piece as the local engine releases a chunk (the coordinates read by the one
number rule, a bad one refused with its data row and line, the release of
:func:`~metricdp.location.release.make_release` drawing from
:func:`~metricdp.integrations.partition_rng` ``(seed, piece)``, secure by default, with its
own lattice tables, written with ``digits`` decimals or as float64).

Per person (``accounting``) the driver plans with the local engine's first pass
(:attr:`PointRule.counts_persons` False: every row's coordinates validated before the
budget is reserved); a withheld row is left out whole, as the local engine leaves it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ..location.release import PointSettings, full_precision, make_release
from ..pipeline.kind import Kind
from ..tabular.columns import ColumnPlan
from ._plan import Plan
from ._rule import Rule

if TYPE_CHECKING:
    from ._run import FileOptions

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


def privatize_points_engine(engine: str, input_path: str | PathLike[str], lat: str, lon: str,
                            out: str | PathLike[str], settings: PointSettings, *, digits: int = 6,
                            scheduler: str | None = None, master: str | None = None,
                            **options: Unpack[FileOptions]) -> tuple[int, ColumnPlan]:
    """Release (lat, lon) of ``input_path`` into ``out`` on ``engine`` ("dask" or "spark"); (rows written, column plan).

    ``settings`` the release, its points written with ``digits`` decimals; ``scheduler``,
    ``master``, ``options`` (``accounting``: module docstring) and errors as in
    :func:`._run.release_on`.
    """
    from ._engines import engine_runner
    from ._run import release_on

    return release_on(engine_runner(engine, scheduler, master), PointRule(lat, lon, settings, digits), None,
                      input_path, lat, out, **options)
