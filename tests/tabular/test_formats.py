"""The one suffix table: every suffix one format, refusals name the path, the suffix and why."""

from __future__ import annotations

import pytest

from metricdp.errors import ValidationError
from metricdp.tabular.formats import FORMATS, TABLE_FORMATS, format_of


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.csv", "csv"), ("A.CSV", "csv"), ("a.parquet", "parquet"), ("a.pq", "parquet"), ("a.jsonl", "jsonl"),
     ("a.ndjson", "jsonl"), ("a.txt", "text"), ("a.tsv", "tsv"), ("d.npy", "npy"), ("x.tar.csv", "csv")],
)
def test_suffix_table(name, fmt):
    assert format_of(name) == fmt


def test_tables_are_csv_and_parquet_only():
    assert format_of("a.pq", TABLE_FORMATS) == "parquet"
    with pytest.raises(ValidationError, match=r"^a\.tsv: must be \.csv or \.parquet/\.pq, got \.tsv \(tab-separated"):
        format_of("a.tsv", TABLE_FORMATS)
    with pytest.raises(ValidationError, match=r"got \.txt \(a \.txt file is plain text, not a table"):
        format_of("a.txt", TABLE_FORMATS)
    with pytest.raises(ValidationError, match=r"^b: must be \.csv or \.parquet/\.pq, got no extension$"):
        format_of("b", TABLE_FORMATS)
    with pytest.raises(ValidationError, match=r"^a\.json: POINTS must be \.csv, \.parquet/\.pq or \.npy, got \.json$"):
        format_of("a.json", ("csv", "parquet", "npy"), what="a.json: POINTS")


def test_every_suffix_is_lower_case_with_a_dot():
    assert all(s.startswith(".") and s == s.lower() for s in FORMATS)
    assert set(TABLE_FORMATS) <= set(FORMATS.values())
