"""Structures built from a vocabulary, kept on disk so that the next run reads them.

CusText's output sets and weights and 1-Diffractor's lists are fixed public functions of
the vocabulary and their parameters, and take minutes on a large vocabulary. A caller that
names a directory (``cache_dir``, e.g. the one holding the embeddings) gets them back from
one ``.npz`` file per entry there (:func:`cached`).

An entry is named by the SHA-256 of its key (the kind, the vocabulary's
:func:`vocabulary_fingerprint`, the parameters). Its file holds the arrays, the key itself
and a SHA-256 of key and arrays (name, dtype, shape, bytes), and is trusted only when all of
these hold: it is a zip of uncompressed members with exactly the expected names (so reading
it cannot inflate), its key is the key asked for, its checksum matches, and the caller's
``check`` accepts the arrays. Anything else (a truncated file, another vocabulary's entry, a
changed byte) is rebuilt and replaced. The checksum detects accidents; ``check`` is what a
forged file with a recomputed checksum meets: each caller checks the properties its privacy
proof needs, so a file can change the utility of a release, never its guarantee. Entries are
written by :func:`metricdp._atomic.atomic_write` (whole or not at all, even under ``kill -9``);
two processes writing one entry write the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
import zipfile
from collections.abc import Callable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._atomic import atomic_write
from ..errors import ValidationError
from ..pointspace import PointSpace

__all__ = ["cache_dir_for", "cached", "vocabulary_fingerprint"]

_FORMAT = 1  # version of the file layout and of the fingerprint (part of every key)
_KEY, _SUM = "key", "checksum"  # the two members beside the arrays

_FINGERPRINTS: weakref.WeakKeyDictionary[PointSpace, str] = weakref.WeakKeyDictionary()

Arrays = dict[str, NDArray]


def cache_dir_for(embeddings: str | PathLike[str] | None) -> tuple[Path | None, str | None]:
    """The directory that keeps the structures built from the vocabulary of ``embeddings``: beside
    the file (``<file>.metricdp-cache``), or, for the packaged GloVe (``None`` or ``"glove"``), in
    the user's cache (``$XDG_CACHE_HOME/metricdp``, ``~/.cache/metricdp``); made when missing.

    Returns ``(directory, None)``, or ``(None, why)`` when it cannot be made or written (a
    read-only place): the caller builds without a cache and says why.
    """
    if embeddings is None or str(embeddings) == "glove":
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = Path(base) / "metricdp"
    else:
        file = Path(embeddings)
        where = file.with_name(file.name + ".metricdp-cache")
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as ex:
        return None, f"{where}: {ex.strerror or ex}"
    if not where.is_dir() or not os.access(where, os.W_OK):
        return None, f"{where}: not a writable directory"
    return where, None


def vocabulary_fingerprint(space: PointSpace) -> str:
    """SHA-256 (hex) of everything the structures read: metric, labels, centred vectors and centre."""
    if space in _FINGERPRINTS:
        return _FINGERPRINTS[space]
    h = hashlib.sha256(f"metricdp vocabulary {_FORMAT} {space.metric} {space.n} {space.dim}\n".encode())
    for label in space.labels:
        raw = label.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "little") + raw)
    h.update(np.ascontiguousarray(space.vectors, dtype="<f8").tobytes())
    h.update(np.ascontiguousarray(space.centre, dtype="<f8").tobytes())
    _FINGERPRINTS[space] = h.hexdigest()
    return _FINGERPRINTS[space]


def _checksum(key_bytes: bytes, arrays: Mapping[str, NDArray]) -> str:
    h = hashlib.sha256(key_bytes)
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\n{name} {a.dtype.str} {a.shape}\n".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _read(path: Path, key_bytes: bytes, max_bytes: int) -> Arrays | None:
    """The arrays of ``path`` when its layout, key and checksum hold, else None (absent too)."""
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            files = {i.filename for i in infos}
            if (not {f"{_KEY}.npy", f"{_SUM}.npy"} <= files
                    or any(not f.endswith(".npy") for f in files)
                    or any(i.compress_type != zipfile.ZIP_STORED for i in infos)
                    or sum(i.file_size for i in infos) > max_bytes + 4096 * len(infos) + len(key_bytes)):
                return None
        names = sorted(f[: -len(".npy")] for f in files)
        with np.load(path, allow_pickle=False) as f:
            if f[_KEY].tobytes() != key_bytes:
                return None
            arrays = {m: f[m] for m in names if m not in (_KEY, _SUM)}
            checksum = f[_SUM].tobytes().decode("ascii", "replace")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError):
        return None
    return arrays if checksum == _checksum(key_bytes, arrays) else None


def cached(
    directory: str | PathLike[str] | None,
    kind: str,
    space: PointSpace,
    key: Mapping[str, object],
    build: Callable[[], Arrays],
    check: Callable[[Arrays], None],
    max_bytes: int,
) -> Arrays:
    """The arrays of entry (``kind``, ``key``) from ``directory``, or ``build()`` stored there.

    Parameters
    ----------
    directory : path or None
        An existing directory; None builds without a cache.
    kind : str
        The structure (``custext-sets``); the start of the file name.
    space : PointSpace
        The vocabulary (its :func:`vocabulary_fingerprint` is part of the key).
    key : mapping
        JSON-serialisable parameters that, with the vocabulary, determine the arrays.
    build : callable
        Computes the arrays (a dict of name to array; the names are the entry's members).
    check : callable
        Raises :class:`~metricdp.errors.ValidationError` when the arrays read are not
        acceptable (names, shapes, dtypes, and what the caller's proof needs); a refused file
        is rebuilt.
    max_bytes : int
        The most bytes the arrays may take: a larger file is not read.

    Raises
    ------
    ValidationError
        ``directory`` is not an existing directory, or the entry cannot be written there.
    """
    if directory is None:
        return build()
    folder = Path(directory)
    if not folder.is_dir():
        raise ValidationError(f"cache directory {str(folder)!r} does not exist or is not a directory")
    entry = {"format": _FORMAT, "kind": kind, "vocabulary": vocabulary_fingerprint(space), **key}
    key_bytes = json.dumps(entry, sort_keys=True).encode()
    path = folder / f"{kind}-{hashlib.sha256(key_bytes).hexdigest()[:32]}.npz"
    found = _read(path, key_bytes, max_bytes)
    if found is not None:
        try:
            check(found)
            return found
        except ValidationError:
            pass  # refused: rebuilt and replaced below
    arrays = build()
    body: dict[str, Any] = {**arrays, _KEY: np.frombuffer(key_bytes, dtype=np.uint8),
            _SUM: np.frombuffer(_checksum(key_bytes, arrays).encode("ascii"), dtype=np.uint8)}
    try:
        with atomic_write(path) as fh:
            np.savez(fh, **body)
    except OSError as ex:
        raise ValidationError(f"cannot write the cache file {str(path)!r}: {ex.strerror or ex}") from None
    return arrays
