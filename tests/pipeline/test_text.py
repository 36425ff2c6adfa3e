"""The text kind on the release pipeline: a Parquet or CSV text column rewritten chunk by chunk, what leaves."""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from metricdp.errors import ValidationError
from metricdp.pipeline.run import Source, release_pass
from metricdp.pipeline.text import Texts
from metricdp.tabular.leaks import LeakRule
from metricdp.text.accounting import TextAccounting
from metricdp.text.rewrite import Rewriter, RewriteStats, Vocabulary, rewrite_file, rewrite_texts

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

LABELS = ["cat", "dog", "paris", "the"]


def shift(idx: np.ndarray) -> np.ndarray:  # a deterministic "mechanism": the next word
    return (idx + 1) % len(LABELS)


def _parquet(path: Path, **columns: pa.Array) -> Path:
    pq.write_table(pa.table(columns), path, compression="zstd")
    return path


def test_a_parquet_text_column_is_rewritten_and_every_other_column_kept(tmp_path: Path) -> None:
    src = _parquet(tmp_path / "in.parquet", id=pa.array([7, 8, 9], pa.int32()),
                   text=pa.array(["The cat, the Dog's  paris!", "", "zebra 42 CAT"]),
                   score=pa.array([0.5, 1.5, None]))
    out = tmp_path / "out.parquet"
    st = rewrite_file(src, out, Vocabulary(LABELS), shift, column="text")
    got = pq.read_table(out)
    # hand-computed: each vocabulary word is the next label, in its case pattern; "42" and "zebra" stay
    assert got.column("text").to_pylist() == ["Cat dog, cat Paris's  the!", "", "zebra 42 DOG"]
    assert got.column("id").to_pylist() == [7, 8, 9] and got.column("score").to_pylist() == [0.5, 1.5, None]
    assert got.schema.field("id").type == pa.int32()
    assert pq.ParquetFile(out).metadata.row_group(0).column(0).compression == "ZSTD"
    assert (st.documents, st.tokens, st.replaced, st.oov, st.kept_by) == (3, 8, 6, 1, {"numbers": 1})
    assert st.columns is not None and st.columns.released == ("text",) and st.columns.unacknowledged == ("id", "score")


def test_a_kept_column_holding_the_true_text_is_refused_unless_named(tmp_path: Path) -> None:
    texts = ["the cat", "Paris dog", "a dog"]
    src = _parquet(tmp_path / "in.parquet", text=pa.array(texts), copy=pa.array([t.upper() for t in texts]))
    out = tmp_path / "out.parquet"
    assert Texts("text", Rewriter(Vocabulary(LABELS), shift)).rule() == LeakRule.text("text")
    with pytest.raises(ValidationError, match="column 'copy' holds the released column's true text"):
        rewrite_file(src, out, Vocabulary(LABELS), shift, column="text")
    assert not out.exists()
    rewrite_file(src, out, Vocabulary(LABELS), shift, column="text", keep_columns=["copy"])  # kept on purpose
    assert pq.read_table(out).column("copy").to_pylist() == ["THE CAT", "PARIS DOG", "A DOG"]
    csv_in = tmp_path / "in.csv"
    csv_in.write_text("text,copy\n" + "".join(f"{t},{t}\n" for t in texts), encoding="utf-8")
    with pytest.raises(ValidationError, match="column 'copy' holds the released column's true text"):
        rewrite_file(csv_in, tmp_path / "out.csv", Vocabulary(LABELS), shift, column="text")
    assert not (tmp_path / "out.csv").exists()


