"""The output-format rule of every release (:func:`metricdp.tabular.formats.output_format`), stated once."""

from __future__ import annotations

import pytest

from metricdp import ValidationError
from metricdp.tabular.formats import RELEASE_FORMATS, output_format

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
