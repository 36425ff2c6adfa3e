"""What is at a ledger's paths, found out without changing anything there.

A ledger opens two paths: its database file and its key file. Before either is opened for
writing, each is looked at read-only: ``stat`` first, so a directory, a FIFO (reading it
would wait for a writer forever), a device or a socket is refused without being opened
(:func:`special_kind`); then, for the database, its header and schema
(:func:`inspect_file`), so that a file that is not a metricdp ledger -- another
application's SQLite database, a text file -- is refused and left exactly as it was.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterable
from pathlib import Path

from ..errors import ValidationError

__all__ = ["SQLITE_MAGIC", "inspect_file", "remove", "special_kind", "sqlite_files"]

#: The first bytes of every SQLite 3 database file.
SQLITE_MAGIC = b"SQLite format 3\x00"


def special_kind(mode: int) -> str | None:
    """What a file of ``st_mode`` is when it is not a regular file ("a directory", "a FIFO", ...), else None."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), None if stat.S_ISREG(mode) else "not a regular file")


def inspect_file(path: Path, *, create: bool) -> bool:
    """Whether ``path`` holds a metricdp ledger (True) or is free for a new one (False); else one error.

    Everything is decided before the database is opened for writing or a pragma is set, so a
    path that is not ours is left exactly as it was (bytes, journal mode, no ``-journal``
    beside it): ``stat`` first (a FIFO, a device, a socket or a directory is refused without
    being opened), then the header is read (a regular file, so the read cannot block), then
    the schema is read by a read-only connection (``mode=ro``). An existing empty file is
    free (it holds no database); a SQLite database of another application is refused.
    """
    if not str(path) or str(path) == ".":
        raise ValidationError("the ledger path is empty: give a database file")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if not create:
            raise ValidationError(f"ledger {path} does not exist") from None
        parent = path.resolve().parent
        if not parent.is_dir():
            raise ValidationError(f"ledger {path}: its directory {parent} does not exist") from None
        return False
    except OSError as exc:
        raise ValidationError(f"ledger {path}: {exc.strerror}") from None
    kind = special_kind(info.st_mode)
    if kind is not None:
        raise ValidationError(f"ledger {path} is {kind}, expected a database file")
    if info.st_size == 0:
        if not create:
            raise ValidationError(f"ledger {path} is empty (not a metricdp ledger)")
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise ValidationError(f"ledger {path}: {exc.strerror}") from None
    if head != SQLITE_MAGIC:
        raise ValidationError(f"ledger {path} is not a usable SQLite database (no SQLite header: not a metricdp "
                              "ledger); left untouched")
    try:
        ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=120.0)
        try:
            tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            columns = {r[1] for r in ro.execute("PRAGMA table_info(meta)")}
            keys = {r[0] for r in ro.execute("SELECT k FROM meta")} if {"k", "v"} <= columns else set()
        finally:
            ro.close()
    except sqlite3.Error as exc:
        raise ValidationError(f"ledger {path} is not a usable SQLite database: {exc}") from None
    if not tables:
        if not create:
            raise ValidationError(f"ledger {path} is empty (not a metricdp ledger)")
        return True
    # a ledger's meta rows make it ours: one with a table missing is a damaged ledger, refused as corrupted on open
    if not {"lock", "version"} <= keys:
        raise ValidationError(f"{path} is a SQLite database but not a metricdp ledger (another application's); "
                              "left untouched")
    return True


def sqlite_files(db: Path) -> tuple[Path, ...]:
    """A SQLite database and the files SQLite may keep beside it (``-wal``, ``-shm``, ``-journal``), in that order."""
    return (db, *(db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")))


def remove(paths: Iterable[Path]) -> None:
    """Remove each of ``paths`` that exists."""
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
