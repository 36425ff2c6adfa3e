"""The output-format rule of every release (:func:`metricdp.pipeline.run.output_format`), stated once."""

from __future__ import annotations

import pytest

from metricdp import ValidationError
from metricdp.pipeline.run import output_format
from metricdp.tabular.formats import RELEASE_FORMATS

CSV, PARQUET, GEOJSON = (RELEASE_FORMATS[n] for n in ("csv", "parquet", "geojson"))


def test_an_output_is_written_in_its_inputs_format():
    assert output_format(CSV, "out.CSV") is CSV
    assert output_format(PARQUET, "out.pq") is PARQUET
    assert output_format(CSV, "out.released") is CSV  # a suffix that names no format keeps the input's
    assert output_format(CSV, "out") is CSV


def test_a_format_that_is_only_written_is_taken_where_allowed():
    assert output_format(CSV, "out.geojson") is GEOJSON
    with pytest.raises(ValidationError, match=r"^out.geojson: a release is written in its input's format "
                                              r"\(csv: \.csv\), got \.geojson$"):
        output_format(CSV, "out.geojson", written_only=False)


@pytest.mark.parametrize("name", ["out.parquet", "out.csv.jsonl", "out.txt", "out.tsv"])
def test_another_format_is_refused_naming_both(name):
    with pytest.raises(ValidationError, match=r"its input's format \(csv: \.csv\), got \."):
        output_format(CSV, name)


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
