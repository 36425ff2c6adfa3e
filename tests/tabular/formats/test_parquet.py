"""The engines' Parquet piece (:meth:`metricdp.tabular.formats.parquet.ParquetParts.batch`)."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from metricdp.tabular.formats.parquet import ParquetParts  # noqa: E402


def test_a_piece_of_several_row_groups_is_one_batch_of_their_rows_in_order(tmp_path):
    table = pa.table({"city": ["a", "b", "c", None, "e"], "age": [1, 2, 3, 4, 5]}).replace_schema_metadata({"k": "v"})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=2)  # groups of rows 0-1, 2-3, 4
    parts = ParquetParts()
    with parts.open(tmp_path / "in.parquet") as reader:
        batch = parts.batch(reader, 1, 3)
    assert batch.schema.equals(table.schema, check_metadata=True)
    assert batch.to_pydict() == {"city": ["c", None, "e"], "age": [3, 4, 5]}
