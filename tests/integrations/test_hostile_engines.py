"""Hostile CSV shapes through the local, Dask and Spark engines: one error line or a correct release.

The oracle, per engine and shape, through the CLI: either exactly one ``error:`` line, exit 2 and no
output (nor any temporary file) in the directory; or exit 0 and an output whose records, read with
Python's csv module, are the input's records one for one: the same header, the same number of rows,
every released cell one of the mechanism's OUTPUT labels (disjoint from its input labels, so a true
value passed through unreleased is caught) and every other cell equal to the input's.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.errors import EngineError, ValidationError
from metricdp.integrations._backend import Backend
from metricdp.mechanisms.base import certify
from metricdp.outputs import OutputSet
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import import_or_skip
from tests.integrations.conftest import dask_unavailable, spark_unavailable

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.slow,  # with the other engine tests in CI's full phase: the fast phase then starts no JVM, no cluster
]

INPUTS = ["a", "b", "c"]
OUTPUTS = ["X", "Y"]  # disjoint from INPUTS: a true value in the released column cannot pass for a release

ENGINES = [
    "local",
    pytest.param("dask", marks=pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))),
    pytest.param("spark", marks=pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))),
]
CLUSTER_ENGINES = ENGINES[1:]

#: (name, file bytes, released column): shapes on which byte splitters, csv, pandas and Spark disagree
SHAPES: list[tuple[str, bytes, str]] = [
    ("trailing delimiter on every data row", b"id,w,home\n7,a,b,\n8,c,a,\n", "w"),
    ("trailing delimiter on one row", b"id,w\n1,a\n2,b,\n", "w"),
    ("trailing delimiter on header and rows", b"id,w,\n1,a,\n2,b,\n", "w"),
    ("ragged rows", b"id,w,note\n1,a\n2,b,x,y\n3,c,z\n", "w"),
    ("bare CR records", b"id,w\r1,a\r2,b\r", "w"),
    ("bare CR inside a record", b"id,w,note\n1,a,x\ry\n", "w"),
    ("CR LF and bare CR mixed", b"id,w\r\n1,a\r2,b\r\n", "w"),
    ("CRLF records", b"id,w\r\n1,a\r\n2,b\r\n", "w"),
    ("LF and CRLF mixed", b"id,w\n1,a\r\n2,b\n", "w"),
    ("quoted line breaks", b'id,w,note\n1,a,"x\ny"\n2,b,"p\r\nq"\n3,c,"r\rs"\n', "w"),
    ("quoted released values", b'id,w\n1,"a"\n2,"b"\n', "w"),
    ("quoted names with delimiters", b'"id,x",w,"no""te"\n1,a,"1,2"\n2,c,""""\n', "w"),
    ("BOM at the start", b"\xef\xbb\xbfid,w\n1,a\n2,b\n", "w"),
    ("BOM before the released column's name", b"\xef\xbb\xbfw,id\na,1\n", "w"),
    ("BOM in the middle", b"id,w\n1,a\n\xef\xbb\xbf2,b\n", "w"),
    ("duplicate released column", b"w,id,w\na,1,b\n", "w"),
    ("duplicate other column", b"id,w,id\n1,a,2\n", "w"),
    ("empty header field", b"id,,w\n1,x,a\n", "w"),
    ("NUL byte in a field", b"id,w\n1\x00,a\n", "w"),
    ("NUL byte in a quoted field", b'id,w\n"1\x00",a\n', "w"),
    ("unclosed quote", b'id,w\n1,"a\n2,b\n', "w"),
    ("stray quote", b'id,w\n1,a"b\n', "w"),
    ("text after a closing quote", b'id,w\n"1"x,a\n', "w"),
    ("no final line break", b"id,w\n1,a\n2,b", "w"),
    ("blank lines", b"id,w\n\n1,a\n\n\n2,b\n", "w"),
    ("whitespace-only line", b"id,w\n1,a\n \n", "w"),
    ("blanks around values", b"id,w,note\n1,a,  x  \n2,b,\t\n", "w"),
    ("header only", b"id,w\n", "w"),
    ("empty file", b"", "w"),
    ("empty released value", b"id,w\n1,\n", "w"),
    ("released value with blanks", b"id,w\n1, a\n", "w"),
    ("invalid UTF-8", b"id,w\n\xff,a\n", "w"),
    ("UTF-16 with BOM", "id,w\n1,a\n".encode("utf-16"), "w"),
    ("one column", b"w\na\nb\n\nc\n", "w"),
]


