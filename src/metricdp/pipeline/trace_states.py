r"""How each trace mechanism releases a person's fixes, with the state per person it needs.

A :class:`TraceMechanism` releases the fixes of one chunk (:class:`Fixes`: a person code per
row, in file order) and keeps, per person, what the next chunk needs -- so memory grows with
the persons (and their places), never with the rows:

* :class:`Independent` -- a fresh planar Laplace release of every fix at eps
  (:func:`~metricdp.mechanisms.planar_laplace.sample_planar_laplace_latlon`); the state: the
  counts;
* :class:`Predictive` -- the predictive mechanism (:mod:`metricdp.location.predictive`):
  :func:`~metricdp.location.predictive.predictive_step` over each chunk's persons, one step
  per rank (every person's first fix of the chunk, then their second, ...); the state: the
  person's last release and counts;
* :class:`PerPlace` -- one release per (person, public cell)
  (:mod:`metricdp.location.per_place`: planar Laplace around the cell's centre), repeated for
  every later fix of the person in that cell; the state: the memo of places -- the run's own,
  drawn as places come, or, in an accounted release, every place decided before the pass
  (:meth:`PerPlace.remember`; with a ledger, across runs: :mod:`.trace_places`).

Each person runs within a **grant** (:meth:`TraceMechanism.start`: pieces of
:attr:`TraceMechanism.piece` units): a row past it is withheld (independent: the rows after
the first ones in file order; per place: the places after the first ones), or, for the
predictive mechanism, the grant is the person's budget
(``docs/proofs/trace_accounting.md``). A release that is not accounted has no grants and
withholds nothing: a person whose spend would pass what the accounting grid holds
(:data:`~metricdp.accounting.composition.MAX_UNITS`, 4.6e6 eps) stops it with one error
(:class:`Unaccountable`), as the spend could not be reported.

With a **spread** budget B instead of one eps, each person's parameters come from their
counts of the first pass (:meth:`TraceMechanism.fit`, before :meth:`TraceMechanism.worst`):
B / rows per fix (independent), B / places per place (per place), or the predictive manager's
budget B -- the fixed split capped at B, or the adaptive manager over the person's rows
(:class:`~metricdp.location.predictive.Managers`). Shares are rounded down onto the accounting
grid (:func:`shares`), and a piece is the gcd of every person's units, so the accounting stays
exact (``docs/proofs/trace_accounting.md``, "A budget spread per person").
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_epsilon
from ..accounting.composition import MAX_UNITS, from_units, to_units
from ..errors import ValidationError
from ..location.grid import CellGrid
from ..location.predictive import EXHAUSTED, AdaptiveTooThin, FixedSplit, Managers, predictive_step
from ..mechanisms.planar_laplace import _MIN_EPS_HALF_CIRCUMFERENCE, sample_planar_laplace_latlon
from ..spaces import EARTH_RADIUS_KM

__all__ = ["Fixes", "Independent", "PerPlace", "Predictive", "ThinShare", "TraceMechanism", "Unaccountable", "draw",
           "grown", "rank_within", "shares"]

#: The counters per person, in :class:`~metricdp.location.trace_report.TraceReport`'s order.
_SPENT, _FRESH, _REUSED, _TESTS, _PASSED = range(5)


class Unaccountable(ValidationError):
    """A person of a release that is not accounted would spend more than the accounting grid holds
    (:data:`~metricdp.accounting.composition.MAX_UNITS`); ``code`` is the person's."""

    def __init__(self, code: int) -> None:
        super().__init__(f"their spend would pass {float(from_units(MAX_UNITS)):.3g} eps, more than can "
                         "be accounted")
        self.code = code


