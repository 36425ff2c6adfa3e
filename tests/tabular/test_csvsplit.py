"""The RFC 4180 splitter and splicer: fields located exactly, other bytes untouched."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.tabular import csvsplit


def _buf(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _split(data: bytes, ncols: int, column: int, eof: bool = True, max_records: int = 10**9):
    return csvsplit.split_records(_buf(data), eof=eof, ncols=ncols, column=column, max_records=max_records, where="f")


def test_fields_by_hand():
    data = b'a,"b,1",c\r\n\r\nx,"y\n""z""",w\nlast,,end'
    recs = _split(data, 3, 1)
    assert [data[a:b] for a, b in zip(recs.fs, recs.fe, strict=True)] == [b'"b,1"', b'"y\n""z"""', b""]
    assert recs.lines.tolist() == [0, 2, 4]  # 0-based lines of the three non-empty records
    assert recs.end == len(data)
    last = _split(data, 3, 2)
    assert [data[a:b] for a, b in zip(last.fs, last.fe, strict=True)] == [b"c", b"w", b"end"]  # \r not in the field


def test_partial_record_waits_for_more_data():
    data = b'a,"multi\nline'
    recs = _split(data, 2, 1, eof=False)
    assert recs.end == 0 and len(recs.fs) == 0
    with pytest.raises(ValidationError, match="line 1: a quoted field is not closed"):
        _split(data, 2, 1, eof=True)
    recs = _split(b"a,b\nc,d\ne,f", 2, 0, eof=False)
    assert recs.end == 8 and len(recs.fs) == 2  # the last line may not be complete yet


def test_max_records_cuts_after_a_record():
    recs = _split(b"a,1\nb,2\nc,3\n", 2, 0, max_records=2)
    assert recs.end == 8 and len(recs.fs) == 2


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b"a,b\nc\n", "line 2 has 1 fields, expected 2"),
        (b"a,b\nc,d,e\n", "line 2 has 3 fields, expected 2"),
        (b'a,12" pipe\n', 'line 1: a \'"\' inside an unquoted field'),
        (b'a,"x"y\n', "after a closing quote"),
    ],
)
def test_malformed_records_name_the_line(data, pattern):
    with pytest.raises(ValidationError, match=pattern):
        _split(data, 2, 1)


def test_first_line_offsets_the_reported_line():
    with pytest.raises(ValidationError, match="line 12 has 1 fields"):
        csvsplit.split_records(_buf(b"a,b\nc\n"), eof=True, ncols=2, column=0, max_records=9, where="f", first_line=11)


def test_encode_field():
    assert csvsplit.encode_field("Paris") == b"Paris"
    assert csvsplit.encode_field("Paris", quoted=True) == b'"Paris"'
    assert csvsplit.encode_field('a,"b"') == b'"a,""b"""'
    assert csvsplit.encode_field("é\n") == '"é\n"'.encode()


def test_splice_replaces_only_the_fields():
    data = b'id,"x",z\n2,yy,"q"\n'
    buf = _buf(data)
    recs = _split(data, 3, 1)
    table = _buf(b"AB")
    offsets = np.array([0, 1, 2])
    out = csvsplit.splice(buf, recs.end, recs.fs, recs.fe, table, offsets, np.array([1, 0]))
    assert out.tobytes() == b'id,B,z\n2,A,"q"\n'


# no bare CR: the csv module's writer leaves it unquoted with a \n line terminator
_field = st.text(alphabet=st.sampled_from(list('ab ,"\né')), max_size=6)


@given(
    rows=st.lists(st.lists(_field, min_size=3, max_size=3), min_size=1, max_size=12),
    quote_all=st.booleans(),
    crlf=st.booleans(),
)
def test_fields_match_the_csv_module(rows, quote_all, crlf):
    text = io.StringIO()
    writer = csv.writer(text, quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL,
                        lineterminator="\r\n" if crlf else "\n")
    rows = [r for r in rows if r != ["", "", ""]]  # an empty line is no record
    writer.writerows(rows)
    data = text.getvalue().encode("utf-8")
    for column in range(3):
        recs = _split(data, 3, column)
        values, offsets, quoted, raw_quoted = csvsplit.field_values(_buf(data), recs.fs, recs.fe)
        got, k = [], 0
        for i in range(len(recs.fs)):
            if quoted[i]:
                got.append(raw_quoted[k].decode())
                k += 1
            else:
                got.append(values[offsets[i] : offsets[i + 1]].tobytes().decode())
        assert got == [r[column] for r in rows]


