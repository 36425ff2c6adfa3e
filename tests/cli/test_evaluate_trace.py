"""``metricdp evaluate-trace`` end to end: --json equals the library's result, one-line errors name the culprit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metricdp.location.traces import evaluate_traces, pair_traces, read_traces
from tests.cli_helpers import assert_one_line_error, run

TRUE = """user,time,lat,lon
a,2020-12-01T10:00:00,40.0,-74.0
a,2020-12-01T10:01:00,40.0,-74.0
a,2020-12-01T10:02:00,40.01,-74.0
b,2020-12-01T10:00:00,41.0,-73.0
b,2020-12-01T10:05:00,41.0,-73.0
"""
RELEASED = """user,time,lat,lon
b,2020-12-01T10:05:00,41.01,-73.0
a,2020-12-01T10:02:00,40.02,-74.0
a,2020-12-01T10:00:00,40.0,-74.01
b,2020-12-01T10:00:00,41.0,-73.0
a,2020-12-01T10:01:00,40.0,-74.0
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    true, released = tmp_path / "true.csv", tmp_path / "released.csv"
    true.write_text(TRUE, encoding="utf-8")
    released.write_text(RELEASED, encoding="utf-8")
    return true, released


def test_json_is_the_library_result(files):
    true, released = files
    result = run("evaluate-trace", "--true", true, "--released", released, "--user-column", "user",
                 "-e", "2/km", "--min-visits", "1", "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    sides = [read_traces(p, person="user", key="time") for p in files]
    want = evaluate_traces(pair_traces(*sides[0], *sides[1]), epsilon_per_km=2.0, min_visits=1)
    assert got == json.loads(json.dumps({**want, "true": str(true), "released": str(released)}))
    assert got["fixes"] == 5 and got["persons"] == 2
    assert got["settings"]["attack_radius_km"] == 1.0  # 2 / eps, wider than the 0.5 km place radius
    assert [p["person"] for p in got["per_person"]] == ["a", "b"]


def test_table_for_people(files):
    true, released = files
    result = run("evaluate-trace", "--true", true, "--released", released, "--user-column", "user")
    assert result.exit_code == 0, result.output
    for row in ("displacement per fix", "trip length error", "visit counts per 1 km cell", "averaging attack"):
        assert row in result.stdout
    assert "Bayes adversary, one release" not in result.stdout and "give --epsilon" in result.stdout


def test_an_id_key_and_other_column_names(tmp_path):
    true, released = tmp_path / "t.csv", tmp_path / "r.csv"
    true.write_text("who,n,y,x\na,1,0.0,0.0\na,2,0.0,1.0\n", encoding="utf-8")
    released.write_text("who,n,y,x\na,2,0.0,1.0\na,1,0.0,0.0\n", encoding="utf-8")
    result = run("evaluate-trace", "--true", true, "--released", released, "--user-column", "who", "--key", "n",
                 "--lat", "y", "--lon", "x", "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["displacement_km"]["mean"] == 0.0 and got["trip_length"]["abs_error_km"]["mean"] == 0.0


@pytest.mark.parametrize(
    ("edit", "args", "fragments"),
    [
        (None, ["--user-column", "person"], ["true.csv", "no column 'person'"]),
        ("a,2020-12-01T10:01:00,40.0,-74.0\n", ["--user-column", "user"],
         ["released fixes: person 'a' has key '2020-12-01T10:01:00' twice"]),
        ("c,2020-12-01T10:01:00,40.0,-74.0\n", ["--user-column", "user"],
         ["--released", "person 'c', key '2020-12-01T10:01:00' (row 5) has no true fix"]),
        ("a,2020-12-01T11:00:00,north,-74.0\n", ["--user-column", "user"],
         ["released.csv: line 7: column 'lat' is not a number: 'north'"]),
        ("a,2020-12-01T11:00:00,nan,-74.0\n", ["--user-column", "user"],
         ["released.csv: line 7: column 'lat' is not a latitude in degrees: 'nan'"]),
        ("a,2020-12-01T11:00:00,40.0,-181\n", ["--user-column", "user"],
         ["released.csv: line 7: column 'lon' is not a longitude in degrees: '-181'"]),
        (None, ["--user-column", "user", "-e", "0"], ["--epsilon"]),
        (None, ["--user-column", "user", "--place-radius", "-1"], ["--place-radius must be a positive number"]),
        (None, ["--user-column", "user", "--cell", "nan"], ["--cell must be a positive number"]),
    ],
)
def test_errors_are_one_line_naming_the_culprit(files, edit, args, fragments):
    true, released = files
    if edit is not None:
        released.write_text(RELEASED + edit, encoding="utf-8")
    result = run("evaluate-trace", "--true", true, "--released", released, *args)
    assert_one_line_error(result, *fragments, code=2)


def test_missing_file_is_named(tmp_path, files):
    true, _ = files
    result = run("evaluate-trace", "--true", true, "--released", tmp_path / "nope.csv", "--user-column", "user")
    assert_one_line_error(result, "nope.csv", "no such file", code=2)
