"""HMAC-SHA256 of many short messages at once: a compiled batch kernel, OpenSSL one by one as the fallback.

The ledger hashes every person of a run (``HMAC-SHA256(key, "p" || len || id)``), every memoized
(person, value) pair and every keystream block of the memo cipher. Through OpenSSL that is one
Python-level call per message (about 3.5 us each, most of it call overhead for a 25-byte
message); :func:`hmac_many` computes them all in one compiled loop when numba (the ``fast``
extra) is installed and the batch is large enough to repay loading it.

**Why the kernel's output is HMAC-SHA256 (RFC 2104, FIPS 180-4).** ``HMAC(K, m) = H((K0 ^ opad)
|| H((K0 ^ ipad) || m))`` with ``K0`` the key zero-padded to 64 bytes (a longer key is first
replaced by ``H(K)``). SHA-256 processes its input in 64-byte blocks from the fixed initial
state, so the state after the one block ``K0 ^ ipad`` (the inner midstate) and after
``K0 ^ opad`` (the outer midstate) are the same for every message and are computed once. Per
message the kernel continues from the inner midstate over ``m`` followed by SHA-256's padding
(``0x80``, zeros, the 64-bit big-endian bit length of the *whole* input, ``64 + len(m)`` bytes)
and from the outer midstate over the 32-byte inner digest with its padding (bit length
``(64 + 32) * 8``): one block, so a message of up to 55 bytes costs two compressions. The
compression function is FIPS 180-4's, 32-bit words held in uint64 and masked after every
addition and shift. The tests compare the kernel with :func:`hmac.digest` at every message
length from 0 to 300 bytes (both sides of the 55/56-byte padding boundary) and with random
keys, including keys longer than a block.

Messages may be given *framed*: ``prefix || 8-byte big-endian length || item`` for items laid
out in one buffer with offsets (the ledger's person messages), built inside the kernel byte by
byte, so the framed buffer is never materialised.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import sys
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["KERNEL_MIN", "KERNEL_MIN_LOADED", "hmac_framed", "hmac_list", "hmac_many", "kernel"]

try:  # OpenSSL's one-shot HMAC, which hmac.digest calls after a Python-level dispatch
    import _hashlib
except ImportError:  # pragma: no cover
    _hashlib = None  # type: ignore[assignment]
#: ``(key, message, "sha256") -> digest``: OpenSSL's one-shot HMAC, else :func:`hmac.digest`.
hmac_one: Any = getattr(_hashlib, "hmac_digest", None) or hmac.digest

#: Batches of at least this many messages go to the compiled kernel (when numba is installed):
#: below it, importing numba (about 0.5 s) and loading the cached kernel costs more than the
#: kernel saves (about 2.5 us per message); once numba is imported (by another compiled kernel
#: of the run), only loading the cached kernel is left and :data:`KERNEL_MIN_LOADED` applies.
KERNEL_MIN = 200_000
KERNEL_MIN_LOADED = 50_000
#: Messages cut at a time by the OpenSSL fallback (bounds its padded block: 64k x the longest message).
_BLOCK = 65_536

_KERNELS: Any = None


def kernel() -> Any:
    """The compiled kernels (a namespace with ``compress`` and ``hmac_batch``), or None without numba."""
    global _KERNELS
    if _KERNELS is None:
        try:
            from . import _hmac_kernels
        except ImportError:  # pragma: no cover - numba absent
            _KERNELS = False
        else:
            _KERNELS = _hmac_kernels if _hmac_kernels.hmac_batch is not None else False
    return _KERNELS or None


def _large(n: int) -> bool:
    """Whether a batch of ``n`` messages repays the kernel (see :data:`KERNEL_MIN`)."""
    return n >= (KERNEL_MIN_LOADED if "numba" in sys.modules else KERNEL_MIN)


def midstates(key: bytes) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """SHA-256 states after the one block ``K0 ^ ipad`` and after ``K0 ^ opad`` (compiled compression)."""
    k = kernel()
    k0 = hashlib.sha256(key).digest() if len(key) > 64 else key
    block = np.zeros(64, dtype=np.uint8)
    block[: len(k0)] = np.frombuffer(k0, dtype=np.uint8)
    out = []
    for pad in (0x36, 0x5C):
        state = k.H0.copy()
        k.compress(state, block ^ np.uint8(pad), np.empty(64, dtype=np.uint64))
        out.append(state)
    return out[0], out[1]


def _openssl(key: bytes, msgs: list[bytes]) -> list[bytes]:
    """The full digests of ``msgs`` by OpenSSL's one-shot HMAC (:data:`hmac_one`), one call each."""
    return list(map(hmac_one, itertools.repeat(key, len(msgs)), msgs, itertools.repeat("sha256", len(msgs))))


