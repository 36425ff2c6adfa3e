"""Mechanism files (round trip, plain-numpy readability, refusals), POINTS files, atomic writes."""

from __future__ import annotations

import json
import pickle
import zipfile

import numpy as np
import pytest

import metricdp
from metricdp import MechanismFileError, MetricSpace, ValidationError
from metricdp.io import atomic_write, read_points
from metricdp.mechanisms.base import Mechanism, certify
from metricdp.mechanisms.file import load_mechanism

LABELS = ["a", "b", "c"]
D3 = np.array([[0.0, 1.0, 3.0], [1.0, 0.0, 2.0], [3.0, 2.0, 0.0]])


def _em(space: MetricSpace, eps: float) -> np.ndarray:
    m = np.exp(-eps * np.asarray(space.distances) / 2)
    return m / m.sum(axis=1, keepdims=True)


@pytest.fixture
def mech() -> Mechanism:
    space = MetricSpace.from_points([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], LABELS)
    params, info = {"inner_epsilon": 1.0}, {"lp": {"variables": 9}}
    return certify(_em(space, 1.0), space, 1.0, "exponential", params, info)


def _write_npz(path, **arrays):
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _arrays(mech: Mechanism) -> dict:
    return {
        "matrix": np.asarray(mech.matrix),
        "distances": np.asarray(mech.space.distances),
        "labels": np.array(mech.labels),
        "metadata": np.array(json.dumps({"mechanism": "x", "epsilon": 1.0, "params": {}})),
    }


# ----------------------------------------------------------------------------- round trip
def test_round_trip_keeps_everything(mech, tmp_path):
    path = tmp_path / "m.npz"
    mech.save(path)
    back = load_mechanism(path)
    np.testing.assert_array_equal(back.matrix, mech.matrix)
    np.testing.assert_array_equal(back.space.distances, mech.space.distances)
    np.testing.assert_array_equal(back.space.points, mech.space.points)
    assert back.labels == mech.labels
    assert back.epsilon == mech.epsilon
    assert back.name == "exponential"
    assert dict(back.params) == {"inner_epsilon": 1.0}
    assert back.info["lp"] == {"variables": 9}
    assert back.info["epsilon_audit"] == pytest.approx(mech.info["epsilon_audit"])
    assert back.space.metric == "euclidean"
    assert back.exact is True
    assert load_mechanism(path).labels == mech.labels


def test_file_readable_by_numpy_alone(mech, tmp_path):
    path = tmp_path / "m.npz"
    mech.save(path)
    with np.load(path, allow_pickle=False) as z:
        assert set(z.files) == {"matrix", "distances", "labels", "metadata", "points"}
        assert z["matrix"].dtype == np.float64
        assert z["matrix"].shape == (3, 3)
        assert z["distances"].dtype == np.float64
        assert z["labels"].dtype.kind == "U"
        assert z["metadata"].shape == ()
        meta = json.loads(str(z["metadata"]))
    assert {"mechanism", "epsilon", "params", "metricdp_version", "lp"} <= meta.keys()
    assert meta["metricdp_version"] == metricdp.__version__
    assert meta["space"]["metric"] == "euclidean"