class ThinShare(ValidationError):
    """A person's spread budget leaves them an eps below the accounting grid or below what the sphere's sampler
    takes; ``code`` is the person's."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def _spread(epsilon: float | None, spread: float | None) -> float | None:
    """The spread budget (checked), when it replaces ``epsilon``: exactly one of the two is given."""
    if (epsilon is None) == (spread is None):
        raise ValidationError("give epsilon (each release's) or spread (each person's budget, spread over their "
                              f"fixes or places), exactly one; got epsilon={epsilon!r}, spread={spread!r}")
    return None if spread is None else check_epsilon(spread, "spread")


def shares(budget: float, parts: NDArray[np.int64], what: str) -> NDArray[np.int64]:
    """``budget / parts[p]`` for every person p, in units rounded down onto the grid (so ``parts[p]`` shares
    never pass the budget); a share below one unit, or below what the sphere's sampler takes, is
    :class:`ThinShare` naming the first such person's code."""
    total = to_units(budget, "spread", budget=True)
    n = np.maximum(np.asarray(parts, dtype=np.int64), 1)
    units = total // n
    floor = _MIN_EPS_HALF_CIRCUMFERENCE / (math.pi * EARTH_RADIUS_KM)
    bad = np.flatnonzero(from_units(units) < floor)
    if bad.size:
        i = int(bad[0])
        raise ThinShare(i, f"a budget of {budget!r} over their {int(n[i])} {what} is {float(from_units(units[i])):.3g} "
                           f"per km each, below {floor:.2g}: its noise would dwarf half the Earth's circumference")
    return units


def draw(latlon: NDArray[np.float64], units: NDArray[np.int64], source: Any) -> NDArray[np.float64]:
    """A planar Laplace release of each point at its own eps (``units``, one per point, exact on the grid): one
    batch per eps."""
    out = np.empty((latlon.shape[0], 2))
    for u in np.unique(units):
        at = np.flatnonzero(units == u)
        out[at] = np.asarray(sample_planar_laplace_latlon(latlon[at], float(from_units(u)), source),
                             dtype=np.float64).reshape(-1, 2)
    return out


@dataclass(frozen=True)
class Fixes:
    """A chunk's fixes: the person of each row (a code of the run), its time, its (lat, lon), its place."""

    persons: NDArray[np.int64]
    times: NDArray[np.float64]
    latlon: NDArray[np.float64]
    places: NDArray[np.int64]
    unit: str = "line"


def grown(a: NDArray[Any], n: int, fill: Any) -> NDArray[Any]:
    """``a`` (persons along its last axis) with room for ``n`` persons, new ones ``fill``."""
    if a.shape[-1] >= n:
        return a
    out = np.full((*a.shape[:-1], max(n, 2 * a.shape[-1])), fill, dtype=a.dtype)
    out[..., : a.shape[-1]] = a
    return out


