"""The one output policy: ``--out`` is none of a command's inputs by any
name, never a device, FIFO, socket or directory, and appears whole or not at all --
``kill -9`` included (:func:`metricdp.io.atomic_write`, :func:`metricdp.cli._common.check_output`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import metricdp._atomic as mio
from metricdp import MetricSpace
from metricdp.errors import UnsafeOutputError
from metricdp.io import TEMP_SUFFIX, atomic_write, clean_stale_temporaries
from metricdp.mechanisms import build
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import needs

LABELS = ["a", "b", "c", "d"]
POINTS = [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """One file for every input any writing command takes."""
    d = tmp_path / "in"
    d.mkdir()
    space = MetricSpace.from_points(POINTS, LABELS)
    build("exponential", space, 1.0).save(d / "mech.npz")
    rows = "".join(f"{lab},{x!r},{y!r}\n" for lab, (x, y) in zip(LABELS, POINTS, strict=True))
    per_label = "".join(f"{lab},0.25\n" for lab in LABELS)
    places = "".join(f"u{i},{LABELS[i % 4]}\n" for i in range(8))
    return {
        "mech": d / "mech.npz",
        "points": _write(d / "points.csv", "label,x,y\n" + rows),
        "weights": _write(d / "weights.csv", "label,weight\n" + per_label),
        "prior": _write(d / "prior.csv", "label,prob\n" + per_label),
        "elastic": _write(d / "elastic.csv", "label,weight\n" + per_label),
        "base": _write(d / "base.csv", "label,weight\n" + per_label),
        "outputs": _write(d / "outputs.csv", "label,x,y\no1,0.5,0.5\no2,2.0,2.0\n"),
        "outdist": _write(d / "outdist.csv", "label,o1\n" + "".join(f"{lab},1.0\n" for lab in LABELS)),
        "data": _write(d / "data.csv", "user,place\n" + places),
        "released": _write(d / "released.csv", "user,place\n" + places),
        "true": _write(d / "true.csv", "user,place\n" + places),
        "geo": _write(d / "geo.csv", "id,latitude,longitude\n1,48.85,2.35\n2,48.86,2.36\n"),
        "snap": _write(d / "snap.csv", "label,lat,lon\np,48.85,2.35\nq,48.9,2.4\n"),
        "region": _write(d / "region.geojson", json.dumps(
            {"type": "Polygon", "coordinates": [[[2.2, 48.8], [2.5, 48.8], [2.5, 48.95], [2.2, 48.95], [2.2, 48.8]]]})),
        "text": _write(d / "text.txt", "a b c\n"),
        "keep": _write(d / "keep.txt", "a\n"),
        "vec": _write(d / "emb.vec", "3 2\nthe 0.1 0.2\ncat 0.3 0.1\ndog 0.5 0.9\n"),
    }


def _build(f: dict[str, Path], out: Path) -> list[object]:
    return ["build", f["points"], "-m", "exponential", "-e", 1, "--weights", f["weights"], "--prior", f["prior"],
            "--elastic", f["elastic"], "--base-weights", f["base"], "--outputs", f["outputs"],
            "--output-distances", f["outdist"], "-o", out]


def _points(f: dict[str, Path], out: Path, plot: Path | None = None) -> list[object]:
    extra = [] if plot is None else ["--plot", plot]
    return ["privatize-points", f["geo"], "--lat", "latitude", "--lon", "longitude", "-e", 1, "--region",
            f["region"], "--snap-to", f["snap"], *extra, "-o", out]


#: (command, argv given the files and the output path, the inputs it reads, the suffix its output needs)
COMMANDS = {
    "build": (_build, ["points", "weights", "prior", "elastic", "base", "outputs", "outdist"], ".npz"),
    "privatize": (lambda f, o: ["privatize", f["mech"], f["data"], "-c", "place", "-o", o], ["mech", "data"], ".csv"),
    "estimate": (lambda f, o: ["estimate", f["mech"], f["released"], "-c", "place", "--true", f["true"], "-o", o],
                 ["mech", "released", "true"], ".csv"),
    "report": (lambda f, o: ["report", f["mech"], "--prior", f["prior"], "-o", o], ["mech", "prior"], ".html"),
    "privatize-points": (_points, ["geo", "snap", "region"], ".csv"),
    "privatize-numbers": (lambda f, o: ["privatize-numbers", f["geo"], "-c", "id", "-e", 1, "--range", "0,9",
                                        "-o", o], ["geo"], ".csv"),
    "privatize-points --plot": (lambda f, o: _points(f, f["geo"].parent.parent / "o.csv", o),
                                ["geo", "snap", "region"], ".png"),
    "text privatize": (lambda f, o: ["text", "privatize", f["text"], "-m", f["mech"], "--keep-words", f["keep"],
                                     "-o", o],
                       ["text", "mech", "keep"], ".txt"),
    "text stats --plot": (lambda f, o: ["text", "stats", "-m", f["mech"], "--plot", o], ["mech"], ".png"),
    "data vec": (lambda f, o: ["data", "vec", f["vec"], "-n", 2, "--pool", 3, "--neighbours", 1, "-o", o], ["vec"],
                 ".csv"),
}
#: The suffix of each input file of the fixture: ``--out`` given as the input's own path
#: is only tried where the command accepts that suffix (aliases cover the others).
SUFFIX = {"mech": ".npz", "region": ".geojson", "text": ".txt", "keep": ".txt", "vec": ".vec"}
#: The extras a command checks for before its output (``report`` draws every section: ``plot``).
NEEDS = {"report": ("plot",)}
CASES = [
    pytest.param(cmd, key, alias, id=f"{cmd}:{key}:{alias}", marks=needs(*NEEDS.get(cmd, ())))
    for cmd, (_, keys, suffix) in COMMANDS.items()
    for key in keys
    for alias in ("same", "hardlink", "symlink")
    if alias != "same" or SUFFIX.get(key, ".csv") == suffix
]


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(("command", "key", "alias"), CASES)
def test_out_over_any_input_is_refused(tmp_path: Path, files: dict[str, Path], command: str, key: str,
                                       alias: str) -> None:
    argv, _, suffix = COMMANDS[command]
    target = files[key]
    if alias == "same":
        assert target.suffix == suffix
        out = target
    else:
        out = tmp_path / f"alias{suffix}"
        (os.link if alias == "hardlink" else os.symlink)(target, out)
    before = {k: p.read_bytes() for k, p in files.items()}
    listing = _listing(tmp_path)
    result = run(*argv(files, out))
    assert_one_line_error(result, "is the input")
    assert str(target) in result.stderr or str(out) in result.stderr
    assert {k: p.read_bytes() for k, p in files.items()} == before
    assert _listing(tmp_path) == listing  # nothing written, no temporary left


def test_the_commands_write_when_out_is_new(tmp_path: Path, files: dict[str, Path]) -> None:
    """The control of the test above: the same argv with a fresh output path passes the check."""
    for command in ("privatize", "estimate", "data vec"):
        argv, _, suffix = COMMANDS[command]
        out = tmp_path / f"new-{command.replace(' ', '-')}{suffix}"
        result = run(*argv(files, out))
        assert result.exit_code == 0, (command, result.output)
        assert out.is_file()


@pytest.mark.parametrize(("first", "second"), [("--out", "--csv"), ("--checkpoint", "--plot")])
def test_two_outputs_of_one_command_may_not_coincide(tmp_path: Path, first: str, second: str) -> None:
    path = tmp_path / "r.md"
    result = run("bench", "lp", "--quick", first, path, second, path)
    assert_one_line_error(result, "is the input")
    assert not path.exists()


def test_privatize_points_out_and_plot_may_not_coincide(tmp_path: Path, files: dict[str, Path]) -> None:
    out = tmp_path / "same.csv"
    assert_one_line_error(run(*_points(files, out, out)), "is the input")
    assert not out.exists()


# ----------------------------------------------------------------------------- kinds of file
def test_devices_fifos_sockets_and_directories_are_refused(tmp_path: Path, files: dict[str, Path]) -> None:
    os.mkfifo(tmp_path / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        cases = [(tmp_path / "fifo", "a FIFO"), (tmp_path / "sock", "a socket")]
        if os.path.exists("/dev/null"):
            cases.append((Path("/dev/null"), "a character device"))
        for out, kind in cases:
            assert_one_line_error(run("privatize", files["mech"], files["data"], "-c", "place", "-o", out), kind)
            with pytest.raises(UnsafeOutputError, match=kind), atomic_write(out):
                pass
    finally:
        sock.close()
    link = tmp_path / "to-fifo.csv"
    os.symlink(tmp_path / "fifo", link)  # through a symlink too
    assert_one_line_error(run("privatize", files["mech"], files["data"], "-c", "place", "-o", link), "a FIFO")
    with pytest.raises(UnsafeOutputError, match="a directory"), atomic_write(tmp_path):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "in", "sock", "to-fifo.csv"]


# ----------------------------------------------------------------------------- publishing
def _has_unnamed(directory: Path) -> bool:
    fd = mio._open_unnamed(directory)
    if fd >= 0:
        os.close(fd)
    return fd >= 0


@pytest.fixture(params=["O_TMPFILE", "fallback"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "O_TMPFILE":
        if not _has_unnamed(Path(".")):
            pytest.skip("no O_TMPFILE here")
    else:
        monkeypatch.setattr(mio, "_open_unnamed", lambda _directory: -1)
    return str(request.param)


def test_unnamed_file_is_used_where_the_system_has_one(tmp_path: Path) -> None:
    if not hasattr(os, "O_TMPFILE") or not os.path.isdir("/proc/self/fd"):
        pytest.skip("not Linux")
    if not _has_unnamed(tmp_path):
        pytest.skip("this file system has no O_TMPFILE")
    with atomic_write(tmp_path / "o.bin") as fh:
        fh.write(b"x")
        fh.flush()
        assert list(tmp_path.iterdir()) == []  # nothing has a name until the end
    assert (tmp_path / "o.bin").read_bytes() == b"x"


def test_new_and_existing_targets_are_published_whole(tmp_path: Path, way: str) -> None:
    target = tmp_path / "o.csv"
    with atomic_write(target, "w") as fh:
        fh.write("new\n")
    assert target.read_text() == "new\n"
    inode = target.stat().st_ino
    with atomic_write(target, "w") as fh:
        fh.write("replaced\n")
    assert target.read_text() == "replaced\n" and target.stat().st_ino != inode  # a new file, swapped in
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv"]


@pytest.mark.parametrize("existing", [False, True])
def test_an_unnamed_file_that_cannot_be_linked_is_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         existing: bool) -> None:
    if not _has_unnamed(tmp_path):
        pytest.skip("no O_TMPFILE here")

    def refuse(_fd: int, _name: Path) -> None:
        raise PermissionError(1, "linkat refused")

    monkeypatch.setattr(mio, "_link_unnamed", refuse)
    target = tmp_path / "o.bin"
    if existing:
        target.write_bytes(b"old")
    with atomic_write(target) as fh:
        fh.write(b"z" * 3_000_000)
    assert target.read_bytes() == b"z" * 3_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.bin"]


def test_a_writer_that_closes_the_file_still_publishes(tmp_path: Path, way: str) -> None:
    with atomic_write(tmp_path / "o.bin") as fh:
        fh.write(b"data")
        fh.close()  # pyarrow and zipfile writers may close what they were given
    assert (tmp_path / "o.bin").read_bytes() == b"data"


@pytest.mark.parametrize("existing", [False, True])
def test_a_failure_leaves_nothing(tmp_path: Path, way: str, existing: bool) -> None:
    target = tmp_path / "o.bin"
    if existing:
        target.write_bytes(b"old")
    with pytest.raises(KeyError), atomic_write(target) as fh:
        fh.write(b"half" * 1000)
        raise KeyError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["o.bin"] if existing else [])
    if existing:
        assert target.read_bytes() == b"old"


# The child loads metricdp._atomic (and the errors it imports) under an empty package: the writer under test
# needs nothing else, and the package's __init__ (numpy, scipy, pyarrow) was most of each case's time
_CHILD = """
import sys, time, types
package = types.ModuleType("metricdp")
package.__path__ = [sys.argv[3]]
sys.modules["metricdp"] = package
import metricdp._atomic as mio
if sys.argv[2] == "fallback":
    mio._open_unnamed = lambda _directory: -1
