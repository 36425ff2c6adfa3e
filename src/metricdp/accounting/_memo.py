"""The ledger's memo of releases: its keys, its cipher, its encoding and its table.

Why a memoized release may be repeated, and which one is kept, is the ledger's protocol
(:mod:`.ledger`, "Memoized releases"); this module is how a release is stored so that the
``memo`` table can be neither searched for a known person and value nor read without the
ledger's key:

* **memo key** (:func:`memo_keys`): ``HMAC-SHA256(key, "m" || field(scope) || field(id) ||
  field(value))``, 32 bytes, each field its length (8 bytes, big-endian) then its UTF-8
  bytes, so no two (scope, person, value) triples frame to one message. A value is its
  text (:func:`value_texts`): a label as it is, a number by ``repr`` (exact), a point's
  coordinates joined by commas;
* **encoding** (:func:`encode`): an index as ``b"i"`` + int64, a point as ``b"f"`` + its
  width (one byte) + float64s, big-endian;
* **cipher** (:func:`crypt_many`): the encoding XORed with the keystream ``HMAC(key, "x" ||
  memo key || block counter)``, 32 bytes a block. The memo key differs for every pair, so no
  two entries share a keystream; XOR with the same stream decrypts.

The functions taking a transaction (:func:`read`, :func:`insert`) run inside one the
ledger opened; decoding (:func:`hits`, :func:`merge_taken`) happens after it is closed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ValidationError
from ._hmac import hmac_list, hmac_many
from ._ids import utf8
from ._store import Tx

__all__ = ["MEMO_KEY_BYTES", "check_releases", "crypt_many", "decode", "decode_many", "encode", "encode_many",
           "hits", "insert", "memo_keys", "merge_taken", "read", "value_texts"]

#: Length of a memo key (bytes): a whole HMAC-SHA256.
MEMO_KEY_BYTES = 32


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def value_texts(values: ArrayLike) -> list[str]:
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


def memo_keys(key: bytes, scope: str, data: NDArray[np.uint8], offs: NDArray[np.int64],
              values: ArrayLike) -> list[bytes]:
    """The memo key of each (person, value): persons as :func:`~._ids.id_bytes` lays them out."""
    vals = value_texts(values)
    if len(vals) != offs.size - 1:
        raise ValidationError(f"values must be one per person ({offs.size - 1}), got {len(vals)}")
    s = b"m" + _field(utf8(str(scope)))
    raw, o = data.tobytes(), (offs - offs[0]).tolist() if offs.size else [0]
    msgs = [s + _field(raw[o[i] : o[i + 1]]) + _field(utf8(v)) for i, v in enumerate(vals)]
    return hmac_list(key, msgs)


def crypt_many(key: bytes, mks: list[bytes], blobs: list[bytes]) -> list[bytes]:
    """Each blob XORed with its memo key's keystream (encrypts and decrypts).

    One HMAC per 32-byte block, the XOR by numpy over all blobs at once.
    """
    if not blobs:
        return []
    lengths = [len(x) for x in blobs]
    if max(lengths) <= 32 and all(len(mk) == MEMO_KEY_BYTES for mk in mks):
        # one block each (every index and 2-D point): messages "x" || mk || 0 laid out by numpy
        msgs = np.zeros((len(mks), MEMO_KEY_BYTES + 2), dtype=np.uint8)
        msgs[:, 0] = ord("x")
        msgs[:, 1:-1] = np.frombuffer(b"".join(mks), dtype=np.uint8).reshape(-1, MEMO_KEY_BYTES)
        bounds = np.arange(len(mks) + 1, dtype=np.int64) * (MEMO_KEY_BYTES + 2)
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


def encode(release: NDArray[Any]) -> bytes:
    """A release as bytes: ``i`` + int64, or ``f`` + width + float64s (big-endian)."""
    if release.ndim == 0:
        return b"i" + int(release).to_bytes(8, "big", signed=True)
    return b"f" + bytes([release.size]) + release.astype(">f8").tobytes()


def encode_many(releases: NDArray[Any]) -> list[bytes]:
    """:func:`encode` of every release (row), by numpy: the same bytes."""
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


def decode_many(blobs: list[bytes], width: int | None, scope: str) -> NDArray[Any]:
    """:func:`decode` of every blob (all of one kind, else refused like one bad blob)."""
    want = 9 if width is None else 2 + 8 * width
    if any(len(b) != want for b in blobs):
        decode(next(b for b in blobs if len(b) != want), width, scope)  # raises
    body = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), want)
    if width is None:
        if (body[:, 0] != ord("i")).any():
            raise ValidationError(f"memoized releases of scope {scope!r} are not indices")
        return body[:, 1:].copy().view(">i8").reshape(-1).astype(np.int64)
    if (body[:, 0] != ord("f")).any() or (body[:, 1] != width).any():
        raise ValidationError(f"memoized releases of scope {scope!r} are not points of width {width}")
    return body[:, 2:].copy().view(">f8").reshape(-1, width).astype(np.float64)


def decode(data: bytes, width: int | None, scope: str) -> Any:
    """One release back from :func:`encode`'s bytes: an index (``width=None``) or a point of ``width``."""
    if width is None and data[:1] == b"i" and len(data) == 9:
        return int.from_bytes(data[1:], "big", signed=True)
    if width is not None and data[:1] == b"f" and data[1] == width and len(data) == 2 + 8 * width:
        return np.frombuffer(data[2:], dtype=">f8").astype(np.float64)
    raise ValidationError(f"memoized releases of scope {scope!r} are not {'indices' if width is None else 'points'}"
                          f"{'' if width is None else f' of width {width}'}")


