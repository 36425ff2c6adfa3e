r"""Calibration to an expected distance: mechanisms compared at equal utility.

Alvim et al. (CSF 2018, Section VI) compare local-mDP mechanisms at the parameter where
each one's expected distance between the true and the reported value,
:math:`E_d = \sum_{x,y} \pi(x) M[x,y] d(x,y)`, meets a common target.
:func:`calibrate_expected_distance` finds that parameter for any registered family
(through :mod:`metricdp.mechanisms.registry`; the family's ``calibration`` keyword says
which parameter moves: k-RR's LDP parameter, else epsilon) or any ``eps -> Mechanism``
callable. Calibration to the *audit* (the largest inner parameter that still passes) is
:mod:`metricdp.mechanisms.calibration`.

References
----------
.. [1] M. S. Alvim, K. Chatzikokolakis, C. Palamidessi, A. Pazii. "Local differential
   privacy on metric spaces: optimizing the trade-off with utility". CSF 2018.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._progress import Progress, report
from .._validation import check_int, check_number, check_probability_vector
from ..errors import MetricDPError, SolverError, ValidationError
from ..loss import expected_loss
from ..spaces import MetricSpace, check_space
from . import registry
from .base import Mechanism

__all__ = ["Calibrated", "calibrate_expected_distance", "expected_distance"]

#: :math:`E_d` is the expected loss of :mod:`metricdp.loss` under another name (the one of
#: Alvim et al.): ``expected_distance(matrix, distances, prior)``.
expected_distance = expected_loss


def _family(name: str, space: MetricSpace, params: Mapping[str, Any] | None = None) -> Callable[[float], Mechanism]:
    """The builder ``parameter -> Mechanism`` of a registered exact family, with fixed ``params``."""
    family = registry.get(name)
    if not family.exact:
        raise ValidationError(f"{name} is estimated (Monte-Carlo): its figures are not exact; calibrate an exact "
                              "family")
    fixed = dict(params or {})
    if family.calibration is None:
        return lambda eps: family.build(space, eps, **fixed)
    keyword = family.calibration

    def build(value: float) -> Mechanism:
        return family.build(space, None, **{**fixed, keyword: value})

    return build


@dataclass(frozen=True)
class Calibrated:
    """Outcome of :func:`calibrate_expected_distance`.

    Attributes
    ----------
    epsilon : float
        The calibrated parameter (for ``"krr"`` its LDP parameter; for the other
        families the mDP epsilon per unit of distance).
    expected_distance : float
        :math:`E_d` of the mechanism at ``epsilon``.
    iterations : int
        Number of mechanisms built (bracketing included).
    mechanism : Mechanism
        The mechanism at ``epsilon``.
    """

    epsilon: float
    expected_distance: float
    iterations: int
    mechanism: Mechanism


class _Found(Exception):
    """Stops the root finder as soon as the target is met to tolerance."""


def calibrate_expected_distance(
    build: Callable[[float], Mechanism] | str,
    space: MetricSpace,
    prior: ArrayLike | None,
    target: float,
    *,
    tol: float = 1e-6,
    bracket: tuple[float, float] | None = None,
    max_iter: int = 200,
    progress: Progress | None = None,
) -> Calibrated:
    r"""The parameter at which a mechanism family's expected distance meets a target.

    Solves :math:`E_d(\varepsilon) = \sum_{x,y} \pi(x) M_\varepsilon[x,y] d(x,y) =`
    ``target`` ([1]_ Section VI: mechanisms compared at equal expected distance
    between the true and the reported value). :math:`E_d` decreases as
    :math:`\varepsilon` grows (from about the uniform-release distance as
    :math:`\varepsilon \to 0` to 0 as :math:`\varepsilon \to \infty`). The target is
    bracketed by stepping :math:`\log \varepsilon` by :math:`\log 8` from the start,
    then the bracket is shrunk by Brent's method on :math:`\log \varepsilon` (bisection
    safeguarded by inverse quadratic interpolation: the bracket always holds the
    root), until :math:`|E_d(\varepsilon) - \text{target}| \le` ``tol`` :math:`\cdot`
    ``target``.

    Parameters
    ----------
    build : str or callable
        A family name of the registry (:func:`metricdp.mechanisms.names`; k-RR moves
        its LDP parameter, exact families only) or any ``eps -> Mechanism`` callable on
        ``space``.
    space : MetricSpace
    prior : array of shape (n,) or None
        Distribution of the true values (uniform when None).
    target : float
        The expected distance to meet, in the units of ``space``.
    tol : float
        Relative tolerance on :math:`E_d`.
    bracket : (float, float), optional
        ``(lo, hi)`` with :math:`E_d(lo) \ge` target :math:`\ge E_d(hi)`; searched for
        from ``1`` (k-RR) or ``1 / target`` (other families and callables) when omitted.
    max_iter : int
        Cap on the number of mechanisms built.
    progress : callable, optional
        Told each probe: ``progress(builds, max_iter, "eps = ...: E_d = ...")``
        (:data:`metricdp._progress.Progress`).

    Raises
    ------
    ValidationError
        Unknown family, bad prior or target, or a target out of reach: at or above what
        the smallest epsilon tried gives (near-uniform release) or below what the
        largest gives.
    SolverError
        When :math:`E_d` jumps across the target (no parameter meets it to ``tol``) or
        ``max_iter`` builds do not suffice.
    """
    if isinstance(build, str):
        name, builder = build, _family(build, space)
    elif callable(build):
        name, builder = getattr(build, "__name__", "build"), build
    else:
        raise ValidationError(f"build must be a family name or a callable, got {type(build).__name__}")
    space = check_space(space)
    pi = None if prior is None else check_probability_vector(prior, space.n)
    target = check_number(target, "target expected distance", minimum=0, open_minimum=True)
    tol = check_number(tol, "tol", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    max_iter = check_int(max_iter, "max_iter", minimum=2)

    cache: dict[float, tuple[float, Mechanism]] = {}

    def evaluate(log_eps: float) -> float:
        if log_eps not in cache:
            if len(cache) >= max_iter:
                raise SolverError(f"calibration of {name!r} did not meet the target in {max_iter} builds")
            mech = builder(math.exp(log_eps))
            if not isinstance(mech, Mechanism) or mech.space.n != space.n:
                raise ValidationError(f"{name} did not return a Mechanism on the {space.n}-point space")
            cache[log_eps] = (expected_loss(mech.matrix, space.distances, pi), mech)
            report(progress, len(cache), max_iter,
                   f"{name}: eps = {math.exp(log_eps):.6g} gives E_d = {cache[log_eps][0]:.6g} (target {target:.6g})")
        return cache[log_eps][0] - target

    def result(log_eps: float) -> Calibrated:
        value, mech = cache[log_eps]
        return Calibrated(math.exp(log_eps), value, len(cache), mech)

    # A family calibrated on its own keyword (k-RR's ldp_epsilon) has a parameter without a
    # unit; for the others E_d is about c / eps, so start at 1 / target, kept where the
    # matrix is representable (eps d_min <= 10).
    unitless = isinstance(build, str) and registry.get(build).calibration is not None
    start = 0.0 if unitless else min(max(-math.log(target), math.log(1e-3 / space.diameter)),
                                     math.log(10.0 / space.d_min))
    lo, hi = _bracket(evaluate, name, target, tol, bracket, start)
    for t in (lo, hi):
        if abs(cache[t][0] - target) <= tol * target:
            return result(t)

    def g(t: float) -> float:
        value = evaluate(t)
        if abs(value) <= tol * target:
            raise _Found(t)
        return value

    from scipy.optimize import brentq

    try:
        root = brentq(g, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=max_iter)
    except _Found as found:
        return result(float(found.args[0]))
    except RuntimeError:  # brentq's own iteration cap
        raise SolverError(f"calibration of {name!r} did not meet the target in {max_iter} builds") from None
    # The bracket shrank to float resolution without meeting tol: E_d jumps there.
    best = min(cache, key=lambda t: abs(cache[t][0] - target))
    raise SolverError(
        f"calibration of {name!r}: E_d jumps across the target {target:.6g} near eps = {math.exp(root):.10g} "
        f"(closest E_d = {cache[best][0]:.10g}); no parameter meets it to tol = {tol}"
    )


def _bracket(
    evaluate: Callable[[float], float],
    name: str,
    target: float,
    tol: float,
    bracket: Sequence[float] | None,
    start: float,
) -> tuple[float, float]:
    """(lo, hi) in log eps with E_d(lo) >= target >= E_d(hi)."""
    if bracket is not None:
        try:
            lo_eps, hi_eps = (float(x) for x in bracket)
        except (TypeError, ValueError):
            raise ValidationError(f"bracket must be two numbers (lo, hi), got {bracket!r}") from None
        if not (0 < lo_eps < hi_eps and math.isfinite(hi_eps)):
            raise ValidationError(f"bracket must satisfy 0 < lo < hi < inf, got {bracket!r}")
        lo, hi = math.log(lo_eps), math.log(hi_eps)
        f_lo, f_hi = evaluate(lo), evaluate(hi)
        if f_lo < -tol * target or f_hi > tol * target:
            raise ValidationError(
                f"bracket {bracket!r} does not hold the target {target:.6g} for {name!r}: "
                f"E_d = {f_lo + target:.6g} at lo and {f_hi + target:.6g} at hi"
            )
        return lo, hi
    step, reach = math.log(8.0), math.log(1e12)
    seen: list[tuple[float, float]] = []

    def attempt(t: float) -> float | str:
        """E_d(e^t) - target, or the builder's reason for refusing e^t."""
        try:
            f = evaluate(t)
        except SolverError:
            raise
        except MetricDPError as ex:
            # Builders refuse extreme parameters (overflow, underflow to zero).
            return f"the build failed at eps = {math.exp(t):.3g}: {ex}"
        seen.append((t, f))
        return f

    t = start
    f = attempt(t)
    while isinstance(f, str) and start - t < reach:  # start refused: walk down to a buildable eps
        t -= step
        f = attempt(t)
    if isinstance(f, str):
        raise ValidationError(f"calibration of {name!r}: no buildable epsilon found; {f}")
    direction = 1.0 if f > 0 else -1.0  # E_d too large: raise eps; too small: lower it
    while abs(t + direction * step - start) <= reach:
        t_next = t + direction * step
        f_next = attempt(t_next)
        if isinstance(f_next, str):
            raise _out_of_reach(name, target, seen, f_next)
        if (f_next <= 0) if direction > 0 else (f_next >= 0):
            return (t, t_next) if direction > 0 else (t_next, t)
        t = t_next
    raise _out_of_reach(name, target, seen, "")


def _out_of_reach(name: str, target: float, seen: list[tuple[float, float]], why: str) -> ValidationError:
    values = [f + target for _, f in seen]
    eps = [math.exp(t) for t, _ in seen]
    i_max, i_min = int(np.argmax(values)), int(np.argmin(values))
    return ValidationError(
        f"target expected distance {target:.6g} is out of reach for {name!r}: E_d ranges from "
        f"{values[i_min]:.6g} (eps = {eps[i_min]:.3g}) to {values[i_max]:.6g} (eps = {eps[i_max]:.3g})"
        + (f"; {why}" if why else "")
    )