def _cut(data: NDArray[np.uint8], offs: NDArray[np.int64], prefix: bytes, framed: bool) -> list[bytes]:
    """The messages as bytes objects (for OpenSSL): numpy cuts a block at a time when no message ends in NUL."""
    n = offs.size - 1
    lengths = np.diff(offs)
    base = int(offs[0]) if n >= 0 else 0
    raw = data[base : int(offs[-1])] if n > 0 else data[:0]
    rel = offs - base
    if n and ((lengths == 0).any() or (raw[rel[1:] - 1] == 0).any()):
        blob = raw.tobytes()
        items = [blob[s:e] for s, e in itertools.pairwise(rel.tolist())]
    else:
        items = []
        for start in range(0, n, _BLOCK):
            stop = min(start + _BLOCK, n)
            lens = lengths[start:stop]
            width = int(lens.max())
            pad = np.zeros((stop - start, width), dtype=np.uint8)
            pad[np.arange(width) < lens[:, None]] = raw[rel[start] : rel[stop]]
            items.extend(pad.view(f"S{width}").ravel().tolist())
    if not framed and not prefix:
        return items
    return [prefix + len(x).to_bytes(8, "big") + x for x in items] if framed else [prefix + x for x in items]


def hmac_framed(key: bytes, prefix: bytes, data: NDArray[np.uint8], offs: NDArray[np.int64], keep: int = 32,
                *, framed: bool = True, compiled: bool | None = None) -> bytes:
    """``HMAC-SHA256(key, prefix || [8-byte BE len] || item_i)[:keep]`` for every item, concatenated.

    ``data``/``offs``: the items' bytes and ``n + 1`` offsets into them (an Arrow binary
    array's buffers). ``compiled``: force (True) or forbid (False) the kernel; by default it
    runs for large batches (:data:`KERNEL_MIN`) when numba is installed.
    """
    if not 1 <= keep <= 32:
        raise ValueError("keep must be 1..32 bytes")
    offs = np.ascontiguousarray(offs, dtype=np.int64)
    n = offs.size - 1
    if n <= 0:
        return b""
    k = kernel() if (compiled or (compiled is None and _large(n))) else None
    if compiled and k is None:
        raise RuntimeError("the compiled HMAC kernel needs numba (the fast extra)")
    if k is not None:
        inner, outer = midstates(key)
        out = np.empty((n, keep), dtype=np.uint8)
        k.hmac_batch(inner, outer, np.frombuffer(prefix, dtype=np.uint8), bool(framed),
                     np.ascontiguousarray(data, dtype=np.uint8), offs, out)
        return out.tobytes()
    digests = b"".join(_openssl(key, _cut(np.asarray(data, dtype=np.uint8), offs, prefix, framed)))
    if keep == 32:
        return digests
    return np.frombuffer(digests, dtype=np.uint8).reshape(n, 32)[:, :keep].tobytes()


def hmac_many(key: bytes, buf: bytes | NDArray[np.uint8], bounds: Any, keep: int = 32,
              *, compiled: bool | None = None) -> bytes:
    """``HMAC-SHA256(key, buf[bounds[i]:bounds[i+1]])[:keep]`` of every message, concatenated."""
    data = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, bytes | bytearray) else np.asarray(buf)
    return hmac_framed(key, b"", data, np.asarray(bounds, dtype=np.int64), keep, framed=False, compiled=compiled)


def hmac_list(key: bytes, msgs: list[bytes], keep: int = 32, *, compiled: bool | None = None) -> list[bytes]:
    """:func:`hmac_many` of a list of messages, as a list of digests."""
    if not msgs:
        return []
    if not (compiled or (compiled is None and _large(len(msgs)))) or kernel() is None:
        if compiled:
            raise RuntimeError("the compiled HMAC kernel needs numba (the fast extra)")
        d = _openssl(key, msgs)
        return d if keep == 32 else [x[:keep] for x in d]
    bounds = np.zeros(len(msgs) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, msgs), dtype=np.int64, count=len(msgs)), out=bounds[1:])
    out = hmac_many(key, b"".join(msgs), bounds, keep, compiled=True)
    return [out[i : i + keep] for i in range(0, len(out), keep)]
