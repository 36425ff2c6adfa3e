"""The shared accounting options: ``--budget`` with a distance unit like ``--epsilon``, converted exactly to the
command's unit or refused by a command whose eps has none; an empty ``--ledger``."""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path

import pytest
import typer

from metricdp.cli._accounting import AccountingOptions, Budget, parse_budget
from metricdp.errors import ValidationError
from tests.cli_helpers import assert_one_line_error, run

PARIS, LYON = ("48.8566", "2.3522"), ("45.764", "4.8357")


def test_parse_budget_plain_and_per_length() -> None:
    assert parse_budget("3") == 3.0 and parse_budget("3").unit == "" and parse_budget("3").per is None
    ten = parse_budget("10/km")
    assert (float(ten), ten.per, ten.unit) == (10.0, Fraction(10), "km")
    assert parse_budget("2 / 100m").per == Fraction(1, 50) and parse_budget("2 / 100m").unit == "m"
    for bad in ("abc", "10/furlong", "-1/km", "1/2"):
        with pytest.raises(typer.BadParameter):
            parse_budget(bad)


def test_for_unit_converts_exactly_and_plain_numbers_are_kept() -> None:
    assert AccountingOptions(budget=parse_budget("0.01/m")).for_unit("km").budget == 10.0
    assert AccountingOptions(budget=parse_budget("10/km")).for_unit("m").budget == 0.01
    plain = AccountingOptions(budget=parse_budget("7"))
    assert plain.for_unit("km") is plain
    with pytest.raises(ValidationError, match=r"--budget: .* has a unit"):
        AccountingOptions(budget=parse_budget("1/km")).for_unit("")
    unconverted = AccountingOptions(user_column="u", budget=Budget(1.0, Fraction(1), "km"))
    with pytest.raises(ValidationError, match=r"--budget 1\.0/km has a distance unit"), unconverted.open():
        pass


def _checkins(tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([["user", "lat", "lon"], ["ann", *PARIS], ["ann", *LYON], ["ann", *PARIS],
                                  ["bob", *LYON]])
    return path


@pytest.mark.parametrize("budget", ["1", "1/km", "0.001/m", "2 / 2km"])
def test_points_budget_in_any_length_unit_is_the_same_budget(tmp_path: Path, budget: str) -> None:
    """0.5/km a release, budget 1/km (however written): ann keeps 2 of her 3 rows, bob his one."""
    res = run("privatize-points", _checkins(tmp_path), "--lat", "lat", "--lon", "lon", "-e", "0.5/km", "--origin",
              "46.5,4", "--extent", "600km", "-o", tmp_path / "o.csv", "--keep", "user", "--user-column", "user",
              "--budget", budget, "--over-budget", "drop", "--json")
    assert res.exit_code == 0, res.output
    acc = json.loads(res.stdout)["accounting"]
    assert acc["budget"] == 1.0 and acc["withheld_budget"] == 1 and acc["eps_per_person_run"]["max"] == 1.0


def test_numbers_refuse_a_budget_per_length(tmp_path: Path) -> None:
    src = tmp_path / "n.csv"
    src.write_text("user,age\nann,30\n")
    res = run("privatize-numbers", src, "-c", "age", "-e", "0.1", "--range", "0,100", "-o", tmp_path / "o.csv",
              "--keep", "user", "--user-column", "user", "--budget", "1/km")
    assert_one_line_error(res, "--budget 1.0/km has a distance unit", "plain number")
    assert not (tmp_path / "o.csv").exists()


def test_an_empty_ledger_path_is_one_error(tmp_path: Path) -> None:
    res = run("privatize-points", _checkins(tmp_path), "--lat", "lat", "--lon", "lon", "-e", "0.5/km", "--origin",
              "46.5,4", "-o", tmp_path / "o.csv", "--user-column", "user", "--ledger", "", "--budget", "1")
    assert_one_line_error(res, "--ledger is empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]
