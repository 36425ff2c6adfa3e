r"""The privacy/utility trade-off across epsilon and mechanism families, for choosing epsilon.

:func:`explore` builds every requested family (:mod:`metricdp.mechanisms.registry`) at every
epsilon of a grid on one space, and measures each built mechanism with the library's own
measures, so that every figure equals what ``metricdp evaluate`` reports for that
mechanism:

* its audited epsilon (every exact builder audits its matrix before returning it:
  :func:`metricdp.mechanisms.base.certify`; an estimated family has none);
* the expected loss under the uniform prior, the worst-case loss and the q-quantile loss
  (:mod:`metricdp.loss`; :func:`metricdp.evaluation.evaluate_mechanism`'s ``loss_expected``,
  ``loss_max`` and ``loss_quantile``);
* the Bayes-optimal adversary's expected error AE and re-identification probability RI
  under the prior (uniform without one; :func:`metricdp.adversary.adversary_report`);
* once per epsilon, the lower bounds on the worst-case and quantile loss of every eps-mDP
  mechanism on the space (:mod:`metricdp.bounds`), except on a policy graph, where the
  packing bounds do not apply.

A family that cannot be built at some epsilon (a parameter it needs, a memory limit, a
solver failure, an audit that fails) is not dropped: its figures there are ``None`` and
:attr:`Exploration.failures` says why.

:mod:`metricdp.explore_page` renders an :class:`Exploration` as one self-contained HTML
page and as a PNG.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import bounds
from ._progress import Progress, report
from ._validation import check_epsilon, check_int, check_probability_vector, check_quantile
from .adversary import adversary_report
from .errors import MetricDPError, ValidationError
from .mechanisms import registry
from .mechanisms.base import Mechanism
from .mechanisms.lp_plan import check_plan, plan_optimal
from .spaces import MetricSpace
from .units import space_unit

__all__ = ["FIGURES", "MAX_EPSILONS", "Exploration", "epsilon_grid", "explore"]

#: The per-mechanism figures, in the order the page and the JSON list them.
FIGURES = ("epsilon_audit", "loss_expected", "loss_max", "loss_quantile", "adversary_expected_error",
           "adversary_reidentification")

#: The most epsilons one exploration takes (each is one build per family).
MAX_EPSILONS = 200

#: Builds a family on a space at an epsilon: ``build(name, space, epsilon) -> Mechanism``.
Builder = Callable[[str, MetricSpace, float], Mechanism]


def epsilon_grid(low: float, high: float, count: int) -> tuple[float, ...]:
    """``count`` epsilons from ``low`` to ``high``, log-spaced (equal ratios between neighbours).

    Log spacing because the figures change on the scale of epsilon's ratio, not its
    difference: the exponential mechanism's kernel is exp(-eps d / 2), so doubling epsilon
    squares it wherever eps is. The ends are exactly ``low`` and ``high``.

    >>> epsilon_grid(0.1, 10, 3)
    (0.1, 1.0, 10.0)
    >>> epsilon_grid(2, 2, 1)
    (2.0,)
    """
    lo, hi = check_epsilon(low, "the lowest epsilon"), check_epsilon(high, "the highest epsilon")
    n = check_int(count, "the number of epsilons", minimum=1)
    if n > MAX_EPSILONS:
        raise ValidationError(f"the number of epsilons must be at most {MAX_EPSILONS}, got {n}")
    if hi < lo:
        raise ValidationError(f"the highest epsilon ({hi!r}) is below the lowest ({lo!r})")
    if n == 1:
        if hi != lo:
            raise ValidationError(f"one epsilon cannot span {lo!r} to {hi!r}: give more than one")
        return (lo,)
    grid = np.geomspace(lo, hi, n)
    return (lo, *(float(e) for e in grid[1:-1]), hi)


@dataclass(frozen=True)
class Exploration:
    """The figures of every family at every epsilon (see the module docstring).

    ``figures[family][name][i]`` is figure ``name`` (one of :data:`FIGURES`) of ``family``
    at ``epsilons[i]``, ``None`` where the family was not built there (``failures[family][i]``
    says why) or where the figure does not exist (no audit of an estimated matrix).
    ``lower_bound[i]`` and ``lower_bound_quantile[i]`` bound every eps-mDP mechanism at
    ``epsilons[i]`` (``None`` on a policy graph: ``bound_note`` says why).
    ``matrices[family][i]`` is the built matrix (true x released), kept for the page's heat
    map; it is not part of :meth:`as_dict`.
    """

    families: tuple[str, ...]
    epsilons: tuple[float, ...]
    quantile: float
    unit: str
    labels: tuple[str, ...]
    prior: bool
    figures: dict[str, dict[str, list[float | None]]]
    failures: dict[str, list[str | None]]
    lower_bound: list[float | None]
    lower_bound_quantile: list[float | None]
    bound_note: str | None = None
    matrices: dict[str, list[NDArray[np.float64] | None]] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready values (the page's and ``--json``'s numbers), without the matrices."""
        out: dict[str, Any] = {
            "families": list(self.families), "epsilons": list(self.epsilons), "unit": self.unit,
            "quantile": self.quantile, "n": len(self.labels),
            "prior": "given" if self.prior else "uniform",
            "lower_bound": list(self.lower_bound), "lower_bound_quantile": list(self.lower_bound_quantile),
            "figures": {f: {k: list(v) for k, v in self.figures[f].items()} for f in self.families},
            "failures": [{"family": f, "epsilon": e, "error": why} for f in self.families
                         for e, why in zip(self.epsilons, self.failures[f], strict=True) if why is not None],
        }
        if self.bound_note is not None:
            out["lower_bound_note"] = self.bound_note
        return out