with mio.atomic_write(sys.argv[1]) as fh:
    fh.write(b"x" * 1_000_000); fh.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("existing", [False, True])
def test_kill_9_mid_write_leaves_no_partial_file(tmp_path: Path, way: str, existing: bool) -> None:
    target = tmp_path / "big.bin"
    if existing:
        target.write_bytes(b"old")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen([sys.executable, "-c", _CHILD, str(target), way, str(Path(mio.__file__).parent)],
                          stdout=subprocess.PIPE, env=env, text=True) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "writing"
            visible = sorted(p.name for p in tmp_path.iterdir())
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "big.bin")
    if way == "O_TMPFILE":
        assert visible == (["big.bin"] if existing else []) and left == []  # the kernel freed the unnamed file
    else:
        assert len(left) == 1 and left[0].endswith(TEMP_SUFFIX) and f".{child.pid}@" in left[0]
    assert target.read_bytes() == b"old" if existing else not target.exists()  # never a partial output
    with atomic_write(target) as fh:  # the next write to the target cleans up after the killed one
        fh.write(b"next")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin"] and target.read_bytes() == b"next"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_stale_temporaries_of_this_host_are_cleaned(tmp_path: Path) -> None:
    target = tmp_path / "o.csv"
    dead, alive = _dead_pid(), os.getpid()
    names = {
        "dead": f".o.csv.{dead}@{mio._HOST}.abc{TEMP_SUFFIX}",
        "alive": f".o.csv.{alive}@{mio._HOST}.abc{TEMP_SUFFIX}",
        "other host": f".o.csv.{dead}@00000000.abc{TEMP_SUFFIX}" if mio._HOST != "00000000" else "x",
        "other target": f".p.csv.{dead}@{mio._HOST}.abc{TEMP_SUFFIX}",
        "not ours": ".o.csv.123.tmp",
    }
    for name in names.values():
        (tmp_path / name).write_text("complete")
    parts = mio.scratch_directory(target)  # an engine's parts, of this live process
    stale = tmp_path / parts.name.replace(f".{alive}@", f".{dead}@")
    stale.mkdir()
    (stale / "part-0.csv").write_text("released rows")
    removed = clean_stale_temporaries(target)
    assert sorted(p.name for p in removed) == sorted([names["dead"], stale.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [v for k, v in names.items() if k != "dead"] + [parts.name])


def test_an_input_swapped_in_at_the_target_mid_write_is_not_overwritten(tmp_path: Path, way: str) -> None:
    src = tmp_path / "in.csv"
    src.write_text("data")
    target = tmp_path / "o.csv"
    with pytest.raises(UnsafeOutputError, match="now one of the inputs"), atomic_write(target, "w",
                                                                                      inputs=[src]) as fh:
        fh.write("clobbered")
        os.link(src, target)  # someone made the output path a name of the input meanwhile
    assert src.read_text() == "data" and target.read_text() == "data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "o.csv"]


def test_library_writers_keep_their_signature(tmp_path: Path) -> None:
    """streaming/, integrations/ and Mechanism.save call atomic_write(path, mode, inputs=...)."""
    src = tmp_path / "in.csv"
    src.write_text("x")
    with atomic_write(tmp_path / "o.txt", "w", inputs=[src, None]) as fh:
        fh.write("ok")
    assert (tmp_path / "o.txt").read_text() == "ok"
    mech = build("exponential", MetricSpace.from_points(np.array(POINTS), LABELS), 1.0)
    mech.save(tmp_path / "m.npz", inputs=[src])
    with pytest.raises(UnsafeOutputError, match="is the input"):
        mech.save(src, inputs=[src])
    assert src.read_text() == "x"
