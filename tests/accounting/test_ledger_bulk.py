"""The ledger's bulk paths against per-item oracles: hashes, framed messages, the demand table, the memo cipher."""

from __future__ import annotations

import hmac
from pathlib import Path

import numpy as np
import pytest

from metricdp.accounting import _memo
from metricdp.accounting.ledger import HASH_BYTES, Ledger
from metricdp.errors import BudgetExceededError, ValidationError

pa = pytest.importorskip("pyarrow")


def _old_hash(key: bytes, person: str) -> bytes:
    """The stored person hash as the ledger's format defines it, item by item (the format of schema 1)."""
    raw = person.encode("utf-8", "surrogatepass")
    return hmac.digest(key, b"p" + len(raw).to_bytes(8, "big") + raw, "sha256")[:HASH_BYTES]


def _old_crypt(key: bytes, mk: bytes, data: bytes) -> bytes:
    stream = b"".join(hmac.digest(key, b"x" + mk + bytes([c]), "sha256") for c in range(len(data) // 32 + 1))
    return bytes(a ^ b for a, b in zip(data, stream, strict=False))


def test_hashes_from_numpy_text_integers_and_arrow_agree_with_the_format(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.db", budget=1.0)
    key = led._keyed()
    names = ["ann", "é", "7", "a,b", "x" * 200, "\udcff"]  # a lone surrogate (surrogateescape'd byte)
    assert led.person_hashes(names) == [_old_hash(key, p) for p in names]
    assert led.person_hashes([7, 12]) == [_old_hash(key, "7"), _old_hash(key, "12")]
    arrow = pa.array(names[:-1]).slice(1)  # sliced: offsets do not start at 0
    assert led.person_hashes(arrow) == [_old_hash(key, p) for p in names[1:-1]]
    assert led.person_hashes(pa.array([b"ann", b"bob"], type=pa.large_binary())) == [
        _old_hash(key, "ann"), _old_hash(key, "bob")]
    assert led.person_hashes([]) == []
    # a message ending in NUL (an empty id: its length's last byte; an id ending in NUL) is sliced, not cut by numpy
    odd = pa.array([b"", b"a\x00", b"b"], type=pa.binary())
    assert led.person_hashes(odd) == [hmac.digest(key, b"p" + len(x).to_bytes(8, "big") + x, "sha256")[:HASH_BYTES]
                                      for x in (b"", b"a\x00", b"b")]


def test_reserve_with_arrow_ids_is_the_same_spend(tmp_path: Path) -> None:
    a = Ledger(tmp_path / "a.db", budget=1.0)
    b = Ledger(tmp_path / "b.db", budget=1.0)
    ra = a.reserve(np.array(["zed", "amy", "kim"]), 0.25, np.array([1, 4, 3]), policy="drop", unit="")
    rb = b.reserve(pa.array(["zed", "amy", "kim"]), 0.25, np.array([1, 4, 3]), policy="drop", unit="")
    assert ra.grant.persons.tolist() == rb.grant.persons.tolist() == ["amy", "kim", "zed"]
    assert ra.grant.granted.tolist() == rb.grant.granted.tolist() == [4, 3, 1]
    assert ra.totals is not None and rb.totals is not None and ra.totals.tolist() == rb.totals.tolist()
    assert a.spent(["amy", "kim", "zed"]).tolist() == b.spent(pa.array(["amy", "kim", "zed"])).tolist() == [
        1.0, 0.75, 0.25]
    with pytest.raises(BudgetExceededError):
        b.reserve(pa.array(["amy"]), 0.25, np.array([1]), unit="")
    with pytest.raises(ValidationError, match="distinct"):
        b.reserve(pa.array(["kim", "kim"]), 0.25, np.array([1, 1]), unit="")
    with pytest.raises(ValidationError, match="need counts"):
        b.reserve(pa.array(["kim"]), 0.25, unit="")
    a.check_integrity()
    b.check_integrity()


def test_many_persons_in_hash_order_totals_come_back_in_input_order(tmp_path: Path) -> None:
    """Two runs over 3,000 persons (the second overlapping): totals are each person's, whatever the hash order."""
    led = Ledger(tmp_path / "l.db", budget=100.0)
    first = np.array([f"p{i}" for i in range(3000)])
    counts = np.arange(3000) % 7 + 1
    led.reserve(first, 1.0, counts, unit="")
    second = first[::-3]
    r = led.reserve(second, 1.0, np.full(second.size, 2), unit="")
    expect = {p: c + 2 for p, c in zip(first[::-3], counts[::-3], strict=True)}
    assert r.totals is not None
    assert dict(zip(r.grant.persons.tolist(), (r.totals // 10**12).tolist(), strict=True)) == expect
    spent = led.spent(first)
    assert spent.tolist() == [float(c + (2 if i % 3 == 2999 % 3 else 0)) for i, c in enumerate(counts)]
    led.check_integrity()


def test_demand_fill_round_trips_keys_and_units(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.db", budget=1.0)
    keys = bytes(range(256))[:48] + b"\x00" * 16  # a key of NULs, one ending in NUL
    units = np.array([0, 2**62, 12345678901234567, 9], dtype=np.int64)
    with led._db.write() as tx:
        tx.fill(keys, 16, units)
        rows = tx.q("SELECT i, ph, u FROM demand ORDER BY i")
        tx.fill(b"", 16)
        empty = tx.q("SELECT COUNT(*) FROM demand")
    expect = [(i, keys[16 * i : 16 * i + 16], int(units[i])) for i in range(4)]
    assert [(i, bytes(ph), u) for i, ph, u in rows] == expect
    assert empty == [(0,)]


def test_memo_cipher_and_codec_match_the_item_by_item_format(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.db", budget=1.0)
    key = led._keyed()
    mks = [bytes([i]) * 32 for i in range(4)]
    blobs = [b"i" + b"\x01" * 8, b"", b"f\x02" + b"\x07" * 16, bytes(range(70))]  # 70 bytes: three blocks
    assert _memo.crypt_many(key, mks, blobs) == [_old_crypt(key, m, b) for m, b in zip(mks, blobs, strict=True)]
    assert _memo.crypt_many(key, [], []) == []
    idx = np.array([0, -5, 2**40])
    assert _memo.encode_many(idx) == [_memo.encode(x) for x in idx]
    pts = np.array([[1.5, -2.25], [np.pi, 1e300]])
    assert _memo.encode_many(pts) == [_memo.encode(x) for x in pts]
    assert _memo.decode_many(_memo.encode_many(idx), None, "s").tolist() == idx.tolist()
    assert np.array_equal(_memo.decode_many(_memo.encode_many(pts), 2, "s"), pts)
    with pytest.raises(ValidationError, match="not indices"):
        _memo.decode_many(_memo.encode_many(pts), None, "s")
    with pytest.raises(ValidationError, match="not points of width 3"):
        _memo.decode_many(_memo.encode_many(pts), 3, "s")


def test_memo_round_trip_with_arrow_persons(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.db", budget=5.0)
    r = led.reserve(["a", "b"], 1.0, [1, 1], unit="")
    out = led.memo_store(r.run_id, "s", pa.array(["a", "b"]), ["x", "y"], np.array([3, 4]))
    led.commit(r.run_id)
    found, rel = led.memo_lookup("s", np.array(["b", "a", "c"]), ["y", "x", "x"])
    assert out.tolist() == [3, 4] and found.tolist() == [True, True, False] and rel.tolist() == [4, 3, -1]
