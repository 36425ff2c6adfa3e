r"""The predictive mechanism for location traces (Chatzikokolakis, Palamidessi, Stronati,
"A predictive differentially-private mechanism for mobility traces", PETS 2014).

Each person's fixes :math:`x_1, \dots, x_n` ((lat, lon) degrees, time-ordered) are
released one after the other. At step i the **prediction** :math:`p_i` is the person's
last released point (a function of earlier releases only). A private **test** asks
whether the fix lies within the threshold l (km) of it:

.. math:: \text{pass} \iff \tilde d(x_i, p_i) + L \le l, \qquad L \sim \mathrm{Lap}(1/\varepsilon_\theta),

with :math:`\tilde d` the great-circle distance clamped to
:math:`[l - 20/\varepsilon_\theta,\ l + 20/\varepsilon_\theta]` (1-Lipschitz, so the
test keeps its guarantee, and both outcomes keep a probability above
:math:`e^{-20}/2`, where a 53-bit uniform decides them to relative precision 1e-7).
If it passes, :math:`p_i` is reported again (no new noise); if it fails, a fresh planar
Laplace release at :math:`\varepsilon_N` is drawn
(:func:`~metricdp.mechanisms.planar_laplace.sample_planar_laplace_latlon`). The first fix
of a person has no prediction: it is always fresh and runs no test.

**Budget managers** choose :math:`(\varepsilon_\theta, \varepsilon_N)` per step from the
person's earlier outcomes only (public): :class:`FixedSplit` (the same pair at every step,
the paper's fixed-utility manager) and :class:`AdaptiveRate` (a target spend per fix;
:math:`\varepsilon_N` grows as predictions pass more often, after the paper's fixed-rate
manager). A step runs its test only if the person's remaining budget covers the test *and*
a fresh release; otherwise the prediction is reported without a test, at no cost
(post-processing of earlier releases). :class:`Managers` holds one manager per person
(each person's own budget and horizon), stepped together by :func:`predictive_step`.

**Guarantee** (``docs/proofs/predictive.md``). For two traces of equal length and every
output, the log-ratio of the output's densities is at most
:math:`\sum_i (\varepsilon_{\theta,i}[\text{tested}_i] + \varepsilon_{N,i}[\text{fresh}_i])\, d(x_i, x'_i)`,
hence at most :math:`E \cdot \max_i d(x_i, x'_i)` where E, the person's spend
(:class:`~metricdp.location.trace_report.TraceReport`), never exceeds the manager's budget.
As every continuous sampler of metricdp, the fresh releases are the idealised mechanism's
up to float rounding (``docs/proofs/exact_sampling.md``, section 4).

Rows are processed in chunks sorted by person and time (:class:`PredictiveReleaser`);
within a chunk the persons advance together, step t of every person at once, and only
the person open at the chunk's end is carried to the next one. A step costs a few dozen
numpy calls whatever the number of persons in it, so the speed comes from many persons
per step: a chunk of a few persons with long traces runs step by step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import check_rng, warn_unless_secure
from .._validation import check_epsilon
from ..accounting.accountant import canonical_ids
from ..accounting.composition import from_units, to_units
from ..errors import ValidationError
from ..mechanisms.planar_laplace import _MIN_EPS_HALF_CIRCUMFERENCE, sample_planar_laplace_latlon
from ..spaces import EARTH_RADIUS_KM, haversine_rows_km
from .release import check_rows
from .trace_report import TraceReport

__all__ = [
    "EXHAUSTED",
    "FRESH",
    "PASSED",
    "AdaptiveRate",
    "AdaptiveTooThin",
    "BudgetManager",
    "ChunkRelease",
    "FixedSplit",
    "Managers",
    "PredictiveReleaser",
    "TraceRelease",
    "pass_probability",
    "predictive_step",
    "release_traces",
]

#: Outcome of a row: a fresh planar Laplace release, a passed test (the prediction
#: reported), or the prediction reported untested because the budget is spent.
FRESH, PASSED, EXHAUSTED = 0, 1, 2
#: The test's distance is clamped to l +- TEST_CLAMP / eps_theta (module docstring).
TEST_CLAMP = 20.0
#: Rungs of the adaptive ladder per doubling of eps_N, and doublings above its base.
_RUNGS_PER_DOUBLING, _DOUBLINGS = 4, 4
#: Rows of the per-person counters: the fields of TraceReport after ``persons``, in its order.
_SPENT, _FRESH, _REUSED, _TESTS, _PASSED = range(5)


def _units(eps: object, name: str) -> int:
    return to_units(check_epsilon(eps, name), name)


def _check_noise(units: int, name: str) -> None:
    """Refuse an eps_N the sphere's sampler would refuse, before any row is drawn."""
    floor = _MIN_EPS_HALF_CIRCUMFERENCE / (math.pi * EARTH_RADIUS_KM)
    if float(from_units(units)) < floor:
        raise ValidationError(f"{name} {float(from_units(units))!r} per km is below {floor:.2g}: its noise would "
                              "dwarf half the Earth's circumference")


