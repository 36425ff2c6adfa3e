"""A persistent per-person privacy ledger: spend survives runs, processes and crashes.

A :class:`Ledger` is a database: a SQLite file by default (stdlib :mod:`sqlite3`, WAL
journal, ``synchronous=FULL``), or any SQLAlchemy URL (SQLAlchemy Core, the ``ledger-sql``
extra; PostgreSQL is tested). Every person has the ledger's budget ``B``; a run spends in
three steps:

1. :meth:`Ledger.reserve` -- in one exclusive transaction, read what each person of the run
   has spent, refuse the whole run (:class:`~metricdp.errors.BudgetExceededError`, nothing
   written) or grant what fits (``policy="drop"``), add the grant to the persons' totals and
   record the run as ``reserved``. This happens *before* anything is published.
2. publish the release.
3. :meth:`Ledger.commit` -- mark the run ``committed``. Or, if the release failed *before*
   it was published, :meth:`Ledger.abort` gives the reservation back.

**Why it never overspends.** A person's total counts every reserved and committed run, and
the check and the addition happen in one transaction that excludes every other writer
(SQLite ``BEGIN IMMEDIATE``; elsewhere ``SELECT ... FOR UPDATE`` on one lock row, so
reservations are serialised the same way): two runs cannot both read the old total. A run
interrupted anywhere (``kill -9`` included) leaves either no trace (before its reservation
committed: nothing was published either) or a reservation that stays spent until an explicit
:meth:`Ledger.abort`, which only the process that knows the release was not published may
call; a committed run can never be aborted. So the spend recorded is always at least what
was published, never the reverse.

**What is stored.** Never a person id or a true value in clear. Persons are stored as
``HMAC-SHA256(key, id)`` truncated to 128 bits; memoized releases (``--consistent``) under
``HMAC-SHA256(key, scope, id, value)``, the release (an index or a point) XORed with a
keystream derived from the key and that hash (HMAC again), so the table can be neither
searched for a known person and value nor read back without the key. The key is 32 random
bytes in a file beside a SQLite ledger (``LEDGER.key``, created with mode 0600 on first use,
published with a hard link so that concurrent creators agree on one key); for a URL ledger
its path is an argument. A key file readable by group or others is refused. The key's
fingerprint is stored in the ledger, so a wrong or regenerated key is refused rather than
silently starting everyone from zero. Ids are hashed as text (``str(id)``, UTF-8): the
integer 7 and the string "7" are one person.

**Accounting.** Spends are integers on the grid of
:func:`~metricdp.accounting.composition.to_units` (1e-12 eps), summed exactly in the
database; one run releases values at one eps.

**Memoized releases.** :meth:`Ledger.memo_lookup` returns the release of a (person, value)
pair only when the run that stored it is committed (a committed run cannot be aborted, so
the release was paid for and may be repeated for free as post-processing);
:meth:`Ledger.memo_store` keeps the first release stored for a pair and returns it (a later
run that drew a fresh one uses the stored one instead, having paid for a fresh one); a pair
stored by a run that is still reserved is taken over by the storing run, which paid for it
too, and the memo entries of an aborted run are deleted with its refund.

**Where the pieces are.** :class:`Ledger` holds the protocol. The key file is in
:mod:`._keyfile`; the bytes of an id that is hashed in :mod:`._ids`; the memo's keys, cipher
and encoding in :mod:`._memo`; the SQL of both backends in :mod:`._store`, and what is at a
path before it is opened in :mod:`._files`; the reading side and the consistency checks in
:mod:`._reports`.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ValidationError
from . import _memo, _reports
from ._files import inspect_file, remove, sqlite_files
from ._hmac import hmac_framed
from ._ids import arrow_demand, arrow_text, id_bytes, is_arrow
from ._keyfile import KEY_BYTES, create_key, fingerprint, key_path_for, load_key
from ._store import (
    RUN_UNITS_SPLIT,
    SCHEMA_VERSION,
    Backend,
    SQLAlchemy,
    SQLite,
    Tx,
    ensure_schema,
    migrate,
    read_budget,
    redact,
)
from .accountant import Grant, Policy, canonical_ids, demand, grant
from .composition import from_units, to_units

__all__ = ["KEY_BYTES", "Ledger", "Reservation", "key_path_for"]

#: Length of a stored person hash (bytes).
HASH_BYTES = 16
_RUN_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _exact_total(units: NDArray[np.int64]) -> int:
    """The sum of per-person units (each >= 0, < 2**62) as a Python int: numpy's int64 sum would wrap past 2**63."""
    u = np.asarray(units, dtype=np.int64)
    return int((u >> 32).sum()) * 2**32 + int((u & 0xFFFFFFFF).sum())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