class TraceMechanism(ABC):
    """How a person's fixes are released, with the state per person the release needs."""

    name: str
    #: the eps of a fresh release, per km (None: each person's own, from ``spread``)
    epsilon: float | None
    #: each person's budget spread over their own fixes, places or trace (None: one ``epsilon`` for all)
    spread: float | None = None
    #: the mechanism runs each person within any grant of :meth:`least` pieces (a smaller grant is no excess)
    within_grant: bool = False
    #: the cells of the public tiling (0: the mechanism has no places)
    cell_count: int = 0

    @property
    @abstractmethod
    def piece(self) -> int:
        """The accounting units every spend of this mechanism is a multiple of (what a reservation counts)."""

    @abstractmethod
    def worst(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> NDArray[np.int64]:
        """Each person's largest possible spend in pieces, from their rows and distinct cells."""

    def least(self) -> int | NDArray[np.int64]:
        """The pieces below which a grant releases nothing of a person (an excess under ``refuse``): one for all,
        or one per person code."""
        return 0

    @abstractmethod
    def fit(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> None:
        """Each person's parameters from their counts of the first pass (rows, distinct cells; per person code),
        before :meth:`worst`: with a ``spread`` budget, every person's eps (or budget manager) is set here
        (:class:`ThinShare` when a person's share is too thin); otherwise nothing to do."""

    def cells(self, latlon: NDArray[np.float64]) -> NDArray[np.int64] | None:
        """The public cell of each fix (per place only; an error names a fix in no cell)."""
        return None

    @abstractmethod
    def start(self, grants: NDArray[np.int64] | None, source: Any) -> None:
        """Begin a release drawing from ``source``: ``grants[p]`` pieces for person code ``p`` (a person beyond
        them has none), or, ``None``, no grants (not accounted: a person who would spend more than the
        accounting holds is :class:`Unaccountable`, never withheld)."""

    @abstractmethod
    def release(self, fixes: Fixes) -> tuple[NDArray[np.bool_] | None, NDArray[np.float64]]:
        """``(kept rows or None for all, releases of the kept rows)`` of one chunk, in its order."""

    @abstractmethod
    def counts(self, persons: int) -> NDArray[np.int64]:
        """The (5, persons) counters of the release so far (TraceReport's order, spent in units)."""


def rank_within(codes: NDArray[np.int64]) -> NDArray[np.intp]:
    """Each entry's rank among the entries of its person (0 for a person's first, in the given order)."""
    return _rank(codes)[1]


def _rank(codes: NDArray[np.int64]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Rows sorted by person (stable: file order within a person), and each row's rank within its person."""
    order = np.argsort(codes, kind="stable")
    c = codes[order]
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]]) if c.size else np.zeros(0, dtype=np.intp)
    rank = np.empty(codes.size, dtype=np.intp)
    rank[order] = np.arange(codes.size) - np.repeat(starts, np.diff(np.r_[starts, codes.size]))
    return order, rank


