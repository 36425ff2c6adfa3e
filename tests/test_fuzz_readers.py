"""Fuzzers for every file reader: a clean refusal or a correct result, never another exception.

Each target feeds hostile bytes (random flips, truncation, insertions) or hostile structure
(wrong dtypes, NaN/inf, object arrays, absurd header shapes, tampered metadata) to a reader
and accepts exactly two outcomes: a :class:`~metricdp.errors.ValidationError` (of which
:class:`~metricdp.errors.MechanismFileError` is one), or a result that is right (a
loaded mechanism passes the independent audit at its claim, a space is a metric).
A few hundred examples per target run in CI; ``METRICDP_FUZZ_EXAMPLES`` raises the count.
"""

from __future__ import annotations

import csv
import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from metricdp.audit import audit
from metricdp.errors import ValidationError
from metricdp.io import read_output_distances, read_output_points, read_points
from metricdp.mechanisms import build
from metricdp.mechanisms.base import AUDIT_RTOL
from metricdp.mechanisms.file import load_mechanism
from metricdp.outputs import OutputSet
from metricdp.spaces import MetricSpace

pytestmark = pytest.mark.slow  # CI runs it in the full phase (.ci/full)

EXAMPLES = int(os.environ.get("METRICDP_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                             HealthCheck.too_slow])

SPACE = MetricSpace.from_points(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 1.0]]), ["a", "b", "c", "d"])


def _file_bytes(name: str, **params: object) -> bytes:
    buf = io.BytesIO()
    mech = build(name, SPACE, 0.7, **params)
    arrays = {
        "matrix": mech.matrix, "distances": mech.distances, "labels": np.array(mech.labels),
        "metadata": np.array(json.dumps(mech.metadata)), "points": np.asarray(SPACE.points),
    }
    if mech.outputs is not None:  # a separate output set (what Mechanism.save writes)
        arrays.update(output_labels=np.array(mech.output_labels), output_distances=mech.loss_distances,
                      output_points=np.asarray(mech.outputs.points))
    np.savez(buf, **arrays)
    return buf.getvalue()


OUTPUTS = OutputSet.from_points(SPACE, [[0.5, 0.5], [2.0, 1.0], [0.0, 3.0]], ["p", "q", "r"])
GENUINE = {"exponential": _file_bytes("exponential"), "madlib": _file_bytes("madlib", samples=10, rng=0),
           "rectangular": _file_bytes("exponential", outputs=OUTPUTS)}


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for pos, value in edits:
        out[pos % len(out)] = value
    return bytes(out[:cut] if cut is not None else out)


def _accept(path: Path) -> None:
    """The loader's contract: a MechanismFileError, or a mechanism that holds its claim."""
    try:
        mech = load_mechanism(path)
    except ValidationError:
        return
    if mech.exact:
        assert audit(mech.matrix, mech.distances).satisfies(mech.epsilon, AUDIT_RTOL)


@FUZZ
@given(name=st.sampled_from(sorted(GENUINE)),
       edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8),
       cut=st.none() | st.integers(0, 4000))
def test_mechanism_loader_survives_byte_flips_and_truncation(tmp_path_factory, name, edits, cut) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "m.npz"
    path.write_bytes(_mutate(GENUINE[name], edits, cut))
    _accept(path)


HOSTILE_VALUES = st.sampled_from([
    np.array([[np.nan, 1.0], [1.0, 0.0]]), np.full((4, 4), np.inf), np.zeros((4, 4)), np.eye(4),
    np.array(["x"] * 16).reshape(4, 4), np.ones((4, 4), dtype=np.int8), np.ones((4, 4), dtype=complex),
    np.zeros((0,)), np.array(3.0), np.ones((4, 4, 1)), np.array([["a", "b"]]), np.full((4, 4), 0.25),
    np.array(json.dumps({"mechanism": "exponential", "epsilon": 1e-300, "params": {}})),
    np.array('{"mechanism": "exponential", "epsilon": Infinity, "params": {}}'), np.array("[]"),
    np.array(json.dumps({"mechanism": 3, "epsilon": "1", "params": []})),
    np.full((4, 3), 1 / 3), np.ones((4, 3)), np.array(["p", "q", "r"]), np.array(["p", "p", "r"]),
    np.full((3, 2), 0.5), np.array(json.dumps({"mechanism": "exponential", "epsilon": 0.7, "params": {},
                                               "outputs": {"m": 3}})),
])


@FUZZ
@given(name=st.sampled_from(["exponential", "rectangular"]),
       key=st.sampled_from(["matrix", "distances", "labels", "metadata", "points", "output_labels",
                            "output_distances", "output_points"]), value=HOSTILE_VALUES)
