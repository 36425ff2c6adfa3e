"""One release's accounting from start to finish: cap, memo, budget, and which rows to release.

:func:`plan_release` is what a command calls *before* drawing anything, with the user
column of the rows it is about to release (and, for ``consistent``, their true values):

1. **cap** -- with ``max_rows_per_user=K``, at most K rows per person, chosen uniformly at
   random (:func:`~.accountant.bound_contributions`);
2. **groups** -- each kept row is its own release; with ``consistent``, the rows of one
   (person, true value) pair form one group that shares one release (post-processing,
   ``docs/proofs/composition.md`` Corollary 3);
3. **memo** -- with a ledger and ``consistent``, a group whose release a committed run
   already paid for is free: its release is read back;
4. **budget** -- the fresh groups (one eps each) are reserved in the ledger (or spent in a
   one-run :class:`~.accountant.Accountant` for ``budget`` without a ledger), refusing the
   run or, under ``drop``, withholding the groups that do not fit, chosen at random.

The caller then draws one release per fresh group (the true value of a group is the one
of its row ``group_row``), passes them to :meth:`Plan.releases` (which memoizes them and
returns one release per group, first stored wins), publishes the rows ``keep`` with the
release of their ``group``, calling :meth:`Plan.publishing` just before and
:meth:`Plan.commit` after; on a failure before publishing, :meth:`Plan.abort`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import check_rng
from .._validation import check_int
from ..errors import ValidationError
from ._ids import is_arrow
from .accountant import Accountant, Grant, Policy, bound_contributions, canonical_ids, demand
from .composition import EpsilonSummary, from_units, summarize, to_units
from .ledger import Ledger, Reservation

__all__ = ["Plan", "plan_release"]


@dataclass
class Plan:
    """The accounting of one release (see the module docstring for the protocol).

    Per row: ``keep`` (released or withheld) and ``group`` (its release group, -1 when
    withheld). Per group: ``group_row`` (a row holding the group's true value), ``memo_hit``
    (the release is already paid for) and ``memo_release`` (that release). ``run`` is the
    per-person eps of this run over the persons with released rows; ``total`` the persons'
    totals in the ledger after it (None without a ledger).

    Without ``consistent`` every kept row is its own group and nothing is memoized: the
    per-group arrays are then not stored but built when asked (``_group`` and the others
    None), so a plan of N rows holds N bytes (``keep``), not about 26 N.
    """

    keep: NDArray[np.bool_]
    _group: NDArray[np.intp] | None
    _group_row: NDArray[np.intp] | None
    _memo_hit: NDArray[np.bool_] | None
    _memo_release: NDArray[Any] | None
    withheld_cap: int
    withheld_budget: int
    persons_over: int
    run: EpsilonSummary
    total: EpsilonSummary | None
    reservation: Reservation | None = None
    _ledger: Ledger | None = field(default=None, repr=False)
    _memo: tuple[str, NDArray[Any]] | None = field(default=None, repr=False)  # scope, memo key per group
    _width: int | None = field(default=None, repr=False)

    @property
    def groups(self) -> int:
        """The number of release groups (the kept rows, without ``consistent``)."""
        return int(self.keep.sum()) if self._group_row is None else int(self._group_row.size)

    @property
    def group(self) -> NDArray[np.intp]:
        if self._group is not None:
            return self._group
        out = np.full(self.keep.size, -1, dtype=np.intp)
        out[self.keep] = np.arange(self.groups, dtype=np.intp)
        return out

    @property
    def group_row(self) -> NDArray[np.intp]:
        return np.flatnonzero(self.keep).astype(np.intp) if self._group_row is None else self._group_row

    @property
    def memo_hit(self) -> NDArray[np.bool_]:
        return np.zeros(self.groups, dtype=bool) if self._memo_hit is None else self._memo_hit

    @property
    def memo_release(self) -> NDArray[Any]:
        if self._memo_release is not None:
            return self._memo_release
        return np.full(self.groups, -1, dtype=np.int64) if self._width is None else np.full(
            (self.groups, int(self._width)), np.nan)

    @property
    def fresh(self) -> NDArray[np.intp]:
        """The groups that need a fresh release, in group order."""
        if self._memo_hit is None:
            return np.arange(self.groups, dtype=np.intp)
        return np.flatnonzero(~self._memo_hit)

    @property
    def fresh_count(self) -> int:
        """How many groups need a fresh release (:attr:`fresh` without building it)."""
        return self.groups if self._memo_hit is None else int((~self._memo_hit).sum())

    def releases(self, fresh_releases: ArrayLike) -> NDArray[Any]:
        """One release per group from the fresh draws (one per :attr:`fresh` group), memoized in the ledger."""
        fresh = self.fresh
        memo_release = self.memo_release
        drawn = np.asarray(fresh_releases)
        if drawn.shape[:1] != fresh.shape or drawn.ndim != memo_release.ndim:
            raise ValidationError(f"expected {fresh.size} fresh releases shaped like {memo_release.shape[1:]}, "
                                  f"got shape {drawn.shape}")
        out = memo_release.astype(np.result_type(memo_release, drawn), copy=True)
        if self._memo is not None and self._ledger is not None and self.reservation is not None and fresh.size:
            scope, mks = self._memo
            drawn = self._ledger._memo_store(self.reservation.run_id, scope, mks[fresh].tolist(), drawn)
        out[fresh] = drawn
        return out

    def publishing(self) -> None:
        """Nothing to do but document the point of no return: from here on never :meth:`abort`."""

    def commit(self) -> None:
        """The release is published: commit the reservation (no-op without a ledger)."""
        if self._ledger is not None and self.reservation is not None:
            self._ledger.commit(self.reservation.run_id)

    def abort(self) -> None:
        """The release failed before publishing: give the reservation back (no-op without a ledger)."""
        if self._ledger is not None and self.reservation is not None:
            self._ledger.abort(self.reservation.run_id)


def _groups(ids: NDArray[Any], values: NDArray[Any] | None, rows: NDArray[np.intp]) -> tuple[NDArray[np.intp], ...]:
    """Group index of each of ``rows`` and the first row of each group (in row order)."""
    if values is None or rows.size == 0:  # no row: no group (a reshape of zero values has no width)
        return np.arange(rows.size, dtype=np.intp), rows
    _, person = np.unique(ids[rows], return_inverse=True)
    flat = values[rows].reshape(rows.size, -1)
    _, value = np.unique(flat, axis=0, return_inverse=True)
    pair = person.ravel().astype(np.int64) * (int(value.max(initial=0)) + 1) + value.ravel()
    _, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # groups numbered by their first row
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse.ravel()].astype(np.intp), rows[first[order]]


def _count(names: Any) -> int:
    return len(names) if is_arrow(names) else int(names.size)


def _take(names: Any, idx: NDArray[Any]) -> Any:
    """``names[idx]`` for a numpy array or an Arrow array of ids."""
    if is_arrow(names):
        import pyarrow as pa

        return names.take(pa.array(np.asarray(idx, dtype=np.int64)))
    return names[idx]


def _distinct(names: Any) -> bool:
    if is_arrow(names):
        import pyarrow.compute as pc

        return len(pc.unique(names)) == len(names)
    return bool(np.unique(names).size == names.size)


def _codes(user_ids: ArrayLike, names: Any, check_distinct: bool) -> NDArray[np.signedinteger[Any]]:
    """Row codes into ``names``, checked (a ledger refuses repeated names by itself); int32 stays int32."""
    codes = np.asarray(user_ids)
    n = _count(names)
    if codes.ndim != 1 or (codes.size and codes.dtype.kind not in "iu"):
        raise ValidationError(f"user ids must be integer codes into persons, got {codes.dtype} {codes.shape}")
    if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= n):
        raise ValidationError(f"user ids must be codes in [0, {n}), got {int(codes.min())}..{int(codes.max())}")
    if check_distinct and not _distinct(names):
        raise ValidationError("persons must be distinct")
    if codes.dtype in (np.int32, np.int64):
        return codes
    return codes.astype(np.int64)


def _known_totals(g: Grant, totals: NDArray[np.int64] | None, persons: NDArray[Any]) -> NDArray[np.int64] | None:
    """The totals of ``persons`` when every one of them is in the grant, else None."""
    if totals is None or g.persons.size == 0 or persons.size == 0:
        return None
    pos = np.minimum(np.searchsorted(g.persons, persons), g.persons.size - 1)
    return totals[pos] if np.array_equal(g.persons[pos], persons) else None


def check_additive(additive: float, budget: float | None) -> None:
    """Refuse a release whose additive loss of ONE release alone exceeds every person's budget.

    Such a release could not be given to anyone within the budget: one release already
    costs more than all of it at any distance (``eps * d + additive > budget`` for every
    ``d >= 0``). Without a budget nothing is refused (the additive loss is reported).
    """
    a = float(additive)
    if not (math.isfinite(a) and a >= 0):
        raise ValidationError(f"the additive loss of a release must be a finite number >= 0, got {additive!r}")
    if budget is not None and a > budget:
        raise ValidationError(f"the lattice's additive loss of one release, {a:.3g}, exceeds the per-person budget "
                              f"{budget:g}: no one could be released even once within it; use a smaller lattice "
                              f"step (the additive loss is eps x step x sqrt 2)")


def plan_release(
    user_ids: ArrayLike,
    eps: float,
    *,
    budget: float | None = None,
    ledger: Ledger | None = None,
    max_rows_per_user: int | None = None,
    policy: Policy = "refuse",
    consistent: bool = False,
    true_values: ArrayLike | None = None,
    scope: str = "",
    width: int | None = None,
    rng: object = None,
    run_id: str | None = None,
    mechanism: str = "",
    persons: ArrayLike | None = None,
    unit: str | None = None,
    additive: float = 0.0,
) -> Plan:
    """Plan a release of one value per row at ``eps`` (module docstring).

    ``true_values`` (one label or point per row) are needed with ``consistent``; ``scope``
    names the mechanism for the memo and ``width`` the number of coordinates of a point
    release (None: releases are output indices). With a ledger, its budget applies and
    ``budget`` must be None or equal to it; raises
    :class:`~metricdp.errors.BudgetExceededError` under ``refuse``.

    ``persons`` (distinct ids) makes ``user_ids`` integer codes into it, the form a
    streaming pass builds (one small integer per row instead of one string): everything
    per row is then done on the codes, and only the ledger sees ``persons[code]``.
    ``unit`` (the distance unit of ``eps``: ``"km"``, ``""`` for a unitless distance)
    binds the ledger to one unit (:meth:`~metricdp.accounting.ledger.Ledger.reserve`).
    With a ledger and no ``unit``, the unit the ledger is already bound to
    (:attr:`~metricdp.accounting.ledger.Ledger.unit`) is used; a ledger bound to none yet
    needs it stated (a first run in the wrong unit would bind the ledger to it).

    ``additive`` is the additive loss of one release, ``eps * c`` for a lattice release
    whose snapping costs ``c`` of distance (``docs/proofs/lattice_points.md``, section 4).
    It is charged through ``eps`` itself: the release is eps-mDP for the distance
    ``d + c`` between distinct inputs, so a person charged ``E`` has an additive loss of
    ``c * E`` (``docs/proofs/composition.md``, "Additive terms"). A release whose one
    ``additive`` alone exceeds the budget is refused here, before anything is reserved.
    """
    if ledger is not None and not isinstance(ledger, Ledger):  # a path is not an open ledger
        raise ValidationError(f"ledger must be an open Ledger (Ledger(path, budget=...)), got {type(ledger).__name__} "
                              f"{ledger!r}")
    if ledger is not None and unit is None:  # a ledger sums eps of one unit only: a run must say which
        unit = ledger.unit  # ... or repeat the one the ledger is bound to
        if unit is None:
            raise ValidationError(
                "a release with a ledger must state the distance unit its eps is per (unit): "
                "this ledger has not been bound to one yet ('' for a unitless distance, e.g. an LDP oracle)"
            )
    names = None if persons is None else persons if is_arrow(persons) else canonical_ids(persons, "persons")
    ids = canonical_ids(user_ids, "user ids") if names is None else _codes(user_ids, names, ledger is None)
    units = to_units(eps)
    source = check_rng(rng)
    if ledger is not None and budget is not None and to_units(budget, "budget", budget=True) != to_units(
            ledger.budget, "budget", budget=True):
        raise ValidationError(f"budget {budget:g} differs from the ledger's {ledger.budget:g}")
    check_additive(additive, ledger.budget if ledger is not None else budget)
    values = None
    if consistent:
        if true_values is None:
            raise ValidationError("consistent releases need the true values")
        values = np.asarray(true_values)
        if values.shape[:1] != ids.shape or values.ndim > 2:
            raise ValidationError(f"true values must be one label or point per row ({ids.size}), got {values.shape}")
    n = ids.size
    keep = np.ones(n, dtype=bool)
    if max_rows_per_user is not None:
        keep = bound_contributions(ids, check_int(max_rows_per_user, "max rows per user", minimum=1), source)
    withheld_cap = int(n - keep.sum())
    spend = _Spend(names, ledger, budget, eps, units, policy, run_id, mechanism, unit)
    if values is None:  # every kept row is its own group and nothing is memoized: no per-group arrays
        kept_ids = ids if withheld_cap == 0 else ids[keep]
        spend(kept_ids)
        try:
            return _finish(ids, units, keep, kept_ids, spend, source, withheld_cap, width)
        except BaseException:
            spend.abort()
            raise
    rows = np.flatnonzero(keep).astype(np.intp)
    group_of_row, group_row = _groups(ids, values, rows)

    g_ids = ids[group_row]
    hit = np.zeros(group_row.size, dtype=bool)
    memo: NDArray[Any] = np.full(group_row.size, -1, dtype=np.int64) if width is None else np.full(
        (group_row.size, int(width)), np.nan)
    memo_args = None
    if ledger is not None:
        g_values = values[group_row]
        g_names = g_ids if names is None else _take(names, g_ids)
        mks = ledger._memo_keys(scope, g_names, g_values)  # once, for the lookup and the store
        hit, memo = ledger._memo_lookup(mks, width, scope)
        memo_args = (scope, np.array([*mks, b""], dtype=object)[:-1])  # an object array (never 2-D)
    spend(g_ids[np.flatnonzero(~hit)])
    try:
        return _finish_groups(ids, units, rows, group_of_row, group_row, hit, memo, memo_args, spend.grant, source,
                              ledger, spend.reservation, withheld_cap, names, spend.totals)
    except BaseException:
        spend.abort()
        raise


class _Spend:
    """The budget step: reserve in the ledger, spend in a one-run accountant, or only count."""

    def __init__(self, names: Any, ledger: Ledger | None, budget: float | None, eps: float, units: int,
                 policy: Policy, run_id: str | None, mechanism: str, unit: str | None) -> None:
        self.names, self.ledger, self.budget, self.eps, self.units = names, ledger, budget, eps, units
        self.policy, self.run_id, self.mechanism, self.unit = policy, run_id, mechanism, unit
        self.reservation: Reservation | None = None
        self.totals: NDArray[np.int64] | None = None  # each granted person's total after the reservation

    def __call__(self, fresh_ids: NDArray[Any]) -> None:
        """Spend one value per entry of ``fresh_ids`` (codes into ``names``, or ids)."""
        ledger, names = self.ledger, self.names
        if ledger is not None and names is not None:
            per_code = np.bincount(fresh_ids, minlength=_count(names))  # dense codes: counting, not sorting
            codes = np.flatnonzero(per_code)
            counts = per_code[codes].astype(np.int64)
            # the persons' ids go to the ledger as they are (Arrow bytes or numpy); the grant comes back over codes
            run, self.grant, self.totals = ledger._reserve(_take(names, codes), counts, self.units, self.policy,
                                                           self.run_id, self.mechanism, self.unit, codes)
            self.reservation = Reservation(run, self.grant, self.totals)
        elif ledger is not None:
            self.reservation = ledger.reserve(fresh_ids, self.eps, policy=self.policy, run_id=self.run_id,
                                              mechanism=self.mechanism, unit=self.unit)
            self.grant, self.totals = self.reservation.grant, self.reservation.totals
        elif self.budget is not None:
            self.grant = Accountant(self.budget).spend(fresh_ids, self.eps, policy=self.policy)
        else:
            persons, requested, _ = demand(fresh_ids, self.eps)
            self.grant = Grant(persons, requested, requested, requested * self.units, 0)

    def abort(self) -> None:
        if self.ledger is not None and self.reservation is not None:  # nothing was published
            self.ledger.abort(self.reservation.run_id)


def _summary(ids: NDArray[Any], released: NDArray[Any], fresh_ids: NDArray[Any], units: int, names: Any,
             g: Grant, ledger: Ledger | None, totals: NDArray[np.int64] | None) -> tuple[EpsilonSummary, ...]:
    """This run's eps per person with released rows, and (with a ledger) their totals after it."""
    if names is not None:  # dense codes: counting, not sorting
        persons_run = np.flatnonzero(np.bincount(released, minlength=_count(names)))
        fresh_count = np.bincount(fresh_ids, minlength=_count(names))[persons_run]
    else:
        persons_run = np.unique(released)
        fresh_count = np.bincount(np.searchsorted(persons_run, fresh_ids), minlength=persons_run.size)
    spent_run = fresh_count.astype(np.int64) * units
    if ledger is None:
        return (summarize(from_units(spent_run)),)
    known = _known_totals(g, totals, persons_run)  # read in the reservation: no second pass over the persons
    total = summarize(from_units(known) if known is not None else ledger.spent(
        persons_run if names is None else _take(names, persons_run)) if persons_run.size else [])
    return summarize(from_units(spent_run)), total


def _finish(ids: NDArray[Any], units: int, keep: NDArray[np.bool_], kept_ids: NDArray[Any], spend: _Spend,
            source: Any, withheld_cap: int, width: int | None) -> Plan:
    """:func:`_finish_groups` when every kept row is its own group (the same draws, no per-group arrays)."""
    g = spend.grant
    if g.withheld:
        keep = keep.copy()
        keep[keep] = g.keep_mask(kept_ids, source)
    withheld_budget = int(kept_ids.size - keep.sum())
    released = kept_ids if withheld_budget == 0 else ids[keep]
    summary = _summary(ids, released, released, units, spend.names, g, spend.ledger, spend.totals)
    return Plan(keep, None, None, None, None, withheld_cap, withheld_budget, g.over, summary[0],
                summary[1] if len(summary) > 1 else None, spend.reservation, spend.ledger, None, width)


def _finish_groups(ids: NDArray[Any], units: int, rows: NDArray[np.intp], group_of_row: NDArray[np.intp],
                   group_row: NDArray[np.intp], hit: NDArray[np.bool_], memo: NDArray[Any],
                   memo_args: tuple[str, NDArray[Any]] | None, g: Grant, source: Any,
                   ledger: Ledger | None, reservation: Reservation | None, withheld_cap: int,
                   names: Any = None, totals: NDArray[np.int64] | None = None) -> Plan:
    """Withhold the groups the grant does not cover and summarise the run."""
    n = ids.size
    fresh = np.flatnonzero(~hit)
    kept_groups = np.ones(group_row.size, dtype=bool)
    if g.withheld:
        kept_groups[fresh] = g.keep_mask(ids[group_row[fresh]], source)
    # renumber the groups that stay, and withhold the rows of the others
    new_index = np.cumsum(kept_groups) - 1
    row_group = np.full(n, -1, dtype=np.intp)
    row_group[rows] = np.where(kept_groups[group_of_row], new_index[group_of_row], -1)
    keep = row_group >= 0
    withheld_budget = int(rows.size - keep.sum())

    group_row, hit, memo = group_row[kept_groups], hit[kept_groups], memo[kept_groups]
    if memo_args is not None:
        memo_args = (memo_args[0], memo_args[1][kept_groups])
    summary = _summary(ids, ids[keep], ids[group_row[~hit]], units, names, g, ledger, totals)
    return Plan(keep, row_group, group_row, hit, memo, withheld_cap, withheld_budget, g.over, summary[0],
                summary[1] if len(summary) > 1 else None, reservation, ledger, memo_args)
