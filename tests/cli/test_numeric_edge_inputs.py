"""Numeric edge inputs of privatize-numbers, grid and build --graph: one typed error or a correct result.

Integers past 2**53, values just off the grid, cells too large for a float, subnormal weights,
epsilons written as plain decimals.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.streaming.numbers import privatize_numbers_file
from tests.cli_helpers import assert_one_line_error, run

RIGA = "56.90,24.00,57.03,24.25"


def _files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize("kind", [pa.uint64(), pa.int64()])
def test_privatize_numbers_parquet_integers_past_2_53_are_refused_not_a_traceback(tmp_path, kind):
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"age": pa.array([5, 2**63 - 1], kind)}), src)
    r = run("privatize-numbers", src, "-c", "age", "-e", "0.5", "--range", "0,100", "--out", out)
    assert_one_line_error(r, "row 2", "outside the range")
    assert _files(tmp_path) == ["in.parquet"]


def test_privatize_numbers_parquet_integer_that_float64_rounds_onto_the_grid_is_refused(tmp_path):
    # 2**53 + 1 becomes the float 2**53, a grid point; the true value is not on the grid
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"v": pa.array([2**53, 2**53 + 1], pa.int64())}), src)
    r = run("privatize-numbers", src, "-c", "v", "-e", "0.1", "--range", f"{2**53},{2**53 + 2048}", "--step", "1024",
            "--out", out)
    assert_one_line_error(r, "row 2", "not on the grid")
    assert _files(tmp_path) == ["in.parquet"]


def test_privatize_numbers_accepts_every_grid_point_far_from_zero(tmp_path):
    # (v - lo) / step carries the float error of v (ulp(1e5) / 1e-4 ~ 1.5e-7 steps): a 1e-9 tolerance refused these.
    # The file release the command runs, called directly: the command adds only flag parsing (tests/cli cover it)
    # and would format the 1,000,001 grid labels four more times for its summary line
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    values = [f"{100000 + i / 10000:.4f}" for i in range(0, 1_000_001, 997)]
    src.write_text("v\n" + "\n".join(values) + "\n")
    mech = number_mechanism(NumericGrid("100000", "100100", "0.0001"), 5.0)
    assert privatize_numbers_file(mech, src, "v", out).rows == len(values)
    assert len(out.read_text().splitlines()) == len(values) + 1


def test_privatize_numbers_refuses_a_value_just_off_the_grid(tmp_path):
    # 0.30000000001 is 1e-10 from the grid point 0.3 (1e-9 steps of 0.1): it is not a grid point
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("v\n0.3\n0.30000000001\n")
    r = run("privatize-numbers", src, "-c", "v", "-e", "1", "--range", "0,1", "--step", "0.1", "--out", out)
    assert_one_line_error(r, "line 3", "'0.30000000001' (not on the grid)")
    assert _files(tmp_path) == ["in.csv"]


def test_grid_parquet_uint64_coordinate_is_one_line_error(tmp_path):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"lat": pa.array([2**64 - 1], pa.uint64()), "lon": pa.array([24.1])}), src)
    r = run("grid", src, "--cell", "1km", "--region", RIGA, "--out", tmp_path / "cells.csv",
            "--labelled", tmp_path / "rows.parquet")
    assert_one_line_error(r, "row 1", "not a latitude")
    assert _files(tmp_path) == ["in.parquet"]


def test_grid_cell_too_large_for_a_float_is_one_line_error(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("lat,lon\n56.95,24.1\n")
    r = run("grid", src, "--cell", "1e400km", "--region", RIGA, "--out", tmp_path / "cells.csv")
    assert_one_line_error(r, "--cell", "1e400km")
    assert _files(tmp_path) == ["in.csv"]


def test_grid_tiny_prior_epsilon_is_refused_before_anything_is_written(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("lat,lon\n56.95,24.1\n")
    r = run("grid", src, "--cell", "1km", "--region", RIGA, "--out", tmp_path / "cells.csv",
            "--labelled", tmp_path / "rows.csv", "--prior-out", tmp_path / "prior.csv", "--prior-epsilon", "1e-300")
    assert_one_line_error(r, "--prior-epsilon")
    assert _files(tmp_path) == ["in.csv"]


def test_privatize_numbers_parquet_decimal_grid_points_are_all_accepted(tmp_path):
    # Arrow's decimal -> float64 cast is not correctly rounded (14.0891 and friends): read decimals as their text
    from decimal import Decimal

    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    values = [Decimal(k).scaleb(-4) for k in range(0, 1_000_001, 7)]
    pq.write_table(pa.table({"v": pa.array(values, pa.decimal128(12, 4))}), src)
    mech = number_mechanism(NumericGrid("0", "100", "0.0001"), 5.0)  # the command's release, as above
    assert privatize_numbers_file(mech, src, "v", out).rows == len(values)
    assert pq.read_table(out).num_rows == len(values)


def test_build_graph_subnormal_weight_is_one_line_error(tmp_path):
    # 1e-320 is a subnormal float: the audit divided by it and printed a numpy overflow warning
    nodes, edges, out = tmp_path / "n.csv", tmp_path / "e.csv", tmp_path / "m.npz"
    nodes.write_text("label,x,y\nA,0,0\nB,1,0\nC,1,1\n")
    edges.write_text("source,target,weight\nA,B,1e-320\nB,C,1\n")
    r = run("build", nodes, "--graph", edges, "-m", "exponential", "--epsilon", "1", "--out", out)
    assert_one_line_error(r, "line 2", "weight '1e-320'")
    assert not out.exists()


@pytest.mark.parametrize("text", ["4_8", "\u0664\u0668", "1e309", "nan"])
def test_privatize_numbers_epsilon_is_a_plain_decimal(tmp_path, text):
    # Python's float() reads '4_8' as 48 and Arabic-Indic digits as digits: a privacy parameter must be plain ASCII
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("v\n5\n")
    r = run("privatize-numbers", src, "-c", "v", "-e", text, "--range", "0,10", "--out", out)
    assert_one_line_error(r, "--epsilon")
    assert _files(tmp_path) == ["in.csv"]


@pytest.mark.parametrize("text", ["4_8", "\u0664\u0668"])
def test_build_level_is_a_plain_decimal(tmp_path, text):
    points, out = tmp_path / "p.csv", tmp_path / "m.npz"
    points.write_text("label,lat,lon\nA,56.9,24\nB,57,24.1\n")
    r = run("build", points, "-m", "exponential", "--level", text, "--radius", "1km", "--out", out)
    assert_one_line_error(r, "--level")
    assert not out.exists()


@pytest.mark.parametrize("text", ["4_8", "\u0664\u0668"])
def test_grid_prior_epsilon_is_a_plain_decimal(tmp_path, text):
    src = tmp_path / "in.csv"
    src.write_text("lat,lon\n56.95,24.1\n")
    r = run("grid", src, "--cell", "1km", "--region", RIGA, "--out", tmp_path / "cells.csv",
            "--prior-out", tmp_path / "prior.csv", "--prior-epsilon", text)
    assert_one_line_error(r, "--prior-epsilon")
    assert _files(tmp_path) == ["in.csv"]
