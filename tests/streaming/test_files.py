"""privatize_file: chunked CSV/Parquet, bytes and values kept, distribution, refusals, interruption."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from metricdp import MetricSpace, PrivacyLeakWarning, ValidationError
from metricdp.errors import UnsafeOutputError
from metricdp.mechanisms.base import certify
from metricdp.streaming import privatize_file
from metricdp.tabular import csvsplit

LABELS = ["Paris", "Lyon", "Li,lle", 'Ni"ce']


@pytest.fixture(scope="module")
def mech():
    space = MetricSpace.from_points([[0.0], [1.0], [2.0], [3.5]], LABELS)
    m = np.exp(-0.8 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 0.8, "exponential")


def _run(mech, inp, out, **kw):
    kw.setdefault("rng", None)
    return privatize_file(mech, inp, kw.pop("column", "city"), out, **kw)


def _fields(rows: list[list[str]], quoted: list[list[bool]], eol: str) -> bytes:
    """A CSV whose every field's encoding is chosen (quoted or minimal)."""
    lines = [
        b",".join(csvsplit.encode_field(v, quoted=q) for v, q in zip(r, qs, strict=True)) for r, qs in zip(
            rows, quoted, strict=True)
    ]
    return eol.encode().join(lines) + eol.encode()


# ------------------------------------------------------------------------------------ CSV
@settings(max_examples=20)
@given(
    data=st.data(),
    n_rows=st.integers(1, 40),
    chunk_bytes=st.integers(1, 64),
    chunk_rows=st.integers(1, 7),
    eol=st.sampled_from(["\n", "\r\n"]),
)
def test_csv_other_bytes_unchanged_at_any_chunking(tmp_path_factory, mech, data, n_rows, chunk_bytes, chunk_rows, eol):
    text = st.text(alphabet=st.sampled_from(list('xy ,"\né')), max_size=5)
    rows = [["id", "city", "note"]] + [
        [data.draw(text), data.draw(st.sampled_from(LABELS)), data.draw(text)] for _ in range(n_rows)
    ]
    quoted = [[data.draw(st.booleans()) for _ in range(3)] for _ in rows]
    tmp = tmp_path_factory.mktemp("csv")
    inp, out = tmp / "in.csv", tmp / "out.csv"
    inp.write_bytes(_fields(rows, quoted, eol))
    stats_ = _run(mech, inp, out, chunk_bytes=chunk_bytes, chunk_rows=chunk_rows)
    assert stats_.rows == n_rows
    released = [r[1] for r in csv.reader(io.StringIO(out.read_bytes().decode(), newline=""))][1:]
    assert all(x in LABELS for x in released)
    expected = [rows[0]] + [[r[0], x, r[2]] for r, x in zip(rows[1:], released, strict=True)]
    # a release is quoted where the input field was (by choice or by need) or where it must be
    was_quoted = [[q[0], q[1] or csvsplit.encode_field(r[1]) != r[1].encode(), q[2]] for r, q in zip(rows, quoted,
                                                                                                      strict=True)]
    # byte-for-byte: the same encodings, only the released values differ
    assert out.read_bytes() == _fields(expected, was_quoted, eol)


def test_chunk_boundary_inside_a_quoted_field(tmp_path, mech):
    long_note = "a,b\n" * 50 + '"quoted" end'
    pairs = [["Paris", long_note], ["Lyon", "x"], ["Lyon", long_note], ["Paris", "x"]]
    rows = [["city", "note"]] + pairs * 2 + pairs[:2]  # the note is no code of the city
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_text(buf.getvalue(), encoding="utf-8")
    assert _run(mech, inp, out, chunk_bytes=16, chunk_rows=3).rows == 10  # every field longer than a read
    got = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"), newline="")))
    assert [r[1] for r in got] == [r[1] for r in rows]
    assert all(r[0] in LABELS for r in got[1:])


def test_bom_blank_lines_and_missing_final_newline_kept(tmp_path, mech):
    raw = b'\xef\xbb\xbf"city",n\r\n\r\nParis,1\r\n\r\n"Lyon",2'
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_bytes(raw)
    assert _run(mech, inp, out, chunk_bytes=3).rows == 2
    got = out.read_bytes()
    assert got.startswith(b'\xef\xbb\xbf"city",n\r\n\r\n')
    first, second = got.split(b"\r\n")[2], got.split(b"\r\n")[4]
    assert first.endswith(b",1") and second.endswith(b",2") and second.startswith(b'"')  # quoted stays quoted


def test_csv_release_distribution_over_many_chunks(tmp_path, mech):
    n_rows = 12_000
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_text("id,city\n" + "".join(f"{i},Lyon\n" for i in range(n_rows)))
    with pytest.warns(PrivacyLeakWarning):
        _run(mech, inp, out, rng=2024, chunk_rows=1000)
    got = [r[1] for r in csv.reader(io.StringIO(out.read_text(), newline=""))][1:]
    counts = np.array([got.count(x) for x in LABELS])
    p = np.asarray(mech.matrix)[LABELS.index("Lyon")]
    assert stats.chisquare(counts, p * n_rows).pvalue > 0.001
    assert [r[0] for r in csv.reader(io.StringIO(out.read_text(), newline=""))][1:] == [str(i) for i in range(n_rows)]


