"""``privatize-numbers --engine dask|spark``: a numeric column released on a grid, piece by piece on a cluster.

The shape of :mod:`._run` (plan, pieces, parts, check, join, publish) with the local
engine's kind of numbers (:class:`metricdp.pipeline.numbers.Numbers`) in place of labels:

1. the driver reads the input once with the local engine's record definition and column
   plan, parses every field of the column by the one number rule and places it on the
   grid by the release's own rule (range, grid, ``out_of_range``, ``off_grid``), so a
   value the local engine refuses is refused here with the local engine's one error
   (count per reason, first lines) before any task runs (:func:`._plan.plan_file`);
2. each task (:func:`._pieces.release_piece`) re-reads its piece with the same record
   definition, places it on the grid again (a value that is no longer releasable means
   the file changed: refused), draws its releases from
   :func:`~metricdp.integrations.partition_rng` ``(seed, piece)`` (secure by default) and
   writes the local engine's bytes for those records: CSV fields spliced with the grid
   points' text (quoted where the input field was), every other byte kept, dropped
   columns removed; Parquet row groups with the column replaced, the schema kept;
3. the driver checks every part's row count, joins the parts and publishes atomically.

With ``accounting`` the driver plans per person as the local engine plans
(:func:`metricdp.pipeline.first_pass.start_accounted`, or the distributed count of rows
per person: one reservation per job) and each piece carries the rows it writes
(and, for consistent releases, their releases).

Same output as the local engine: for a given input the engines write the local engine's
bytes everywhere but in the released fields, which are draws of the same law; where a
release is determined (a consistent repeat of a paid release, read back from the ledger)
the output is the local engine's byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..pipeline.kind import Kind
from ..tabular.csv import DEFAULT_CHUNK_BYTES
from ._plan import DEFAULT_PIECE_BYTES, Plan, plan_file
from ._rule import Rule

__all__ = ["NumberRule", "plan_numbers"]

@dataclass(frozen=True)
class NumberRule(Rule):
    """A release of numbers on a mechanism's grid, with the local engine's ``out_of_range`` and ``off_grid``."""

    out_of_range: str = "error"
    off_grid: str = "error"

    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Kind:
        from ..pipeline.numbers import Numbers

        return Numbers(mechanism, column, source, out_of_range=self.out_of_range, off_grid=self.off_grid, where=where)


def plan_numbers(
    src: Path, column: str, mechanism: Any, rule: NumberRule, *, piece_bytes: int = DEFAULT_PIECE_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES, keep: Sequence[str] = (), drop: Sequence[str] = (),
    max_record: int | None = None,
) -> Plan:
    """Check every value of ``column`` of ``src`` as the local engine would and cut the file into pieces.

    Raises
    ------
    ValidationError
        the local engine's errors, with its messages: the column plan's, the record
        definition's (line and byte offset), the values that cannot be released (count
        per reason, first lines or rows, "nothing written").
    """
    return plan_file(src, rule.kind(column, str(src), mechanism, None), piece_bytes=piece_bytes,
                     chunk_bytes=chunk_bytes, keep=keep, drop=drop, max_record=max_record)