def test_missing_documents_and_authors_are_one_error_with_counts_and_places(tmp_path: Path) -> None:
    src = _parquet(tmp_path / "in.parquet", text=pa.array(["cat", None, "dog", None, "the"]),
                   who=pa.array(["ann", "bob", "", "cy", None]))
    with pytest.raises(ValidationError, match=r"in.parquet: row 2: column 'text' has no text \(a missing value\) "
                                              r"\(2 document\(s\); first at row\(s\) 2, 4\); nothing written$"):
        rewrite_file(src, tmp_path / "out.parquet", Vocabulary(LABELS), shift, column="text")
    book = TextAccounting(1.0, len(LABELS), user_column="who")
    with pytest.raises(ValidationError, match=r"row 2: column 'text' has no text .*first at row\(s\) 2, 4\); "
                                              r"row 3: user column 'who' is empty or not text: every document needs "
                                              r"an author \(2 document\(s\); first at row\(s\) 3, 5\); nothing"):
        rewrite_file(src, tmp_path / "out.parquet", Vocabulary(LABELS), shift, column="text", accounting=book)
    assert not (tmp_path / "out.parquet").exists()
    numbers = _parquet(tmp_path / "n.parquet", text=pa.array([1, 2]))
    with pytest.raises(ValidationError, match="column 'text' has type int64; text expected"):
        rewrite_file(numbers, tmp_path / "out.parquet", Vocabulary(LABELS), shift, column="text")
    with pytest.raises(ValidationError, match="no user column 'nobody'"):
        rewrite_file(numbers, tmp_path / "out.parquet", Vocabulary(LABELS), shift, column="text",
                     accounting=TextAccounting(1.0, len(LABELS), user_column="nobody"))


