"""The decimal kinds (metricdp.pipeline.numbers, metricdp.pipeline.points): a text file of plain decimals is
released by the compiled reader without importing pyarrow; a quoted field is read through it."""

from __future__ import annotations

import subprocess
import sys

import pytest

START = """
import sys
from metricdp.pipeline import run
run.COMPILED_FROM_BYTES = 0  # the compiled reader, as for a large input
"""
NUMBERS = START + """
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.streaming.numbers import privatize_numbers_file
privatize_numbers_file(number_mechanism(NumericGrid(0, 99, 1), 0.5), sys.argv[1], "age", sys.argv[2])
print("pyarrow" in sys.modules)
"""
POINTS = START + """
from metricdp.location.release import PointSettings, make_release
from metricdp.streaming.points import privatize_points_file
privatize_points_file(sys.argv[1], "lat", "lon", sys.argv[2], make_release(PointSettings(1.0, None), None),
                      epsilon=1.0)
print("pyarrow" in sys.modules)
"""


@pytest.mark.parametrize("release, text, arrow", [
    (NUMBERS, "age\n7\n42\n99\n", False),
    (NUMBERS, 'age\n7\n"42"\n99\n', True),
    (POINTS, "lat,lon\n48.1,11.5\n48.2,11.6\n", False),
    (POINTS, 'lat,lon\n48.1,11.5\n"48.2",11.6\n', True),
], ids=["numbers", "numbers-quoted", "points", "points-quoted"])
def test_plain_decimals_of_a_text_file_are_released_without_pyarrow(tmp_path, release, text, arrow):
    pytest.importorskip("numba")  # the compiled reader gives the plain decimals
    pytest.importorskip("pyarrow")  # a quoted field is read through it
    (tmp_path / "in.csv").write_text(text)
    got = subprocess.run([sys.executable, "-c", release, str(tmp_path / "in.csv"), str(tmp_path / "out.csv")],
                         capture_output=True, text=True, check=True)
    assert got.stdout.split() == [str(arrow)]
    assert len((tmp_path / "out.csv").read_text().splitlines()) == len(text.splitlines())