def _measure(mech: Mechanism, prior: NDArray[np.float64], q: float) -> dict[str, float | None]:
    audited = mech.info.get("epsilon_audit") if mech.exact else None
    if mech.exact and audited is None:
        audited = mech.audit().epsilon
    adv = adversary_report(mech, prior)
    return {
        "epsilon_audit": None if audited is None else float(audited),
        "loss_expected": float(mech.expected_loss()),
        "loss_max": float(mech.worst_case_loss()),
        "loss_quantile": float(mech.quantile_loss(q)),
        "adversary_expected_error": float(adv["adversary_expected_error"]),
        "adversary_reidentification": float(adv["adversary_reidentification"]),
    }


def _registry_build(name: str, space: MetricSpace, epsilon: float) -> Mechanism:
    return registry.build(name, space, epsilon)


def explore(
    space: MetricSpace,
    families: Sequence[str],
    epsilons: Sequence[float],
    *,
    prior: ArrayLike | None = None,
    quantile: float = 0.95,
    build: Builder | None = None,
    progress: Progress | None = None,
) -> Exploration:
    """Build each of ``families`` at each of ``epsilons`` on ``space`` and measure it.

    Parameters
    ----------
    space : MetricSpace
    families : sequence of str
        Registry names (:func:`metricdp.mechanisms.registry.names`), each at most once.
    epsilons : sequence of float
        Increasing epsilons in the space's unit (:func:`epsilon_grid` makes a log grid).
    prior : array of shape (n,), optional
        The adversary's prior (AE, RI); uniform when not given.
    quantile : float
        q of the quantile loss and its bound.
    build : callable, optional
        ``build(name, space, epsilon) -> Mechanism``; default
        :func:`metricdp.mechanisms.registry.build` with the family's defaults.
    progress : Progress, optional
        Told once per family and epsilon, before the build.

    Returns
    -------
    Exploration
        A build that raises a :class:`~metricdp.errors.MetricDPError` (or runs out of
        memory) is recorded in ``failures``; any other exception propagates.
    """
    if not isinstance(space, MetricSpace):
        raise ValidationError(f"space must be a MetricSpace, got {type(space).__name__}")
    names = tuple(families)
    if not names:
        raise ValidationError("give at least one mechanism family")
    for name in names:
        registry.get(name)  # an unknown name lists the valid ones
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValidationError(f"mechanism families listed twice: {', '.join(twice)}")
    eps = tuple(check_epsilon(e, "epsilon") for e in epsilons)
    if not eps:
        raise ValidationError("give at least one epsilon")
    if len(eps) > MAX_EPSILONS:
        raise ValidationError(f"at most {MAX_EPSILONS} epsilons, got {len(eps)}")
    if any(b <= a for a, b in itertools.pairwise(eps)):
        raise ValidationError(f"epsilons must increase, got {list(eps)}")
    q = check_quantile(quantile)
    n = space.n
    pi = np.full(n, 1.0 / n) if prior is None else check_probability_vector(prior, n, name="prior")
    build = _registry_build if build is None else build

    if space.policy:
        note: str | None = "not computed on a policy graph: the packing bounds assume finite distances"
        lb: list[float | None] = [None] * len(eps)
        lbq: list[float | None] = [None] * len(eps)
    else:
        note = None
        lb = [float(bounds.lower_bound(space, e).value) for e in eps]
        lbq = [float(bounds.lower_bound_quantile(space, e, q).value) for e in eps]

    figures: dict[str, dict[str, list[float | None]]] = {f: {k: [None] * len(eps) for k in FIGURES} for f in names}
    failures: dict[str, list[str | None]] = {f: [None] * len(eps) for f in names}
    matrices: dict[str, list[NDArray[np.float64] | None]] = {f: [None] * len(eps) for f in names}
    total, done = len(names) * len(eps), 0
    for name in names:
        for i, e in enumerate(eps):
            report(progress, done, total, f"{name} at epsilon {e:.6g}")
            done += 1
            try:
                if name == "optimal":  # refused before the LP starts when its model cannot fit in memory
                    check_plan(plan_optimal(space.n))
                mech = build(name, space, e)
                values = _measure(mech, pi, q)
            except MetricDPError as ex:
                failures[name][i] = f"{type(ex).__name__}: {ex}"
                continue
            except MemoryError:
                failures[name][i] = "MemoryError: the build did not fit in memory"
                continue
            for key, value in values.items():
                figures[name][key][i] = value
            matrices[name][i] = np.asarray(mech.matrix, dtype=np.float64)
    report(progress, total, total, "done")
    return Exploration(
        families=names, epsilons=eps, quantile=q, unit=space_unit(space), labels=tuple(space.labels),
        prior=prior is not None, figures=figures, failures=failures,
        lower_bound=lb, lower_bound_quantile=lbq, bound_note=note, matrices=matrices,
    )
