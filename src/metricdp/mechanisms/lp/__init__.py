"""LP-based mechanisms (Imola et al., UAI 2022; Bordenabe et al., CCS 2014).

OPTMech (:func:`optimal`), SpannerMech (:func:`spanner`, on :func:`greedy_spanner`) and
ConstOPTMech (:func:`constopt`), all built on one LP layer (:func:`solve_lp`,
:class:`SolveResult`) and one tolerance repair (:func:`repair`).

The functions are imported eagerly: several share their name with their module
(``repair``, ``optimal``, ``spanner``, ``constopt``), and an eager ``from`` import is
what keeps the package attribute bound to the function. HiGHS itself is imported only
when an LP is solved.
"""

from __future__ import annotations

from typing import Any

from ._solve import SolveResult, require_optimal, solve_lp
from .optimal import optimal
from .repair import repair
from .spanner import Spanner, greedy_spanner, spanner

try:  # ConstOPTMech lives in its own module (written separately); guard until it exists
    from .constopt import constopt
except ModuleNotFoundError as exc:  # pragma: no cover - only before constopt.py exists
    if exc.name != f"{__name__}.constopt":
        raise
    _CONSTOPT_MISSING = exc

    def __getattr__(name: str) -> Any:
        if name == "constopt":
            raise ImportError("metricdp.mechanisms.lp.constopt is not available") from _CONSTOPT_MISSING
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SolveResult",
    "Spanner",
    "constopt",
    "greedy_spanner",
    "optimal",
    "repair",
    "require_optimal",
    "solve_lp",
    "spanner",
]
