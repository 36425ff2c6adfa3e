r"""Choosing eps with evidence: the eps at which a family meets a loss or privacy target.

A target is one figure of the mechanism and a bound on it (:class:`Target`):

* utility, met by *large* eps: ``expected-loss <= X`` (under the prior), ``worst-loss <= X``;
  the answer is the **smallest** eps that meets it (the most privacy for that utility);
* privacy, met by *small* eps: ``adversary-error >= X`` (the Bayes-optimal adversary's
  expected error, :mod:`metricdp.adversary`), ``reidentification <= r`` (its MAP success);
  the answer is the **largest** eps that still meets it (the most utility for that privacy);
* ``level=L,radius=R``: geo-indistinguishability's (l, r) form, eps = L / R, no search.

:func:`calibrate_to_target` assumes no monotonicity (an LP family's figures need not be
monotone in eps). Write :math:`u = \pm\log\varepsilon`, signed so that the answer is the
*largest* u meeting the target. The search is

1. a grid: ``grid`` points evenly spaced in u over ``[lo, hi]`` (by default
   :math:`10^{-3}/\mathrm{diam} \le \varepsilon \le 50/d_{\min}`), every one built
   and evaluated; the largest passing grid point u_i and the next one u_{i+1} (failing) are
   the bracket;
2. bisection in u on that bracket until its ends are within a factor ``1 + rtol``;
3. the check: the family is built at :math:`e^{u}\cdot 1.05^{\pm 1}` (eps * 1.05 for a
   privacy target, eps / 1.05 for a utility one). If that fails too, it is reported as the
   witness. If it passes, the figure is not monotone there: the search goes on from it (a
   new bracket up to the next failing grid point), at most ``rounds`` times, and the
   report says so.

What is certified: the returned mechanism is the family's own build at the returned eps
(audited by its builder, :func:`~metricdp.mechanisms.base.certify`), and its figures are
evaluated exactly from its matrix; they meet the target. What is not: that no eps beyond
the grid's resolution meets it (a passing island narrower than a grid step, away from the
bracket, can be missed); the report lists every grid point so a user can see the shape.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._progress import Progress, report
from ._validation import check_int, check_number, check_probability_vector
from .adversary import adversary_error
from .errors import ResourceLimitError, SolverError, ValidationError
from .mechanisms import registry
from .mechanisms.base import Mechanism
from .mechanisms.distance_calibration import _family
from .mechanisms.lp_plan import LPPlan, _duration, plan_optimal
from .spaces import MetricSpace, check_space
from .units import METRES_PER, level_radius, parse_length

__all__ = [
    "KINDS", "TIME_LIMIT", "Probe", "Target", "TargetCalibration", "calibrate_to_target", "family_params", "figures",
    "parse_target", "search_builds",
]

Kind = Literal["expected-loss", "worst-loss", "adversary-error", "reidentification", "level"]

#: Target kind -> (figure compared, comparison, the answer's side): "max" largest eps, "min" smallest eps.
KINDS: dict[str, tuple[str, str, str]] = {
    "expected-loss": ("expected_loss", "<=", "min"),
    "worst-loss": ("worst_loss", "<=", "min"),
    "adversary-error": ("adversary_error", ">=", "max"),
    "reidentification": ("reidentification", "<=", "max"),
    "level": ("epsilon", "==", "max"),
}

#: The factor of the witness build beside the answer.
NEIGHBOUR = 1.05

#: Seconds a search may be estimated to take before :func:`calibrate_to_target` refuses it
#: (module docstring, "Time"): ten minutes, the wait for one answer at a terminal.
TIME_LIMIT = 600.0


@dataclass(frozen=True)
class Target:
    """A bound on one figure, in the space's distance units (``value``) or eps itself for ``level``."""

    kind: Kind
    value: float
    text: str = ""

    def __post_init__(self) -> None:
        """A known kind and a finite value > 0 (a probability at most 1): checked here, for every caller."""
        name = f"target {self.text!r}" if self.text else f"target {self.kind!r}"
        if self.kind not in KINDS:
            raise ValidationError(f"{name}: unknown kind {self.kind!r}; choose one of {', '.join(KINDS)}")
        value = check_number(self.value, name, minimum=0.0, open_minimum=True)
        if self.kind == "reidentification" and value > 1.0:
            raise ValidationError(f"{name}: a reidentification probability is in (0, 1]")
        object.__setattr__(self, "value", value)

    @property
    def figure(self) -> str:
        return KINDS[self.kind][0]

    @property
    def largest(self) -> bool:
        """True when the answer is the largest eps meeting the target (a privacy target)."""
        return KINDS[self.kind][2] == "max"

    def meets(self, figs: Mapping[str, float]) -> bool:
        """Whether figures ``figs`` meet this target (exact comparison, no slack)."""
        value = figs[self.figure]
        return bool(value >= self.value) if KINDS[self.kind][1] == ">=" else bool(value <= self.value)

    def __str__(self) -> str:
        return self.text or f"{self.kind} {KINDS[self.kind][1]} {self.value:g}"


