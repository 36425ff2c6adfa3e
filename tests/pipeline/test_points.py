"""The points kind (metricdp.pipeline.points): what a release of plain decimal coordinates needs."""

from __future__ import annotations

import subprocess
import sys

import pytest

RELEASE = """
import sys
from metricdp.location.release import PointSettings, make_release
from metricdp.pipeline import run
from metricdp.streaming.points import privatize_points_file
run.COMPILED_FROM_BYTES = 0  # the compiled reader, as for a large input
privatize_points_file(sys.argv[1], "lat", "lon", sys.argv[2], make_release(PointSettings(1.0, None), None),
                      epsilon=1.0)
print("pyarrow" in sys.modules)
"""


@pytest.mark.parametrize("rows, arrow", [("48.1,11.5\n48.2,11.6\n", False), ('48.1,11.5\n"48.2",11.6\n', True)])
def test_plain_decimal_coordinates_of_a_text_file_are_released_without_pyarrow(tmp_path, rows, arrow):
    pytest.importorskip("numba")  # the compiled reader gives the plain decimals
    pytest.importorskip("pyarrow")  # a quoted field is read through it
    (tmp_path / "in.csv").write_text("lat,lon\n" + rows)
    got = subprocess.run([sys.executable, "-c", RELEASE, str(tmp_path / "in.csv"), str(tmp_path / "out.csv")],
                         capture_output=True, text=True, check=True)
    assert got.stdout.split() == [str(arrow)]
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 3
