"""What an engine release of one kind of value needs beyond the pipeline's kind: the engines' rules.

The engines run the pipeline's kinds (:mod:`metricdp.pipeline`: labels, numbers, points)
piece by piece: the driver plans and checks the file with the kind's parse and leak rule
(:func:`._plan.plan_file`), every partition releases its piece with the kind
(:func:`._pieces.release_piece`), and an accounted release is planned by the local
engine's first pass or by the distributed count of rows per person, with the kind's
eps, unit and release. A :class:`Rule` is the little that differs between kinds there,
and nothing else: how to build the kind (with a partition's random source, or none for
the driver's check), how its refused values are named in a worker's error, whether the
driver reads every value, and whether the accounting may plan from the count alone. It
travels with each task, so it holds small picklable settings only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..pipeline.kind import Kind

if TYPE_CHECKING:
    from ._plan import Plan

__all__ = ["LabelRule", "NumberRule", "Rule"]


class Rule(ABC):
    """One kind of release on the engines (module docstring)."""

    #: how a worker names a value its kind refuses (``line 7: 'x' is not a label``)
    refused: ClassVar[str] = "cannot be released"
    #: the driver reads every value of the released column(s) before any task runs (refusals counted there);
    #: False: the workers refuse a bad value of their piece (points: the first one, named by its row)
    checked: ClassVar[bool] = True
    #: an accounted release without consistent groups may be planned from the engines' count of rows per
    #: person; False: always by the local first pass (which also runs the kind's own check of every row)
    counts_persons: ClassVar[bool] = True

    @abstractmethod
    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Kind:
        """The pipeline's kind releasing ``column`` of the file ``where`` from ``source`` (None: it never draws)."""

    def check_planned(self, plan: Plan) -> None:  # noqa: B027 - most kinds release any file the driver planned
        """Refuse a planned file the kind cannot release (points: one with no data rows), before any task runs."""


class LabelRule(Rule):
    """A release of a mechanism's labels (the engines' default rule): the pipeline's
    :class:`~metricdp.pipeline.labels.Labels`."""

    refused: ClassVar[str] = "is not a label"

    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Kind:
        from ..pipeline.labels import Labels

        return Labels(mechanism, column, source, where=where)


@dataclass(frozen=True)
class NumberRule(Rule):
    """A release of numbers on a mechanism's grid (:class:`~metricdp.pipeline.numbers.Numbers`), with the local
    engine's ``out_of_range`` and ``off_grid``."""

    out_of_range: str = "error"
    off_grid: str = "error"

    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Kind:
        from ..pipeline.numbers import Numbers

        return Numbers(mechanism, column, source, out_of_range=self.out_of_range, off_grid=self.off_grid, where=where)
