"""The first pass's dictionary of persons (chunk dictionaries merged now and then) and the engines' person table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.streaming import persons as persons_mod
from metricdp.streaming.persons import MAX_ID_BYTES, PersonTable, person_table, scan_persons

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

_IDS = st.text(alphabet=st.sampled_from(["a", "b", "é", "Ω", "z", ",", "1"]), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.lists(_IDS, min_size=0, max_size=12), min_size=1, max_size=6),
       merge=st.sampled_from([0, 1, 10**9]))
def test_dictionary_matches_numpy_whatever_the_merges(chunks: list[list[str]], merge: int) -> None:
    """Oracle: np.unique over all rows. ``merge`` 0/1 merges at (almost) every chunk, 1e9 only at the end."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persons_mod, "MERGE_BYTES", merge)
        book = persons_mod._Dictionary(pa, pc)
        for chunk in chunks:
            book.add(pa.array([x.encode() for x in chunk], type=pa.binary()))
        ids, codes = book.finish()
    rows = [x for chunk in chunks for x in chunk]
    text = [x.decode() for x in ids.to_pylist()]
    assert text == np.unique(np.array(rows, dtype=str)).tolist()
    assert [text[c] for c in codes.tolist()] == rows
    assert codes.dtype == np.int32 and codes.size == len(rows)


def test_merges_happen_and_keep_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chunks over a growing population: every merge keeps the ids seen before at their codes."""
    monkeypatch.setattr(persons_mod, "MERGE_BYTES", 64)
    merges = []
    real = persons_mod._Dictionary._merge

    def counting(self: persons_mod._Dictionary) -> None:
        merges.append(len(self.pending))
        real(self)

    monkeypatch.setattr(persons_mod._Dictionary, "_merge", counting)
    g = np.random.default_rng(5)
    rows = [f"p{int(x)}" for x in g.integers(0, 300, 4000)]
    book = persons_mod._Dictionary(pa, pc)
    for start in range(0, len(rows), 97):
        book.add(pa.array([x.encode() for x in rows[start : start + 97]], type=pa.binary()))
    ids, codes = book.finish()
    assert len(merges) > 3  # merged along the way, not only at the end
    assert np.array_equal(np.array([x.decode() for x in ids.to_pylist()])[codes], np.array(rows))


def test_scan_gives_arrow_ids_and_small_codes(tmp_path: Path) -> None:
    p = tmp_path / "in.csv"
    p.write_text("user,w\nbob,x\nann,y\nbob,z\n")
    scan = scan_persons(p, "csv", "user", chunk_rows=1)
    assert scan.ids.to_pylist() == [b"ann", b"bob"] and scan.codes.tolist() == [1, 0, 1]
    assert scan.codes.dtype == np.int32 and scan.persons.tolist() == ["ann", "bob"]


def test_person_table_sums_partial_counts_and_sorts() -> None:
    t = person_table(pa.array(["bob", "ann", "bob", "é"]), np.array([2, 1, 3, 0]))
    assert isinstance(t, PersonTable)
    assert t.ids.to_pylist() == [b"ann", b"bob", "é".encode()] and t.counts.tolist() == [1, 5, 0]
    assert t.persons.tolist() == ["ann", "bob", "é"]
    chunked = person_table(pa.chunked_array([pa.array([b"x"]), pa.array([b"x"])]), np.array([1, 1]))
    assert chunked.ids.to_pylist() == [b"x"] and chunked.counts.tolist() == [2]


@pytest.mark.parametrize(("ids", "counts", "match"), [
    (["a", ""], [1, 1], r"empty in 1 row\(s\) \(first at entry\(s\) 2\)"),
    (["a", "x" * (MAX_ID_BYTES + 1)], [1, 1], "a person id is a name"),
    (["a", None], [1, 1], "null id"),
    (["a\x00"], [1], "NUL"),
    (["a"], [-1], "counts must be one integer >= 0"),
    (["a", "b"], [1], "counts must be one integer >= 0"),
    (["a"], [1.5], "counts must be one integer >= 0"),
])
def test_person_table_refuses_what_the_first_pass_refuses(ids: list[str | None], counts: list[float],
                                                          match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        person_table(pa.array(ids, type=pa.string()), np.array(counts))
    with pytest.raises(ValidationError, match="binary or string"):
        person_table(pa.array([1, 2]), np.array([1, 1]))
    with pytest.raises(ValidationError, match="not UTF-8"):
        person_table(pa.array([b"\xff"], type=pa.binary()), np.array([1]))


@pytest.mark.parametrize(("text", "match"), [
    (b'{"user": "ann", "c": 1}\n\n{"user": "", "c": 2}\n', r"empty in 1 row\(s\) \(first at line\(s\) 3\)"),
    (b'{"user": "ann", "c": 1}\n\n{"user": null, "c": 2}\n', r"empty in 1 row\(s\) \(first at line\(s\) 3\)"),
    (b'{"user": "ann", "c": 1}\n\n{"user": "a\\u0000", "c": 2}\n', r"NUL character in 1 row\(s\) \(first at line 3\)"),
    (b'{"user": 1.5, "c": 1}\n', "has type double: person ids must be integers or text"),
    (b'{"user": true, "c": 1}\n', "has type bool: person ids must be integers or text"),
])
def test_a_typed_text_format_names_the_culprit_by_its_line(tmp_path: Path, text: bytes, match: str) -> None:
    """The chunk names its rows (a JSON-lines row by its line, blank lines counted); the typed-id rule holds."""
    (tmp_path / "in.jsonl").write_bytes(text)
    with pytest.raises(ValidationError, match=match):
        scan_persons(tmp_path / "in.jsonl", "jsonl", "user")


def test_every_chunk_is_checked_without_a_declared_type() -> None:
    """A chunk read alone (an engine's piece: no reader's schema seen) gets the same checks, its rows named
    from its first row on."""
    from metricdp.streaming.persons import PersonCollector
    from metricdp.tabular.formats import BatchChunk

    def add(values: list[object]) -> PersonCollector:
        col = PersonCollector("f", "u", 0)
        col.add(BatchChunk(pa.RecordBatch.from_arrays([pa.array(values)], names=["u"]), 10))
        return col

    assert add([7, 10, 7]).finish().persons.tolist() == ["10", "7"]
    with pytest.raises(ValidationError, match="has type double"):
        add([1.5])
    with pytest.raises(ValidationError, match=r"empty in 1 row\(s\) \(first at row\(s\) 12\)"):
        add(["a", None])
    with pytest.raises(ValidationError, match=r"not UTF-8 text at row 13"):
        add([b"a", b"b", b"\xff"])