def check_releases(releases: ArrayLike, n: int) -> NDArray[Any]:
    """``releases`` to store for ``n`` pairs, as a copy: one int64 index each, or one finite float64 point each."""
    rel = np.asarray(releases)
    ok = (rel.shape == (n,) and rel.dtype.kind in "iu") or (
        rel.ndim == 2 and rel.shape[0] == n and 1 <= rel.shape[1] <= 255 and rel.dtype.kind == "f"
        and bool(np.isfinite(rel).all()))
    if not ok:
        raise ValidationError(f"releases must be one integer index or one finite point per pair ({n})")
    return rel.astype(np.int64 if rel.ndim == 1 else np.float64).copy()


def read(tx: Tx, mks: list[bytes], extra: str = "") -> list[tuple[Any, ...]]:
    """The memo entries of ``mks``: (position in ``mks``, sealed release, state of the storing run) per entry."""
    tx.fill(b"".join(mks), MEMO_KEY_BYTES)
    rows = tx.q("SELECT d.i, m.rel, r.state FROM demand d JOIN memo m ON m.mk = d.ph "
                f"LEFT JOIN runs r ON r.run = m.run {extra}")
    tx.q("DELETE FROM demand")
    return rows


def hits(key: bytes, mks: list[bytes], rows: list[tuple[Any, ...]], width: int | None,
         scope: str) -> tuple[NDArray[np.bool_], NDArray[Any]]:
    """The entries :func:`read` found, per memo key: found, and the release (-1 or NaN where none)."""
    found = np.zeros(len(mks), dtype=bool)
    rel: NDArray[Any] = (np.full(len(mks), -1, dtype=np.int64) if width is None
                         else np.full((len(mks), int(width)), np.nan))
    if rows:
        at = [int(r[0]) for r in rows]
        found[at] = True
        plain = crypt_many(key, [mks[i] for i in at], [bytes(r[1]) for r in rows])
        rel[at] = decode_many(plain, width, scope)
    return found, rel


def insert(tx: Tx, key: bytes, run_id: str, mks: list[bytes], releases: NDArray[Any]) -> dict[int, bytes]:
    """Store the releases of the pairs not memoized yet under ``run_id``; take over the entries of runs not committed.

    Returns the sealed stored release of each pair already memoized, by its position in ``mks``.
    """
    taken = {int(i): (bytes(b), st) for i, b, st in read(tx, mks)}
    new = [i for i in range(len(mks)) if i not in taken]
    sealed = crypt_many(key, [mks[i] for i in new], encode_many(releases[new]) if new else [])
    tx.many("INSERT INTO memo (mk, rel, run) VALUES (:mk, :rel, :r)",
            ({"mk": mks[i], "rel": c, "r": run_id} for i, c in zip(new, sealed, strict=True)))
    adopt = ({"mk": mks[i], "r": run_id} for i, (_, st) in taken.items() if st != "committed")
    tx.many("UPDATE memo SET run = :r WHERE mk = :mk", adopt)
    return {i: blob for i, (blob, _) in taken.items()}


def merge_taken(key: bytes, mks: list[bytes], releases: NDArray[Any], taken: dict[int, bytes],
                scope: str) -> NDArray[Any]:
    """``releases`` with the stored release of each pair :func:`insert` found memoized (first stored wins)."""
    if taken:
        at = list(taken)
        width = None if releases.ndim == 1 else releases.shape[1]
        releases[at] = decode_many(crypt_many(key, [mks[i] for i in at], [taken[i] for i in at]), width, scope)
    return releases
