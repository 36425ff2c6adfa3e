"""Streaming rewriting: formats, case, OOV counts, keep list, clitics, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.text.rewrite import Vocabulary, rewrite_file, rewrite_texts

LABELS = ["cat", "dog", "paris", "the"]


def shift(idx: np.ndarray) -> np.ndarray:  # a deterministic "mechanism": next word
    return (idx + 1) % len(LABELS)


def test_text_rewrite_keeps_layout_case_and_counts() -> None:
    from metricdp.text.rewrite import RewriteStats

    st = RewriteStats()
    texts = ["The CAT, the Dog's  paris!", "zebra 42 cat"]
    out = list(rewrite_texts(texts, Vocabulary(LABELS), shift, keep=frozenset({"the"}), stats=st, batch_tokens=2))
    assert out == ["The DOG, the Paris's  the!", "zebra 42 dog"]
    assert (st.tokens, st.replaced, st.kept, st.oov, st.documents) == (8, 4, 3, 1, 2)  # 42: a number, kept
    assert st.changed == 4 and st.oov_examples == {"zebra": 1} and st.kept_by == {"words": 2, "numbers": 1}


def test_files_in_each_format(tmp_path: Path) -> None:
    voc = Vocabulary(LABELS)
    txt = tmp_path / "a.txt"
    txt.write_bytes(b"cat dog\r\nparis\n\nno newline cat")
    rewrite_file(txt, tmp_path / "a.out.txt", voc, shift)
    assert (tmp_path / "a.out.txt").read_bytes() == b"dog paris\r\nthe\n\nno newline dog"
    csv_in = tmp_path / "a.csv"
    csv_in.write_text('id,text\n1,"cat, dog"\n2,Paris\n', encoding="utf-8")
    rewrite_file(csv_in, tmp_path / "o.csv", voc, shift, column="text")
    assert (tmp_path / "o.csv").read_text(encoding="utf-8") == 'id,text\n1,"dog, paris"\n2,The\n'
    jl = tmp_path / "a.jsonl"
    jl.write_text('{"id": 1, "text": "cat"}\n{"id": 2, "text": "Dog é"}\n', encoding="utf-8")
    rewrite_file(jl, tmp_path / "o.jsonl", voc, shift, column="text")
    assert [json.loads(x) for x in (tmp_path / "o.jsonl").read_text(encoding="utf-8").splitlines()] == [
        {"id": 1, "text": "dog"},
        {"id": 2, "text": "Paris é"},
    ]


@pytest.mark.parametrize(
    ("name", "content", "column", "match"),
    [
        # CSV through the file layer's record definition (metricdp.tabular.csv) and its messages
        ("b.csv", b"id,text,text\n1,a,b\n", "text", "'text' appears more than once"),
        ("b.csv", b"id,,text\n1,a,b\n", "text", "column 2 has an empty name"),
        ("b.csv", b"id,text\n1,a,b\n", "text", "line 2 has 3 fields"),
        ("b.csv", b"id,text\r1,a\r", "text", "line 1"),  # classic-Mac record ends: refused, never passed through
        ("b.tsv", b"id\ttext\n1\ta\n", "text", "tab-separated"),
        ("b.jsonl", b'{"text": 3}\n', "text", "column 'text' has type int64; text expected"),
        ("b.jsonl", b"not json\n", "text", "line 1 is not JSON"),
        ("b.txt", b"cat \xff dog\n", None, "invalid UTF-8 at byte offset 4"),
        ("b.csv", b"id,text\n", None, "needs the parameter 'column'"),
    ],
)
def test_bad_inputs_are_one_clear_error(
    tmp_path: Path, name: str, content: bytes, column: str | None, match: str
) -> None:
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(ValidationError, match=match):
        rewrite_file(p, tmp_path / ("out" + p.suffix), Vocabulary(LABELS), shift, column=column)


def test_what_leaves_csv_and_jsonl(tmp_path: Path) -> None:
    voc = Vocabulary(LABELS)
    src = tmp_path / "a.csv"
    src.write_text("author,text,date\nann,cat,1999\nbob,dog,2001\n")
    out = tmp_path / "o.csv"
    st = rewrite_file(src, out, voc, shift, column="text", drop_columns=["author"])
    assert out.read_text().splitlines()[0] == "text,date"  # the dropped column is gone
    assert st.columns is not None and st.columns.as_dict() == {
        "released": ["text"], "unreleased": ["date"], "unacknowledged": ["date"], "dropped": ["author"]}
    st = rewrite_file(src, tmp_path / "o2.csv", voc, shift, column="text", keep_columns=["author", "date"])
    assert st.columns is not None
    assert st.columns.unreleased == ("author", "date") and st.columns.unacknowledged == ()
    with pytest.raises(ValidationError, match="no column 'nope'"):
        rewrite_file(src, tmp_path / "o3.csv", voc, shift, column="text", drop_columns=["nope"])
    jl = tmp_path / "a.jsonl"
    jl.write_text('{"id": 1, "text": "cat", "who": "ann"}\n{"id": 2, "text": "dog", "who": "bob"}\n')
    st = rewrite_file(jl, tmp_path / "o.jsonl", voc, shift, column="text", drop_columns=["who"])
    written = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert written == [{"id": 1, "text": "dog"}, {"id": 2, "text": "paris"}]
    jl.write_text('{"id": 1, "text": "cat"}\n{"text": "dog"}\n')  # one format: every record has the header's keys
    with pytest.raises(ValidationError, match="line 2"):
        rewrite_file(jl, tmp_path / "o4.jsonl", voc, shift, column="text")
    assert st.columns is not None and st.columns.unreleased == ("id",) and st.columns.dropped == ("who",)
    txt = tmp_path / "a.txt"
    txt.write_text("cat\n")
    with pytest.raises(ValidationError, match="plain text has no columns"):
        rewrite_file(txt, tmp_path / "o.txt", voc, shift, drop_columns=["x"])


@pytest.mark.parametrize("name", ["long.txt", "long.jsonl", "long.csv"])
def test_a_line_over_the_cap_is_one_error_and_bounded(tmp_path: Path, name: str) -> None:
    # a 40 MB line once cost text privatize 4.4 GB: every reader stops at the record cap
    p = tmp_path / name
    body = "cat " * 5000
    content = {"long.txt": body + "\n", "long.jsonl": json.dumps({"text": body}) + "\n",
               "long.csv": f"text\n{body}\n"}[name]
    p.write_text(content)
    column = None if name.endswith(".txt") else "text"
    with pytest.raises(ValidationError, match="cap of 1,024 bytes"):
        rewrite_file(p, tmp_path / ("o" + p.suffix), Vocabulary(LABELS), shift, column=column, max_record=1024)
    st = rewrite_file(p, tmp_path / ("o" + p.suffix), Vocabulary(LABELS), shift, column=column)  # the default cap: fine
    assert st.tokens == 5000


@pytest.mark.parametrize(("name", "column", "body"), [
    ("p.txt", None, "cat dog paris\n" * 40),
    ("p.csv", "text", "text\n" + "cat dog paris\n" * 40),
    ("p.jsonl", "text", '{"text": "cat dog paris"}\n' * 40),
])
def test_progress_tokens_and_their_total_from_the_file_size(tmp_path: Path, name: str, column: str | None,
                                                            body: str) -> None:
    """Told after each batch: tokens done, and the tokens expected from the share of the file read."""
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    calls: list[tuple[int, int | None]] = []
    rewrite_file(path, tmp_path / ("o" + path.suffix), Vocabulary(LABELS), shift, column=column, batch_tokens=30,
                 progress=lambda done, total, _m: calls.append((done, total)))
    assert [d for d, _ in calls] == [30, 60, 90, 120, 120]  # each batch of 30 replaced tokens, then the end
    if name.endswith(".jsonl"):  # the documents are a share of each line (the keys): an estimate, and no more
        assert all(total is None or total >= done for done, total in calls)
        return
    assert calls[-1] == (120, 120)  # the whole file read: the estimate is exact
    for _, total in calls:  # rows of equal size: the estimate is within one row of the truth
        assert total is not None and abs(total - 120) <= 3


def test_a_batch_is_sampled_in_pieces_with_progress_and_the_same_output() -> None:
    """A batch under ``batch_tokens`` reports progress after each piece; pieces change no release."""
    texts = ["the cat saw paris"] * 50  # 200 word tokens, 150 of the vocabulary ("saw" is not): one batch
    calls: list[int] = []
    seen: list[tuple[int, int | None]] = []

    def counting(idx: np.ndarray) -> np.ndarray:
        calls.append(len(idx))
        return shift(idx)

    whole = list(rewrite_texts(texts, Vocabulary(LABELS), shift))
    pieces = list(rewrite_texts(texts, Vocabulary(LABELS), counting, piece_tokens=40, read_fraction=lambda: 0.5,
                                progress=lambda done, total, _msg: seen.append((done, total))))
    assert pieces == whole
    assert calls == [50, 50, 50]  # cut at word boundaries: the 50 tokens of a word are drawn together
    # 200 word tokens, 150 in the vocabulary: after 50 releases, 200 * 50 // 150 tokens done; half the input read
    assert [d for d, _ in seen] == [66, 133, 200] and all(t == 400 for _, t in seen)
    calls.clear()  # one word per piece at most when pieces are small: still a cut at each word boundary
    assert list(rewrite_texts(texts, Vocabulary(LABELS), counting, piece_tokens=1)) == whole
    assert calls == [50, 50, 50]
    with pytest.raises(ValidationError, match="piece_tokens"):
        list(rewrite_texts(texts, Vocabulary(LABELS), shift, piece_tokens=0))
    # the per-document accounting (the CLI's default) asks for its draws in the same pieces
    from metricdp.text.accounting import TextAccounting

    calls.clear()
    accounted = list(rewrite_texts(texts, Vocabulary(LABELS), counting, piece_tokens=40,
                                   accounting=TextAccounting(1.0, len(LABELS))))
    assert accounted == whole and calls == [50, 50, 50]


def test_plain_text_is_any_file_the_suffix_table_does_not_name(tmp_path: Path) -> None:
    """``.txt``, no suffix, an unknown one: plain text, line for line; its output keeps its format."""
    body = b"\xef\xbb\xbfcat\r\r\n\rdog\rthe\n\ncat"  # the byte-order mark is not text: not written
    want = b"dog\r\r\n\rparis\rcat\n\ndog"
    for name, out in (("a.txt", "o.txt"), ("notes.md", "o.md"), ("notes", "o"), ("n.md", "n.txt")):
        src = tmp_path / name
        src.write_bytes(body)
        st = rewrite_file(src, tmp_path / out, Vocabulary(LABELS), shift)
        assert (tmp_path / out).read_bytes() == want, name
        assert (st.documents, st.tokens, st.columns) == (4, 4, None)
    with pytest.raises(ValidationError, match=r"written in its input's format \(text: \.txt\), got \.csv"):
        rewrite_file(tmp_path / "a.txt", tmp_path / "o.csv", Vocabulary(LABELS), shift)
    assert not (tmp_path / "o.csv").exists()
    empty = tmp_path / "e.txt"
    empty.write_bytes(b"")
    assert rewrite_file(empty, tmp_path / "eo.txt", Vocabulary(LABELS), shift).documents == 0
    assert (tmp_path / "eo.txt").read_bytes() == b""
    with pytest.raises(ValidationError, match=r"a\.txt: the parameter 'column' applies to .*read as plain text"):
        rewrite_file(tmp_path / "a.txt", tmp_path / "o2.txt", Vocabulary(LABELS), shift, column="text")


def test_plain_text_chunks_change_no_output_and_the_counts_add_up(tmp_path: Path) -> None:
    """A plain-text file read in many chunks is rewritten as in one (a deterministic sampler)."""
    from metricdp.text import rewrite

    src = tmp_path / "a.txt"
    src.write_text("".join(f"the cat {i} saw Paris\n" for i in range(25)), encoding="utf-8")
    whole = rewrite_file(src, tmp_path / "one.txt", Vocabulary(LABELS), shift)
    old = rewrite.CHUNK_DOCUMENTS
    rewrite.CHUNK_DOCUMENTS = 4
    try:
        pieces = rewrite_file(src, tmp_path / "many.txt", Vocabulary(LABELS), shift)
    finally:
        rewrite.CHUNK_DOCUMENTS = old
    assert (tmp_path / "many.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
    assert (pieces.documents, pieces.tokens, pieces.replaced) == (whole.documents, whole.tokens, whole.replaced)
    assert (tmp_path / "one.txt").read_text(encoding="utf-8").splitlines()[3] == "cat dog 3 saw The"