@pytest.fixture(scope="module")
def mech_file(tmp_path_factory):
    space = MetricSpace.from_points([[0.0], [1.0], [2.0]], INPUTS)
    hubs = OutputSet.from_points(space, [[0.5], [1.5]], OUTPUTS)
    m = np.array([[0.6, 0.4], [0.5, 0.5], [0.4, 0.6]])
    path = tmp_path_factory.mktemp("mech") / "m.npz"
    certify(m, space, 1.0, "custom", outputs=hubs).save(path)
    return path


def engine_args(engine: str, request: pytest.FixtureRequest) -> list[str]:
    if engine == "dask":
        return ["--engine", "dask", "--scheduler", request.getfixturevalue("scheduler")]
    if engine == "spark":
        request.getfixturevalue("spark")  # the active session is used
        return ["--engine", "spark"]
    return []


def records(data: bytes) -> list[list[str]]:
    """The input's records as Python's csv module reads them (blank lines are no records)."""
    return [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")) if r]


def assert_released_or_refused(result, data: bytes, column: str, workdir: Path, out: Path, before: set[str]) -> None:
    assert "Traceback" not in result.output
    if result.exit_code != 0:
        assert_one_line_error(result)
        assert {p.name for p in workdir.iterdir()} == before, "a refused file left something behind"
        return
    want = records(data)
    got = records(out.read_bytes())
    assert got[0] == want[0], "header changed"
    assert len(got) == len(want), f"{len(want) - 1} records in, {len(got) - 1} out"
    j = want[0].index(column)
    for a, b in zip(want[1:], got[1:], strict=True):
        assert len(a) == len(b)
        assert b[j] in OUTPUTS, f"released cell {b[j]!r} is not a release (input {a[j]!r})"
        assert a[:j] + a[j + 1 :] == b[:j] + b[j + 1 :], "a kept column changed"
    assert f"wrote {out}: {len(want) - 1} values" in result.stdout
    assert {p.name for p in workdir.iterdir()} == before | {out.name}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("shape", "data", "column"), SHAPES, ids=[s[0] for s in SHAPES])
def test_hostile_csv_is_refused_in_one_line_or_released_correctly(
    engine, shape, data, column, mech_file, tmp_path, request
):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(data)
    before = {p.name for p in tmp_path.iterdir()}
    result = run("privatize", mech_file, src, "-c", column, "-o", out, *engine_args(engine, request))
    assert_released_or_refused(result, data, column, tmp_path, out, before)


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_refuse_what_local_refuses_with_its_message(engine, mech_file, tmp_path, request):
    """The issue's shape: pandas inferred an index here and wrote true values under 'id'."""
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(b"id,w,home\n7,a,b,\n8,c,a,\n")
    result = run("privatize", mech_file, src, "-c", "w", "-o", out, *engine_args(engine, request))
    assert_one_line_error(result, f"{src}: line 2 has 4 fields, expected 3")
    (tmp_path / "bad.csv").write_bytes(b"id,w\n1,a\n2,zz\n3,b\n4,zz\n")
    result = run("privatize", mech_file, tmp_path / "bad.csv", "-c", "w", "-o", out, *engine_args(engine, request))
    assert_one_line_error(result, "1 value(s) not in the space's labels: 'zz' (2 row(s); first at line(s) 3, 5)")
    assert not out.exists()


@pytest.mark.parametrize("engine", ENGINES)
def test_drop_and_keep_leave_what_the_local_engine_leaves(engine, mech_file, tmp_path, request):
    """--drop removes columns (names and fields, quoted or not), --keep silences a warning; the same bytes as local."""
    data = b'\xef\xbb\xbfid,lat,w,"no,te",lon\r\n1,48.1,a,"x\ny",2.3\r\n2,"48,2",b,z,2.4\r\n\r\n3,48.3,c,,2.5\r\n'
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(data)
    args = ["privatize", mech_file, src, "-c", "w", "-o", out, "--drop", "lat", "--drop", "lon", "--keep", "id"]
    result = run(*args, *engine_args(engine, request))
    assert result.exit_code == 0, result.output
    assert "'no,te'" in result.stderr and "UNRELEASED" in result.stderr  # the column nobody named is named
    got = out.read_bytes()
    for x in OUTPUTS:
        got = got.replace(b"," + x.encode() + b",", b",?,")
    assert got == b'\xef\xbb\xbfid,w,"no,te"\r\n1,?,"x\ny"\r\n2,?,z\r\n\r\n3,?,\r\n'
    result = run(*args[:-2], "--drop", "nope", *engine_args(engine, request))
    assert_one_line_error(result, "no column 'nope' to be dropped")


