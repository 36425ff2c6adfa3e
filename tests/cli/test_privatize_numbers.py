"""``metricdp privatize-numbers`` end to end: CSV and Parquet, the leaves report, --json, one-line errors."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from metricdp.cli.privatize_numbers import register
from tests.cli_helpers import assert_one_line_error, make_app

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return make_app(register)


def _invoke(app, *args):
    return runner.invoke(app, ["privatize-numbers", *map(str, args)])


def _csv(path, values, header="id,age,city"):
    # ids apart from the ages (an id equal to the released age is refused as a copy)
    path.write_text(header + "\n" + "".join(f"{1000 + i},{v},c{i % 3}\n" for i, v in enumerate(values)))
    return path


def test_csv_release_json_and_leaves_report(app, tmp_path):
    src, out = _csv(tmp_path / "in.csv", [i % 100 for i in range(400)]), tmp_path / "out.csv"
    r = _invoke(app, src, "-c", "age", "-e", "0.5", "--range", "0,99", "--out", out, "--drop", "city", "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["rows"] == 400 and summary["grid_points"] == 100 and summary["mechanism"] == "clamped-geometric"
    assert summary["columns"]["dropped"] == ["city"] and summary["columns"]["unreleased"] == ["id"]
    assert "'id' are written UNRELEASED" in r.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "id,age" and all(0 <= int(x.split(",")[1]) <= 99 for x in lines[1:])


def test_discrete_laplace_on_a_decimal_grid_with_negative_range(app, tmp_path):
    src, out = _csv(tmp_path / "in.csv", ["-1.5", "0.0", "2.5"] * 50), tmp_path / "out.csv"
    r = _invoke(app, src, "-c", "age", "-e", "1", "--range=-2.5,2.5", "--step", "0.5", "-m", "discrete-laplace",
                "--out", out, "--keep", "id", "--keep", "city")
    assert r.exit_code == 0, r.output
    assert "released by discrete-laplace on -2.5..2.5 step 0.5 at epsilon=1 per unit" in r.stdout
    got = [x.split(",")[1] for x in out.read_text().splitlines()[1:]]
    assert all(float(x) * 2 == int(float(x) * 2) for x in got)  # grid points, possibly past the range


def test_parquet(app, tmp_path):
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"age": pa.array([20, 30, 40], pa.int32())}), src)
    r = _invoke(app, src, "-c", "age", "-e", "0.2", "--range", "0,120", "--out", out, "--seed", "3")
    assert r.exit_code == 0, r.output
    assert "warning: --seed" in r.stderr
    assert pq.read_table(out).schema.field("age").type == pa.int32()


@pytest.mark.parametrize(("args", "fragments"), [
    (["--range", "0"], ["--range must be LO,HI"]),
    (["--range", "0,10", "--step", "3"], ["--range 0,10 --step 3", "not a whole number of steps"]),
    (["--range", "0,99", "-m", "laplace"], ["--mechanism must be one of clamped-geometric, discrete-laplace"]),
    (["--range", "0,99", "--out-of-range", "drop"], ["--out-of-range must be one of error, clamp"]),
    (["--range", "0,99", "--off-grid", "up"], ["--off-grid must be one of error, round"]),
    (["--range", "0,99", "-e", "20"], ["--mechanism clamped-geometric --epsilon 20", "underflow"]),
    (["--range", "0,99", "-e", "-1"], ["--epsilon"]),
    (["--range", "0,99", "-c", "nope"], ["nope"]),
    (["--range", "0,99", "--drop", "zzz"], ["zzz", "--drop"]),
])
def test_argument_errors_are_one_line(app, tmp_path, args, fragments):
    src, out = _csv(tmp_path / "in.csv", [1, 2, 3]), tmp_path / "out.csv"
    base = {"-c": "age", "-e": "1"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    r = _invoke(app, src, *flat, "--out", out)
    assert_one_line_error(r, *fragments)
    assert not out.exists()


def test_bad_values_one_line_error_with_file_line_column(app, tmp_path):
    src, out = _csv(tmp_path / "in.csv", [1, 2, "1_000", 4, 300]), tmp_path / "out.csv"
    r = _invoke(app, src, "-c", "age", "-e", "1", "--range", "0,99", "--out", out)
    assert_one_line_error(r, str(src), "column 'age'", "line 4: '1_000' (not a number)",
                          "line 6: '300' (outside the range)", "nothing written")
    assert not out.exists()
    r = _invoke(app, src, "-c", "age", "-e", "1", "--range", "0,99", "--out", out, "--out-of-range", "clamp")
    assert_one_line_error(r, "'1_000' (not a number)")


def test_output_refusals(app, tmp_path):
    src = _csv(tmp_path / "in.csv", [1, 2])
    r = _invoke(app, src, "-c", "age", "-e", "1", "--range", "0,9", "--out", src)
    assert r.exit_code == 2 and "error:" in r.stderr
    r = _invoke(app, src, "-c", "age", "-e", "1", "--range", "0,9", "--out", tmp_path / "o.parquet")
    assert_one_line_error(r, "same format as INPUT (csv)")
    r = _invoke(app, tmp_path / "missing.csv", "-c", "age", "-e", "1", "--range", "0,9", "--out", tmp_path / "o.csv")
    assert_one_line_error(r, "no such file")