class _Counted(TraceMechanism):
    """The counters per person, grown as persons come."""

    def __init__(self) -> None:
        self._counts = np.zeros((5, 0), dtype=np.int64)
        self._grants = np.zeros(0, dtype=np.int64)
        self._limited = True
        self._source: Any = None
        self._eps: NDArray[np.int64] | None = None  # each person's eps in units (spread), by code

    def start(self, grants: NDArray[np.int64] | None, source: Any) -> None:
        self._limited = grants is not None
        self._grants = np.zeros(0, dtype=np.int64) if grants is None else np.asarray(grants, dtype=np.int64)
        self._counts = np.zeros((5, self._grants.size), dtype=np.int64)
        self._source = source

    def _room(self, n: int) -> None:
        self._counts = grown(self._counts, n, 0)
        self._grants = grown(self._grants, n, 0 if self._limited else MAX_UNITS // self.piece)

    def grant(self, codes: NDArray[np.int64], pieces: NDArray[np.int64]) -> None:
        """Persons coded after :meth:`start` (a partition of an engine, which meets its persons as it reads):
        ``pieces[i]`` for person code ``codes[i]``, before their first release."""
        codes = np.asarray(codes, dtype=np.int64)
        if codes.size:
            self._room(int(codes.max()) + 1)
            self._grants[codes] = np.asarray(pieces, dtype=np.int64)

    def fits(self, codes: NDArray[np.int64]) -> NDArray[np.int64]:
        """How many fresh releases each of ``codes``' persons' grant pays for."""
        if self._eps is None:
            return self._grants[codes]
        return self._grants[codes] * self.piece // self._eps[codes]

    def _withheld(self, codes: NDArray[np.int64], kept: NDArray[np.bool_]) -> None:
        """Not accounted, nothing is withheld: a person past the accounting's most is an error."""
        if not self._limited and not kept.all():
            raise Unaccountable(int(codes[np.flatnonzero(~kept)[0]]))

    def counts(self, persons: int) -> NDArray[np.int64]:
        self._room(persons)
        return self._counts[:, :persons].copy()

    def fit(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> None:
        return None

    def units(self, codes: NDArray[np.int64]) -> NDArray[np.int64]:
        """The eps (units) of a fresh release of each of ``codes``' persons."""
        if self._eps is None:
            return np.full(codes.size, to_units(self.epsilon), dtype=np.int64)
        return self._eps[codes]

    def draw(self, latlon: NDArray[np.float64], codes: NDArray[np.int64]) -> NDArray[np.float64]:
        """A fresh release of each point for the person of its code: at ``epsilon`` as given (one eps), or at the
        person's share (a spread)."""
        if self._eps is None:
            if not latlon.shape[0]:
                return np.zeros((0, 2))
            return np.asarray(sample_planar_laplace_latlon(latlon, float(self.epsilon or 0.0), self._source),
                              dtype=np.float64).reshape(-1, 2)
        return draw(latlon, self._eps[codes], self._source)

    def scope_eps(self, codes: NDArray[np.int64]) -> NDArray[np.float64]:
        """The eps (per km) each of ``codes``' persons is released at: ``epsilon`` as given, or their share."""
        if self._eps is None:
            return np.full(codes.size, float(self.epsilon or 0.0))
        return from_units(self._eps[codes])

    def _one_piece(self) -> int:
        """The gcd of every person's eps (units): one eps, or the spread shares fitted."""
        if self._eps is None:
            if self.epsilon is None:
                raise ValidationError("each person's eps comes from their counts: fit the mechanism first")
            return to_units(self.epsilon)
        return int(np.gcd.reduce(self._eps)) if self._eps.size else 1


class Independent(_Counted):
    """A fresh planar Laplace release of every fix at ``epsilon`` per km (k fixes cost k x eps), or, with
    ``spread`` B, at B / n_p for a person of n_p fixes (rounded down onto the grid: n_p of them spend at most B)."""

    name = "independent"

    def __init__(self, epsilon: float | None = None, *, spread: float | None = None) -> None:
        super().__init__()
        self.spread = _spread(epsilon, spread)
        self.epsilon = None if epsilon is None else check_epsilon(epsilon)

    @property
    def piece(self) -> int:
        return self._one_piece()

    def fit(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> None:
        if self.spread is not None:
            self._eps = shares(self.spread, rows, "fixes")

    def worst(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> NDArray[np.int64]:
        r = np.asarray(rows, dtype=np.int64)
        return r if self._eps is None else r * (self._eps[: r.size] // self.piece)

    def release(self, fixes: Fixes) -> tuple[NDArray[np.bool_] | None, NDArray[np.float64]]:
        codes = fixes.persons
        self._room(int(codes.max()) + 1 if codes.size else 0)
        _order, rank = _rank(codes)
        keep = (self._counts[_FRESH, codes] + rank) < self.fits(codes)  # the first rows of a person's grant
        self._withheld(codes, keep)
        k = codes[keep]
        drawn = self.draw(fixes.latlon[keep], k)
        np.add.at(self._counts[_FRESH], k, 1)
        np.add.at(self._counts[_SPENT], k, self.units(k))
        return (None if keep.all() else keep), drawn


class Predictive(_Counted):
    """The predictive mechanism: a test within ``threshold_km`` of the last release, a fresh release when it fails;
    each person runs within their grant.

    ``manager="fixed"`` (the paper's fixed-utility manager, :class:`FixedSplit`): tests at
    ``eps_test``, fresh releases at ``epsilon``, until the person's budget is spent -- their grant,
    and, with ``spread`` B, at most B. ``manager="adaptive"`` (the fixed-rate manager,
    :class:`~metricdp.location.predictive.AdaptiveRate`): needs ``spread`` B; a person of n_p fixes
    gets ``AdaptiveRate(budget=B, horizon=max(n_p, 2), test_share)`` (``threshold_km`` None: 2 / eps
    of the person's smallest rung), run within their grant.
    """

    name = "predictive"
    within_grant = True

    def __init__(self, epsilon: float | None = None, eps_test: float | None = None,
                 threshold_km: float | None = None, *, manager: str = "fixed", spread: float | None = None,
                 test_share: float = 0.2) -> None:
        super().__init__()
        if manager not in ("fixed", "adaptive"):
            raise ValidationError(f"manager must be 'fixed' or 'adaptive', got {manager!r}")
        self.kind_of_manager = manager
        self.spread = None if spread is None else check_epsilon(spread, "spread")
        self._managers: Managers | None = None
        self._last = np.zeros((2, 0))
        self._has = np.zeros(0, dtype=bool)
        if manager == "adaptive":
            if self.spread is None or epsilon is not None or eps_test is not None:
                raise ValidationError("the adaptive manager chooses every eps from each person's budget: give "
                                      "spread (the budget of a person's trace), and neither epsilon nor eps_test")
            self.epsilon, self.threshold_km, self.test_share = None, threshold_km, test_share
            Managers.adaptive(np.array([10**12]), np.array([2]), threshold_km=threshold_km,
                              test_share=test_share)  # the parameters' own checks, before any file is read
            return
        if epsilon is None or eps_test is None or threshold_km is None:
            raise ValidationError("the fixed manager needs epsilon (each fresh release's), eps_test and "
                                  "threshold_km")
        # the manager's own budget is replaced by each person's grant (predictive_step's per-person budget)
        self.manager = FixedSplit(eps_test=eps_test, eps_noise=epsilon, budget=epsilon, threshold_km=threshold_km)
        self.epsilon = float(epsilon)
        self._test, self._noise = to_units(eps_test, "eps_test"), to_units(epsilon)
        if self.spread is not None and to_units(self.spread, "spread", budget=True) < self._noise:
            raise ValidationError(f"spread {self.spread!r} is below one fresh release (epsilon {epsilon!r})")

    def fit(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> None:
        if self.kind_of_manager == "adaptive":
            r = np.asarray(rows, dtype=np.int64)
            try:
                self._managers = Managers.adaptive(np.full(r.size, to_units(self.spread, "spread", budget=True)),
                                                   np.maximum(r, 2), threshold_km=self.threshold_km,
                                                   test_share=self.test_share)
            except AdaptiveTooThin as ex:
                raise ThinShare(ex.index, str(ex)) from None

    @property
    def piece(self) -> int:
        if self.kind_of_manager == "fixed":
            return math.gcd(self._test, self._noise)
        m = self._fitted()
        return int(np.gcd.reduce(np.concatenate([m.test, m.rungs.ravel()]))) if m.test.size else 1

    def _fitted(self) -> Managers:
        if self._managers is None:
            raise ValidationError("the adaptive manager is set from each person's fixes: fit the mechanism first")
        return self._managers

    def _first(self) -> int | NDArray[np.int64]:
        """The units of each person's first release (no test; one for all under the fixed manager)."""
        return self._noise if self.kind_of_manager == "fixed" else self._fitted().first()

    def worst(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> NDArray[np.int64]:
        """One fresh release, then a test and a fresh release at every later fix; at most the spread budget."""
        r = np.asarray(rows, dtype=np.int64)
        if self.kind_of_manager == "adaptive":
            first: Any = self._fitted().first()[: r.size]
            step: Any = self._fitted().most()[: r.size]
        else:
            first, step = self._noise, self._test + self._noise
        later = np.minimum(np.maximum(r - 1, 0), MAX_UNITS // step)  # no overflow: capped at the grid's most
        most = np.minimum(first + later * step, MAX_UNITS)
        if self.spread is not None:
            most = np.minimum(most, to_units(self.spread, "spread", budget=True))
        return np.where(r > 0, most, 0) // self.piece

    def least(self) -> int | NDArray[np.int64]:
        return self._first() // self.piece

    def start(self, grants: NDArray[np.int64] | None, source: Any) -> None:
        super().start(grants, source)
        self._last = np.zeros((2, self._grants.size))
        self._has = np.zeros(self._grants.size, dtype=bool)

    def _room(self, n: int) -> None:
        super()._room(n)
        self._last = grown(self._last, n, np.nan)
        self._has = grown(self._has, n, False)

    def release(self, fixes: Fixes) -> tuple[NDArray[np.bool_] | None, NDArray[np.float64]]:
        codes = fixes.persons
        self._room(int(codes.max()) + 1 if codes.size else 0)
        budget = self._grants * self.piece
        first = self._first()
        keep = budget[codes] >= (first if np.ndim(first) == 0 else np.asarray(first)[codes])  # else withheld
        rows = np.flatnonzero(keep)
        released = np.empty((codes.size, 2))
        outcome = np.empty(codes.size, dtype=np.int8)
        last = self._last.T.copy()
        rank = _rank(codes[rows])[1]
        by = np.argsort(rank, kind="stable")  # each person's first fix of the chunk, then their second, ...
        steps, ranks = rows[by], rank[by]
        bounds = np.searchsorted(ranks, np.arange(int(ranks[-1]) + 2)) if rows.size else np.zeros(1, dtype=np.intp)
        for r in range(bounds.size - 1):  # one step of the persons with an r-th fix here: distinct persons
            at = steps[bounds[r]: bounds[r + 1]]
            predictive_step(self.manager if self._managers is None else self._managers, budget, self._source,
                            codes[at], at, fixes.latlon, self._counts, last, self._has, released, outcome)
            self._withheld(codes[at], outcome[at] != EXHAUSTED)  # not accounted: no budget runs out
        self._last = last.T.copy()
        return (None if keep.all() else keep), released[keep]


class _Memo:
    """Keys (person x cells + cell) with an index each, kept sorted: a chunk's places are found by one binary
    search (16 bytes per place, no Python object per place)."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.index = np.zeros(0, dtype=np.int64)

    def find(self, keys: NDArray[np.int64]) -> NDArray[np.int64]:
        """The index of each of ``keys`` (distinct), -1 where none."""
        pos = np.minimum(np.searchsorted(self.keys, keys), max(self.keys.size - 1, 0))
        hit = (pos < self.keys.size) & (self.keys[pos] == keys) if self.keys.size else np.zeros(keys.size, bool)
        return np.where(hit, self.index[pos] if self.keys.size else -1, -1).astype(np.int64)

    def add(self, keys: NDArray[np.int64], index: NDArray[np.int64]) -> None:
        """New keys (none of them known) with their indices."""
        if keys.size:
            merged = np.concatenate([self.keys, np.asarray(keys, dtype=np.int64)])
            order = np.argsort(merged, kind="stable")  # two sorted runs when ``keys`` are: a merge
            self.keys = merged[order]
            self.index = np.concatenate([self.index, np.asarray(index, dtype=np.int64)])[order]


class PerPlace(_Counted):
    """One planar Laplace release at ``epsilon`` around the centre of each (person, cell of ``grid``) of the
    run, repeated for every fix of the person in that cell (equal releases reveal a shared cell); with ``spread``
    B, at B / k_p for a person of k_p distinct cells in the run (rounded down onto the grid)."""

    name = "per-place"

    def __init__(self, grid: CellGrid, epsilon: float | None = None, *, spread: float | None = None) -> None:
        super().__init__()
        self.spread = _spread(epsilon, spread)
        self.grid, self.epsilon = grid, None if epsilon is None else check_epsilon(epsilon)
        self.cell_count = grid.n
        self._memo = _Memo()  # person x cells + cell -> index into _drawn
        self._drawn = np.zeros((0, 2))
        self._unseen = np.zeros(0, dtype=bool)  # per entry of _drawn: drawn before the pass, first fix still to come
        self._n = 0

    @property
    def piece(self) -> int:
        return self._one_piece()

    def fit(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> None:
        if self.spread is not None:
            self._eps = shares(self.spread, places, "places")

    def worst(self, rows: NDArray[np.int64], places: NDArray[np.int64]) -> NDArray[np.int64]:
        k = np.asarray(places, dtype=np.int64)
        return k if self._eps is None else k * (self._eps[: k.size] // self.piece)

    def cells(self, latlon: NDArray[np.float64]) -> NDArray[np.int64]:
        cell = self.grid.locate(latlon) if latlon.size else np.zeros(0, dtype=np.int64)
        return np.asarray(cell, dtype=np.int64)

    def start(self, grants: NDArray[np.int64] | None, source: Any) -> None:
        super().start(grants, source)
        self._memo, self._drawn, self._unseen, self._n = _Memo(), np.zeros((0, 2)), np.zeros(0, dtype=bool), 0

    def remember(self, keys: NDArray[np.int64], releases: NDArray[np.float64], *, fresh: bool) -> None:
        """Places decided before the pass (after :meth:`start`): ``keys`` (person x cells + cell) and their
        releases; ``fresh``: drawn and paid for by this run (each one fresh release at eps of its person), else
        paid for by an earlier run (every fix in them is a reuse, at no cost)."""
        k = np.asarray(keys, dtype=np.int64)
        if not k.size:
            return
        owner = k // np.int64(self.grid.n)
        self._room(int(owner.max()) + 1)
        self._memo.add(k, self._n + np.arange(k.size))
        self._drawn = np.concatenate([self._drawn, np.asarray(releases, dtype=np.float64).reshape(-1, 2)])
        self._unseen = np.concatenate([self._unseen, np.full(k.size, fresh)])
        self._n += k.size
        if fresh:
            np.add.at(self._counts[_FRESH], owner, 1)
            np.add.at(self._counts[_SPENT], owner, self.units(owner))

    def release(self, fixes: Fixes) -> tuple[NDArray[np.bool_] | None, NDArray[np.float64]]:
        codes = fixes.persons
        self._room(int(codes.max()) + 1 if codes.size else 0)
        cell = self.cells(fixes.latlon)
        keys = codes * np.int64(self.grid.n) + cell
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        index = self._memo.find(uniq)
        new = np.flatnonzero(index < 0)
        new = new[np.argsort(first[new], kind="stable")]  # new places in the order of their first fix
        owner = codes[first[new]]
        _order, rank = _rank(owner)
        fits = (self._counts[_FRESH, owner] + rank) < self.fits(owner)  # the first places of a person's grant
        self._withheld(owner, fits)
        paid = new[fits]
        drawn = self.draw(self.grid.centres[cell[first[paid]]].reshape(-1, 2), codes[first[paid]])
        index[paid] = self._n + np.arange(paid.size)
        if paid.size:  # (a concatenation copies every place drawn so far)
            self._drawn = np.concatenate([self._drawn, np.asarray(drawn, dtype=np.float64).reshape(-1, 2)])
            self._unseen = np.concatenate([self._unseen, np.zeros(paid.size, dtype=bool)])
        self._n += paid.size
        self._memo.add(uniq[paid], index[paid])
        np.add.at(self._counts[_FRESH], codes[first[paid]], 1)
        np.add.at(self._counts[_SPENT], codes[first[paid]], self.units(codes[first[paid]]))
        row_index = index[inverse.ravel()]
        keep = row_index >= 0
        reused = np.ones(codes.size, dtype=bool)
        reused[first[paid]] = False
        known = np.flatnonzero(index >= 0)
        firsts = known[self._unseen[index[known]]]  # the first fix of a place drawn before the pass: not a reuse
        reused[first[firsts]] = False
        self._unseen[index[firsts]] = False
        np.add.at(self._counts[_REUSED], codes[keep & reused], 1)
        return (None if keep.all() else keep), self._drawn[row_index[keep]]
