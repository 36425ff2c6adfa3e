"""What an engine release of one kind of value needs beyond the pipeline's kind: the engines' rule.

The engines run the pipeline's kinds (:mod:`metricdp.pipeline`: labels, numbers, points)
piece by piece: the driver plans and checks the file with the kind's parse and leak rule
(:func:`._plan.plan_file`), every partition releases its piece with the kind
(:func:`._pieces.release_piece`), and an accounted release is planned by the local
engine's first pass or by the distributed count of rows per person. A :class:`Rule` is
the little that differs between kinds there, and nothing else: how to build the kind
(with a partition's random source, or none for the driver), how its refused values are
named in a worker's error, whether the driver reads every value, and how the accounting
plans it. It travels with each task, so it holds small picklable settings only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..pipeline.kind import Kind

if TYPE_CHECKING:
    from ._plan import Plan

__all__ = ["Counted", "Rule"]

#: What a plan from the distributed count of rows per person needs: the accounting unit, the release of
#: the driver's draws (consistent groups only) and whether a file with no data rows is refused.
Counted = tuple[str, Callable[[Any], Any], bool]


class Rule(ABC):
    """One kind of release on the engines (module docstring)."""

    #: how a worker names a value its kind refuses (``line 7: 'x' is not a label``)
    refused: ClassVar[str] = "cannot be released"
    #: the driver reads every value of the released column(s) before any task runs (refusals counted there);
    #: False: the workers refuse a bad value of their piece (points: the first one, named by its row)
    checked: ClassVar[bool] = True

    @abstractmethod
    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Kind:
        """The pipeline's kind releasing ``column`` of the file ``where`` from ``source`` (None: it never draws)."""

    def check_planned(self, plan: Plan) -> None:  # noqa: B027 - most kinds release any file the driver planned
        """Refuse a planned file the kind cannot release (points: one with no data rows), before any task runs."""

    def counted(self, mechanism: Any, column: str, source: Any) -> Counted | None:
        """What a plan from the engines' count of rows per person needs, or None: the local first pass plans."""
        return None

    @abstractmethod
    def first_pass(self, mechanism: Any, src: Path, fmt: str, column: str, accounting: Any, source: Any,
                   max_record: int | None) -> Any:
        """The local engine's first pass and plan of an accounted release (the run to settle)."""
