"""Which engine runs a release of a file: the local chunk loop, Dask or Spark, behind one entry per kind.

A release of labels (:func:`metricdp.streaming.files.privatize_file`), numbers
(:func:`metricdp.streaming.numbers.privatize_numbers_file`) or points
(:func:`metricdp.streaming.points.privatize_points_file`) takes ``engine`` and answers
with the same :class:`~metricdp.pipeline.run.ReleaseStats` on every engine: the local
engine is the chunk loop of :mod:`.run`; ``"dask"`` and ``"spark"`` are the file paths of
:mod:`metricdp.integrations`, which release the file piece by piece with the same kind of
value, record definition, column plan and errors. The options that belong to one engine
are checked here, before anything is read or started.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from .._optional import require
from ..errors import ValidationError
from ..tabular.columns import ColumnPlan
from .run import ReleaseStats

__all__ = ["Engine", "check_engine", "cluster_seed", "on_cluster"]


class Engine(StrEnum):
    """Where a release runs: ``local`` (streamed in this process), ``dask`` or ``spark`` (a cluster)."""

    local = "local"
    dask = "dask"
    spark = "spark"


def check_engine(engine: str, scheduler: str | None = None, master: str | None = None,
                 chunk_rows: int | None = None, local_only: Sequence[tuple[bool, str]] = ()) -> Engine:
    """``engine`` as an :class:`Engine`, its options checked before anything is read or started.

    ``scheduler`` is Dask's, ``master`` Spark's; ``chunk_rows`` and each ``(given, what)`` of
    ``local_only`` (``what``: how the message names it) are the local engine's (a cluster partitions the data itself); a
    cluster engine's extra must be installed (:func:`metricdp._optional.require`).

    Raises
    ------
    ValidationError
        an unknown engine, or an option of another engine (the message names the parameter).
    MissingExtraError
        the engine's extra is not installed.
    """
    try:
        chosen = Engine(engine)
    except ValueError:
        raise ValidationError(f"engine must be one of {', '.join(Engine)}, got {engine!r}") from None
    if scheduler is not None and chosen is not Engine.dask:
        raise ValidationError("the parameter 'scheduler' is for engine='dask'")
    if master is not None and chosen is not Engine.spark:
        raise ValidationError("the parameter 'master' is for engine='spark'")
    if chosen is Engine.local:
        return chosen
    if chunk_rows is not None:
        raise ValidationError("the parameter 'chunk_rows' is for engine='local' (engines partition the data "
                              "themselves)")
    for given, what in local_only:
        if given:
            raise ValidationError(f"{what} is for engine='local'")
    require(chosen.value, what=f"engine={chosen.value!r}")
    return chosen


def cluster_seed(rng: object) -> int | None:
    """``rng`` of a release on a cluster: None (the OS secure source in every partition) or an int seed, whose
    ``SeedSequence`` children the partitions draw from (:func:`metricdp.integrations.partition_rng`)."""
    if rng is None or (isinstance(rng, int) and not isinstance(rng, bool)):
        return rng
    raise ValidationError(f"a release on a cluster draws each partition's stream from a seed: rng must be None or "
                          f"an int, got {type(rng).__name__}")


def on_cluster(release: Callable[..., Any], fmt: str, plan: ColumnPlan | None) -> ReleaseStats:
    """The :class:`ReleaseStats` of ``release(on_report=...)``, an engine's file path (:mod:`metricdp.integrations`).

    ``release`` returns the rows written, or (rows, the column plan its driver made);
    ``plan`` is the one made before it started (None: the driver's), ``fmt`` the input's format name.
    """
    t0 = time.perf_counter()
    reports: list[Any] = []
    done = release(on_report=reports.append)
    rows, columns = done if isinstance(done, tuple) else (done, plan)
    return ReleaseStats(rows, time.perf_counter() - t0, fmt, columns, reports[0] if reports else None)
