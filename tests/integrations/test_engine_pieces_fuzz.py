"""Fuzz the engines' file path (driver pass, pieces, per-partition release, join) without a cluster.

Dask and Spark only schedule :func:`metricdp.integrations._pieces.release_piece`; everything that
reads the file is the driver's plan and that function. So the whole pipeline is run in-process
(:func:`metricdp.integrations._run.release_file` with a runner that loops) on byte-level mutations
of valid files -- line endings, delimiters, quotes, BOMs, NULs, bytes that are not UTF-8 -- cut into
pieces as small as one byte. Oracle: refused with ONE line (and nothing written), or the output,
read with Python's csv module, has the input's records one for one, the released cells are all
OUTPUT labels (disjoint from the input labels: a true value cannot pass) and every other cell is
the input's.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from metricdp import MetricSpace
from metricdp.errors import ValidationError
from metricdp.integrations._pieces import release_piece
from metricdp.integrations._run import release_file
from metricdp.mechanisms.base import certify
from metricdp.outputs import OutputSet

INPUTS = ["a", "b", "c"]
OUTPUTS = ["X", "Y"]
SPACE = MetricSpace.from_points([[0.0], [1.0], [2.0]], INPUTS)
MECH = certify(np.array([[0.6, 0.4], [0.5, 0.5], [0.4, 0.6]]), SPACE, 1.0, "custom",
               outputs=OutputSet.from_points(SPACE, [[0.5], [1.5]], OUTPUTS))


def _loop(job, pieces, mechanism, progress=None):
    return [release_piece(job, p, mechanism) for p in pieces]


_cell = st.text(alphabet=st.sampled_from(list('xy ,"\n\r\u00e9')), max_size=4)


@st.composite
def _files(draw):
    n = draw(st.integers(0, 6))
    rows = [["id", "w", "note"]] + [[draw(_cell), draw(st.sampled_from(INPUTS)), draw(_cell)] for _ in range(n)]
    buf = io.StringIO()
    csv.writer(buf, lineterminator=draw(st.sampled_from(["\n", "\r\n"])),
               quoting=draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]))).writerows(rows)
    data = bytearray(buf.getvalue().encode("utf-8"))
    if draw(st.booleans()):
        data[:0] = b"\xef\xbb\xbf"
    for _ in range(draw(st.integers(0, 3))):  # byte-level mutations
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        byte = draw(st.sampled_from([b",", b'"', b"\r", b"\n", b"\x00", b"\xff", b"\xef\xbb\xbf", b"a", b" "]))
        if op == "insert":
            data[pos:pos] = byte
        elif pos < len(data):
            data[pos : pos + 1] = b"" if op == "delete" else byte
    return bytes(data)


def _records(data: bytes) -> list[list[str]]:
    return [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")) if r]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_files(), piece_bytes=st.integers(1, 64), drop=st.booleans())
def test_released_exactly_or_refused_in_one_line(tmp_path_factory, data, piece_bytes, drop):
    d = tmp_path_factory.mktemp("fuzz")
    src, out = d / "in.csv", d / "out.csv"
    src.write_bytes(data)
    try:
        rows, _plan = release_file("test", _loop, MECH, src, "w", out, seed=None, inputs=(), piece_bytes=piece_bytes,
                                   drop=["note"] if drop else [])
    except ValidationError as ex:
        event("refused")
        assert "\n" not in str(ex) and str(ex).startswith(str(src))
        assert sorted(p.name for p in d.iterdir()) == ["in.csv"]
        return
    event("released")
    want, got = _records(data), _records(out.read_bytes())
    assert rows == len(want) - 1 == len(got) - 1
    header = want[0]  # a mutation may split or merge header names: the oracle follows the names, not positions
    keep = [k for k, name in enumerate(header) if not (drop and name == "note")]
    assert got[0] == [header[k] for k in keep]
    w = header.index("w")
    for a, b in zip(want[1:], got[1:], strict=True):
        released = dict(zip([header[k] for k in keep], b, strict=True))
        assert released["w"] in OUTPUTS
        assert all(released[header[k]] == a[k] for k in keep if k != w)
    assert sorted(p.name for p in d.iterdir()) == ["in.csv", "out.csv"]


def test_the_fuzzer_reaches_both_outcomes(tmp_path):
    """A clean file is released and a mutated one refused: the oracle's two branches are both live."""
    src = tmp_path / "in.csv"
    src.write_bytes(b"id,w,note\r\n1,a,x\r\n2,b,\"y\r\nz\"\r\n")
    assert release_file("test", _loop, MECH, src, "w", tmp_path / "o.csv", seed=None, inputs=(), piece_bytes=3)[0] == 2
    src.write_bytes(b"id,w,note\r\n1,a,x\r2,b,y\r\n")
    with pytest.raises(ValidationError, match="carriage return"):
        release_file("test", _loop, MECH, src, "w", tmp_path / "p.csv", seed=None, inputs=(), piece_bytes=3)


def test_the_record_cap_applies_to_the_engines(tmp_path):
    src = tmp_path / "in.csv"
    src.write_bytes(b"id,w\n1,a\n" + b"2" * 50 + b",b\n")
    with pytest.raises(ValidationError, match=r"line 3: a record of 52 bytes is over the cap of 20 bytes"):
        release_file("test", _loop, MECH, src, "w", tmp_path / "o.csv", seed=None, inputs=(), piece_bytes=4,
                     max_record=20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]
