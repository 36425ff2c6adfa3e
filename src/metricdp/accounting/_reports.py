"""A ledger read back: per-person totals, the runs, one person's history, the distance unit, its consistency.

Every function is one read transaction (no write lock is taken). Amounts come back as eps
(:func:`~.composition.from_units` of the integer units the database sums exactly); persons
as their stored hashes in hex, because the ids themselves are never stored (:mod:`.ledger`,
"What is stored"): one person's history is found by the hash of an id the caller gives. A
run aborted gave its charges back: it spent nothing and charges no one.

The consistency checks (:func:`check_sums`, on every open, and :func:`check_integrity`)
refuse a ledger whose sums disagree: a table emptied or edited would otherwise give every
person their budget again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ._store import RUN_UNITS_SPLIT, Backend, Tx, exact_sum, read_budget
from .composition import from_units

__all__ = ["check_integrity", "check_sums", "person_history", "persons_table", "runs_table", "unit"]


def persons_table(db: Backend) -> tuple[dict[str, NDArray[Any]], int]:
    """Every person (hashed, hex): eps committed, reserved, total and remaining; and the budget (units) read."""
    with db.read() as tx:
        rows = tx.q("SELECT c.ph, SUM(CASE WHEN r.state = 'committed' THEN c.units ELSE 0 END), SUM(c.units) "
                    "FROM charges c JOIN runs r ON r.run = c.run GROUP BY c.ph ORDER BY c.ph")
        budget = read_budget(tx)
    ph = np.array([bytes(r[0]).hex() for r in rows], dtype=str)
    committed = np.array([int(r[1]) for r in rows], dtype=np.int64)
    total = np.array([int(r[2]) for r in rows], dtype=np.int64)
    return {"person": ph, "committed": from_units(committed), "reserved": from_units(total - committed),
            "total": from_units(total), "remaining": from_units(budget - total)}, budget


def runs_table(db: Backend) -> list[dict[str, Any]]:
    """Every run, oldest first: state, mechanism, eps, rows released and withheld, persons, eps spent."""
    with db.read() as tx:
        rows = tx.q("SELECT run, state, mechanism, eps_units, n_rows, withheld, n_persons, over, units, "
                    "created, finished, units_hi FROM runs ORDER BY created, run")
    return [{"run": r[0], "state": r[1], "mechanism": r[2], "eps": float(from_units(int(r[3]))),
             "rows": int(r[4]), "withheld": int(r[5]), "persons": int(r[6]), "persons_over": int(r[7]),
             "eps_spent": 0.0 if r[1] == "aborted" else float(from_units(int(r[11]) * RUN_UNITS_SPLIT
                                                                             + int(r[8]))),
             "created": r[9], "finished": r[10]} for r in rows]


def unit(db: Backend) -> str | None:
    """The distance unit the ledger's eps is per, as the first run that named one recorded it (None: none did)."""
    with db.read() as tx:
        rows = tx.q("SELECT v FROM meta WHERE k = 'unit'")
    return str(rows[0][0]) if rows else None


def person_history(db: Backend, person: str, ph: bytes) -> tuple[dict[str, Any], int]:
    """The history of ``person`` (stored hash ``ph``) as :meth:`.Ledger.person_history` describes it; and the budget."""
    with db.read() as tx:
        rows = tx.q("SELECT r.run, r.state, r.mechanism, r.eps_units, c.units, r.created, r.finished "
                    "FROM charges c JOIN runs r ON r.run = c.run WHERE c.ph = :ph ORDER BY r.created, r.run",
                    {"ph": ph})
        budget = read_budget(tx)
    runs = [{"run": r[0], "state": r[1], "mechanism": r[2], "eps": float(from_units(int(r[3]))),
             "releases": int(r[4]) // max(int(r[3]), 1), "eps_spent": float(from_units(int(r[4]))),
             "created": r[5], "finished": r[6]} for r in rows]
    committed = sum(int(r[4]) for r in rows if r[1] == "committed")
    total = sum(int(r[4]) for r in rows)
    return {"person": person, "hash": ph.hex(), "runs": runs,
            "committed": float(from_units(committed)), "reserved": float(from_units(total - committed)),
            "total": float(from_units(total)), "remaining": float(from_units(budget - total))}, budget


def check_sums(tx: Tx, name: str) -> None:
    """The persons' totals, their charges and the spend of the runs not aborted must be one sum.

    Every write keeps them equal (``reserve`` adds to all three, ``abort`` takes from all
    three); a table emptied, dropped (and recreated empty on open) or edited breaks it,
    and reopening it as it is would give every person their budget again.
    """
    live = "WHERE state <> 'aborted'"
    try:  # exact sums (1M persons at 10 eps are 1e19 units: past BIGINT)
        persons, charges = exact_sum(tx, "persons", "total"), exact_sum(tx, "charges", "units")
        runs = exact_sum(tx, "runs", "units_hi", live) * RUN_UNITS_SPLIT + exact_sum(tx, "runs", "units", live)
    except (TypeError, ValueError):
        persons, charges, runs = -1, 0, 0
    if not persons == charges == runs:
        raise ValidationError(f"ledger {name} is corrupted: the persons' totals, their charges and the "
                              "runs' spend differ; restore it from a backup")


def check_integrity(db: Backend, name: str) -> None:
    """Raise if a person's total differs from the sum of their charges (a corrupted ledger)."""
    with db.read() as tx:
        bad = tx.q("SELECT COUNT(*) FROM persons p LEFT JOIN (SELECT ph, SUM(units) AS s FROM charges "
                   "GROUP BY ph) c ON c.ph = p.ph WHERE p.total <> COALESCE(c.s, 0)")
    if int(bad[0][0]):
        raise ValidationError(f"ledger {name}: {int(bad[0][0])} persons' totals differ from their charges")