def _length(text: str, unit: str, what: str) -> float:
    """A length written with or without a unit, in the space's ``unit``."""
    value, given = parse_length(text)
    if not given:
        return float(value)
    if unit not in METRES_PER:
        raise ValidationError(f"{what}: {text!r} has a unit ({given}) but the space's distances have none; write a "
                              "plain number in the points' units")
    return float(value * METRES_PER[given] / METRES_PER[unit])


def parse_target(text: str, unit: str = "") -> Target:
    """Read ``expected-loss=500m``, ``worst-loss=2km``, ``adversary-error=1km``,
    ``reidentification=0.2`` or ``level=L,radius=R`` for a space measured in ``unit``.

    Examples
    --------
    >>> parse_target("adversary-error=500m", "km").value
    0.5
    >>> parse_target("reidentification=0.2").value
    0.2
    >>> parse_target("level=2,radius=100m", "km").value
    20.0
    """
    if not isinstance(text, str) or "=" not in text:
        raise ValidationError(f"target {text!r}: write KIND=VALUE, KIND one of {', '.join(KINDS)}")
    kind, _, rest = text.partition("=")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise ValidationError(f"target {text!r}: unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    if kind == "level":
        level, sep, radius = rest.partition(",radius=")
        if not sep:
            raise ValidationError(f"target {text!r}: write level=L,radius=R (e.g. level=1,radius=200m)")
        _, r_unit = parse_length(radius)
        if r_unit and unit not in METRES_PER:
            raise ValidationError(f"target {text!r}: the radius has a unit but the space's distances have none")
        eps = level_radius(level.strip(), radius.strip()).to(unit if r_unit else "")
        return Target("level", eps, text)
    if kind == "reidentification":
        return Target("reidentification", _plain(rest, text), text)
    return Target(kind, _length(rest, unit, f"target {text!r}"), text)  # type: ignore[arg-type]


def _plain(text: str, whole: str) -> float:
    try:
        return float(Fraction(text.strip()))
    except (ValueError, ZeroDivisionError):
        raise ValidationError(f"target {whole!r}: {text!r} is not a number") from None


def figures(mechanism: Mechanism, prior: NDArray[np.float64]) -> dict[str, float]:
    """The figures a target can bound, exactly from the matrix: expected loss under ``prior``,
    worst-case loss, the Bayes adversary's error and re-identification, the audited epsilon."""
    adv = adversary_error(mechanism.matrix, mechanism.distances, prior)
    audited = mechanism.info.get("epsilon_audit")  # the builder's audit of this matrix (certify records it)
    return {
        "epsilon": float(mechanism.epsilon),
        "epsilon_audit": float(audited if audited is not None else mechanism.audit().epsilon),
        "expected_loss": float(mechanism.expected_loss(prior)),
        "worst_loss": float(mechanism.worst_case_loss()),
        "adversary_error": adv.expected_error,
        "reidentification": adv.reidentification,
    }


@dataclass(frozen=True)
class Probe:
    """One build during the search: the parameter, the figure and whether it met the target."""

    parameter: float
    figure: float
    meets: bool
    stage: str


@dataclass(frozen=True)
class TargetCalibration:
    """Outcome of :func:`calibrate_to_target`.

    ``parameter`` is the calibrated value of ``parameter_name`` (``epsilon``, or k-RR's
    ``ldp_epsilon``); ``mechanism`` the family's build there, ``figures`` its figures
    (:func:`figures`); ``neighbour`` the witness build beside it (parameter, figures, meets)
    or None, with ``neighbour_note`` saying why; ``probes`` every build in order;
    ``bracket`` the final bisection bracket (passing end first); ``notes`` what the search
    found about monotonicity and the range.
    """

    family: str
    target: Target
    parameter_name: str
    parameter: float
    mechanism: Mechanism
    figures: dict[str, float]
    neighbour: tuple[float, dict[str, Any], bool] | None
    neighbour_note: str
    probes: tuple[Probe, ...]
    bracket: tuple[float, float] | None
    search: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    seconds: float = 0.0


def family_params(
    family: registry.Family, params: Mapping[str, Any] | None, prior: NDArray[np.float64] | None
) -> dict[str, Any]:
    """``params`` with the calibration's prior added for a family whose mechanism is built for
    one (it declares a ``prior`` and no ``objective`` to choose whether to use it: user-centric)."""
    fixed = dict(params or {})
    if prior is not None and family.find("prior") is not None and family.find("objective") is None:
        fixed.setdefault("prior", prior)
    return fixed


def _default_range(space: MetricSpace, family: registry.Family) -> tuple[float, float]:
    if family.calibration is not None:  # an LDP parameter (k-RR): unit-free
        return 1e-3, 50.0
    return 1e-3 / space.diameter, 50.0 / space.d_min


def search_builds(lo: float, hi: float, grid: int, rtol: float) -> int:
    r"""Builds a search over ``[lo, hi]`` makes without resumed rounds: the ``grid`` points, the
    bisection of one grid step :math:`\log(hi/lo)/(grid-1)` down to :math:`\log(1+rtol)`, and
    the witness (module docstring, steps 1 to 3).

    Examples
    --------
    >>> search_builds(1e-3, 1e3, 13, 1e-3)   # 13 + 11 + 1: a step of ln 10^6 / 12 = 1.15 halved 11 times
    25
    """
    step = math.log(hi / lo) / (grid - 1)
    halvings = max(0, math.ceil(math.log2(step / math.log1p(rtol))))
    return grid + halvings + 1


def _span(seconds: float) -> str:
    """A duration for people: the plan's units from a minute on, seconds below."""
    return _duration(seconds) if seconds >= 60 else f"{seconds:.2g} s"


def _lp_plan(family: str, space: MetricSpace, fixed: Mapping[str, Any]) -> Callable[[int], LPPlan] | None:
    """The family's LP plan as a function of the number of points (None: no LP, or no plan)."""
    if family != "optimal" or fixed.get("outputs") is not None:
        return None
    objective = str(getattr(fixed.get("objective"), "value", fixed.get("objective") or "worst"))
    formulation = str(getattr(fixed.get("formulation"), "value", fixed.get("formulation") or "auto"))
    return lambda n: plan_optimal(n, objective=objective, formulation=formulation)


def _check_time(family: str, space: MetricSpace, fixed: Mapping[str, Any], builds: int, time_limit: float) -> None:
    """Refuse (ResourceLimitError) a search whose estimate, ``builds`` times the LP plan's
    seconds, exceeds ``time_limit``; say which number of points would fit."""
    plan = _lp_plan(family, space, fixed)
    if plan is None:
        return
    one = plan(space.n)
    total = builds * one.seconds
    if total <= time_limit:
        return
    fits = space.n
    while fits > 2 and builds * plan(fits).seconds > time_limit:
        fits = max(2, int(fits * 0.9))
    side = math.isqrt(fits)
    room = (f"a space of at most {fits:,} points would fit (e.g. a coarser grid of {side} x {side} cells)"
            if builds * plan(fits).seconds <= time_limit else "no space of this family fits")
    raise ResourceLimitError(
        f"calibrating {family} on {space.n:,} points would take about {_span(total)}: {builds} builds of about "
        f"{_span(one.seconds)} each ({one.summary()}), over the time limit of {_span(time_limit)}; {room}, "
        "or calibrate a family without an LP (exponential, planar-laplace), or allow more time"
    )


def calibrate_to_target(
    family: str,
    space: MetricSpace,
    target: Target,
    prior: ArrayLike | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    bracket: tuple[float, float] | None = None,
    grid: int = 13,
    rtol: float = 1e-3,
    rounds: int = 4,
    build: Callable[[float], Mechanism] | None = None,
    progress: Progress | None = None,
    time_limit: float | None = TIME_LIMIT,
) -> TargetCalibration:
    """The eps at which registered exact ``family`` meets ``target`` (see the module docstring).

    Parameters
    ----------
    family : str
        A registry name (:func:`metricdp.mechanisms.names`) of an exact family.
    space : MetricSpace
    target : Target
        From :func:`parse_target` or built directly.
    prior : array of shape (n,), optional
        The prior of the expected loss and of the adversary (uniform when None); a
        family that declares a ``prior`` and no ``objective`` (user-centric) is built with it.
    params : mapping, optional
        Further parameters of the family (validated by the registry).
    bracket : (float, float), optional
        The searched range of the parameter (default: ``1e-3 / diameter`` to ``50 / d_min``;
        k-RR's LDP parameter ``1e-3`` to ``50``).
    grid : int
        Grid points, >= 2. rtol : float, relative width of the final bracket, > 0.
    rounds : int
        Searches resumed from a passing neighbour, >= 1.
    build : callable, optional
        ``build(eps)``: the family with ``params`` at eps, when it is built otherwise than by
        the registry (the command line builds planar-laplace on lat/lon cells through
        :mod:`metricdp.location.cells`, which this package may not import).
    progress : callable, optional
        Told each build.
    time_limit : float or None
        Seconds the search may be estimated to take (default :data:`TIME_LIMIT`); None: no
        estimate is made. Checked before the first build for a family with an LP plan
        (module docstring, "Time").

    Raises
    ------
    ResourceLimitError
        The estimated search exceeds ``time_limit``; the message gives the estimate, the
        number of points and what would fit. Nothing was built.
    ValidationError
        Unknown or estimated family, bad prior or arguments, or no searched eps meeting the
        target (the message gives the best figure found and where).
    """
    start = time.perf_counter()
    space = check_space(space)
    if not isinstance(target, Target):
        raise ValidationError(f"target must be a Target (see parse_target), got {type(target).__name__}")
    grid = check_int(grid, "grid", minimum=2)
    rounds = check_int(rounds, "rounds", minimum=1)
    rtol = check_number(rtol, "rtol")
    if not rtol > 0:
        raise ValidationError(f"rtol must be > 0, got {rtol!r}")
    if time_limit is not None:
        time_limit = check_number(time_limit, "time_limit", minimum=0.0, open_minimum=True)
    pi = np.full(space.n, 1.0 / space.n) if prior is None else check_probability_vector(prior, space.n, name="prior")
    fam = registry.get(family)
    fixed = family_params(fam, params, pi)
    name = fam.calibration or "epsilon"
    if target.kind == "level":  # eps = l / r: built at that eps, nothing searched
        mech = build(target.value) if build is not None and fam.calibration is None else fam.build(
            space, target.value, **fixed)
        return TargetCalibration(family, target, "epsilon", target.value, mech, figures(mech, pi), None,
                                 "level=L,radius=R fixes eps = L / R: nothing was searched", (), None,
                                 seconds=time.perf_counter() - start)
    make = build if build is not None else _family(family, space, fixed)
    lo, hi = bracket if bracket is not None else _default_range(space, fam)
    lo, hi = check_number(lo, "bracket low end"), check_number(hi, "bracket high end")
    if not 0 < lo < hi:
        raise ValidationError(f"bracket must have 0 < low < high, got ({lo!r}, {hi!r})")
    if time_limit is not None:  # before the first build: a search that cannot finish is refused now
        _check_time(family, space, fixed, search_builds(lo, hi, grid, rtol), time_limit)
    sign = 1.0 if target.largest else -1.0
    probes: list[Probe] = []
    cache: dict[float, tuple[Mechanism, dict[str, float]]] = {}
    unbuildable: dict[float, str] = {}

    def probe(u: float, stage: str) -> bool:
        p = math.exp(sign * u)
        if p not in cache:
            try:
                mech = make(p)
            except (ValidationError, SolverError) as ex:  # outside the family's domain: cannot be the answer
                unbuildable[p] = str(ex)
                probes.append(Probe(p, math.nan, False, f"{stage}: not built: {ex}"))
                report(progress, len(probes), None, f"{name} = {p:.6g}: not built ({ex})")
                return False
            cache[p] = (mech, figures(mech, pi))
        figs = cache[p][1]
        ok = target.meets(figs)
        probes.append(Probe(p, figs[target.figure], ok, stage))
        report(progress, len(probes), None, f"{name} = {p:.6g}: {target.figure} = {figs[target.figure]:.6g}"
               f" ({'meets' if ok else 'fails'} {target})")
        return ok

    u_lo, u_hi = sorted((sign * math.log(lo), sign * math.log(hi)))
    us = np.linspace(u_lo, u_hi, grid)
    passes = [probe(float(u), "grid") for u in us]
    if not any(passes):
        made = [q for q in probes if not math.isnan(q.figure)]
        if not made:
            raise ValidationError(f"{family}: no {name} in [{lo:.6g}, {hi:.6g}] could be built: {probes[0].stage}")
        best = max(made, key=lambda q: q.figure if KINDS[target.kind][1] == ">=" else -q.figure)
        raise ValidationError(
            f"{family}: no {name} in [{lo:.6g}, {hi:.6g}] meets {target}; the best {target.figure} on the grid is "
            f"{best.figure:.6g} at {name} = {best.parameter:.6g}"
        )
    built = [q.meets for q in probes[:grid] if not math.isnan(q.figure)]  # unbuildable points say nothing
    first_fail = built.index(False) if False in built else len(built)
    monotone = all(built[:first_fail]) and not any(built[first_fail:])
    notes: list[str] = [] if monotone else [
        f"{target.figure} is not monotone in {name} on the grid: passing points "
        f"{[round(q.parameter, 9) for q in probes[:grid] if q.meets]}"]
    if unbuildable:
        notes.append(f"{len(unbuildable)} {name} values could not be built (counted as failing), e.g. "
                     f"{min(unbuildable):.6g}: {unbuildable[min(unbuildable)]}")
    i = max(k for k, ok in enumerate(passes) if ok)
    left, right = float(us[i]), (float(us[i + 1]) if i + 1 < grid else None)
    step = math.log1p(rtol)
    neighbour: tuple[float, dict[str, Any], bool] | None = None
    note = ""
    for _ in range(rounds):
        while right is not None and right - left > step:
            mid = left + (right - left) / 2
            if probe(mid, "bisection"):
                left = mid
            else:
                right = mid
        nb = left + math.log(NEIGHBOUR)
        if right is None:
            notes.append(f"the target holds at the {'upper' if target.largest else 'lower'} end of the searched "
                         f"range ({math.exp(sign * left):.6g}); a wider bracket may meet it further")
        if nb > us[-1] * (1 + 1e-15) + 1e-15:  # beyond the searched range
            note = f"{name} {'* ' if target.largest else '/ '}{NEIGHBOUR} is outside the searched range"
            neighbour = None
            break
        ok = probe(nb, "neighbour")
        p_nb = math.exp(sign * nb)
        neighbour = (p_nb, cache[p_nb][1] if p_nb in cache else {"not_built": unbuildable[p_nb]}, ok)
        if not ok:
            note = f"{name} {'* ' if target.largest else '/ '}{NEIGHBOUR} fails the target"
            break
        notes.append(f"{name} = {neighbour[0]:.6g} (a factor {NEIGHBOUR} beyond) meets the target too: not monotone "
                     "there; the search went on from it")
        left = nb
        beyond = [float(u) for u, okg in zip(us, passes, strict=True) if u > nb and not okg]
        right = beyond[0] if beyond else None
    else:
        note = f"{name} {'* ' if target.largest else '/ '}{NEIGHBOUR} still met the target after {rounds} rounds"
    answer = math.exp(sign * left)
    mech, figs = cache[answer]
    rb = None if right is None else (answer, math.exp(sign * right))
    return TargetCalibration(
        family, target, name, answer, mech, figs, neighbour, note, tuple(probes), rb,
        {"grid": grid, "range": [lo, hi], "rtol": rtol, "builds": len(cache), "monotone_on_grid": monotone},
        tuple(notes), time.perf_counter() - start,
    )
