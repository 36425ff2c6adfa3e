r"""ConstOPTMech's fit orchestration: candidates, their comparison, the repair of the winner.

One fit at an inner level (:func:`run_fit`): the exponential mechanism, the paper fit for
every penalty and, for the normalised fit, its optimum are candidates; the best is
repaired to exactly :math:`\varepsilon` (:func:`repair_winner`) under the shared retry
policy (:data:`metricdp.lp.retry.CONSTOPT`). Imola et al., UAI 2022, Algorithm 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._progress import Progress
from ...errors import SolverError
from ...loss import element_losses, quantile_rank
from ...lp._solve import STATUS_NAMES, error_type
from ...lp.deadline import Deadline
from ...lp.repair import repair, repair_free
from ...lp.retry import CONSTOPT
from ...spaces import MetricSpace
from .cone import Cone, build_cone, mechanism_rows, polish, ratios
from .fast import FastModel
from .fast_fits import dinkelbach, solve_papers
from .reference import bisection, paper_lp
from .stats import FitStats, lp_info

__all__ = ["FIT_RTOL", "Candidate", "Fit", "fit_at", "loss_score", "repair_winner", "run_fit"]

#: Relative optimality tolerance of the normalised fit.
FIT_RTOL = 1e-6


@dataclass(frozen=True)
class Candidate:
    """One member of the family considered by a fit (its matrix is formed only for the winner)."""

    name: str  # "exponential", "paper" or "normalised"
    lam: float | None
    losses: NDArray[np.float64]  # element losses of H (before the tolerance repair)
    x: NDArray[np.float64] | None  # (Y, z) at the LP level; None for the exact EM

    def score(self, quantile: float | None) -> float:
        return loss_score(self.losses, quantile)


def loss_score(losses: NDArray[np.float64], quantile: float | None) -> float:
    """Worst-case loss, or the inverted-CDF quantile of the element losses."""
    if quantile is None:
        return float(losses.max())
    return float(np.sort(losses)[quantile_rank(len(losses), quantile) - 1])


@dataclass
class Fit:
    matrix: NDArray[np.float64]
    info: dict[str, Any]
    score: float


def run_fit(
    space: MetricSpace,
    inner: float,
    free: NDArray[np.bool_],
    fit: str,
    lambdas: tuple[float, ...],
    quantile: float | None,
    formulation: str,
    deadline: Deadline,
    with_em: bool = True,
    progress: Progress | None = None,
) -> Fit:
    """Every candidate of one fit at inner level ``inner`` (guarantee ``2 inner``), repaired.

    Should the repair fail in a way a larger margin can fix (a retryable
    :class:`~metricdp.errors.RepairError`; rare, since the observed spreads are far
    inside the margin: benchmarks/RESULTS.md#docstrings-constopt-fit-run-fit), the fit is redone at a larger eta
    (:data:`metricdp.lp.retry.CONSTOPT`).
    """
    stats = FitStats(progress=progress, deadline=deadline)

    def attempt(eta: float) -> Fit:
        return fit_at(space, inner, eta, free, fit, lambdas, quantile, formulation, deadline, with_em, stats)

    return CONSTOPT.run(attempt, CONSTOPT.initial(2.0 * inner, space.d_min), progress=progress, what="constopt")


def _error(stats: FitStats) -> type[SolverError]:
    """The typed error of a fit none of whose LPs reached optimality (its last failure)."""
    return SolverError if stats.failure is None else error_type(stats.failure)


def fit_at(
    space: MetricSpace,
    inner: float,
    eta: float,
    free: NDArray[np.bool_],
    fit: str,
    lambdas: tuple[float, ...],
    quantile: float | None,
    formulation: str,
    deadline: Deadline,
    with_em: bool,
    stats: FitStats | None = None,
) -> Fit:
    d = space.distances
    guarantee = 2.0 * inner
    level = inner * (1.0 - eta)
    cone = build_cone(d, free, level)
    stats = FitStats() if stats is None else FitStats(progress=stats.progress, deadline=stats.deadline)
    em = mechanism_rows(np.exp(-inner * d))
    candidates = [Candidate("exponential", None, element_losses(em, d), None)]
    del em  # n x n: rebuilt only if the EM wins
    paper: dict[str, Any] = {}
    if formulation == "fast":  # the penalties' LPs side by side (solve_papers)
        solved = solve_papers(FastModel(cone, deadline, stats), lambdas)
    else:
        solved = [(r, x, np.nan) for x, r in (paper_lp(cone, lam, deadline, stats) for lam in lambdas)]  # no bound
    for lam, (r, x, bound) in zip(lambdas, solved, strict=True):
        entry: dict[str, Any] = {"status": STATUS_NAMES.get(r.status, "numerical/other"), "message": r.message}
        if not np.isnan(bound) and r.objective is not None:  # fast: the certificate of this LP's optimum
            entry.update(dual_bound=bound if np.isfinite(bound) else None,
                         gap=(float(r.objective) - bound) / max(abs(float(r.objective)), 1e-300)
                         if np.isfinite(bound) else None)
        if x is not None:
            x = polish(cone, x)
            cand = Candidate("paper", lam, ratios(cone, x), x)
            candidates.append(cand)
            entry.update(objective=r.objective, loss=cand.score(quantile))
        paper[repr(float(lam))] = entry
    normalised: dict[str, Any] | None = None
    if fit == "normalised":
        # start from the best point of the family found so far (EM is x = 1)
        points = [c.x for c in candidates if c.x is not None] + [np.ones(cone.n + cone.nfree)]
        x0 = min(points, key=lambda p: float(ratios(cone, p).max()))
        if formulation == "fast":  # a fresh model: faster than switching the paper one
            x, normalised = dinkelbach(FastModel(cone, deadline, stats), x0, FIT_RTOL)
        else:
            x, normalised = bisection(cone, x0, deadline, stats, FIT_RTOL)
        if not normalised["certified"]:
            normalised["note"] = "the optimum was not certified; the best point found is used"
        x = polish(cone, x)  # x0 may be the unpolished EM point x = 1
        candidates.append(Candidate("normalised", None, ratios(cone, x), x))
    if stats.optimal == 0:
        raise _error(stats)(
            f"constopt: no LP reached optimality (last: {stats.message}); the exponential mechanism "
            "is not returned in its place silently: build it explicitly, or allow more time",
            status=STATUS_NAMES.get(stats.status, "numerical/other"),
        )
    scores = [c.score(quantile) for c in candidates]
    # without the EM candidate, the best LP candidate is returned whatever its loss
    first = 0 if with_em else 1
    if len(candidates) == 1:  # only EM: every LP of the fit failed (intermediate LPs may not have)
        raise _error(stats)(
            "constopt: no LP candidate of the fit reached optimality ("
            + "; ".join(f"lambda {k}: {v['message']}" for k, v in paper.items())
            + (
                "); the exponential mechanism is not returned in its place silently: build it explicitly"
                if with_em
                else "), and exponential_candidate=False leaves the exponential mechanism out"
            ),
            status=STATUS_NAMES.get(stats.status, "numerical/other"),
        )
    order = np.argsort(scores[first:], kind="stable") + first
    best = candidates[int(order[0])]
    em_score = scores[0]
    matrix, winner, score = None, "exponential", em_score
    if best.x is not None:  # an LP candidate (the exponential mechanism has no x)
        repaired = repair_winner(cone, best.x, d, guarantee, eta, formulation)
        rep_score = loss_score(element_losses(repaired, d), quantile)
        if rep_score <= em_score or not with_em:
            matrix, winner, score = repaired, best.name, rep_score
        else:
            del repaired
    if matrix is None:
        matrix = mechanism_rows(np.exp(-inner * d))
    info: dict[str, Any] = {
        # every LP optimal and, for the normalised fit, the optimum certified
        "optimal": stats.optimal == stats.lps and (normalised is None or bool(normalised["certified"])),
        "winner": winner,
        "lambda": best.lam if winner == "paper" else None,
        "losses": {
            "exponential": em_score,
            "paper": {k: v.get("loss") for k, v in paper.items()},
            "normalised": scores[-1] if fit == "normalised" else None,
            "returned": score,
        },
        "paper": paper,
        "normalised": normalised,
        "inner_epsilon": inner,
        "lp_epsilon": level,
        "eta": eta,
        "lp": lp_info(cone, stats, formulation),
    }
    return Fit(matrix, info, score)


def repair_winner(
    cone: Cone, x: NDArray[np.float64], d: NDArray[np.float64], guarantee: float, eta: float, formulation: str
) -> NDArray[np.float64]:
    r"""The winner's H made exactly ``guarantee``-mDP.

    ``fast``: :func:`~metricdp.lp.repair.repair_free` on :math:`M_{\text{full}}`
    at the LP level, in :math:`O(n^2 + \#(22))`. Its precondition holds for the polished
    point (:func:`polish`): two fixed entries of a column by the triangle inequality, a
    free and a fixed one by rows (25) and (26), which the clipping makes exact and the
    cap ``LOG_CAP`` only tightens; only rows (22) carry the solver's tolerance, and the
    repair lifts exactly those. ``full`` (the reference): the column envelope of
    :func:`~metricdp.lp.repair.repair` on H, :math:`O(n^3)`.
    """
    if formulation == "fast":
        return repair_free(cone.matrix(x), d, cone.level, guarantee, rows=cone.fu, cols=cone.fw, overwrite=True)
    return repair(mechanism_rows(cone.matrix(x)), d, guarantee, eta=eta)
