"""Mechanism files read only the vetted members, each sized from its header before it is
read: a genuine ``.npz`` plus one member declaring a 20,000 x 20,000
matrix made ``evaluate`` and ``privatize`` allocate 3.2 GB under a 100 MiB limit."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.errors import MechanismFileError
from metricdp.mechanisms import build
from metricdp.mechanisms.file import load_mechanism
from tests.cli_helpers import assert_one_line_error, run

LABELS = ["a", "b", "c"]
HUGE = (20_000, 20_000)  # 3.2 GB of float64


@pytest.fixture
def genuine(tmp_path: Path) -> Path:
    path = tmp_path / "m.npz"
    build("exponential", MetricSpace.from_points([[0.0], [1.0], [2.0]], LABELS), 1.0).save(path)
    return path


def _header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _add(path: Path, name: str, data: bytes) -> None:
    """Append a member (a header and a few bytes: a reader that believes the header allocates it all)."""
    with zipfile.ZipFile(path, "a") as z, z.open(name, "w") as w:
        w.write(data)


def _replace(src: Path, path: Path, name: str, data: bytes) -> None:
    """``src`` copied to ``path`` with member ``name`` (replaced or added) holding ``data``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            if info.filename != name:
                zout.writestr(info.filename, zin.read(info))
        zout.writestr(name, data)


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        try:
            out = fn()
        except Exception as ex:  # the error is the result here
            out = ex
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", ["matrix", "extra.npy", "x/matrix.npy", "matrix.NPY", "metadata"])
def test_an_unexpected_member_is_never_read(genuine: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "100MiB")
    _add(genuine, name, _header(HUGE) + b"\0" * 64)
    mech, peak = _peak(lambda: load_mechanism(genuine))
    assert not isinstance(mech, Exception), mech
    assert mech.labels == tuple(LABELS)
    assert peak < 5 * 2**20  # numpy reports its allocations to tracemalloc: nothing near 3.2 GB


@pytest.mark.parametrize("name", ["points.npy", "output_points.npy", "matrix.npy"])
def test_an_oversized_vetted_member_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 genuine: Path, name: str) -> None:
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "100MiB")
    path = tmp_path / "hostile.npz"
    _replace(genuine, path, name, _header(HUGE) + b"\0" * 64)
    err, peak = _peak(lambda: load_mechanism(path))
    assert isinstance(err, MechanismFileError)
    assert f"member {name}" in str(err) and "3.2 GB" in str(err) and "the limit is 105 MB" in str(err)
    assert peak < 5 * 2**20


def test_the_vetted_members_together_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 genuine: Path) -> None:
    """Each member within the limit, their sum over it: refused before any is read."""
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "30MiB")
    path = tmp_path / "two.npz"
    _replace(genuine, tmp_path / "one.npz", "points.npy", _header((1000, 2000)))  # 16 MB each, 32 MB together
    _replace(tmp_path / "one.npz", path, "distances.npy", _header((1000, 2000)))
    err, peak = _peak(lambda: load_mechanism(path))
    assert isinstance(err, MechanismFileError) and "arrays of the mechanism file need" in str(err)
    assert peak < 5 * 2**20


def test_a_member_named_twice_is_refused(genuine: Path) -> None:
    with pytest.warns(UserWarning, match="Duplicate name"):
        _add(genuine, "matrix.npy", _header((3, 3)) + np.eye(3).tobytes())
    with pytest.raises(MechanismFileError, match=r"member matrix\.npy appears twice"):
        load_mechanism(genuine)


def test_an_archive_of_many_members_is_refused_before_its_directory_is_read(genuine: Path) -> None:
    with zipfile.ZipFile(genuine, "a") as z:
        for i in range(100):
            z.writestr(f"junk{i}", b"")
    with pytest.raises(MechanismFileError, match=r"1[0-9]{2} members; a mechanism file has at most 8"):
        load_mechanism(genuine)


def test_a_truncated_member_is_one_error(tmp_path: Path, genuine: Path) -> None:
    path = tmp_path / "t.npz"
    with zipfile.ZipFile(genuine) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, data[: len(data) - 8] if info.filename == "matrix.npy" else data)
    with pytest.raises(MechanismFileError, match="not a mechanism file"):
        load_mechanism(path)


@pytest.mark.parametrize("command", ["evaluate", "privatize"])
def test_the_commands_ignore_the_extra_member(tmp_path: Path, genuine: Path, monkeypatch: pytest.MonkeyPatch,
                                              command: str) -> None:
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "100MiB")
    _add(genuine, "matrix", _header(HUGE) + b"\0" * 64)
    data = tmp_path / "d.csv"
    data.write_text("w\na\nb\n")
    out = tmp_path / "o.csv"
    argv = [command, genuine] if command == "evaluate" else [command, genuine, data, "-c", "w", "-o", out]
    result, peak = _peak(lambda: run(*argv))
    assert result.exit_code == 0, result.output
    assert peak < 64 * 2**20  # imports (pyarrow) included; the member alone would be 3.2 GB


def test_the_commands_refuse_an_oversized_vetted_member_in_one_line(tmp_path: Path, genuine: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "100MiB")
    path = tmp_path / "big.npz"
    _replace(genuine, path, "points.npy", _header(HUGE))
    assert_one_line_error(run("evaluate", path), "not a mechanism file", "3.2 GB", "METRICDP_MEMORY_LIMIT")
