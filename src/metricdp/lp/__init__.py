"""The linear-programming toolkit of metricdp: the solver layer under the LP mechanisms.

It knows LPs, not mechanism families: the mechanisms that use it (OPTMech,
:mod:`metricdp.mechanisms.optimal`; SpannerMech, :mod:`metricdp.mechanisms.spanner`;
ConstOPTMech, :mod:`metricdp.mechanisms.constopt`) live in :mod:`metricdp.mechanisms`,
and nothing here imports them. Submodules, one concept each:

* :mod:`._solve` -- the one place that calls HiGHS (:func:`solve_lp`, :class:`SolveResult`,
  :func:`require_optimal`, ``LPModel`` for warm-started re-solves);
* :mod:`.core` -- the mechanism LP (a row-stochastic matrix under privacy rows) and its
  formulations (:class:`LPSolution`); :mod:`.solution` -- what a solve returns;
* :mod:`.ipm`, :mod:`.ipm_newton`, :mod:`.ipm_finish` -- the structured interior point
  and its exact simplex finish; :mod:`.colgen` -- column generation over outputs;
  :mod:`.dantzig_wolfe` -- Dantzig-Wolfe decomposition over outputs;
  :mod:`.rowpool` -- row generation (privacy rows added as they bind);
* :mod:`.polish` -- the scaled finish beyond the exponent cap; :mod:`.basis` -- the exact
  vertex and duals of a simplex basis;
* :mod:`.certificate` -- weak-duality lower bounds (the certified gap);
* :mod:`.repair` -- the tolerance repair (proof there); :mod:`.retry` -- the one
  solve-repair retry policy (:class:`RetryPolicy`); :mod:`.deadline` -- what
  ``time_limit`` means (:class:`Deadline`, the whole build); :mod:`.pairs` -- the
  privacy rows that follow from shorter ones.

Convention (the package's): this ``__init__`` never binds a submodule's name to anything
but the submodule; it re-exports only names that are no module's. HiGHS itself is
imported only when an LP is solved.

Examples
--------
Minimise x0 + 2 x1 subject to x0 + x1 >= 1, x >= 0 (the optimum puts all weight on x0):

>>> import numpy as np, scipy.sparse as sp
>>> from metricdp.lp import solve_lp
>>> r = solve_lp(np.array([1.0, 2.0]), sp.csr_array([[1.0, 1.0]]), 1.0, np.inf, 0.0, np.inf)
>>> r.status, round(r.objective, 9), np.round(r.x, 9).tolist()
(0, 1.0, [1.0, 0.0])
"""

from __future__ import annotations

from ._solve import SolveResult, require_optimal, solve_lp
from .core import LPSolution
from .deadline import Deadline
from .retry import RetryPolicy

__all__ = [
    "Deadline",
    "LPSolution",
    "RetryPolicy",
    "SolveResult",
    "require_optimal",
    "solve_lp",
]

from .._lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, __path__)
