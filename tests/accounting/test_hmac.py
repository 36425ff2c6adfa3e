"""The compiled HMAC-SHA256 batch kernel and its OpenSSL fallback against :func:`hmac.digest`, byte for byte."""

from __future__ import annotations

import hmac
import itertools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.accounting import _hmac
from tests.helpers import needs

needs_numba = needs("fast")
MODES = [pytest.param(True, marks=needs_numba, id="compiled"), pytest.param(False, id="openssl")]


def _layout(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offs = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in items], out=offs[1:])
    return np.frombuffer(b"".join(items), dtype=np.uint8), offs


@pytest.mark.parametrize("compiled", MODES)
@pytest.mark.parametrize("key_len", [0, 1, 32, 64, 65, 200])
def test_every_length_0_to_300_is_hmac_digest(compiled: bool, key_len: int) -> None:
    """Every message length 0..300 (55/56/64-byte padding boundaries, multi-block), keys shorter and longer
    than a block (a key over 64 bytes is hashed first)."""
    key = os.urandom(key_len)
    msgs = [os.urandom(n) for n in range(301)]
    data, offs = _layout(msgs)
    expect = [hmac.digest(key, m, "sha256") for m in msgs]
    out = _hmac.hmac_many(key, data, offs, compiled=compiled)
    assert [out[32 * i : 32 * i + 32] for i in range(len(msgs))] == expect
    out16 = _hmac.hmac_many(key, data.tobytes(), offs, 16, compiled=compiled)
    assert out16 == b"".join(e[:16] for e in expect)


@pytest.mark.parametrize("compiled", MODES)
def test_framed_messages_are_prefix_length_item(compiled: bool) -> None:
    """``prefix || be64(len) || item``: items of 0 bytes, ending in NUL, around the 47/48-byte boundary
    (1 + 8 + 47 = 56), and items given by a slice of offsets not starting at 0."""
    key = os.urandom(32)
    items = [b"", b"\x00", b"a\x00", os.urandom(46), os.urandom(47), os.urandom(48), os.urandom(119), b"bob"]
    data, offs = _layout([b"junk", *items])
    out = _hmac.hmac_framed(key, b"p", data, offs[1:], 16, compiled=compiled)
    assert out == b"".join(hmac.digest(key, b"p" + len(x).to_bytes(8, "big") + x, "sha256")[:16] for x in items)
    bare = _hmac.hmac_framed(key, b"ab", data, offs[1:], framed=False, compiled=compiled)
    assert bare == b"".join(hmac.digest(key, b"ab" + x, "sha256") for x in items)
    assert _hmac.hmac_framed(key, b"p", data, offs[:1], compiled=compiled) == b""


@needs_numba
@settings(max_examples=40, deadline=None)
@given(key=st.binary(max_size=130), items=st.lists(st.binary(max_size=140), max_size=12),
       prefix=st.binary(max_size=70), framed=st.booleans())
def test_kernel_equals_openssl_on_random_keys_and_messages(key: bytes, items: list[bytes], prefix: bytes,
                                                           framed: bool) -> None:
    data, offs = _layout(items)
    head = (lambda x: prefix + len(x).to_bytes(8, "big") + x) if framed else (lambda x: prefix + x)
    expect = b"".join(hmac.digest(key, head(x), "sha256") for x in items)
    assert _hmac.hmac_framed(key, prefix, data, offs, framed=framed, compiled=True) == expect
    assert _hmac.hmac_framed(key, prefix, data, offs, framed=framed, compiled=False) == expect


def test_openssl_fallback_cuts_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages of several lengths across several of numpy's blocks: each HMAC as hmac.digest gives it."""
    monkeypatch.setattr(_hmac, "_BLOCK", 3)
    items = [b"x" * k + b"!" for k in (0, 5, 1, 40, 2, 2, 7)]
    data, offs = _layout(items)
    assert _hmac.hmac_many(b"k" * 32, data, offs, compiled=False) == b"".join(
        hmac.digest(b"k" * 32, x, "sha256") for x in items)
    assert _hmac.hmac_list(b"k" * 32, items, 16, compiled=False) == [
        hmac.digest(b"k" * 32, x, "sha256")[:16] for x in items]


@needs_numba
def test_list_and_default_dispatch_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """The size threshold only picks the route: below and above it the digests are the same."""
    key = os.urandom(32)
    msgs = [os.urandom(int(n)) for n in np.random.default_rng(1).integers(0, 90, 300)]
    expect = [hmac.digest(key, m, "sha256") for m in msgs]
    assert _hmac.hmac_list(key, msgs) == expect  # below KERNEL_MIN: OpenSSL
    monkeypatch.setattr(_hmac, "KERNEL_MIN", 10)
    monkeypatch.setattr(_hmac, "KERNEL_MIN_LOADED", 10)
    calls: list[int] = []
    real = _hmac.kernel()
    monkeypatch.setattr(_hmac, "kernel", lambda: calls.append(1) or real)
    assert _hmac.hmac_list(key, msgs) == expect  # above it: the kernel
    assert calls
    assert _hmac.hmac_list(key, []) == []
    with pytest.raises(ValueError, match="keep"):
        _hmac.hmac_many(key, b"", [0, 0], 33)


@needs_numba
def test_a_million_ids_equal_openssl() -> None:
    """A 1M-id batch (8-16 random bytes each, the ledger's person framing) equals OpenSSL's, digest by digest."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(8, 17, 1_000_000)
    offs = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offs[1:])
    data = rng.integers(0, 256, int(offs[-1]), dtype=np.uint8)
    key = os.urandom(32)
    fast = _hmac.hmac_framed(key, b"p", data, offs, 16, compiled=True)
    slow = _hmac.hmac_framed(key, b"p", data, offs, 16, compiled=False)
    assert fast == slow
    raw = data.tobytes()  # spot-check the oracle itself against hmac.digest
    for i in itertools.islice(range(0, 1_000_000, 99_991), 11):
        x = raw[offs[i] : offs[i + 1]]
        assert fast[16 * i : 16 * i + 16] == hmac.digest(key, b"p" + len(x).to_bytes(8, "big") + x, "sha256")[:16]
