"""``privatize-numbers --engine dask|spark``: the entry point (the pieces' work is :mod:`._numbers`).

Kept apart from :mod:`._numbers` because it drives :mod:`._run`, which itself calls
:mod:`._numbers` for the plan and the pieces: one direction of imports, no cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from os import PathLike
from typing import Any

from ..errors import ValidationError
from ._engines import engine_runner
from ._numbers import NumberRule
from ._run import release_file

__all__ = ["privatize_numbers_engine"]


def privatize_numbers_engine(
    engine: str,
    mechanism: Any,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    out_of_range: str = "error",
    off_grid: str = "error",
    seed: int | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    inputs: Sequence[str | PathLike[str]] = (),
    piece_bytes: int | None = None,
    max_record: int | None = None,
    scheduler: str | None = None,
    master: str | None = None,
    accounting: Any = None,
    on_report: Callable[[Any], None] | None = None,
    progress: Callable[[int, int | None, str], None] | None = None,
) -> int:
    """Release ``column`` of ``input_path`` into ``out`` on ``engine`` ("dask" or "spark"); the rows written.

    ``mechanism`` is a :class:`~metricdp.mechanisms.numeric.NumberMechanism`; ``out_of_range``
    and ``off_grid`` as in :func:`metricdp.streaming.numbers.privatize_numbers_file`;
    ``scheduler`` (Dask) / ``master`` (Spark) as in
    :func:`~metricdp.integrations.dask.privatize_file_dask` /
    :func:`~metricdp.integrations.spark.privatize_file_spark`; ``accounting`` makes it a
    release per person planned by the driver (module docstring), ``on_report`` receives
    its report, ``progress`` is told the rows done as partitions complete.

    Raises
    ------
    ValidationError
        the input is refused as the local engine refuses it (one line naming file, line
        or row, and the reasons), or changed while it was released.
    EngineError
        the cluster failed: the root cause in one line. Nothing is written.
    """
    from ..mechanisms.numeric import NumberMechanism

    if engine not in ("dask", "spark"):
        raise ValidationError(f"engine must be dask or spark, got {engine!r}")
    if not isinstance(mechanism, NumberMechanism):
        raise ValidationError(f"mechanism must be a NumberMechanism, got {type(mechanism).__name__}")
    rule = NumberRule(out_of_range, off_grid)
    rule.kind(column, str(input_path), mechanism, None)  # the option errors before any cluster starts
    runner = engine_runner(engine, scheduler, master)
    from .dask import one_cluster
    from .spark import one_context

    with one_cluster() if engine == "dask" else one_context():  # one cluster for the count and the release
        return release_file(
            engine.capitalize(), runner, mechanism, input_path, column, out, seed=seed, inputs=inputs,
            piece_bytes=piece_bytes, keep=keep, drop=drop, max_record=max_record, accounting=accounting,
            on_report=on_report, rule=rule, progress=progress,
        )[0]
