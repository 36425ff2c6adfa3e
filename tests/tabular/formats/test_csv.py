"""``CsvChunk.texts``/``values``: the texts of the rows asked for, read from their fields alone, equal to the
whole chunk's column taken at those rows and to Python's csv module."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.tabular.formats import RELEASE_FORMATS


def _chunks(path: Path, chunk_bytes: int = 2**20) -> list:
    with RELEASE_FORMATS["csv"].open(path, chunk_rows=1000, chunk_bytes=chunk_bytes, max_record=None) as reader:
        return [c for c in reader.chunks() if c.rows]


def test_texts_of_the_rows_asked_for(tmp_path: Path) -> None:
    p = tmp_path / "in.csv"
    p.write_bytes('\ufeffid,city,note\r\n1,"Pa,ris",""\r\n2,,"say ""hi"""\n3,"Ly\r\non",€😀'.encode())
    (chunk,) = _chunks(p)
    assert chunk.texts("city", np.array([2, 0, 0, 1])) == ["Ly\r\non", "Pa,ris", "Pa,ris", ""]
    assert chunk.texts("note", np.array([1, 2, 0])) == ['say "hi"', "€😀", ""]  # the last line has no line break
    assert chunk.texts("id", np.array([2, 1])) == ["3", "2"]  # the first column: a byte-order mark before the header
    assert chunk.values("city", np.array([1])) == [""] and chunk.texts("city", np.zeros(0, dtype=np.intp)) == []


def test_a_row_out_of_the_chunk_is_an_index_error(tmp_path: Path) -> None:
    p = tmp_path / "in.csv"
    p.write_bytes(b"a,b\n1,2\n")
    (chunk,) = _chunks(p)
    with pytest.raises(IndexError):
        chunk.texts("b", np.array([1]))


# fields with quotes, commas, line breaks (a bare CR only where every field is quoted), 2- to 4-byte UTF-8
_field = st.text(alphabet=st.sampled_from(list('ab ,"\n\r\u00e9\u20ac\U0001f600')), max_size=6)


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(st.lists(_field, min_size=3, max_size=3), min_size=1, max_size=12),
    quoting=st.sampled_from([csv.QUOTE_ALL, csv.QUOTE_MINIMAL]),
    eols=st.lists(st.sampled_from(["\n", "\r\n"]), min_size=1, max_size=3),
    bom=st.booleans(),
    last_eol=st.booleans(),
    chunk_bytes=st.integers(1, 60),
    data=st.data(),
)
def test_texts_of_sampled_rows_are_the_whole_chunks_column_at_those_rows(
        tmp_path_factory: pytest.TempPathFactory, rows: list[list[str]], quoting: Literal[0, 1, 2, 3],
        eols: list[str], bom: bool, last_eol: bool, chunk_bytes: int, data: st.DataObject) -> None:
    header = ["h1", "h2", "h3"]
    if quoting == csv.QUOTE_MINIMAL:  # the writer leaves a \r unquoted when its line terminator is \n
        rows = [[f.replace("\r", "") for f in r] for r in rows]
    out = io.StringIO()
    for k, row in enumerate([header, *rows]):  # LF and CRLF mixed, line by line
        csv.writer(out, quoting=quoting, lineterminator=eols[k % len(eols)]).writerow(row)
    text = out.getvalue()
    if not last_eol:
        text = text.removesuffix("\r\n").removesuffix("\n")
    p = tmp_path_factory.mktemp("texts") / "in.csv"
    p.write_bytes(("\ufeff" if bom else "").encode() + text.encode("utf-8"))
    seen: list[list[str]] = []
    for chunk in _chunks(p, chunk_bytes):
        picked = np.array(data.draw(st.lists(st.integers(0, chunk.rows - 1), max_size=2 * chunk.rows)),
                          dtype=np.intp)
        whole = {name: chunk.column(name).to_pylist() for name in header}
        for k, name in enumerate(header):
            fs, fe = chunk.raw.records.field(k)  # every record's bounds, then these rows'
            assert [a.tolist() for a in chunk.raw.records.field(k, picked)] == [fs[picked].tolist(),
                                                                               fe[picked].tolist()]
            assert chunk.texts(name, picked) == [whole[name][r] for r in picked.tolist()]
            assert chunk.values(name, picked) == chunk.texts(name, picked)
        seen += [list(r) for r in zip(*(chunk.texts(n, np.arange(chunk.rows)) for n in header), strict=True)]
    assert seen == list(csv.reader(io.StringIO(text, newline="")))[1:]  # every row, read by the csv module
