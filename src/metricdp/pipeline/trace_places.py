"""One release per place across runs: the places of an accounted trace release, settled before its pass.

An accounted per-place release (:class:`~.trace_states.PerPlace` with a budget or a ledger)
knows every (person, public cell) of the file after its first pass (:class:`Places`: the
distinct pairs and the row of each one's first fix, memory per pair, never per row). Before
the release pass, :func:`settle` decides every place of the run
(``docs/proofs/trace_accounting.md``, "One release per place across runs"):

1. with a ledger, a pair whose release a **committed** run already paid for is read back from
   the ledger's memo (:meth:`~metricdp.accounting.ledger.Ledger.memo_lookup`, under
   ``HMAC(key, scope, person, cell)`` with :func:`~metricdp.location.per_place.place_scope`
   and the cell's label: the memo of :func:`~metricdp.location.per_place.release_per_place`,
   the same mechanism) and costs nothing: it is not reserved;
2. the other pairs are the reservation's demand (``places_to_pay``); of a person's grant
   ``G_p`` the first ``G_p / eps`` of them in the order of their first fix are drawn now,
   one planar Laplace release around the cell's centre each, and, with a ledger, memoized
   under the run's reservation (:meth:`~metricdp.accounting.ledger.Ledger.memo_store`:
   first stored wins, so a pair another run stored meanwhile is published with that run's
   release, this run having paid for one); the later ones are withheld.

The release pass then only repeats these releases (:meth:`~.trace_states.PerPlace.remember`).
A run whose reservation is refused stores nothing; a run aborted before publishing loses its
memo entries with its refund (the ledger's protocol). Without a ledger the memo is the run's
own: a later run draws the places again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .trace_states import PerPlace, rank_within

__all__ = ["Places", "settle"]


class Places:
    """The distinct (person, cell) pairs of a first pass, as ``person * cells + cell`` (sorted), with the file's
    row of each pair's first fix."""

    def __init__(self, cells: int) -> None:
        self.cells = np.int64(max(cells, 1))
        self.keys = np.zeros(0, dtype=np.int64)
        self.first = np.zeros(0, dtype=np.int64)

    @classmethod
    def of(cls, cells: int, persons: NDArray[np.int64], cell: NDArray[np.int64],
           first: NDArray[np.int64]) -> Places:
        """The distinct pairs ``(persons[i], cell[i])`` with the file's row of each one's first fix, as an engine
        counts them (one entry per pair, in any order)."""
        out = cls(cells)
        keys = np.asarray(persons, dtype=np.int64) * out.cells + np.asarray(cell, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        out.keys, out.first = keys[order], np.asarray(first, dtype=np.int64)[order]
        return out

    def add(self, persons: NDArray[np.int64], cell: NDArray[np.int64], first_row: int) -> None:
        """The pairs of one chunk (its rows from ``first_row`` on): a pair seen before keeps its first row."""
        keys, at = np.unique(persons * self.cells + cell, return_index=True)
        both = np.concatenate([self.keys, keys])
        self.keys, i = np.unique(both, return_index=True)  # the first of equal keys: the one seen before
        self.first = np.concatenate([self.first, first_row + at.astype(np.int64)])[i]

    def per_person(self, n: int, which: NDArray[np.bool_] | None = None) -> NDArray[np.int64]:
        """Distinct cells per person code (of the pairs ``which``, or all)."""
        keys = self.keys if which is None else self.keys[which]
        return np.bincount(keys // self.cells, minlength=n).astype(np.int64)


def _scopes(places: Places, mech: PerPlace) -> tuple[list[str], NDArray[np.intp]]:
    """The memo scopes of the pairs (:func:`~metricdp.location.per_place.place_scope`: the tiling and the eps of
    the pair's person) and each pair's index into them: one scope for one eps, one per distinct eps of a spread."""
    from ..location.per_place import place_scope

    eps = mech.scope_eps(places.keys // places.cells)
    distinct, which = np.unique(eps, return_inverse=True)
    return [place_scope(mech.grid, float(e)) for e in distinct], which.ravel().astype(np.intp)


def memoized(places: Places, mech: PerPlace, ids: NDArray[Any],
             ledger: Any) -> tuple[NDArray[np.bool_], NDArray[np.float64], list[bytes] | None]:
    """Per pair: whether a committed run paid for its release, that release (NaN where none) and the memo keys
    (None without a ledger: nothing is memoized); each pair under the scope of its person's eps."""
    n = places.keys.size
    if ledger is None or n == 0:
        return np.zeros(n, dtype=bool), np.full((n, 2), np.nan), None
    labels = np.asarray(mech.grid.labels, dtype=str)[places.keys % places.cells]
    scopes, which = _scopes(places, mech)
    hit, rel = np.zeros(n, dtype=bool), np.full((n, 2), np.nan)
    mks: list[bytes] = [b""] * n
    for j, scope in enumerate(scopes):
        at = np.flatnonzero(which == j)
        keys = ledger._memo_keys(scope, ids[places.keys[at] // places.cells], labels[at])  # for lookup and store
        hit[at], rel[at] = ledger._memo_lookup(keys, 2, scope)
        for i, k in zip(at.tolist(), keys, strict=True):
            mks[i] = k
    return hit, rel, mks


def settle(places: Places, mech: PerPlace, granted: NDArray[np.int64], hit: NDArray[np.bool_],
           known: NDArray[np.float64], mks: list[bytes] | None, ledger: Any, run_id: str | None,
           source: Any) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
    """Draw the places each person's grant pays for (module docstring, step 2), memoize them under ``run_id``, and
    give the mechanism every release of the run (started with ``granted``) before its pass.

    Returns the places given: ``(keys, releases)`` an earlier run paid for, then ``(keys, releases)`` drawn and
    paid for now (what a partition of an engine remembers, :meth:`~.trace_states.PerPlace.remember`)."""
    due = np.flatnonzero(~hit)
    due = due[np.argsort(places.first[due], kind="stable")]  # a person's places in the order of their first fix
    owner = places.keys[due] // places.cells
    paid = due[rank_within(owner) < mech.fits(owner)] if due.size else due
    drawn = mech.draw(mech.grid.centres[places.keys[paid] % places.cells].reshape(-1, 2),
                      places.keys[paid] // places.cells)
    if mks is not None and paid.size:
        scopes, which = _scopes(places, mech)
        for j, scope in enumerate(scopes):  # first stored wins, per scope
            at = np.flatnonzero(which[paid] == j)
            if at.size:
                drawn[at] = ledger._memo_store(run_id, scope, [mks[i] for i in paid[at].tolist()], drawn[at])
    mech.remember(places.keys[hit], known[hit], fresh=False)
    mech.remember(places.keys[paid], drawn, fresh=True)
    return places.keys[hit], known[hit], places.keys[paid], drawn
