"""JSON lines: one object per line read in chunks with its line numbers and types; releases of labels, numbers
and points write one object per row with every kept value as it was read; every hostile line is one error naming
the file and the line with nothing written; a copy of the released column is refused."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ValidationError
from metricdp.streaming import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file
from metricdp.streaming.points import privatize_points_file
from metricdp.tabular.formats import FORMATS, RELEASE_FORMATS, release_format
from tests.cli_helpers import assert_one_line_error, run

from ._shared import AGES, LABELS, labels_mechanism, read_csv, rows, seeded, shift, write_csv


def _write(path: Path, table: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in table), encoding="utf-8")
    return path


def _read(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _nothing_but(tmp_path: Path, *names: str) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


# ------------------------------------------------------------------------------ the format
def test_suffixes_name_the_format():
    assert FORMATS[".jsonl"] == FORMATS[".ndjson"] == "jsonl"
    assert release_format("a.NDJSON") is RELEASE_FORMATS["jsonl"] is release_format("b.jsonl", write=True)


def test_header_types_lines_and_chunks(tmp_path):
    """The first object's keys in order; blank lines are no rows but count as lines; a BOM and CRLF are read."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'\xef\xbb\xbf{"id": 1, "city": "Paris", "x": 1, "ok": true, "s": null}\n'
                    b"  \n"
                    b'{"s": "b", "id": 2, "city": "Lyon", "x": 2.5, "ok": false}\r\n'
                    b'{"id": 3, "city": "Nice", "x": 3, "ok": null, "s": "c"}')
    with RELEASE_FORMATS["jsonl"].open(src, chunk_rows=2) as reader:
        assert reader.names == ("id", "city", "x", "ok", "s")
        chunks = list(reader.chunks())
    assert [(c.first, c.rows, c.unit) for c in chunks] == [(0, 2, "line"), (2, 1, "line")]
    assert chunks[0].places(np.array([0, 1])).tolist() == [1, 3] and chunks[1].places(np.array([0])).tolist() == [4]
    one, two = chunks
    assert one.column("x").type == pa.float64() and one.column("x").to_pylist() == [1.0, 2.5]
    assert two.column("x").type == pa.int64() and two.column("x").to_pylist() == [3]
    assert one.column("ok").to_pylist() == [True, False] and two.column("ok").type == pa.bool_()
    assert one.column("s").to_pylist() == [None, "b"] and one.column("s").type == pa.string()
    assert one.column("id").type == pa.int64() and one.texts("ok", np.array([0, 1])) == ["true", "false"]


# ------------------------------------------------------------------------------ releases
def test_labels_round_trip_writes_kept_values_as_read_and_draws_as_csv(mech, tmp_path):
    table = rows(50)
    lines = [{**r, "zip": f"0{r['id']:04d}", "score": 1.0, "flag": r["id"] % 2 == 0} for r in table]
    lines[3] = {k: lines[3][k] for k in reversed(list(lines[3]))}  # keys in any order
    _write(tmp_path / "in.jsonl", lines)
    write_csv(tmp_path / "in.csv", table)
    keep = ["note", "zip", "score", "flag"]
    stats = seeded(privatize_file, mech, tmp_path / "in.jsonl", "city", tmp_path / "out.jsonl", rng=8,
                   chunk_rows=7, keep=keep)
    seeded(privatize_file, mech, tmp_path / "in.csv", "city", tmp_path / "out.csv", rng=8, chunk_rows=7,
           keep=["note"])
    assert stats.rows == 50 and stats.format == "jsonl"
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert text[0].startswith('{"id": 0, "city": "') and '"zip": "00000", "score": 1.0, "flag": true}' in text[0]
    back = _read(tmp_path / "out.jsonl")
    assert [list(r) for r in back] == [list(lines[0])] * 50  # header order on every line
    assert [r["city"] for r in back] == [r["city"] for r in read_csv(tmp_path / "out.csv")]
    for got, was in zip(back, lines, strict=True):
        assert json.dumps({k: got[k] for k in was if k != "city"}, sort_keys=True) == \
            json.dumps({k: was[k] for k in was if k != "city"}, sort_keys=True)