def test_save_is_atomic(mech, tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(b"old")

    class Boom(Exception):
        pass

    with pytest.raises(Boom), atomic_write(path) as fh:
        fh.write(b"half")
        raise Boom
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz"]  # no temporary left behind


def test_atomic_write_text_and_missing_directory(tmp_path):
    with atomic_write(tmp_path / "t.csv", "w") as fh:
        fh.write("x,y\n")
    assert (tmp_path / "t.csv").read_text() == "x,y\n"
    with pytest.raises(ValidationError, match="does not exist"), atomic_write(tmp_path / "no" / "t.csv", "w"):
        pass


# ----------------------------------------------------------------------------- refusals
def test_refuses_truncated_file(mech, tmp_path):
    path = tmp_path / "m.npz"
    mech.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(MechanismFileError, match=r"m\.npz"):
        load_mechanism(path)


def test_refuses_wrong_shapes(mech, tmp_path):
    arrays = _arrays(mech)
    arrays["matrix"] = np.full((3, 2), 0.5)
    _write_npz(tmp_path / "m.npz", **arrays)
    with pytest.raises(MechanismFileError, match=r"matrix has shape \(3, 2\), expected \(3, 3\) for 3 lab"):
        load_mechanism(tmp_path / "m.npz")
    arrays = _arrays(mech)
    arrays["distances"] = np.zeros((2, 2))
    _write_npz(tmp_path / "d.npz", **arrays)
    with pytest.raises(MechanismFileError, match=r"distances has shape \(2, 2\)"):
        load_mechanism(tmp_path / "d.npz")


def test_refuses_rows_not_summing_to_one(mech, tmp_path):
    arrays = _arrays(mech)
    arrays["matrix"] = arrays["matrix"].copy()
    arrays["matrix"][1] *= 1.001
    _write_npz(tmp_path / "m.npz", **arrays)
    with pytest.raises(MechanismFileError, match="row 1 of matrix sums to"):
        load_mechanism(tmp_path / "m.npz")


def test_accepts_rows_within_tolerance(mech, tmp_path):
    arrays = _arrays(mech)
    arrays["matrix"] = arrays["matrix"] * (1 + 1e-12)
    _write_npz(tmp_path / "m.npz", **arrays)
    assert load_mechanism(tmp_path / "m.npz").n == 3


def test_refuses_a_pickle(mech, tmp_path):
    arrays = _arrays(mech)
    arrays["labels"] = np.array(["a", 2, None], dtype=object)  # object array: needs pickle
    _write_npz(tmp_path / "m.npz", **arrays)
    with pytest.raises(MechanismFileError, match="not a mechanism file"):
        load_mechanism(tmp_path / "m.npz")
    (tmp_path / "p.npz").write_bytes(pickle.dumps({"matrix": mech.matrix}))
    with pytest.raises(MechanismFileError, match=r"p\.npz"):
        load_mechanism(tmp_path / "p.npz")


def test_refuses_non_npz_files(tmp_path):
    (tmp_path / "x.npz").write_text("label,x\na,1\n")
    with pytest.raises(MechanismFileError, match=r"x\.npz"):
        load_mechanism(tmp_path / "x.npz")
    np.save(tmp_path / "y.npy", np.eye(2))
    with pytest.raises(MechanismFileError, match=r"y\.npy: not a mechanism file"):
        load_mechanism(tmp_path / "y.npy")
    with zipfile.ZipFile(tmp_path / "z.npz", "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(MechanismFileError, match="missing matrix, distances, labels, metadata"):
        load_mechanism(tmp_path / "z.npz")
    with pytest.raises(MechanismFileError, match="no such file"):
        load_mechanism(tmp_path / "absent.npz")


def test_refuses_missing_keys(mech, tmp_path):
    arrays = _arrays(mech)
    del arrays["distances"]
    _write_npz(tmp_path / "m.npz", **arrays)
    with pytest.raises(MechanismFileError, match=r"not a mechanism file \(missing distances\)"):
        load_mechanism(tmp_path / "m.npz")


@pytest.mark.parametrize(
    ("key", "value", "pattern"),
    [
        ("metadata", np.array("{not json"), "metadata is not JSON"),
        ("metadata", np.array(json.dumps({"mechanism": "x"})), "lacks mechanism, epsilon or params"),
        ("labels", np.array([1, 2, 3]), "labels must be a 1-d string array"),
        ("distances", np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 1.0], [5.0, 1.0, 0.0]]), "triangle"),
        ("points", np.zeros((2, 2)), r"points has shape \(2, 2\)"),
    ],
)
def test_refuses_bad_content(mech, tmp_path, key, value, pattern):
    arrays = _arrays(mech)
    arrays[key] = value
    _write_npz(tmp_path / "m.npz", **arrays)
    with pytest.raises(MechanismFileError, match=pattern):
        load_mechanism(tmp_path / "m.npz")


