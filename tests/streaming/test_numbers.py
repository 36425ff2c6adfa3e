"""Streaming numeric releases: the number rule (fuzzed against io.parse_decimal), bytes kept, refusals, Parquet."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.io import parse_decimal
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.streaming.numbers import parse_numbers, privatize_numbers_file

AGES = number_mechanism(NumericGrid(0, 99, 1), 0.5)


def _oracle(text: str) -> float | None:
    try:
        return parse_decimal(text)
    except ValueError:
        return None


def _check_against_oracle(texts: list[str]) -> None:
    values, bad = parse_numbers(pa.array(texts, pa.string()))
    for t, v, b in zip(texts, values.tolist(), bad.tolist(), strict=True):
        want = _oracle(t)
        if want is None:
            assert b, t
        else:
            assert not b, t
            assert v == want or (math.isnan(v) and math.isnan(want)), (t, v, want)


# ------------------------------------------------------------------ the number rule
_NUMERIC = st.text(alphabet="0123456789+-.eE _\u0661 \tnaifNIty()", max_size=8)


@given(st.lists(_NUMERIC, min_size=1, max_size=30))
def test_parse_numbers_fuzzed_against_parse_decimal(texts):
    _check_against_oracle(texts)
    _check_against_oracle([t for t in texts if _oracle(t) is not None] or ["0"])  # the all-valid fast path


@given(st.lists(st.floats(allow_nan=False, allow_infinity=True), min_size=1, max_size=20))
def test_parse_numbers_reads_every_float_repr_exactly(xs):
    _check_against_oracle([repr(x) for x in xs] + [f"{x:.17e}" for x in xs])


def test_parse_numbers_by_hand():
    texts = ["5", " 5", "+5", "5.", ".5", "1e2", "1_0", "\u0661", "", "nan", "0x10", "1e400", "-0"]
    values, bad = parse_numbers(pa.array(texts, pa.string()))
    assert bad.tolist() == [False, False, False, False, False, False, True, True, True, False, True, False, False]
    assert parse_numbers(pa.array(["nan(1)", "Infinity", "1"], pa.string()))[1].tolist() == [True, False, False]
    assert values[[0, 1, 2, 3, 4, 5, 11]].tolist() == [5.0, 5.0, 5.0, 5.0, 0.5, 100.0, math.inf]
    quoted = np.array([False, True, False])
    values, bad = parse_numbers(pa.array(["1", "", "x"], pa.string()), quoted, [b"42"])
    assert values[:2].tolist() == [1.0, 42.0] and bad.tolist() == [False, False, True]


# ------------------------------------------------------------------------- CSV
def _write(path, rows, header="id,age,note"):
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))


def test_csv_keeps_every_other_byte_and_releases_on_the_grid(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    rows = [f'{i},{i % 100},"a, ""quoted"" note"' for i in range(3000)]
    rows[5] = '5,"42",x'  # a quoted number: released quoted
    _write(src, rows)
    stats_ = privatize_numbers_file(AGES, src, "age", out, keep=["id", "note"])
    assert stats_.rows == 3000 and stats_.format == "csv" and stats_.columns.kept == ("id", "note")
    got = out.read_text().splitlines()
    assert got[0] == "id,age,note"
    for a, b in zip(got[1:], rows, strict=True):
        ia, age, rest = a.split(",", 2)
        ib, _, rest_b = b.split(",", 2)
        assert (ia, rest) == (ib, rest_b)
        assert 0 <= int(age.strip('"')) <= 99
    assert got[6].split(",")[1].startswith('"')


def test_csv_release_law_is_the_mechanism(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    m = number_mechanism(NumericGrid("0.0", "2.0", "0.5"), 1.0, "discrete-laplace")
    _write(src, [f"{i},1.0,x" for i in range(20_000)])
    with pytest.warns(PrivacyLeakWarning):
        privatize_numbers_file(m, src, "age", out, rng=11, drop=["id", "note"])
    got = [line for line in out.read_text().splitlines()[1:]]
    labels = m.output_labels
    counts = np.bincount([labels.index(x) for x in got], minlength=m.m)
    expected = m.matrix()[2] * len(got)
    keep = expected >= 5
    assert stats.chisquare(counts[keep], expected[keep] * counts[keep].sum() / expected[keep].sum()).pvalue > 1e-4
    assert set(got) - set(labels) == set()


def test_csv_refusals_name_file_line_column_and_write_nothing(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    rows = [f"{1000 + i},{i % 100},x" for i in range(50)]  # ids apart from the ages (an id = age is a copy)
    rows[3] = "1003,abc,x"
    rows[10] = "1010,120,x"
    rows[20] = "1020,4.5,x"
    rows[30] = "1030,,x"
    rows[40] = "1040,nan,x"
    _write(src, rows)
    with pytest.raises(ValidationError) as ex:
        privatize_numbers_file(AGES, src, "age", out, chunk_rows=7)
    msg = str(ex.value)
    assert str(src) in msg and "column 'age'" in msg and "5 value(s)" in msg and "nothing written" in msg
    for frag in ("line 5: 'abc' (not a number)", "line 12: '120' (outside the range)",
                 "line 22: '4.5' (not on the grid)", "line 32: '' (empty)", "line 42: 'nan' (not finite)"):
        assert frag in msg, msg
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_csv_clamp_and_round_options(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write(src, ["1,-5,x", "2,500,x", "3,4.4, x"])
    privatize_numbers_file(AGES, src, "age", out, out_of_range="clamp", off_grid="round", keep=["id", "note"])
    assert len(out.read_text().splitlines()) == 4
    with pytest.raises(ValidationError, match="the parameter 'out_of_range' must be one of error, clamp"):
        privatize_numbers_file(AGES, src, "age", out, out_of_range="drop")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="NumberMechanism"):
        privatize_numbers_file(object(), src, "age", out)  # type: ignore[arg-type]


def test_padded_numbers_are_numbers(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write(src, ["1, 7 ,x", "2,+8,x", "3,9.0e0,x"])
    privatize_numbers_file(AGES, src, "age", out, keep=["id", "note"])
    assert len(out.read_text().splitlines()) == 4


# ------------------------------------------------------------------------- Parquet
@pytest.mark.parametrize("kind", [pa.int64(), pa.float64(), pa.string(), pa.int16()])
def test_parquet_keeps_type_and_other_columns(tmp_path, kind):
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    ages = pa.array([str(i % 100) for i in range(500)]).cast(kind)
    pq.write_table(pa.table({"id": list(range(500)), "age": ages}), src)
    privatize_numbers_file(AGES, src, "age", out, keep=["id"])
    t = pq.read_table(out)
    assert t.schema.field("age").type == kind and t.column("id").to_pylist() == list(range(500))
    assert all(0 <= float(v) <= 99 for v in t.column("age").to_pylist())


def test_parquet_refusals_name_rows(tmp_path):
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"age": pa.array([1.0, None, 250.0, 3.0])}), src)
    with pytest.raises(ValidationError, match=r"row 2: 'null' \(empty\); row 3: '250.0' \(outside the range\)"):
        privatize_numbers_file(AGES, src, "age", out)
    assert not out.exists()
    pq.write_table(pa.table({"age": pa.array([True, False])}), src)
    with pytest.raises(ValidationError, match="has type bool"):
        privatize_numbers_file(AGES, src, "age", out)
    m = number_mechanism(NumericGrid(0, 10, 1), 1.0, "discrete-laplace")  # negative releases
    pq.write_table(pa.table({"age": pa.array([1, 2], pa.uint8())}), src)
    with pytest.raises(ValidationError, match="cannot be written as it"):
        privatize_numbers_file(m, src, "age", out)


@given(st.lists(st.tuples(st.text(alphabet="0123456789+-.eE _\u0661nai", min_size=0, max_size=6), st.booleans()),
                min_size=1, max_size=12))
def test_file_fuzzed_against_the_oracle(tmp_path_factory, fields):
    # end to end through the CSV layer (quoted or not): released iff every field is a number on the grid
    d = tmp_path_factory.mktemp("fuzz")
    src, out = d / "in.csv", d / "out.csv"
    src.write_text("v\n" + "".join((f'"{t}"' if q else t) + "\n" for t, q in fields), encoding="utf-8")
    wanted = [_oracle(t) for t, _ in fields]
    ok = [w is not None and math.isfinite(w) and 0 <= w <= 99 and w == int(w) for w in wanted]
    blank = [t == "" and not q for t, q in fields]  # an empty unquoted line is no record (RFC 4180 reader)
    try:
        privatize_numbers_file(AGES, src, "v", out)
    except ValidationError as ex:
        refused = sum(1 for good, b in zip(ok, blank, strict=True) if not good and not b)
        assert refused > 0 and f"{refused:,} value(s)" in str(ex), (fields, str(ex))
        assert not out.exists()
    else:
        assert all(good or b for good, b in zip(ok, blank, strict=True)), fields
        got = [x for x in out.read_text().splitlines()[1:] if x]  # blank lines are copied as they are
        assert len(got) == sum(not b for b in blank)
        assert all(0 <= int(x.strip('"')) <= 99 for x in got)