def test_seed_is_one_stream_not_restarted_per_chunk(tmp_path, mech):
    inp = tmp_path / "in.csv"
    inp.write_text("city\n" + "Paris\n" * 400)
    with pytest.warns(PrivacyLeakWarning):
        _run(mech, inp, tmp_path / "a.csv", rng=5, chunk_rows=10)
    got = tmp_path.joinpath("a.csv").read_text().split("\n")[1:-1]
    chunks = [tuple(got[i : i + 10]) for i in range(0, 400, 10)]
    assert len(set(chunks)) > 30  # a restarted seed would repeat the same 10 releases


def test_unknown_labels_give_count_and_line_numbers_and_write_nothing(tmp_path, mech):
    lines = ["id,city"] + [f"{i},Paris" for i in range(100)]
    for i in (30, 31, 77, 90, 95, 99):
        lines[i + 1] = f"{i},Berlin" if i != 77 else f'{i},"Ro,me"'
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_text("\n".join(lines) + "\n")
    out.write_text("old")
    with pytest.raises(ValidationError) as err:
        _run(mech, inp, out, chunk_rows=10)  # the first unknown is in the 4th chunk
    msg = str(err.value)
    assert "column 'city': 2 value(s) not in the space's labels: 'Berlin', 'Ro,me'" in msg
    assert "6 row(s); first at line(s) 32, 33, 79, 92, 97" in msg
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.csv"]


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (b"id,city,city\n1,Paris,Lyon\n", "the released column 'city' appears more than once"),
        (b"id,id,city\n1,2,Paris\n", "column 'id' appears more than once"),
        (b"id,,city\n1,2,Paris\n", "column 2 has an empty name"),
        (b"id,town\n1,Paris\n", "no column 'city'; available: 'id', 'town'"),
        (b"", "empty file"),
        (b"id,city\n1,Paris\n2,Lyon\n3,Pa\xffris\n", r"not valid UTF-8 at byte offset 27"),
        (b'id,city\n1,Paris\n2,"Lyon\n', "line 3: a quoted field is not closed"),
        (b"id,city\n1,Paris\n2,Lyon,x\n", "line 3 has 3 fields, expected 2"),
    ],
)
def test_bad_csv_is_one_clear_error(tmp_path, mech, content, pattern):
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_bytes(content)
    with pytest.raises(ValidationError, match=pattern):
        _run(mech, inp, out, chunk_bytes=4)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_output_equal_to_an_input_is_refused(tmp_path, mech):
    inp = tmp_path / "in.csv"
    inp.write_text("city\nParis\n")
    with pytest.raises(UnsafeOutputError, match="it is the input"):
        _run(mech, inp, inp)
    os.symlink(inp, tmp_path / "link.csv")
    with pytest.raises(UnsafeOutputError, match="it is the input"):
        _run(mech, inp, tmp_path / "link.csv")
    mfile = tmp_path / "m.npz"
    mfile.write_bytes(b"x")
    with pytest.raises(UnsafeOutputError, match="it is the input"):
        _run(mech, inp, mfile, inputs=[mfile])
    assert inp.read_text() == "city\nParis\n" and mfile.read_bytes() == b"x"


# -------------------------------------------------------------------------------- Parquet
def _parquet(path: Path, n: int, cities: list[str | None] | None = None, row_group_size: int = 64) -> pa.Table:
    g = np.random.default_rng(0)
    cities = cities if cities is not None else [LABELS[i] for i in g.integers(0, 4, n)]
    table = pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "city": pa.array(cities, pa.string()),
            "score": pa.array([None if i % 7 == 0 else float(i) / 3 for i in range(n)], pa.float64()),
            "tag": pa.array([f"t{i % 5}" for i in range(n)]).dictionary_encode(),
        }
    ).replace_schema_metadata({"owner": "metricdp-test"})
    pq.write_table(table, path, row_group_size=row_group_size, compression="zstd")
    return table


def test_parquet_other_columns_schema_and_metadata_kept(tmp_path, mech):
    table = _parquet(tmp_path / "in.parquet", 1000)
    stats_ = _run(mech, tmp_path / "in.parquet", tmp_path / "out.parquet", chunk_rows=130)
    assert stats_.rows == 1000 and stats_.format == "parquet"
    back = pq.read_table(tmp_path / "out.parquet")
    assert back.schema.equals(table.schema, check_metadata=True)
    for name in ("id", "score", "tag"):
        assert back.column(name).equals(table.column(name))
    assert set(back.column("city").to_pylist()) <= set(LABELS)
    assert pq.ParquetFile(tmp_path / "out.parquet").metadata.row_group(0).column(0).compression == "ZSTD"


