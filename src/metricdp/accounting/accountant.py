"""A per-person privacy budget in memory, and contribution bounding.

:class:`Accountant` is the shape users know from diffprivlib's ``BudgetAccountant`` and
OpenDP's filters, per person instead of per dataset: every person has the same budget ``B``
(eps per unit of distance); a release of ``c_p`` values of person ``p`` at ``eps`` each costs
``c_p eps`` (sequential composition, :mod:`metricdp.accounting.composition`), and a release
that would take any person past ``B`` is refused whole (``policy="refuse"``) or cut down to
what each person has left (``policy="drop"``: the person's excess values are withheld).
Spends are exact integers on the accounting grid (:func:`~.composition.to_units`), so the
number of values a person can release at eps is exactly ``floor(B / eps)`` of the decimals
they typed.

:func:`bound_contributions` caps the rows of each person at ``k``, choosing the kept rows
uniformly at random among the person's rows (not the first ``k``, which would bias a
release towards the start of a file): the rows are put in a uniformly random order, then
grouped by person with one *stable* sort, and a row is kept when its rank within its
person is below ``k`` (the proof is in :func:`bound_contributions`). The choice protects
nothing by itself (the guarantee is the cap), so a seeded ``rng`` is allowed without a
warning; the default is the OS secure source.

Person ids are compared by value within one array; integer ids and their decimal text name
the same person (the ledger hashes ``str(id)``), so mixing them converts integers to text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import check_rng, random_words
from ..errors import BudgetExceededError, ValidationError
from .composition import MAX_UNITS, from_units, to_units

__all__ = ["Accountant", "Grant", "Policy", "bound_contributions", "canonical_ids", "demand"]

Policy = Literal["refuse", "drop"]


def canonical_ids(user_ids: ArrayLike, name: str = "persons") -> NDArray[Any]:
    """A 1-D array of person ids: integers stay int64, anything else becomes text (``str``).

    Floats, booleans and None are refused, in every position of an object array: a float id
    (often a NaN from an empty cell) is a bug, and ``7.0`` hashed as the text "7.0" would be
    a second person beside the integer 7, with a budget of its own.
    """
    ids = np.asarray(user_ids)
    if ids.ndim != 1:
        raise ValidationError(f"{name} must be one-dimensional, got shape {ids.shape}")
    if ids.size == 0 or ids.dtype.kind in "iu":
        return ids.astype(np.int64)
    if ids.dtype.kind in "fcb":
        raise ValidationError(f"{name} must be integers or text, got dtype {ids.dtype}")
    if ids.dtype.kind == "O":
        values = ids.tolist()
        if any(t is type(None) or issubclass(t, float | bool | np.floating | np.bool_) for t in set(map(type, values))):
            k, bad = next((k, v) for k, v in enumerate(values)
                          if v is None or isinstance(v, float | bool | np.floating | np.bool_))
            raise ValidationError(f"{name} must be integers or text, got {bad!r} at position {k}")
    return ids.astype(str)


def _common(a: NDArray[Any], b: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    if a.dtype.kind == b.dtype.kind:
        return a, b
    return a.astype(str), b.astype(str)


@dataclass(frozen=True)
class Grant:
    """What a release may spend: per distinct person (sorted), rows asked and rows granted.

    ``units`` is the spend per person (accounting units); ``over`` counts the persons whose
    request exceeded what they had left (all of them refused under ``refuse``).
    """

    persons: NDArray[Any]
    requested: NDArray[np.int64]
    granted: NDArray[np.int64]
    units: NDArray[np.int64]
    over: int

    @property
    def withheld(self) -> int:
        """Rows withheld under the ``drop`` policy."""
        return int((self.requested - self.granted).sum())

    @property
    def eps(self) -> NDArray[np.float64]:
        """The eps each person spends."""
        return from_units(self.units)

    def keep_mask(self, user_ids: ArrayLike, rng: object = None) -> NDArray[np.bool_]:
        """Which rows of ``user_ids`` to release: ``granted[p]`` of person p's rows, chosen at random."""
        ids = canonical_ids(user_ids, "user ids")
        ids, persons = _common(ids, self.persons)
        pos = np.searchsorted(persons, ids)
        pos = np.minimum(pos, max(persons.size - 1, 0))
        if persons.size == 0 or not np.array_equal(persons[pos], ids):
            raise ValidationError("user ids name a person this grant does not cover")
        return _keep(pos.astype(np.intp), self.granted, check_rng(rng))


