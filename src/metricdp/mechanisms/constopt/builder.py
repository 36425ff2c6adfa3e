r"""ConstOPTMech's builder :func:`constopt` (Imola et al., UAI 2022, Algorithm 1).

Checks the arguments, starts the build's :class:`~metricdp.lp.deadline.Deadline`, runs one fit
(:mod:`.fit`) at the paper's inner level eps/2 (and, with ``calibrate``, at the levels
of the bisection), and audits the result (:func:`~metricdp.mechanisms.base.certify`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._progress import Progress, report
from ..._validation import check_epsilon
from ...errors import ValidationError
from ...lp.deadline import Deadline
from ...spaces import MetricSpace, check_space
from ..base import Mechanism, certify
from ..lp_plan import check_plan, plan_constopt
from ..registry import declared
from .fit import Fit, run_fit
from .replacement import free_mask

__all__ = ["DEFAULT_LAMBDAS", "constopt", "describe_winner"]

#: The penalties of the paper's experiments (Imola et al., Section 6).
DEFAULT_LAMBDAS: tuple[float, ...] = (0.001, 0.1, 1.0)


@declared("constopt")
def constopt(
    space: MetricSpace,
    epsilon: float,
    *,
    neighbours: int = 10,
    replacement: ArrayLike | tuple[ArrayLike, ArrayLike] | None = None,
    fit: str = "normalised",
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    quantile: float | None = None,
    calibrate: bool = False,
    time_limit: float | None = None,
    formulation: str = "fast",
    exponential_candidate: bool = True,
    progress: Progress | None = None,
) -> Mechanism:
    r"""ConstOPTMech (Imola et al., UAI 2022, Algorithm 1): an LP mechanism of small size.

    Entries :math:`M[u,v]` with :math:`u \in I(v)` are LP variables; all others are fixed
    to :math:`Y_v e^{-\varepsilon' d(u,v)}` with :math:`\varepsilon' = \varepsilon/2`
    and one variable :math:`Y_v \ge 0` per column. The result is

    .. math:: H[u,v] = M_{\text{full}}[u,v] \Big/ \sum_{w} M_{\text{full}}[u,w],

    which is :math:`\varepsilon`-mDP when :math:`M_{\text{full}}` satisfies the privacy
    rows at :math:`\varepsilon'` (the paper's Theorem 2: normalising changes a ratio by
    :math:`s_v/s_u \le e^{\varepsilon' d(u,v)}`). The reduced LP is the one of the
    paper's Theorem 1 proof: variables Y, the free entries and k; rows

    * (18) :math:`\sum_v M_{\text{full}}[w,v]\,(d(w,v) + \lambda) \le k` for every w.
      The paper's equation (6) prints the penalty as :math:`\lambda \sum_u M_{uu}`; it
      is meant to penalise rows that sum to more than 1, and is read here as
      :math:`\lambda` times the row sum of w;
    * (20) every row of :math:`M_{\text{full}}` sums to at least 1;
    * (22) :math:`M[u,w] \le e^{\varepsilon' d(u,v)} M[v,w]` for :math:`u \ne v`, both in
      :math:`I(w)`;
    * (25) :math:`M[u,w] \le Y_w \min_{v \notin I(w)} e^{\varepsilon'(d(u,v) - d(v,w))}`
      for :math:`u \in I(w)`;
    * (26) :math:`Y_w \max_{u \notin I(w)} e^{-\varepsilon'(d(u,w) + d(u,v))} \le M[v,w]`
      for :math:`v \in I(w)`;

    rows between two fixed entries hold by the triangle inequality and are not built.

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
        The mDP level of the result, > 0.
    neighbours : int, optional
        r of the default replacement :math:`I_{NN,r}` (:func:`nearest_neighbour_replacement`);
        ignored when ``replacement`` is given. ``r >= n - 1`` frees every off-diagonal
        entry (r is capped at ``n - 1``, the value recorded in ``params``).
    replacement : bool array (n, n) or (rows, cols), optional
        A user replacement function: ``mask[u, v]`` (or the pairs ``(rows[k], cols[k])``)
        True when :math:`u \in I(v)`, i.e. ``M[u, v]`` is free. Any set is valid, the
        diagonal included (Theorem 2 holds for every I; a free diagonal entry is one more
        variable). A column that is entirely free has no fixed entry and no :math:`Y_v`.
    fit : {"normalised", "paper"}
        ``paper``: the reduced LP for every lambda, keeping the H of lowest loss.
        ``normalised`` (default): additionally minimise the worst-case loss of H itself
        exactly (to relative ``FIT_RTOL``; a generalised linear-fractional program over
        the cone of the family, see the module docstring and ``docs/proofs/constopt.md``).
    lambdas : sequence of float
        Penalties of the paper fit (default ``(0.001, 0.1, 1.0)`` as in the paper's
        experiments); may be empty for the normalised fit.
    quantile : float in (0, 1], optional
        Compare the candidates by this quantile of the element losses (inverted CDF)
        instead of the worst case. The normalised fit still minimises the worst case.
    calibrate : bool
        Find by bisection the largest inner level p in [eps/2, eps] whose result passes
        the exact audit at ``epsilon`` (:func:`~metricdp.mechanisms.calibration.largest_passing`)
        and return it when its loss is lower. Privacy then rests on that audit.
    time_limit : float, optional
        Seconds for the whole build (:class:`~metricdp.lp.deadline.Deadline`:
        every LP of every fit and calibration step draws on one budget). An LP cut
        short is a failed candidate; when no LP candidate of a fit reached optimality,
        :class:`~metricdp.errors.SolverTimeLimitError`.
    formulation : {"fast", "full"}
        ``full``: every LP in one piece as the paper writes it, each solved from scratch,
        and plain bisection for the normalised fit (the reference). ``fast`` (default):
        column generation from a small model for each lambda, one warm-started model for
        the normalised fit, rows (26) as bounds, rows (22) implied by (25) and (26) left out, column generation
        over output columns, and Dinkelbach-type iterations for the normalised fit
        (:class:`FastModel`), and the :math:`O(n^2)` tolerance repair
        :func:`~metricdp.lp.repair.repair_free`. Both reach optima of the
        same LPs; the paper fit's losses agree up to ties between optimal vertices.
    exponential_candidate : bool
        ``True`` (default): the exponential mechanism at eps is a candidate, so the
        result is never worse than it. ``False``: the best LP candidate of the fit is
        returned even where the exponential mechanism would beat it (to measure the fit
        itself, as the paper's ablation does); privacy is unchanged.

    progress : callable, optional
        First ``progress(0, None, plan)`` (model size, memory and a time scale:
        :func:`~metricdp.mechanisms.lp_plan.plan_constopt`), then ``progress(lp, None,
        message)`` after every LP solve (round, rows, objective, time left); see
        :mod:`metricdp._progress`.

    Returns
    -------
    Mechanism
        Name ``"constopt"``; ``info["winner"]`` says which candidate was returned
        (``"normalised"``, ``"paper"`` with ``info["lambda"]``, or ``"exponential"``
        when no LP candidate beat the exponential mechanism at ``epsilon``, which is
        itself the member Y = 1 of the family; :func:`describe_winner` says it in one
        line); ``info["losses"]`` holds every
        candidate's loss, ``info["lp"]`` the LP statistics (``paper_counts`` are the
        counts of the paper's LP, Theorem 1 / Corollary 1).

    Raises
    ------
    ValidationError
        Bad arguments (each names the culprit).
    SolverError
        When no LP candidate of the fit reached optimality, even if intermediate LPs of
        its column generation did: :class:`~metricdp.errors.SolverTimeLimitError` (time
        limit), :class:`~metricdp.errors.SolverNumericalError` (numerical trouble, or an
        LP HiGHS calls unbounded), by the status of the last failed LP. The
        exponential mechanism is never returned in its place silently.
    PrivacyViolationError
        When the repaired matrix fails the independent audit (never expected).
    ResourceLimitError
        Before any LP, when the paper's full reduced LP cannot fit the memory limit
        (:func:`~metricdp.mechanisms.lp_plan.check_plan`).

    Notes
    -----
    *Solver tolerance.* Every LP is solved at :math:`\varepsilon'(1-\eta)` with
    :math:`\varepsilon \eta\, d_{\min} = 10^{-6}`; the chosen candidate is then
    repaired at :math:`\varepsilon` and audited by
    :func:`~metricdp.mechanisms.base.certify`. ``fast``:
    :func:`~metricdp.lp.repair.repair_free` lifts only the free entries of
    :math:`M_{\text{full}}` (envelope over the pairs of rows (22), :math:`O(n^2)`; rows
    (25), (26) are exact after clipping and fixed entries are exact by construction)
    and normalises (Theorem 2). ``full``: :func:`~metricdp.lp.repair.repair`
    on H (column envelope, row normalisation, checked spread; :math:`O(n^3)`). A
    candidate is compared before the repair; the repaired winner is returned only if it
    still beats the exponential mechanism.

    References
    ----------
    J. Imola, S. Kasiviswanathan, S. White, A. Aggarwal, N. Teissier. Balancing Utility
    and Scalability in Metric Differential Privacy. UAI 2022 (Algorithm 1, Theorems 1-2).
    J.-P. Crouzeix, J. A. Ferland, S. Schaible. An algorithm for generalized fractional
    programs. J. Optim. Theory Appl. 47 (1985).

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> space = MetricSpace.from_points([[0.0], [1.0], [2.5], [4.0], [4.2]])
    >>> mech = constopt(space, 1.0, neighbours=2)
    >>> mech.name, mech.audit().epsilon <= 1.0
    ('constopt', True)
    >>> mech.worst_case_loss() <= mech.info["losses"]["exponential"]
    True
    """
    deadline = Deadline(time_limit)  # the whole build, from here
    space = check_space(space)
    epsilon = check_epsilon(epsilon)
    lams = tuple(dict.fromkeys(float(v) for v in lambdas))  # declared >= 0 (registry); duplicates removed
    if fit == "paper" and not lams:
        raise ValidationError("the paper fit needs at least one lambda")
    q = None if quantile is None else float(quantile)
    free = free_mask(space, replacement, neighbours)
    plan = plan_constopt(free, formulation=formulation, fit=fit, lambdas=len(lams))  # before any LP
    check_plan(plan, "fewer free neighbours per output give a smaller LP")
    report(progress, 0, None, plan.summary())
    if epsilon * space.diameter > 700:
        raise ValidationError(
            f"epsilon * diameter = {epsilon * space.diameter:.4g} > 700: exp(-eps d) underflows in "
            "double precision and no finite matrix is exactly eps-mDP there; rescale the distances"
        )

    def run(inner: float) -> Fit:
        return run_fit(
            space, inner, free, fit, lams, q, formulation, deadline, bool(exponential_candidate), progress
        )

    result = run(epsilon / 2)
    info = result.info
    if calibrate:
        result, info = _calibrate(space, epsilon, run, result)
    params = {
        "neighbours": None if replacement is not None else min(int(neighbours), space.n - 1),
        "replacement": "user" if replacement is not None else "nearest_neighbours",
        "free_entries": int(free.sum()),
        "fit": fit,
        "lambdas": list(lams),
        "quantile": q,
        "formulation": formulation,
        "calibrate": bool(calibrate),
        "exponential_candidate": bool(exponential_candidate),
    }
    return certify(result.matrix, space, epsilon, "constopt", params, info)


def _calibrate(
    space: MetricSpace, epsilon: float, run: Callable[[float], Fit], base: Fit
) -> tuple[Fit, dict[str, Any]]:
    """Largest inner level in [eps/2, eps] whose result passes the audit; keep it if better."""
    from ..calibration import largest_passing

    cache: dict[float, Fit] = {epsilon / 2: base}

    def build(p: float) -> NDArray[np.float64]:
        if p not in cache:
            cache[p] = run(p)
        return cache[p].matrix

    cal = largest_passing(build, space.distances, epsilon, epsilon / 2, epsilon, rtol=1e-3, max_iter=14)
    chosen = cache[cal.parameter]
    used = chosen.score < base.score
    result = chosen if used else base
    info = dict(result.info)
    info["calibration"] = {
        "inner_epsilon": cal.parameter,
        "epsilon_audit": cal.epsilon_audit,
        "iterations": cal.iterations,
        "loss": chosen.score,
        "uncalibrated_loss": base.score,
        "used": bool(used),
    }
    return result, info


def describe_winner(mechanism: Mechanism) -> str:
    """One line for people: the candidate a ConstOPTMech build returned, and whether EM competed.

    Read from the mechanism (a fresh build or a loaded file): ``info["winner"]``,
    ``info["lambda"]``, ``info["losses"]`` (the compared scores: worst case, or the
    quantile asked for) and ``params["exponential_candidate"]``.

    >>> from metricdp.spaces import MetricSpace
    >>> two = MetricSpace.from_distances([[0.0, 2.0], [2.0, 0.0]])
    >>> describe_winner(constopt(two, 1.3, neighbours=1))  # a tie goes to the closed form
    'the exponential mechanism, loss 0.42833 (no LP candidate beat it)'
    >>> describe_winner(constopt(two, 1.3, neighbours=1, fit="paper", exponential_candidate=False))
    "paper fit (lambda 0.001), loss 0.42833 (the exponential mechanism left out, as in the paper's Algorithm 1)"
    """
    info = mechanism.info
    losses = info.get("losses") or {}
    returned = losses.get("returned")
    loss = "" if returned is None else f", loss {returned:.6g}"
    if info.get("winner") == "exponential":
        return f"the exponential mechanism{loss} (no LP candidate beat it)"
    lam = info.get("lambda")
    what = f"{info.get('winner')} fit" + ("" if lam is None else f" (lambda {lam:g})")
    if not mechanism.params.get("exponential_candidate", True):
        return f"{what}{loss} (the exponential mechanism left out, as in the paper's Algorithm 1)"
    em = losses.get("exponential")
    return f"{what}{loss} (the exponential mechanism competed" + ("" if em is None else f": loss {em:.6g}") + ")"
