"""The LP mechanisms of metricdp (Imola et al., UAI 2022; Bordenabe et al., CCS 2014).

Submodules, one concept each (import a builder from its module):

* :mod:`.optimal` -- OPTMech, :func:`~.optimal.optimal`;
* :mod:`.spanner` -- SpannerMech, :func:`~.spanner.spanner` on :func:`~.spanner.greedy_spanner`;
* :mod:`.constopt` -- ConstOPTMech, :func:`~.constopt.constopt` (a subpackage);
* :mod:`.core` -- the mechanism LP shared by OPTMech and SpannerMech
  (:class:`~.core.LPSolution`);
* :mod:`.repair` -- the tolerance repair (:func:`~.repair.repair`, proof there);
* :mod:`.retry` -- the one solve-repair retry policy; :mod:`.deadline` -- what
  ``time_limit`` means (the whole build);
* :mod:`._solve` -- the one place that calls HiGHS (:func:`solve_lp`, :class:`SolveResult`).

Convention (the package's): this ``__init__`` never binds a submodule's name
(``optimal``, ``spanner``, ``constopt``, ``repair``, ...) to anything but the submodule;
it re-exports only names that are no module's. HiGHS itself is imported only when an LP
is solved.
"""

from __future__ import annotations

from ._solve import SolveResult, require_optimal, solve_lp
from .core import LPSolution
from .deadline import Deadline
from .retry import RetryPolicy
from .spanner import Spanner, greedy_spanner

__all__ = [
    "Deadline",
    "LPSolution",
    "RetryPolicy",
    "SolveResult",
    "Spanner",
    "greedy_spanner",
    "require_optimal",
    "solve_lp",
]

from ..._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
