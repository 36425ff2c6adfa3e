"""The streamed accounted release's pieces: the first pass, plans on row codes, records removed whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.accounting.ledger import Ledger
from metricdp.accounting.plan import plan_release
from metricdp.errors import ValidationError
from metricdp.pipeline.first_pass import first_pass
from metricdp.pipeline.labels import Labels
from metricdp.pipeline.run import Source
from metricdp.streaming.persons import scan_persons
from metricdp.tabular import csvsplit
from metricdp.tabular.csv import split_records


class _Mech:
    """The labels of a mechanism, all a first pass reads of it."""

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels


def test_scan_csv_quoted_ids_chunks_and_labels(tmp_path: Path) -> None:
    p = tmp_path / "in.csv"
    p.write_bytes(b'user,city\r\n"b, x",Paris\r\nann,Lyon\r\n"b, x",Lyon\r\n\xc3\xa9,"Paris"\r\nann,Paris')
    scan = first_pass(Labels(_Mech(["Paris", "Lyon"]), "city", None), Source.of(p, chunk_rows=2), "user",
                      keep_values=True)
    assert scan.persons.to_pylist() == [b"ann", b"b, x", "é".encode()]
    assert [scan.persons[int(c)].as_py().decode() for c in scan.codes] == ["b, x", "ann", "b, x", "é", "ann"]
    assert scan.values is not None and scan.values.tolist() == [0, 1, 1, 0, 0]


def test_scan_refuses_unknown_labels_like_the_release(tmp_path: Path) -> None:
    p = tmp_path / "in.csv"
    p.write_text("user,city\na,Paris\nb,Rome\n")
    with pytest.raises(ValidationError, match=r"1 value\(s\) not in the space's labels: 'Rome'.*line\(s\) 3"):
        first_pass(Labels(_Mech(["Paris"]), "city", None), Source.of(p), "user")


def test_scan_parquet_integer_ids_and_nulls(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"u": [7, 10, 7], "c": ["x", "y", "z"]}), tmp_path / "a.parquet")
    scan = scan_persons(tmp_path / "a.parquet", "parquet", "u", chunk_rows=2)
    assert scan.persons.tolist() == ["10", "7"] and scan.codes.tolist() == [1, 0, 1]
    pq.write_table(pa.table({"u": ["a", None], "c": ["x", "y"]}), tmp_path / "b.parquet")
    with pytest.raises(ValidationError, match=r"empty in 1 row\(s\) \(first at row\(s\) 2\)"):
        scan_persons(tmp_path / "b.parquet", "parquet", "u")
    pq.write_table(pa.table({"u": [1.5], "c": ["x"]}), tmp_path / "c.parquet")
    with pytest.raises(ValidationError, match="person ids must be integers or text"):
        scan_persons(tmp_path / "c.parquet", "parquet", "u")


def test_plan_on_codes_spends_like_plan_on_ids(tmp_path: Path) -> None:
    """The same rows given as ids or as codes into unsorted persons: the same spend per person, drop included."""
    persons = np.array(["zed", "amy", "kim"])
    codes = np.array([0, 1, 0, 2, 0, 0, 1])
    a = Ledger(tmp_path / "a.db", budget=0.3)
    b = Ledger(tmp_path / "b.db", budget=0.3)
    p1 = plan_release(persons[codes], 0.1, ledger=a, unit="", policy="drop", rng=0)
    p2 = plan_release(codes, 0.1, ledger=b, unit="", policy="drop", rng=0, persons=persons)
    assert a.spent(persons).tolist() == b.spent(persons).tolist() == [0.3, 0.2, 0.1]
    assert p2.keep.sum() == p1.keep.sum() == 6 and (codes[p2.keep] == 0).sum() == 3
    for s1, s2 in ((p1.run, p2.run), (p1.total, p2.total)):
        assert s1 is not None and s2 is not None
        assert (s2.persons, s2.max, s2.median, s2.mean) == (s1.persons, s1.max, s1.median, pytest.approx(s1.mean))
    p2.commit()
    with pytest.raises(ValidationError, match="codes in"):
        plan_release([0, 3], 0.1, persons=persons)
    with pytest.raises(ValidationError, match="distinct"):
        plan_release([0, 1], 0.1, persons=["a", "a"], budget=1.0)


def test_plan_on_codes_consistent_memo(tmp_path: Path) -> None:
    persons = np.array(["b", "a"])
    led = Ledger(tmp_path / "l.db", budget=1.0)
    plan = plan_release([0, 1, 0], 0.25, ledger=led, unit="", consistent=True, true_values=[5, 5, 5], scope="s",
                        persons=persons)
    plan.releases(np.array([1, 2]))
    plan.commit()
    again = plan_release([1, 0], 0.25, ledger=led, unit="", consistent=True, true_values=[5, 5], scope="s",
                         persons=np.array(["a", "b"]))
    assert again.memo_hit.all() and again.memo_release.tolist() == [1, 2]  # b, then a


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "bb", '"q,"']), st.booleans(), st.booleans()), min_size=1,
                max_size=12),
       st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_without_records_is_the_input_without_those_lines(rows: list[tuple[str, bool, bool]], nl: str,
                                                          last_nl: bool) -> None:
    """Oracle: the file as segments (a record with its line break, a blank line); removed records' segments go."""
    segments: list[tuple[str, bool]] = []  # (text, removed)
    for i, (value, gone, blank_after) in enumerate(rows):
        last = i == len(rows) - 1
        segments.append((f"{value},{i}" + ("" if last and not last_nl else nl), gone))
        if blank_after and not last:
            segments.append((nl, False))
    text = "".join(t for t, _ in segments)
    buf = np.frombuffer(text.encode(), dtype=np.uint8)
    recs = split_records(buf, eof=True, ncols=2, column=1, max_records=100, where="t")
    gone = np.array([g for _, g, _ in rows])
    starts, stops, row, kind = csvsplit.edits_for(recs, None, ())
    s, e, _, k = csvsplit.without_records(buf, recs, gone, starts, stops, row, kind)
    out = csvsplit.splice(buf, recs.end, s, e, np.zeros(0, dtype=np.uint8), np.zeros(2, dtype=np.int64),
                          np.zeros(len(s), dtype=np.intp))
    assert bytes(out).decode() == "".join(t for t, removed in segments if not removed)
    assert (k == 1).all() and (np.diff(s) > 0).all()


