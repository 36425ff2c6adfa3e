r"""Nominal eps versus measured eps_tight: tuning, grids and the experiments' mechanism table.

Imola et al. (UAI 2022, Section 5) compare mechanisms at equal *measured* privacy: a
mechanism is built at a nominal :math:`\varepsilon` (the guarantee its proof gives) and
placed at

.. math::

    \varepsilon_{\text{tight}}(M, \delta) = \min\{\varepsilon \ge 0 :
    M \text{ is } (\varepsilon, \delta)\text{-mDP}\}, \qquad \delta = 10^{-3},

computed exactly by :func:`metricdp.audit.epsilon_tight`. Two tools follow:

* :func:`tune_to_eps_tight` finds the nominal eps whose mechanism has a given
  eps_tight, to a stated relative tolerance (Tables 2-4 of the paper are at fixed
  eps_tight);
* :func:`nominal_grid` and :func:`sweep` build a mechanism over a grid of nominal eps
  chosen so that the measured eps_tight spans a target range (Figures 1 and 3).

Estimated mechanisms (Madlib: a Monte-Carlo matrix, ``exact=False``) have no
meaningful eps_tight: an estimate has zeros where the true mechanism has small positive
mass, and the plug-in divergence is then infinite or biased upwards.
They are placed at their *proven* eps instead (:func:`measured_eps_tight` says which);
the true eps_tight is at most the proven eps, so such a curve is an upper bound in eps:
the true curve lies at or to the left of the plotted one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_delta, check_epsilon, check_int, check_quantile
from ..errors import MetricDPError, SolverTimeLimitError, ValidationError
from ..loss import quantile_loss, worst_case_loss
from ..mechanisms import registry
from ..mechanisms.base import Mechanism
from ..spaces import MetricSpace

__all__ = [
    "DELTA",
    "FAMILIES",
    "QUANTILE",
    "MechanismSpec",
    "SweepPoint",
    "Tuned",
    "evaluate",
    "make_builder",
    "measured_eps_tight",
    "nominal_grid",
    "sweep",
    "tune_to_eps_tight",
]

#: The paper's delta for eps_tight and quantile for L_q.
DELTA = 1e-3
QUANTILE = 0.95

EpsKind = Literal["tight", "proven"]
Builder = Callable[[float], Mechanism]


def measured_eps_tight(mechanism: Mechanism, delta: float = DELTA) -> tuple[float, EpsKind]:
    """eps_tight of an exact mechanism; the proven eps of an estimated one.

    Returns the value and ``"tight"`` or ``"proven"`` (see the module docstring).
    """
    if not mechanism.exact:
        return float(mechanism.epsilon), "proven"
    return float(mechanism.epsilon_tight(check_delta(delta))), "tight"


# --------------------------------------------------------------------------- tuning
@dataclass(frozen=True)
class Tuned:
    """Result of :func:`tune_to_eps_tight`.

    Attributes
    ----------
    epsilon : float
        The nominal eps found.
    eps_tight : float
        The measured eps_tight of ``mechanism``.
    mechanism : Mechanism
        The mechanism built at ``epsilon`` (no rebuild needed).
    target, rtol : float
        The target and the relative tolerance asked for.
    converged : bool
        ``|eps_tight - target| <= rtol * target``; when False, ``mechanism`` is the
        closest one found within the evaluation budget.
    evaluations : int
        Number of builds.
    seconds : float
        Wall time of all builds and audits.
    history : tuple of (nominal, eps_tight)
        Every evaluation, in order.
    stopped_by : str
        Empty, or why the search ended early (``converged=False``, the closest mechanism
        found returned): the error (not a time limit) of a build, or eps_tight jumping
        across the target within :data:`JUMP_RTOL` of one nominal eps.
    """

    epsilon: float
    eps_tight: float
    mechanism: Mechanism
    target: float
    rtol: float
    converged: bool
    evaluations: int
    seconds: float
    history: tuple[tuple[float, float], ...] = field(repr=False)
    stopped_by: str = ""


def _log(v: float) -> float:
    return math.log(v) if v > 0 else -math.inf


#: The bracket's width in log nominal eps below which the search stops: eps_tight jumps
#: across the target there (``stopped_by`` says so), no nominal eps reaches it.
JUMP_RTOL = 1e-6


def tune_to_eps_tight(
    build: Builder,
    target: float,
    *,
    delta: float = DELTA,
    rtol: float = 5e-3,
    start: float | None = None,
    max_evaluations: int = 25,
) -> Tuned:
    r"""The nominal eps at which ``build(eps)`` has eps_tight equal to ``target``.

    Solves :math:`f(x) = t` for :math:`f(x) = \varepsilon_{\text{tight}}(\text{build}(x),
    \delta)` to :math:`|f(x) - t| \le \text{rtol}\cdot t`. :math:`f` is increasing in
    practice and close to proportional (the proofs scale eps by a constant: 1/2 inside
    ConstOPTMech, 1/stretch inside SpannerMech), so the search works in
    :math:`(\log x, \log f)`: first a proportional step :math:`x \leftarrow x\,t/f(x)`,
    then secant steps through the last two points (slopes clipped to [0.2, 5], steps to
    a factor of 8, 5% overshoot) until the target is bracketed, then the Illinois variant
    of regula falsi, which keeps the bracket (its points are kept at least 1% of the
    bracket's width inside it). On
    monotone :math:`f` the bracket always contains a solution; on non-monotone
    :math:`f` (LP mechanisms need not be monotone) it still contains a crossing.

    Parameters
    ----------
    build : callable
        ``build(nominal_eps) -> Mechanism`` (exact: its matrix is audited).
    target : float
        The eps_tight wanted (> 0).
    delta : float
        The delta of eps_tight (the paper's 0.001).
    rtol : float
        Relative tolerance on eps_tight (default 0.5%).
    start : float, optional
        First nominal eps to try (default ``target``: a mechanism's eps_tight never
        exceeds its nominal eps, so the answer is at least ``target``).
    max_evaluations : int
        Build budget; on exhaustion the closest mechanism is returned with
        ``converged=False``.

    Raises
    ------
    ValidationError
        On bad arguments, or when ``build`` returns an estimated mechanism (its
        eps_tight cannot be measured).
    MetricDPError
        What ``build`` raises propagates when it is a time limit or comes before any
        mechanism was built; a later error ends the search with the closest mechanism
        found (``converged=False``, the error in ``stopped_by``).
    """
    target = check_epsilon(target, "target")
    delta = check_delta(delta)
    rtol = check_epsilon(rtol, "rtol")
    max_evaluations = check_int(max_evaluations, "max_evaluations", minimum=1)
    x = target if start is None else check_epsilon(start, "start")
    t0 = time.perf_counter()
    history: list[tuple[float, float]] = []
    best: tuple[float, float, Mechanism] | None = None  # (|rel err|, x, mechanism)
    lo: tuple[float, float] | None = None  # (log x, log f - log t) with f < t
    hi: tuple[float, float] | None = None  # f > t
    lo_stuck = hi_stuck = 0  # Illinois: halve the residual kept for a twice-retained end
    log_t = math.log(target)

    def finish(x_: float, f_: float, mech: Mechanism, ok: bool, why: str = "") -> Tuned:
        return Tuned(x_, f_, mech, target, rtol, ok, len(history), time.perf_counter() - t0, tuple(history), why)

    for _ in range(max_evaluations):
        try:
            mech = build(x)
        except MetricDPError as exc:
            # LP mechanisms need not be continuous in eps (the optimal vertex jumps), so the
            # search can wander where a solver fails; keep what was found unless it is a
            # time limit (which ends a series) or nothing was found yet.
            if best is None or isinstance(exc, SolverTimeLimitError):
                raise
            _, bx, bm = best
            return finish(bx, measured_eps_tight(bm, delta)[0], bm, False, " ".join(str(exc).split())[:200])
        f, kind = measured_eps_tight(mech, delta)
        if kind != "tight":
            raise ValidationError(f"cannot tune {mech.name!r} to an eps_tight: its matrix is an estimate")
        history.append((x, f))
        err = abs(f - target) / target
        if best is None or err < best[0]:
            best = (err, x, mech)
        if err <= rtol:
            return finish(x, f, mech, True)
        point = (math.log(x), _log(f) - log_t)
        if f < target:
            lo, lo_stuck, hi_stuck = point, 0, hi_stuck + 1
        else:
            hi, hi_stuck, lo_stuck = point, 0, lo_stuck + 1
        if lo is None or hi is None:
            # Not bracketed yet: a secant step in (log x, log f) through the last two
            # points (slope 1, i.e. proportionality, for the first), overshooting by 5%
            # so that the next point tends to bracket; f == 0 gives the largest step.
            slope = 1.0
            if len(history) >= 2 and history[-2][1] > 0 and f > 0 and history[-2][0] != x:
                slope = (_log(f) - _log(history[-2][1])) / (math.log(x) - math.log(history[-2][0]))
                slope = min(5.0, max(0.2, slope)) if math.isfinite(slope) else 1.0
            step = 1.05 * (log_t - _log(f)) / slope if f > 0 else math.log(8.0)
            try:
                x = math.exp(point[0] + max(-math.log(8.0), min(math.log(8.0), step)))
            except OverflowError:  # e.g. target 1e308: no float nominal eps reaches it
                raise ValidationError(
                    f"eps_tight = {target:g} is out of reach: the nominal eps would exceed the float range"
                ) from None
            continue
        (xl, rl), (xh, rh) = lo, hi
        if abs(xh - xl) <= JUMP_RTOL:
            # the bracket has closed on one nominal eps and eps_tight still jumps across the
            # target there (an LP's optimal vertex changes): no nominal eps reaches it
            _, bx, bm = best
            f_lo, f_hi = target * math.exp(rl), target * math.exp(rh)
            return finish(bx, measured_eps_tight(bm, delta)[0], bm, False,
                          f"eps_tight jumps from {f_lo:.6g} to {f_hi:.6g} across the target {target:g} at "
                          f"nominal eps {math.exp(xl):.9g}")
        if not math.isfinite(rl):
            nxt = 0.5 * (xl + xh)
        else:
            rl_eff = rl / 2 ** max(0, lo_stuck - 1)
            rh_eff = rh / 2 ** max(0, hi_stuck - 1)
            nxt = xl - rl_eff * (xh - xl) / (rh_eff - rl_eff)
            margin = 0.01 * abs(xh - xl)
            nxt = min(max(xl, xh) - margin, max(min(xl, xh) + margin, nxt))
        x = math.exp(nxt)
    _, bx, bm = best  # type: ignore[misc]
    return finish(bx, measured_eps_tight(bm, delta)[0], bm, False)


# --------------------------------------------------------------------------- grids
@dataclass(frozen=True)
class SweepPoint:
    """One mechanism built at one nominal eps, with what the figures plot."""

    nominal: float
    eps: float
    eps_kind: EpsKind
    loss_quantile: float
    loss_max: float
    seconds: float
    info: dict[str, Any] = field(default_factory=dict, repr=False)


def evaluate(
    mechanism: Mechanism, *, delta: float = DELTA, q: float = QUANTILE, seconds: float = 0.0
) -> SweepPoint:
    """Measure one built mechanism: eps_tight (or proven eps), L_q and L."""
    eps, kind = measured_eps_tight(mechanism, delta)
    info: dict[str, Any] = {k: mechanism.info[k] for k in ("lp", "winner") if mechanism.info.get(k) is not None}
    return SweepPoint(
        float(mechanism.epsilon),
        eps,
        kind,
        quantile_loss(mechanism.matrix, mechanism.distances, q),
        worst_case_loss(mechanism.matrix, mechanism.distances),
        seconds,
        info,
    )


def nominal_grid(
    build: Builder,
    targets: ArrayLike,
    *,
    delta: float = DELTA,
    q: float = QUANTILE,
) -> tuple[NDArray[np.float64], SweepPoint]:
    r"""A nominal-eps grid whose eps_tight should span ``targets``, from one probe build.

    The mechanism is built once at the geometric mean :math:`\bar t` of the targets;
    with its ratio :math:`\rho = \varepsilon_{\text{tight}}(\bar t)/\bar t` the grid is
    ``targets / rho`` (eps_tight is close to proportional to the nominal eps). For an
    estimated mechanism :math:`\rho = 1`. Returns the grid and the probe's point.
    """
    t = np.asarray(targets, dtype=np.float64)
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)) or (t <= 0).any():
        raise ValidationError(f"targets must be a non-empty 1-d array of positive numbers, got {targets!r}")
    probe_eps = float(np.exp(np.log(t).mean()))
    t0 = time.perf_counter()
    mech = build(probe_eps)
    point = evaluate(mech, delta=delta, q=q, seconds=time.perf_counter() - t0)
    rho = point.eps / probe_eps if point.eps > 0 else 1.0
    return t / rho, point


def sweep(
    build: Builder,
    grid: Sequence[float] | NDArray[np.float64],
    *,
    delta: float = DELTA,
    q: float = QUANTILE,
    on_point: Callable[[SweepPoint], None] | None = None,
) -> list[SweepPoint]:
    """Build at every nominal eps of ``grid`` and measure each (see :func:`evaluate`)."""
    q = check_quantile(q)
    out = []
    for eps in grid:
        t0 = time.perf_counter()
        mech = build(float(eps))
        point = evaluate(mech, delta=delta, q=q, seconds=time.perf_counter() - t0)
        out.append(point)
        if on_point is not None:
            on_point(point)
    return out


# --------------------------------------------------------------------------- mechanisms
@dataclass(frozen=True)
class MechanismSpec:
    """One mechanism series of an experiment: a family and its options.

    ``family`` is ``exponential``, ``madlib``, ``optimal``, ``spanner`` or ``constopt``;
    ``options`` are passed to the builder (for example ``neighbours``, ``fit``,
    ``lambdas``); ``label`` is the name in plots and tables.
    """

    label: str
    family: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def is_lp(self) -> bool:
        """Whether the family is solved by LP (the registry's classification, ``Family.lp``)."""
        family = registry.FAMILIES.get(self.family)
        return family is not None and family.lp


#: Families the Imola et al. experiments compare (all in the registry).
FAMILIES = ("exponential", "madlib", "optimal", "spanner", "constopt")


def make_builder(
    spec: MechanismSpec,
    space: MetricSpace,
    *,
    time_limit: float | None = None,
    seed: int = 0,
) -> Builder:
    """``eps -> Mechanism`` for a spec on a space, through the registry.

    LP families get ``time_limit`` (the deadline of each build); Madlib gets a seeded
    generator (its matrix is a Monte-Carlo estimate: reproducible experiments need one).
    A spec option ``pure=True`` builds ConstOPTMech without the exponential mechanism among
    its candidates (``exponential_candidate=False``): the ablation measures the paper's fit
    itself, at its own eps_tight.
    """
    if spec.family not in FAMILIES:
        raise ValidationError(f"mechanism family must be one of {', '.join(FAMILIES)}, got {spec.family!r}")
    family = registry.get(spec.family)
    opts = dict(spec.options)
    if opts.pop("pure", False):
        opts["exponential_candidate"] = False
    if family.lp:
        opts["time_limit"] = time_limit
    if family.find("rng") is not None:  # a Monte-Carlo estimate: seeded, so the experiment is reproducible
        return lambda eps: family.build(space, eps, rng=np.random.default_rng(seed), **opts)
    return lambda eps: family.build(space, eps, **{k: v for k, v in opts.items() if v is not None})
