"""A ledger's key: 32 random bytes in a private file, found, read, created and recognised.

Every hash a ledger stores is keyed by it (:mod:`.ledger`, "What is stored"). Beside a
SQLite ledger the key is ``LEDGER.key`` (:func:`key_path_for`); a URL ledger is given its
path. The rules, in one place:

* **read** (:func:`load_key`): a regular file of exactly :data:`KEY_BYTES` bytes, readable
  by its owner only (a key others may read is refused: with it the stored hashes can be
  searched for a known person). ``stat`` first, and the file is opened with ``O_NONBLOCK``
  and checked again by ``fstat`` (it may have been replaced in between): a FIFO, a device or
  a directory is refused, never read (reading a FIFO would wait for a writer forever);
* **created** (:func:`create_key`) with mode 0600 under a temporary name and published by a
  hard link: two processes creating the key at once agree on one (the first link wins and
  both read it back);
* **recognised** by its :func:`fingerprint`, stored in the ledger: a wrong or regenerated
  key is refused rather than silently starting everyone from zero.
"""

from __future__ import annotations

import hmac
import os
import stat
import uuid
from pathlib import Path

from ..errors import ValidationError
from ._files import special_kind

__all__ = ["KEY_BYTES", "create_key", "fingerprint", "key_path_for", "load_key"]

#: Length of a ledger key (bytes).
KEY_BYTES = 32
_KEY_CHECK = b"metricdp-ledger-key-check"


def key_path_for(path: str | os.PathLike[str]) -> Path:
    """The key file beside a SQLite ledger: ``LEDGER.key``."""
    p = Path(path)
    if not p.name:
        raise ValidationError(f"the ledger path {os.fspath(path)!r} names no file: give a database file")
    return p.with_name(p.name + ".key")


def load_key(path: Path, key_check: str | None = None, ledger: str = "") -> bytes:
    """The key in ``path``: a private regular file of :data:`KEY_BYTES` bytes (module docstring).

    With ``key_check`` (the :func:`fingerprint` stored in ``ledger``), a key of another
    fingerprint is refused.
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
    if key_check is not None and not hmac.compare_digest(fingerprint(key), key_check):
        raise ValidationError(f"ledger key file {path} does not belong to ledger {ledger}")
    return key


def create_key(path: Path) -> bytes:
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
    return load_key(path)


def fingerprint(key: bytes) -> str:
    """What the ledger stores to recognise its key: ``HMAC-SHA256(key, "metricdp-ledger-key-check")``, 128 bits hex."""
    return hmac.digest(key, _KEY_CHECK, "sha256").hex()[:32] if key else ""
