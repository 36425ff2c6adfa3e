"""Labels on the engines: the pipeline's :class:`~metricdp.pipeline.labels.Labels`, the engines' default rule.

A value is released when its text is one of the mechanism's labels, by the local engine's
rule (:class:`metricdp.pipeline.labels.Labels`); the driver refuses the others with the
local engine's one error before any task runs, and a worker that finds one anyway (the
file changed) names it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..pipeline.kind import Kind
from ._rule import Rule

__all__ = ["LabelRule"]


class LabelRule(Rule):
    """A release of a mechanism's labels (the engines' default rule)."""

    refused: ClassVar[str] = "is not a label"

    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Kind:
        from ..pipeline.labels import Labels

        return Labels(mechanism, column, source)
