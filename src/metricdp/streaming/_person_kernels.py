"""Compiled open-addressing hash table of person ids (numba, the optional ``fast`` extra).

:class:`metricdp.streaming.persons._HashBook` keeps one table across all the chunks of a
file: every distinct id's bytes are appended once to a growable byte store (with an
offset each), and each row gets the code of its id in order of first sight. The numpy /
pyarrow :class:`~metricdp.streaming.persons._Dictionary` computes the same thing and stays
the reference the tests compare with.

* :func:`encode` -- for each id of a chunk (its bytes ``data[starts[r]:ends[r]]``: Arrow
  ``binary`` buffers, or a chunk's values where they lie): a 64-bit FNV-1a
  hash of its bytes (``&`` an injectable mask, so that tests can force whole-hash
  collisions), linear probing of a power-of-two table of slots, and on a slot whose
  stored hash equals the id's, an **exact** comparison of the lengths and the bytes with
  the stored id. Two ids are one person only when their bytes are equal: a
  collision of hashes (or of slots) never merges two persons, it only costs a comparison.
  A new id is appended to the store and its slot set; the caller guarantees the room
  in the store (the chunk's bytes) and the kernel stops when the table would be more
  than half full (the caller grows it and resumes), so the kernel never allocates.
* :func:`rehash` -- the slots moved to a larger table by their stored hashes (ids never move).

A slot holds the code and length of its id, its hash and its first 8 bytes (24 bytes in one
place): an id of at most 8 bytes (most ids: numbers, short names) is found with one memory
access, and a row costs one hash and about one cache miss.

Without numba, ``KERNELS`` is None and the pyarrow dictionary runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._numba import njit

__all__ = ["FNV_OFFSET", "FNV_PRIME", "KERNELS"]

#: FNV-1a 64-bit parameters (a hash of the bytes; its quality costs probes, never correctness).
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)

KERNELS: Any = None

if njit is not None:  # pragma: no branch

    @njit(cache=True, nogil=True)
    def _word(data: Any, a: int, b: int) -> np.uint64:  # pragma: no cover - compiled
        """The first (up to) 8 bytes of ``data[a:b]`` as one little-endian word, zero-padded."""
        w = np.uint64(0)
        for i in range(min(b - a, 8)):
            w |= np.uint64(data[a + i]) << np.uint64(8 * i)
        return w

    @njit(cache=True, nogil=True)
    def encode(data: Any, starts: Any, ends: Any, first: int, slots: Any, store: Any, store_off: Any, n: int,
               limit: int, mask: np.uint64, codes: Any) -> tuple[int, int]:  # pragma: no cover - compiled
        """Codes of the ids ``data[starts[r]:ends[r]]`` (rows ``first..``) into ``codes``.

        Returns ``(n, r)``: the number of distinct ids and the first row not encoded, which
        is the end unless a new id found ``n == limit`` (the table must grow first).

        A slot is three words: ``code * 512 + min(length, 511)`` (-1: empty), the hash, and
        the id's first 8 bytes; an id of at most 8 bytes is compared in the slot (length and
        word), a longer one byte by byte with the store.
        """
        cap = slots.shape[0] - 1
        for r in range(first, starts.size):
            a = np.int64(starts[r])
            b = np.int64(ends[r])
            length = b - a
            h = FNV_OFFSET
            for i in range(a, b):
                h = (h ^ np.uint64(data[i])) * FNV_PRIME
            h = h & mask
            hi = np.int64(h)
            w = np.int64(_word(data, a, b))
            tag = length if length < 511 else 511
            s = np.int64(h ^ (h >> np.uint64(29))) & cap
            while True:
                head = slots[s, 0]
                if head < 0:  # a new id: appended to the store, in order of first sight
                    if n >= limit:
                        return n, r
                    lo = store_off[n]
                    for i in range(length):
                        store[lo + i] = data[a + i]
                    store_off[n + 1] = lo + length
                    slots[s, 0] = n * 512 + tag
                    slots[s, 1] = hi
                    slots[s, 2] = w
                    codes[r] = n
                    n += 1
                    break
                if slots[s, 1] == hi and slots[s, 2] == w and head % 512 == tag:
                    c = head // 512
                    same = True
                    if length > 8:
                        lo = store_off[c]
                        if store_off[c + 1] - lo != length:
                            same = False
                        else:
                            for i in range(8, length):
                                if store[lo + i] != data[a + i]:
                                    same = False
                                    break
                    if same:
                        codes[r] = c
                        break
                s = (s + 1) & cap
        return n, starts.size

    @njit(cache=True, nogil=True)
    def rehash(old: Any, slots: Any) -> None:  # pragma: no cover - compiled
        """Move the occupied slots of ``old`` into the (empty, -1) ``slots`` of a larger table."""
        cap = slots.shape[0] - 1
        for j in range(old.shape[0]):
            if old[j, 0] < 0:
                continue
            h = np.uint64(old[j, 1])
            s = np.int64(h ^ (h >> np.uint64(29))) & cap
            while slots[s, 0] >= 0:
                s = (s + 1) & cap
            slots[s, 0] = old[j, 0]
            slots[s, 1] = old[j, 1]
            slots[s, 2] = old[j, 2]

    KERNELS = {"encode": encode, "rehash": rehash}
