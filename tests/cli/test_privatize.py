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
    """issue 21, 5: with header id,loc,loc only the first column used to be replaced."""
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
    """issue 21, 1: --out /dev/null replaced the device; --out INPUT overwrote the input."""
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
