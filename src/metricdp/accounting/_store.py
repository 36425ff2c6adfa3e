"""Storage of a ledger: one small SQL dialect over stdlib sqlite3 and SQLAlchemy Core.

Both backends run the same SQL text with ``:name`` parameters (sqlite3 accepts the named
style, SQLAlchemy's ``text()`` requires it) and differ only in how a writer excludes the
others and in the binary column type:

* :class:`SQLite` -- a file (looked at read-only first, :func:`~._files.inspect_file`: a
  path that is not a ledger is refused untouched), WAL journal, ``synchronous=FULL`` (a
  committed reservation survives a power cut), ``BEGIN IMMEDIATE`` for writers (one at a
  time, the others wait up to two minutes), a 256 MiB page cache for runs that touch a
  million persons;
* :class:`SQLAlchemy` -- any URL; a writer locks the ``lock`` row of ``meta`` with
  ``SELECT ... FOR UPDATE`` (PostgreSQL, MySQL), serialising reservations the same way; the
  tables are created once per process under an advisory lock (PostgreSQL).

Database errors (locked past the timeout, a lost connection, a full disk) become one
:class:`~metricdp.errors.MetricDPError` after the transaction is rolled back. Parameter
lists are streamed in batches of :data:`BATCH` rows, so memory stays bounded.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from .._optional import MissingExtraError, install_hint
from ..errors import MetricDPError, ValidationError
from ._files import inspect_file

__all__ = ["BATCH", "SCHEMA_VERSION", "Backend", "SQLAlchemy", "SQLite", "Tx", "ensure_schema", "read_budget", "redact"]

SCHEMA_VERSION = "2"
#: Rows per executemany batch (bounds the parameter lists held in memory at once).
BATCH = 50_000


def batches(rows: Iterable[Mapping[str, Any]]) -> Iterator[list[Mapping[str, Any]]]:
    """``rows`` in lists of at most ``BATCH``: parameter lists stay bounded however many persons a run has."""
    it = iter(rows)
    while batch := list(itertools.islice(it, BATCH)):
        yield batch


class Tx(Protocol):
    """One transaction: ``q`` runs a statement (rows back for a query), ``many`` one per parameter set,
    ``fill`` loads the temporary ``demand`` table from packed columns."""

    def q(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]: ...
    def many(self, sql: str, rows: Iterable[Mapping[str, Any]]) -> None: ...
    def fill(self, keys: bytes, width: int, units: NDArray[np.int64] | None = None) -> None: ...
    def pairs(self, sql: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]: ...


def _pairs_from_rows(rows: list[tuple[Any, ...]]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    arr = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0].copy(), arr[:, 1].copy()


def _decimal_bytes(units: NDArray[np.int64]) -> tuple[bytes, int]:
    """Nonnegative int64s as zero-padded ASCII decimals of one width (that of the largest), concatenated."""
    u = np.asarray(units, dtype=np.int64)
    if u.size and int(u.min()) < 0:
        raise ValueError("demand units must be >= 0")
    digits = len(str(int(u.max()))) if u.size else 1
    out = np.empty((u.size, digits), dtype=np.uint8)
    rest = u.copy()
    for j in range(digits - 1, -1, -1):  # one pass per digit of the largest, not 19
        out[:, j] = rest % 10 + 48
        rest //= 10
    return out.tobytes(), digits


class Backend(Protocol):
    """A database: exclusive ``write`` transactions, plain ``read`` ones, and its binary column type."""

    blob: str
    #: Suffix of ``CREATE TABLE`` for the tables keyed by a hash (``" WITHOUT ROWID"`` on SQLite).
    keyed: str

    def write(self) -> contextlib.AbstractContextManager[Tx]: ...
    def read(self) -> contextlib.AbstractContextManager[Tx]: ...
    def close(self) -> None: ...


class SQLiteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def fill(self, keys: bytes, width: int, units: NDArray[np.int64] | None = None) -> None:
        """``demand`` := rows ``(i, keys[i*width:(i+1)*width], units[i])`` by ONE statement.

        The columns are bound as two blobs and cut by a recursive counter with ``substr``
        (O(1) on a blob), instead of one Python tuple and one bound statement per row: a
        million rows load several times faster than by ``executemany``.
        """
        n = len(keys) // width
        self.conn.execute("DELETE FROM demand")
        if n == 0:
            return
        u, digits = _decimal_bytes(units if units is not None else np.zeros(n, dtype=np.int64))
        self.conn.execute(
            "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < :n) "
            "INSERT INTO demand (i, ph, u) SELECT i, substr(:keys, i * :w + 1, :w), "
            "CAST(CAST(substr(:u, i * :d + 1, :d) AS TEXT) AS INTEGER) FROM k",
            {"n": n, "keys": keys, "w": width, "u": u, "d": digits})

    def q(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, dict(params or {})).fetchall()

    def many(self, sql: str, rows: Iterable[Mapping[str, Any]]) -> None:
        for batch in batches(rows):
            self.conn.executemany(sql, batch)

    def pairs(self, sql: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The two integer columns of ``sql`` (``SELECT i, v ...``, both >= 0) as arrays, by ONE string.

        SQLite writes every row as fixed-width decimals (10 + 19 digits) into one
        ``group_concat``, which numpy parses: a million rows come back without a million
        Python tuples. A value outside the widths (negative, or over 19 digits: never for
        the ledger's indices and totals) makes the string fail the digit check and the rows
        are read as tuples instead.
        """
        (text,), = self.conn.execute(f"SELECT group_concat(printf('%010d%019d', i, v), '') FROM ({sql})").fetchall()
        if not text:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
        if raw.size % 29 or bool((raw < 48).any() or (raw > 57).any()):
            return _pairs_from_rows(self.q(sql))
        digits = raw.reshape(-1, 29)
        at, val = np.zeros(digits.shape[0], dtype=np.int64), np.zeros(digits.shape[0], dtype=np.int64)
        for j in range(29):  # Horner, a column at a time (19 digits always fit an int64)
            acc = at if j < 10 else val
            acc *= 10
            acc += digits[:, j]
            acc -= 48
        return at, val