def test_numbers_stay_numbers_and_strings_stay_strings(tmp_path):
    table = rows(40)
    _write(tmp_path / "in.jsonl", table)
    _write(tmp_path / "text.ndjson", [{**r, "age": str(r["age"])} for r in table])
    write_csv(tmp_path / "in.csv", table)
    keep = ["id", "city", "lat", "lon", "note"]
    for name, out in (("in.jsonl", "out.jsonl"), ("text.ndjson", "out.ndjson"), ("in.csv", "out.csv")):
        seeded(privatize_numbers_file, AGES, tmp_path / name, "age", tmp_path / out, rng=4, chunk_rows=6, keep=keep)
    truth = [int(r["age"]) for r in read_csv(tmp_path / "out.csv")]
    assert [r["age"] for r in _read(tmp_path / "out.jsonl")] == truth
    assert [r["age"] for r in _read(tmp_path / "out.ndjson")] == [str(a) for a in truth]


def test_points_are_written_as_floats(tmp_path):
    table = rows(20)
    _write(tmp_path / "in.jsonl", table)
    privatize_points_file(tmp_path / "in.jsonl", "lat", "lon", tmp_path / "out.jsonl", shift, chunk_rows=3,
                          drop=["id", "city", "age", "note"])
    back = _read(tmp_path / "out.jsonl")
    assert back == [{"lat": r["lat"] + 0.5, "lon": r["lon"] - 0.25} for r in table]  # type: ignore[operator]


_SCALARS = {
    "n": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    "f": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
    "t": st.one_of(st.none(), st.text(max_size=8)),
    "b": st.one_of(st.none(), st.booleans()),
}


@settings(max_examples=25, deadline=None)
@given(table=st.lists(st.fixed_dictionaries({"city": st.sampled_from(LABELS), **_SCALARS}), min_size=1, max_size=30),
       chunk_rows=st.integers(1, 8))