def _threshold(value: object) -> float:
    try:
        t = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationError(f"threshold_km must be a number of km, got {value!r}") from None
    if not (math.isfinite(t) and t >= 0):
        raise ValidationError(f"threshold_km must be finite and >= 0, got {value!r}")
    return t


class BudgetManager(Protocol):
    """Chooses each step's (eps_theta, eps_N) in accounting units from public counts."""

    @property
    def threshold_km(self) -> float: ...

    @property
    def budget_units(self) -> int: ...

    def split(self, tests: NDArray[np.int64], passed: NDArray[np.int64]) -> tuple[NDArray[np.int64], ...]: ...


@dataclass(frozen=True)
class FixedSplit:
    """The same ``eps_test`` and ``eps_noise`` (per km) at every step until ``budget`` is spent.

    Examples
    --------
    >>> m = FixedSplit(eps_test=0.2, eps_noise=1.0, budget=5.0, threshold_km=2.0)
    >>> [int(u[0]) for u in m.split(np.zeros(1, np.int64), np.zeros(1, np.int64))]
    [200000000000, 1000000000000]
    """

    eps_test: float
    eps_noise: float
    budget: float
    threshold_km: float

    def __post_init__(self) -> None:
        _units(self.eps_test, "eps_test")
        _units(self.eps_noise, "eps_noise")
        object.__setattr__(self, "threshold_km", _threshold(self.threshold_km))
        _check_noise(_units(self.eps_noise, "eps_noise"), "eps_noise")
        if self.budget_units < _units(self.eps_noise, "eps_noise"):
            raise ValidationError(f"budget {self.budget!r} is below one fresh release (eps_noise {self.eps_noise!r})")

    @property
    def budget_units(self) -> int:
        """Each person's budget in accounting units (rounded down)."""
        return to_units(check_epsilon(self.budget, "budget"), "budget", budget=True)

    def split(self, tests: NDArray[np.int64], passed: NDArray[np.int64]) -> tuple[NDArray[np.int64], ...]:
        """``(test units, noise units)`` per person: constants."""
        k = len(tests)
        return (np.full(k, _units(self.eps_test, "eps_test"), dtype=np.int64),
                np.full(k, _units(self.eps_noise, "eps_noise"), dtype=np.int64))