class SQLite:
    """stdlib sqlite3: WAL, ``synchronous=FULL``, writers serialised by ``BEGIN IMMEDIATE``.

    New ledgers keep ``persons``, ``charges`` and ``memo`` as ``WITHOUT ROWID`` tables: one
    B-tree keyed by the hash (not a rowid table plus an index of the key), so a reservation
    writes each person's row once instead of twice. Ledgers created before that keep their
    rowid tables: every statement is the same SQL on both layouts.
    """

    blob = "BLOB"
    keyed = " WITHOUT ROWID"

    def __init__(self, path: Path, *, create: bool) -> None:
        exists = inspect_file(path, create=create)
        self.path = path
        try:
            uri = f"{path.resolve().as_uri()}?mode={'rw' if exists else 'rwc'}"
            self.conn = sqlite3.connect(uri, uri=True, timeout=120.0, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("PRAGMA cache_size=-262144")  # up to 256 MiB of pages: runs touching 1M persons
            self.conn.execute("PRAGMA temp_store=MEMORY")
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise ValidationError(f"ledger {path} is not a usable SQLite database: {exc}") from None
        if tables and "meta" not in tables:
            self.conn.close()
            raise ValidationError(f"{path} is a SQLite database but not a metricdp ledger")
        if not tables and not create:
            self.conn.close()
            raise ValidationError(f"ledger {path} is empty (not a metricdp ledger)")

    @contextlib.contextmanager
    def _tx(self, begin: str) -> Iterator[Tx]:
        try:
            self.conn.execute(begin)
            try:
                yield SQLiteTx(self.conn)
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:  # locked past the timeout, disk full, read-only file: rolled back
            raise MetricDPError(f"ledger {self.path}: {exc}") from None

    def write(self) -> contextlib.AbstractContextManager[Tx]:
        return self._tx("BEGIN IMMEDIATE")

    def read(self) -> contextlib.AbstractContextManager[Tx]:
        return self._tx("BEGIN")

    def close(self) -> None:
        self.conn.close()


class SQLATx:
    def __init__(self, conn: Any, text: Any) -> None:
        self.conn, self.text = conn, text

    def fill(self, keys: bytes, width: int, units: NDArray[np.int64] | None = None) -> None:
        """``demand`` := rows ``(i, key i, units[i])``, by batched executemany (the driver pipelines them)."""
        n = len(keys) // width
        self.q("DELETE FROM demand")
        u = units.tolist() if units is not None else [0] * n
        self.many("INSERT INTO demand (i, ph, u) VALUES (:i, :ph, :u)",
                  ({"i": i, "ph": keys[i * width : (i + 1) * width], "u": u[i]} for i in range(n)))

    def q(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        result = self.conn.execute(self.text(sql), dict(params or {}))
        return [tuple(r) for r in result.fetchall()] if result.returns_rows else []

    def many(self, sql: str, rows: Iterable[Mapping[str, Any]]) -> None:
        for batch in batches(rows):
            self.conn.execute(self.text(sql), batch)

    def pairs(self, sql: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        return _pairs_from_rows(self.q(sql))


class SQLAlchemy:
    """SQLAlchemy Core: writers serialised by ``SELECT ... FOR UPDATE`` on the lock row of ``meta``."""

    def __init__(self, url: str) -> None:
        try:
            import sqlalchemy as sa
        except ImportError:
            raise MissingExtraError(f"a ledger URL needs SQLAlchemy: {install_hint('ledger-sql')}") from None
        try:
            self.engine = sa.create_engine(url, pool_pre_ping=True)
        except Exception as exc:  # a malformed URL or a missing driver
            raise ValidationError(f"ledger URL {redact(url)}: {exc}") from None
        self.text = sa.text
        self.name = redact(url)
        self.blob = "BYTEA" if self.engine.dialect.name == "postgresql" else "BLOB"
        self.keyed = ""
        self._errors = (sa.exc.OperationalError, sa.exc.InterfaceError)
        self._dbapi_error = sa.exc.DBAPIError
        self._ready = False

    @contextlib.contextmanager
    def _tx(self, lock: bool) -> Iterator[Tx]:
        try:
            cm = self.engine.begin()
            conn = cm.__enter__()
        except self._errors as exc:
            raise ValidationError(f"cannot connect to the ledger: {' '.join(str(exc.orig).split())}") from None
        tx = SQLATx(conn, self.text)
        try:
            if lock:
                if not self._ready:  # first write of this process: create the tables once, serialised
                    if self.engine.dialect.name == "postgresql":
                        tx.q("SELECT pg_advisory_xact_lock(7746313437)")
                    ensure_schema(tx, self.blob, self.keyed)
                    self._ready = True
                tx.q(f"CREATE TEMP TABLE IF NOT EXISTS demand (i BIGINT PRIMARY KEY, ph {self.blob} NOT NULL, "
                     "u BIGINT NOT NULL)")
                tx.q("SELECT v FROM meta WHERE k = 'lock' FOR UPDATE")
            yield tx
        except self._dbapi_error as exc:  # rolled back by the engine
            cm.__exit__(type(exc), exc, exc.__traceback__)
            raise MetricDPError(f"ledger {self.name}: {' '.join(str(exc.orig).split())}") from None
        except BaseException as exc:
            cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        try:
            cm.__exit__(None, None, None)
        except self._dbapi_error as exc:
            raise MetricDPError(f"ledger {self.name}: {' '.join(str(exc.orig).split())}") from None

    def write(self) -> contextlib.AbstractContextManager[Tx]:
        return self._tx(True)

    def read(self) -> contextlib.AbstractContextManager[Tx]:
        return self._tx(False)

    def close(self) -> None:
        self.engine.dispose()


def redact(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


#: A run's spend is ``units_hi * RUN_UNITS_SPLIT + units``: 1M persons at 10 eps each are 1e19 units, past
#: BIGINT (2**63 - 1), while each person's total stays below ``composition.MAX_UNITS`` (2**62).
RUN_UNITS_SPLIT = 2**62

_HALF = 2**32


def exact_sum(tx: Tx, table: str, column: str, where: str = "") -> int:
    """``SUM(column)`` over ``table`` exactly, whatever its size: SQLite's SUM of BIGINTs raises on overflow.

    Summed as high and low 32-bit halves (``x = (x / 2**32) * 2**32 + x % 2**32`` with truncating
    division on both backends): each half's sum stays below 2**63 for fewer than 2**31 rows.
    """
    hi, lo = tx.q(f"SELECT COALESCE(SUM({column} / {_HALF}), 0), COALESCE(SUM({column} % {_HALF}), 0) "
                  f"FROM {table} {where}")[0]
    return int(hi) * _HALF + int(lo)


def read_budget(tx: Tx) -> int:
    """Every person's budget (units), as stored in ``meta``."""
    return int(tx.q("SELECT v FROM meta WHERE k = 'budget'")[0][0])


def migrate(tx: Tx) -> None:
    """Schema 1 -> 2 (under the write lock): ``runs.units_hi``, a run's spend past BIGINT (:data:`RUN_UNITS_SPLIT`)."""
    rows = tx.q("SELECT v FROM meta WHERE k = 'version'")
    if rows and str(rows[0][0]) == "1":
        tx.q("ALTER TABLE runs ADD COLUMN units_hi BIGINT NOT NULL DEFAULT 0")
        tx.q("UPDATE meta SET v = :v WHERE k = 'version'", {"v": SCHEMA_VERSION})


def ensure_schema(tx: Tx, blob: str, keyed: str = "") -> None:
    """The ledger's tables (created where missing); ``keyed`` ends the hash-keyed tables' definitions."""
    tx.q("CREATE TABLE IF NOT EXISTS meta (k VARCHAR(64) PRIMARY KEY, v VARCHAR(256) NOT NULL)")
    tx.q(f"CREATE TABLE IF NOT EXISTS persons (ph {blob} PRIMARY KEY, total BIGINT NOT NULL){keyed}")
    tx.q("CREATE TABLE IF NOT EXISTS runs (run VARCHAR(128) PRIMARY KEY, state VARCHAR(16) NOT NULL, "
         "mechanism VARCHAR(256) NOT NULL, eps_units BIGINT NOT NULL, n_rows BIGINT NOT NULL, "
         "withheld BIGINT NOT NULL, n_persons BIGINT NOT NULL, over BIGINT NOT NULL, units BIGINT NOT NULL, "
         "created VARCHAR(32) NOT NULL, finished VARCHAR(32), units_hi BIGINT NOT NULL DEFAULT 0)")
    tx.q(f"CREATE TABLE IF NOT EXISTS charges (run VARCHAR(128) NOT NULL, ph {blob} NOT NULL, "
         f"units BIGINT NOT NULL, PRIMARY KEY (run, ph)){keyed}")
    tx.q(f"CREATE TABLE IF NOT EXISTS memo (mk {blob} PRIMARY KEY, rel {blob} NOT NULL, run VARCHAR(128) NOT NULL)"
         f"{keyed}")
    # i INTEGER PRIMARY KEY: SQLite's rowid itself (no second index); demand is per connection, in no file
    tx.q(f"CREATE TEMP TABLE IF NOT EXISTS demand (i INTEGER PRIMARY KEY, ph {blob} NOT NULL, u BIGINT NOT NULL)")
    if not tx.q("SELECT v FROM meta WHERE k = 'lock'"):
        tx.q("INSERT INTO meta (k, v) VALUES ('lock', '0'), ('version', :v)", {"v": SCHEMA_VERSION})
