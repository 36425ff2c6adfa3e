"""The engines' distributed count of rows per person equals the local first pass.

Oracle: :func:`metricdp.streaming.persons.scan_persons` (the local engine's pass) -- the
same distinct ids in the same order and the same code for every row -- and, for the
counts, Python's csv module with a Counter. The merge and the per-piece task run
in-process here (a runner that calls :func:`release_piece` in a loop: what a Dask or
Spark task calls), so the properties are fast; the clusters are checked once each.
"""

from __future__ import annotations

import collections
import csv
import io
import itertools
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.integrations._persons import distributed_persons, pieces_of
from metricdp.integrations._pieces import release_piece
from metricdp.integrations.persons import count_per_person
from metricdp.streaming.persons import person_table, scan_persons
from tests.integrations.conftest import dask_unavailable, spark_unavailable


def in_process(job: Any, pieces: Any, mechanism: Any, progress: Any = None) -> list[Any]:
    """What the engines run, one piece after another in this process."""
    return [release_piece(job, p, mechanism) for p in pieces]


def _write(path: Path, ids: list[str]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(["t", "user", "note"])
    for i, u in enumerate(ids):
        w.writerow([i, u, "x,\ny" if i % 4 == 0 else ""])
    path.write_bytes(buf.getvalue().encode())
    return path


IDS = st.lists(st.sampled_from(["ann", "bob", 'c"d', "e,f", "g h", "ünï", "7", "07", "z" * 30]), min_size=1,
               max_size=60)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=IDS, piece_bytes=st.integers(1, 300))
def test_distributed_pass_is_the_local_pass(tmp_path: Path, ids: list[str], piece_bytes: int) -> None:
    pa = pytest.importorskip("pyarrow")
    src = _write(tmp_path / "in.csv", ids)
    plan = pieces_of(src, "user", piece_bytes, None)
    got = distributed_persons("Test", in_process, plan, "t", "user", None)
    want = scan_persons(src, "csv", "user")
    assert got.ids.type == want.ids.type == pa.binary() and got.ids.equals(want.ids)  # Arrow end to end
    assert got.persons.tolist() == want.persons.tolist()
    assert got.codes is not None and got.codes.tolist() == want.codes.tolist()
    counts = collections.Counter(r[1] for r in list(csv.reader(io.StringIO(src.read_text(), newline="")))[1:])
    assert dict(zip(got.persons.tolist(), got.counts.tolist(), strict=True)) == counts