def test_mechanism_loader_survives_tampered_arrays(tmp_path_factory, name, key, value) -> None:
    with np.load(io.BytesIO(GENUINE[name]), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays[key] = value
    path = tmp_path_factory.mktemp("fuzz") / "m.npz"
    np.savez(path, **arrays)
    _accept(path)


def test_mechanism_loader_refuses_pickles_and_absurd_headers(tmp_path) -> None:
    with np.load(io.BytesIO(GENUINE["exponential"]), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["labels"] = np.array([object()] * 4, dtype=object)
    np.savez(tmp_path / "pickle.npz", **arrays)
    with pytest.raises(ValidationError, match="holds Python objects"):
        load_mechanism(tmp_path / "pickle.npz")
    # a header declaring a 10^15-element matrix: refused before numpy allocates it
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**15,)})
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as zf, np.load(io.BytesIO(GENUINE["exponential"])) as z:
        for k in z.files:
            buf = io.BytesIO()
            np.save(buf, z[k])
            zf.writestr(f"{k}.npy", buf.getvalue() if k != "matrix" else b"\x93NUMPY\x01\x00" + header.getvalue()[8:])
    with pytest.raises(ValidationError, match="the limit is"):
        load_mechanism(tmp_path / "huge.npz")


POINTS_CSV = b"label,x,y\na,0,0\nb,1,0\nc,0,2\nd,3,1\n"


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 255)), max_size=6),
       cut=st.none() | st.integers(0, len(POINTS_CSV)),
       extra=st.binary(max_size=40))
def test_points_reader_survives_hostile_csv(tmp_path_factory, edits, cut, extra) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "p.csv"
    path.write_bytes(_mutate(POINTS_CSV, edits, cut) + extra)
    try:
        space = read_points(path)
    except ValidationError:
        return
    d = np.asarray(space.distances)
    assert np.all(np.isfinite(d)) and np.all(d == d.T) and np.all(np.diag(d) == 0)
    assert np.all(d[~np.eye(space.n, dtype=bool)] > 0)


CROSS_CSV = b"label,p,q\na,0.5,2.5\nb,0.6,1.5\nc,1.5,2.5\nd,2.6,0.5\n"
OUTPUT_POINTS_CSV = b"label,x,y\np,0.5,0\nq,2,1\n"


def _accept_outputs(outputs: OutputSet) -> None:
    """A read output set is well formed for SPACE: (n, m) finite non-negative distances, unique labels."""
    d = np.asarray(outputs.distances)
    assert d.shape == (SPACE.n, outputs.m) and outputs.m >= 1
    assert np.all(np.isfinite(d)) and np.all(d >= 0)
    assert len(set(outputs.labels)) == outputs.m


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 255)), max_size=6),
       cut=st.none() | st.integers(0, len(CROSS_CSV)),
       extra=st.binary(max_size=40) | st.sampled_from([b"e,1,1\n", b"a,1,1\n", b"nan,1", b"\n,,\n", b"\x00",
                                                        b"1" * 140_000, b'"' + b"1" * 140_000]))
def test_output_distances_reader_survives_hostile_csv(tmp_path_factory, edits, cut, extra) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "cross.csv"
    path.write_bytes(_mutate(CROSS_CSV, edits, cut) + extra)
    try:
        outputs = read_output_distances(path, SPACE)
    except ValidationError:
        return
    _accept_outputs(outputs)


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 255)), max_size=6),
       cut=st.none() | st.integers(0, len(OUTPUT_POINTS_CSV)),
       extra=st.binary(max_size=40) | st.sampled_from([b"r,1e308,1e308\n", b"p,1,1\n", b"r,1_0,1\n"]))
def test_output_points_reader_survives_hostile_csv(tmp_path_factory, edits, cut, extra) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "outs.csv"
    path.write_bytes(_mutate(OUTPUT_POINTS_CSV, edits, cut) + extra)
    try:
        outputs = read_output_points(path, SPACE)
    except ValidationError:
        return
    _accept_outputs(outputs)
    assert outputs.triangle_violation(SPACE).ratio <= 1.0 + 1e-9  # one metric: the cross triangle holds


@FUZZ
@given(matrix=st.sampled_from([
    SPACE.distances, SPACE.distances * -1, SPACE.distances + np.eye(4), np.full((4, 4), np.nan),
    np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 1.0], [5.0, 1.0, 0.0]]), np.zeros((1, 1)), np.zeros((3, 2)),
    np.array(["a"]), np.array([[0, 1], [1, 0]], dtype=np.int64), np.array([[0, np.inf], [np.inf, 0]]),
    np.array([[0, 1e308], [1e308, 0]]),
]), edits=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=4))
def test_distance_matrix_reader_survives_hostile_npy(tmp_path_factory, matrix, edits) -> None:
    buf = io.BytesIO()
    np.save(buf, matrix)
    path = tmp_path_factory.mktemp("fuzz") / "d.npy"
    path.write_bytes(_mutate(buf.getvalue(), edits, None))
    try:
        space = read_points(path)
    except ValidationError:
        return
    d = np.asarray(space.distances)
    assert np.all(np.isfinite(d)) and np.allclose(d, d.T) and np.all(np.diag(d) == 0)