def test_scan_reports_progress(tmp_path: Path) -> None:
    p = tmp_path / "in.csv"
    p.write_text("user,city\n" + "a,x\n" * 50)
    seen: list[tuple[int, str]] = []
    scan_persons(p, "csv", "user", chunk_rows=20, progress=lambda done, total, message: seen.append((done, message)))
    assert [d for d, _ in seen] == [20, 40, 50] and seen[-1][1] == "first pass (who each row belongs to)"


def test_settlement_aborts_on_an_error_and_commits_otherwise() -> None:
    from metricdp.streaming.accounted import Settlement

    class Run:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def abort(self) -> None:
            self.calls.append("abort")

        def commit(self) -> None:
            self.calls.append("commit")

    ok, failed, late = Run(), Run(), Run()
    with Settlement(ok):
        pass
    with pytest.raises(KeyError), Settlement(failed):
        raise KeyError("x")
    with pytest.raises(KeyError), Settlement() as s:
        s.run = late  # the plan came inside the block
        raise KeyError("y")
    with Settlement():  # nothing to settle
        pass
    assert (ok.calls, failed.calls, late.calls) == (["commit"], ["abort"], ["abort"])


@pytest.mark.parametrize("scan", ["persons", "numbers", "points"])
def test_first_pass_progress_shows_the_row_count_once(tmp_path: Path, scan: str) -> None:
    """The reporter writes the count itself: a first pass's message must not repeat it (one wording for all three)."""
    pytest.importorskip("pyarrow")
    from metricdp._progress import ProgressReporter
    from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
    from metricdp.pipeline.numbers import Numbers
    from metricdp.pipeline.points import PointPairs

    p = tmp_path / "in.csv"
    p.write_text("user,x,y\n" + "".join(f"u{i % 3},{i},{i % 7}\n" for i in range(1234)))
    ticks: list[tuple[int, str]] = []

    def progress(done: int, total: int | None, message: str) -> None:
        ticks.append((done, message))

    if scan == "persons":
        scan_persons(p, "csv", "user", chunk_rows=500, progress=progress)
    elif scan == "numbers":
        kind = Numbers(number_mechanism(NumericGrid(0, 2000, 1), 0.1), "x", None)
        first_pass(kind, Source.of(p, chunk_rows=500), "user", progress=progress)
    else:
        first_pass(PointPairs("x", "y", lambda v, r: v), Source.of(p, chunk_rows=500), "user", progress=progress)
    assert ticks and ticks[-1][0] == 1234
    assert {m for _, m in ticks} == {"first pass (who each row belongs to)"}
    line = ProgressReporter("privatize in.csv", clock=lambda: 0.0).line(1234, None, ticks[-1][1], now=7.0)
    assert line.count("1,234") == 1 and "1234" not in line, line
