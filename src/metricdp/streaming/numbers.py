"""Release one numeric column of a CSV or Parquet file of any size on a fixed-step grid.

The file layer is :mod:`metricdp.streaming.files`'s: the same record definition
(:mod:`metricdp.tabular.csv`), the same column plan (``keep``/``drop``, the returned
:class:`~metricdp.streaming.files.ReleaseStats` names every column that left with true
values), the same byte-exact CSV splice (:mod:`metricdp.tabular.csvsplit`: every byte
outside the released and dropped columns is copied), the same Parquet batch writer, the
same atomic output (:func:`metricdp.io.atomic_write`: a temporary file renamed at the
end, nothing published on error) and one random source for the whole file. What differs
is how a field becomes an input: it is read as a number and mapped to its rank on the
grid (:class:`~metricdp.mechanisms.numeric.NumericGrid`), and the release is a rank of a
:class:`~metricdp.mechanisms.numeric.NumberMechanism` written as the grid point's text.

What a number is
----------------
:func:`metricdp.io.parse_decimal`, the one CSV number rule: Python's ``float`` of a plain
ASCII decimal (sign, digits, point, exponent; surrounding ASCII blanks allowed; no ``_``,
no non-ASCII digits). The fast path casts a chunk with Arrow (``fast_float``, correctly
rounded like ``float``); a chunk the cast refuses (a blank-padded or quoted number, or a
bad field) is read field by field, the fields matching the plain-decimal pattern still by
Arrow and every other field by :func:`~metricdp.io.parse_decimal` itself. Parquet
integer, floating and decimal columns are read as numbers, string columns as text.

Refused values
--------------
A field that is not a number, is NaN or infinite, lies outside the range, or lies off the
grid stops the release: the rest of the file is still read so that the one error gives
the count and the first lines (file, line, column, value, reason), and nothing is
written. ``out_of_range="clamp"`` moves values outside the range to its nearest end
instead (clamping is 1-Lipschitz, so the guarantee ``epsilon |x - x'|`` holds for every
pair of real values), ``off_grid="round"`` moves an off-grid value to the nearest grid
point (then the guarantee is ``epsilon (|x - x'| + step)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from os import PathLike
from typing import TYPE_CHECKING, Literal

from .._progress import Progress
from .._random import check_rng, warn_unless_secure
from ..mechanisms.numeric import NumberMechanism
from ..pipeline.engine import Engine, check_engine, cluster_seed, on_cluster
from ..pipeline.number_text import BadNumbers, parse_numbers
from ..pipeline.numbers import OFF_GRID, OUT_OF_RANGE, Numbers
from ..pipeline.run import ReleaseStats, Source, release_pass
from ..tabular.csv import DEFAULT_CHUNK_BYTES

if TYPE_CHECKING:
    from .accounted import Accounting

__all__ = ["OFF_GRID", "OUT_OF_RANGE", "BadNumbers", "parse_numbers", "privatize_numbers_file"]


def privatize_numbers_file(
    mechanism: NumberMechanism,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    rng: object = None,
    out_of_range: Literal["error", "clamp"] = "error",
    off_grid: Literal["error", "round"] = "error",
    chunk_rows: int | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    inputs: Sequence[str | PathLike[str]] = (),
    progress: Progress | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    max_record: int | None = None,
    accounting: Accounting | None = None,
    engine: str = "local",
    scheduler: str | None = None,
    master: str | None = None,
) -> ReleaseStats:
    """Replace every value of ``column`` by a release of ``mechanism``; write ``out`` (same format).

    See the module docstring for the number rule, the refusals and the options.
    ``accounting`` makes it a release per person (:mod:`metricdp.pipeline.first_pass`:
    a first pass over the user and released columns that refuses what the release would
    refuse before any budget is reserved, withheld rows left out, the ledger reserved
    before and committed after the publish); :attr:`ReleaseStats.accounting` is then its report.
    ``engine``, ``scheduler`` and ``master`` as in :func:`metricdp.streaming.files.privatize_file`
    (on a cluster: :func:`metricdp.integrations.numbers.privatize_numbers_engine`).

    Raises
    ------
    ValidationError
        A missing column, a bad ``keep``/``drop`` name, values that cannot be released
        (count, first lines and reasons), a malformed file (line and byte offset), an
        option of another engine.
    UnsafeOutputError
        ``out`` is a device, a directory, the input, ... (nothing written).
    EngineError
        the cluster failed (nothing written).
    """
    runs_on = check_engine(engine, scheduler, master, chunk_rows)
    kind = Numbers(mechanism, column, None, out_of_range=out_of_range, off_grid=off_grid, where=str(input_path))
    source = Source.of(input_path, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes, max_record=max_record)
    # what leaves, by name and content, before anything is written or reserved
    plan = source.plan(kind, keep, drop)
    if runs_on is not Engine.local:
        from ..integrations.numbers import privatize_numbers_engine

        return on_cluster(partial(
            privatize_numbers_engine, runs_on.value, mechanism, input_path, column, out, out_of_range=out_of_range,
            off_grid=off_grid, seed=cluster_seed(rng), keep=keep, drop=drop, inputs=inputs, max_record=max_record,
            scheduler=scheduler, master=master, accounting=accounting, progress=progress), source.format.name, plan)
    warn_unless_secure(rng, stacklevel=2)
    kind.source = check_rng(rng)  # ONE stream for the whole file
    if accounting is None:
        return release_pass(kind, source, out, plan, inputs=inputs, progress=progress)
    from ..pipeline.first_pass import start_accounted

    # the first pass and the plan: budget reserved, nothing drawn for the file yet
    run = start_accounted(kind, source, accounting, kind.source, progress=progress, columns=plan)
    return release_pass(kind, source, out, plan, inputs=inputs, progress=progress, select=run.select, run=run)
