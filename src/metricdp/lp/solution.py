r"""The results of the mechanism LP's solve (:mod:`.core`): one concept, the records it returns.

:class:`RawSolution` is the unrepaired LP solution of ``core.solve_raw``;
:class:`LPSolution` the repaired one of ``core.solve_and_repair`` (public: ``metricdp.lp``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ._solve import SolveResult

__all__ = ["LPSolution", "RawSolution"]


@dataclass
class LPSolution:
    """A repaired mechanism-LP solution (:func:`.core.solve_and_repair`).

    Attributes
    ----------
    matrix : ndarray of shape (n, n)
        Row-stochastic and exactly eps-mDP (proven by the repair; the builder audits it).
    result : SolveResult
        The last LP solve (status, objective at the LP level, duals, size).
    rounds, privacy_rows : int
        Constraint-generation rounds and privacy rows in the final model.
    solve_seconds : float
        HiGHS time of every solve of the attempt that succeeded.
    eta : float
        The repair slack of that attempt (the LP was solved at ``level * (1 - eta)``).
    iterations : int
        Simplex iterations of that attempt.
    """

    matrix: NDArray[np.float64]
    result: SolveResult
    rounds: int
    privacy_rows: int
    solve_seconds: float
    eta: float
    iterations: int = 0
    info: dict[str, Any] = field(default_factory=dict)


class RawSolution(NamedTuple):
    """The unrepaired LP solution of :func:`.core.solve_raw` (unpacks as a tuple)."""

    matrix: NDArray[np.float64]
    result: SolveResult
    rounds: int
    privacy_rows: int
    solve_seconds: float
    iterations: int = 0
    #: (u, v, w) of the privacy rows of the last solve, in the model's row order after
    #: the row sums (and loss rows): set by ``fast`` and the block-ipm finish, for the dual
    #: certificate (``info["lp"]["dual_bound"]``).
    rows: tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]] | None = None
