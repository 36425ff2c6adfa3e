"""The compiled id table against the pyarrow dictionary, and the one-read accounted release."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp import MetricSpace, PrivacyLeakWarning
from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError, ValidationError
from metricdp.mechanisms.base import certify
from metricdp.streaming import persons, privatize_file
from metricdp.streaming.accounted import Accounting
from metricdp.streaming.persons import _Dictionary, _HashBook, person_kernels, scan_persons
from tests.helpers import needs, skip_unless

KERNELS = person_kernels()
needs_numba = needs("fast")
ROOT = Path(__file__).resolve().parents[2]
LABELS = ["Paris", "Lyon", "Lille", "Nice"]


# ------------------------------------------------------------------------------- the compiled id table
def _both(chunks: list[list[bytes]], mask: int) -> None:
    ref, fast = _Dictionary(pa, pc), _HashBook(pa, pc, KERNELS, mask=mask)
    for ids in chunks:
        arr = pa.array(ids, type=pa.binary())
        ref.add(arr)
        fast.add(pa.array([b"pad", *ids], type=pa.binary()).slice(1))  # an Arrow slice: offset 1 into its buffers
    (ia, ca), (ib, cb) = ref.finish(), fast.finish()
    assert ia.equals(ib)
    assert ca.dtype == cb.dtype and np.array_equal(ca, cb)
    flat = [x for ids in chunks for x in ids]
    assert [ib[int(c)].as_py() for c in cb] == flat  # every row's code names its own id's bytes


ids_strategy = st.one_of(
    st.binary(min_size=1, max_size=12),
    st.text(min_size=1, max_size=20).map(lambda t: t.encode("utf-8")),
    st.binary(min_size=9, max_size=300),  # long: compared byte by byte beyond the slot's 8 bytes
    st.sampled_from([b"a", b"a\x00", b"a\x00\x00", b"\x00", b"ab" * 8, b"ab" * 8 + b"c", "é".encode()]),
)


@needs_numba
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(ids_strategy, max_size=80), max_size=6),
       st.sampled_from([0, 1, 3, 2**64 - 1]))
def test_hash_table_equals_the_dictionary(chunks: list[list[bytes]], mask: int) -> None:
    """Same ids, same codes; ``mask`` 0 makes every hash equal (every lookup an exact comparison)."""
    _both(chunks, mask)


@needs_numba
def test_hash_table_grows_across_chunks_with_forced_collisions() -> None:
    rng = np.random.default_rng(1)
    chunks = [[f"u{x}".encode() * int(1 + x % 3) for x in rng.integers(0, 3000, 2500)] for _ in range(4)]
    _both(chunks, 7)  # 8 distinct hashes for ~3000 ids: long probe chains, exact comparisons decide
    _both(chunks, 2**64 - 1)
    # ids equal on their first 8 bytes, lengths and hashes forced equal: only the bytes past 8 differ
    _both([[b"01234567" + bytes([i]) for i in range(256)] * 2], 0)


@needs_numba
def test_scan_csv_quoted_and_unicode_ids_same_with_and_without_kernels(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "in.csv"
    p.write_bytes('user,city\n"a""b",Paris\na"b,Lyon\n"a,b",Lyon\n\u00e9,Nice\n"\u00e9",Paris\nab,Nice\n'
                  .encode().replace(b'a"b,Lyon', b'"a""b",Lyon'))
    monkeypatch.setattr(persons, "_KERNELS", KERNELS)  # set: compiled whatever the file's size
    assert isinstance(persons.id_book(pa, pc, 10), _HashBook)
    fast = scan_persons(p, "csv", "user", chunk_rows=2)
    monkeypatch.setattr(persons, "_KERNELS", None)
    ref = scan_persons(p, "csv", "user", chunk_rows=2)
    assert fast.ids.equals(ref.ids) and np.array_equal(fast.codes, ref.codes)
    assert fast.persons[fast.codes].tolist() == ['a"b', 'a"b', "a,b", "é", "é", "ab"]


def test_id_book_falls_back_to_the_dictionary(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(persons.id_book(pa, pc, persons.COMPILED_BYTES - 1), _Dictionary)  # small input: no numba
    monkeypatch.setattr(persons, "_KERNELS", None)
    assert isinstance(persons.id_book(pa, pc), _Dictionary)


@pytest.fixture(params=["compiled", "pyarrow"])
def books(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test with the compiled table forced on (where numba is) and off."""
    if request.param == "compiled":
        skip_unless("fast")
    monkeypatch.setattr(persons, "_KERNELS", KERNELS if request.param == "compiled" else None)


