"""Compiled SHA-256 compression and HMAC batch (numba, the optional ``fast`` extra); see :mod:`._hmac`.

Words are 32-bit values held in uint64 and masked with ``M`` after every addition and left
shift (numba widens uint32 arithmetic anyway, and every constant is a uint64 so no operation
mixes signed and unsigned integers, which numba would turn into floats). Without numba,
``hmac_batch`` and ``compress`` are None.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._numba import njit

__all__ = ["H0", "compress", "hmac_batch"]

#: FIPS 180-4 4.2.2: the round constants (cube roots of the first 64 primes).
K = np.array([
    0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
    0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
    0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
    0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
    0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
    0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
    0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
    0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
], dtype=np.uint64)
#: FIPS 180-4 5.3.3: the initial hash value.
H0 = np.array([0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19],
              dtype=np.uint64)
M = np.uint64(0xFFFFFFFF)

compress: Any = None
hmac_batch: Any = None

if njit is not None:  # pragma: no branch

    @njit(cache=True, inline="always")
    def _rotr(x: Any, n: Any) -> Any:
        return ((x >> np.uint64(n)) | (x << np.uint64(32 - n))) & M

    @njit(cache=True)
    def compress(state: Any, block: Any, w: Any) -> None:
        """One SHA-256 compression of a 64-byte ``block`` into ``state`` (8 words); ``w``: 64 words of scratch."""
        for t in range(16):
            w[t] = ((np.uint64(block[4 * t]) << np.uint64(24)) | (np.uint64(block[4 * t + 1]) << np.uint64(16))
                    | (np.uint64(block[4 * t + 2]) << np.uint64(8)) | np.uint64(block[4 * t + 3]))
        for t in range(16, 64):
            x = w[t - 15]
            y = w[t - 2]
            s0 = _rotr(x, 7) ^ _rotr(x, 18) ^ (x >> np.uint64(3))
            s1 = _rotr(y, 17) ^ _rotr(y, 19) ^ (y >> np.uint64(10))
            w[t] = (w[t - 16] + s0 + w[t - 7] + s1) & M
        a, b, c, d = state[0], state[1], state[2], state[3]
        e, f, g, h = state[4], state[5], state[6], state[7]
        for t in range(64):
            s1 = _rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)
            ch = (e & f) ^ ((e ^ M) & g)
            t1 = (h + s1 + ch + K[t] + w[t]) & M
            s0 = _rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)
            maj = (a & b) ^ (a & c) ^ (b & c)
            t2 = (s0 + maj) & M
            h = g
            g = f
            f = e
            e = (d + t1) & M
            d = c
            c = b
            b = a
            a = (t1 + t2) & M
        state[0] = (state[0] + a) & M
        state[1] = (state[1] + b) & M
        state[2] = (state[2] + c) & M
        state[3] = (state[3] + d) & M
        state[4] = (state[4] + e) & M
        state[5] = (state[5] + f) & M
        state[6] = (state[6] + g) & M
        state[7] = (state[7] + h) & M

    @njit(cache=True)
    def _one(inner: Any, outer: Any, prefix: Any, framed: bool, data: Any, start: int, length: int,
             state: Any, block: Any, w: Any, out_row: Any) -> None:
        """HMAC of message ``prefix || [be64(length)] || data[start:start+length]`` into ``out_row``."""
        p = prefix.size
        head = p + (8 if framed else 0)
        total = head + length  # message bytes after the 64-byte key block
        nblocks = (total + 9 + 63) // 64
        bits = (64 + total) * 8
        for i in range(8):
            state[i] = inner[i]
        for blk in range(nblocks):
            base = blk * 64
            for t in range(64):
                pos = base + t
                if pos < p:
                    v = prefix[pos]
                elif pos < head:
                    v = np.uint8((length >> (8 * (head - 1 - pos))) & 0xFF)
                elif pos < total:
                    v = data[start + pos - head]
                elif pos == total:
                    v = np.uint8(0x80)
                elif pos >= nblocks * 64 - 8:
                    v = np.uint8((bits >> (8 * (nblocks * 64 - 1 - pos))) & 0xFF)
                else:
                    v = np.uint8(0)
                block[t] = v
            compress(state, block, w)
        for i in range(8):  # the inner digest, then SHA-256's padding for 64 + 32 bytes
            x = state[i]
            block[4 * i] = np.uint8(x >> np.uint64(24))
            block[4 * i + 1] = np.uint8((x >> np.uint64(16)) & np.uint64(0xFF))
            block[4 * i + 2] = np.uint8((x >> np.uint64(8)) & np.uint64(0xFF))
            block[4 * i + 3] = np.uint8(x & np.uint64(0xFF))
        block[32] = np.uint8(0x80)
        for t in range(33, 62):
            block[t] = np.uint8(0)
        block[62] = np.uint8(0x03)  # (64 + 32) * 8 = 768 = 0x0300
        block[63] = np.uint8(0)
        for i in range(8):
            state[i] = outer[i]
        compress(state, block, w)
        for j in range(out_row.size):
            x = state[j // 4]
            out_row[j] = np.uint8((x >> np.uint64(24 - 8 * (j % 4))) & np.uint64(0xFF))

    @njit(cache=True)
    def hmac_batch(inner: Any, outer: Any, prefix: Any, framed: bool, data: Any, offs: Any,
                   out: Any) -> None:
        """``out[i] = HMAC(prefix || [be64 len] || data[offs[i]:offs[i+1]])[:out.shape[1]]`` for every i.

        Serial: a ``prange`` over chunks of ids cost more CPU (thread start and scheduling) than
        it saved in wall time.
        """
        state = np.empty(8, dtype=np.uint64)
        block = np.empty(64, dtype=np.uint8)
        w = np.empty(64, dtype=np.uint64)
        for i in range(offs.size - 1):
            _one(inner, outer, prefix, framed, data, offs[i], offs[i + 1] - offs[i], state, block, w, out[i])
