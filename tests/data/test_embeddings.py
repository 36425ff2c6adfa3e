"""Embedding readers: round trips on fixture files written here, filters, errors naming the line."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.distance import cdist

from metricdp.data.embeddings import Embeddings, _count_lines, read_vec, read_word2vec_binary
from metricdp.errors import ValidationError

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran"]


def _vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def _line(word: str, vec: np.ndarray, trailing: str = "") -> str:
    # str(np.float32) is the shortest repr that round-trips the float32 exactly.
    return word + " " + " ".join(str(x) for x in vec) + trailing + "\n"


def write_glove(path: Path, words, vecs, newline: str = "\n") -> Path:
    path.write_text("".join(_line(w, v) for w, v in zip(words, vecs, strict=True)).replace("\n", newline),
                    encoding="utf-8", newline="")
    return path


def write_fasttext(path: Path, words, vecs, count: int | None = None) -> Path:
    # FastText .vec lines end with a space before the newline.
    head = f"{len(words) if count is None else count} {vecs.shape[1]}\n"
    body = "".join(_line(w, v, " ") for w, v in zip(words, vecs, strict=True))
    path.write_text(head + body, encoding="utf-8")
    return path


def write_w2v(path: Path, words, vecs, newline: bool = True, count: int | None = None) -> Path:
    out = bytearray(f"{len(words) if count is None else count} {vecs.shape[1]}\n".encode())
    for w, v in zip(words, vecs, strict=True):
        out += w.encode("utf-8") + b" " + struct.pack(f"<{len(v)}f", *v.tolist())
        if newline:
            out += b"\n"
    path.write_bytes(bytes(out))
    return path


# ----------------------------------------------------------------------------- text
@pytest.mark.parametrize("writer", ["glove", "fasttext", "glove-crlf"])
def test_text_round_trip_is_exact(tmp_path, writer):
    vecs = _vectors(len(WORDS), 5)
    p = tmp_path / "e.vec"
    if writer == "fasttext":
        write_fasttext(p, WORDS, vecs)
    else:
        write_glove(p, WORDS, vecs, "\r\n" if writer == "glove-crlf" else "\n")
    e = read_vec(p)
    assert e.words == tuple(WORDS)
    assert e.vectors.dtype == np.float32 and e.dim == 5 and len(e) == 7
    np.testing.assert_array_equal(e.vectors, vecs)
    assert not e.vectors.flags.writeable


def test_text_limit_vocabulary_and_dtype(tmp_path):
    vecs = _vectors(len(WORDS), 4)
    p = write_fasttext(tmp_path / "e.vec", WORDS, vecs)
    e = read_vec(p, limit=3)
    assert e.words == ("the", "cat", "sat")
    np.testing.assert_array_equal(e.vectors, vecs[:3])
    # vocabulary keeps file order and ignores words not in the file
    v = read_vec(p, vocabulary=["dog", "cat", "zebra"], dtype=np.float64)
    assert v.words == ("cat", "dog") and v.vectors.dtype == np.float64
    # float64 parses the decimal text itself, not its float32 rounding
    np.testing.assert_array_equal(v.vectors, [[float(str(x)) for x in row] for row in vecs[[1, 5]]])
    # limit counts file lines, before the vocabulary filter
    assert read_vec(p, limit=3, vocabulary=["dog", "sat"]).words == ("sat",)


def test_vocabulary_stops_reading_once_complete(tmp_path):
    vecs = _vectors(3, 2)
    p = write_glove(tmp_path / "g.txt", ["a", "b", "c"], vecs)
    with p.open("a", encoding="utf-8") as fh:
        fh.write("broken 1.0\n")
    assert read_vec(p, vocabulary=["a", "c"]).words == ("a", "c")
    with pytest.raises(ValidationError, match="line 4 has 1 values after the word, expected 2"):
        read_vec(p)


def test_text_tolerates_blank_lines_missing_final_newline_and_spaces_in_words(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("a 1 2\n\nat name@domain.com 3 4\n. . . 5 6\nb 7 8", encoding="utf-8")
    e = read_vec(p)
    assert e.words == ("a", "at name@domain.com", ". . .", "b")
    np.testing.assert_array_equal(e.vectors, [[1, 2], [3, 4], [5, 6], [7, 8]])


def test_text_duplicates_keep_the_first_vector(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("a 1 2\nb 3 4\na 5 6\n", encoding="utf-8")
    e = read_vec(p)
    assert e.words == ("a", "b")
    np.testing.assert_array_equal(e.vectors, [[1, 2], [3, 4]])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a 1 2\nb 3\nc 5 6\n", "line 2 has 1 values after the word, expected 2"),
        ("a 1 2\nb 3 4\nc 5 x\n", r"line 3: 'x' is not a number"),
        ("a 1 2\nb nan 4\n", r"line 2 \('b'\) has a non-finite value"),
        ("3 2\na 1 2\nb 3 4\n", "the header announces 3 words but the file has 2"),
        ("2 2\na 1 2\nb 3\n", "line 3 has 1 values after the word, expected 2"),
        ("justaword\n", "line 1 has no vector"),
        ("", "empty file"),
    ],
)
def test_text_errors_name_the_line(tmp_path, content, message):
    p = tmp_path / "bad.vec"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(ValidationError, match=message) as info:
        read_vec(p)
    assert "bad.vec" in str(info.value)


def test_text_invalid_utf8_names_the_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"a 1 2\n\xff\xfe 3 4\n")
    with pytest.raises(ValidationError, match="line 2 is not valid UTF-8"):
        read_vec(p)
    assert read_vec(p, unicode_errors="replace").words == ("a", "\ufffd\ufffd")


def test_reader_argument_errors(tmp_path):
    p = write_glove(tmp_path / "g.txt", ["a", "b"], _vectors(2, 2))
    with pytest.raises(ValidationError, match="no such file"):
        read_vec(tmp_path / "missing.txt")
    with pytest.raises(ValidationError, match="limit must be >= 1"):
        read_vec(p, limit=0)
    with pytest.raises(ValidationError, match="not one string"):
        read_vec(p, vocabulary="a")
    with pytest.raises(ValidationError, match="none of the vocabulary"):
        read_vec(p, vocabulary=["zzz"])
    with pytest.raises(ValidationError, match="float dtype"):
        read_vec(p, dtype=np.int32)


def test_count_lines(tmp_path):
    for content, n in [(b"", 0), (b"a", 1), (b"a\n", 1), (b"a\nb", 2), (b"a\n\n", 2)]:
        p = tmp_path / "c.txt"
        p.write_bytes(content)
        assert _count_lines(p) == n


# ----------------------------------------------------------------------------- binary
@pytest.mark.parametrize("newline", [True, False])
def test_word2vec_binary_round_trip(tmp_path, newline):
    words = [*WORDS, "naïve", "日本"]
    vecs = _vectors(len(words), 6, seed=1)
    p = write_w2v(tmp_path / "e.bin", words, vecs, newline=newline)
    e = read_word2vec_binary(p)
    assert e.words == tuple(words)
    np.testing.assert_array_equal(e.vectors, vecs)
    assert read_word2vec_binary(p, limit=2).words == ("the", "cat")
    assert read_word2vec_binary(p, vocabulary=["日本", "cat"]).words == ("cat", "日本")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:-3], "record 3 at byte .* is truncated"),
        (lambda b: b.replace(b"3 2\n", b"4 2\n", 1), "announces 4 words but the file ends after 3"),
        (lambda b: b"not a header\n" + b, "not a word2vec binary file"),
        (lambda b: b.replace(b"bb ", b"\xff\xfe ", 1), "record 2 at byte .*: the word is not valid UTF-8"),
    ],
)
def test_word2vec_binary_errors(tmp_path, mutate, message):
    vecs = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
    raw = write_w2v(tmp_path / "ok.bin", ["a", "bb", "ccc"], vecs).read_bytes()
    p = tmp_path / "bad.bin"
    p.write_bytes(mutate(raw))
    with pytest.raises(ValidationError, match=message):
        read_word2vec_binary(p)


def test_word2vec_binary_rejects_non_finite(tmp_path):
    vecs = np.array([[1, 2], [np.inf, 4]], dtype=np.float32)
    p = write_w2v(tmp_path / "e.bin", ["a", "b"], vecs)
    with pytest.raises(ValidationError, match=r"record 2 \('b'\) has a non-finite value"):
        read_word2vec_binary(p)


# ----------------------------------------------------------------------------- all formats
word = st.text(
    alphabet=st.characters(categories=("L", "N", "P"), exclude_characters=" "), min_size=1, max_size=8
)


@given(
    words=st.lists(word, min_size=2, max_size=12, unique=True),
    dim=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_every_format_round_trips(tmp_path_factory, words, dim, seed):
    vecs = _vectors(len(words), dim, seed)
    d = tmp_path_factory.mktemp("rt")
    for e in (
        read_vec(write_glove(d / "g.txt", words, vecs)),
        read_vec(write_fasttext(d / "f.vec", words, vecs)),
        read_word2vec_binary(write_w2v(d / "w.bin", words, vecs)),
    ):
        assert e.words == tuple(words)
        np.testing.assert_array_equal(e.vectors, vecs)


# ----------------------------------------------------------------------------- Embeddings
def test_embeddings_checks_and_space():
    vecs = np.array([[0, 0], [3, 4], [6, 8]], dtype=np.float32)
    e = Embeddings(("a", "b", "c"), vecs)
    assert e.index(["c", "a"]).tolist() == [2, 0] and "b" in e and "z" not in e
    with pytest.raises(ValidationError, match="2 word\\(s\\) not in the embeddings: 'x', 'y'"):
        e.index(["a", "x", "y"])
    s = e.space([2, 0])
    assert s.labels == ("c", "a") and s.distances[0, 1] == 10.0
    full = e.space()
    np.testing.assert_allclose(full.distances, cdist(vecs, vecs), rtol=1e-15)
    sub = e.subset([1, 2])
    assert sub.words == ("b", "c") and sub.vectors.tolist() == [[3, 4], [6, 8]]
    with pytest.raises(ValidationError, match="appears twice"):
        Embeddings(("a", "a"), vecs[:2])
    with pytest.raises(ValidationError, match="3 words for 2 vectors"):
        Embeddings(("a", "b", "c"), vecs[:2])
    with pytest.raises(ValidationError, match="2-d float array"):
        Embeddings(("a",), np.array([1, 2]))
    with pytest.raises(ValidationError, match="zero"):
        Embeddings(("a", "b"), np.zeros((2, 2))).space()


def test_batches_parse_and_name_the_line(tmp_path, monkeypatch):
    # numpy parses the kept lines _BATCH at a time; errors still name the line
    monkeypatch.setattr("metricdp.data.embeddings._BATCH", 2)
    vecs = _vectors(len(WORDS), 3, seed=5)
    p = write_fasttext(tmp_path / "e.vec", WORDS, vecs)
    e = read_vec(p)
    np.testing.assert_array_equal(e.vectors, vecs)
    assert read_vec(p, vocabulary=["sat", "mat", "ran"]).words == ("sat", "mat", "ran")
    lines = p.read_text(encoding="utf-8").splitlines()
    lines[5] = "mat 1.0 oops 2.0"  # line 6, in the third batch
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"line 6: 'oops' is not a number"):
        read_vec(p)
