r"""OPTMech: the optimal mechanism by linear programming (the builder :func:`optimal`).

Bordenabe, Chatzikokolakis, Palamidessi, "Optimal Geo-Indistinguishable Mechanisms for
Location Privacy", CCS 2014 (the LP of their Section 4, expected loss under a prior);
Imola, Kasiviswanathan, White, Aggarwal, Teissier, "Balancing Utility and Scalability in
Metric Differential Privacy", UAI 2022 (OPTMech, worst-case loss, their LP (1)).

The LP itself (variables, rows, formulations, solve and repair) is :mod:`metricdp.lp.core`, shared
with SpannerMech.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._progress import Progress, report
from .._validation import check_epsilon, check_probability_vector
from ..errors import SolverNumericalError, ValidationError
from ..lp import colgen, dantzig_wolfe, ipm_finish  # noqa: F401 -- register their formulations with .core
from ..lp.core import TIEBREAK, LPSolution, implied_pairs, lp_info, solve_and_repair
from ..lp.deadline import Deadline
from ..outputs import OutputSet, check_outputs
from ..spaces import MetricSpace, check_space
from .base import Mechanism, certify
from .lp_plan import auto_formulation, plan_optimal
from .registry import declared

__all__ = ["optimal"]


# The worst case stays on ``fast``. ``block-ipm``'s vertex is another point of the large
# optimal face: the same worst-case loss but a higher mean row loss (about 1 % on GloVe
# spaces), where ``fast``'s tie-break (:data:`metricdp.lp.core.TIEBREAK`) favours a low
# mean; and with its row pool (:mod:`metricdp.lp.rowpool`) ``fast`` is no slower there, and
# faster at large eps, where the interior point alone costs more than the whole ``fast`` build.


def _check_loss_matrix(
    loss_matrix: ArrayLike | None, space: MetricSpace, outputs: OutputSet | None = None
) -> NDArray[np.float64]:
    if loss_matrix is None:
        return np.asarray(space.distances if outputs is None else outputs.distances, dtype=np.float64)
    loss = np.asarray(loss_matrix)
    if loss.dtype == object or not np.issubdtype(loss.dtype, np.number):
        raise ValidationError(f"loss_matrix must be a numeric matrix, got dtype {loss.dtype}")
    loss = loss.astype(np.float64)
    m = space.n if outputs is None else outputs.m
    if loss.shape != (space.n, m):
        raise ValidationError(f"loss_matrix must have shape ({space.n}, {m}), got {loss.shape}")
    bad = np.argwhere(~np.isfinite(loss) | (loss < 0))
    if bad.size:
        i, j = bad[0]
        raise ValidationError(f"loss_matrix must be finite and >= 0; entry ({i}, {j}) is {loss[i, j]!r}")
    return loss


@declared("optimal")
def optimal(
    space: MetricSpace,
    epsilon: float,
    *,
    objective: str = "worst",
    prior: ArrayLike | None = None,
    loss_matrix: ArrayLike | None = None,
    time_limit: float | None = None,
    formulation: str = "auto",
    progress: Progress | None = None,
    outputs: OutputSet | None = None,
) -> Mechanism:
    r"""OPTMech: the eps-mDP mechanism of least worst-case (or expected) loss.

    Solves the linear program (Imola et al., UAI 2022, LP (1); Bordenabe et al., CCS 2014,
    Sec. 4)

    .. math::

        \min_{M, k}\ k \quad\text{s.t.}\quad
        \sum_v M[u,v] = 1,\quad \sum_v L[u,v] M[u,v] \le k \ \ (\forall u),\quad
        M[u,w] \le e^{\varepsilon' d(u,v)} M[v,w]\ \ (\forall u \ne v, \forall w),\quad M \ge 0,

    or, with ``objective="expected"``, minimises :math:`\sum_u \pi_u \sum_v L[u,v] M[u,v]`
    under the same constraints. ``L`` is the metric unless ``loss_matrix`` is given.
    It is solved at :math:`\varepsilon' = \varepsilon(1-\eta)` with a tiny :math:`\eta`
    (:func:`metricdp.lp.core.choose_eta`: :math:`\varepsilon\eta d_{\max} = 10^{-10}` where
    :math:`\varepsilon d_{\max} \le 20`), then repaired to
    an exactly :math:`\varepsilon`-mDP matrix (:func:`~metricdp.lp.repair.repair`,
    proof there), then audited independently by
    :func:`~metricdp.mechanisms.base.certify`. The price of :math:`\eta` is a relative
    loss increase of order :math:`\eta\,\varepsilon d_{\max}` over the exact optimum at
    :math:`\varepsilon`; the repair adds nothing measurable on top: within 1e-10 of an exact
    rational optimum on small random spaces, eps 0.1 to 10 (``tests/lp/test_exact.py``).

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
        The mDP level, > 0.
    objective : {"worst", "expected"}
        Worst case over inputs (default), or expected under ``prior``.
    prior : array of shape (n,), optional
        Input distribution for ``objective="expected"`` (uniform when omitted); an error
        with ``objective="worst"``.
    loss_matrix : array of shape (n, n), optional
        Non-negative loss ``L[u, v]`` of releasing v for input u, in place of d in the
        objective (privacy always uses d).
    time_limit : float, optional
        Seconds for the whole build (:class:`~metricdp.lp.deadline.Deadline`: every LP solve,
        re-solves after a failed repair included, gets the time left); on expiry a
        :class:`~metricdp.errors.SolverTimeLimitError` (status ``"limit"``).
    formulation : {"auto", "fast", "full", "ipm", "block-ipm", "column-generation", "dantzig-wolfe"}
        ``block-ipm``: the structured interior-point method of :mod:`metricdp.lp.ipm`, then the
        simplex seeded with the rows it finds binding, to the same exact vertex as
        ``fast`` (:mod:`metricdp.lp.ipm_finish`); ``auto`` (default) takes it for the expected
        objective on square spaces of at least
        :data:`~metricdp.mechanisms.lp_plan.AUTO_BLOCK_IPM_MIN_N` points, where it is the
        faster, and ``fast`` otherwise.
        ``column-generation`` (expected objective, square spaces): the structured interior
        point on a working set of outputs, grown by a pricing test, then ``block-ipm``'s exact
        finish on it and an exact pricing of the other outputs (:mod:`metricdp.lp.colgen`): the same
        optimum, for a fraction of the memory and time where the optimum releases few outputs.
        ``dantzig-wolfe`` (expected objective, square spaces): Dantzig-Wolfe decomposition over
        the outputs, a master LP of n rows over rays of the privacy cone and one pricing problem
        of n variables per output, stabilised, to the LP optimum with a dual certificate
        (:mod:`metricdp.lp.dantzig_wolfe`; proof: docs/proofs/decomposition.md); ``auto`` never
        takes it (:func:`~metricdp.mechanisms.lp_plan.auto_formulation`).
        ``full`` writes all :math:`n^2(n-1)` privacy rows (the reference); ``fast``
        substitutes the rows (w, u, w) into bounds and adds the others by
        constraint generation (same optimum: see ``core._solve_fast``); for the worst case the
        rounds break ties by the mean row loss and the result is then certified against the
        pure LP's bound (proof in ``core._solve_fast``). Timings:
        benchmarks/RESULTS.md#docstrings-optimal-formulation.
        ``fast`` and ``ipm`` (all rows at once, interior point and crossover) leave
        out the rows of pairs with a point between them
        (:func:`~metricdp.lp.core.implied_pairs`: collinear grid cells), which
        follow from shorter rows (37 % of the pairs of a 10 x 10 grid). What was tried on the
        grids and did not help: benchmarks/RESULTS.md#docstrings-optimal-formulation.
    progress : callable, optional
        First ``progress(0, None, plan)`` (model size, memory and a time scale:
        :func:`~metricdp.mechanisms.lp_plan.plan_optimal`), then ``progress(round, None,
        message)`` after every constraint-generation round (rows, LP objective, time
        left) or interior-point iteration (objective, gap); see :mod:`metricdp._progress`.
    outputs : OutputSet, optional
        A separate output set Y (:mod:`metricdp.outputs`; the LP of Bordenabe et al.,
        Sec. 4, and the survey's eq. 5 allow any finite Y): M is (n, m), the privacy rows
        are :math:`M[u,y] \le e^{\varepsilon' d(u,v)} M[v,y]` for inputs u != v and every
        output y, and L defaults to the cross distances ``outputs.distances``. The ``fast``
        and ``ipm`` formulations pivot each output on its nearest input a(y) (proof:
        ``core._solve_fast``); the repair and the audit are over the inputs, unchanged.
        No triangle inequality between X and Y is needed. When HiGHS reports numerical
        trouble on the ``fast`` or ``ipm`` LP, the full LP (same optimum) is solved instead
        within the same deadline, and ``info["lp"]["fallback"]`` says so.

    Returns
    -------
    Mechanism
        ``name="optimal"``; ``info["lp"]`` holds the LP statistics (variables,
        constraints, non-zeros, solve seconds, status, rounds, formulation, the LP
        objective at :math:`\varepsilon'` and :math:`\eta`; with ``block-ipm``,
        ``dual_bound``: a certified lower bound on the LP optimum at eps from the
        build's own duals).

    Raises
    ------
    ValidationError
        Bad arguments.
    SolverTimeLimitError
        The deadline passed before the LP reached optimality.
    SolverNumericalError, InfeasibleError
        The LP did not reach optimality (numerical trouble; infeasible is impossible for
        this LP and would be a solver failure).
    RepairError, PrivacyViolationError
        Only if the repair or the final audit cannot prove eps-mDP (never silently).

    References
    ----------
    Bordenabe, Chatzikokolakis, Palamidessi. Optimal Geo-Indistinguishable Mechanisms for
    Location Privacy. CCS 2014. Imola, Kasiviswanathan, White, Aggarwal, Teissier.
    Balancing Utility and Scalability in Metric Differential Privacy. UAI 2022.

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> s = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
    >>> m = optimal(s, 1.0)
    >>> abs(m.worst_case_loss() - 1 / (1 + np.e)) < 1e-4   # hand-derived optimum
    True
    """
    deadline = Deadline(time_limit)
    space = check_space(space)
    epsilon = check_epsilon(epsilon)
    n = space.n
    outputs = check_outputs(outputs, space)
    loss = _check_loss_matrix(loss_matrix, space, outputs)
    anchor = None if outputs is None else outputs.nearest_inputs()
    m = n if outputs is None else outputs.m
    pi: NDArray[np.float64] | None = None
    if objective == "expected":
        pi = np.full(n, 1.0 / n) if prior is None else check_probability_vector(prior, n, name="prior")
    elif prior is not None:
        raise ValidationError('prior is only used with objective="expected"')
    def solve(formulation: str, tiebreak: float) -> LPSolution:
        allowed = ~np.eye(n, dtype=bool)
        if formulation != "full":  # the reference keeps every row
            allowed &= ~implied_pairs(space.distances, epsilon)
        return solve_and_repair(
            space,
            epsilon,
            epsilon,
            allowed,
            loss,
            pi,
            formulation=formulation,
            time_limit=deadline,
            what="optimal",
            progress=progress,
            anchor=anchor,
            tiebreak=tiebreak,
        )

    # Attempts in order, each on HiGHS numerical trouble of the one before (same optimum,
    # shared deadline, recorded in info["lp"]["fallback"]):
    # * the tie-break (worst case, fast): it can put HiGHS in numerical trouble (the 100
    #   Paris cells at eps 0.5 and 1 per km), where the plain constraint generation solves;
    # * a separate output set: the dual simplex hit numerical trouble on the substituted LP
    #   (the worst case on Paris cells with a coarse lat/lon grid at eps >= 2 per km, where
    #   one far input sets the optimum and the LP is very degenerate); the full LP has the
    #   same optimum (proof: core._solve_fast) and solved every such case.
    if formulation == "auto":
        formulation = auto_formulation(n, pi is not None, outputs is None)
    report(progress, 0, None, plan_optimal(n, m, objective=objective, formulation=formulation).summary())
    attempts = [(formulation, TIEBREAK if pi is None and formulation == "fast" else 0.0)]
    if formulation in ("block-ipm", "column-generation", "dantzig-wolfe"):  # numerical trouble: constraint generation
        attempts.append(("fast", TIEBREAK if pi is None else 0.0))
    if attempts[0][1] > 0:
        attempts.append((formulation, 0.0))
    if outputs is not None and formulation != "full":
        attempts.append(("full", 0.0))
    fallbacks: list[str] = []
    for k, (form, tiebreak) in enumerate(attempts):
        try:
            solved = solve(form, tiebreak)
        except SolverNumericalError as ex:
            if k + 1 == len(attempts):
                raise
            nxt = attempts[k + 1]
            what = "without the tie-break" if nxt[0] == form else f"with the {nxt[0]} formulation"
            fallbacks.append(f"{form} formulation{' with the tie-break' if tiebreak else ''}: {ex.status}; "
                             f"solved again {what}")
            report(progress, 0, None, f"optimal: {fallbacks[-1]}")
            continue
        formulation = form
        break
    fallback = "; ".join(fallbacks) or None
    h = solved.matrix
    losses = np.einsum("uv,uv->u", h, loss)
    info: dict[str, Any] = {
        "lp": {**lp_info(solved, formulation, n * (n - 1) * m), **({"fallback": fallback} if fallback else {})},
        "loss": {"worst": float(losses.max()), "expected": float(losses @ pi) if pi is not None else None},
    }
    if pi is not None:
        info["prior"] = pi.tolist()
    params = {
        "objective": objective,
        "formulation": formulation,
        "loss_matrix": "given" if loss_matrix is not None else "metric",
    }
    return certify(h, space, epsilon, "optimal", params, info, outputs=outputs)

