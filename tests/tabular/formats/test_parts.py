"""The engines' side of every format (``Format.parts``), run piece by piece in this process.

Oracle: the local engine's release of the same file. With a mechanism whose release is
determined (a move has probability below 1e-25) an engine's output must be the local
engine's -- byte for byte for a text format, table for table (schema and metadata
included) for a typed one -- whatever the cut; the persons counted piece by piece must be
the local first pass's. Small pieces, so every file is cut into many.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metricdp import MetricSpace
from metricdp.errors import ValidationError
from metricdp.integrations._persons import distributed_persons, pieces_of
from metricdp.integrations._pieces import release_piece
from metricdp.integrations._plan import ENGINE_FORMATS
from metricdp.integrations._run import release_file
from metricdp.mechanisms.base import certify
from metricdp.streaming.files import privatize_file
from metricdp.streaming.persons import scan_persons
from metricdp.tabular.formats import RELEASE_FORMATS

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

LABELS = ["a", "b", "c"]
SUFFIX = {"csv": ".csv", "parquet": ".parquet", "feather": ".feather", "jsonl": ".jsonl"}


def _sure() -> Any:
    """Labels 0, 1, 2 apart by 1 with eps 60: the release is the true label (a move: p < 1e-25)."""
    space = MetricSpace.from_points([[0.0], [1.0], [2.0]], LABELS)
    m = np.exp(-60.0 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 60.0, "exponential")


SURE = _sure()


def _loop(job: Any, pieces: Any, mechanism: Any, progress: Any = None) -> list[Any]:
    return [release_piece(job, p, mechanism) for p in pieces]


def _table(n: int) -> Any:
    return pa.table({"id": pa.array(range(n), pa.int32()), "w": [LABELS[i % 3] for i in range(n)],
                     "user": [f"u{i % 7}" for i in range(n)], "note": [f'n "{i}", ok' for i in range(n)]},
                    metadata={"origin": "test"})


def _write(path: Path, table: Any, fmt: str, group: int = 5) -> Path:
    """``table`` as ``fmt``, typed formats in groups of ``group`` rows."""
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=group, compression="zstd")
    elif fmt == "feather":
        with pa.ipc.new_file(path, table.schema) as w:
            for b in table.to_batches(max_chunksize=group):
                w.write_batch(b)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + ("\n\n" if i % 4 == 0 else "\n")
                                for i, r in enumerate(table.to_pylist())), encoding="utf-8")
    else:
        import csv

        with path.open("w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\r\n")
            w.writerow(table.column_names)
            w.writerows([list(r.values()) for r in table.to_pylist()])
    return path


def _read(path: Path, fmt: str) -> Any:
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "feather":
        with pa.memory_map(str(path)) as src:
            return pa.ipc.open_file(src).read_all()
    return path.read_bytes()


def test_every_readable_format_runs_on_the_engines() -> None:
    assert set(ENGINE_FORMATS) == {n for n, f in RELEASE_FORMATS.items() if f.reads}


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 40), piece_bytes=st.integers(1, 400))
def test_an_engine_release_is_the_local_engines(tmp_path: Path, fmt: str, n: int, piece_bytes: int) -> None:
    n = max(n, fmt == "jsonl")  # a JSON-lines file has its header in its first row
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", _table(max(n, 1)).slice(0, n), fmt)
    local, eng = tmp_path / f"local{SUFFIX[fmt]}", tmp_path / f"eng{SUFFIX[fmt]}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        privatize_file(SURE, src, "w", local, keep=["id", "note"], drop=["user"])
        rows, plan = release_file("test", _loop, SURE, src, "w", eng, seed=None, inputs=(), piece_bytes=piece_bytes,
                                  keep=["id", "note"], drop=["user"])
    assert rows == n == sum(p.rows for p in plan.pieces)
    assert [p.row for p in plan.pieces] == list(np.cumsum([0] + [p.rows for p in plan.pieces])[:-1])
    a, b = _read(local, fmt), _read(eng, fmt)
    assert a == b if isinstance(a, bytes) else (a.equals(b) and a.schema.equals(b.schema, check_metadata=True))


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_persons_counted_piece_by_piece_are_the_local_pass(tmp_path: Path, fmt: str) -> None:
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", _table(30), fmt, group=4)
    plan = pieces_of(src, "user", 60, None)
    assert len(plan.pieces) > 3
    got = distributed_persons("Test", _loop, plan, "w", "user", None)
    want = scan_persons(src, fmt, "user")
    assert got.ids.equals(want.ids) and got.codes is not None
    assert got.codes.tolist() == np.asarray(want.codes).tolist()


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_bad_id_is_the_local_passs_error(tmp_path: Path, fmt: str) -> None:
    table = _table(12)
    table = table.set_column(2, "user", pa.array([f"u{i}" if i != 9 else "" for i in range(12)]))
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", table, fmt)
    with pytest.raises(ValidationError) as local:
        scan_persons(src, fmt, "user")
    with pytest.raises(ValidationError) as engine:
        distributed_persons("Test", _loop, pieces_of(src, "user", 40, None), "w", "user", None)
    assert str(engine.value) == str(local.value)


def test_a_typed_user_column_of_another_type_is_refused_by_the_driver(tmp_path: Path) -> None:
    table = _table(6).set_column(2, "user", pa.array([1.5] * 6))
    src = _write(tmp_path / "in.feather", table, "feather")
    with pytest.raises(ValidationError, match="person ids must be integers or text"):
        pieces_of(src, "user", 40, None)


@pytest.mark.parametrize("fmt", ["feather", "jsonl"])
def test_a_file_changed_after_the_cut_is_refused_by_the_worker(tmp_path: Path, fmt: str) -> None:
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", _table(20), fmt)
    plan = pieces_of(src, "user", 60, None)
    parts = plan.parts
    shorter = _write(tmp_path / f"short{SUFFIX[fmt]}", _table(3), fmt)
    src.write_bytes(shorter.read_bytes())
    with pytest.raises(ValidationError, match="the file changed while it was being released"):
        parts.read(plan.pieces[-1], plan.layout)


@pytest.mark.parametrize(("src_fmt", "out_fmt"), [("csv", "feather"), ("feather", "jsonl"), ("jsonl", "geojson")])
def test_an_output_in_another_format_is_refused_before_anything_is_read(tmp_path: Path, src_fmt: str,
                                                                        out_fmt: str) -> None:
    src = _write(tmp_path / f"in{SUFFIX[src_fmt]}", _table(6), src_fmt)
    out = tmp_path / f"out.{out_fmt}"
    with pytest.raises(ValidationError, match=rf"engines write the input's format \({src_fmt}\); a {out_fmt} output "
                                              "is written by the local engine only"):
        release_file("test", _loop, SURE, src, "w", out, seed=None, inputs=(), piece_bytes=100)
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]


@pytest.mark.parametrize(("fmt", "damage"), [
    ("jsonl", lambda data: data + b'{"id": 1, "w": "a"\n'),
    ("jsonl", lambda data: data.replace(b'"w": "b"', b'"w": "zz"', 1)),
    ("csv", lambda data: data + b'7,a,u1,"open\r\n'),
    ("feather", lambda data: data[:-40]),
])
def test_a_refused_file_is_the_local_engines_error(tmp_path: Path, fmt: str, damage: Any) -> None:
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", _table(30), fmt)
    src.write_bytes(damage(src.read_bytes()))
    with pytest.raises(ValidationError) as local:
        privatize_file(SURE, src, "w", tmp_path / f"local{SUFFIX[fmt]}", keep=["id", "user", "note"])
    with pytest.raises(ValidationError) as engine:
        release_file("test", _loop, SURE, src, "w", tmp_path / f"eng{SUFFIX[fmt]}", seed=None, inputs=(),
                     piece_bytes=100, keep=["id", "user", "note"])
    assert str(engine.value) == str(local.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]
