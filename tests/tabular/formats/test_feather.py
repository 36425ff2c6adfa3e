"""Arrow IPC files (Feather v2): batches read as chunks; releases of labels, numbers and points keep the schema,
its metadata and every other column; hostile files are one error and nothing written; a copy of the released
column is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pytest

from metricdp.errors import ValidationError
from metricdp.streaming import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file
from metricdp.streaming.points import privatize_points_file
from metricdp.tabular.formats import FORMATS, RELEASE_FORMATS, release_format
from metricdp.tabular.formats.feather import FeatherReader
from metricdp.tabular.header import table_header
from tests.cli_helpers import assert_one_line_error, run

from ._shared import AGES, LABELS, read_csv, rows, seeded, shift, write_csv

META = {b"source": b"survey 2024", b"pandas": b"{}"}


def _table(n: int) -> pa.Table:
    data = rows(n)
    columns = {k: [r[k] for r in data] for k in data[0]}
    schema = pa.schema([("id", pa.int64()), ("city", pa.string()), ("age", pa.int32()), ("lat", pa.float64()),
                        ("lon", pa.float64()), ("note", pa.dictionary(pa.int8(), pa.string()))], metadata=META)
    return pa.table({k: pa.array(v).cast(schema.field(k).type) for k, v in columns.items()}, schema=schema)


def _write(path: Path, n: int = 60, batch: int = 7) -> pa.Table:
    table = _table(n)
    with ipc.new_file(path, table.schema) as w:
        for b in table.to_batches(max_chunksize=batch):
            w.write_batch(b)
    return table


def _nothing_but(tmp_path: Path, *names: str) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


# ------------------------------------------------------------------------------ the format
def test_suffixes_name_the_format():
    assert FORMATS[".feather"] == FORMATS[".arrow"] == "feather"
    assert release_format("a.ARROW") is RELEASE_FORMATS["feather"] is release_format("b.feather", write=True)


def test_batches_are_cut_into_chunks_of_at_most_chunk_rows(tmp_path):
    _write(tmp_path / "in.arrow", n=20, batch=7)  # batches of 7, 7, 6
    with RELEASE_FORMATS["feather"].open(tmp_path / "in.arrow", chunk_rows=3) as reader:
        assert isinstance(reader, FeatherReader)
        assert reader.names == ("id", "city", "age", "lat", "lon", "note")
        got = [(c.first, c.rows, c.column("id").to_pylist()) for c in reader.chunks()]
    assert [(f, r) for f, r, _ in got] == [(0, 3), (3, 3), (6, 1), (7, 3), (10, 3), (13, 1), (14, 3), (17, 3)]
    assert [i for _, _, ids in got for i in ids] == list(range(20))
    assert table_header(tmp_path / "in.arrow") == reader.names


# ------------------------------------------------------------------------------ releases
def test_labels_round_trip_keeps_schema_metadata_and_columns_and_draws_as_csv(mech, tmp_path):
    table = _write(tmp_path / "in.feather", n=60, batch=7)
    write_csv(tmp_path / "in.csv", rows(60))
    stats = seeded(privatize_file, mech, tmp_path / "in.feather", "city", tmp_path / "out.feather", rng=5,
                   chunk_rows=9, keep=["note"])
    seeded(privatize_file, mech, tmp_path / "in.csv", "city", tmp_path / "out.csv", rng=5, chunk_rows=9, keep=["note"])
    assert stats.rows == 60 and stats.format == "feather" and stats.columns.kept == ("note",)
    back = feather.read_table(tmp_path / "out.feather")
    assert back.schema == table.schema and back.schema.metadata == META
    for name in ("id", "age", "lat", "lon", "note"):
        assert back.column(name).equals(table.column(name))
    assert back.column("city").to_pylist() == [r["city"] for r in read_csv(tmp_path / "out.csv")]
    assert back.column("city").to_pylist() != table.column("city").to_pylist()  # 60 rows, none changed: ~1e-9


def test_numbers_release_stays_int32_and_draws_as_csv(tmp_path):
    table = _write(tmp_path / "in.arrow")
    write_csv(tmp_path / "in.csv", rows(60))
    for suffix in (".arrow", ".csv"):
        seeded(privatize_numbers_file, AGES, tmp_path / f"in{suffix}", "age", tmp_path / f"out{suffix}", rng=3,
               chunk_rows=8, drop=["note"], keep=["id", "city", "lat", "lon"])
    back = feather.read_table(tmp_path / "out.arrow")
    assert back.column_names == ["id", "city", "age", "lat", "lon"]
    assert back.schema.field("age").type == pa.int32() and back.schema.metadata == META
    assert back.column("age").to_pylist() == [int(r["age"]) for r in read_csv(tmp_path / "out.csv")]
    assert back.column("lat").equals(table.column("lat"))


def test_points_release_writes_float64_rows_in_order(tmp_path):
    table = _write(tmp_path / "in.feather", n=25, batch=4)
    stats = privatize_points_file(tmp_path / "in.feather", "lat", "lon", tmp_path / "out.feather", shift,
                                  chunk_rows=3, keep=["id", "city", "age", "note"])
    assert stats.rows == 25
    back = feather.read_table(tmp_path / "out.feather")
    assert back.column("lat").to_pylist() == [x + 0.5 for x in table.column("lat").to_pylist()]
    assert back.column("lon").to_pylist() == [x - 0.25 for x in table.column("lon").to_pylist()]
    assert back.select(["id", "city", "age", "note"]).equals(table.select(["id", "city", "age", "note"]))


def test_an_empty_file_writes_its_schema(mech, tmp_path):
    schema = pa.schema([("id", pa.int64()), ("city", pa.string())], metadata=META)
    with ipc.new_file(tmp_path / "in.arrow", schema):
        pass
    privatize_file(mech, tmp_path / "in.arrow", "city", tmp_path / "out.arrow")
    back = feather.read_table(tmp_path / "out.arrow")
    assert back.num_rows == 0 and back.schema == schema


# --------------------------------------------------------------------------------- the CLI
def test_cli_commands_release_feather(mech_file, tmp_path):
    table = _write(tmp_path / "in.feather")
    r = run("privatize", mech_file, tmp_path / "in.feather", "-c", "city", "-o", tmp_path / "a.feather",
            "--keep", "note", "--drop", "age")
    assert r.exit_code == 0, r.output
    assert feather.read_table(tmp_path / "a.feather").column_names == ["id", "city", "lat", "lon", "note"]
    r = run("privatize-numbers", tmp_path / "in.feather", "-c", "age", "-e", "0.5", "--range", "0,99", "-o",
            tmp_path / "b.feather", *(x for c in ("id", "city", "lat", "lon", "note") for x in ("--keep", c)))
    assert r.exit_code == 0, r.output
    assert feather.read_table(tmp_path / "b.feather").schema.field("age").type == pa.int32()
    r = run("privatize-points", tmp_path / "in.feather", "--lat", "lat", "--lon", "lon", "-e", "0.5/km", "--origin",
            "47,3", "--extent", "2000km", "-o", tmp_path / "c.feather", "--drop", "id", "--drop", "city", "--drop",
            "age", "--drop", "note")
    assert r.exit_code == 0, r.output
    back = feather.read_table(tmp_path / "c.feather")
    assert back.column_names == ["lat", "lon"] and back.num_rows == table.num_rows
    r = run("privatize-points", tmp_path / "in.feather", "--lat", "lat", "--lon", "lon", "-e", "0.5/km", "--origin",
            "47,3", "-o", tmp_path / "d.geojson", "--keep", "id", "--keep", "city", "--keep", "age", "--keep", "note")
    assert r.exit_code == 0, r.output


def test_cli_output_in_another_format_is_refused(mech_file, tmp_path):
    _write(tmp_path / "in.arrow")
    assert_one_line_error(run("privatize", mech_file, tmp_path / "in.arrow", "-c", "city", "-o", tmp_path / "o.csv"),
                          "--out", "same format as INPUT (feather)")
    assert_one_line_error(run("privatize-numbers", tmp_path / "in.arrow", "-c", "age", "-e", "1", "--range", "0,99",
                              "-o", tmp_path / "o.parquet"), "same format as INPUT (feather)")
    _nothing_but(tmp_path, "in.arrow", "m.npz")


def test_cli_release_per_person_reads_the_user_column_from_the_schema(mech_file, tmp_path):
    table = _table(30).append_column("user", pa.array([["ann", "bob", "cy"][i % 3] for i in range(30)]))
    feather.write_feather(table, tmp_path / "in.feather")
    r = run("privatize", mech_file, tmp_path / "in.feather", "-c", "city", "-o", tmp_path / "o.feather",
            "--user-column", "user", "--max-rows-per-user", "4", "--keep", "user", "--keep", "id", "--keep", "note",
            "--drop", "age", "--drop", "lat", "--drop", "lon", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["accounting"]["withheld_cap"] == 18
    back = feather.read_table(tmp_path / "o.feather")
    ids = back.column("id").to_pylist()
    assert len(ids) == 12 and ids == sorted(ids) and back.schema.metadata == META  # 4 rows of each person, in order
    assert sorted(back.column("user").to_pylist()) == ["ann"] * 4 + ["bob"] * 4 + ["cy"] * 4
    assert back.column("user").to_pylist() == [["ann", "bob", "cy"][i % 3] for i in ids]


# ------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("damage", ["truncated", "footer", "empty", "parquet", "stream"])
def test_hostile_files_are_one_error_and_nothing_written(mech, mech_file, tmp_path, damage):
    src = tmp_path / "in.feather"
    _write(src)
    data = src.read_bytes()
    if damage == "truncated":
        src.write_bytes(data[: len(data) // 2])
    elif damage == "footer":
        src.write_bytes(data[:-7])
    elif damage == "empty":
        src.write_bytes(b"")
    elif damage == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(_table(5), src)
    else:  # an Arrow stream is not an Arrow file
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, _table(5).schema) as w:
            w.write_table(_table(5))
        src.write_bytes(sink.getvalue().to_pybytes())
    with pytest.raises(ValidationError, match=r"in\.feather: not a readable Arrow IPC \(Feather v2\) file"):
        privatize_file(mech, src, "city", tmp_path / "out.feather")
    assert_one_line_error(run("privatize", mech_file, src, "-c", "city", "-o", tmp_path / "out.feather"),
                          str(src), "not a readable Arrow IPC")
    assert_one_line_error(run("privatize-points", src, "--lat", "lat", "--lon", "lon", "-e", "1", "--origin", "47,3",
                              "-o", tmp_path / "out.feather"), "not a readable Arrow IPC")
    _nothing_but(tmp_path, "in.feather", "m.npz")


def test_a_damaged_batch_body_names_the_batch(mech, tmp_path):
    """Offsets of a string column pointing past its data: refused by the batch's full validation, not read."""
    src = tmp_path / "in.arrow"
    table = _write(src, n=30, batch=10)
    cities = table.column("city").to_pylist()[:10]
    offsets = np.cumsum([0] + [len(c) for c in cities]).astype("<i4").tobytes()
    data = bytearray(src.read_bytes())
    at = data.find(offsets)  # the first batch's city offsets, as written
    assert at > 0 and data.find(offsets, at + 1) < 0
    data[at + 8: at + 12] = (10**6).to_bytes(4, "little")
    src.write_bytes(bytes(data))
    with pytest.raises(ValidationError, match=r"in\.arrow: record batch 1 of the Arrow file cannot be read"):
        privatize_file(mech, src, "city", tmp_path / "out.arrow")
    _nothing_but(tmp_path, "in.arrow")