def test_parquet_distribution(tmp_path, mech):
    n = 8000
    _parquet(tmp_path / "in.parquet", n, cities=["Paris"] * n, row_group_size=1000)
    with pytest.warns(PrivacyLeakWarning):
        _run(mech, tmp_path / "in.parquet", tmp_path / "out.parquet", rng=9, chunk_rows=700)
    got = pq.read_table(tmp_path / "out.parquet").column("city").to_pylist()
    counts = np.array([got.count(x) for x in LABELS])
    assert stats.chisquare(counts, np.asarray(mech.matrix)[0] * n).pvalue > 0.001


def test_parquet_unknown_labels_and_nulls(tmp_path, mech):
    cities = ["Paris"] * 300
    cities[5], cities[250] = None, "Oslo"
    _parquet(tmp_path / "in.parquet", 300, cities=cities)
    with pytest.raises(ValidationError, match=r"2 value\(s\) not in the space's labels: 'Oslo', 'null' \(2 row\(s\); "
                       r"first at row\(s\) 6, 251\)"):
        _run(mech, tmp_path / "in.parquet", tmp_path / "out.parquet", chunk_rows=100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_not_parquet_and_wrong_suffix(tmp_path, mech):
    (tmp_path / "x.parquet").write_text("not parquet")
    with pytest.raises(ValidationError, match="not a readable Parquet file"):
        _run(mech, tmp_path / "x.parquet", tmp_path / "o.parquet")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ValidationError, match=r"must be \.csv, .*\.parquet/\.pq, got \.json$"):
        _run(mech, tmp_path / "x.json", tmp_path / "o.json")
    with pytest.raises(ValidationError, match="no such file"):
        _run(mech, tmp_path / "none.csv", tmp_path / "o.csv")


# --------------------------------------------------------------------------- interruption
_CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import numpy as np
    # the signals' default Python handlers, whatever the test runner's worker left ignored (an ignored signal is
    # inherited, and the release keeps a signal its caller ignores ignored, as nohup expects)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from metricdp import MetricSpace
    from metricdp.mechanisms.base import certify
    from metricdp.streaming import privatize_file

    space = MetricSpace.from_points([[0.0], [1.0]], ["a", "b"])
    mech = certify([[0.6, 0.4], [0.4, 0.6]], space, 1.0, "tiny")

    def progress(done, total, message):
        print("chunk", flush=True)  # the temporary output exists and holds a chunk
        time.sleep(60)

    privatize_file(mech, sys.argv[1], "w", sys.argv[2], chunk_rows=100, progress=progress)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_write_leaves_no_output(tmp_path, signum):
    inp = tmp_path / "in.csv"
    inp.write_text("w\n" + "a\nb\n" * 500)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(inp), str(tmp_path / "out.csv")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    ) as child:
        try:
            assert child.stdout.readline().strip() == "chunk", child.stderr.read()
            assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == ["in.csv"]  # unpublished
            child.send_signal(signum)
            child.wait(timeout=30)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -signum  # killed by the signal, re-delivered after the clean-up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


# ------------------------------------------------------------------------------------ hostile CSV shapes
def test_stats_name_what_left_and_drop_removes_columns(tmp_path, mech):
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_bytes(b'id,city,lat,lon\r\n1,Paris,48.8,2.3\r\n2,"Lyon",45.7,4.8\r\n')
    stats = _run(mech, inp, out, keep=["id"], drop=["lat", "lon"], chunk_bytes=5, chunk_rows=1)
    assert stats.rows == 2
    assert stats.columns is not None and stats.columns.as_dict() == {
        "released": ["city"], "unreleased": ["id"], "unacknowledged": [], "dropped": ["lat", "lon"]}
    got = out.read_bytes().split(b"\r\n")
    assert got[0] == b"id,city" and got[1].startswith(b"1,") and got[2].startswith(b'2,"') and got[3] == b""
    with pytest.raises(ValidationError, match="no column 'town' to be dropped"):
        _run(mech, inp, tmp_path / "o2.csv", drop=["town"])


def test_parquet_drop_keeps_the_rest_of_the_schema(tmp_path, mech):
    table = pa.table({"id": [1, 2], "city": ["Paris", "Lyon"], "lat": [1.0, 2.0]}).replace_schema_metadata({"k": "v"})
    pq.write_table(table, tmp_path / "in.parquet")
    stats = _run(mech, tmp_path / "in.parquet", tmp_path / "out.parquet", drop=["lat"])
    back = pq.read_table(tmp_path / "out.parquet")
    assert back.column_names == ["id", "city"] and back.schema.metadata == {b"k": b"v"}
    assert stats.columns is not None and stats.columns.unreleased == ("id",)


def test_record_cap_keyword(tmp_path, mech):
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_bytes(b"id,city\n" + b"x" * 300 + b",Paris\n")
    with pytest.raises(ValidationError, match=r"line 2: a record of 306 bytes is over the cap of 100 bytes"):
        _run(mech, inp, out, max_record=100)
    assert not out.exists()
