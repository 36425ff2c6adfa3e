"""``engine_runner``: how a driver runs its pieces on Dask or Spark (one function per engine).

Kept in its own module above :mod:`.dask` and :mod:`.spark` (which import :mod:`._run`):
the entry points that need a runner (:mod:`.numbers`, :mod:`.persons`, :mod:`._points`)
import it from here, so no module below the engines imports them.
"""

from __future__ import annotations

from typing import Any

from .._optional import import_optional
from ..errors import ValidationError

__all__ = ["engine_runner"]


def engine_runner(engine: str, scheduler: str | None, master: str | None) -> Any:
    """``runner(job, pieces, mechanism, progress=None)`` of ``engine`` ("dask" or "spark"): its partitions run the
    pieces (``scheduler``: Dask's, ``master``: Spark's); the engine's extra must be installed."""
    if engine == "dask":
        import_optional("distributed", extra="dask")
        from .dask import _run_pieces as dask_pieces

        return lambda job, pieces, mech, progress=None: dask_pieces(job, pieces, mech, scheduler, progress)
    if engine == "spark":
        import_optional("pyspark", extra="spark")
        from .spark import _run_pieces as spark_pieces

        return lambda job, pieces, mech, progress=None: spark_pieces(job, pieces, mech, master, progress)
    raise ValidationError(f"engine must be dask or spark, got {engine!r}")
