"""What leaves a Dask or Spark DataFrame release: the pandas/Polars API's checks, on a sample the cluster draws.

A column neither released nor named in ``keep``/``drop`` leaves with its true values.
As :func:`metricdp.frames.privatize_frame` decides it: a column named like the released
one is refused (:func:`metricdp.tabular.leaks.check_names`), so is a column that holds the
released column's true values in most compared rows (:func:`~metricdp.tabular.leaks.check_rows`
with the labels' rule), and every other unnamed column is named in an
:class:`~metricdp.errors.UnnamedColumnsWarning`.

**Where the content is checked: on a sample the driver computes first, not inside the
release's partitions.** A distributed frame is written by the caller's own writer
(``to_parquet``, ``write.parquet``), one file per partition as partitions finish; a
refusal raised by a partition of the release would come after its siblings were
written. So the driver runs two small jobs before it returns the lazy frame: the first
counts each partition's rows, which places every partition in the frame (its first
row's position: the rows of the partitions before it); in the second each partition
(each Arrow batch on Spark: the data a task sees) picks, of the released column and the
unnamed columns only (a projection: a Parquet source reads those columns only), the
rows the pandas API compares in the whole frame (:func:`~metricdp.tabular.leaks.compared_rows`:
blocks of :data:`~metricdp.tabular.leaks.SCAN_ROWS` rows from the frame's first row, each
compared on :func:`~metricdp.tabular.leaks.spread` of its rows) that fall in it, and the driver
compares each block. The verdict is the pandas API's whatever the partitions: a copy
laid across a partition boundary is in the same blocks as in the pandas frame. A
refused frame returns nothing: nothing is released or written. The cost is one count
of the rows and one pass over those columns, and none when every column is named.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.leaks import LeakRule, check_names, check_rows, compared_rows

__all__ = ["WHERE", "check_sample", "compared_rows", "plan_frame", "sample_blocks"]

#: How errors and warnings name a distributed frame (as the pandas/Polars API names its frame).
WHERE = "DataFrame"


def plan_frame(names: Sequence[str], column: str, keep: Iterable[str], drop: Iterable[str],
               sample: Callable[[list[str], str, str], Any]) -> ColumnPlan:
    """The column plan of a release of ``column``, after the checks of what leaves (module docstring).

    A column named like the released one is refused by name, before any row is read; then,
    when some column is unnamed, ``sample(columns, block, place)`` is the engine's small jobs
    (the partitions' row counts, then :func:`sample_blocks` of every partition of ``columns``,
    the released one first): one pandas frame of the rows in the frame's order (None: no
    partition), refused by :func:`check_sample`.
    """
    from ..frames import _announce

    plan = plan_columns(list(names), [column], keep=tuple(keep), drop=tuple(drop), where=WHERE)
    rule = LeakRule.labels(column)
    check_names(plan.header, plan.unacknowledged, rule, WHERE)
    if plan.unacknowledged:
        block, place = _free(names, "block"), _free(names, "place")
        found = sample([column, *plan.unacknowledged], block, place)
        if found is not None:
            check_sample(found, plan, rule, block, place)
    _announce(plan, WHERE)
    return plan


def _free(names: Sequence[str], stem: str) -> str:
    """A column name not in ``names``, for the sample's bookkeeping columns."""
    while stem in names:
        stem = f"_{stem}"
    return stem


def sample_blocks(pdf: Any, partition: str, first: int, n: int, block: str, place: str) -> Any:
    """The compared rows (:func:`compared_rows`) of a pandas frame (a partition, or one batch of it, whose
    first row is row ``first`` of a frame of ``n`` rows, 0-based), with each row's block in ``block`` and
    its place in ``place`` (``"70001 (partition 2)"``: the row's 1-based number in the frame)."""
    rows, blocks = compared_rows(n, first, first + len(pdf))
    out = pdf.iloc[[r - first for r in rows]].reset_index(drop=True)
    out[block] = blocks
    out[place] = [f"{r + 1} (partition {partition})" for r in rows]
    return out


def check_sample(sample: Any, plan: ColumnPlan, rule: LeakRule, block: str, place: str) -> None:
    """Refuse an unnamed column that holds the released values in most compared rows of a block of the
    ``sample`` (:func:`sample_blocks`' rows of every partition, in the frame's order), as the pandas/Polars
    API refuses it."""
    column = rule.columns[0]
    for _, rows in sample.groupby(block, sort=False):
        truths = [(v,) for v in rows[column].to_numpy(dtype=object)]
        others = {c: rows[c].to_numpy(dtype=object) for c in plan.unacknowledged}
        check_rows(rule, truths, others, list(rows[place]), WHERE)
