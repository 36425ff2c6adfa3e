"""The fast paths of privatize-points / privatize-numbers give exactly what the reference paths give.

The compiled number parser against the one number rule (hypothesis), the compiled splice
against csvsplit.splice, the read-ahead thread (order, errors at the same position, no
thread left behind), whole files byte-identical with and without the kernels, and no
numba imported by a CLI start.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.io import parse_decimal
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.pipeline.prefetch import prefetch, write_behind
from metricdp.tabular import csvsplit
from tests.helpers import import_or_skip

numba = import_or_skip("numba", "fast")
from metricdp.mechanisms._lattice_kernels import KERNELS  # noqa: E402 - after the skip

AGES = number_mechanism(NumericGrid(0, 99, 1), 0.5)


def _fields(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    raw = ",".join(texts).encode()
    lens = np.array([len(t.encode()) for t in texts])
    fs = np.concatenate([[0], np.cumsum(lens + 1)[:-1]]).astype(np.int64)
    return np.frombuffer(raw, dtype=np.uint8) if raw else np.zeros(1, np.uint8), fs, fs + lens


def _oracle(text: str) -> float | None:
    try:
        return parse_decimal(text)
    except ValueError:
        return None


def _same(a: float, b: float) -> bool:
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


# -------------------------------------------------------------- the compiled number parser
@settings(max_examples=300)
@given(st.lists(st.text(alphabet="0123456789+-.eE _\u0661naif", max_size=10), min_size=1, max_size=30))
def test_parse_decimals_never_disagrees_with_the_number_rule(texts):
    values, ok = KERNELS["parse_decimals"](*_fields(texts))
    for t, v, good in zip(texts, values.tolist(), ok.tolist(), strict=True):
        if good:
            want = _oracle(t)
            assert want is not None and _same(v, want), (t, v, want)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["", "+", "-"]), st.integers(0, 10**15 - 1), st.integers(0, 15)),
                min_size=1, max_size=30))
def test_parse_decimals_reads_every_short_decimal_exactly(parts):
    # every decimal of <= 15 digits is read by the kernel, to float()'s value (Clinger's fast path)
    texts = []
    for sign, m, k in parts:
        digits = str(m).rjust(k + 1, "0")
        if len(digits) > 15:
            digits = digits[-15:]
            k = min(k, 14)
        texts.append(f"{sign}{digits[:len(digits) - k]}.{digits[len(digits) - k:]}" if k else f"{sign}{digits}")
    values, ok = KERNELS["parse_decimals"](*_fields(texts))
    assert ok.all(), [t for t, g in zip(texts, ok, strict=True) if not g]
    for t, v in zip(texts, values.tolist(), strict=True):
        assert _same(v, float(t)), (t, v)


def test_parse_decimals_by_hand():
    texts = ["48.874068", "-0", "+3.", ".5", "0.1", "123456789012345", "1234567890123456", "1e5", " 1", ".", "-",
             "", "nan", "1_0", '"5"', "0.30000000000000004"]
    values, ok = KERNELS["parse_decimals"](*_fields(texts))
    assert ok.tolist() == [True] * 6 + [False] * 10
    assert values[:6].tolist() == [48.874068, -0.0, 3.0, 0.5, 0.1, 123456789012345.0]
    assert math.copysign(1.0, values[1]) == -1.0


# ------------------------------------------------------------------ the compiled splice
@given(st.binary(min_size=0, max_size=60), st.lists(st.integers(0, 60), max_size=12), st.data())
def test_splice_table_equals_splice(raw, cuts, data):
    buf = np.frombuffer(raw, dtype=np.uint8) if raw else np.zeros(0, np.uint8)
    pts = sorted({min(c, len(raw)) for c in cuts})
    starts, stops = np.array(pts[0::2][: len(pts) // 2], dtype=np.int64), np.array(pts[1::2], dtype=np.int64)
    table, off = np.frombuffer(b"ab,xyz\"q", dtype=np.uint8), np.array([0, 2, 3, 6, 8, 8])
    choice = np.array(data.draw(st.lists(st.integers(0, 4), min_size=len(starts), max_size=len(starts))),
                      dtype=np.intp)
    want = bytes(csvsplit.splice(buf, len(buf), starts, stops, table, off, choice))
    assert bytes(KERNELS["splice_table"](buf, len(buf), starts, stops, table, off, choice)) == want


# ------------------------------------------------------------------------- read-ahead
def test_prefetch_keeps_order_and_raises_at_the_same_position():
    def items():
        yield from range(5)
        raise ValidationError("bad chunk 5")

    got = []
    with pytest.raises(ValidationError, match="bad chunk 5"):
        for x in prefetch(items()):
            got.append(x)
    assert got == [0, 1, 2, 3, 4]
    assert list(prefetch(iter(range(100)), depth=0)) == list(range(100))


def test_prefetch_is_bounded_and_leaves_no_thread_when_the_consumer_stops():
    produced = []
    closed = threading.Event()

    def items():
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.set()

    before = threading.active_count()
    stream = prefetch(items(), depth=2)
    assert next(stream) == 0
    import time

    time.sleep(0.2)
    assert len(produced) <= 1 + 2 + 1  # the one consumed, the queue, the one being put
    stream.close()
    assert closed.is_set() and threading.active_count() == before


def test_write_behind_runs_in_order_and_raises_the_first_error_in_the_caller():
    done = []

    def job(i):
        if i == 3:
            raise ValidationError("cannot write chunk 3")
        done.append(i)

    with write_behind() as submit:
        for i in range(3):
            submit(job, i)
    assert done == [0, 1, 2]
    done.clear()
    with pytest.raises(ValidationError, match="chunk 3"):
        with write_behind(depth=1) as submit:
            for i in range(50):
                submit(job, i)
    assert done == [0, 1, 2]  # nothing after the failed call ran
    done.clear()
    with pytest.raises(KeyError):  # the caller's own error wins; the writer is finished when the block is left
        with write_behind() as submit:
            submit(job, 0)
            raise KeyError("caller")
    assert done == [0] and all(t.name != "metricdp-write-behind" for t in threading.enumerate())


# -------------------------------------------------------------------- whole files
def _numbers_file(path, n=5000):
    g = np.random.default_rng(0)
    rows = [f"{i},{a},note {i}" for i, a in enumerate(g.integers(0, 100, n))]
    rows[7] = '7,"42","quoted, note"'  # a quoted number: that chunk takes the numpy path
    path.write_text("id,age,note\n" + "\n".join(rows) + "\n")


def test_numbers_file_bytes_are_the_same_with_and_without_the_kernels(tmp_path, monkeypatch):
    from metricdp.pipeline import run as numbers
    from metricdp.streaming.numbers import privatize_numbers_file

    src = tmp_path / "in.csv"
    _numbers_file(src)
    outs = []
    for kernels in (True, False):
        monkeypatch.setattr(numbers, "COMPILED_FROM_BYTES", 0)
        if not kernels:
            monkeypatch.setattr(numbers, "_KERNELS", None)
        out = tmp_path / f"out-{kernels}.csv"
        with pytest.warns(PrivacyLeakWarning):
            privatize_numbers_file(AGES, src, "age", out, rng=3, keep=["id"], drop=["note"], chunk_rows=700)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert outs[0].split(b"\n")[8].startswith(b'7,"')  # the quoted number is released quoted
    lines = src.read_text().split("\n")
    lines[13] = "12,4.5x,note 12"
    src.write_text("\n".join(lines))
    msgs = []
    for kernels in (True, False):
        monkeypatch.setattr(numbers, "_KERNELS", "lazy" if kernels else None)
        with pytest.raises(ValidationError) as ex:
            privatize_numbers_file(AGES, src, "age", tmp_path / "x.csv", keep=["id", "note"], chunk_rows=700)
        msgs.append(str(ex.value))
    assert msgs[0] == msgs[1] and "line 14: '4.5x' (not a number)" in msgs[0]


def test_points_file_with_long_and_bad_decimals_is_the_same_with_and_without_the_kernels(tmp_path, monkeypatch):
    from metricdp.location import lattice
    from metricdp.location.lattice import LatticePlane
    from metricdp.location.release import PointSettings, make_release
    from metricdp.mechanisms import lattice_batch
    from metricdp.pipeline import run as points
    from metricdp.streaming.points import privatize_points_file

    g = np.random.default_rng(4)
    lat, lon = 48.85 + g.normal(0, 0.05, 2000), 2.35 + g.normal(0, 0.05, 2000)
    texts = [repr(float(x)) if i % 3 else f"{x:.6f}" for i, x in enumerate(lat)]  # 16-17 digits every third row
    rows = [f"u{i},{a},{b:.6f}" for i, (a, b) in enumerate(zip(texts, lon, strict=True))]
    rows[5] = 'u5,"48.86",2.35'
    src = tmp_path / "in.csv"
    src.write_text("id,lat,lon\n" + "\n".join(rows) + "\n")
    settings_ = PointSettings(0.5, LatticePlane(48.85, 2.35, cell_km=0.01))
    outs = []
    monkeypatch.setattr(points, "COMPILED_FROM_BYTES", 0)  # the compiled reader and writer at any size
    for kernels in (True, False):
        if not kernels:
            for module in (lattice_batch, lattice, points):
                monkeypatch.setattr(module, "_KERNELS", None)
        out = tmp_path / f"out-{kernels}.csv"
        privatize_points_file(src, "lat", "lon", out, make_release(settings_, np.random.default_rng(5)),
                              keep=["id"], chunk_rows=300)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    src.write_text(src.read_text().replace("u9,", "u9,4x", 1))
    msgs = []
    for kernels in (True, False):
        monkeypatch.setattr(points, "_KERNELS", "lazy" if kernels else None)
        with pytest.raises(ValidationError) as ex:
            privatize_points_file(src, "lat", "lon", tmp_path / "x.csv",
                                  make_release(settings_, np.random.default_rng(5)), keep=["id"], chunk_rows=300)
        msgs.append(str(ex.value))
    assert msgs[0] == msgs[1] and "data row 10 (line 11): column 'lat'" in msgs[0]


# ---------------------------------------------------------------------- start-up
def test_no_cli_start_imports_numba():
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom metricdp.cli import app\n"
            "r = CliRunner().invoke(app, ['--help'])\nassert r.exit_code == 0, r.output\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numba')[:3])")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "[]", got.stdout + got.stderr


@given(st.integers(2, 6), st.data())
def test_edits_for_columns_without_drops_equals_the_sorted_edits(ncols, data):
    from metricdp.tabular.csv import split_records
    from metricdp.tabular.csvsplit import edits_for_columns

    cols = data.draw(st.lists(st.integers(0, ncols - 1), min_size=2, max_size=2, unique=True))
    rows = data.draw(st.lists(st.lists(st.text(alphabet="ab1", max_size=3), min_size=ncols, max_size=ncols),
                              min_size=1, max_size=5))
    raw = ("\n".join(",".join(r) for r in [[f"h{i}" for i in range(ncols)], *rows]) + "\n").encode()
    recs = split_records(np.frombuffer(raw, dtype=np.uint8), eof=True, ncols=ncols, column=0, max_records=99,
                         where="x")
    got = edits_for_columns(recs, cols, ())
    starts = np.concatenate([recs.field(c)[0] for c in cols])
    order = np.argsort(starts, kind="stable")
    n = len(recs.starts)
    want = (starts[order], np.concatenate([recs.field(c)[1] for c in cols])[order],
            np.tile(np.arange(n), len(cols))[order], np.repeat(np.arange(len(cols)), n)[order])
    for a, b in zip(got, want, strict=True):
        assert a.tolist() == b.tolist()


# ------------------------------------------------------------------ the compiled split
@settings(max_examples=400)
@given(st.text(alphabet='ab,\n\n\n"\r\x00\u00ef', max_size=40), st.integers(1, 4), st.integers(0, 2),
       st.integers(1, 6), st.booleans(), st.integers(3, 12))
def test_split_records_compiled_equals_numpy(text, ncols, column, max_records, eof, cap):
    from metricdp.tabular.csv import split_records

    buf = np.frombuffer(text.encode(), dtype=np.uint8) if text else np.zeros(0, np.uint8)
    column = min(column, ncols - 1)
    args = dict(eof=eof, ncols=ncols, column=column, max_records=max_records, where="f.csv", max_record=cap)
    try:
        want = split_records(buf, **args)
    except ValidationError:
        ok = KERNELS["split_plain"](buf, ncols, max_records, eof, cap)[0]
        assert not ok, text  # every refusal is numpy's: the compiled split never accepts a refused buffer
        with pytest.raises(ValidationError):
            split_records(buf, **args, kernels=KERNELS)
        return
    got = split_records(buf, **args, kernels=KERNELS)
    assert got.end == want.end and got.ncols == want.ncols
    for name in ("starts", "stops", "lines", "fs", "fe", "delims", "first"):
        assert getattr(got, name).tolist() == getattr(want, name).tolist(), name


def test_split_plain_takes_the_common_chunk():
    buf = np.frombuffer(b"1,a\n\n2,b\n3,c", dtype=np.uint8)
    ok, end, starts, stops, lines, delims, first = KERNELS["split_plain"](buf, 2, 99, False, 100)
    assert ok and end == 9 and starts.tolist() == [0, 5] and stops.tolist() == [3, 8] and lines.tolist() == [0, 2]
    assert delims.tolist() == [1, 6] and first.tolist() == [0, 1]
    assert KERNELS["split_plain"](buf, 2, 99, True, 100)[1] == len(buf)
    assert not KERNELS["split_plain"](np.frombuffer(b'1,"a"\n', dtype=np.uint8), 2, 99, False, 100)[0]
