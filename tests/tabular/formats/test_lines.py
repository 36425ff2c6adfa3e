"""Plain text (``.txt``): one document per line, its ending kept; the same refusals as every line reader."""

from __future__ import annotations

import io
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.tabular.columns import plan_columns
from metricdp.tabular.formats import (
    FORMATS,
    RELEASE_FORMATS,
    Strings,
    WriteSpec,
    format_of,
    release_format,
    text_format,
)
from metricdp.tabular.formats.lines import COLUMN, FORMAT, LinesChunk, documents


def _read(path: Path, **kw: int) -> list[LinesChunk]:
    with FORMAT.open(path, chunk_rows=kw.get("rows", 100), chunk_bytes=kw.get("bytes", 1 << 20),
                     max_record=kw.get("cap")) as reader:
        assert reader.names == (COLUMN,)
        return [cast(LinesChunk, c) for c in reader.chunks()]


def _write(path: Path, chunks: list[LinesChunk], release=None, keep=None) -> bytes:
    """The writer's bytes for ``chunks`` (``release(chunk)``: the released documents of the kept rows)."""
    out = io.BytesIO()
    spec = WriteSpec(None, plan_columns((COLUMN,), [COLUMN]), (COLUMN,), str(path))  # type: ignore[arg-type]
    writer = FORMAT.writer(out, spec)
    for chunk in chunks:
        k = None if keep is None else keep(chunk)
        writer.write(chunk, k, [] if release is None else [Strings(COLUMN, release(chunk, k))])
    writer.close()
    return out.getvalue()


def test_lines_their_endings_and_the_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbfcat dog\r\n\nParis\rNice\r\r\n\xc3\xa9t\xc3\xa9\r")
    (chunk,) = _read(path)
    assert chunk.bodies == ["cat dog", "", "Paris\rNice", "\u00e9t\u00e9"]  # a \r inside a line is text
    assert chunk.endings == ["\r\n", "\n", "\r\r\n", "\r"]
    assert chunk.column(COLUMN).to_pylist() == chunk.bodies and chunk.unit == "line"
    assert chunk.places(np.array([0, 3])).tolist() == [1, 4]
    # unchanged: every byte but the byte-order mark (not text: not written)
    assert _write(path, [chunk]) == path.read_bytes()[3:]
    # released: the new documents, each with its line's ending
    got = _write(path, [chunk], lambda c, k: [t.upper() for t in c.bodies])
    assert got == "CAT DOG\r\n\nPARIS\rNICE\r\r\n\u00c9T\u00c9\r".encode()
    # a row not kept leaves no trace, its ending included
    got = _write(path, [chunk], lambda c, k: ["a", "b"], keep=lambda c: np.array([False, True, False, True]))
    assert got == b"a\nb\r"


def test_chunks_by_rows_and_by_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("".join(f"line {i}\n" for i in range(7)), encoding="utf-8")
    chunks = _read(path, rows=3)
    assert [c.rows for c in chunks] == [3, 3, 1] and [c.first for c in chunks] == [0, 3, 6]
    assert chunks[2].places(np.array([0])).tolist() == [7]
    assert [c.rows for c in _read(path, bytes=14)] == [2, 2, 2, 1]  # each line is 7 bytes
    assert _write(path, chunks) == path.read_bytes()
    assert list(documents(path)) == [f"line {i}" for i in range(7)]
    empty = tmp_path / "e.txt"
    empty.write_bytes(b"")
    assert _read(empty) == [] and _write(empty, []) == b""


@pytest.mark.parametrize(("content", "cap", "match"), [
    (b"cat\n\xff dog\n", None, r"^.*a\.txt: invalid UTF-8 at byte offset 4 \(line starting at byte 4\)$"),
    (b"cat\nca\xc3", None, r"invalid UTF-8 at byte offset 6 \(line starting at byte 4\)"),
    (b"short\n" + b"x" * 20 + b"\n", 16, r"line 2 is longer than the cap of 16 bytes \(byte offset 6; set "),
])
def test_refusals_name_the_file_the_line_and_the_offset(tmp_path: Path, content: bytes, cap: int | None,
                                                        match: str) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(content)
    with pytest.raises(ValidationError, match=match):
        _read(path, cap=cap) if cap else _read(path)
    with pytest.raises(ValidationError, match="no such file"):
        FORMAT.open(tmp_path / "none.txt", chunk_rows=1, chunk_bytes=1, max_record=None)


def test_a_line_of_exactly_the_cap_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 15 + b"\n")
    assert _read(path, cap=16)[0].bodies == ["x" * 15]


def test_plain_text_is_in_the_suffix_table_but_not_a_table() -> None:
    assert FORMATS[".txt"] == "text" and format_of("A.TXT") == "text"
    assert "text" not in RELEASE_FORMATS
    with pytest.raises(ValidationError, match=r"got \.txt \(a \.txt file is plain text, not a table with a header"):
        release_format("a.txt")


@pytest.mark.parametrize(("name", "fmt"), [("a.txt", "text"), ("notes.md", "text"), ("README", "text"),
                                           ("a.JSON", "text"), ("a.csv", "csv"), ("a.pq", "parquet"),
                                           ("a.ndjson", "jsonl"), ("a.arrow", "feather")])
def test_text_format_a_table_by_its_suffix_any_other_file_plain_text(name: str, fmt: str) -> None:
    column = None if fmt == "text" else "body"
    got, documents_column = text_format(name, column)
    assert got.name == fmt and documents_column == (COLUMN if column is None else column)


@pytest.mark.parametrize(("name", "column", "match"), [
    ("a.txt", "body", r"^a\.txt: the parameter 'column' applies to \.csv/\.jsonl/\.parquet inputs; this file is "
                      r"read as plain text$"),
    ("a.csv", None, r"^a\.csv: a CSV input needs the parameter 'column' \(the text's field\)$"),
    ("a.tsv", "body", r"^a\.tsv: a text input must be .*\.txt, got \.tsv \(tab-separated"),
    ("a.geojson", "body", r"a text input must be .*got \.geojson$"),
    ("d.npy", None, r"got \.npy$"),
])
def test_text_format_refusals(name: str, column: str | None, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        text_format(name, column)


_LINE = st.text(alphabet=st.sampled_from(list("ab \u00e9\u200b\r\ufeff")), max_size=6)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(_LINE, st.sampled_from(["\n", "\r\n", "\r\r\n"])), max_size=8),
       last=_LINE, bom=st.booleans(), rows=st.integers(1, 4))
def test_read_then_written_unchanged_is_the_file_and_the_documents_are_its_lines(
        tmp_path: Path, lines: list[tuple[str, str]], last: str, bom: bool, rows: int) -> None:
    """Oracle: the decoded file split at ``\\n``, each line's trailing ``\\r`` and ``\\n`` its ending."""
    text = "".join(body + end for body, end in lines) + last
    path = tmp_path / "p.txt"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    chunks = _read(path, rows=rows)
    want = text.removeprefix("\ufeff") if not bom else text
    expected = [line.rstrip("\r\n") for line in _split_at_newline(want)]
    assert [b for c in chunks for b in c.bodies] == expected
    assert _write(path, chunks) == want.encode("utf-8")


def _split_at_newline(text: str) -> list[str]:
    """Lines ending at ``\\n`` only (``str.splitlines`` also splits at ``\\r``), the last one without it."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    return out + ([parts[-1]] if parts[-1] else [])