# ----------------------------------------------------------------------------- POINTS files
def test_read_points_csv_haversine_by_default(tmp_path):
    p = tmp_path / "caps.csv"
    p.write_text("label,lat,lon\nParis,48.8566,2.3522\nLondon,51.5074,-0.1278\n")
    space = read_points(p)
    assert space.metric == "haversine"
    assert space.labels == ("Paris", "London")
    assert space.distances[0, 1] == pytest.approx(343.5, abs=0.5)


def test_read_points_csv_euclidean_and_named_metric(tmp_path):
    p = tmp_path / "pts.csv"
    p.write_text("label,x,y\na,0,0\nb,3,4\n\nc,6,8\n")  # a blank line is skipped
    assert read_points(p).distances[0, 1] == pytest.approx(5.0)
    assert read_points(p, "manhattan").distances[0, 2] == pytest.approx(14.0)


def test_read_points_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"label": ["a", "b", "c"], "x": [0.0, 1.0, 3.0]}), tmp_path / "p.parquet")
    space = read_points(tmp_path / "p.parquet")
    np.testing.assert_allclose(space.distances, D3)
    assert space.labels == ("a", "b", "c")


def test_read_points_npy(tmp_path):
    np.save(tmp_path / "d.npy", D3)
    space = read_points(tmp_path / "d.npy")
    assert space.metric == "precomputed"
    np.testing.assert_array_equal(space.distances, D3)
    with pytest.raises(ValidationError, match="takes no parameter 'metric'"):
        read_points(tmp_path / "d.npy", "euclidean")
    bad = D3.copy()
    bad[0, 2] = bad[2, 0] = 10.0
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(ValidationError, match=r"bad.npy: .*triangle inequality"):
        read_points(tmp_path / "bad.npy")


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        ("a.csv", "", "empty file"),
        ("a.csv", "label,x\n", "no points"),
        ("a.csv", "name,x\na,1\nb,2\n", "first column must be 'label', got 'name'"),
        ("a.csv", "label\na\nb\n", "at least one coordinate column"),
        ("a.csv", "label,x,y\na,1,2\nb,3\n", "line 3 has 2 fields, expected 3"),
        ("a.csv", "label,x\na,1\nb,two\n", "line 3 has a non-numeric coordinate"),
        ("a.csv", "label,x\na,1\na,2\n", "label 'a' appears twice"),
        ("a.csv", "label,x\na,1\nb,1\n", "duplicate points"),
        ("a.csv", "label,x,y\na,1,2\nb,3,4\n", None),  # fine; haversine refused below
        ("a.txt", "label,x\na,1\nb,2\n", r"POINTS must be \.csv, \.parquet/\.pq or \.npy, got \.txt"),
        ("a.npy", "not numpy", "not a readable .npy"),
    ],
)
def test_read_points_bad_files(tmp_path, name, content, pattern):
    p = tmp_path / name
    p.write_text(content)
    if pattern is None:
        with pytest.raises(ValidationError, match="haversine needs the columns label,lat,lon"):
            read_points(p, "haversine")
        return
    with pytest.raises(ValidationError, match=pattern):
        read_points(p)


def test_read_points_missing_file_and_unknown_metric(tmp_path):
    with pytest.raises(ValidationError, match="no such file"):
        read_points(tmp_path / "none.csv")
    p = tmp_path / "a.csv"
    p.write_text("label,x\na,1\nb,2\n")
    with pytest.raises(ValidationError, match="metric must be one of"):
        read_points(p, "cosine")


def test_load_refuses_a_file_whose_claim_fails_the_audit(tmp_path):
    space = MetricSpace.from_points([[0.0], [1.0], [3.0]])
    krr_like = np.full((3, 3), 0.25) + np.eye(3) * 0.25  # 1 on the diagonal vs 0.25: log 2 per unit distance
    path = tmp_path / "claim.npz"
    meta = {"mechanism": "tampered", "epsilon": 0.01, "params": {}, "space": {"metric": "precomputed"}}
    np.savez(path, matrix=krr_like, distances=space.distances, labels=np.array(space.labels),
             metadata=np.array(json.dumps(meta)))
    with pytest.raises(MechanismFileError, match=r"claims epsilon=0.01 but its matrix is only"):
        load_mechanism(path)