# --------------------------------------------------------------------------------- one read of the file
@pytest.fixture(scope="module")
def mech():
    space = MetricSpace.from_points([[0.0], [1.0], [2.0], [3.5]], LABELS)
    m = np.exp(-0.5 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 0.5, "exponential")


def _checkins(path: Path, per_person: dict[str, int]) -> Path:
    lines = ["user,city,t"]
    k = 0
    for user, n in per_person.items():
        for _ in range(n):
            lines.append(f"{user},{LABELS[k % 4]},{k}")
            k += 1
    path.write_text("\r\n".join(lines) + "\r\n")
    return path


def _checkins_as(tmp_path: Path, per_person: dict[str, int], suffix: str) -> Path:
    """:func:`_checkins` as ``in.csv`` or, for ``.parquet``, the same table as ``in.parquet``."""
    inp = _checkins(tmp_path / "in.csv", per_person)
    if suffix != ".parquet":
        return inp
    pq.write_table(pacsv.read_csv(inp), tmp_path / "in.parquet")
    return tmp_path / "in.parquet"


def _rows(path: Path) -> list[list[str]]:
    if path.suffix == ".parquet":
        t = pq.read_table(path)
        return [list(map(str, r.values())) for r in t.to_pylist()]
    return [line.split(",") for line in path.read_text().splitlines()[1:]]


def _release(mech, inp: Path, out: Path, acc: Accounting, one_pass: bool, rng: object = 5):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return privatize_file(mech, inp, "city", out, rng=rng, chunk_rows=3, keep=["user", "t"], accounting=acc,
                              one_pass=one_pass)


@pytest.mark.usefixtures("books")
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_one_read_equals_two_passes_when_every_row_is_kept(mech, tmp_path: Path, suffix: str) -> None:
    inp = _checkins_as(tmp_path, {"ann": 5, "bob": 3, "cy": 1}, suffix)
    acc = Accounting("user", budget=5.0)
    one = _release(mech, inp, tmp_path / f"a{suffix}", acc, True)
    two = _release(mech, inp, tmp_path / f"b{suffix}", acc, False)
    assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()  # same seed, same draws
    assert one.accounting == two.accounting and one.rows == two.rows == 9
    assert one.accounting is not None and one.accounting.run.max == pytest.approx(2.5)


@pytest.mark.usefixtures("books")
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_one_read_withholds_whole_records_under_cap_and_drop(mech, tmp_path: Path, suffix: str) -> None:
    inp = _checkins_as(tmp_path, {"ann": 7, "bob": 4, "cy": 1}, suffix)
    true = {r[2]: r for r in _rows(inp)}
    for acc, most in ((Accounting("user", max_rows_per_user=2), 2),
                      (Accounting("user", budget=1.5, policy="drop"), 3)):
        for one_pass in (True, False):
            out = tmp_path / f"o{one_pass}{most}{suffix}"
            stats = _release(mech, inp, out, acc, one_pass, rng=None)
            got = _rows(out)
            per = Counter(r[0] for r in got)
            assert per == {"ann": most, "bob": most, "cy": 1}, (acc, one_pass)
            assert all(r[0] == true[r[2]][0] and r[1] in LABELS for r in got)  # whole records, released city
            rep = stats.accounting
            assert rep is not None and rep.rows_released == len(got) == stats.rows
            assert rep.withheld_cap + rep.withheld_budget == 12 - len(got)
            assert rep.run.max == pytest.approx(0.5 * most)