def demand(
    persons: ArrayLike, eps: Any, counts: ArrayLike | None = None
) -> tuple[NDArray[Any], NDArray[np.int64], int]:
    """A release as (distinct persons sorted, values per person, units per value).

    ``persons`` holds one id per released value (``counts=None``) or distinct ids with
    ``counts[i]`` values each. One eps per release: a release mixing epsilons is several
    releases, one per eps.
    """
    ids = canonical_ids(persons)
    units = to_units(eps)
    if counts is None:
        uniq, n = np.unique(ids, return_counts=True)
        return uniq, n.astype(np.int64), units
    c = np.asarray(counts)
    if c.shape != ids.shape or c.dtype.kind not in "iu" or (c < 0).any():
        raise ValidationError(f"counts must be one integer >= 0 per person ({ids.size}), got {c.dtype} {c.shape}")
    uniq, inverse = np.unique(ids, return_inverse=True)
    if uniq.size != ids.size:
        raise ValidationError("persons must be distinct when counts are given")
    out = np.zeros(uniq.size, dtype=np.int64)
    out[inverse.ravel()] = c
    return uniq, out, units


def grant(
    persons: NDArray[Any], requested: NDArray[np.int64], units: int, left: NDArray[np.int64], policy: str
) -> Grant:
    """Decide a request against what each person has ``left`` (units); raise under ``refuse``."""
    if policy not in ("refuse", "drop"):
        raise ValidationError(f"policy must be 'refuse' or 'drop', got {policy!r}")
    if requested.size and int(requested.max()) > MAX_UNITS // units:
        raise ValidationError("a person's request is too large to account")
    fits = np.maximum(left, 0) // units
    over = int((requested > fits).sum())
    if over and policy == "refuse":
        raise BudgetExceededError(
            f"{over} of {persons.size} persons would exceed their privacy budget; nothing was spent",
            over=over, persons=int(persons.size),
        )
    granted = np.minimum(requested, fits)
    return Grant(persons, requested, granted, granted * units, over)