def test_atomic_write_applies_the_umask(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "out.txt", "w") as fh:
            fh.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o644


def test_invalid_utf8_in_points_is_one_error_naming_the_byte(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_bytes(b"label,x\na,1\n\xff\xfe,2\n")
    with pytest.raises(ValidationError, match=r"bad.csv: line 3: not valid UTF-8 at byte offset 12 \(byte 0xff\)"):
        read_points(p)


# ----------------------------------------------------------------------------- output safety
def _nothing_new(tmp_path, before):
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_atomic_write_refuses_a_device(device):
    import os
    import stat

    from metricdp.errors import UnsafeOutputError

    if not os.path.exists(device):
        pytest.skip(f"{device} absent")
    before = os.stat(device)
    with pytest.raises(UnsafeOutputError, match=f"refusing to write {device}: it is a character device"):
        with atomic_write(device) as fh:
            fh.write(b"x")
    assert stat.S_ISCHR(os.stat(device).st_mode) and os.stat(device).st_ino == before.st_ino


def test_atomic_write_refuses_a_directory_fifo_and_socket(tmp_path):
    import os
    import socket

    from metricdp.errors import UnsafeOutputError

    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "sock"))
        for name, kind in (("d", "a directory"), ("fifo", "a FIFO"), ("sock", "a socket")):
            with pytest.raises(UnsafeOutputError, match=f"it is {kind}, not a regular file"), \
                    atomic_write(tmp_path / name):
                pass
    finally:
        sock.close()
    _nothing_new(tmp_path, ["d", "fifo", "sock"])


def test_atomic_write_refuses_an_input_by_any_name(tmp_path):
    import os

    from metricdp.errors import UnsafeOutputError

    src = tmp_path / "in.csv"
    src.write_text("data")
    os.symlink(src, tmp_path / "sym.csv")
    os.link(src, tmp_path / "hard.csv")
    (tmp_path / "sub").mkdir()
    for out in (src, tmp_path / "sym.csv", tmp_path / "hard.csv", tmp_path / "sub" / ".." / "in.csv"):
        with pytest.raises(UnsafeOutputError, match="it is the input"), atomic_write(out, "w", inputs=[src]) as fh:
            fh.write("clobbered")
    # an input given through a symlink protects the file it points to
    with pytest.raises(UnsafeOutputError, match="it is the input"), atomic_write(src, inputs=[tmp_path / "sym.csv"]):
        pass
    assert src.read_text() == "data"
    _nothing_new(tmp_path, ["hard.csv", "in.csv", "sub", "sym.csv"])
    with atomic_write(tmp_path / "other.csv", "w", inputs=[src, tmp_path / "absent.csv"]) as fh:
        fh.write("fine")
    assert (tmp_path / "other.csv").read_text() == "fine"


def test_atomic_write_through_a_symlink_keeps_the_link(tmp_path):
    import os

    (tmp_path / "real.txt").write_text("old")
    os.symlink(tmp_path / "real.txt", tmp_path / "link.txt")
    with atomic_write(tmp_path / "link.txt", "w") as fh:
        fh.write("new")
    assert os.path.islink(tmp_path / "link.txt")
    assert (tmp_path / "real.txt").read_text() == "new"


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "hidden name"])
def test_atomic_write_without_replace_never_clobbers(tmp_path, monkeypatch, unnamed):
    """replace=False: an existing file (or a dangling symlink) is refused before writing, one that
    appears while the data are written is refused at the end, and no temporary is left either way."""
    import os

    from metricdp import _atomic
    from metricdp.errors import UnsafeOutputError

    if not unnamed:
        monkeypatch.setattr(_atomic, "_open_unnamed", lambda _directory: -1)
    (tmp_path / "old.csv").write_text("keep")
    os.symlink(tmp_path / "nowhere.csv", tmp_path / "dangling.csv")
    for name in ("old.csv", "dangling.csv"):
        with pytest.raises(UnsafeOutputError, match=f"refusing to write .*{name}: the file exists"):
            with atomic_write(tmp_path / name, "w", replace=False):
                raise AssertionError("the body ran")  # pragma: no cover
    assert (tmp_path / "old.csv").read_text() == "keep" and not (tmp_path / "nowhere.csv").exists()
    with pytest.raises(UnsafeOutputError, match=r"late\.csv: the file appeared while it was written"):
        with atomic_write(tmp_path / "late.csv", "w", replace=False) as fh:
            fh.write("mine")
            (tmp_path / "late.csv").write_text("theirs")
    assert (tmp_path / "late.csv").read_text() == "theirs"
    with atomic_write(tmp_path / "new.csv", "w", replace=False) as fh:
        fh.write("new")
    assert (tmp_path / "new.csv").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.csv", "late.csv", "new.csv", "old.csv"]