@pytest.mark.parametrize("how", ["copy", "unreadable", "one column"])
def test_one_read_withheld_rows_by_copy_or_by_a_second_release(mech, tmp_path: Path, how: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The CSV output is filtered in place when it can be read back (blank lines, CRLF and no final break kept),
    else released again; either way the same records leave, each whole."""
    from metricdp.tabular.formats import csv as csv_format

    used: list[int] = []
    real = csv_format.CsvFormat.withhold

    def copied(*a: object) -> int | None:  # counts the in-place copies that happened
        kept = real(*a)  # type: ignore[arg-type]
        used.extend([1] if kept is not None else [])
        return kept

    monkeypatch.setattr(csv_format.CsvFormat, "withhold", copied)
    if how == "unreadable":
        monkeypatch.setattr(csv_format, "_readable", lambda fh: False)
    inp = tmp_path / "in.csv"
    inp.write_bytes(b"user,city,t\r\nann,Paris,1\r\n\r\nann,Lyon,2\r\nbob,Nice,3\nann,Lille,4\r\n\nbob,Paris,5")
    out = tmp_path / "o.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        stats = privatize_file(mech, inp, "city", out, rng=3, chunk_rows=2, chunk_bytes=16,
                               keep=["user", "t"] if how != "one column" else [],
                               drop=[] if how != "one column" else ["user", "t"],
                               accounting=Accounting("user", max_rows_per_user=1))
    assert used == ([1] if how == "copy" else [])
    text = out.read_bytes()
    assert stats.rows == 2 and stats.accounting is not None and stats.accounting.withheld_cap == 3
    if how == "one column":
        assert text.startswith(b"city\r\n") and len([x for x in text.splitlines()[1:] if x]) == 2
        return
    lines = text.split(b"\n")
    assert lines[0] == b"user,city,t\r"
    recs = [x.rstrip(b"\r").split(b",") for x in lines[1:] if x.strip(b"\r")]
    assert sorted(r[0] for r in recs) == [b"ann", b"bob"] and all(r[1].decode() in LABELS for r in recs)
    truth = {b"1": b"ann", b"2": b"ann", b"3": b"bob", b"4": b"ann", b"5": b"bob"}
    assert all(truth[r[2]] == r[0] for r in recs)
    assert b"\r\n\r\n" in text or b"\n\n" in text  # the blank lines between records stay


@pytest.mark.usefixtures("books")
def test_one_read_refuse_writes_and_spends_nothing(mech, tmp_path: Path) -> None:
    inp = _checkins(tmp_path / "in.csv", {"ann": 4, "bob": 1})
    led = tmp_path / "l.db"
    Ledger(led, budget=1.0).close()
    out = tmp_path / "o.csv"
    with Ledger(led) as book, pytest.raises(BudgetExceededError, match="1 of 2 persons would exceed"):
        _release(mech, inp, out, Accounting("user", ledger=book), True, rng=None)
    assert not out.exists() and not [x for x in tmp_path.iterdir() if x.name.startswith(".o.csv")]
    with Ledger(led) as book:
        assert book.spent(["ann", "bob"]).tolist() == [0.0, 0.0]


@pytest.mark.usefixtures("books")
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_one_read_an_empty_id_in_a_late_chunk_is_one_error(mech, tmp_path: Path, suffix: str) -> None:
    """The ids are encoded in a thread beside the release: its error still names the row, nothing left or spent."""
    inp = _checkins(tmp_path / "in.csv", {"ann": 4, "bob": 3, "cy": 5})
    lines = inp.read_bytes().decode().split("\r\n")
    lines[10] = "," + lines[10].split(",", 1)[1]  # line 11 (row 10) has no person; chunks are 3 rows
    inp.write_bytes("\r\n".join(lines).encode())
    if suffix == ".parquet":
        src = tmp_path / "in.parquet"
        pq.write_table(pacsv.read_csv(inp, convert_options=pacsv.ConvertOptions(
            column_types={"user": pa.string()}, strings_can_be_null=True)), src)
        inp, where = src, "row(s) 10"
    else:
        where = "line(s) 11"
    led = tmp_path / "l.db"
    out = tmp_path / ("o" + suffix)
    with Ledger(led, budget=100.0) as book, pytest.raises(
            ValidationError, match=re.escape(f"'user' is empty in 1 row(s) (first at {where}): every row needs")):
        _release(mech, inp, out, Accounting("user", ledger=book), True, rng=None)
    assert not out.exists() and not [x for x in tmp_path.iterdir() if x.name.startswith(".o")]
    with Ledger(led) as book:
        assert book.spent(["ann", "bob", "cy"]).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.usefixtures("books")
def test_one_read_with_a_ledger_commits_what_it_published(mech, tmp_path: Path) -> None:
    inp = _checkins(tmp_path / "in.csv", {"ann": 4, "bob": 1})
    with Ledger(tmp_path / "l.db", budget=1.0) as book:
        stats = _release(mech, inp, tmp_path / "o.csv", Accounting("user", ledger=book, policy="drop"), True,
                         rng=None)
        assert stats.rows == 3 and book.spent(["ann", "bob"]).tolist() == [1.0, 0.5]


@pytest.mark.usefixtures("books")
def test_one_read_failure_after_the_plan_gives_the_budget_back(mech, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows withheld: removing them from the output fails (a full disk, the input changed for a second release
    pass, ...): aborted, nothing written or spent."""
    from metricdp.tabular.formats import csv as csv_format

    def broken(*_args: object) -> int:
        raise ValidationError("in.csv: the file changed while it was being released")

    monkeypatch.setattr(csv_format.CsvFormat, "withhold", broken)
    inp = _checkins(tmp_path / "in.csv", {"ann": 4, "bob": 1})
    with Ledger(tmp_path / "l.db", budget=1.0) as book:
        with pytest.raises(ValidationError, match="changed while it was being released"):
            _release(mech, inp, tmp_path / "o.csv", Accounting("user", ledger=book, policy="drop"), True, rng=None)
        assert book.spent(["ann", "bob"]).tolist() == [0.0, 0.0]
        assert [r["state"] for r in book.runs_table()] == ["aborted"]
    assert not (tmp_path / "o.csv").exists()


def test_kill_9_during_the_one_read_spends_nothing(mech, tmp_path: Path) -> None:
    """Killed after the temporary output got its first chunk, before the plan: no file, no spend."""
    mech_file = tmp_path / "m.npz"
    mech.save(mech_file)
    inp = _checkins(tmp_path / "in.csv", {"ann": 4, "bob": 3})
    led = tmp_path / "l.db"
    Ledger(led, budget=2.0).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "ACCT_KILL_AT": "mid-write"}
    args = ["privatize", mech_file, inp, "-c", "city", "-o", tmp_path / "o.csv", "--user-column", "user",
            "--ledger", led, "--keep", "user", "--keep", "t", "--chunk-rows", "2"]
    p = subprocess.run([sys.executable, "-m", "tests.cli._acct_worker", *map(str, args)], cwd=ROOT, env=env,
                       capture_output=True, timeout=300, check=False)
    assert p.returncode == -9, p.stderr.decode()
    assert not (tmp_path / "o.csv").exists()
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".o.csv")]
    with Ledger(led) as book:
        assert book.spent(["ann", "bob"]).tolist() == [0.0, 0.0]