# ----------------------------------------------------------------------------- CSV shapes, privatize
# Byte-level mutations of valid CSVs aimed at where readers disagree: line endings, delimiters, quotes,
# byte-order marks, NULs, encodings. Oracle: refused in one line with nothing written, OR every record is
# released (the csv module, same dialect, counts as many records in the output as in the input), each
# released cell is an OUTPUT label -- disjoint from the input labels, so it provably came from the
# sampler, never passed through -- and every other cell is unchanged.
RECT = build("exponential", SPACE, 0.7, outputs=OUTPUTS)
TOKENS = [b",", b'"', b'""', b"\xef\xbb\xbf", b"\x00", b"\r", b"\n", b"\r\n", b"\xff", b"\xe9", b" ", b"\t"]
_note = st.text(alphabet=st.sampled_from(list('xy ,"\n\r\té')), max_size=5)


@st.composite
def _valid_csv(draw: st.DrawFn) -> bytes:
    rows = draw(st.lists(st.tuples(st.integers(0, 99), st.sampled_from(SPACE.labels), _note), min_size=1,
                         max_size=8))
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]))
    out = io.StringIO()
    writer = csv.writer(out, quoting=quoting, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(["id", "city", "note"])
    writer.writerows([(i, c, n if quoting == csv.QUOTE_ALL else n.replace("\r", "")) for i, c, n in rows])
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + out.getvalue().encode("utf-8")


_op = st.one_of(
    st.tuples(st.just("eol"), st.sampled_from([(b"\r\n", b"\r"), (b"\n", b"\r"), (b"\r\n", b"\n"), (b"\n", b"\r\n")]),
              st.booleans()),
    st.tuples(st.just("insert"), st.integers(0, 10**4), st.sampled_from(TOKENS)),
    st.tuples(st.just("delete"), st.integers(0, 10**4), st.integers(1, 3)),
    st.tuples(st.just("flip"), st.integers(0, 10**4), st.integers(0, 255)),
    st.tuples(st.just("encode"), st.sampled_from(["latin-1", "utf-16", "utf-8-sig"]), st.just(0)),
)


def _apply(data: bytes, ops: list[tuple[object, ...]]) -> bytes:
    for kind, a, b in ops:
        if kind == "eol":
            old, new = a  # type: ignore[misc]
            data = data.replace(old, new) if b else data.replace(old, new, 1)
        elif kind == "encode":
            data = data.decode("utf-8", errors="replace").encode(str(a), errors="replace")
        elif data:
            pos = int(a) % (len(data) + 1)  # type: ignore[call-overload]
            if kind == "insert":
                data = data[:pos] + b + data[pos:]  # type: ignore[operator]
            elif kind == "delete":
                data = data[:pos] + data[pos + int(b):]  # type: ignore[call-overload]
            else:
                data = data[:pos] + bytes([int(b)]) + data[pos + 1:]  # type: ignore[call-overload]
    return data


def _records(data: bytes) -> list[list[str]]:
    return [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""), strict=True) if r]


@FUZZ
@given(data=_valid_csv(), ops=st.lists(_op, max_size=3), chunk_bytes=st.sampled_from([7, 64, 1 << 20]))
def test_privatize_csv_mutations_are_refused_or_released_whole(tmp_path_factory, data, ops, chunk_bytes) -> None:
    import warnings

    from metricdp.errors import PrivacyLeakWarning
    from metricdp.streaming import privatize_file

    d = tmp_path_factory.mktemp("fuzz")
    inp, out = d / "in.csv", d / "out.csv"
    inp.write_bytes(_apply(data, ops))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            stats = privatize_file(RECT, inp, "city", out, rng=0, chunk_bytes=chunk_bytes, chunk_rows=3)
    except ValidationError as ex:
        assert "\n" not in str(ex) and str(inp) in str(ex)
        assert not out.exists() and sorted(p.name for p in d.iterdir()) == ["in.csv"]
        return
    before, after = _records(inp.read_bytes()), _records(out.read_bytes())
    assert len(after) == len(before) and stats.rows == len(before) - 1
    assert after[0] == before[0] and before[0].count("city") == 1
    j = before[0].index("city")
    for a, b in zip(after[1:], before[1:], strict=True):
        assert b[j] in SPACE.labels and a[j] in RECT.output_labels  # disjoint: released, not passed through
        assert a[:j] + a[j + 1:] == b[:j] + b[j + 1:]