class Accountant:
    """Per-person budgets in memory: ``spend``, ``remaining``, ``check`` and ``reserve``.

    >>> acc = Accountant(budget=1.0)
    >>> acc.spend(["ann", "bob", "ann"], eps=0.25).eps.tolist()
    [0.5, 0.25]
    >>> acc.remaining(["ann", "bob", "cy"]).tolist()
    [0.5, 0.75, 1.0]
    >>> acc.spend(["ann"] * 3, eps=0.25)
    Traceback (most recent call last):
    ...
    metricdp.errors.BudgetExceededError: 1 of 1 persons would exceed their privacy budget; nothing was spent
    >>> g = acc.spend(["ann"] * 3, eps=0.25, policy="drop")
    >>> int(g.granted[0]), g.withheld
    (2, 1)
    """

    def __init__(self, budget: float) -> None:
        self._budget = to_units(budget, "budget", budget=True)
        self._persons: NDArray[Any] = np.zeros(0, dtype=np.int64)
        self._spent = np.zeros(0, dtype=np.int64)

    @property
    def budget(self) -> float:
        """The budget of every person (eps per unit of distance)."""
        return float(from_units(self._budget))

    def _lookup(self, ids: NDArray[Any]) -> NDArray[np.int64]:
        if self._persons.size == 0:
            return np.zeros(ids.size, dtype=np.int64)
        store, ids = _common(self._persons, ids)
        pos = np.minimum(np.searchsorted(store, ids), store.size - 1)
        return np.where(store[pos] == ids, self._spent[pos], 0)

    def spent_units(self, persons: ArrayLike) -> NDArray[np.int64]:
        """Units spent by each of ``persons`` (0 for a person never seen)."""
        return self._lookup(canonical_ids(persons))

    def spent(self, persons: ArrayLike) -> NDArray[np.float64]:
        """Eps spent by each of ``persons``."""
        return from_units(self.spent_units(persons))

    def remaining(self, persons: ArrayLike) -> NDArray[np.float64]:
        """Eps each of ``persons`` has left."""
        return from_units(self._budget - self.spent_units(persons))

    def check(self, persons: ArrayLike, eps: Any, counts: ArrayLike | None = None) -> None:
        """Raise :class:`BudgetExceededError` if the release would exceed anyone's budget."""
        uniq, requested, units = demand(persons, eps, counts)
        grant(uniq, requested, units, self._budget - self._lookup(uniq), "refuse")

    def spend(
        self, persons: ArrayLike, eps: Any, counts: ArrayLike | None = None, *, policy: Policy = "refuse"
    ) -> Grant:
        """Spend a release: all of it, or (``drop``) what each person has left; returns the :class:`Grant`."""
        uniq, requested, units = demand(persons, eps, counts)
        g = grant(uniq, requested, units, self._budget - self._lookup(uniq), policy)
        self._add(g.persons, g.units)
        return g

    def _add(self, persons: NDArray[Any], units: NDArray[np.int64]) -> None:
        if persons.size == 0:
            return
        store, persons = _common(self._persons, persons)
        merged = np.union1d(store, persons)
        spent = np.zeros(merged.size, dtype=np.int64)
        if store.size:
            spent[np.searchsorted(merged, store)] = self._spent
        np.add.at(spent, np.searchsorted(merged, persons), units)
        self._persons, self._spent = merged, spent

    @contextlib.contextmanager
    def reserve(
        self, persons: ArrayLike, eps: Any, counts: ArrayLike | None = None, *, policy: Policy = "refuse"
    ) -> Iterator[Grant]:
        """Spend now, give it back if the block raises (the release was not made)."""
        g = self.spend(persons, eps, counts, policy=policy)
        try:
            yield g
        except BaseException:
            self._add(g.persons, -g.units)
            raise

    def export(self) -> tuple[NDArray[Any], NDArray[np.float64]]:
        """Every person seen (sorted) and the eps they spent."""
        return self._persons.copy(), from_units(self._spent)


def _shuffled(n: int, rng: Any) -> NDArray[np.intp]:
    """A uniformly random permutation of ``range(n)`` drawn from ``rng``.

    A numpy Generator shuffles (Fisher-Yates, ``Generator.permutation``). Any other source
    (the OS secure one by default) gives ``n`` independent uniform 64-bit words, ordered by
    a sort; the rows of each run of equal words (probability below ``n**2 / 2**65``) are
    then put in a uniformly random order of their own, drawn the same way. Exact: the words
    are exchangeable, so the order of distinct words is uniform, and a tie is broken by an
    independent uniform order, not by the sort's (which may follow position).
    """
    if type(rng) is np.random.Generator:
        return rng.permutation(n).astype(np.intp, copy=False)
    words = random_words(rng, n)
    order = np.argsort(words)
    ranked = words[order]
    tied = np.flatnonzero(ranked[1:] == ranked[:-1])
    if tied.size:  # a 64-bit collision (the tests force them with a source of few words)
        first = tied[np.r_[True, tied[1:] != tied[:-1] + 1]]
        last = tied[np.r_[tied[1:] != tied[:-1] + 1, True]] + 1
        for a, b in zip(first.tolist(), last.tolist(), strict=True):
            order[a : b + 1] = order[a : b + 1][_shuffled(b + 1 - a, rng)]
    return order