@needs_numba
@pytest.mark.parametrize("chunk_rows", [1, 2, 100])
def test_collector_hashes_a_chunks_spans_in_place_like_the_scan(tmp_path: Path, chunk_rows: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks that keep the ids' bytes (no quoted id) are hashed where they lie, the others through the chunk's
    column: same persons and codes as the first pass of the two-pass release, with either table; an empty id
    is refused with its line either way."""
    from metricdp.streaming.persons import PersonCollector
    from metricdp.tabular.formats import RELEASE_FORMATS

    p = tmp_path / "in.csv"
    p.write_bytes(b'user,city\nann,Paris\nbob,Lyon\n"ann",Lyon\n"a""b",Nice\n\xc3\xa9,Paris\nann,Nice\n'
                  b"abcdefghij,Lyon\nabcdefghik,Lyon\nabcdefghij,Paris\n")
    by_column: list[int] = []
    add = _HashBook.add

    def counted(self: _HashBook, values: pa.Array) -> None:
        by_column.append(len(values))
        add(self, values)

    def collect() -> tuple[pa.Array, np.ndarray]:
        col = PersonCollector(str(p), "user")
        with RELEASE_FORMATS["csv"].open(p, chunk_rows=chunk_rows, chunk_bytes=64, max_record=None) as reader:
            col.start_reader(reader)
            for chunk in reader.chunks():
                if chunk.rows:
                    col.add(chunk)
        got = col.finish()
        return got.ids, got.codes

    monkeypatch.setattr(_HashBook, "add", counted)
    monkeypatch.setattr(persons, "_KERNELS", KERNELS)
    ids, codes = collect()
    # through the column: only the chunks with a quoted id (rows 3 and 4; the whole file in one chunk of 100)
    assert sum(by_column) == {1: 2, 2: 2, 100: 9}[chunk_rows]
    ref = scan_persons(p, "csv", "user")
    monkeypatch.setattr(persons, "_KERNELS", None)
    ids2, codes2 = collect()
    assert ids.equals(ref.ids) and ids.equals(ids2)
    assert np.array_equal(codes, ref.codes) and np.array_equal(codes, codes2)
    assert ref.persons[codes].tolist() == ["ann", "bob", "ann", 'a"b', "é", "ann", "abcdefghij", "abcdefghik",
                                           "abcdefghij"]
    for table in (KERNELS, None):
        monkeypatch.setattr(persons, "_KERNELS", table)
        for bad, match in ((b"user,city\nann,Paris\n,Lyon\n", r"empty in 1 row\(s\) \(first at line\(s\) 3\)"),
                           (b'user,city\n"ann",Paris\n\nbob,Lyon\n"",Lyon\n', r"first at line\(s\) 5\)"),
                           (b"user,city\nann,Paris\n" + b"x" * 257 + b",Lyon\n", "257 bytes at line 3 ")):
            p.write_bytes(bad)
            with pytest.raises(ValidationError, match=match):
                collect()