# ---------------------------------------------------------------------------- ledger
@dataclass(frozen=True)
class Reservation:
    """A reserved run: its id, the :class:`~metricdp.accounting.accountant.Grant` and, per person
    of the grant, the total (units) recorded once the reservation was added (None: not known)."""

    run_id: str
    grant: Grant
    totals: NDArray[np.int64] | None = None


class Ledger:
    """Per-person spend in a database; see the module docstring for the protocol.

    ``target`` is a SQLite file path (created on first use with ``create=True``) or a
    SQLAlchemy URL (``postgresql+psycopg://...``, needs ``key_file``). ``budget`` is every
    person's total eps: required for a new ledger, and must equal the stored one for an
    existing ledger (change it with :meth:`set_budget`).
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        *,
        budget: float | None = None,
        key_file: str | os.PathLike[str] | None = None,
        create: bool = True,
    ) -> None:
        text = os.fspath(target)
        self._is_url = "://" in text
        if self._is_url and text.startswith("sqlite://"):
            raise ValidationError("for a SQLite ledger give the file path, not a sqlite:// URL")
        if self._is_url:
            if key_file is None and create:
                raise ValidationError("a ledger given by URL needs the path of its key file")
            self.name = redact(text)
        elif not text:
            raise ValidationError("the ledger path is empty: give a database file or a URL")
        self._key_path = Path(key_file) if key_file is not None else None if self._is_url else key_path_for(text)
        self._key: bytes | None = None
        #: The files this object created (a new SQLite ledger and its key): :meth:`discard` may remove them.
        self._created: list[Path] = []
        fresh = False
        if not self._is_url:
            self.name = text
            fresh = not inspect_file(Path(text), create=create)
            if fresh:  # refused before the file is created: a new ledger needs a valid budget
                if budget is None:
                    raise ValidationError(f"ledger {self.name} is new: it needs a budget")
                to_units(budget, "budget", budget=True)
        if create and self._key_path is not None and os.path.lexists(self._key_path):
            load_key(self._key_path)  # a bad key file is refused before anything is written
        key_existed = self._key_path is not None and os.path.lexists(self._key_path)
        self._db: Backend
        if self._is_url:
            self._db = SQLAlchemy(text)
        else:
            existed = os.path.lexists(text)
            self._db = SQLite(Path(text), create=create)
            if fresh and not existed:
                self._created.append(Path(text))
        try:
            self._open(budget, create)
        except BaseException:
            self._db.close()
            remove(p for created in self._created for p in sqlite_files(created))  # a new file not set up: gone again
            raise
        if self._created and self._key_path is not None and not key_existed:
            self._created.append(self._key_path)

    def _open(self, budget: float | None, create: bool) -> None:
        with self._db.read() as tx:
            ensure_schema(tx, self._db.blob, self._db.keyed)
            old = [str(v) for (v,) in tx.q("SELECT v FROM meta WHERE k = 'version'")] == ["1"]
        if old:  # an older ledger: migrated once, under the write lock (two openers: the second finds it done)
            with self._db.write() as tx:
                migrate(tx)
        with self._db.write() if create else self._db.read() as tx:  # reading takes no write lock
            ensure_schema(tx, self._db.blob, self._db.keyed)
            meta = dict(tx.q("SELECT k, v FROM meta"))
            if meta.get("version") != SCHEMA_VERSION:
                raise ValidationError(f"ledger {self.name} has schema version {meta.get('version')!r}, "
                                      f"this metricdp reads {SCHEMA_VERSION}")
            stored = meta.get("budget")
            if stored is None:
                if not create:
                    raise ValidationError(f"ledger {self.name} does not exist")
                if budget is None:
                    raise ValidationError(f"ledger {self.name} is new: it needs a budget")
                stored = str(to_units(budget, "budget", budget=True))
                if self._key_path is None:
                    raise ValidationError("a ledger given by URL needs the path of its key file")
                key = load_key(self._key_path) if self._key_path.exists() else create_key(self._key_path)
                meta["key_check"] = fingerprint(key)
                tx.q("INSERT INTO meta (k, v) VALUES ('budget', :b), ('key_check', :c), ('created', :t)",
                     {"b": stored, "c": meta["key_check"], "t": _now()})
                self._key = key
            elif budget is not None and to_units(budget, "budget", budget=True) != int(stored):
                raise ValidationError(
                    f"ledger {self.name} has a budget of {float(from_units(int(stored))):g} per person, "
                    f"not {budget:g}; change it explicitly (Ledger.set_budget) if that is meant"
                )
            try:
                self._budget = int(stored)
            except ValueError:
                raise ValidationError(f"ledger {self.name} is corrupted: its budget {stored!r} is not a number; "
                                      "restore it from a backup") from None
            if "key_check" not in meta:
                raise ValidationError(f"ledger {self.name} is corrupted: it has no key fingerprint; restore it from "
                                      "a backup")
            self._key_check = meta["key_check"]
            _reports.check_sums(tx, self.name)

    # ------------------------------------------------------------------ basics
    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (the ledger file or server keeps everything)."""
        self._db.close()

    def discard(self) -> bool:
        """Remove a SQLite ledger this object created, if no run was ever reserved in it; close it.

        For a command that created a new ledger and then refused its run (over budget, a bad
        row): the refusal leaves no file behind. The check that the ledger holds no run and
        no person is made under the write lock, and the files are removed while it is held,
        so a run of another process cannot have been reserved in it; a process that opened
        the same new file before and reserves after the removal would write to a removed
        file, so a ledger is discarded only by the object that created it. Returns whether
        it was removed (a ledger opened, not created, is never removed).
        """
        if not self._created:
            self.close()
            return False
        db = self._created[0]
        try:
            with self._db.write() as tx:
                used = int(tx.q("SELECT COUNT(*) FROM runs")[0][0]) + int(tx.q("SELECT COUNT(*) FROM persons")[0][0])
                if not used:
                    remove((*sqlite_files(db)[1:], *self._created))
        finally:
            self.close()
        return not used

    @property
    def budget(self) -> float:
        """Every person's total budget (eps per :attr:`unit` of distance), as of the last access to the ledger."""
        return float(from_units(self._budget))

    def set_budget(self, budget: float) -> None:
        """Change every person's budget (persons already above a lower one can spend nothing more)."""
        units = to_units(budget, "budget", budget=True)
        with self._db.write() as tx:
            tx.q("UPDATE meta SET v = :b WHERE k = 'budget'", {"b": str(units)})
        self._budget = units

    def _keyed(self) -> bytes:
        if self._key is None:
            if self._key_path is None:
                raise ValidationError(f"ledger {self.name}: the path of its key file is needed to hash persons")
            self._key = load_key(self._key_path, self._key_check, self.name)
        return self._key

    def person_hashes(self, persons: ArrayLike) -> list[bytes]:
        """The stored hash of each person id (``HMAC-SHA256(key, "p", str(id))``, 16 bytes)."""
        blob = self._hash_blob(persons)
        return [blob[i : i + HASH_BYTES] for i in range(0, len(blob), HASH_BYTES)]

    def _hash_blob(self, persons: Any) -> bytes:
        """Every person's stored hash, concatenated (``HASH_BYTES`` each): one HMAC per person, no tuple.

        The messages ``"p" || len || id`` are framed from the ids' one buffer and offsets and
        hashed in one compiled loop (:func:`~._hmac.hmac_framed`; OpenSSL one by one for small
        batches or without numba): the same bytes as :func:`hmac.digest` of each message.
        """
        data, offs = id_bytes(persons)
        return hmac_framed(self._keyed(), b"p", data, offs, HASH_BYTES)

    # ------------------------------------------------------------------ spending
    def _totals(self, tx: Tx, hashes: bytes, units: NDArray[np.int64] | None = None) -> NDArray[np.int64]:
        """Each person's total; leaves ``demand`` holding (i, hash, ``units[i]``) for set-based updates."""
        tx.fill(hashes, HASH_BYTES, units)
        at, known = tx.pairs("SELECT d.i AS i, p.total AS v FROM demand d JOIN persons p ON p.ph = d.ph")
        totals = np.zeros(len(hashes) // HASH_BYTES, dtype=np.int64)
        totals[at] = known
        return totals

    def spent_units(self, persons: ArrayLike) -> NDArray[np.int64]:
        """Units reserved or committed for each of ``persons`` (0 for someone never seen)."""
        hashes = self._hash_blob(persons)
        with self._db.write() as tx:  # the temporary table needs a writable transaction
            self._budget = read_budget(tx)
            totals = self._totals(tx, hashes)
            tx.q("DELETE FROM demand")
        return totals

    def spent(self, persons: ArrayLike) -> NDArray[np.float64]:
        """Eps reserved or committed for each of ``persons``."""
        return from_units(self.spent_units(persons))

    def remaining(self, persons: ArrayLike) -> NDArray[np.float64]:
        """Eps each of ``persons`` has left."""
        spent = self.spent_units(persons)  # reads the current budget too
        return from_units(self._budget - spent)

    def reserve(
        self,
        persons: ArrayLike,
        eps: Any,
        counts: ArrayLike | None = None,
        *,
        policy: Policy = "refuse",
        run_id: str | None = None,
        mechanism: str = "",
        unit: str | None = None,
    ) -> Reservation:
        """Reserve a run's spend before publishing it (see the module docstring).

        ``persons``/``eps``/``counts`` as in :meth:`Accountant.spend
        <metricdp.accounting.accountant.Accountant.spend>`. Raises
        :class:`~metricdp.errors.BudgetExceededError` under ``refuse`` (nothing written);
        under ``drop`` the grant says how many values each person may release.

        ``unit`` is the distance unit ``eps`` is per (``"km"``, ``""`` for none): the first
        run that names one binds the ledger to it, and a run in another unit is refused (eps
        per m and eps per km summed into one total would let a person spend 1000 times the
        budget).

        ``persons`` may also be a pyarrow ``binary``/``string`` array of distinct ids with
        their ``counts`` (what :func:`~metricdp.streaming.persons.person_table` builds from an
        engine's count per person): the ids are hashed from the array's bytes, never turned
        into Python strings one by one.
        """
        if is_arrow(persons):  # an Arrow array of distinct ids (person_table's): hashed from its bytes
            uniq, requested, units = arrow_demand(persons, eps, counts)
            text = arrow_text(uniq)
            run, g, totals = self._reserve(uniq, requested, units, policy, run_id, mechanism, unit, text)
            order = np.argsort(text, kind="stable")  # a Grant's persons are sorted
            g = Grant(text[order], g.requested[order], g.granted[order], g.units[order], g.over)
            return Reservation(run, g, totals[order])
        uniq, requested, units = demand(persons, eps, counts)
        run, g, totals = self._reserve(uniq, requested, units, policy, run_id, mechanism, unit, uniq)
        return Reservation(run, g, totals)

    def _reserve(self, ids: Any, requested: NDArray[np.int64], units: int, policy: Policy, run_id: str | None,
                 mechanism: str, unit: str | None, persons: Any) -> tuple[str, Grant, NDArray[np.int64]]:
        """Reserve ``requested[i]`` values of person ``ids[i]`` (distinct): run id, grant and totals in ``ids``' order.

        The persons go to the database sorted by their hash, so the inserts into the
        ``persons`` and ``charges`` B-trees are appends in key order (several times faster
        than in random order for a million persons); ``persons`` names them in the
        :class:`Grant` (``ids`` itself, or their codes).
        """
        run = run_id if run_id is not None else uuid.uuid4().hex
        if not isinstance(run, str) or not _RUN_ID.match(run):
            raise ValidationError(f"run id must be 1-128 letters, digits or ._:-, got {run!r}")
        grid = np.frombuffer(self._hash_blob(ids), dtype=np.uint8).reshape(-1, HASH_BYTES)
        order = _hash_order(grid)
        hashes = grid[order].tobytes()
        with self._db.write() as tx:
            if tx.q("SELECT state FROM runs WHERE run = :r", {"r": run}):
                raise ValidationError(f"run {run} is already in ledger {self.name}")
            self._budget = read_budget(tx)  # another process may have changed it
            if unit is not None:
                self._bind_unit(tx, str(unit))
            sorted_totals = self._totals(tx, hashes, requested[order] * units)
            totals = np.empty_like(sorted_totals)
            totals[order] = sorted_totals
            g = grant(persons, requested, units, self._budget - totals, policy)
            cut = np.flatnonzero(g.granted != g.requested)  # only under drop; usually few
            if cut.size:
                where = np.empty_like(order)
                where[order] = np.arange(order.size)
                tx.many("UPDATE demand SET u = :u WHERE i = :i",
                        ({"i": int(where[i]), "u": int(g.units[i])} for i in cut))
            tx.q("INSERT INTO persons (ph, total) SELECT ph, u FROM demand WHERE u > 0 ORDER BY i "
                 "ON CONFLICT (ph) DO UPDATE SET total = persons.total + excluded.total")
            tx.q("INSERT INTO charges (run, ph, units) SELECT :r, ph, u FROM demand WHERE u > 0 ORDER BY i",
                 {"r": run})
            tx.q("DELETE FROM demand")
            self._insert_run(tx, run, mechanism, units, g)
        return run, g, totals + g.units

    def _bind_unit(self, tx: Tx, unit: str) -> None:
        """The ledger's distance unit: recorded by the first run that names one, then enforced."""
        rows = tx.q("SELECT v FROM meta WHERE k = 'unit'")
        if not rows:
            tx.q("INSERT INTO meta (k, v) VALUES ('unit', :u)", {"u": unit[:64]})
        elif str(rows[0][0]) != unit[:64]:
            def said(u: str) -> str:
                if u == "DP":  # a histogram's standard DP per person (streaming.accounted_prior.DP_UNIT)
                    return "as standard DP per person (any change of their rows)"
                return f"per {u}" if u else "per unit of a unitless distance"
            raise ValidationError(f"ledger {self.name} accounts eps {said(str(rows[0][0]))}; this release's eps is "
                                  f"{said(unit)}: their sum would mean nothing (use another ledger)")

    def _insert_run(self, tx: Tx, run: str, mechanism: str, units: int, g: Grant) -> None:
        hi, lo = divmod(_exact_total(g.units), RUN_UNITS_SPLIT)
        tx.q("INSERT INTO runs (run, state, mechanism, eps_units, n_rows, withheld, n_persons, over, units, units_hi, "
             "created) VALUES (:r, 'reserved', :m, :e, :n, :w, :p, :o, :u, :h, :t)",
             {"r": run, "m": str(mechanism)[:256], "e": units, "n": int(g.granted.sum()), "w": g.withheld,
              "p": int((g.granted > 0).sum()), "o": g.over, "u": lo, "h": hi, "t": _now()})

    def _state(self, tx: Tx, run_id: str) -> str:
        rows = tx.q("SELECT state FROM runs WHERE run = :r", {"r": run_id})
        if not rows:
            raise ValidationError(f"run {run_id} is not in ledger {self.name}")
        return str(rows[0][0])

    def commit(self, run_id: str) -> None:
        """Mark a reserved run published (idempotent); an aborted run cannot be committed."""
        with self._db.write() as tx:
            state = self._state(tx, run_id)
            if state == "aborted":
                raise ValidationError(f"run {run_id} was aborted: its reservation was given back")
            if state == "reserved":
                tx.q("UPDATE runs SET state = 'committed', finished = :t WHERE run = :r", {"r": run_id, "t": _now()})

    def abort(self, run_id: str) -> None:
        """Give a reserved run's spend back: only for a release that was NOT published."""
        with self._db.write() as tx:
            state = self._state(tx, run_id)
            if state == "committed":
                raise ValidationError(f"run {run_id} was committed (published): its spend cannot be given back")
            if state == "reserved":
                tx.q("UPDATE persons SET total = total - (SELECT c.units FROM charges c WHERE c.run = :r "
                     "AND c.ph = persons.ph) WHERE ph IN (SELECT ph FROM charges WHERE run = :r)", {"r": run_id})
                tx.q("DELETE FROM charges WHERE run = :r", {"r": run_id})
                tx.q("DELETE FROM memo WHERE run = :r", {"r": run_id})
                tx.q("UPDATE runs SET state = 'aborted', finished = :t WHERE run = :r", {"r": run_id, "t": _now()})

    @contextlib.contextmanager
    def reservation(
        self,
        persons: ArrayLike,
        eps: Any,
        counts: ArrayLike | None = None,
        *,
        policy: Policy = "refuse",
        run_id: str | None = None,
        mechanism: str = "",
    ) -> Iterator[_Publishing]:
        """Reserve; commit when the block ends; abort if it raises *before* ``publishing()``.

        ::

            with ledger.reservation(users, eps) as res:
                release = mechanism.release(...)   # an error here gives the budget back
                res.publishing()                   # from here on the budget stays spent
                publish(release)
        """
        r = self.reserve(persons, eps, counts, policy=policy, run_id=run_id, mechanism=mechanism)
        handle = _Publishing(r)
        try:
            yield handle
        except BaseException:
            if not handle.published:
                self.abort(r.run_id)
            raise
        self.commit(r.run_id)

    # ------------------------------------------------------------------ memo
    def _memo_keys(self, scope: str, persons: ArrayLike, values: ArrayLike) -> list[bytes]:
        """The memo key of each (person, value) of ``scope`` (:func:`~._memo.memo_keys`)."""
        key = self._keyed()
        data, offs = id_bytes(persons)
        return _memo.memo_keys(key, scope, data, offs, values)

    def memo_lookup(
        self, scope: str, persons: ArrayLike, values: ArrayLike, *, width: int | None = None
    ) -> tuple[NDArray[np.bool_], NDArray[Any]]:
        """For each (person, true value): whether a paid-for release is memoized, and the release.

        Releases are integer indices (``width=None``: an int64 vector, -1 where none) or
        points of ``width`` coordinates (a float64 array ``(n, width)``, NaN where none).
        ``scope`` names the mechanism (its file's hash, say): a release is reused only by
        the same mechanism. Only releases of committed runs count (module docstring).
        """
        return self._memo_lookup(self._memo_keys(scope, persons, values), width, scope)

    def _memo_lookup(self, mks: list[bytes], width: int | None, scope: str) -> tuple[NDArray[np.bool_], NDArray[Any]]:
        """:meth:`memo_lookup` by memo keys (a plan computes them once for the lookup and the store)."""
        with self._db.write() as tx:  # the temporary table needs a writable transaction
            rows = _memo.read(tx, mks, "WHERE r.state = 'committed'")
        return _memo.hits(self._keyed(), mks, rows, width, scope)

    def memo_store(
        self, run_id: str, scope: str, persons: ArrayLike, values: ArrayLike, releases: ArrayLike
    ) -> NDArray[Any]:
        """Memoize fresh releases of a reserved run; returns the releases to publish (first stored wins).

        ``releases``: one integer index per pair, or one point per row of a float array.
        """
        return self._memo_store(run_id, scope, self._memo_keys(scope, persons, values), releases)

    def _memo_store(self, run_id: str, scope: str, mks: list[bytes], releases: ArrayLike) -> NDArray[Any]:
        """:meth:`memo_store` by memo keys."""
        out = _memo.check_releases(releases, len(mks))
        with self._db.write() as tx:
            if self._state(tx, run_id) != "reserved":
                raise ValidationError(f"run {run_id} is not reserved: memoize before committing")
            taken = _memo.insert(tx, self._keyed(), run_id, mks, out)
        return _memo.merge_taken(self._keyed(), mks, out, taken, scope)

    # ------------------------------------------------------------------ reports
    def persons_table(self) -> dict[str, NDArray[Any]]:
        """Every person (hashed, hex): eps committed, reserved (not yet committed), total and remaining."""
        table, self._budget = _reports.persons_table(self._db)
        return table

    def runs_table(self) -> list[dict[str, Any]]:
        """Every run, oldest first: state, mechanism, eps, rows released and withheld, persons, eps spent."""
        return _reports.runs_table(self._db)

    @property
    def unit(self) -> str | None:
        """The distance unit of the ledger's eps (``"km"``; ``""``: a unitless distance; None: no run named one)."""
        return _reports.unit(self._db)

    def person_history(self, person: Any) -> dict[str, Any]:
        """One person's releases and totals, looked up by their keyed hash (the key is needed).

        Returns ``person`` (the id as text), ``hash`` (hex, as in :meth:`persons_table`),
        ``runs`` -- every run that charged the person, oldest first: run, state, mechanism,
        eps of one release, releases charged (the charge over that eps) and eps charged; the
        runs aborted gave their charge back and are not listed -- and ``committed``,
        ``reserved``, ``total`` and ``remaining`` (eps). A person never charged has no run,
        total 0 and the whole budget remaining. An id no release accepts (None, a float, a
        bool) is refused rather than reported as a person with nothing spent.
        """
        one = np.empty(1, dtype=object)
        one[0] = person.item() if isinstance(person, np.generic) else person
        text = str(canonical_ids(one, "person")[0])
        history, self._budget = _reports.person_history(self._db, text, self.person_hashes([text])[0])
        return history

    def check_integrity(self) -> None:
        """Raise if a person's total differs from the sum of their charges (a corrupted ledger)."""
        _reports.check_integrity(self._db, self.name)


class _Publishing:
    """Yielded by :meth:`Ledger.reservation`: the reservation and the point of no return."""

    def __init__(self, reservation: Reservation) -> None:
        self.reservation = reservation
        self.published = False

    @property
    def run_id(self) -> str:
        return self.reservation.run_id

    @property
    def grant(self) -> Grant:
        return self.reservation.grant

    def publishing(self) -> None:
        """From now on the release may be out: an error no longer gives the budget back."""
        self.published = True


def _hash_order(grid: NDArray[np.uint8]) -> NDArray[np.intp]:
    """The hashes (rows of ``grid``) in the databases' key order by their first 8 bytes.

    Only speed depends on it (inserts in key order); a tie on 64 random bits, which leaves
    two rows in input order, is harmless.
    """
    if grid.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    return np.argsort(np.ascontiguousarray(grid[:, :8]).view(">u8").ravel().astype(np.uint64), kind="stable")