@given(
    rows=st.lists(st.lists(_field, min_size=3, max_size=3), min_size=1, max_size=12),
    dropped=st.sampled_from([(), (0,), (2,), (0, 2), (1,)]),
    block=st.integers(1, 30),
    picks=st.lists(st.integers(0, 2), min_size=12, max_size=12),
)
def test_blocked_splice_with_drops_matches_the_csv_module(rows, dropped, block, picks):
    """splice_to (block by block) writes what splice writes; released fields replaced, dropped columns gone."""
    rows = [r for r in rows if r != ["", "", ""]]
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    data = text.getvalue().encode("utf-8")
    buf = _buf(data)
    column = next(c for c in range(3) if c not in dropped)
    recs = _split(data, 3, column)
    starts, stops, row, kind = csvsplit.edits_for(recs, column, dropped)
    labels = [b"P", b'"Q,"', b""]  # two labels, then the empty entry that removes a range
    table = _buf(b"".join(labels))
    offsets = np.cumsum([0] + [len(x) for x in labels])
    choice = np.where(kind == 0, np.asarray(picks)[row % 12] % 2, 2)
    whole = csvsplit.splice(buf, recs.end, starts, stops, table, offsets, choice).tobytes()
    out = io.BytesIO()
    csvsplit.splice_to(out, buf, recs.end, starts, stops, table, offsets, choice, block=block)
    assert out.getvalue() == whole
    got = list(csv.reader(io.StringIO(whole.decode("utf-8"), newline="")))
    keep = [c for c in range(3) if c not in dropped]
    j = keep.index(column)
    assert len(got) == len(rows)
    for g, r, i in zip(got, rows, range(len(rows)), strict=True):
        assert g[:j] + g[j + 1:] == [r[c] for c in keep if c != column]
        assert g[j] == ["P", "Q,"][picks[i % 12] % 2]


def _inserted(buf, end, fs, fe, table, offsets, choice):
    """The splice by :func:`numpy.insert` at each range's start in the kept bytes: the oracle."""
    keep = np.ones(end, dtype=bool)
    for s, e in zip(fs, fe, strict=True):
        keep[s:e] = False
    pos = fs - np.concatenate(([0], np.cumsum(fe - fs)[:-1]))
    pieces = [table[offsets[c]:offsets[c + 1]] for c in choice]
    lens = np.array([len(p) for p in pieces], dtype=np.int64)
    values = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint8)
    return np.insert(buf[:end][keep], np.repeat(pos, lens), values)


@given(
    rows=st.lists(st.lists(_field, min_size=3, max_size=3), min_size=1, max_size=12),
    crlf=st.booleans(),
    dropped=st.sampled_from([(), (0,), (2,), (0, 2), (1,)]),
    labels=st.lists(st.binary(max_size=4), min_size=1, max_size=4),
    picks=st.lists(st.integers(0, 4), min_size=12, max_size=12),
    tail=st.binary(max_size=5),
)
def test_splice_equals_numpy_insert(rows, crlf, dropped, labels, picks, tail):
    """splice gives the bytes numpy.insert gives: fields with quotes, commas, newlines, CRLF, empty fields
    and empty entries (removed ranges), with bytes after ``end`` left out."""
    rows = [r for r in rows if r != ["", "", ""]]
    text = io.StringIO()
    csv.writer(text, lineterminator="\r\n" if crlf else "\n").writerows(rows)
    data = text.getvalue().encode("utf-8")
    buf = _buf(data + tail)
    column = next(c for c in range(3) if c not in dropped)
    recs = _split(data, 3, column)
    starts, stops, row, kind = csvsplit.edits_for(recs, column, dropped)
    table = _buf(b"".join(labels) or b"")
    offsets = np.cumsum([0] + [len(x) for x in labels])
    choice = np.where(kind == 0, np.asarray(picks)[row % 12] % len(labels), len(labels) - 1)
    got = csvsplit.splice(buf, recs.end, starts, stops, table, offsets, choice)
    assert got.tobytes() == _inserted(buf, recs.end, starts, stops, table, offsets, choice).tobytes()


def test_splice_by_hand_with_growing_and_shrinking_entries():
    buf = _buf(b"ab,cd,e\nxyz\n")
    fs, fe = np.array([0, 3, 6, 8]), np.array([2, 5, 7, 11])
    table, offsets = _buf(b"QRSTU"), np.array([0, 0, 1, 5])
    out = csvsplit.splice(buf, len(buf), fs, fe, table, offsets, np.array([2, 0, 1, 0]))
    assert out.tobytes() == b"RSTU,,Q\n\n"


@given(cuts=st.lists(st.integers(0, 40), max_size=12), inside=st.booleans())
def test_ranges_mask_marks_the_bytes_of_the_ranges(cuts, inside):
    """The mask of sorted disjoint ranges (empty ones and ranges that touch included) against a loop."""
    cuts = sorted(cuts)
    if len(cuts) % 2:
        cuts = cuts[:-1]
    fs, fe, n = np.array(cuts[0::2], dtype=np.int64), np.array(cuts[1::2], dtype=np.int64), 41
    want = np.full(n, not inside)
    for s, e in zip(fs, fe, strict=True):
        want[s:e] = inside
    assert csvsplit._ranges_mask(n, fs, fe, inside=inside).tolist() == want.tolist()