def _keep(ids: NDArray[Any], k: Any, rng: Any) -> NDArray[np.bool_]:
    """The mask of :func:`bound_contributions` (``k`` checked here against the persons found)."""
    n = ids.size
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        if not isinstance(k, int):
            _check_caps(np.asarray(k), 0)
        return keep
    perm = _shuffled(n, rng)
    keys = _compact(ids)[perm]
    # by person; any deterministic sort will do (see bound_contributions), radix sort where it applies
    order = perm[np.argsort(keys, kind="stable" if keys.dtype.itemsize <= 2 else "quicksort")]
    grouped = ids[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(grouped[1:], grouped[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1  # the person's index in sorted (np.unique) order
    rank = np.arange(n) - starts[group]
    cap = k if isinstance(k, int) else _check_caps(np.asarray(k), starts.size)[group]
    keep[order] = rank < cap
    return keep


def _compact(ids: NDArray[Any]) -> NDArray[Any]:
    """Integer ids in the smallest unsigned type that holds ``ids - min`` (the same order, a cheaper sort)."""
    if ids.dtype.kind not in "iu":
        return ids
    lo, hi = int(ids.min()), int(ids.max())
    for t in (np.uint8, np.uint16, np.uint32):
        if hi - lo <= np.iinfo(t).max:
            return (ids - lo).astype(t)
    return ids


def _check_caps(arr: NDArray[Any], persons: int) -> NDArray[np.int64]:
    if arr.shape != (persons,) or arr.dtype.kind not in "iu" or (arr < 0).any():
        raise ValidationError(f"k must be an integer >= 0 or one per distinct person ({persons})")
    return arr.astype(np.int64)


def bound_contributions(user_ids: ArrayLike, k: int | ArrayLike, rng: object = None) -> NDArray[np.bool_]:
    """Rows to keep so that each person has at most ``k``, chosen uniformly at random.

    ``k`` is one cap for everyone or one per distinct person (in ``np.unique(user_ids)``
    order). Returns a boolean mask over the rows; the kept rows stay in file order.

    Method: a uniformly random permutation ``P`` of the rows (:func:`_shuffled`), then one
    sort of the permuted rows by person (stable or not); a row is kept when fewer than ``k``
    rows of its person come before it in that order. Time: two sorts of ``n`` keys (the
    shuffle's, unless ``rng`` is a numpy Generator, and the grouping's), no ``np.unique``.

    Why the kept set is a uniform ``k``-subset of each person's rows: write the permuted
    file as its *pattern* (which person sits at each position) and its *filling* (which of
    that person's rows sits there). ``P`` is uniform over all ``n!`` orders, so given the
    pattern the filling is uniform too: the ``c_p`` rows of each person ``p`` are spread over
    the ``c_p`` positions the pattern gives ``p`` by a uniform bijection, independent of
    the other persons' (each of the ``prod c_p!`` fillings comes from the same number of
    permutations, one per pattern). The sort is a deterministic function of the pattern
    alone (it sees only person ids), so the order in which it lists ``p``'s positions is
    fixed once the pattern is, and the rows in those positions come in a uniformly random
    order of ``p``'s rows, whatever the sort does with equal keys. The kept rows are the
    first ``min(k, c)`` of a uniform order of ``c`` rows; a given ``k``-subset ``S`` comes
    first in exactly ``k! (c-k)!`` of the ``c!`` orders, so ``Pr[kept = S] = k! (c-k)! / c!
    = 1 / C(c, k)`` for every ``S``: uniform, and independent across persons.

    >>> mask = bound_contributions(["a", "b", "a", "a", "b"], 2, rng=0)
    >>> int(mask.sum()), int(mask[[0, 2, 3]].sum()), bool(mask[1] and mask[4])
    (4, 2, True)
    """
    ids = canonical_ids(user_ids, "user ids")
    if isinstance(k, int | np.integer) and not isinstance(k, bool):
        if k < 0:
            raise ValidationError(f"k must be >= 0, got {k}")
        return _keep(ids, int(k), check_rng(rng))
    return _keep(ids, np.asarray(k), check_rng(rng))
