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
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ValidationError
from ._hmac import hmac_framed, hmac_list, hmac_many
from ._store import (
    RUN_UNITS_SPLIT,
    SCHEMA_VERSION,
    Backend,
    SQLAlchemy,
    SQLite,
    Tx,
    ensure_schema,
    exact_sum,
    inspect_file,
    migrate,
    redact,
    special_kind,
)
from .accountant import Grant, Policy, canonical_ids, demand, grant
from .composition import from_units, to_units

__all__ = ["KEY_BYTES", "Ledger", "Reservation", "key_path_for"]

#: Length of a ledger key (bytes) and of a stored person hash (bytes).
KEY_BYTES = 32
HASH_BYTES = 16
_MEMO_KEY_BYTES = 32
_KEY_CHECK = b"metricdp-ledger-key-check"
_RUN_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def key_path_for(path: str | os.PathLike[str]) -> Path:
    """The key file beside a SQLite ledger: ``LEDGER.key``."""
    p = Path(path)
    if not p.name:
        raise ValidationError(f"the ledger path {os.fspath(path)!r} names no file: give a database file")
    return p.with_name(p.name + ".key")


def _exact_total(units: NDArray[np.int64]) -> int:
    """The sum of per-person units (each >= 0, < 2**62) as a Python int: numpy's int64 sum would wrap past 2**63."""
    u = np.asarray(units, dtype=np.int64)
    return int((u >> 32).sum()) * 2**32 + int((u & 0xFFFFFFFF).sum())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