@dataclass(frozen=True)
class AdaptiveRate:
    r"""A target spend of ``budget / horizon`` per fix, eps_N adapted to the pass rate.

    The rate :math:`\rho` = budget / horizon (units, rounded down) is split into a test
    share :math:`\varepsilon_\theta = \lfloor s\rho \rfloor` and a base
    :math:`b = \rho - \varepsilon_\theta`. A step that fails costs
    :math:`\varepsilon_\theta + \varepsilon_N` and one that passes :math:`\varepsilon_\theta`,
    so with pass rate :math:`\pi` the expected spend per fix is :math:`\rho` when
    :math:`\varepsilon_N = b / (1 - \pi)`. :math:`\pi` is estimated from the person's own
    outcomes, :math:`\hat\pi = (\text{passed} + 1) / (\text{tests} + 2)`, and
    :math:`\varepsilon_N` is the largest rung :math:`\lfloor b\, 2^{k/4} \rfloor`,
    k = 0..16, not above :math:`b / (1 - \hat\pi)` (so at most 16 b; a short ladder keeps the
    releases of one step in a few batches of one eps each). Every choice depends on earlier
    outcomes only, which the release shows.

    Examples
    --------
    >>> m = AdaptiveRate(budget=10.0, horizon=10, threshold_km=1.0)
    >>> test, noise = m.split(np.array([0, 8]), np.array([0, 7]))
    >>> (test / 1e12).tolist(), (noise / 1e12).round(3).tolist()
    ([0.2, 0.2], [1.6, 3.805])
    """

    budget: float
    horizon: int
    threshold_km: float
    test_share: float = 0.2

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold_km", _threshold(self.threshold_km))
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int | np.integer) or self.horizon < 2:
            raise ValidationError(f"horizon must be an integer number of fixes >= 2, got {self.horizon!r}")
        share = float(self.test_share)
        if not (0 < share < 1):
            raise ValidationError(f"test_share must be in (0, 1), got {self.test_share!r}")
        rungs, test = self._ladder()
        if test < 1 or rungs[0] < 1:  # the first release (2 x base <= 2 x rate <= budget) then always fits
            raise ValidationError(f"budget {self.budget!r} over {self.horizon} fixes leaves no eps for the test "
                                  "or the noise (below the accounting grid of 1e-12)")
        _check_noise(int(rungs[0]), "the smallest eps_N (budget x (1 - test_share) / horizon)")

    @property
    def budget_units(self) -> int:
        """Each person's budget in accounting units (rounded down)."""
        return to_units(check_epsilon(self.budget, "budget"), "budget", budget=True)

    def _ladder(self) -> tuple[NDArray[np.int64], int]:
        """(the rungs of eps_N in units, the test's units)."""
        rungs, test = _ladders(np.array([self.budget_units]), np.array([int(self.horizon)]), float(self.test_share))
        return rungs[0], int(test[0])

    def split(self, tests: NDArray[np.int64], passed: NDArray[np.int64]) -> tuple[NDArray[np.int64], ...]:
        """``(test units, noise units)`` per person from their tests and passes so far."""
        rungs, test = self._ladder()
        k = _rung(tests, passed, len(rungs))
        return np.full(k.size, test, dtype=np.int64), rungs[k]


def _ladders(budget_units: NDArray[np.int64], horizon: NDArray[np.int64],
             share: float) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """:class:`AdaptiveRate`'s ladders of eps_N (persons x rungs) and test units (per person), from each person's
    budget (units) and horizon: the one definition of the rule for one person and for many."""
    rate = np.asarray(budget_units, dtype=np.int64) // np.asarray(horizon, dtype=np.int64)
    test = np.floor(rate * share).astype(np.int64)
    base = rate - test
    k = np.arange(_RUNGS_PER_DOUBLING * _DOUBLINGS + 1)
    return np.floor(base[:, None] * 2.0 ** (k / _RUNGS_PER_DOUBLING)).astype(np.int64), test


def _rung(tests: ArrayLike, passed: ArrayLike, rungs: int) -> NDArray[np.intp]:
    """The rung of :class:`AdaptiveRate`'s ladder for the tests and passes so far (its docstring's rule)."""
    t = np.asarray(tests, dtype=np.float64)
    boost = (t + 2.0) / (t + 1.0 - np.asarray(passed, dtype=np.float64))  # 1 / (1 - pi_hat)
    return np.clip(np.floor(_RUNGS_PER_DOUBLING * np.log2(boost) + 1e-9), 0, rungs - 1).astype(np.intp)