def test_every_kept_value_is_written_as_it_was_read(table, chunk_rows):
    """Any table of JSON scalars: each output line is the input's object, the released key aside, byte for byte
    as ``json.dumps`` writes it (an integer stays an integer, a fraction a fraction, null null)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = _write(Path(tmp) / "in.jsonl", table), Path(tmp) / "out.jsonl"
        privatize_file(labels_mechanism(), src, "city", out, chunk_rows=chunk_rows, keep=list(_SCALARS))
        back = out.read_text(encoding="utf-8").splitlines()
    assert len(back) == len(table)
    for line, was in zip(back, table, strict=True):
        got = json.loads(line)
        assert list(got) == list(table[0]) and got["city"] in LABELS  # the first line's order
        assert json.dumps({**got, "city": 0}) == json.dumps({k: 0 if k == "city" else was[k] for k in got})


# --------------------------------------------------------------------------------- the CLI
def test_cli_commands_release_json_lines(mech_file, tmp_path):
    table = rows(30)
    _write(tmp_path / "in.jsonl", table)
    r = run("privatize", mech_file, tmp_path / "in.jsonl", "-c", "city", "-o", tmp_path / "a.jsonl", "--keep", "note",
            "--drop", "age")
    assert r.exit_code == 0, r.output
    assert [list(x) for x in _read(tmp_path / "a.jsonl")] == [["id", "city", "lat", "lon", "note"]] * 30
    r = run("privatize-numbers", tmp_path / "in.jsonl", "-c", "age", "-e", "0.5", "--range", "0,99", "-o",
            tmp_path / "b.ndjson", "--drop", "id", "--drop", "city", "--drop", "lat", "--drop", "lon", "--drop", "note")
    assert r.exit_code == 0, r.output
    assert all(isinstance(x["age"], int) and 0 <= x["age"] <= 99 for x in _read(tmp_path / "b.ndjson"))
    r = run("privatize-points", tmp_path / "in.jsonl", "--lat", "lat", "--lon", "lon", "-e", "0.5/km", "--origin",
            "47,3", "--extent", "2000km", "-o", tmp_path / "c.jsonl", "--keep", "id", "--keep", "city", "--keep",
            "age", "--keep", "note")
    assert r.exit_code == 0, r.output
    back = _read(tmp_path / "c.jsonl")
    assert [x["id"] for x in back] == list(range(30)) and all(isinstance(x["lat"], float) for x in back)
    assert_one_line_error(run("privatize", mech_file, tmp_path / "in.jsonl", "-c", "city", "-o", tmp_path / "o.csv"),
                          "same format as INPUT (jsonl)")


def test_cli_release_per_person_reads_the_user_column_from_json_lines(mech_file, tmp_path):
    """One read of the file: each chunk's persons are counted as it goes by; the cap withholds rows whole
    (4 of each person's 10, drawn at random)."""
    table = [{"user": ["ann", "bob", "cy"][i % 3], **r} for i, r in enumerate(rows(30))]
    _write(tmp_path / "in.jsonl", table)
    r = run("privatize", mech_file, tmp_path / "in.jsonl", "-c", "city", "-o", tmp_path / "o.jsonl", "--user-column",
            "user", "--max-rows-per-user", "4", "--keep", "user", "--drop", "id", "--drop", "age", "--drop", "lat",
            "--drop", "lon", "--drop", "note", "--json")
    assert r.exit_code == 0, r.output
    acc = json.loads(r.stdout)["accounting"]
    assert acc["rows_in"] == 30 and acc["withheld_cap"] == 18 and acc["persons_in"] == 3
    back = _read(tmp_path / "o.jsonl")
    assert sorted(x["user"] for x in back) == ["ann"] * 4 + ["bob"] * 4 + ["cy"] * 4
    assert all(list(x) == ["user", "city"] and x["city"] in LABELS for x in back)


# ------------------------------------------------------------------------------- refusals
FIRST = b'{"id": 1, "city": "Paris"}\n'


@pytest.mark.parametrize(("line", "what"), [
    (b"[1, 2]", "line 2 is an array, not a JSON object"),
    (b'"Paris"', "line 2 is a string, not a JSON object"),
    (b"null", "line 2 is null, not a JSON object"),
    (b'{"id": 2}', "line 2 has no key 'city'"),
    (b'{"id": 2, "city": "Lyon", "zip": 1}', "line 2 has the key 'zip', which the first line has not"),
    (b'{"id": 2, "city": ["Lyon"]}', "line 2: key 'city' holds an array"),
    (b'{"id": {"n": 2}, "city": "Lyon"}', "line 2: key 'id' holds an object"),
    (b'{"id": "2", "city": "Lyon"}', "line 2: key 'id' is a string; earlier lines hold numbers"),
    (b'{"id": NaN, "city": "Lyon"}', "line 2: NaN is not a JSON number"),
    (b'{"id": 1e999, "city": "Lyon"}', "line 2: key 'id' is a number beyond float range"),
    (b'{"id": 99999999999999999999, "city": "Lyon"}', "line 2: key 'id' is an integer beyond 64 bits"),
    (b'{"id": 2, "city": "Lyon", "city": "Nice"}', "line 2 gives the key 'city' twice"),
    (b'{"id": 2, "city": "Ly', "line 2 is not JSON: "),
    (b'{"id": 2, "city": "Lyon"', "line 2 is not JSON: Expecting ',' delimiter (column 25)"),
    (b'{"id": 2, "city": "\xff"}', "line 2 is not UTF-8 (byte offset 46)"),
    (b'{"id": 2, "city": "\\ud800"}', "line 2 holds a lone surrogate escape"),
])
def test_a_hostile_line_is_one_error_naming_file_and_line(mech, mech_file, tmp_path, line, what):
    src = tmp_path / "in.jsonl"
    src.write_bytes(FIRST + line + b"\n" + FIRST)
    with pytest.raises(ValidationError, match=r"in\.jsonl: ") as info:
        privatize_file(mech, src, "city", tmp_path / "out.jsonl")
    assert what in str(info.value)
    # nothing unacknowledged, so no leak scan first: the release pass refuses it, one row a chunk
    with pytest.raises(ValidationError, match=r"in\.jsonl: ") as info:
        privatize_file(mech, src, "city", tmp_path / "out.jsonl", keep=["id"], chunk_rows=1)
    assert what in str(info.value)
    assert_one_line_error(run("privatize", mech_file, src, "-c", "city", "-o", tmp_path / "out.jsonl"),
                          str(src), what)
    _nothing_but(tmp_path, "in.jsonl", "m.npz")


def test_the_first_culprit_is_named(mech, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(FIRST * 3 + b'{"id": 4}\n' + FIRST + b'{"id": "6", "city": "Lyon"}\n' + b"[7]\n")
    for chunk_rows in (1, 2, 100):
        with pytest.raises(ValidationError, match=r"in\.jsonl: line 4 has no key 'city'"):
            privatize_file(mech, src, "city", tmp_path / "out.jsonl", keep=["id"], chunk_rows=chunk_rows)
    _nothing_but(tmp_path, "in.jsonl")


def test_an_empty_file_and_a_long_line_are_refused(mech, tmp_path):
    (tmp_path / "in.jsonl").write_bytes(b"\n  \n")
    with pytest.raises(ValidationError, match=r"in\.jsonl: empty file \(no JSON object\)"):
        privatize_file(mech, tmp_path / "in.jsonl", "city", tmp_path / "out.jsonl")
    (tmp_path / "in.jsonl").write_bytes(FIRST + b'{"id": 2, "city": "' + b"x" * 100 + b'"}\n')
    with pytest.raises(ValidationError, match=r"in\.jsonl: line 2 is longer than the cap of 64 bytes \(byte offset 27"):
        privatize_file(mech, tmp_path / "in.jsonl", "city", tmp_path / "out.jsonl", max_record=64, keep=["id"])
    _nothing_but(tmp_path, "in.jsonl")


def test_a_kept_copy_of_the_released_values_is_refused(mech, mech_file, tmp_path):
    table = rows(40)
    _write(tmp_path / "in.jsonl", [{**r, "town": r["city"].upper()} for r in table])  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match=r"column 'town' holds the released column's true values \('city'\) in "
                                              r"40 of 40 compared rows, first at line 1"):
        privatize_file(mech, tmp_path / "in.jsonl", "city", tmp_path / "out.jsonl")
    assert_one_line_error(run("privatize", mech_file, tmp_path / "in.jsonl", "-c", "city", "-o",
                              tmp_path / "out.jsonl"), "column 'town'", "--drop it, or --keep it on purpose")
    _write(tmp_path / "pts.jsonl", [{**r, "where": f"POINT({r['lon']} {r['lat']})"} for r in table])
    assert_one_line_error(run("privatize-points", tmp_path / "pts.jsonl", "--lat", "lat", "--lon", "lon", "-e",
                              "0.5/km", "--origin", "47,3", "-o", tmp_path / "out.jsonl", "--keep", "id", "--keep",
                              "city", "--keep", "age", "--keep", "note"), "column 'where'", "coordinates within 4 km")
    _nothing_but(tmp_path, "in.jsonl", "pts.jsonl", "m.npz")
    privatize_file(mech, tmp_path / "in.jsonl", "city", tmp_path / "out.jsonl", keep=["town"])  # on purpose
    assert [r["town"] for r in _read(tmp_path / "out.jsonl")] == [r["city"].upper() for r in table]  # type: ignore


