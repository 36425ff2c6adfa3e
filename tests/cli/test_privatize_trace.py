"""``metricdp privatize-trace`` end to end: the library's release, its report, one-line errors naming the culprit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metricdp.accounting.ledger import Ledger
from tests.cli_helpers import assert_one_line_error, run

FIXES = """user,time,lat,lon
a,2020-12-01 10:00:00,48.85,2.35
b,2020-12-01 10:00:00,48.86,2.36
a,2020-12-01 10:01:00,48.85,2.35
a,2020-12-01 10:02:00,48.85,2.35
"""
COLUMNS = ("--user-column", "user", "--time-column", "time", "--lat", "lat", "--lon", "lon")


@pytest.fixture
def fixes(tmp_path: Path) -> Path:
    path = tmp_path / "fixes.csv"
    path.write_text(FIXES, encoding="utf-8")
    return path


def test_predictive_json_reports_fresh_releases_and_reuses(fixes, tmp_path):
    out = tmp_path / "out.csv"
    result = run("privatize-trace", fixes, "-o", out, *COLUMNS, "-e", "1/km", "--test-epsilon", "1/km",
                 "--threshold", "1000km", "--seed", "3", "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert (got["rows"], got["persons"], got["fresh_releases"], got["reuses"]) == (4, 2, 2, 2)
    assert got["eps_spent_per_person"]["max"] == pytest.approx(3.0)  # a: one fresh, two tests at 1
    rows = out.read_text().splitlines()
    assert rows[1].split(",")[2:] == rows[3].split(",")[2:] == rows[4].split(",")[2:]
    assert "written UNRELEASED" in result.stderr and "--seed" in result.stderr


def test_the_ledger_is_charged_the_reservation_and_told(fixes, tmp_path):
    ledger = tmp_path / "l.db"
    result = run("privatize-trace", fixes, "-o", tmp_path / "out.csv", *COLUMNS, "-e", "0.5/km",
                 "--mechanism", "independent", "--ledger", ledger, "--budget", "5")
    assert result.exit_code == 0, result.output
    assert "eps reserved and charged per person" in result.stdout and "max 1.5" in result.stdout
    with Ledger(ledger) as book:
        assert book.spent(["a", "b"]).tolist() == [1.5, 0.5]


def test_the_per_person_report_lists_spent_and_reserved(fixes, tmp_path):
    report = tmp_path / "report.csv"
    result = run("privatize-trace", fixes, "-o", tmp_path / "out.csv", *COLUMNS, "-e", "1/km", "--test-epsilon",
                 "1/km", "--threshold", "1000km", "--budget", "10", "--report", report)
    assert result.exit_code == 0, result.output
    assert report.read_text().splitlines() == ["person,eps_spent,eps_reserved,fresh,reused,tests,passed",
                                               "a,3.0,5.0,1,2,2,2", "b,1.0,1.0,1,0,0,0"]


def test_the_report_may_not_overwrite_the_input(fixes, tmp_path):
    result = run("privatize-trace", fixes, "-o", tmp_path / "out.csv", *COLUMNS, "-e", "1/km", "--report", fixes)
    assert_one_line_error(result, "--report")
    assert fixes.read_text() == FIXES


def test_per_place_states_its_disclosure(fixes, tmp_path):
    result = run("privatize-trace", fixes, "-o", tmp_path / "out.csv", *COLUMNS, "-e", "1/km",
                 "--mechanism", "per-place", "--region", "48.7,2.2,49.0,2.5", "--cell", "500m")
    assert result.exit_code == 0, result.output
    assert "2 fresh releases, 2 reuses" in result.stdout and "equal releases reveal a shared cell" in result.stdout


def test_over_budget_refuse_is_one_error_and_nothing_spent(fixes, tmp_path):
    ledger, out = tmp_path / "l.db", tmp_path / "out.csv"
    result = run("privatize-trace", fixes, "-o", out, *COLUMNS, "-e", "1/km", "--mechanism", "independent",
                 "--ledger", ledger, "--budget", "2")
    assert_one_line_error(result, "--over-budget refuse: 1 of 2 persons", "nothing written")
    assert "--max-rows-per-user" not in result.stderr  # not an option of this command
    assert not out.exists() and not ledger.exists()  # a ledger created by a refused run is not left behind


def test_out_of_order_is_one_error_naming_the_person_and_lines(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("user,time,lat,lon\na,5,48.85,2.35\na,4,48.85,2.35\n")
    result = run("privatize-trace", src, "-o", out, *COLUMNS, "-e", "1/km")
    assert_one_line_error(result, "person 'a': line 3 (time 4) comes after line 2 (time 5)",
                          "sort the file by 'user', then by time")
    assert not out.exists()


@pytest.mark.parametrize(("extra", "fragment"), [
    (("--region", "48.7,2.2,49.0,2.5"), "--region: not an option of --mechanism predictive"),
    (("--mechanism", "per-place"), "--mechanism per-place needs --region"),
    (("--over-budget", "drop"), "--over-budget needs a budget"),
    (("--threshold", "far"), "--threshold"),
    (("--test-epsilon", "0"), "--test-epsilon"),
])
def test_options_of_another_mechanism_are_refused(fixes, tmp_path, extra, fragment):
    result = run("privatize-trace", fixes, "-o", tmp_path / "out.csv", *COLUMNS, "-e", "1/km", *extra)
    assert_one_line_error(result, fragment)


def test_epsilon_is_needed(fixes, tmp_path):
    assert_one_line_error(run("privatize-trace", fixes, "-o", tmp_path / "out.csv", *COLUMNS), "--epsilon is needed")


# ------------------------------------------------------------------------------- spread budget, managers
def test_the_adaptive_manager_spreads_each_persons_budget_json(fixes, tmp_path):
    """--spread-budget 4. a (3 fixes): rate 4/3, test 0.2667, base 1.0667, first release 2 x 1.0667 = 2.1333, then
    1.8667 left, below a test and a release (2.4): untested. b (1 fix, horizon 2): first release 3.2."""
    report = tmp_path / "report.csv"
    result = run("privatize-trace", fixes, "-o", tmp_path / "out.csv", *COLUMNS, "--manager", "adaptive",
                 "--spread-budget", "4/km", "--threshold", "1000km", "--report", report, "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert (got["mechanism"], got["manager"], got["spread_budget"], got["epsilon_per_km"]) == \
        ("predictive", "adaptive", 4.0, None)
    assert (got["fresh_releases"], got["reuses"], got["tests"], got["tests_passed"]) == (2, 2, 0, 0)
    assert got["accounting"]["budget"] == 4.0 and got["accounting"]["eps_reserved_per_person"]["max"] == 4.0
    lines = report.read_text().splitlines()
    assert lines[1] == "a,2.133333333334,4.0,1,2,0,0"  # 2 x (4e12 // 3 - 266666666666) units
    assert lines[2] == "b,3.2,3.2,1,0,0,0"


def test_independent_spread_budget_charges_the_ledger_each_persons_budget(fixes, tmp_path):
    ledger = tmp_path / "l.db"
    result = run("privatize-trace", fixes, "-o", tmp_path / "out.csv", *COLUMNS, "--mechanism", "independent",
                 "--spread-budget", "3", "--ledger", ledger, "--budget", "10")
    assert result.exit_code == 0, result.output
    assert "each person's budget 3 per km spread over their fixes" in result.stdout
    with Ledger(ledger) as book:
        assert book.spent(["a", "b"]).tolist() == [3.0, 3.0]


def test_a_spread_budget_over_the_ledgers_is_refused_and_nothing_spent(fixes, tmp_path):
    ledger, out = tmp_path / "l.db", tmp_path / "out.csv"
    result = run("privatize-trace", fixes, "-o", out, *COLUMNS, "--mechanism", "per-place", "--region",
                 "48.7,2.2,49.0,2.5", "--spread-budget", "3", "--ledger", ledger, "--budget", "2")
    assert_one_line_error(result, "--over-budget refuse: 2 of 2 persons", "nothing written")
    assert not out.exists() and not ledger.exists()


@pytest.mark.parametrize(("extra", "fragment"), [
    (("--mechanism", "independent", "-e", "1", "--spread-budget", "3"), "--epsilon: not with --spread-budget"),
    (("--manager", "adaptive", "-e", "1", "--spread-budget", "3"), "--epsilon: not with --spread-budget"),
    (("--manager", "adaptive", "--test-epsilon", "1", "--spread-budget", "3"), "--manager adaptive chooses every"),
    (("--manager", "adaptive"), "--epsilon is needed"),
    (("--mechanism", "independent", "--manager", "fixed", "-e", "1"), "--manager: not an option"),
    (("--test-share", "0.5", "-e", "1"), "--test-share: not an option of --mechanism predictive --manager adaptive"),
    (("--spread-budget", "0"), "--spread-budget"),
    (("--mechanism", "independent", "--spread-budget", "1e-6"), "person 'a': a budget of 1e-06 over their 3 fixes"),
])
def test_spread_and_manager_options_are_checked(fixes, tmp_path, extra, fragment):
    out = tmp_path / "out.csv"
    assert_one_line_error(run("privatize-trace", fixes, "-o", out, *COLUMNS, *extra), fragment)
    assert not out.exists()


@pytest.mark.parametrize(("flags", "eps"), [
    (("--mechanism", "independent"), 4.0),  # 2 / 0.5 km
    (("--mechanism", "predictive"), 4.0),
    (("--mechanism", "per-place", "--region", "48.7,2.2,49.0,2.5", "--cell", "300m"),
     2 / (0.5 - 0.3 / 2 ** 0.5)),
])
def test_displacement_chooses_the_eps_and_says_so(fixes, tmp_path, flags, eps):
    out = tmp_path / "out.csv"
    result = run("privatize-trace", fixes, "-o", out, *COLUMNS, *flags, "--displacement", "500m", "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["epsilon_per_km"] == pytest.approx(eps) and got["displacement_km"] == 0.5
    result = run("privatize-trace", fixes, "-o", tmp_path / "out2.csv", *COLUMNS, *flags, "--displacement", "500m")
    assert result.exit_code == 0, result.output
    assert "chosen for a mean displacement of at most 500 m" in result.stdout


@pytest.mark.parametrize(("flags", "fragments"), [
    (("-e", "1/km"), ("--displacement: not with --epsilon",)),
    (("--mechanism", "per-place", "--region", "48.7,2.2,49.0,2.5"), ("--displacement 500m", "its cell alone")),
    (("--budget", "3"), ("--displacement 500m", "no eps within the budget 3", "needs eps 4")),
    (("--mechanism", "independent", "--spread-budget", "5"), ("--displacement: not with --spread-budget",)),
])
def test_displacement_refusals_are_one_line(fixes, tmp_path, flags, fragments):
    out = tmp_path / "out.csv"
    result = run("privatize-trace", fixes, "-o", out, *COLUMNS, *flags, "--displacement", "500m")
    assert_one_line_error(result, *fragments)
    assert not out.exists()
