r"""The one retry policy of solve-repair-audit builds (OPTMech, SpannerMech, ConstOPTMech).

An LP builder solves at :math:`\varepsilon(1-\eta)` (or its inner level times
:math:`1-\eta`), repairs the solution to an exactly :math:`\varepsilon`-mDP matrix
(:mod:`.repair`) and audits it. The repair has room :math:`\varepsilon\eta d_{\min}` in
log space for the solver's error; when that is not enough it raises
:class:`~metricdp.errors.RepairError` with ``retryable=True``, and the build solves
again at a larger :math:`\eta` (:meth:`RetryPolicy.run`). A repair error with
``retryable=False`` (underflow, a subnormal entry, an all-zero row: a larger margin
cannot help) and every other error propagate at once; so does the deadline's
:class:`~metricdp.errors.SolverTimeLimitError`, since every attempt's solves draw on the
same :class:`~.deadline.Deadline`.

Schedule (one rule for all builders): :math:`\eta_0` with
:math:`\varepsilon\eta_0 d_{\min}` = ``margin`` (clipped to
[``min_eta``, ``max_initial_eta``]), then :math:`\eta \leftarrow \min(\text{factor}\,\eta,`
``max_eta``) while :math:`\eta <` ``max_eta``. The factor is 100 (ConstOPTMech's: a failed
spread check misses by orders of magnitude, float rounding against a 1e-15 margin, so
100 reaches a working margin in half the re-solves) except for OPTMech, whose margin
sits within 10x of the spreads its repairs need (10, see :data:`OPTMECH`). The margins
stay per family (:data:`OPTMECH` 1e-10 at the diameter, :data:`SPANNER` 1e-5, :data:`CONSTOPT` 1e-6;
the reasons are beside each): the margin is budget the audit finds unused, so it is as
small as the room the repair needs allows.

Every retrying caller goes through :meth:`RetryPolicy.run`: OPTMech, SpannerMech and
ConstOPTMech (:func:`~.core.solve_and_repair`), SpannerMech's calibration steps (each
level solved and repaired once under ``SPANNER.once()``: in a bisection a repair failure
says the level is too high, and the level is handed to the audit unrepaired -- a retry
at a larger eta would solve another level and triple the cost of every failing step),
and the planar Laplace grid mechanism
(:data:`PLANAR_LAPLACE`: its audit failing is a retryable error, a repair error that is
not retryable ends the build at once). ``tests/lp/test_retry_policy.py``
checks that each of them retries through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from .._progress import Progress, report
from ..errors import RepairError, ValidationError

__all__ = ["CONSTOPT", "OPTMECH", "PLANAR_LAPLACE", "SPANNER", "RetryPolicy", "choose_eta"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Initial repair slack and its schedule on a retryable repair failure.

    Attributes
    ----------
    margin : float
        Target :math:`\\varepsilon\\eta_0 d_{\\min}` of the first attempt.
    max_initial_eta, max_eta : float
        Caps of the first :math:`\\eta` and of any retry.
    min_eta : float
        Floor of the first :math:`\\eta`.
    factor : float
        :math:`\\eta` is multiplied by this on each retry.
    diameter_margin, room_floor : float
        When ``diameter_margin`` > 0 and the caller gives the diameter: the first
        :math:`\\eta` is the larger of ``diameter_margin / (epsilon * d_max)`` and
        ``room_floor / (epsilon * d_min)`` (``margin`` is then unused): the optimum feels
        :math:`\\eta` through :math:`\\varepsilon d` up to :math:`\\varepsilon d_{\\max}`, so
        :math:`\\varepsilon\\eta_0 d_{\\max}` bounds the loss the slack costs, and the floor
        keeps the repair's room at :math:`d_{\\min}` above the rounding reserve.

    Examples
    --------
    >>> p = RetryPolicy(margin=1e-5, max_initial_eta=1e-3, max_eta=0.1)
    >>> p.initial(1.0, 0.1), p.next(1e-3), p.next(0.1)
    (0.0001, 0.1, None)
    """

    margin: float
    max_initial_eta: float
    max_eta: float
    min_eta: float = 1e-9
    factor: float = 100.0
    diameter_margin: float = 0.0
    room_floor: float = 0.0

    def initial(self, epsilon: float, d_min: float, d_max: float | None = None) -> float:
        """The first :math:`\\eta`: ``margin / (epsilon * d_min)``, or with a diameter the
        larger of ``diameter_margin / (epsilon * d_max)`` and ``room_floor / (epsilon *
        d_min)`` (when ``diameter_margin`` > 0), clipped."""
        scale = epsilon * d_min
        if not scale > 0:  # 5e-324 * d underflows: no margin can be placed below it
            raise ValidationError(f"epsilon * d_min = {epsilon!r} * {d_min!r} underflows to 0: use a larger epsilon")
        eta = self.margin / scale
        if self.diameter_margin > 0 and d_max is not None and d_max > 0:
            eta = max(self.diameter_margin / (epsilon * d_max), self.room_floor / scale)
        return float(min(max(eta, self.min_eta), self.max_initial_eta))

    def next(self, eta: float) -> float | None:
        """The :math:`\\eta` of the next attempt, or ``None`` when ``max_eta`` was reached."""
        if eta >= self.max_eta:
            return None
        return float(min(self.factor * eta, self.max_eta))

    def once(self) -> RetryPolicy:
        """This policy without retries: for a caller to whom a repair failure is an answer,
        not an accident (a calibration's bisection: the level is then too high)."""
        return replace(self, max_eta=0.0)

    def run(
        self,
        attempt: Callable[[float], T],
        eta: float,
        *,
        progress: Progress | None = None,
        what: str = "LP",
        fallback: float | None = None,
    ) -> T:
        """``attempt(eta)``, retried at the next :math:`\\eta` on a retryable :class:`RepairError`.

        ``fallback``: the first retry goes at least to this :math:`\\eta` (OPTMech: the
        d_min rule's, so a first attempt at the smaller diameter rule costs at most one
        solve more than that rule alone, then the same schedule)."""
        tries = 0
        while True:
            try:
                return attempt(eta)
            except RepairError as exc:
                nxt = self.next(eta) if exc.retryable else None
                if nxt is None:
                    raise
                if tries == 0 and fallback is not None:
                    nxt = float(min(max(nxt, fallback), self.max_eta))
                tries += 1
                report(progress, tries, None, f"{what}: repair needs more room; solving again at eta = {nxt:.3g}")
                eta = nxt


