"""``Chunk.spans``: a column's values as the bytes where they lie, the same values as ``Chunk.column``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.tabular.formats import RELEASE_FORMATS


def _chunks(path: Path, fmt: str, rows: int = 1000) -> list:
    with RELEASE_FORMATS[fmt].open(path, chunk_rows=rows, chunk_bytes=64, max_record=None) as reader:
        return [c for c in reader.chunks() if c.rows]


def _texts(spans: tuple) -> list[str]:
    buf, starts, ends = spans
    return [bytes(buf[a:b]).decode("utf-8") for a, b in zip(starts, ends, strict=True)]


def test_csv_fields_where_they_lie_unless_one_of_the_column_is_quoted(tmp_path: Path) -> None:
    p = tmp_path / "in.csv"
    p.write_bytes('user,city\r\nann,"Pa,ris"\r\n,Lyon\r\nélan,""\r\n'.encode())
    (chunk,) = _chunks(p, "csv")
    spans = chunk.spans("user")
    assert spans is not None and _texts(spans) == ["ann", "", "élan"]  # a quoted field elsewhere does not matter
    assert chunk.spans("city") is None  # its fields' bytes are not their texts
    p.write_bytes(b'user,city\nann,P\n"bob",L\n')
    (chunk,) = _chunks(p, "csv")
    assert chunk.spans("user") is None and chunk.column("user").to_pylist() == ["ann", "bob"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8", exclude_characters='\x00\ufeff",\r\n'),
                        max_size=6), min_size=1, max_size=12), st.integers(1, 5))
def test_csv_spans_are_the_columns_texts(tmp_path_factory: pytest.TempPathFactory, users: list[str],
                                         rows: int) -> None:
    p = tmp_path_factory.mktemp("spans") / "in.csv"
    p.write_bytes(("user,n\n" + "".join(f"{u},{i}\n" for i, u in enumerate(users))).encode())
    got = []
    for chunk in _chunks(p, "csv", rows):
        spans = chunk.spans("user")
        assert spans is not None
        assert _texts(spans) == chunk.column("user").to_pylist()
        got += _texts(spans)
    assert got == users


def test_typed_formats_keep_no_bytes(tmp_path: Path) -> None:
    pq.write_table(pa.table({"user": ["ann", "bob"], "n": [1, 2]}), tmp_path / "in.parquet")
    (tmp_path / "in.jsonl").write_bytes(b'{"user": "ann", "n": 1}\n{"user": "bob", "n": 2}\n')
    for name, fmt in (("in.parquet", "parquet"), ("in.jsonl", "jsonl")):
        chunks = _chunks(tmp_path / name, fmt)
        assert chunks and all(c.spans("user") is None for c in chunks)
        assert np.concatenate([c.column("user").to_numpy(zero_copy_only=False) for c in chunks]).tolist() == [
            "ann", "bob"]
