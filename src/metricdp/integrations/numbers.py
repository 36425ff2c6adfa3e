"""``privatize-numbers --engine dask|spark``: a numeric column released on a grid, piece by piece on a cluster.

The one engine driver (:func:`._run.release_on`) with the local engine's kind of numbers
(:class:`._rule.NumberRule`: :class:`metricdp.pipeline.numbers.Numbers`): the driver
parses every field of the column by the one number rule and places it on the grid by the
release's own rule (range, grid, ``out_of_range``, ``off_grid``), so a value the local
engine refuses is refused with the local engine's one error (count per reason, first
lines) before any task runs; each task places its piece again (a value no longer
releasable means the file changed: refused) and writes the local engine's bytes for its
records. Where a release is determined (a consistent repeat of a paid release, read back
from the ledger) the output is the local engine's byte for byte.
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any, Unpack

from ..errors import ValidationError
from ._rule import NumberRule

if TYPE_CHECKING:
    from ._run import FileOptions

__all__ = ["privatize_numbers_engine"]


def privatize_numbers_engine(engine: str, mechanism: Any, input_path: str | PathLike[str], column: str,
                             out: str | PathLike[str], *, out_of_range: str = "error", off_grid: str = "error",
                             scheduler: str | None = None, master: str | None = None,
                             **options: Unpack[FileOptions]) -> int:
    """Release ``column`` of ``input_path`` into ``out`` on ``engine`` ("dask" or "spark"); the rows written.

    ``mechanism`` is a :class:`~metricdp.mechanisms.numeric.NumberMechanism`; ``out_of_range``
    and ``off_grid`` as in :func:`metricdp.streaming.numbers.privatize_numbers_file`;
    ``scheduler``, ``master``, ``options`` and errors as in :func:`._run.release_on`.
    """
    from ..mechanisms.numeric import NumberMechanism
    from ._engines import engine_runner
    from ._run import release_on

    if not isinstance(mechanism, NumberMechanism):
        raise ValidationError(f"mechanism must be a NumberMechanism, got {type(mechanism).__name__}")
    rule = NumberRule(out_of_range, off_grid)
    rule.kind(column, str(input_path), mechanism, None)  # the option errors before any cluster starts
    return release_on(engine_runner(engine, scheduler, master), rule, mechanism, input_path, column, out,
                      **options)[0]
