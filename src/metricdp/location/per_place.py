r"""One release per place: revisits to a public cell reuse one planar Laplace release.

The place of a fix is its cell in a **public tiling** fixed before any data is read (a
:class:`~metricdp.location.grid.CellGrid`: the region and the cell side only). All rows of
one person in one cell share ONE release: planar Laplace at eps per km around the cell's
centre (:func:`~metricdp.mechanisms.planar_laplace.sample_planar_laplace_latlon`), drawn
the first time the (person, cell) pair is released and, with a ledger, memoized there
(:meth:`~metricdp.accounting.ledger.Ledger.memo_store`, under ``HMAC(key, scope, person,
cell)``), so later runs reuse it for free. The accounting is
:func:`~metricdp.accounting.plan.plan_release` with ``consistent`` and the cell label as
the true value: one eps per distinct (person, cell), refused or withheld by the budget.

**Guarantee** (``docs/proofs/per_place.md``). The output is a function of the person's
cells only; each distinct cell is released once at eps, so two traces whose rows fall in
the same pattern of cells (rows i, j share a cell in one iff in the other) are
indistinguishable within :math:`\varepsilon \sum_c d(\mathrm{centre}(c), \mathrm{centre}(c'))`
over the paired distinct cells, and moves within a cell are not seen at all.

**Disclosure.** Equal releases reveal that rows share a cell: how often a person returns
to a place, and which rows are those returns, is published as it is. That is the price of
one release per place (no averaging attack on revisits), stated in
:attr:`PlaceRelease.disclosure`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import check_rng, warn_unless_secure
from .._validation import check_epsilon
from ..accounting.accountant import Policy, canonical_ids
from ..accounting.composition import to_units
from ..accounting.ledger import Ledger
from ..accounting.plan import plan_release
from ..errors import ValidationError
from ..mechanisms.planar_laplace import sample_planar_laplace_latlon
from .grid import CellGrid
from .release import check_rows
from .trace_report import TraceReport

__all__ = ["DISCLOSURE", "PlaceRelease", "place_scope", "release_per_place"]

#: What one release per place discloses beyond the noisy points (stated once).
DISCLOSURE = ("equal releases reveal a shared cell: rows of one person with the same release lie in the same public "
              "cell, so the number and the pattern of revisits to each place are published")


@dataclass(frozen=True, eq=False)
class PlaceRelease:
    """One release per (person, cell): ``released`` rows (NaN where withheld by the budget),
    ``kept`` (released or withheld), the per-person ``report`` (``fresh``: places drawn in this
    run, ``reused``: rows that repeat a release drawn earlier in this run or paid for by an
    earlier run), and the ``guarantee`` and ``disclosure`` in words."""

    released: NDArray[np.float64]
    kept: NDArray[np.bool_]
    report: TraceReport
    guarantee: str
    disclosure: str = DISCLOSURE


def place_scope(grid: CellGrid, epsilon: float) -> str:
    """The memo scope of a per-place release: the mechanism, its eps and the tiling's definition.

    A release is reused only under the same scope: another eps or another tiling draws anew.
    """
    spec = json.dumps({**grid.describe(), "bounds": list(grid.region.bounds)}, sort_keys=True, default=str)
    return f"per-place/planar-laplace-latlon/eps={check_epsilon(epsilon)!r}/km/" + hashlib.sha256(
        spec.encode()).hexdigest()[:32]


def release_per_place(
    persons: ArrayLike,
    latlon: ArrayLike,
    grid: CellGrid,
    epsilon_per_km: float,
    *,
    ledger: Ledger | None = None,
    budget: float | None = None,
    policy: Policy = "refuse",
    rng: object = None,
    run_id: str | None = None,
) -> PlaceRelease:
    """Release every row as its person's one release of its cell (module docstring).

    Parameters
    ----------
    persons : (n,) ints or text
    latlon : (n, 2) degrees; every row must lie in a cell of ``grid``
    grid : CellGrid
        The public tiling.
    epsilon_per_km : float
        Eps of each place's release.
    ledger : Ledger, optional
        Persistent spend and memo: a (person, cell) paid for by a committed run is reused.
    budget : float, optional
        Per-person budget without a ledger (one run).
    policy : "refuse" or "drop"
        Over budget: refuse the run (nothing drawn, nothing charged) or withhold the places
        that do not fit (their rows NaN, ``kept`` False).
    rng : None, int or Generator
        ``None`` (default): the OS's secure source.

    Examples
    --------
    >>> import warnings
    >>> from metricdp.location.region import Region
    >>> grid = CellGrid.over(Region.box(56.90, 24.00, 56.95, 24.10), 1.0)
    >>> home = grid.centres[0]
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     r = release_per_place([1, 1, 1], [home, home + 1e-4, home], grid, 0.5, rng=3)
    >>> bool((r.released == r.released[0]).all()), r.report.person(1).fresh, r.report.person(1).reused
    (True, 1, 2)
    """
    eps = check_epsilon(epsilon_per_km, "epsilon_per_km")
    ids = canonical_ids(persons, "persons")
    pts = np.asarray(latlon, dtype=np.float64)
    if pts.shape != (ids.size, 2):
        raise ValidationError(f"latlon must be one (lat, lon) per person row ({ids.size}, 2), got shape {pts.shape}")
    check_rows(pts, 1)
    cell = grid.locate(pts) if ids.size else np.zeros(0, dtype=np.int64)
    if (cell < 0).any():
        i = int(np.flatnonzero(cell < 0)[0])
        lat, lon = float(pts[i, 0]), float(pts[i, 1])
        raise ValidationError(f"data row {i + 1}: ({lat!r}, {lon!r}) lies in no cell of the grid over "
                              f"{grid.region.name}: {int((cell < 0).sum())} row(s) outside")
    warn_unless_secure(rng, stacklevel=2)
    source = check_rng(rng)
    labels = np.asarray(grid.labels, dtype=str)[cell]
    plan = plan_release(ids, eps, budget=budget, ledger=ledger, policy=policy, consistent=True, true_values=labels,
                        scope=place_scope(grid, eps), width=2, rng=source, run_id=run_id,
                        mechanism="per-place planar-laplace", unit="km")
    try:
        fresh = plan.fresh
        drawn = sample_planar_laplace_latlon(grid.centres[cell[plan.group_row[fresh]]].reshape(-1, 2), eps,
                                             source) if fresh.size else np.zeros((0, 2))
        per_group = plan.releases(np.asarray(drawn).reshape(-1, 2))
    except BaseException:
        plan.abort()
        raise
    plan.publishing()
    plan.commit()
    released = np.full((ids.size, 2), np.nan)
    released[plan.keep] = per_group[plan.group[plan.keep]]
    report = _report(ids, plan.keep, plan.group_row, plan.memo_hit, to_units(eps))
    guarantee = (f"{eps!r}-geo-indistinguishable per km for each distinct (person, cell): one release per place "
                 "around the cell's centre; a person with k distinct places is protected at k x eps")
    return PlaceRelease(released, plan.keep, report, guarantee)


def _report(ids: NDArray[np.generic], keep: NDArray[np.bool_], group_row: NDArray[np.intp],
            memo_hit: NDArray[np.bool_], units: int) -> TraceReport:
    """Per person with rows: units spent (fresh places x eps), fresh places, reused rows."""
    persons, inverse = np.unique(ids, return_inverse=True)
    inverse = inverse.ravel()
    rows = np.bincount(inverse[keep], minlength=persons.size)
    fresh = np.bincount(inverse[group_row[~memo_hit]], minlength=persons.size).astype(np.int64)
    zero = np.zeros(persons.size, dtype=np.int64)
    return TraceReport(persons, fresh * units, fresh, (rows - fresh).astype(np.int64), zero, zero)