@FUZZ
@given(ops=st.lists(_op, max_size=3))
def test_points_csv_mutations_are_refused_or_read_as_the_csv_module_reads_them(tmp_path_factory, ops) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "p.csv"
    path.write_bytes(_apply(POINTS_CSV, ops))
    try:
        space = read_points(path)
    except ValidationError as ex:
        assert "\n" not in str(ex)
        return
    rows = _records(path.read_bytes())
    assert space.n == len(rows) - 1 and list(space.labels) == [r[0] for r in rows[1:]]


# --- the text reader (metricdp text privatize): hidden forms of vocabulary words, hostile bytes

_TEXT_VOCAB = ("paris", "cat", "the")
_HIDERS = ("\u200b", "\u00ad", "\u2060", "\u200d", "\ufeff")


@st.composite
def _hidden_token(draw: st.DrawFn) -> tuple[str, str]:
    """(the written form, what the rewrite must write for it under the identity mechanism)."""
    word = draw(st.sampled_from((*_TEXT_VOCAB, "zebra")))
    visible = draw(st.sampled_from((word, word.title(), word.upper())))
    shown = visible
    if draw(st.booleans()):  # fullwidth letters (NFKC folds them back)
        shown = "".join(chr(ord(c) + 0xFEE0) for c in shown)
    for _ in range(draw(st.integers(0, 3))):  # format characters anywhere, first and last place included
        at = draw(st.integers(0, len(shown)))
        shown = shown[:at] + draw(st.sampled_from(_HIDERS)) + shown[at:]
    return shown, (visible if word in _TEXT_VOCAB else shown)  # out of vocabulary: kept verbatim


def _identity(idx: np.ndarray) -> np.ndarray:
    return np.asarray(idx, dtype=np.intp)


@FUZZ
@given(lines=st.lists(st.lists(_hidden_token(), min_size=1, max_size=6), min_size=1, max_size=4))
@example(lines=[[("\ufeffzebra", "\ufeffzebra")]])
@example(lines=[[("\ufeff\ufeffcat", "cat"), ("the\u200b", "the")]])
def test_text_reader_looks_up_hidden_forms_and_writes_none_of_them(tmp_path_factory, lines) -> None:
    """Oracle: a vocabulary word behind format characters or fullwidth letters is released (here: by the
    identity) in the case pattern of its visible letters, with none of the hiding characters written."""
    from metricdp.text.rewrite import Vocabulary, rewrite_file

    path = tmp_path_factory.mktemp("text") / "in.txt"
    path.write_text("".join(" ".join(shown for shown, _ in line) + "\n" for line in lines), encoding="utf-8")
    out = path.with_name("out.txt")
    stats = rewrite_file(path, out, Vocabulary(_TEXT_VOCAB), _identity)
    shown0, want0 = lines[0][0]
    if shown0.startswith("\ufeff"):  # the file's first character is its byte-order mark, not text: not read
        lines = [[(shown0[1:], want0[1:] if want0 == shown0 else want0), *lines[0][1:]], *lines[1:]]
    assert out.read_text(encoding="utf-8") == "".join(" ".join(want for _, want in line) + "\n" for line in lines)
    hidden = sum(shown != shown.encode("ascii", "ignore").decode() for line in lines for shown, _ in line)
    assert stats.normalised == hidden


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=6),
       cut=st.none() | st.integers(0, 200))
def test_text_reader_survives_hostile_bytes(tmp_path_factory, edits, cut) -> None:
    """A clean refusal, or one output line per input line with no format character in a released word."""
    import unicodedata

    from metricdp.text.rewrite import Vocabulary, rewrite_file
    from metricdp.text.tokens import normal, split

    data = "The cat in Par\u200bis, \uff30\uff41\uff52\uff49\uff53 and pa\u00adris 2004.\nthe CAT\n".encode()
    path = tmp_path_factory.mktemp("text") / "in.txt"
    path.write_bytes(_mutate(data, edits, cut))
    out = path.with_name("out.txt")
    try:
        rewrite_file(path, out, Vocabulary(_TEXT_VOCAB), _identity)
    except ValidationError:
        assert not out.exists()
        return
    text = out.read_text(encoding="utf-8")
    assert text.count("\n") == path.read_bytes().count(b"\n")
    for piece, is_word in split(text):
        if is_word and normal(piece) in _TEXT_VOCAB:
            assert not any(unicodedata.category(c) == "Cf" for c in piece) and piece.isascii()
