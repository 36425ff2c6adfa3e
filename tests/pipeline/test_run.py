"""The one chunk loop (:mod:`metricdp.pipeline.run`): which formats load the compiled kernels."""

from __future__ import annotations

import pytest


# ------------------------------------------------------------------------------ the compiled kernels
def _ages(tmp_path, suffix):
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("pyarrow.parquet").write_table(pa.table({"age": [1, 2, 3]}), tmp_path / "in.parquet")
    (tmp_path / "in.csv").write_text("age\n1\n2\n3\n")
    return tmp_path / f"in{suffix}"


@pytest.mark.parametrize("suffix, loads", [(".csv", True), (".parquet", False)])
def test_the_kernels_are_loaded_for_a_format_that_runs_them_only(tmp_path, monkeypatch, suffix, loads):
    from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
    from metricdp.pipeline import run
    from metricdp.streaming.numbers import privatize_numbers_file

    asked = []

    def kernels(current):
        asked.append(current)
        return None  # numpy: the release runs whatever was asked

    monkeypatch.setattr(run, "COMPILED_FROM_BYTES", 0)  # as for a large input
    monkeypatch.setattr(run, "lattice_kernels", kernels)
    src = _ages(tmp_path, suffix)
    privatize_numbers_file(number_mechanism(NumericGrid(0, 9, 1), 1.0), src, "age", tmp_path / f"o{suffix}")
    assert bool(asked) is loads
