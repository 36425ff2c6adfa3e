"""Progress from the engines' driver: the rows of the pieces done, told as partitions complete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.integrations._backend import Backend, PieceProgress
from metricdp.integrations._run import release_file
from metricdp.mechanisms.base import certify
from metricdp.streaming.accounted import Accounting

LABELS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def mech() -> Any:
    space = MetricSpace.from_points([[0.0], [1.0], [2.0]], LABELS)
    m = np.exp(-1.0 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 1.0, "exponential")


def _input(tmp_path: Path, rows: int = 60) -> Path:
    path = tmp_path / "in.csv"
    path.write_text("user,w\n" + "".join(f"u{i % 7},{LABELS[i % 3]}\n" for i in range(rows)))
    return path


def told(calls: list[tuple[int, int | None, str]]) -> Any:
    return lambda done, total, message: calls.append((done, total, message))


def check_release_calls(calls: list[tuple[int, int | None, str]], rows: int) -> None:
    """Rows done never go back, end at the plan's total, with every partition done."""
    release = [c for c in calls if c[2].startswith("releasing")]
    assert release, calls
    assert all(total == rows for _, total, _ in release)
    dones = [d for d, _, _ in release]
    assert dones == sorted(dones) and dones[-1] == rows
    k, n = partitions(release[-1][2])
    assert k == n > 1


def partitions(message: str) -> tuple[int, int]:
    """``releasing: 3 of 5 partitions`` -> (3, 5)."""
    k, _, n, _ = message.split(": ")[1].split()
    return int(k), int(n)


def test_piece_progress_by_hand():
    class P:
        def __init__(self, index: int, rows: int) -> None:
            self.index, self.rows = index, rows

    class J:
        rule = None

    calls: list[Any] = []
    p = PieceProgress(J(), [P(0, 10), P(1, 5), P(2, 25)], told(calls))  # type: ignore[arg-type]
    p.update(25, 1)
    p.update(35, 2)
    p.update(99, 7)  # a retried task counted twice: capped at the plan's rows and pieces
    assert calls == [(25, 40, "releasing: 1 of 3 partitions"), (35, 40, "releasing: 2 of 3 partitions"),
                     (40, 40, "releasing: 3 of 3 partitions")]
    PieceProgress(J(), [P(0, 1)], None).update(1, 1)  # no callback: nothing to tell, no error


class InProcess(Backend):
    """A backend that runs the items here, in order, telling the tally after each (what an engine does)."""

    name = "InProcess"

    def connect(self, stack: Any, items: int) -> Any:
        return None

    def map(self, fn: Any, items: Any, shared: Any, weights: Any, tally: Any) -> list[Any]:
        out = []
        for k, item in enumerate(items):
            out.append(fn(item, shared))
            if tally is not None:
                tally(sum(weights[: k + 1]), k + 1)
        return out


def test_release_file_hands_progress_to_the_backend(mech, tmp_path):
    """The driver's seam: the backend gets the pieces and tells their rows; counting then releasing."""
    calls: list[Any] = []
    src = _input(tmp_path)
    backend = InProcess()
    with backend.session():
        rows, _plan = release_file("test", backend, mech, src, "w", tmp_path / "out.csv", seed=None, inputs=(),
                                   piece_bytes=40, progress=told(calls),
                                   accounting=Accounting(user_column="user", budget=10.0))
    assert rows == 60
    check_release_calls(calls, 60)
    passes = [message.split(":")[0] for _, _, message in calls]
    assert passes == sorted(passes)  # "counting rows per person" first, then "releasing"
    assert [c[0] for c in calls if c[2].startswith("counting")][-1] == 60


def test_a_backend_failure_is_one_engine_error(mech, tmp_path):
    """Whatever the engine raises is its backend's one typed line, the engine's exception chained."""
    from metricdp.errors import EngineError, ValidationError

    class Broken(InProcess):
        name = "Broken"

        def map(self, fn: Any, items: Any, shared: Any, weights: Any, tally: Any) -> list[Any]:
            raise RuntimeError("scheduler gone\nsecond line")

    with pytest.raises(EngineError, match=r"^the Broken job failed: RuntimeError: scheduler gone$") as info:
        release_file("x", Broken(), mech, _input(tmp_path), "w", tmp_path / "out.csv", piece_bytes=40)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]

    class Refusing(InProcess):
        def map(self, fn: Any, items: Any, shared: Any, weights: Any, tally: Any) -> list[Any]:
            raise ValidationError("f.csv: line 3 has 2 fields, expected 3")

    with pytest.raises(ValidationError, match=r"^f\.csv: line 3 has 2 fields, expected 3$") as refused:
        release_file("x", Refusing(), mech, _input(tmp_path), "w", tmp_path / "out.csv", piece_bytes=40)
    assert refused.value.__cause__ is None  # metricdp's own error as it was raised


@pytest.mark.slow
def test_dask_tells_progress_as_partitions_complete(mech, tmp_path, scheduler):
    from metricdp.integrations.dask import privatize_file_dask

    calls: list[Any] = []
    rows = privatize_file_dask(mech, _input(tmp_path), "w", tmp_path / "out.csv", scheduler=scheduler, piece_bytes=60,
                               progress=told(calls))
    assert rows == 60
    check_release_calls(calls, 60)
    assert len(calls) == partitions(calls[-1][2])[1]  # one call per partition


@pytest.mark.slow
def test_spark_tells_progress_as_partitions_complete(mech, tmp_path, spark):
    from metricdp.integrations.spark import privatize_file_spark

    calls: list[Any] = []
    rows = privatize_file_spark(mech, _input(tmp_path), "w", tmp_path / "out.csv", piece_bytes=60,
                                progress=told(calls))
    assert rows == 60
    check_release_calls(calls, 60)


@pytest.mark.slow
def test_points_on_dask_tell_progress_as_partitions_complete(tmp_path, scheduler):
    from metricdp.integrations._points import privatize_points_engine
    from metricdp.location.release import PointSettings

    src = tmp_path / "in.csv"
    src.write_text("lat,lon\n" + "".join(f"48.{i % 9},2.{i % 7}\n" for i in range(60)))
    calls: list[Any] = []
    rows, _ = privatize_points_engine("dask", src, "lat", "lon", tmp_path / "out.csv", PointSettings(1.0, None),
                                      scheduler=scheduler, piece_bytes=60, progress=told(calls))
    assert rows == 60
    check_release_calls(calls, 60)