def test_parquet_integer_ids_and_row_groups(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    ids = [7, 12, 7, 3, 12, 7, 100] * 5
    pq.write_table(pa.table({"user": ids, "v": list(range(35))}), tmp_path / "in.parquet", row_group_size=4)
    plan = pieces_of(tmp_path / "in.parquet", "user", 1, None)
    assert len(plan.pieces) == 9
    got = distributed_persons("Test", in_process, plan, "v", "user", None)
    want = scan_persons(tmp_path / "in.parquet", "parquet", "user")
    assert got.persons.tolist() == want.persons.tolist() == ["100", "12", "3", "7"]  # text, bytewise order
    assert got.ids.equals(want.ids) and got.ids.type == pa.binary()
    assert got.codes is not None and got.codes.tolist() == want.codes.tolist()
    assert got.counts.tolist() == [5, 10, 5, 15]


def test_a_file_without_rows_has_no_persons(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    src = tmp_path / "in.csv"
    src.write_bytes(b"t,user\r\n")
    got = distributed_persons("Test", in_process, pieces_of(src, "user", 64, None), "t", "user", None)
    want = scan_persons(src, "csv", "user")
    assert got.ids.type == pa.binary() and got.ids.equals(want.ids) and len(got.ids) == 0
    assert got.counts.tolist() == [] and got.codes is not None and got.codes.size == 0
    assert got.persons.tolist() == []


def test_a_bad_id_is_refused_with_its_line_as_locally(tmp_path: Path) -> None:
    src = _write(tmp_path / "in.csv", ["ann"] * 30 + [""] + ["bob"])
    plan = pieces_of(src, "user", 50, None)
    with pytest.raises(ValidationError) as local:
        scan_persons(src, "csv", "user")
    with pytest.raises(ValidationError, match=r"user column 'user' is empty in 1 row\(s\) \(first at line\(s\) "
                                              r"\d+\): every row needs a person") as engine:
        distributed_persons("Test", in_process, plan, "t", "user", None)
    assert str(engine.value) == str(local.value)
    with pytest.raises(ValidationError, match="the user column 't' is the released column"):
        distributed_persons("Test", in_process, plan, "t", "t", None)
    with pytest.raises(ValidationError, match="no user column 'who'"):
        distributed_persons("Test", in_process, plan, "t", "who", None)


def test_person_table_adapter_sorts(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    table = person_table(pa.array(["bob", "ann", "07", "7"]), np.array([2, 5, 1, 3], dtype=np.int64))
    assert table.persons.tolist() == ["07", "7", "ann", "bob"] and table.counts.tolist() == [1, 3, 5, 2]
    with pytest.raises(ValidationError):
        person_table(pa.array(["a", "b"]), np.array([1]))


def test_engine_plan_from_the_distributed_pass_is_the_local_passs(tmp_path: Path) -> None:
    """The same cap choices for the same driver source: the two passes give the plan the same codes."""
    from metricdp.integrations._plan import plan_file
    from metricdp.integrations._rule import NumberRule
    from metricdp.integrations._run import _accounted
    from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
    from metricdp.streaming.accounted import Accounting

    mech = number_mechanism(NumericGrid("0", "9", "1"), 0.5)
    src = tmp_path / "in.csv"
    g = np.random.default_rng(1)
    src.write_text("user,age\n" + "".join(f"u{int(g.integers(7))},{int(g.integers(10))}\n" for _ in range(200)))
    plan = plan_file(src, NumberRule().kind("age", str(src), mech, None), piece_bytes=64)
    acc = Accounting("user", max_rows_per_user=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = _accounted(mech, src, plan, "age", acc, 9, None, NumberRule())
        engine = _accounted(mech, src, plan, "age", acc, 9, None, NumberRule(), ("Test", in_process))
    assert local.plan.keep.tolist() == engine.plan.keep.tolist() and int(engine.plan.keep.sum()) == 21
    assert local.report().as_dict() == engine.report().as_dict()


@pytest.mark.slow
@pytest.mark.parametrize("engine", [
    pytest.param("dask", marks=pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))),
    pytest.param("spark", marks=pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))),
])
def test_count_per_person_on_a_cluster(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    where: dict[str, Any] = {}
    if engine == "dask":
        where["scheduler"] = request.getfixturevalue("scheduler")
    else:
        request.getfixturevalue("spark")
    ids = [f"u{i % 9}" for i in range(300)] + ['q"uo,te']
    src = _write(tmp_path / "in.csv", ids)
    persons, counts = count_per_person(engine, src, "user", piece_bytes=500, **where)
    assert dict(zip(persons.to_pylist(), counts.tolist(), strict=True)) == collections.Counter(ids)
    assert persons.to_pylist() == sorted(set(ids), key=lambda s: s.encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=IDS, piece_bytes=st.integers(1, 400), blank=st.booleans())
def test_cutter_pieces_tile_the_records(tmp_path: Path, ids: list[str], piece_bytes: int, blank: bool) -> None:
    """Pieces are whole records, in order, tiling the file after the header; each reaches piece_bytes but the
    last; each one's first line is where its first record is (split_records would refuse anything else)."""
    from metricdp.tabular.columns import ColumnPlan
    from metricdp.tabular.csv import CsvReader, split_records
    from metricdp.tabular.formats.csv import CsvParts

    src = _write(tmp_path / "in.csv", ids)
    if blank:
        src.write_bytes(src.read_bytes().replace(b"\r\n", b"\r\n\n", 3))
    data = src.read_bytes()
    with src.open("rb") as fh:
        head = len(CsvReader(fh, str(src)).header().raw)
    names = ("t", "user", "note")
    cut, _ = CsvParts().cut(src, ColumnPlan(names, (), (), names, ()), piece_bytes=piece_bytes, chunk_bytes=64,
                            max_record=None)
    assert cut[0][0] == head and cut[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cut))
    assert all(stop - start >= piece_bytes for start, stop, _, _ in cut[:-1])
    assert sum(rows for *_, rows, _ in cut) == len(ids)
    for start, stop, rows, line in cut:
        buf = np.frombuffer(data[start:stop], dtype=np.uint8)
        recs = split_records(buf, eof=True, ncols=3, column=1, max_records=len(buf) + 1, where="t",
                             first_line=line, first_offset=start)
        assert len(recs.starts) == rows and recs.end == len(buf)
        assert data[:start].count(b"\n") + 1 == line  # the file line of the piece's first byte
