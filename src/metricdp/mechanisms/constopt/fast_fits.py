r"""ConstOPTMech's fits on the fast model (:class:`.fast.FastModel`): the paper's penalties side by
side (:func:`solve_papers`) and Dinkelbach's iterations to the normalised fit's optimum
(:func:`dinkelbach`; Crouzeix, Ferland and Schaible 1985).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._resources import memory_limit, usable_cpus
from ...lp._solve import STATUS_NAMES, SolveResult
from .cone import polish, ratios
from .fast import FastModel

__all__ = ["MODEL_BYTES_PER_NONZERO", "concurrent_models", "dinkelbach", "solve_papers"]


#: Bytes one HiGHS model of the paper fit is assumed to take per nonzero of the dense rows
#: a(x), b(x) (its matrix, factor and IPX workspace, generously): caps the concurrent forks.
MODEL_BYTES_PER_NONZERO = 256


def concurrent_models(model: FastModel, count: int, workers: int | None = None) -> int:
    """How many of ``count`` forks of ``model`` to solve at once: ``workers`` (default: the
    CPUs this process may use), at most ``count``, and only as many models as fit in a
    quarter of :func:`~metricdp._resources.memory_limit` (at least 1: one model at a time is
    the sequential fit's own footprint)."""
    if workers is None:
        workers = usable_cpus()
    per_model = MODEL_BYTES_PER_NONZERO * float(model.dza.nnz + model.dzb.nnz)
    fit = int(0.25 * memory_limit() // max(per_model, 1.0))
    return max(1, min(int(workers), count, fit))


def solve_papers(
    model: FastModel, lambdas: Sequence[float], workers: int | None = None
) -> list[tuple[SolveResult, NDArray[np.float64] | None, float]]:
    r"""The paper LP of every penalty in ``lambdas``: its result, ``(Y, z)`` point (``None`` if not
    optimal) and certified lower bound of its optimum (:meth:`FastModel.dual_bound`).

    The first penalty is solved on ``model``, then the penalty nearest to it on the same
    model from its optimum (:meth:`FastModel.paper_warm`: a warm start in the dense regime,
    a fresh model otherwise). Every other penalty is solved on its own fresh
    :meth:`FastModel.fork` of ``model``, taken before the first solve (so unseeded), beside
    that pair from the start, on up to ``workers`` threads in all (:func:`concurrent_models`;
    HiGHS releases the GIL while it solves). Why: a warm start pays only from a near
    penalty, and a far one that waits for the first one's seed puts two interior points
    one after the other on the wall clock. Each fork keeps its own statistics, merged into
    ``model.stats`` in the order of ``lambdas`` afterwards, and its own HiGHS instance, and
    no model depends on another's timing: one thread gives exactly the models that several
    do.
    """
    lams = [float(v) for v in lambdas]
    if not lams:
        return []
    out: list[tuple[SolveResult, NDArray[np.float64] | None, float] | None] = [None] * len(lams)
    near = 1 + int(np.argmin(np.abs(np.asarray(lams[1:]) - lams[0]))) if len(lams) > 1 else None
    far = [k for k in range(1, len(lams)) if k != near]
    stats = model.stats
    forks = {k: model.fork(stats.fork()) for k in far}

    def done(m: FastModel, r: SolveResult) -> tuple[SolveResult, NDArray[np.float64] | None, float]:
        r, bound = m.certified(r)
        return r, None if r.x is None else m.point(r.x), bound

    def pair() -> None:
        out[0] = done(model, model.paper(lams[0]))
        if near is not None:
            out[near] = done(model, model.paper_warm(lams[near]))

    def solve(k: int) -> None:
        out[k] = done(forks[k], forks[k].paper(lams[k]))

    jobs = [pair] + [lambda k=k: solve(k) for k in far]
    workers = concurrent_models(model, len(jobs), workers)
    if workers == 1:
        for job in jobs:
            job()
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(job) for job in jobs]:
                future.result()
    for k in far:
        stats.merge(forks[k].stats)
    return [entry for entry in out if entry is not None]


def dinkelbach(
    model: FastModel, x0: NDArray[np.float64], rtol: float
) -> tuple[NDArray[np.float64], dict[str, Any]]:
    r"""Dinkelbach-type iterations for :math:`t^\star = \min_{x \in C} \max_u a_u(x)/b_u(x)`.

    The scaled variant of Crouzeix, Ferland and Schaible: from the incumbent
    :math:`x_k` of value :math:`t_k`, solve

    .. math:: F(t) = \min s \ \text{s.t.}\ a_u(x) - t\, b_u(x) \le s\, b_u(x_k)\ (\forall u),
              \ \sum_u b_u(x) = n,\ x \in C

    at :math:`t = t_k`; its solution has value :math:`\le t_k` and becomes the incumbent
    (superlinear convergence, finite on an LP). When an iteration improves by less than
    ``rtol`` relative, the next LP is solved at :math:`t = t_k(1 - \text{rtol})`: if
    :math:`F > 0` there, no point of the cone has value :math:`\le t` (every direction
    of C with positive rows scales onto the normalisation), which certifies
    :math:`t^\star > t_k(1 - \text{rtol})`; otherwise its solution improves by at least
    ``rtol`` and the iterations go on.
    """
    cone = model.cone
    x, t = x0, float(ratios(cone, x0).max())
    its, status, lower, final, shift = 0, "certified", None, None, False
    while True:
        b = cone.matrix(x).sum(axis=1)
        t_try = t * (1.0 - rtol) if shift else t
        r = model.normalised(t_try, b / b.mean())
        its += 1
        if r.status == 0 and shift:
            xr, final = r.optimum("constopt")
            if not final > 0 and not float(ratios(cone, polish(cone, model.point(xr))).max()) < t:
                # feasible at t(1 - rtol) only within the solver's tolerances, yet no better
                # point: once more from its basis with tight tolerances, which decides it
                r = model.tight()
                its += 1
        if r.status != 0:
            status = STATUS_NAMES.get(r.status, "numerical/other")
            break
        xr, final = r.optimum("constopt")
        if shift and final > 0:
            lower = t_try
            break
        x_new = polish(cone, model.point(xr))
        t_new = float(ratios(cone, x_new).max())
        if t_new < t:
            shift = not t_new < t * (1.0 - rtol)
            x, t = x_new, t_new
        elif shift:  # feasible at t(1 - rtol) by the solver, yet no better point: numerics
            status = "stalled"
            break
        else:
            shift = True
    info = {
        "t": t,
        "lower_bound": lower,
        "certified": lower is not None,
        "iterations": its,
        "status": status,
        "final_objective": final,
    }
    return x, info
