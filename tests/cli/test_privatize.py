"""``metricdp privatize``: releases against the matrix, other columns untouched, errors write nothing."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from metricdp import MetricSpace, load_mechanism
from metricdp.mechanisms.base import certify
from tests.cli_helpers import assert_one_line_error, run

LABELS = ["Paris", "Lyon", "Lille", "Nice"]






@pytest.fixture
def mech_file(tmp_path: Path) -> Path:
    latlon = [[48.8566, 2.3522], [45.7640, 4.8357], [50.6292, 3.0573], [43.7102, 7.2620]]
    space = MetricSpace.from_points(latlon, LABELS, metric="haversine")
    m = np.exp(-0.004 * np.asarray(space.distances) / 2)
    path = tmp_path / "m.npz"
    certify(m / m.sum(axis=1, keepdims=True), space, 0.004, "exponential").save(path)
    return path


def _read(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _write(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    return path


def test_releases_replace_only_the_column(mech_file, tmp_path):
    rows = [["id", "city", "note"], ["1", "Paris", 'a, "quoted"'], ["2", "Nice", ""], ["3", "Lille", "x"]]
    inp = _write(tmp_path / "in.csv", rows)
    out = tmp_path / "out.csv"
    result = run("privatize", mech_file, inp, "--column", "city", "--out", out, "--seed", 7)
    assert result.exit_code == 0, result.output
    got = _read(out)
    assert got[0] == rows[0]
    assert [r[0] for r in got] == [r[0] for r in rows]
    assert [r[2] for r in got] == [r[2] for r in rows]
    assert all(r[1] in LABELS for r in got[1:])
    # the seeded release is the library's: Mechanism.sample with the same seed
    mech = load_mechanism(mech_file)
    expected = mech.sample(mech.space.index(["Paris", "Nice", "Lille"]), rng=7)
    assert [r[1] for r in got[1:]] == [LABELS[i] for i in expected]
    # a seed is announced as not private
    assert "warning:" in result.stderr
    assert "not private" in result.stderr
    assert str(out) in result.stdout


def test_release_distribution_matches_the_matrix(mech_file, tmp_path):
    n_rows = 20_000
    inp = _write(tmp_path / "in.csv", [["city"]] + [["Lyon"]] * n_rows)
    out = tmp_path / "out.csv"
    assert run("privatize", mech_file, inp, "-c", "city", "-o", out, "--seed", 11).exit_code == 0
    counts = np.array([sum(r[0] == lab for r in _read(out)[1:]) for lab in LABELS])
    p = np.asarray(load_mechanism(mech_file).matrix)[LABELS.index("Lyon")]
    assert stats.chisquare(counts, p * n_rows).pvalue > 0.001


def test_secure_default_without_seed(mech_file, tmp_path):
    inp = _write(tmp_path / "in.csv", [["city"], ["Paris"], ["Lyon"]])
    out = tmp_path / "out.csv"
    result = run("privatize", mech_file, inp, "-c", "city", "-o", out)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no warning, no progress noise
    assert all(r[0] in LABELS for r in _read(out)[1:])


@pytest.mark.parametrize(
    ("rows", "fragments"),
    [
        ([["id", "town"], ["1", "Paris"]], ["no column 'city'", "available: 'id', 'town'"]),
        (
            [["city"], ["Paris"], ["Berlin"], ["Rome"], ["Berlin"], ["Oslo"], ["Bern"], ["Wien"], ["Riga"]],
            ["column 'city'", "6 value(s) not in the space's labels", "'Berlin'", "'Bern'"],
        ),
        ([["id", "city"], ["1", "Paris"], ["2"]], ["line 3 has 1 fields, expected 2"]),
        ([], ["empty file"]),
    ],
)
def test_input_errors_write_nothing(mech_file, tmp_path, rows, fragments):
    inp = _write(tmp_path / "in.csv", rows)
    out = tmp_path / "out.csv"
    out.write_text("previous content\n")
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", out, "--seed", 1), *fragments)
    assert out.read_text() == "previous content\n"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "m.npz", "out.csv"]  # no temporary


def test_many_unknown_values_are_summarised(mech_file, tmp_path):
    inp = _write(tmp_path / "in.csv", [["city"]] + [[f"town{i:02d}"] for i in range(30)])
    result = run("privatize", mech_file, inp, "-c", "city", "-o", tmp_path / "out.csv")
    assert_one_line_error(result, "30 value(s)", "'town00'", "and 20 more")
    assert "town29" not in result.stderr
    assert not (tmp_path / "out.csv").exists()


def test_file_errors(mech_file, tmp_path):
    inp = _write(tmp_path / "in.csv", [["city"], ["Paris"]])
    out = tmp_path / "out.csv"
    none_npz, none_csv, bad_out = tmp_path / "none.npz", tmp_path / "none.csv", tmp_path / "x" / "o.csv"
    assert_one_line_error(run("privatize", none_npz, inp, "-c", "city", "-o", out), "no such file")
    assert_one_line_error(run("privatize", mech_file, none_csv, "-c", "city", "-o", out), "no such file")
    assert_one_line_error(run("privatize", inp, inp, "-c", "city", "-o", out), "not a mechanism file")
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", bad_out), "does not exist")
    assert not out.exists()
    assert run("privatize", mech_file, inp, "-o", out).exit_code == 2  # --column missing: usage error


# ----------------------------------------------------------------------------- streaming, formats, safety
def test_parquet_in_parquet_out(mech_file, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": list(range(50)), "city": ["Nice"] * 50}).replace_schema_metadata({"k": "v"})
    pq.write_table(table, tmp_path / "in.parquet")
    result = run("privatize", mech_file, tmp_path / "in.parquet", "-c", "city", "-o", tmp_path / "out.parquet",
                 "--chunk-rows", 7)
    assert result.exit_code == 0, result.output
    assert "50 values of 'city'" in result.stdout and "rows/s" in result.stdout
    back = pq.read_table(tmp_path / "out.parquet")
    assert back.schema.equals(table.schema, check_metadata=True)
    assert back.column("id").equals(table.column("id")) and set(back.column("city").to_pylist()) <= set(LABELS)


def test_duplicate_released_column_is_refused(mech_file, tmp_path):
    """With header id,loc,loc only the first column used to be replaced."""
    inp = _write(tmp_path / "in.csv", [["id", "city", "city"], ["1", "Paris", "Paris"]])
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", tmp_path / "out.csv"),
                          "the released column 'city' appears more than once")
    inp = _write(tmp_path / "in.csv", [["", "city"], ["1", "Paris"]])
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", tmp_path / "out.csv"),
                          "column 1 has an empty name")
    assert not (tmp_path / "out.csv").exists()


def test_invalid_utf8_is_one_line_with_the_byte_offset(mech_file, tmp_path):
    inp = tmp_path / "in.csv"
    inp.write_bytes(b"id,city\n1,Par\xe9s\n")
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", tmp_path / "out.csv"),
                          "in.csv: line 2: not valid UTF-8 at byte offset 13")
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("target", ["/dev/null", "input", "mechanism", "directory"])
def test_unsafe_outputs_are_refused(mech_file, tmp_path, target):
    """--out /dev/null replaced the device; --out INPUT overwrote the input."""
    import os

    inp = _write(tmp_path / "in.csv", [["city"], ["Paris"]])
    (tmp_path / "dir").mkdir()
    out = {"/dev/null": Path("/dev/null"), "input": inp, "mechanism": mech_file, "directory": tmp_path / "dir"}[target]
    if target == "/dev/null" and not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    result = run("privatize", mech_file, inp, "-c", "city", "-o", out)
    assert result.exit_code == 2 and "Traceback" not in result.output
    if target != "directory":  # a directory is typer's usage error (dir_okay=False)
        assert_one_line_error(result, "refusing to write")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    if target == "/dev/null":
        import stat

        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_engine_options_belong_to_their_engine(mech_file, tmp_path):
    inp = _write(tmp_path / "in.csv", [["city"], ["Paris"]])
    out = tmp_path / "out.csv"
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", out, "--scheduler", "tcp://x:1"),
                          "--scheduler is for --engine dask")
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", out, "--master", "local[1]"),
                          "--master is for --engine spark")
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", out, "--engine", "dask",
                              "--chunk-rows", 5), "--chunk-rows is for --engine local")
    assert run("privatize", mech_file, inp, "-c", "city", "-o", out, "--engine", "flink").exit_code == 2
    assert not out.exists()


def test_read_csv_table_refuses_invalid_utf8_with_its_offset(tmp_path):
    # review: privatize-points and estimate read CSVs whole: a UnicodeDecodeError traceback
    from metricdp.errors import ValidationError
    from metricdp.io import read_csv_table

    p = tmp_path / "bad.csv"
    p.write_bytes(b"id,lat,lon\n1,\xff48.8,2.3\n")
    with pytest.raises(ValidationError, match=r"line 2: not valid UTF-8 at byte offset 13 \(byte 0xff\)"):
        read_csv_table(p)
    p.write_bytes(b"\xef\xbb\xbfid,lat\n1,\xfe\n")  # the offset counts the byte-order mark
    with pytest.raises(ValidationError, match=r"not valid UTF-8 at byte offset 12 \(byte 0xfe\)"):
        read_csv_table(p)


# ----------------------------------------------------------------------------- a separate output set
@pytest.fixture
def rect_file(tmp_path: Path) -> Path:
    from metricdp.mechanisms.exponential import exponential
    from metricdp.outputs import OutputSet

    latlon = [[48.8566, 2.3522], [45.7640, 4.8357], [50.6292, 3.0573], [43.7102, 7.2620]]
    space = MetricSpace.from_points(latlon, LABELS, metric="haversine")
    hubs = OutputSet.from_points(space, [[49.0, 3.0], [44.5, 5.5]], ["North", "South"])
    path = tmp_path / "r.npz"
    exponential(space, 0.01, outputs=hubs).save(path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_rectangular_releases_are_output_labels(rect_file, tmp_path, suffix):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    cities = ["Paris"] * 4000 + ["Nice"] * 4000
    inp, out = tmp_path / f"in{suffix}", tmp_path / f"out{suffix}"
    if suffix == ".csv":
        _write(inp, [["id", "city"], *[[str(i), c] for i, c in enumerate(cities)]])
    else:
        pq.write_table(pa.table({"id": list(range(len(cities))), "city": cities}), inp)
    result = run("privatize", rect_file, inp, "-c", "city", "-o", out, "--seed", 5)
    assert result.exit_code == 0, result.output
    released = ([r[1] for r in _read(out)[1:]] if suffix == ".csv"
                else pq.read_table(out).column("city").to_pylist())
    mech = load_mechanism(rect_file)
    for city, start in (("Paris", 0), ("Nice", 4000)):
        part = released[start : start + 4000]
        counts = np.array([part.count("North"), part.count("South")])
        assert counts.sum() == 4000  # only output labels are released
        p = mech.matrix[mech.space.index(city)[0]]
        assert stats.chisquare(counts, p * 4000).pvalue > 0.001


# ----------------------------------------------------------------------------- the file layer
# Each shape: ONE error naming the file, the line and the byte offset, exit 2, no output, no temporary.
HOSTILE = [
    (b"id,city\rParis\r", "line 1", "carriage return"),  # classic-Mac CSV: was exit 0, "0 values released"
    (b"id,city\r1,Paris\r2,Lyon\r", "line 1", "carriage return"),
    (b"id,city\n1,Paris\r2,Lyon\n", "line 2", "carriage return"),  # LF file with one CR record end
    (b"id,city\r\n1,Paris\r\n2,Lyon\r", "line 3", "carriage return"),  # CRLF file ending in a bare CR
    (b"id,city\n1,Paris,\n", "line 2", "a trailing ',' adds an empty field"),
    (b"id,city,\n1,Paris,\n", "line 1", "header column 3 has an empty name"),
    (b"id,city\n1,Paris\n2\n", "line 3", "has 1 fields, expected 2"),
    (b"id,city\n1,Paris\n\xef\xbb\xbf2,Lyon\n", "line 3", "byte-order mark"),
    (b"id,city\n1,Pa\x00ris\n", "line 2", "NUL byte"),
    (b"id,city\n1,Paris\n2,Ly\xffon\n", "line 3", "not valid UTF-8"),
    (b'id,city\n1,"Paris\n', "line 2", "not closed"),
]


@pytest.mark.parametrize(("data", "line", "what"), HOSTILE)
@pytest.mark.parametrize("chunk_rows", [1, 1000])
def test_hostile_csv_is_one_error_and_writes_nothing(mech_file, tmp_path, data, line, what, chunk_rows):
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_bytes(data)
    result = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--chunk-rows", chunk_rows)
    assert_one_line_error(result, f"{inp}: {line}", what)
    assert "byte offset" in result.stderr or "header column" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "m.npz"]


def test_a_record_over_the_cap_is_one_error(mech_file, tmp_path, monkeypatch):
    from metricdp.tabular.csv import MAX_RECORD_ENV

    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_bytes(b"id,city\n1,Paris\n2," + b"x" * 5000 + b"\n")
    monkeypatch.setenv(MAX_RECORD_ENV, "1KiB")
    result = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--chunk-rows", 1)
    assert_one_line_error(result, f"{inp}: line 3", "over the cap of 1,024 bytes", MAX_RECORD_ENV)
    assert not out.exists()
    monkeypatch.delenv(MAX_RECORD_ENV)  # the default cap lets the record through, to its unknown value
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", out), "1 value(s) not in the space")


@pytest.mark.parametrize("eols", [[b"\n"], [b"\r\n"], [b"\n", b"\r\n"], [b"\r\n", b"\r\n", b"\n"]])
def test_lf_crlf_mixtures_release_every_row_and_keep_other_bytes(mech_file, tmp_path, eols):
    records = [b"id,city,note", *(b'%d,%s,"n\r\n%d"' % (i, LABELS[i % 4].encode(), i) for i in range(12))]
    data = b"".join(r + eols[k % len(eols)] for k, r in enumerate(records))
    inp, out = tmp_path / "in.csv", tmp_path / "out.csv"
    inp.write_bytes(data)
    result = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--chunk-rows", 5, "--keep", "id",
                 "--keep", "note")
    assert result.exit_code == 0, result.output
    got = out.read_bytes()
    src_rows, out_rows = _read(inp), _read(out)
    assert len(out_rows) == len(src_rows) == 13
    assert all(r[1] in LABELS for r in out_rows[1:])
    assert [(r[0], r[2]) for r in out_rows] == [(r[0], r[2]) for r in src_rows]
    assert got.count(b"\r\n") == data.count(b"\r\n")  # line ends and quoted newlines as they were


def test_other_columns_are_named_on_stderr_and_in_json(mech_file, tmp_path):
    import json

    inp = _write(tmp_path / "in.csv", [["user", "city", "lat", "lon"], ["u1", "Paris", "48.85", "2.35"]])
    out = tmp_path / "out.csv"
    result = run("privatize", mech_file, inp, "-c", "city", "-o", out)
    assert result.exit_code == 0, result.output
    warning = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warning) == 1 and "'user', 'lat', 'lon' are written UNRELEASED" in warning[0]
    assert _read(out)[0] == ["user", "city", "lat", "lon"]  # the default still keeps them

    result = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--drop", "lat", "--drop", "lon",
                 "--keep", "user", "--json")
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr
    assert "kept unreleased (--keep): 'user'" in result.stderr and "dropped (--drop): 'lat', 'lon'" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["rows"] == 1 and doc["columns"] == {"released": ["city"], "unreleased": ["user"],
                                                   "unacknowledged": [], "dropped": ["lat", "lon"]}
    assert _read(out)[0] == ["user", "city"] and _read(out)[1][0] == "u1"
    assert out.read_bytes().startswith(b"user,city\r\nu1,")  # the csv module wrote \r\n: kept


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--drop", "town"], ["no column 'town' to be dropped (--drop)"]),
        (["--keep", "town"], ["no column 'town' to be kept (--keep)"]),
        (["--keep", "lat", "--drop", "lat"], ["column 'lat' is both kept and dropped"]),
        (["--drop", "city"], ["column 'city' is released; it cannot also be dropped"]),
    ],
)
def test_bad_keep_or_drop_is_one_error(mech_file, tmp_path, args, fragments):
    inp = _write(tmp_path / "in.csv", [["user", "city", "lat"], ["u1", "Paris", "48.85"]])
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", tmp_path / "o.csv", *args),
                          *fragments)
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("drop", [["id"], ["lat"], ["id", "lat"], ["note", "id"]])
def test_drop_removes_the_columns_and_keeps_every_other_byte(mech_file, tmp_path, drop):
    header = ["id", "city", "lat", "note"]
    rows = [[str(i), LABELS[i % 4], f"4{i}.5", 'say "hi",\nbye' if i % 2 else ""] for i in range(9)]
    inp = _write(tmp_path / "in.csv", [header, *rows])
    out = tmp_path / "out.csv"
    result = run("privatize", mech_file, inp, "-c", "city", "-o", out, "--chunk-rows", 4,
                 *[a for d in drop for a in ("--drop", d)])
    assert result.exit_code == 0, result.output
    kept = [k for k, h in enumerate(header) if h not in drop]
    got = _read(out)
    assert got[0] == [header[k] for k in kept]
    j = got[0].index("city")
    assert [[r[k] for k in kept if header[k] != "city"] for r in rows] == [
        [v for i, v in enumerate(r) if i != j] for r in got[1:]]
    assert all(r[j] in LABELS for r in got[1:])


def test_parquet_drop(mech_file, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [1, 2], "city": ["Nice", "Lyon"], "lat": [1.0, 2.0]}), tmp_path / "in.pq")
    result = run("privatize", mech_file, tmp_path / "in.pq", "-c", "city", "-o", tmp_path / "out.pq",
                 "--drop", "lat")
    assert result.exit_code == 0, result.output
    back = pq.read_table(tmp_path / "out.pq")
    assert back.column_names == ["id", "city"] and back.column("id").to_pylist() == [1, 2]
    assert "'id' are written UNRELEASED" in result.stderr


def test_tsv_and_txt_are_refused_by_name(mech_file, tmp_path):
    for name, why in (("in.tsv", "tab-separated"), ("in.txt", "plain text")):
        (tmp_path / name).write_text("id\tcity\n1\tParis\n")
        assert_one_line_error(run("privatize", mech_file, tmp_path / name, "-c", "city", "-o", tmp_path / "o.csv"),
                              "must be .csv, ", ".parquet/.pq, got", why)


def test_a_column_named_like_the_released_one_is_refused(mech_file, tmp_path):
    inp = _write(tmp_path / "in.csv", [["id", "city", "City"], ["1", "Paris", "Paris"]])
    out = tmp_path / "o.csv"
    assert_one_line_error(run("privatize", mech_file, inp, "-c", "city", "-o", out),
                          "column 'City' is named like the released column 'city'", "--keep or --drop it by name")
    assert not out.exists()
    assert run("privatize", mech_file, inp, "-c", "city", "-o", out, "--drop", "City").exit_code == 0
    assert _read(out)[0] == ["id", "city"]
