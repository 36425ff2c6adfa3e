"""One release of a piece for every kind and format (:func:`metricdp.integrations._pieces.release_piece`).

The engines' whole file path runs in-process here (:func:`~metricdp.integrations._run.release_file`
with a runner that loops over the pieces: what a Dask or Spark task runs), cut into many
small pieces. Oracle: the local engine. With a release that is determined (labels and
numbers by mechanisms whose other outputs have probability below 1e-40; points by the
identity in place of the sampler) the engines must write the local engine's file: the
same bytes for CSV, the same table for Parquet.
"""

from __future__ import annotations

import csv
import io
import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.integrations._pieces import Done, Failed, Job, release_piece
from metricdp.integrations._plan import Piece, plan_file
from metricdp.integrations._points import PointRule
from metricdp.integrations._rule import LabelRule, NumberRule
from metricdp.integrations._run import release_file
from metricdp.location.release import PointSettings
from metricdp.mechanisms.base import certify
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.pipeline.points import PointPairs
from metricdp.streaming.files import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file
from metricdp.streaming.points import privatize_points_file

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

LABELS = ["a", "b", "c"]
_SPACE = MetricSpace.from_points([[0.0], [1.0], [2.0]], LABELS)
_M = np.exp(-200.0 * np.asarray(_SPACE.distances) / 2)
#: labels released as themselves but with probability < 1e-40
SURE_LABELS = certify(_M / _M.sum(axis=1, keepdims=True), _SPACE, 200.0, "exponential")
#: numbers released as themselves but with probability < 1e-26
SURE_NUMBERS = number_mechanism(NumericGrid("0", "9", "1"), 60.0)


def _identity(latlon: Any, first_row: int) -> Any:
    return latlon


class _IdentityPoints(PointRule):
    """Points "released" as themselves: the local engine's bytes are then the oracle, row for row."""

    def kind(self, column: str, where: str, mechanism: Any, source: Any) -> Any:
        return PointPairs(self.lat, self.lon, _identity, digits=self.digits, where=where)


def _loop(job: Any, pieces: Any, mechanism: Any, progress: Any = None) -> list[Any]:
    return [release_piece(job, p, mechanism) for p in pieces]


def _rows(n: int) -> list[list[Any]]:
    return [[f"p{i}", "x, \"y\"" if i % 3 == 0 else "", LABELS[i % 3], i % 10, 48.8 + (i % 7) / 100,
             2.3 + (i % 5) / 100] for i in range(n)]


_HEADER = ["id", "note", "city", "age", "lat", "lon"]


def _input(tmp_path: Path, fmt: str, n: int = 40) -> Path:
    if fmt == "csv":
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n").writerows([_HEADER, *_rows(n)])
        path = tmp_path / "in.csv"
        path.write_text(buf.getvalue(), newline="")
        return path
    path = tmp_path / "in.parquet"
    table = pa.table({h: list(col) for h, col in zip(_HEADER, zip(*_rows(n), strict=True), strict=True)})
    pq.write_table(table.replace_schema_metadata({"origin": "test"}), path, row_group_size=6)
    return path


_RELEASED = {"labels": ("city",), "numbers": ("age",), "points": ("lat", "lon")}


def _kept(kind: str, drop: list[str]) -> list[str]:
    """Every other column written on purpose (what leaves is not what this test is about)."""
    return [c for c in _HEADER if c not in _RELEASED[kind] and c not in drop]


