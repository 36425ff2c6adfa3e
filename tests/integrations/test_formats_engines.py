"""Feather (Arrow IPC) and JSON lines on Dask and Spark: every kind of release, as the local engine writes it.

Oracles: the local engine's release of the same file. Where the release is determined
(labels and numbers with eps 60 per unit: a move has probability below 1e-25) the
engine's output must be the local engine's -- table for table (schema and metadata
included) for Feather, byte for byte for JSON lines; points are drawn, so the same rows,
the same kept columns and moved points. Through the CLI too. Small pieces, so every file
is cut across several partitions (slow: CI's full phase).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.integrations._points import privatize_points_engine
from metricdp.integrations.numbers import privatize_numbers_engine
from metricdp.integrations.persons import count_per_person
from metricdp.location.lattice import LatticePlane
from metricdp.location.release import PointSettings
from metricdp.mechanisms.base import certify
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.streaming.files import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file
from metricdp.streaming.persons import scan_persons
from tests.cli_helpers import run

pa = pytest.importorskip("pyarrow")
pytestmark = pytest.mark.slow

LABELS = ["a", "b", "c"]
SUFFIX = {"feather": ".feather", "jsonl": ".jsonl"}
AGES = number_mechanism(NumericGrid("0", "9", "1"), 60.0)  # determined
SETTINGS = PointSettings(1.0, LatticePlane(48.85, 2.35))


def _sure() -> Any:
    space = MetricSpace.from_points([[0.0], [1.0], [2.0]], LABELS)
    m = np.exp(-60.0 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 60.0, "exponential")


SURE = _sure()


def _table(n: int = 90) -> Any:
    return pa.table({"id": pa.array(range(n), pa.int32()), "w": [LABELS[i % 3] for i in range(n)],
                     "age": [i % 10 for i in range(n)], "lat": [48.8 + (i % 10) / 100 for i in range(n)],
                     "lon": [2.3 + (i % 7) / 100 for i in range(n)], "user": [f"u{i % 7}" for i in range(n)],
                     "note": [f'n "{i}", ok' for i in range(n)]}, metadata={"origin": "test"})


def _write(path: Path, table: Any) -> Path:
    if path.suffix == ".feather":
        with pa.ipc.new_file(path, table.schema) as w:
            for b in table.to_batches(max_chunksize=8):
                w.write_batch(b)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in table.to_pylist()), encoding="utf-8")
    return path


def _read(path: Path) -> Any:
    if path.suffix == ".feather":
        with pa.memory_map(str(path)) as src:
            return pa.ipc.open_file(src).read_all()
    return path.read_bytes()


def _same(a: Path, b: Path) -> bool:
    x, y = _read(a), _read(b)
    return bool(x == y) if isinstance(x, bytes) else bool(x.equals(y) and x.schema.equals(y.schema, True))


def _rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".feather":
        return list(_read(path).to_pylist())
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_labels_are_the_local_engines(engine: Any, fmt: str, tmp_path: Path) -> None:
    name, where = engine
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", _table())
    local, out = tmp_path / f"local{SUFFIX[fmt]}", tmp_path / f"eng{SUFFIX[fmt]}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        privatize_file(SURE, src, "w", local, keep=["id", "note", "age", "lat", "lon"], drop=["user"])
        if name == "dask":
            from metricdp.integrations.dask import privatize_file_dask as release
        else:
            from metricdp.integrations.spark import privatize_file_spark as release
        rows = release(SURE, src, "w", out, keep=["id", "note", "age", "lat", "lon"], drop=["user"],
                       piece_bytes=400, **where)
    assert rows == 90 and _same(local, out)


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_numbers_are_the_local_engines(engine: Any, fmt: str, tmp_path: Path) -> None:
    name, where = engine
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", _table())
    local, out = tmp_path / f"local{SUFFIX[fmt]}", tmp_path / f"eng{SUFFIX[fmt]}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        privatize_numbers_file(AGES, src, "age", local, keep=["id", "note", "w"], drop=["user", "lat", "lon"])
        rows = privatize_numbers_engine(name, AGES, src, "age", out, keep=["id", "note", "w"],
                                        drop=["user", "lat", "lon"], piece_bytes=400, **where)
    assert rows == 90 and _same(local, out)


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_points_keep_rows_and_columns_and_move(engine: Any, fmt: str, tmp_path: Path) -> None:
    name, where = engine
    table = _table()
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", table)
    out = tmp_path / f"eng{SUFFIX[fmt]}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows, plan = privatize_points_engine(name, src, "lat", "lon", out, SETTINGS, keep=["id", "note", "w", "age"],
                                             drop=["user"], piece_bytes=400, **where)
    got = _rows(out)
    assert rows == 90 and plan.dropped == ("user",)
    assert [list(r) for r in got[:1]] == [["id", "w", "age", "lat", "lon", "note"]]
    assert [(r["id"], r["w"], r["age"], r["note"]) for r in got] == [
        (r["id"], r["w"], r["age"], r["note"]) for r in table.to_pylist()]
    moved = np.array([[r["lat"], r["lon"]] for r in got]) - np.array([[r["lat"], r["lon"]] for r in table.to_pylist()])
    assert np.abs(moved).max() > 0.001


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_persons_are_the_local_pass(engine: Any, fmt: str, tmp_path: Path) -> None:
    name, where = engine
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", _table())
    ids, counts = count_per_person(name, src, "user", piece_bytes=300, **where)
    want = scan_persons(src, fmt, "user")
    assert ids.cast(pa.binary()).equals(want.ids)
    assert counts.tolist() == np.bincount(np.asarray(want.codes)).tolist()


def _each(option: str, names: str) -> list[str]:
    return [x for name in names.split() for x in (option, name)]


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_cli_every_command_on_the_engine(engine: Any, fmt: str, tmp_path: Path) -> None:
    name, where = engine
    src = _write(tmp_path / f"in{SUFFIX[fmt]}", _table())
    SURE.save(tmp_path / "m.npz")
    opts = ["--engine", name, *(["--scheduler", where["scheduler"]] if where else [])]
    out = tmp_path / f"labels{SUFFIX[fmt]}"
    res = run("privatize", tmp_path / "m.npz", src, "-c", "w", "-o", out, *_each("--keep", "id note age lat lon user"),
              *opts)
    assert res.exit_code == 0, res.output
    assert [r["w"] for r in _rows(out)] == [LABELS[i % 3] for i in range(90)]
    out = tmp_path / f"ages{SUFFIX[fmt]}"
    res = run("privatize-numbers", src, "-c", "age", "-e", "0.5", "--range", "0,9", "-o", out,
              *_each("--drop", "id note w lat lon user"), *opts)
    assert res.exit_code == 0, res.output
    assert [list(r) for r in _rows(out)[:1]] == [["age"]] and len(_rows(out)) == 90
    out = tmp_path / f"points{SUFFIX[fmt]}"
    res = run("privatize-points", src, "--lat", "lat", "--lon", "lon", "-e", "1/km", "--origin", "48.85,2.35",
              "-o", out, *_each("--drop", "id note w age user"), *opts)
    assert res.exit_code == 0, res.output
    assert len(_rows(out)) == 90
