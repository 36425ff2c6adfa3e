"""What the format layer gives every reader and writer of a small table: read_table (checked names, values,
each row's place in the format's unit), Format.header, Format.write_table, and one error for a corrupt file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.tabular.formats import place, read_table, release_format, table_format

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def test_a_csv_read_whole_names_rows_by_their_line(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_bytes(b'\nlabel,x\r\n"a,b",1\n\n"c\nd",2.5\ne,\n')
    table = read_table(p, table_format(p))
    assert table.names == ("label", "x") and table.rows == 3
    assert table.columns["label"].to_pylist() == ["a,b", "c\nd", "e"]
    assert table.columns["x"].to_pylist() == ["1", "2.5", ""]  # a text format's values are texts
    assert table.places.tolist() == [3, 5, 7]  # blank lines and a quoted line break counted
    assert table.place(2) == "line 7" and not table.format.typed
    p.write_bytes(b"\na,a\n1,2\n")
    with pytest.raises(ValidationError, match=r"t.csv: line 2: column 'a' appears more than once"):
        read_table(p, table_format(p))


def test_a_parquet_file_read_whole_names_data_rows_and_reads_only_the_columns_asked(tmp_path: Path) -> None:
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"label": ["a", "b", None], "x": [1.5, None, 3.0]}), p, row_group_size=2)
    table = read_table(p, table_format(p), ["x"])
    assert list(table.columns) == ["x"] and table.names == ("label", "x")
    assert table.columns["x"].to_pylist() == [1.5, None, 3.0] and table.columns["x"].type == pa.float64()
    assert table.places.tolist() == [1, 2, 3] and table.place(0) == "row 1"
    with pytest.raises(ValidationError, match=r"t.parquet: no column 'y' \(columns: 'label', 'x'\)"):
        read_table(p, table_format(p), ["y"])
    with pytest.raises(ValidationError, match=r"missing\.parquet: no such file"):
        read_table(tmp_path / "missing.parquet", table_format(p))


def test_a_corrupt_row_group_is_one_error_naming_the_file(tmp_path: Path) -> None:
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(10_000, dtype=np.float64)}), p, compression="none")
    data = bytearray(p.read_bytes())
    data[4:200] = b"\xff" * 196  # the first data page's header
    p.write_bytes(bytes(data))
    with pytest.raises(ValidationError, match=r"t\.parquet: not a readable Parquet file"):
        read_table(p, table_format(p))


def test_header_names_a_csv_header_line_and_a_released_duplicate(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_bytes(b"\n\nid,city,city\n1,a,b\n")
    with pytest.raises(ValidationError, match=r"t.csv: line 3: the released column 'city' appears more than once"):
        release_format(p).header(p, released=["city"])
    p.write_bytes(b"id,,x\n")
    with pytest.raises(ValidationError, match="line 1: header column 2 has an empty name"):
        release_format(p).header(p)
    q = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": [1], "city": ["a"]}), q)
    assert release_format(q).header(q, released=["city"]) == ("id", "city")
    with pytest.raises(ValidationError, match=r"nope\.csv: no such file"):
        release_format(p).header(tmp_path / "nope.csv")


def test_write_table_csv_bytes_and_parquet_types(tmp_path: Path) -> None:
    names = ["label", "lat"]
    columns = [["a", "b,c", 'say "hi"'], np.array([0.1, 1e-05, -2.0])]
    p = tmp_path / "t.csv"
    with p.open("wb") as fh:
        table_format(p).write_table(fh, names, columns)
    assert p.read_bytes() == b'label,lat\na,0.1\n"b,c",1e-05\n"say ""hi""",-2.0\n'
    back = read_table(p, table_format(p))
    assert back.columns["label"].to_pylist() == columns[0]
    q = tmp_path / "t.parquet"
    with q.open("wb") as fh:
        table_format(q).write_table(fh, names, columns)
    got = pq.read_table(q)
    assert got.schema.field("label").type == pa.string() and got.schema.field("lat").type == pa.float64()
    assert got.column("lat").to_pylist() == [0.1, 1e-05, -2.0]


def test_a_format_that_writes_no_table_refuses_by_its_name(tmp_path: Path) -> None:
    fmt = release_format(tmp_path / "t.jsonl")
    with pytest.raises(ValidationError, match=r"a \.jsonl file is not written from a table"):
        fmt.write_table(None, ["a"], [["x"]])  # type: ignore[arg-type]


def test_place_names_a_row_in_its_unit() -> None:
    assert place("line", 12) == "line 12" and place("row", 1) == "row 1"
    assert {table_format(Path(f"x{s}")).unit for s in (".csv", ".parquet")} == {"line", "row"}
