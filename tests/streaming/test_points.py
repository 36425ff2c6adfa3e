"""Streaming (lat, lon) releases: chunking, byte identity of other columns, errors by row and line, Parquet."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.streaming.points import format_fixed, privatize_points_file


def _shift(pts, first_row):
    """A deterministic 'release' (the file layer is under test, not the mechanism)."""
    return pts + np.array([0.5, -0.25])


class _Spy:
    def __init__(self):
        self.calls = []

    def __call__(self, pts, first_row):
        self.calls.append((len(pts), first_row))
        return _shift(pts, first_row)


RAW = (b'\xef\xbb\xbfid,lat,note,lon\r\n'
       b'1,48.5,"a, ""quoted""\r\nnote",2.25\r\n'
       b'2, 48.6 ,plain,2.5\r\n'
       b'3,"48.7",x,-0.125\r\n'
       b'4,-1e-3,,0\r\n')


def test_other_bytes_are_kept_across_chunks(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(RAW)
    spy = _Spy()
    stats = privatize_points_file(src, "lat", "lon", out, spy, digits=3, chunk_rows=1, keep=["id", "note"])
    assert stats.rows == 4 and [c[1] for c in spy.calls] == [1, 2, 3, 4]
    assert out.read_bytes() == (b'\xef\xbb\xbfid,lat,note,lon\r\n'
                                b'1,49.000,"a, ""quoted""\r\nnote",2.000\r\n'
                                b'2,49.100,plain,2.250\r\n'
                                b'3,49.200,x,-0.375\r\n'
                                b'4,0.499,,-0.250\r\n')
    assert stats.columns.as_dict()["unreleased"] == ["id", "note"]


def test_drop_removes_a_column_with_its_delimiter(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(RAW)
    privatize_points_file(src, "lat", "lon", out, _shift, digits=1, drop=["note", "id"])
    # 2.25 and -0.25 round half to even
    assert out.read_bytes() == b'\xef\xbb\xbflat,lon\r\n49.0,2.0\r\n49.1,2.2\r\n49.2,-0.4\r\n0.5,-0.2\r\n'


def test_a_bad_number_names_row_line_and_value_and_publishes_nothing(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    rows = [f"{i},48.{i},2.{i}" for i in range(1, 9)]
    rows[5] = "6,4_8.5,2.0"
    src.write_text("id,lat,lon\n" + "\n".join(rows) + "\n")
    out.write_text("precious\n")
    with pytest.raises(ValidationError, match=r"data row 6 \(line 7\): column 'lat' is '4_8.5', not a number"):
        privatize_points_file(src, "lat", "lon", out, _shift, chunk_rows=2, keep=["id"])
    assert out.read_text() == "precious\n"


def test_a_release_error_in_a_late_chunk_publishes_nothing(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("lat,lon\n" + "48.5,2.3\n" * 10)

    def fail_late(pts, first_row):
        if first_row > 6:
            raise ValidationError(f"data row {first_row}: refused")
        return pts

    with pytest.raises(ValidationError, match="data row 7: refused"):
        privatize_points_file(src, "lat", "lon", out, fail_late, chunk_rows=3)
    assert not out.exists()


def test_no_data_rows_is_an_error(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("lat,lon\n")
    with pytest.raises(ValidationError, match="no data rows"):
        privatize_points_file(src, "lat", "lon", out, _shift)
    assert not out.exists()


def test_python_number_rule_reads_what_pyarrow_refuses(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text('lat,lon\n 48.5 ,"2.25"\n48.5,2.25\n')
    privatize_points_file(src, "lat", "lon", out, _shift, digits=2)
    assert list(csv.reader(io.StringIO(out.read_text()))) == [["lat", "lon"], ["49.00", "2.00"], ["49.00", "2.00"]]


def test_parquet_in_batches_keeps_the_other_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    n = 25
    table = pa.table({"id": pa.array(range(n), pa.int16()), "lat": pa.array(np.linspace(40, 50, n), pa.float32()),
                      "lon": np.linspace(0, 5, n), "tag": [None if i % 3 else f"t{i}" for i in range(n)]})
    pq.write_table(table, src, row_group_size=7)
    spy = _Spy()
    stats = privatize_points_file(src, "lat", "lon", out, spy, chunk_rows=10, keep=["id", "tag"])
    assert stats.rows == n and [c[1] for c in spy.calls] == [1, 11, 21]
    back = pq.read_table(out)
    assert back.column("id").equals(table.column("id")) and back.column("tag").equals(table.column("tag"))
    assert back.schema.field("lat").type == pa.float64()
    np.testing.assert_allclose(back.column("lat").to_numpy(), table.column("lat").to_numpy() + 0.5, rtol=1e-6)
    pq.write_table(pa.table({"lat": [1.0, None], "lon": [2.0, 3.0]}), src)
    with pytest.raises(ValidationError, match="data row 2: column 'lat' is empty"):
        privatize_points_file(src, "lat", "lon", out, _shift)


@given(st.lists(st.floats(min_value=-999.4, max_value=999.4), min_size=1, max_size=30), st.integers(0, 12))
def test_format_fixed_texts_denote_the_rounded_values(values, digits):
    x = np.array(values)
    data, off, rounded = format_fixed(x, digits)
    texts = [bytes(data[off[k]:off[k + 1]]).decode() for k in range(len(x))]
    assert [float(t) for t in texts] == rounded.tolist()
    assert np.all(np.abs(rounded - x) <= 0.5 * 10.0**-digits * (1 + 1e-9) + 1e-12 * np.abs(x))
    for t, r in zip(texts, rounded, strict=True):
        assert t == f"{r:.{digits}f}" or (r == 0 and t.lstrip("-") == f"{0:.{digits}f}")


def test_geojson_from_csv_is_a_feature_collection(tmp_path):
    import json

    src, out = tmp_path / "in.csv", tmp_path / "out.geojson"
    src.write_bytes(RAW)
    stats = privatize_points_file(src, "lat", "lon", out, _shift, digits=3, chunk_rows=3, keep=["id"],
                                  drop=["note"])
    doc = json.loads(out.read_text())
    assert stats.rows == 4 and doc["type"] == "FeatureCollection" and len(doc["features"]) == 4
    f0 = doc["features"][0]
    assert f0["geometry"] == {"type": "Point", "coordinates": [2.0, 49.0]}  # [lon, lat] (RFC 7946)
    assert f0["properties"] == {"id": "1"} and "note" not in doc["features"][3]["properties"]


def test_geojson_from_parquet_keeps_typed_properties(tmp_path):
    import json

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src, out = tmp_path / "in.parquet", tmp_path / "out.geojson"
    pq.write_table(pa.table({"id": [1, 2], "lat": [48.0, 48.5], "lon": [2.0, 2.5], "tag": ['a "q"', None]}), src)
    privatize_points_file(src, "lat", "lon", out, _shift, digits=2, keep=["id", "tag"])
    doc = json.loads(out.read_text())
    assert [f["properties"] for f in doc["features"]] == [{"id": 1, "tag": 'a "q"'}, {"id": 2, "tag": None}]
    assert doc["features"][1]["geometry"]["coordinates"] == [2.25, 49.0]