def test_atomic_write_restores_signal_handlers(tmp_path):
    import signal

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with atomic_write(tmp_path / "a.txt", "w") as fh:
        assert signal.getsignal(signal.SIGTERM) is not before[1]
        fh.write("x")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    with pytest.raises(KeyError), atomic_write(tmp_path / "b.txt", "w"):
        raise KeyError("boom")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_atomic_write_sigterm_in_a_subprocess_leaves_nothing(tmp_path):
    import os
    import subprocess
    import sys

    child_code = (
        "import sys, time\n"
        "from metricdp.io import atomic_write\n"
        "with atomic_write(sys.argv[1]) as fh:\n"
        "    fh.write(b'x' * 1_000_000); fh.flush()\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen([sys.executable, "-c", child_code, str(tmp_path / "big.bin")], stdout=subprocess.PIPE,
                          env=env, text=True) as child:
        try:
            assert child.stdout.readline().strip() == "writing"
            assert len(list(tmp_path.iterdir())) <= 1  # an unnamed O_TMPFILE, or a hidden temporary elsewhere
            child.terminate()
            child.wait(timeout=30)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -15
    _nothing_new(tmp_path, [])


def test_atomic_write_leaves_an_ignored_signal_ignored(tmp_path):
    import signal

    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with atomic_write(tmp_path / "a.txt", "w") as fh:
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # nohup-style callers keep their choice
            fh.write("x")
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, old)
    assert (tmp_path / "a.txt").read_text() == "x"


# ----------------------------------------------------------------- hostile CSV content (review)
_SPACE3 = MetricSpace.from_points([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]], ["a", "b", "c"])


@pytest.mark.parametrize("reader", ["points", "output_points", "output_distances"])
def test_csv_field_over_the_csv_module_limit_is_one_error(tmp_path, reader, monkeypatch):
    """csv.Error (a field over csv.field_size_limit, 131,072 characters) was a traceback; a record over
    the file layer's cap (here lowered to 100,000 bytes by its environment variable) is one error."""
    from metricdp.io import read_output_distances, read_output_points
    from metricdp.tabular.csv import MAX_RECORD_ENV

    monkeypatch.setenv(MAX_RECORD_ENV, "100000")
    p = tmp_path / "a.csv"
    huge = "1" * 200_000
    if reader == "output_distances":
        p.write_text(f"label,p\na,{huge}\nb,1\nc,1\n")
        call = lambda: read_output_distances(p, _SPACE3)  # noqa: E731
    else:
        p.write_text(f"label,x,y\na,0,{huge}\nb,0,1\n")
        call = (lambda: read_points(p)) if reader == "points" else (lambda: read_output_points(p, _SPACE3))
    with pytest.raises(ValidationError, match=r"a\.csv: line 2: a record of 200,00\d bytes is over the cap of 100,000"):
        call()