# ---------------------------------------------------------------------------- keys
def _load_key(path: Path) -> bytes:
    """The key in ``path``: a private regular file of :data:`KEY_BYTES` bytes.

    ``stat`` first, and the file is opened with ``O_NONBLOCK`` and checked again by
    ``fstat`` (it may have been replaced in between): a FIFO, a device or a directory is
    refused, never read (reading a FIFO would wait for a writer forever).
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ValidationError(f"ledger key file {path} does not exist") from None
    except OSError as exc:
        raise ValidationError(f"ledger key file {path}: {exc.strerror}") from None
    kind = special_kind(info.st_mode)
    if kind is not None:
        raise ValidationError(f"ledger key file {path} is {kind}, expected a file of {KEY_BYTES} bytes")
    if info.st_mode & 0o077:
        raise ValidationError(
            f"ledger key file {path} is readable by others (mode {stat.filemode(info.st_mode)}); "
            "make it private (chmod 600)"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ValidationError(f"ledger key file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        if special_kind(os.fstat(fd).st_mode) is not None:
            raise ValidationError(f"ledger key file {path} is not a regular file")
        key = fh.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise ValidationError(f"ledger key file {path} must hold {KEY_BYTES} bytes, found {len(key)}")
    return key


def _create_key(path: Path) -> bytes:
    """A new random key at ``path`` (0600), published atomically; an existing key wins."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return _load_key(path)


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
            _load_key(self._key_path)  # a bad key file is refused before anything is written
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
            for created in self._created:  # a new file this call made and could not set up: gone again
                for p in (created, *(created.with_name(created.name + s) for s in ("-wal", "-shm", "-journal"))):
                    with contextlib.suppress(FileNotFoundError):
                        p.unlink()
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
                key = _load_key(self._key_path) if self._key_path.exists() else _create_key(self._key_path)
                meta["key_check"] = _fingerprint(key)
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
            self._check_sums(tx)

    def _check_sums(self, tx: Tx) -> None:
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
            raise ValidationError(f"ledger {self.name} is corrupted: the persons' totals, their charges and the "
                                  "runs' spend differ; restore it from a backup")

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
                    for p in (*(db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")), *self._created):
                        with contextlib.suppress(FileNotFoundError):
                            p.unlink()
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
            key = _load_key(self._key_path)
            if not hmac.compare_digest(_fingerprint(key), self._key_check):
                raise ValidationError(f"ledger key file {self._key_path} does not belong to ledger {self.name}")
            self._key = key
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
        data, offs = _id_bytes(persons)
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
            self._budget = self._read_budget(tx)
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
        if _is_arrow(persons):  # an Arrow array of distinct ids (person_table's): hashed from its bytes
            uniq, requested, units = _arrow_demand(persons, eps, counts)
            text = _arrow_text(uniq)
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
            self._budget = self._read_budget(tx)  # another process may have changed it
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

    @staticmethod
    def _read_budget(tx: Tx) -> int:
        return int(tx.q("SELECT v FROM meta WHERE k = 'budget'")[0][0])

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
        key = self._keyed()
        data, offs = _id_bytes(persons)
        vals = _value_texts(values)
        if len(vals) != offs.size - 1:
            raise ValidationError(f"values must be one per person ({offs.size - 1}), got {len(vals)}")
        s = b"m" + _field(_utf8(str(scope)))
        raw, o = data.tobytes(), (offs - offs[0]).tolist() if offs.size else [0]
        msgs = [s + _field(raw[o[i] : o[i + 1]]) + _field(_utf8(v)) for i, v in enumerate(vals)]
        return hmac_list(key, msgs)

    def _crypt(self, mk: bytes, data: bytes) -> bytes:
        """XOR with a keystream ``HMAC(key, "x", mk, block counter)``: encrypts and decrypts."""
        return self._crypt_many([mk], [data])[0]

    def _crypt_many(self, mks: list[bytes], blobs: list[bytes]) -> list[bytes]:
        """:meth:`_crypt` of every (memo key, blob): one HMAC per 32-byte block, the XOR by numpy over all blobs."""
        if not blobs:
            return []
        key = self._keyed()
        lengths = [len(x) for x in blobs]
        if max(lengths) <= 32 and all(len(mk) == _MEMO_KEY_BYTES for mk in mks):
            # one block each (every index and 2-D point): messages "x" || mk || 0 laid out by numpy
            msgs = np.zeros((len(mks), _MEMO_KEY_BYTES + 2), dtype=np.uint8)
            msgs[:, 0] = ord("x")
            msgs[:, 1:-1] = np.frombuffer(b"".join(mks), dtype=np.uint8).reshape(-1, _MEMO_KEY_BYTES)
            bounds = np.arange(len(mks) + 1, dtype=np.int64) * (_MEMO_KEY_BYTES + 2)
            blocks = np.frombuffer(hmac_many(key, msgs.ravel(), bounds), dtype=np.uint8).reshape(-1, 32)
            take = np.arange(32) < np.asarray(lengths)[:, None]
            stream = blocks[take].tobytes()
        else:
            parts = [b"x" + mk + bytes([c]) for mk, n in zip(mks, lengths, strict=True) for c in range(n // 32 + 1)]
            digests = iter(hmac_list(key, parts))
            stream = b"".join(b"".join(next(digests) for _ in range(n // 32 + 1))[:n] for n in lengths)
        out = (np.frombuffer(b"".join(blobs), dtype=np.uint8) ^ np.frombuffer(stream, dtype=np.uint8)).tobytes()
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        return [out[bounds[i] : bounds[i + 1]] for i in range(len(blobs))]

    def _read_memo(self, tx: Tx, mks: list[bytes], extra: str = "") -> list[tuple[Any, ...]]:
        tx.fill(b"".join(mks), _MEMO_KEY_BYTES)
        rows = tx.q("SELECT d.i, m.rel, r.state FROM demand d JOIN memo m ON m.mk = d.ph "
                    f"LEFT JOIN runs r ON r.run = m.run {extra}")
        tx.q("DELETE FROM demand")
        return rows

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
        found = np.zeros(len(mks), dtype=bool)
        rel: NDArray[Any] = (np.full(len(mks), -1, dtype=np.int64) if width is None
                             else np.full((len(mks), int(width)), np.nan))
        with self._db.write() as tx:
            rows = self._read_memo(tx, mks, "WHERE r.state = 'committed'")
        if rows:
            at = [int(r[0]) for r in rows]
            found[at] = True
            plain = self._crypt_many([mks[i] for i in at], [bytes(r[1]) for r in rows])
            rel[at] = _decode_many(plain, width, scope)
        return found, rel

    def memo_store(
        self, run_id: str, scope: str, persons: ArrayLike, values: ArrayLike, releases: ArrayLike
    ) -> NDArray[Any]:
        """Memoize fresh releases of a reserved run; returns the releases to publish (first stored wins).

        ``releases``: one integer index per pair, or one point per row of a float array.
        """
        return self._memo_store(run_id, scope, self._memo_keys(scope, persons, values), releases)

    def _memo_store(self, run_id: str, scope: str, mks: list[bytes], releases: ArrayLike) -> NDArray[Any]:
        """:meth:`memo_store` by memo keys."""
        rel = np.asarray(releases)
        ok = (rel.shape == (len(mks),) and rel.dtype.kind in "iu") or (
            rel.ndim == 2 and rel.shape[0] == len(mks) and 1 <= rel.shape[1] <= 255 and rel.dtype.kind == "f"
            and bool(np.isfinite(rel).all()))
        if not ok:
            raise ValidationError(f"releases must be one integer index or one finite point per pair ({len(mks)})")
        out = rel.astype(np.int64 if rel.ndim == 1 else np.float64).copy()
        width = None if rel.ndim == 1 else rel.shape[1]
        with self._db.write() as tx:
            if self._state(tx, run_id) != "reserved":
                raise ValidationError(f"run {run_id} is not reserved: memoize before committing")
            taken = {int(i): (bytes(b), st) for i, b, st in self._read_memo(tx, mks)}
            new = [i for i in range(len(mks)) if i not in taken]
            sealed = self._crypt_many([mks[i] for i in new], _encode_many(out[new]) if new else [])
            tx.many("INSERT INTO memo (mk, rel, run) VALUES (:mk, :rel, :r)",
                    ({"mk": mks[i], "rel": c, "r": run_id} for i, c in zip(new, sealed, strict=True)))
            adopt = ({"mk": mks[i], "r": run_id} for i, (_, st) in taken.items() if st != "committed")
            tx.many("UPDATE memo SET run = :r WHERE mk = :mk", adopt)
        if taken:
            at = list(taken)
            out[at] = _decode_many(self._crypt_many([mks[i] for i in at], [taken[i][0] for i in at]), width, scope)
        return out

    # ------------------------------------------------------------------ reports
    def persons_table(self) -> dict[str, NDArray[Any]]:
        """Every person (hashed, hex): eps committed, reserved (not yet committed), total and remaining."""
        with self._db.read() as tx:
            rows = tx.q("SELECT c.ph, SUM(CASE WHEN r.state = 'committed' THEN c.units ELSE 0 END), SUM(c.units) "
                        "FROM charges c JOIN runs r ON r.run = c.run GROUP BY c.ph ORDER BY c.ph")
            self._budget = self._read_budget(tx)
        ph = np.array([bytes(r[0]).hex() for r in rows], dtype=str)
        committed = np.array([int(r[1]) for r in rows], dtype=np.int64)
        total = np.array([int(r[2]) for r in rows], dtype=np.int64)
        return {"person": ph, "committed": from_units(committed), "reserved": from_units(total - committed),
                "total": from_units(total), "remaining": from_units(self._budget - total)}

    def runs_table(self) -> list[dict[str, Any]]:
        """Every run, oldest first: state, mechanism, eps, rows released and withheld, persons, eps spent."""
        with self._db.read() as tx:
            rows = tx.q("SELECT run, state, mechanism, eps_units, n_rows, withheld, n_persons, over, units, "
                        "created, finished, units_hi FROM runs ORDER BY created, run")
        return [{"run": r[0], "state": r[1], "mechanism": r[2], "eps": float(from_units(int(r[3]))),
                 "rows": int(r[4]), "withheld": int(r[5]), "persons": int(r[6]), "persons_over": int(r[7]),
                 "eps_spent": 0.0 if r[1] == "aborted" else float(from_units(int(r[11]) * RUN_UNITS_SPLIT
                                                                                 + int(r[8]))),
                 "created": r[9], "finished": r[10]} for r in rows]

    @property
    def unit(self) -> str | None:
        """The distance unit of the ledger's eps (``"km"``; ``""``: a unitless distance; None: no run named one)."""
        with self._db.read() as tx:
            rows = tx.q("SELECT v FROM meta WHERE k = 'unit'")
        return str(rows[0][0]) if rows else None

    def person_history(self, person: Any) -> dict[str, Any]:
        """One person's releases and totals, looked up by their keyed hash (the key is needed).

        Returns ``person`` (the id as text), ``hash`` (hex, as in :meth:`persons_table`),
        ``runs`` -- every run that charged the person, oldest first: run, state, mechanism,
        eps of one release, releases charged (the charge over that eps) and eps charged; the
        runs aborted gave their charge back and are not listed -- and ``committed``,
        ``reserved``, ``total`` and ``remaining`` (eps). A person never charged has no run,
        total 0 and the whole budget remaining.
        """
        ph = self.person_hashes([str(person)])[0]
        with self._db.read() as tx:
            rows = tx.q("SELECT r.run, r.state, r.mechanism, r.eps_units, c.units, r.created, r.finished "
                        "FROM charges c JOIN runs r ON r.run = c.run WHERE c.ph = :ph ORDER BY r.created, r.run",
                        {"ph": ph})
            self._budget = self._read_budget(tx)
        runs = [{"run": r[0], "state": r[1], "mechanism": r[2], "eps": float(from_units(int(r[3]))),
                 "releases": int(r[4]) // max(int(r[3]), 1), "eps_spent": float(from_units(int(r[4]))),
                 "created": r[5], "finished": r[6]} for r in rows]
        committed = sum(int(r[4]) for r in rows if r[1] == "committed")
        total = sum(int(r[4]) for r in rows)
        return {"person": str(person), "hash": ph.hex(), "runs": runs,
                "committed": float(from_units(committed)), "reserved": float(from_units(total - committed)),
                "total": float(from_units(total)), "remaining": float(from_units(self._budget - total))}

    def check_integrity(self) -> None:
        """Raise if a person's total differs from the sum of their charges (a corrupted ledger)."""
        with self._db.read() as tx:
            bad = tx.q("SELECT COUNT(*) FROM persons p LEFT JOIN (SELECT ph, SUM(units) AS s FROM charges "
                       "GROUP BY ph) c ON c.ph = p.ph WHERE p.total <> COALESCE(c.s, 0)")
        if int(bad[0][0]):
            raise ValidationError(f"ledger {self.name}: {int(bad[0][0])} persons' totals differ from their charges")


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


def _utf8(text: str) -> bytes:
    """UTF-8, lone surrogates (undecodable bytes read with ``surrogateescape``) included."""
    return text.encode("utf-8", "surrogatepass")


def _value_texts(values: ArrayLike) -> list[str]:
    """One text per true value: labels as they are, numbers by ``repr`` (exact), points joined by commas."""
    arr = np.asarray(values)
    if arr.ndim not in (1, 2):
        raise ValidationError(f"values must be one label or one point per person, got shape {arr.shape}")
    if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        raise ValidationError("values must be finite")
    cells = arr.tolist() if arr.dtype.kind in "fciub" else arr.astype(str).tolist()
    if arr.ndim == 1:
        return [c if isinstance(c, str) else repr(c) for c in cells]
    return [",".join(c if isinstance(c, str) else repr(c) for c in row) for row in cells]


def _fingerprint(key: bytes) -> str:
    return hmac.digest(key, _KEY_CHECK, "sha256").hex()[:32] if key else ""


def _encode(release: NDArray[Any]) -> bytes:
    """A release as bytes: ``i`` + int64, or ``f`` + width + float64s (big-endian)."""
    if release.ndim == 0:
        return b"i" + int(release).to_bytes(8, "big", signed=True)
    return b"f" + bytes([release.size]) + release.astype(">f8").tobytes()


def _encode_many(releases: NDArray[Any]) -> list[bytes]:
    """:func:`_encode` of every release (row), by numpy: the same bytes."""
    if releases.ndim == 1:
        body = np.empty((releases.size, 9), dtype=np.uint8)
        body[:, 0] = ord("i")
        body[:, 1:] = releases.astype(">i8").view(np.uint8).reshape(-1, 8)
    else:
        k = releases.shape[1]
        body = np.empty((releases.shape[0], 2 + 8 * k), dtype=np.uint8)
        body[:, 0], body[:, 1] = ord("f"), k
        body[:, 2:] = np.ascontiguousarray(releases.astype(">f8")).view(np.uint8).reshape(-1, 8 * k)
    raw, w = body.tobytes(), body.shape[1]
    return [raw[i : i + w] for i in range(0, len(raw), w)]


def _decode_many(blobs: list[bytes], width: int | None, scope: str) -> NDArray[Any]:
    """:func:`_decode` of every blob (all of one kind, else refused like one bad blob)."""
    want = 9 if width is None else 2 + 8 * width
    if any(len(b) != want for b in blobs):
        _decode(next(b for b in blobs if len(b) != want), width, scope)  # raises
    body = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), want)
    if width is None:
        if (body[:, 0] != ord("i")).any():
            raise ValidationError(f"memoized releases of scope {scope!r} are not indices")
        return body[:, 1:].copy().view(">i8").reshape(-1).astype(np.int64)
    if (body[:, 0] != ord("f")).any() or (body[:, 1] != width).any():
        raise ValidationError(f"memoized releases of scope {scope!r} are not points of width {width}")
    return body[:, 2:].copy().view(">f8").reshape(-1, width).astype(np.float64)


def _decode(data: bytes, width: int | None, scope: str) -> Any:
    if width is None and data[:1] == b"i" and len(data) == 9:
        return int.from_bytes(data[1:], "big", signed=True)
    if width is not None and data[:1] == b"f" and data[1] == width and len(data) == 2 + 8 * width:
        return np.frombuffer(data[2:], dtype=">f8").astype(np.float64)
    raise ValidationError(f"memoized releases of scope {scope!r} are not {'indices' if width is None else 'points'}"
                          f"{'' if width is None else f' of width {width}'}")


def _is_arrow(values: Any) -> bool:
    """A pyarrow Array or ChunkedArray (without importing pyarrow)."""
    return type(values).__module__.startswith("pyarrow")


def _arrow_binary(values: Any) -> Any:
    """An Arrow array of ids as one ``large_binary`` array (chunks combined)."""
    import pyarrow as pa

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if not (pa.types.is_binary(arr.type) or pa.types.is_string(arr.type) or pa.types.is_large_binary(arr.type)
            or pa.types.is_large_string(arr.type)):
        raise ValidationError(f"persons given as an Arrow array must be binary or text, got {arr.type}")
    if arr.null_count:
        raise ValidationError("persons must not be null")
    return arr.cast(pa.large_binary())


def _arrow_text(values: Any) -> NDArray[Any]:
    import pyarrow as pa

    arr = _arrow_binary(values)
    return np.asarray(arr.cast(pa.large_string()).to_numpy(zero_copy_only=False), dtype=str) if len(arr) else (
        np.zeros(0, dtype=str))


def _arrow_demand(persons: Any, eps: Any, counts: ArrayLike | None) -> tuple[Any, NDArray[np.int64], int]:
    """:func:`~.accountant.demand` for an Arrow array of distinct ids with their counts."""
    import pyarrow.compute as pc

    arr = _arrow_binary(persons)
    units = to_units(eps)
    c = np.asarray(counts) if counts is not None else None
    if c is None or c.shape != (len(arr),) or (c.size and (c.dtype.kind not in "iu" or int(c.min()) < 0)):
        raise ValidationError(f"persons given as an Arrow array need counts, one integer >= 0 per person ({len(arr)})")
    if len(pc.unique(arr)) != len(arr):
        raise ValidationError("persons must be distinct when counts are given")
    return arr, c.astype(np.int64), units


def _id_bytes(persons: Any) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """Every id's UTF-8 bytes (``str(id)`` for integers) as one buffer and offsets into it."""
    if _is_arrow(persons):
        arr = _arrow_binary(persons)
        bufs = arr.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
        return data, offs
    raw = [_utf8(p) for p in canonical_ids(persons).astype(str).tolist()]
    lengths = np.fromiter((len(x) for x in raw), dtype=np.int64, count=len(raw))
    offs = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offs[1:])
    return np.frombuffer(b"".join(raw), dtype=np.uint8), offs


def _hash_order(grid: NDArray[np.uint8]) -> NDArray[np.intp]:
    """The hashes (rows of ``grid``) in the databases' key order by their first 8 bytes.

    Only speed depends on it (inserts in key order); a tie on 64 random bits, which leaves
    two rows in input order, is harmless.
    """
    if grid.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    return np.argsort(np.ascontiguousarray(grid[:, :8]).view(">u8").ravel().astype(np.uint64), kind="stable")