def test_a_rewrite_is_written_in_its_inputs_format(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("text\ncat\n", encoding="utf-8")
    for name in ("out.parquet", "out.geojson", "out.txt"):
        with pytest.raises(ValidationError, match=r"written in its input's format \(csv: \.csv\), got \."):
            rewrite_file(src, tmp_path / name, Vocabulary(LABELS), shift, column="text")
        assert not (tmp_path / name).exists()
    rewrite_file(src, tmp_path / "out.rewritten", Vocabulary(LABELS), shift, column="text")  # no format named
    assert (tmp_path / "out.rewritten").read_text(encoding="utf-8") == "text\ndog\n"
    geojson = tmp_path / "in.geojson"  # a format the pipeline writes only
    geojson.write_text("{}", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"a text input must be .*got \.geojson"):
        rewrite_file(geojson, tmp_path / "o.csv", Vocabulary(LABELS), shift, column="text")


@pytest.mark.parametrize("chunk_rows", [1, 2, 3, 100])
def test_chunks_change_no_output_and_the_counts_add_up(tmp_path: Path, chunk_rows: int) -> None:
    """One rewriter across the chunks: the counts are those of the whole file, the authors follow their rows."""
    texts = ["cat dog", "Paris", "the cat the", "", "dog's"]
    src = _parquet(tmp_path / "in.parquet", text=pa.array(texts), who=pa.array([3, 1, 3, 2, 1]))
    source = Source.of(src, chunk_rows=chunk_rows)
    book = TextAccounting(1.0, len(LABELS), consistent=True, user_column="who")
    st = RewriteStats()
    kind = Texts("text", Rewriter(Vocabulary(LABELS), shift, stats=st, accounting=book))
    out = tmp_path / "out.parquet"
    release_pass(kind, source, out, source.plan(kind, (), ()))
    assert pq.read_table(out).column("text").to_pylist() == ["dog paris", "The", "cat dog cat", "", "paris's"]
    assert (st.documents, st.tokens, st.replaced, st.changed) == (5, 7, 7, 7)
    # consistent per author: author 3 draws "the" once and "cat" once (not "the" twice): 3 fresh draws for
    # "cat", "dog", "the"; author 1 "paris" and "dog"; author 2 nothing
    report = book.report(st.documents)
    assert report.persons is not None and (report.persons.persons, report.persons.max) == (3, 3.0)
    assert report.persons.mean == pytest.approx(5 / 3)


def test_progress_estimates_the_total_from_a_text_files_share_only(tmp_path: Path) -> None:
    """A CSV's bytes are its documents' (an estimate of the tokens in all); a Parquet file's are not (none)."""
    texts = ["cat dog paris"] * 40
    calls: list[tuple[int, int | None]] = []
    pq_in = _parquet(tmp_path / "in.parquet", text=pa.array(texts))
    rewrite_file(pq_in, tmp_path / "out.parquet", Vocabulary(LABELS), shift, column="text", batch_tokens=30,
                 progress=lambda done, total, _m: calls.append((done, total)))
    assert calls == [(30, None), (60, None), (90, None), (120, None), (120, None)]
    calls.clear()
    csv_in = tmp_path / "in.csv"
    csv_in.write_text("text\n" + "".join(t + "\n" for t in texts), encoding="utf-8")
    rewrite_file(csv_in, tmp_path / "out.csv", Vocabulary(LABELS), shift, column="text", batch_tokens=30,
                 progress=lambda done, total, _m: calls.append((done, total)))
    assert [d for d, _ in calls] == [30, 60, 90, 120, 120] and calls[-1] == (120, 120)


def test_a_csv_keeps_every_byte_but_the_released_fields(tmp_path: Path) -> None:
    """Byte-order mark, CRLF, a blank line, quoting as in the input, a quoted newline; a dropped column goes."""
    src = tmp_path / "in.csv"
    src.write_bytes(b'\xef\xbb\xbfid,text,who\r\n1,"cat, dog",ann\r\n\r\n2,Paris,bob\r\n3,"say ""the""",cy\r\n'
                    b'4,"multi\nline cat",dan')
    out = tmp_path / "out.csv"
    st = rewrite_file(src, out, Vocabulary(LABELS), shift, column="text", drop_columns=["who"])
    assert out.read_bytes() == (b'\xef\xbb\xbfid,text\r\n1,"dog, paris"\r\n\r\n2,The\r\n3,"say ""cat"""\r\n'
                                b'4,"multi\nline dog"')
    assert (st.documents, st.tokens, st.replaced, st.oov) == (4, 8, 5, 3)


_WORDS = hst.sampled_from(["cat", "Dog", "PARIS", "the", "zebra", "42", "dog's", "caf\u00e9", ",", '"', "\n", "\r\n",
                           "  ", "pa\u200bris"])


@settings(max_examples=60, deadline=None)
@given(docs=hst.lists(hst.lists(_WORDS, max_size=8).map(" ".join), min_size=1, max_size=12),
       chunk_bytes=hst.integers(8, 200), batch_tokens=hst.integers(1, 20))
def test_a_csv_column_is_rewritten_as_rewrite_texts_rewrites_its_fields(docs: list[str], chunk_bytes: int,
                                                                       batch_tokens: int) -> None:
    """Oracle: the released column read back by Python's csv module is ``rewrite_texts`` of the input's fields
    (any chunking, any batch size: the deterministic sampler makes batches invisible); the other column is
    untouched and the counts agree."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.csv", Path(tmp) / "out.csv"
        with src.open("w", newline="", encoding="utf-8") as fh:
            csv.writer(fh, lineterminator="\r\n").writerows([("text", "n"), *((d, str(i)) for i, d in enumerate(docs))])
        want_stats = RewriteStats()
        want = list(rewrite_texts(docs, Vocabulary(LABELS), shift, stats=want_stats))
        got_stats = RewriteStats()
        source = Source.of(src, chunk_bytes=chunk_bytes)
        kind = Texts("text", Rewriter(Vocabulary(LABELS), shift, stats=got_stats, batch_tokens=batch_tokens))
        release_pass(kind, source, out, source.plan(kind, (), ()))
        with out.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    assert rows[0] == ["text", "n"] and [r[1] for r in rows[1:]] == [str(i) for i in range(len(docs))]
    assert [r[0] for r in rows[1:]] == want
    assert (got_stats.documents, got_stats.tokens, got_stats.replaced, got_stats.oov, got_stats.kept_by) == (
        want_stats.documents, want_stats.tokens, want_stats.replaced, want_stats.oov, want_stats.kept_by)