@pytest.mark.parametrize("value", ["0_5", "1_000", "\u0661", "\uff11", "0x1p0"])
def test_csv_numbers_are_plain_decimal(tmp_path, value):
    """Python's float() reads '0_5' as 5.0 and Unicode digits as numbers: a silently different value."""
    from metricdp.io import read_output_distances, read_output_points

    p = tmp_path / "d.csv"
    p.write_text(f"label,p\na,{value}\nb,1\nc,1.5\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="line 2 has a non-numeric distance"):
        read_output_distances(p, _SPACE3)
    q = tmp_path / "p.csv"
    q.write_text(f"label,x,y\na,0,{value}\nb,0,3\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="line 2 has a non-numeric coordinate"):
        read_points(q)
    with pytest.raises(ValidationError, match="line 2 has a non-numeric coordinate"):
        read_output_points(q, _SPACE3)


def test_parquet_coordinates_must_be_numeric_columns(tmp_path):
    """A string column was converted by float(): '1_0' read as 10.0, '\\u0661' as 1.0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from metricdp.io import read_output_points

    pq.write_table(pa.table({"label": ["a", "b"], "x": ["0", "1_0"]}), tmp_path / "s.parquet")
    with pytest.raises(ValidationError, match=r"s\.parquet: coordinate column 'x' has type string"):
        read_points(tmp_path / "s.parquet")
    pq.write_table(pa.table({"label": ["p"], "x": ["0"], "y": [1.0]}), tmp_path / "o.parquet")
    with pytest.raises(ValidationError, match="coordinate column 'x' has type string"):
        read_output_points(tmp_path / "o.parquet", _SPACE3)
    pq.write_table(pa.table({"label": ["a", "b"], "x": pa.array([0, 3], pa.int32())}), tmp_path / "i.parquet")
    assert read_points(tmp_path / "i.parquet").distances[0, 1] == 3.0  # integers are numbers


def test_parquet_null_labels_are_refused(tmp_path):
    """A null label was read as the string 'None' (str(None))."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"label": ["a", None], "x": [0.0, 1.0]}), tmp_path / "n.parquet")
    with pytest.raises(ValidationError, match=r"n\.parquet: the label of row 1 is null"):
        read_points(tmp_path / "n.parquet")


# ----------------------------------------------------------------------------- one CSV record definition
@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"label,x\ra,1\rb,2\r", "line 1: a carriage return"),  # was read by the csv module as 3 records
        (b"label,x\na,1\rb,2\n", "line 2: a carriage return"),
        (b"label,x\na,1,\nb,2\n", "line 2 has 3 fields, expected 2 as in the header (a trailing ','"),
        (b"label,x,\na,1,\nb,2,\n", "line 1: header column 3 has an empty name"),
        (b"label,x\na,1\n\xef\xbb\xbfb,2\n", "line 3: a byte-order mark"),
        (b"label,x\na,1\nb,2\x00\n", "line 3: a NUL byte"),
        (b"label,x,x\na,1,2\nb,2,3\n", "line 1: column 'x' appears more than once"),
    ],
)
@pytest.mark.parametrize("reader", ["points", "output_points", "columns"])
def test_points_csv_hostile_shapes_are_one_error(tmp_path, data, fragment, reader):
    from metricdp.io import read_output_points, read_point_columns

    p = tmp_path / "p.csv"
    p.write_bytes(data)
    call = {"points": lambda: read_points(p), "output_points": lambda: read_output_points(p, _SPACE3),
            "columns": lambda: read_point_columns(p)}[reader]
    if reader == "columns" and "line 1" not in fragment:
        assert call() is not None  # only the header is read
        return
    with pytest.raises(ValidationError) as info:
        call()
    assert f"p.csv: {fragment}" in str(info.value)
    assert "\n" not in str(info.value)


def test_points_csv_crlf_lf_mixture_and_quoted_labels(tmp_path):
    p = tmp_path / "p.csv"
    p.write_bytes(b'label,x\r\n"a,1",0\n"b\r\nc",1\r\n\r\nd,3')
    space = read_points(p)
    assert space.labels == ("a,1", "b\r\nc", "d")
    assert np.allclose(np.asarray(space.points).ravel(), [0, 1, 3])
