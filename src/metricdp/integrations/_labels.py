"""Labels on the engines: the pipeline's :class:`~metricdp.pipeline.labels.Labels` and the accounting's plans.

A value is released when its text is one of the mechanism's labels, by the local engine's
rule (:class:`metricdp.pipeline.labels.Labels`); the driver refuses the others with the
local engine's one error before any task runs, and a worker that finds one anyway (the
file changed) names it. An accounted release is planned from the distributed count of
rows per person, or by the local first pass when consistent releases need every true value.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from ..errors import PrivacyLeakWarning
from ..pipeline.kind import Kind
from ._rule import Counted, Rule

__all__ = ["LabelRule", "sample"]


def sample(mechanism: Any, codes: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
    """Releases of ``codes`` (row indices) from ``mechanism``'s public sampler."""
    if len(codes) == 0:
        return codes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # a seed is announced once, by the caller
        return np.asarray(mechanism.sample(codes, rng), dtype=np.intp)


class LabelRule(Rule):
    """A release of a mechanism's labels (the engines' default rule)."""

    refused: ClassVar[str] = "is not a label"

    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Kind:
        from ..pipeline.labels import Labels

        return Labels(mechanism, column, source)

    def counted(self, mechanism: Any, column: str, source: Any) -> Counted | None:
        from ..units import space_unit

        return (space_unit(mechanism.space, mechanism.metadata), lambda idx: sample(mechanism, idx, source),
                False)  # the local starter publishes a file with no data rows

    def first_pass(self, mechanism: Any, src: Path, fmt: str, column: str, accounting: Any, source: Any,
                   max_record: int | None) -> Any:
        from ..streaming.accounted import AccountedRun
        from ..tabular.csv import DEFAULT_CHUNK_BYTES

        return AccountedRun.start(mechanism, src, fmt, column, accounting, lambda idx: sample(mechanism, idx, source),
                                  source, chunk_rows=1_000_000, chunk_bytes=DEFAULT_CHUNK_BYTES, max_record=max_record)
