"""table_header: a table's names without its rows, refusals before any work."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metricdp.errors import ValidationError
from metricdp.tabular.header import table_header


def test_csv_and_parquet_names(tmp_path):
    (tmp_path / "a.csv").write_bytes(b'\xef\xbb\xbf\r\n"id","ci,ty"\r\n1,x\r\n')
    assert table_header(tmp_path / "a.csv") == ("id", "ci,ty")
    pq.write_table(pa.table({"id": [1], "city": ["x"]}), tmp_path / "a.pq")
    assert table_header(tmp_path / "a.pq") == ("id", "city")


def test_refusals(tmp_path):
    pq.write_table(pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["lat", "lat"]), tmp_path / "d.parquet")
    with pytest.raises(ValidationError, match=r"d\.parquet: the released column 'lat' appears more than once"):
        table_header(tmp_path / "d.parquet", ["lat"])
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ValidationError, match="not a readable Parquet file"):
        table_header(tmp_path / "bad.parquet")
    (tmp_path / "d.csv").write_bytes(b"lat,lon,lat\n")
    with pytest.raises(ValidationError, match=r"d.csv: line 1: the released column 'lat' appears more than once"):
        table_header(tmp_path / "d.csv", ["lat", "lon"])
    with pytest.raises(ValidationError, match="no such file"):
        table_header(tmp_path / "none.pq")
    with pytest.raises(ValidationError, match=r"must be \.csv, .*\.parquet/\.pq, got \.tsv"):
        table_header(tmp_path / "x.tsv")