@dataclass(frozen=True, eq=False)
class Managers:
    r"""One budget manager per person, as arrays indexed by person: each person's test units, their ladder of
    eps_N (units, persons x rungs: one rung is a :class:`FixedSplit`, :data:`_RUNGS_PER_DOUBLING` x
    :data:`_DOUBLINGS` + 1 an :class:`AdaptiveRate`) and their threshold (km).

    What a person's manager chooses at a step depends on that person's earlier outcomes and on
    the parameters it was built from (:meth:`adaptive`: the person's budget and horizon); the
    rule of each is the one of its class, so :func:`predictive_step` runs the person exactly as
    it runs that class's manager alone.

    Examples
    --------
    >>> m = Managers.adaptive(np.array([10 * 10**12, 10**12]), np.array([10, 2]), threshold_km=1.0)
    >>> test, noise, km = m.choose(np.array([0, 1]), np.array([0, 0]), np.array([0, 0]))
    >>> (test / 1e12).tolist(), (noise / 1e12).tolist(), km.tolist()
    ([0.2, 0.1], [1.6, 0.8], [1.0, 1.0])
    """

    test: NDArray[np.int64]
    rungs: NDArray[np.int64]
    threshold: NDArray[np.float64]

    @classmethod
    def adaptive(cls, budget_units: ArrayLike, horizon: ArrayLike, *, threshold_km: ArrayLike | None = None,
                 test_share: float = 0.2) -> Managers:
        """:class:`AdaptiveRate` (``budget_units[p]`` units, ``horizon[p]`` fixes) of every person p;
        ``threshold_km``: one for all, one per person, or ``None``: ``2 / eps`` of the person's smallest
        rung (the mean displacement of their least precise fresh release).

        Raises
        ------
        ValidationError
            Naming the first person (by position) whose budget over their horizon leaves no eps for the test
            or the noise, or whose smallest eps_N the sphere's sampler would refuse.
        """
        share = float(test_share)
        if not (0 < share < 1):
            raise ValidationError(f"test_share must be in (0, 1), got {test_share!r}")
        b = np.asarray(budget_units, dtype=np.int64)
        h = np.asarray(horizon, dtype=np.int64)
        if b.shape != h.shape or b.ndim != 1 or (h < 2).any() or (b < 1).any():
            raise ValidationError("budget_units and horizon must be one per person: budgets >= 1 unit, "
                                  "horizons >= 2 fixes")
        rungs, test = _ladders(b, h, share)
        floor = _MIN_EPS_HALF_CIRCUMFERENCE / (math.pi * EARTH_RADIUS_KM)
        bad = np.flatnonzero((test < 1) | (rungs[:, 0] < 1) | (from_units(rungs[:, 0]) < floor))
        if bad.size:
            i = int(bad[0])
            raise AdaptiveTooThin(i, float(from_units(int(b[i]))), int(h[i]))
        km = 2.0 / from_units(rungs[:, 0]) if threshold_km is None else np.broadcast_to(
            np.asarray([_threshold(t) for t in np.ravel(threshold_km)], dtype=np.float64)
            if np.ndim(threshold_km) else _threshold(threshold_km), b.shape).astype(np.float64)
        return cls(test, rungs, km)

    @classmethod
    def fixed(cls, split: FixedSplit, persons: int) -> Managers:
        """``split``'s (eps_test, eps_N, threshold) for ``persons`` persons (each person's budget is given apart)."""
        test, noise = split.split(np.zeros(persons, np.int64), np.zeros(persons, np.int64))
        return cls(test, noise[:, None], np.full(persons, split.threshold_km))

    def choose(self, p: NDArray[np.intp], tests: NDArray[np.int64],
               passed: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """``(test units, noise units, threshold km)`` of the persons ``p`` from their tests and passes so far."""
        k = _rung(tests, passed, self.rungs.shape[1])
        return self.test[p], self.rungs[p, k], self.threshold[p]

    def first(self) -> NDArray[np.int64]:
        """Each person's first release (no prediction, no test): its eps_N in units."""
        return self.rungs[np.arange(self.test.size), _rung(np.zeros(self.test.size), np.zeros(self.test.size),
                                                            self.rungs.shape[1])]

    def most(self) -> NDArray[np.int64]:
        """Each person's largest spend of one later step (a failed test and a fresh release at the top rung)."""
        return self.test + self.rungs.max(axis=1)


class AdaptiveTooThin(ValidationError):
    """A person's budget over their horizon is too thin for :class:`AdaptiveRate`; ``index`` is the person's."""

    def __init__(self, index: int, budget: float, horizon: int) -> None:
        super().__init__(f"a budget of {budget!r} over {horizon} fixes leaves no eps for the test or the noise of "
                         "the adaptive manager (below the accounting grid, or noise that would dwarf half the "
                         "Earth's circumference)")
        self.index = index


def pass_probability(distance_km: ArrayLike, threshold_km: ArrayLike, eps_test: ArrayLike) -> NDArray[np.float64]:
    r""":math:`\Pr[\tilde d + L \le l]` for :math:`L \sim \mathrm{Lap}(1/\varepsilon_\theta)`
    and the clamped distance :math:`\tilde d` (module docstring): the test's law, used by
    the sampler and by the proof's checks.

    Examples
    --------
    >>> [round(float(q), 4) for q in pass_probability([0.0, 1.0, 2.0], 1.0, 1.0)]
    [0.8161, 0.5, 0.1839]
    """
    eps = np.asarray(eps_test, dtype=np.float64)
    km = np.asarray(threshold_km, dtype=np.float64)
    reach = TEST_CLAMP / eps
    d = np.clip(np.asarray(distance_km, dtype=np.float64), km - reach, km + reach)
    slack = eps * (km - d)  # in [-20, 20]
    return np.where(slack >= 0, 1.0 - 0.5 * np.exp(-np.abs(slack)), 0.5 * np.exp(-np.abs(slack)))


@dataclass(frozen=True, eq=False)
class ChunkRelease:
    """One chunk's releases (rows in the chunk's order), each row's outcome
    (:data:`FRESH`, :data:`PASSED`, :data:`EXHAUSTED`) and the report of the persons whose
    rows ended in this chunk (the last person stays open until the next chunk or ``close``)."""

    released: NDArray[np.float64]
    outcome: NDArray[np.int8]
    report: TraceReport


@dataclass(frozen=True, eq=False)
class TraceRelease:
    """:func:`release_traces`' result, rows in the input's order."""

    released: NDArray[np.float64]
    outcome: NDArray[np.int8]
    report: TraceReport


@dataclass
class _Person:
    """The open person carried between chunks: id, counters and last release."""

    person: NDArray[Any]  # its id, as a one-element array of the ids' dtype
    counts: NDArray[np.int64]  # spent units, fresh, reused, tests, passed (TraceReport's order)
    last: NDArray[np.float64]


def _times(times: ArrayLike, n: int) -> NDArray[np.float64]:
    t = np.asarray(times)
    if t.shape != (n,):
        raise ValidationError(f"times must be one per row ({n}), got shape {t.shape}")
    if t.dtype.kind == "M":
        t = t.astype("datetime64[ns]").astype(np.int64)
    elif t.dtype.kind not in "iuf":
        raise ValidationError(f"times must be numbers or datetime64, got dtype {t.dtype}")
    out = t.astype(np.float64)
    if not np.isfinite(out).all():
        raise ValidationError(f"times row {int(np.flatnonzero(~np.isfinite(out))[0])} is not finite")
    return out


class PredictiveReleaser:
    """The predictive mechanism over chunks of rows sorted by person, then time.

    Call :meth:`release` on successive chunks, then :meth:`close`. Persons must come in
    increasing order (ints, or text compared as text) and each person's times must not
    decrease, within and across chunks: a person seen again after another one would start a
    second budget, so it is refused. Memory: the chunk, plus one carried person.

    ``rng``: ``None`` (default) draws from the OS's secure source; a seed or a Generator is
    for experiments only (a :class:`~metricdp.errors.PrivacyLeakWarning`).
    """

    def __init__(self, manager: BudgetManager, *, rng: object = None) -> None:
        if not isinstance(manager, FixedSplit | AdaptiveRate):
            raise ValidationError(f"manager must be a FixedSplit or an AdaptiveRate, got {type(manager).__name__}")
        self.manager = manager
        warn_unless_secure(rng, stacklevel=2)
        self._source = check_rng(rng)
        self._budget = manager.budget_units
        self._open: _Person | None = None
        self._last: tuple[object, float] | None = None  # the last (person, time) seen
        self._rows = 0
        self._failed = False  # a chunk that failed after drawing leaves the state unusable

    def _check_order(self, ids: NDArray[Any], t: NDArray[np.float64]) -> None:
        base = self._rows + 1
        if self._last is not None and ids.size:
            prev, prev_t = self._last
            if np.asarray(prev).dtype.kind != ids.dtype.kind:
                raise ValidationError(f"data row {base}: person {ids[0].item()!r} is not of the kind of the "
                                      f"earlier persons ({prev!r}): ids must be all integers or all text")
            first = ids[0].item()
            if first < prev or (first == prev and (self._open is None or t[0] < prev_t)):
                raise ValidationError(f"data row {base}: person {first!r} at time {float(t[0])!r} comes after person "
                                      f"{prev!r} at time {prev_t!r}: rows must be sorted by person, then time")
        back = np.flatnonzero((ids[1:] < ids[:-1]) | ((ids[1:] == ids[:-1]) & (t[1:] < t[:-1])))
        if back.size:
            i = int(back[0]) + 1
            raise ValidationError(f"data row {base + i}: person {ids[i].item()!r} at time {float(t[i])!r} comes after "
                                  f"person {ids[i - 1].item()!r} at time {float(t[i - 1])!r}: rows must be sorted by "
                                  "person, then time")

    def release(self, persons: ArrayLike, times: ArrayLike, latlon: ArrayLike) -> ChunkRelease:
        """Release one chunk: every row is checked before anything is drawn."""
        if self._failed:
            raise ValidationError("an earlier chunk failed while releasing: its persons' spend is unknown; "
                                  "start a new release")
        ids = canonical_ids(persons, "persons")
        n = ids.size
        pts = np.asarray(latlon, dtype=np.float64)
        if pts.shape != (n, 2):
            raise ValidationError(f"latlon must be one (lat, lon) per person row ({n}, 2), got shape {pts.shape}")
        t = _times(times, n)
        check_rows(pts, self._rows + 1)
        self._check_order(ids, t)
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            return ChunkRelease(np.zeros((0, 2)), np.zeros(0, np.int8),
                                TraceReport(ids, empty, empty, empty, empty, empty))
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        lengths = np.diff(np.r_[starts, n])
        counts = np.zeros((5, starts.size), dtype=np.int64)  # the fields of TraceReport, in its order
        last = np.full((starts.size, 2), np.nan)
        has = np.zeros(starts.size, dtype=bool)
        closing = self._open
        if closing is not None and ids[0] == closing.person[0]:  # the open person continues here
            counts[:, 0], last[0], has[0] = closing.counts, closing.last, True
            closing = None
        released = np.empty((n, 2))
        outcome = np.empty(n, dtype=np.int8)
        order = np.argsort(-lengths, kind="stable")
        neg_sorted = -lengths[order]
        try:
            for step in range(int(lengths.max())):
                active = order[: int(np.searchsorted(neg_sorted, -step, side="left"))]
                self._step(active, starts[active] + step, pts, counts, last, has, released, outcome)
        except BaseException:
            self._failed = True
            raise
        done = TraceReport(ids[starts[:-1]], *counts[:, :-1])
        if closing is not None:  # the person open before this chunk ended at its start
            done = TraceReport.concat([self._close_open(), done])
        self._open = _Person(ids[-1:].copy(), counts[:, -1].copy(), last[-1].copy())
        self._last = (ids[-1].item(), float(t[-1]))
        self._rows += n
        return ChunkRelease(released, outcome, done)

    def _step(self, p: NDArray[np.intp], rows: NDArray[np.intp], pts: NDArray[np.float64],
              counts: NDArray[np.int64], last: NDArray[np.float64], has: NDArray[np.bool_],
              released: NDArray[np.float64], outcome: NDArray[np.int8]) -> None:
        predictive_step(self.manager, self._budget, self._source, p, rows, pts, counts, last, has, released, outcome)

    def _close_open(self) -> TraceReport:
        person = self._open
        self._open = None
        if person is None:
            empty = np.zeros(0, dtype=np.int64)
            return TraceReport(np.zeros(0, dtype=np.int64), empty, empty, empty, empty, empty)
        c = person.counts
        return TraceReport(person.person, *(c[i : i + 1] for i in range(5)))

    def close(self) -> TraceReport:
        """The report of the person still open (empty if none); later chunks must continue after it."""
        return self._close_open()


def predictive_step(manager: BudgetManager | Managers, budget: int | NDArray[np.int64], source: Any,
                    p: NDArray[np.intp],
                    rows: NDArray[np.intp], pts: NDArray[np.float64], counts: NDArray[np.int64],
                    last: NDArray[np.float64], has: NDArray[np.bool_], released: NDArray[np.float64],
                    outcome: NDArray[np.int8]) -> None:
    """One step of the persons ``p`` (distinct; their fixes are rows ``rows`` of ``pts``): test, predict or draw.

    The state is per person, indexed by ``p``: ``counts`` (5, persons: spent units, fresh,
    reused, tests, passed, :class:`~.trace_report.TraceReport`'s order), ``last`` (the last
    release) and ``has`` (a release exists). ``budget`` is every person's budget in units,
    or one per person (indexed by ``p`` too); ``manager``: one for every person, or
    :class:`Managers` (one per person, indexed by ``p``). ``released`` and ``outcome`` get the rows'.
    """
    per_person = isinstance(manager, Managers)
    threshold: ArrayLike
    if isinstance(manager, Managers):
        test_u, noise_u, threshold = manager.choose(p, counts[_TESTS, p], counts[_PASSED, p])
    else:
        (test_u, noise_u), threshold = manager.split(counts[_TESTS, p], counts[_PASSED, p]), manager.threshold_km
    left = (budget if isinstance(budget, int | np.integer) else np.asarray(budget)[p]) - counts[_SPENT, p]
    predicted = has[p]
    tested = predicted & (left >= test_u + noise_u)
    passed = np.zeros(p.size, dtype=bool)
    ti = np.flatnonzero(tested)
    if ti.size:
        q = pass_probability(haversine_rows_km(pts[rows[ti]], last[p[ti]]),
                             np.asarray(threshold)[ti] if per_person else threshold,
                             from_units(test_u[ti]))
        passed[ti] = np.asarray(source.random(ti.size)) < q
    fresh = ~predicted | (tested & ~passed)
    out = last[p]
    fi = np.flatnonzero(fresh)
    for units in np.unique(noise_u[fi]):  # one batch per eps_N (one for FixedSplit, a few rungs otherwise)
        batch = fi[noise_u[fi] == units]
        out[batch] = sample_planar_laplace_latlon(pts[rows[batch]], float(from_units(units)), source)
    released[rows] = out
    outcome[rows] = np.where(fresh, FRESH, np.where(passed, PASSED, EXHAUSTED))
    counts[_SPENT, p] += np.where(tested, test_u, 0) + np.where(fresh, noise_u, 0)
    counts[_FRESH, p] += fresh
    counts[_REUSED, p] += ~fresh
    counts[_TESTS, p] += tested
    counts[_PASSED, p] += passed
    last[p] = out
    has[p] = True


def release_traces(
    persons: ArrayLike,
    times: ArrayLike,
    latlon: ArrayLike,
    manager: BudgetManager,
    *,
    rng: object = None,
    chunk_rows: int = 1 << 20,
) -> TraceRelease:
    """The predictive mechanism over rows in any order (sorted here, results in the input's order).

    Parameters
    ----------
    persons : (n,) ints or text
    times : (n,) numbers or datetime64
        Each person's fixes are released in time order (ties in input order).
    latlon : (n, 2) degrees
    manager : FixedSplit or AdaptiveRate
    rng : None, int or Generator
        ``None`` (default): the OS's secure source.
    chunk_rows : int
        Rows per chunk of :class:`PredictiveReleaser`.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     r = release_traces([7, 7, 7], [0, 1, 2], [[48.85, 2.35]] * 3,
    ...                        FixedSplit(eps_test=0.5, eps_noise=1.0, budget=10.0, threshold_km=50.0), rng=1)
    >>> r.outcome.tolist(), r.report.person(7).fresh
    ([0, 1, 1], 1)
    """
    ids = canonical_ids(persons, "persons")
    t = _times(times, ids.size)
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int | np.integer) or chunk_rows < 1:
        raise ValidationError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    pts = np.asarray(latlon, dtype=np.float64)
    if pts.shape != (ids.size, 2):
        raise ValidationError(f"latlon must be one (lat, lon) per person row ({ids.size}, 2), got shape {pts.shape}")
    check_rows(pts, 1)  # before any draw, rows named in the input's order
    order = np.lexsort((np.arange(ids.size), t, ids))
    releaser = PredictiveReleaser(manager, rng=rng)
    released = np.empty((ids.size, 2))
    outcome = np.empty(ids.size, dtype=np.int8)
    reports = []
    for start in range(0, ids.size, int(chunk_rows)):
        rows = order[start : start + int(chunk_rows)]
        chunk = releaser.release(ids[rows], t[rows], pts[rows])
        released[rows], outcome[rows] = chunk.released, chunk.outcome
        reports.append(chunk.report)
    reports.append(releaser.close())
    return TraceRelease(released, outcome, TraceReport.concat(reports))
