"""The numbers kind (metricdp.pipeline.numbers): what a release of plain decimals needs."""

from __future__ import annotations

import subprocess
import sys

import pytest

RELEASE = """
import sys
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.pipeline import run
from metricdp.streaming.numbers import privatize_numbers_file
run.COMPILED_FROM_BYTES = 0  # the compiled reader, as for a large input
privatize_numbers_file(number_mechanism(NumericGrid(0, 99, 1), 0.5), sys.argv[1], "age", sys.argv[2])
print("pyarrow" in sys.modules)
"""


@pytest.mark.parametrize("ages, arrow", [("7\n42\n99\n", False), ('7\n"42"\n99\n', True)])
def test_plain_decimals_of_a_text_file_are_released_without_pyarrow(tmp_path, ages, arrow):
    pytest.importorskip("numba")  # the compiled reader gives the plain decimals
    pytest.importorskip("pyarrow")  # the other fields are read through it
    (tmp_path / "in.csv").write_text("age\n" + ages)
    got = subprocess.run([sys.executable, "-c", RELEASE, str(tmp_path / "in.csv"), str(tmp_path / "out.csv")],
                         capture_output=True, text=True, check=True)
    assert got.stdout.split() == [str(arrow)]
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 4