#: OPTMech (:func:`~.core.solve_and_repair`): diameter margin 1e-10, room floor 1e-12 at
#: d_min, factor 10; margin 1e-10 at d_min where no diameter is given (eps * d_max >
#: LOG_CAP: :func:`~.core.choose_eta`). Why these numbers:
#:
#: * the loss must be within 1e-9 relative of the exact optimum, and the excess over it is
#:   all eta's (the repair itself adds < 1e-15 on top of the LP value at eps(1 - eta)) and
#:   grows with eps * d_max: a margin at the diameter bounds it where a margin at d_min
#:   does not (tests/mechanisms/test_optimal.py::test_within_1e9_of_the_exact_optimum_across_eps
#:   and tests/lp/test_exact.py hold it to 1e-9);
#: * the log-spread of the row sums after the envelope from a simplex vertex is of the
#:   order of the rounding, so a 1e-12 floor (about 7 rounding reserves at eps * d_max = 20)
#:   rarely retries; where it does (rows violated below VIOLATION_TOL lift the envelope),
#:   the first retry goes straight to the d_min rule's eta (``fallback``);
#: * some spaces (many Gaussian points in high dimension) need 10x the room: hence the
#:   factor 10, whose retry lands on the eta they need rather than 100x beyond.
#:
#: The builds behind these choices: benchmarks/RESULTS.md#docstrings-lp-core-choose-eta.
OPTMECH = RetryPolicy(margin=1e-10, max_initial_eta=1e-3, max_eta=0.1, min_eta=1e-12, factor=10.0,
                      diameter_margin=1e-10, room_floor=1e-12)

#: SpannerMech's calibration steps (one attempt per level): margin 1e-5, room enough that a
#: level's answer does not hinge on the repair. Its main solve uses :data:`OPTMECH`: 1e-5
#: leaves the returned loss far above the LP optimum (up to about 5e-4 relative), OPTMech's
#: rule within 1e-10. The ``ipm`` formulation runs crossover (a vertex, as ``fast``): without
#: it HiGHS can end in numerical trouble at these margins.
SPANNER = RetryPolicy(margin=1e-5, max_initial_eta=1e-3, max_eta=0.1)

#: ConstOPTMech: margin 1e-6 (far above the spread of its repairs, of the order of 1e-16); its first
#: eta may be large on spaces with a tiny eps d_min, hence the higher caps.
CONSTOPT = RetryPolicy(margin=1e-6, max_initial_eta=0.5, max_eta=0.5)

#: The planar Laplace grid mechanism (:func:`~metricdp.mechanisms.planar_laplace.planar_laplace`):
#: its first eta comes from the reached integration accuracy (``16 accuracy + 2 reserve``
#: over ``eps d_min``), which it passes to :meth:`RetryPolicy.run` itself, so ``margin`` is
#: unused; then 10x per retry up to 1e-3, the schedule it has always had.
PLANAR_LAPLACE = RetryPolicy(margin=0.0, max_initial_eta=1e-3, max_eta=1e-3, min_eta=1e-8, factor=10.0)


def choose_eta(epsilon: float, d_min: float, policy: RetryPolicy = OPTMECH, d_max: float | None = None) -> float:
    r"""The first repair slack :math:`\eta` (:meth:`RetryPolicy.initial`).

    OPTMech (:data:`OPTMECH`): :math:`\varepsilon\eta d_{\max} = 10^{-10}` unless
    that leaves less than :math:`10^{-12}` at :math:`d_{\min}`, clipped to [1e-12, 1e-3]
    (the d_min rule, :math:`\varepsilon\eta d_{\min} = 10^{-10}`, where ``d_max`` is not
    given). The same beyond :data:`~._solve.LOG_CAP`: the scaled finish
    (:mod:`.polish`) removed the cap's cost, which had dwarfed eta's; where its repair
    needs more room, the retry goes to the d_min rule's eta (``polish.finish(retry=...)``).
    The log-spread of the row sums after the envelope from a simplex vertex is of the order
    of the rounding, below that room in most builds, so the first repair
    usually succeeds and a failed one re-solves at 10x (cost in loss: a relative change of
    order :math:`\eta\,\varepsilon d_{\max}`; the audit finds :math:`\eta` of the
    budget unused). The evidence: benchmarks/RESULTS.md#docstrings-lp-core-choose-eta.
    """
    return policy.initial(epsilon, d_min, d_max)