def test_a_kept_copy_of_the_released_values_is_refused(mech, mech_file, tmp_path):
    table = _table(40).append_column("town", _table(40).column("city"))
    feather.write_feather(table, tmp_path / "in.feather")
    with pytest.raises(ValidationError, match=r"column 'town' holds the released column's true values \('city'\) in "
                                              r"40 of 40 compared rows, first at data row 1"):
        privatize_file(mech, tmp_path / "in.feather", "city", tmp_path / "out.feather")
    assert_one_line_error(run("privatize", mech_file, tmp_path / "in.feather", "-c", "city", "-o",
                              tmp_path / "out.feather"), "column 'town'", "--drop it, or --keep it on purpose")
    table = _table(40).append_column("age_months", pa.array(np.asarray(_table(40).column("age")) * 12))
    feather.write_feather(table, tmp_path / "ages.feather")
    assert_one_line_error(run("privatize-numbers", tmp_path / "ages.feather", "-c", "age", "-e", "0.5", "--range",
                              "0,99", "-o", tmp_path / "out.feather"), "'age_months'", "affine re-encoding")
    _nothing_but(tmp_path, "in.feather", "ages.feather", "m.npz")
    privatize_file(mech, tmp_path / "in.feather", "city", tmp_path / "out.feather", keep=["town"])  # on purpose
    assert feather.read_table(tmp_path / "out.feather").column("town").equals(_table(40).column("city"))
    assert set(LABELS) >= set(feather.read_table(tmp_path / "out.feather").column("city").to_pylist())
