"""``engine_runner``: the backend of an engine by its name (:class:`._backend.Backend`: Dask's or Spark's).

Kept in its own module above :mod:`.dask` and :mod:`.spark` (which import the backend
interface and the driver): the entry points that name an engine (:mod:`.numbers`,
:mod:`.persons`, :mod:`._points`, :mod:`metricdp.streaming`) import it from here, so no
module below the engines imports them.
"""

from __future__ import annotations

from ..errors import ValidationError
from ._backend import Backend

__all__ = ["engine_runner"]


def engine_runner(engine: str, scheduler: str | None = None, master: str | None = None) -> Backend:
    """The backend of ``engine`` ("dask": ``scheduler`` an address or None for a local cluster; "spark":
    ``master`` a master URL or None for ``local[*]``); the engine's extra must be installed."""
    if engine == "dask":
        from .dask import DaskBackend

        return DaskBackend(scheduler)
    if engine == "spark":
        from .spark import SparkBackend

        return SparkBackend(master)
    raise ValidationError(f"engine must be dask or spark, got {engine!r}")