def _local(kind: str, src: Path, out: Path, drop: list[str]) -> int:
    keep = _kept(kind, drop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "labels":
            return privatize_file(SURE_LABELS, src, "city", out, drop=drop, keep=keep).rows
        if kind == "numbers":
            return privatize_numbers_file(SURE_NUMBERS, src, "age", out, drop=drop, keep=keep).rows
        return privatize_points_file(src, "lat", "lon", out, _identity, drop=drop, keep=keep).rows


def _engine(kind: str, src: Path, out: Path, drop: list[str], piece_bytes: int) -> int:
    if kind == "labels":
        mech, column, rule = SURE_LABELS, "city", None
    elif kind == "numbers":
        mech, column, rule = SURE_NUMBERS, "age", NumberRule()
    else:
        mech, column, rule = None, "lat", _IdentityPoints("lat", "lon", PointSettings(1.0, None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return release_file("test", _loop, mech, src, column, out, seed=None, inputs=(), piece_bytes=piece_bytes,
                            drop=drop, keep=_kept(kind, drop), rule=rule)[0]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("kind", ["labels", "numbers", "points"])
@pytest.mark.parametrize("drop", [[], ["note"]])
def test_every_kind_and_format_writes_the_local_engines_file(tmp_path: Path, kind: str, fmt: str,
                                                              drop: list[str]) -> None:
    src = _input(tmp_path, fmt)
    local, engine = tmp_path / f"local.{fmt}", tmp_path / f"engine.{fmt}"
    piece_bytes = 90 if fmt == "csv" else 1  # several records, or one row group, per piece
    assert _local(kind, src, local, drop) == _engine(kind, src, engine, drop, piece_bytes) == 40
    if fmt == "csv":
        assert engine.read_bytes() == local.read_bytes()
        return
    want, got = pq.read_table(local), pq.read_table(engine)
    assert got.equals(want) and got.schema.equals(want.schema, check_metadata=True)
    assert pq.ParquetFile(engine).metadata.num_row_groups > 1  # the parts' row groups, joined


@pytest.mark.slow  # the kernels' first compilation takes tens of seconds
@pytest.mark.parametrize("kind", ["numbers", "points"])
def test_the_compiled_kernels_write_the_same_file(tmp_path: Path, kind: str, monkeypatch: Any) -> None:
    """Past the local engine's size for them, workers read and splice with the compiled kernels as it does."""
    import metricdp.pipeline.run as run

    monkeypatch.setattr(run, "COMPILED_FROM_BYTES", 0)  # every input is "large"
    src = _input(tmp_path, "csv")
    local, engine = tmp_path / "local.csv", tmp_path / "engine.csv"
    assert _local(kind, src, local, ["note"]) == _engine(kind, src, engine, ["note"], 90) == 40
    assert engine.read_bytes() == local.read_bytes()


def test_the_pieces_are_many_and_the_release_is_drawn_per_piece(tmp_path: Path) -> None:
    """Not the identity: a real mechanism moves values, each piece from its own stream, replayable by seed."""
    src = _input(tmp_path, "csv", 300)
    outs = []
    for k in range(2):
        out = tmp_path / f"o{k}.csv"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release_file("test", _loop, number_mechanism(NumericGrid("0", "9", "1"), 0.5), src, "age", out, seed=3,
                         inputs=(), piece_bytes=200, rule=NumberRule(), keep=_kept("numbers", []))
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    read = [list(csv.reader(io.StringIO(b.decode(), newline=""))) for b in (src.read_bytes(), outs[0])]
    assert [r[:3] + r[4:] for r in read[0]] == [r[:3] + r[4:] for r in read[1]]  # every other field kept
    assert sum(a[3] != b[3] for a, b in zip(read[0][1:], read[1][1:], strict=True)) > 100


@pytest.mark.parametrize(("rule", "mech", "before", "after", "named"), [
    (LabelRule(), SURE_LABELS, b"id,w\n1,a\n2,b\n", b"id,w\n1,a\n2,z\n", "line 3: 'z' is not a label"),
    (NumberRule(), SURE_NUMBERS, b"id,w\np,1\nq,2\n", b"id,w\np,1\nq,x\n", "line 3: 'x' cannot be released"),
])
def test_a_value_changed_after_the_plan_is_named_by_its_worker(tmp_path: Path, rule: Any, mech: Any, before: bytes,
                                                               after: bytes, named: str) -> None:
    src = tmp_path / "in.csv"
    src.write_bytes(before)
    plan = plan_file(src, rule.kind("w", str(src), mech, None), piece_bytes=1)
    st = src.stat()
    src.write_bytes(after)  # same size, same mtime: only the worker's parse can tell
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    job = Job(replace(plan, pieces=()), "w", None, str(tmp_path), rule)
    first, second = (release_piece(job, p, mech) for p in plan.pieces)
    assert isinstance(first, Done) and first.rows == 1
    assert isinstance(second, Failed) and second.input
    assert second.message == f"{src}: the file changed while it was being released ({named}); nothing written"


def test_a_piece_carries_the_drivers_releases_in_their_own_shape() -> None:
    keep = np.array([True, False, True, True])
    for given in (np.array([2, 0, 1]), np.array([[48.8, 2.3], [48.9, 2.4], [-1.5, 0.25]])):
        piece = Piece(0, 0, 1, 4, 1, keep=np.packbits(keep).tobytes(), kept=3, given=Piece.given_bytes(given))
        got_keep, got = piece.selection()
        assert got_keep is not None and got_keep.tolist() == keep.tolist() and piece.written == 3
        assert got is not None and got.shape == given.shape and (got == given).all()
    assert Piece(0, 0, 1, 4, 1).selection() == (None, None)