@pytest.mark.parametrize("engine", CLUSTER_ENGINES)
def test_parquet_drop_through_the_engines(engine, mech_file, tmp_path, request):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from metricdp.mechanisms.file import load_mechanism

    table = pa.table({"id": pa.array(range(300), pa.int64()), "w": ["a", "b", "c"] * 100, "lat": [1.5] * 300},
                     metadata={b"origin": b"test"})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=50)
    rows = _library(engine)(load_mechanism(mech_file), tmp_path / "in.parquet", "w", tmp_path / "out.parquet",
                            drop=["lat"], piece_bytes=1, **_engine_kwargs(engine, request))  # a piece per row group
    back = pq.read_table(tmp_path / "out.parquet")
    assert rows == 300 and back.schema.names == ["id", "w"] and back.schema.metadata == {b"origin": b"test"}
    assert back.column("id").to_pylist() == list(range(300)) and set(back.column("w").to_pylist()) <= set(OUTPUTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet", "out.parquet"]


# ------------------------------------------------------------------- the engines' own library paths
def _library(engine: str):
    if engine == "dask":
        from metricdp.integrations.dask import privatize_file_dask

        return privatize_file_dask
    from metricdp.integrations.spark import privatize_file_spark

    return privatize_file_spark


def _engine_kwargs(engine: str, request: pytest.FixtureRequest) -> dict[str, object]:
    if engine == "dask":
        return {"scheduler": request.getfixturevalue("scheduler")}
    request.getfixturevalue("spark")
    return {}



def _big_csv(path: Path, n: int) -> bytes:
    rng = np.random.default_rng(0)
    lines = [b"id,w,note\r\n"]
    for i in range(n):
        note = b'"x\ny, ""z"""' if i % 7 == 0 else b" k "
        lines.append(b"%d,%s,%s\r\n" % (i, INPUTS[rng.integers(3)].encode(), note))
    data = b"".join(lines)
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("engine", CLUSTER_ENGINES)
def test_many_partitions_keep_every_other_byte(engine, mech_file, tmp_path, request):
    """Pieces cut at record boundaries (quoted line breaks inside): the output is the input, released cells aside."""
    from metricdp.mechanisms.file import load_mechanism

    mech = load_mechanism(mech_file)
    data = _big_csv(tmp_path / "in.csv", 2000)
    rows = _library(engine)(mech, tmp_path / "in.csv", "w", tmp_path / "out.csv", piece_bytes=4096,
                            **_engine_kwargs(engine, request))
    assert rows == 2000
    got = (tmp_path / "out.csv").read_bytes()
    for x in INPUTS:
        data = data.replace(b"," + x.encode() + b",", b",?,")
    for x in OUTPUTS:
        got = got.replace(b"," + x.encode() + b",", b",?,")
    assert got == data  # every byte outside the released column kept, CRLF and quoting included
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.csv"]


def test_dask_and_spark_seeded_releases_are_the_same_bytes(mech_file, tmp_path, request):
    """Partition k draws from partition_rng(seed, k) in both engines: same pieces, same seed, same file."""
    if dask_unavailable or spark_unavailable:
        pytest.skip(str(dask_unavailable or spark_unavailable))
    from metricdp import PrivacyLeakWarning
    from metricdp.mechanisms.file import load_mechanism

    mech = load_mechanism(mech_file)
    _big_csv(tmp_path / "in.csv", 500)
    outs = []
    for engine in ("dask", "spark"):
        with pytest.warns(PrivacyLeakWarning):
            _library(engine)(mech, tmp_path / "in.csv", "w", tmp_path / f"{engine}.csv", seed=9, piece_bytes=2048,
                             **_engine_kwargs(engine, request))
        outs.append((tmp_path / f"{engine}.csv").read_bytes())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("engine", CLUSTER_ENGINES)
def test_a_file_edited_during_the_job_is_refused_by_the_workers(engine, mech_file, tmp_path, request, monkeypatch):
    """A worker-side ValidationError (the file changed after the driver's check) is one line; nothing is written."""
    import metricdp.integrations._run as run_module

    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(b"id,w\n1,a\n2,b\n")
    original = run_module.plan_file

    def plan_then_edit(*args, **kwargs):
        plan = original(*args, **kwargs)
        src.write_bytes(b"id,w\n1,a\n2,z\n")  # same size, a true value that is no label
        return plan

    monkeypatch.setattr(run_module, "plan_file", plan_then_edit)
    result = run("privatize", mech_file, src, "-c", "w", "-o", out, *engine_args(engine, request))
    assert_one_line_error(result, f"{src}: the file changed while it was being released")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


@pytest.mark.parametrize("engine", CLUSTER_ENGINES)
def test_a_worker_exception_is_one_engine_error(engine, tmp_path, request):
    from metricdp.integrations import _pieces, _plan, _run

    src = tmp_path / "in.csv"
    src.write_bytes(b"w\na\nb\n")
    st = src.stat()
    plan = _plan.Plan(str(src), "csv", ("w",), (), 2, st.st_size, st.st_mtime_ns, layout=_csv_layout(src))
    pieces = (_plan.Piece(0, 2, 6, 2, 2),)
    job = _pieces.Job(plan, "w", None, str(tmp_path))
    not_a_mechanism = 1  # its .labels fails on the worker: stands for any worker-side exception
    if engine == "dask":
        from metricdp.integrations.dask import DaskBackend

        results = DaskBackend(request.getfixturevalue("scheduler"))(job, pieces, not_a_mechanism)
    else:
        from metricdp.integrations.spark import SparkBackend

        request.getfixturevalue("spark")
        results = SparkBackend(None)(job, pieces, not_a_mechanism)
    with pytest.raises(EngineError) as info:
        _run._check("x", plan, results)
    assert str(info.value) == "the x job failed in partition 0: AttributeError: 'int' object has no attribute 'labels'"
    assert "Traceback" in info.value.__notes__[0]  # the worker's, for --debug


def _csv_layout(src: Path):
    """The layout of a one-column CSV ``w`` (what the driver's cut gives its workers)."""
    from metricdp.tabular.columns import ColumnPlan
    from metricdp.tabular.formats.csv import CsvLayout

    return CsvLayout(str(src), ColumnPlan(("w",), ("w",), (), (), ()), b"w\n", None)


class _CrashOnArrival:
    """Unpickling this (on a Spark Python worker) ends that process at once: a worker crash."""

    def __reduce__(self):
        import os

        return (os._exit, (3,))


@pytest.mark.skipif(bool(spark_unavailable), reason=str(spark_unavailable))
def test_a_crashed_spark_python_worker_is_one_engine_error(tmp_path, request):
    from metricdp.integrations import _pieces, _plan
    from metricdp.integrations.spark import SparkBackend

    request.getfixturevalue("spark")
    src = tmp_path / "in.csv"
    src.write_bytes(b"w\na\n")
    st = src.stat()
    plan = _plan.Plan(str(src), "csv", ("w",), (), 1, st.st_size, st.st_mtime_ns, layout=_csv_layout(src))
    job = _pieces.Job(plan, "w", None, str(tmp_path))
    with pytest.raises(EngineError) as info:
        SparkBackend(None)(job, (_plan.Piece(0, 2, 4, 1, 2),), _CrashOnArrival())
    message = str(info.value)
    assert message.startswith("the Spark job failed: ") and "\n" not in message and len(message) < 500, message
    assert "Python worker exited unexpectedly" in message, message
    assert info.value.__cause__ is not None  # the Py4J error, for --debug


# ------------------------------------------------------------------------------ error mapping
class _Spark(Backend):
    """A backend named Spark that runs nothing: the error of every engine, on Spark's texts."""

    name = "Spark"

    def connect(self, stack, items):
        return None

    def map(self, fn, items, shared, weights, tally):
        return []


def test_root_cause_of_a_py4j_style_message():
    engine_error = _Spark().error

    text = textwrap.dedent("""\
        An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
        : org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 times
        org.apache.spark.api.python.PythonException: Traceback (most recent call last):
          File "/x/worker.py", line 1, in main
        _pickle.UnpicklingError: invalid load key, 'x'.
        \tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)
        Caused by: java.io.EOFException
        """)
    err = engine_error(RuntimeError(text))
    assert isinstance(err, EngineError)
    assert str(err) == "the Spark job failed: _pickle.UnpicklingError: invalid load key, 'x'."
    crash = textwrap.dedent("""\
        An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
        : org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, \
        most recent failure: Lost task 0.0 in stage 1.0 (TID 1) (host executor driver): \
        org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)
        \tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.read(PythonRunner.scala:1)
        Caused by: java.io.EOFException
        \tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:1)
        """)
    assert str(engine_error(RuntimeError(crash))) == (
        "the Spark job failed: org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)"
    )


def test_a_killed_worker_is_one_engine_error():
    distributed = import_or_skip("distributed", "dask")
    from types import SimpleNamespace

    from metricdp.integrations.dask import DaskBackend

    ex = distributed.KilledWorker("metricdp-piece-ab12-7", SimpleNamespace(address="tcp://127.0.0.1:1"),
                                  allowed_failures=3)
    err = DaskBackend(None).error(ex)
    assert isinstance(err, EngineError)
    assert str(err) == ("the Dask job failed: the worker processes running partition 7 died 4 time(s) "
                        "(out of memory? the workers' logs say why)")


@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
def test_dask_unreachable_scheduler_is_one_line(mech_file, tmp_path):
    import dask

    (tmp_path / "in.csv").write_bytes(b"w\na\n")
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        result = run("privatize", mech_file, tmp_path / "in.csv", "-c", "w", "-o", tmp_path / "out.csv",
                     "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9")
    assert_one_line_error(result, "the Dask job failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


# --------------------------------------------------------------- real processes: nothing else on stderr
_EDIT_DURING_JOB = """
import sys
from pathlib import Path
import metricdp.integrations._run as r
original = r.plan_file
def plan_then_edit(*args, **kwargs):
    plan = original(*args, **kwargs)
    Path(sys.argv[3]).write_bytes(b"id,w\\n1,a\\n2,z\\n")
    return plan
r.plan_file = plan_then_edit
from metricdp.cli import main
sys.argv = ["metricdp", "privatize", *sys.argv[2:]]
main()
"""


@pytest.mark.parametrize("engine", CLUSTER_ENGINES)
def test_worker_failure_prints_one_line_from_a_fresh_process(engine, mech_file, tmp_path):
    """A cluster of its own (Dask's LocalCluster, a quiet JVM): its logs never reach the terminal."""
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(b"id,w\n1,a\n2,b\n")
    proc = subprocess.run(
        [sys.executable, "-c", _EDIT_DURING_JOB, "x", str(mech_file), str(src), "-c", "w", "-o", str(out),
         "--engine", engine],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "the file changed" in lines[0], proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


# ------------------------------------------------------------------ what is checked after the job
def _tiny_plan(tmp_path: Path):
    from metricdp.integrations import _plan

    src = tmp_path / "in.csv"
    src.write_bytes(b"w\na\nb\nc\n")
    st = src.stat()
    pieces = (_plan.Piece(0, 2, 6, 2, 2), _plan.Piece(1, 6, 8, 1, 4))
    return _plan.Plan(str(src), "csv", ("w",), pieces, 3, st.st_size, st.st_mtime_ns, layout=_csv_layout(src))


def test_a_row_count_that_differs_from_the_input_is_an_error(tmp_path):
    from metricdp.integrations._pieces import Done, Failed
    from metricdp.integrations._run import _check

    plan = _tiny_plan(tmp_path)
    _check("x", plan, [Done(0, 2, 4), Done(1, 1, 2)])  # agrees: no error
    with pytest.raises(EngineError, match=r"^the x job wrote 0 row\(s\) for partition 1 where the input has 1; "
                                          r"nothing written$"):
        _check("x", plan, [Done(0, 2, 4), Done(1, 0, 0)])
    with pytest.raises(EngineError, match="returned 1 partition"):
        _check("x", plan, [Done(0, 2, 4)])
    with pytest.raises(ValidationError) as info:  # the input's problem comes first
        _check("x", plan, [Failed(0, False, "MemoryError: "), Failed(1, True, "f.csv: line 3 bad", "Traceback...")])
    assert str(info.value) == "f.csv: line 3 bad"
    assert info.value.__notes__ == ["partition 1, on the worker:\nTraceback..."]  # shown by --debug only


@pytest.mark.skipif(bool(dask_unavailable), reason=str(dask_unavailable))
def test_scratch_left_by_a_killed_run_is_removed_by_the_next(mech_file, tmp_path, request):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    # the engines' scratch directories are named like atomic_write's temporaries (the one output policy)
    from metricdp.io import scratch_directory

    mine = scratch_directory(tmp_path / "out.csv")
    stale = mine.with_name(mine.name.replace(f".{os.getpid()}@", f".{dead.pid}@"))
    alive = mine.with_name(mine.name.replace(f".{os.getpid()}@", ".1@"))  # pid 1 exists: another run's, left alone
    mine.rename(stale)
    (stale / "00000000.csv").write_bytes(b"a\n")
    alive.mkdir()
    (tmp_path / "in.csv").write_bytes(b"w\na\n")
    result = run("privatize", mech_file, tmp_path / "in.csv", "-c", "w", "-o", tmp_path / "out.csv",
                 *engine_args("dask", request))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [alive.name, "in.csv", "out.csv"]
