"""``metricdp grid``: cells, labelled rows and a DP prior from the bundled check-ins; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metricdp.io import read_points
from metricdp.location.grid import CellGrid
from tests.cli_helpers import assert_one_line_error, run

RIGA = "56.90,24.00,57.03,24.25"


@pytest.fixture
def checkins(tmp_path: Path) -> Path:
    path = tmp_path / "checkins.csv"
    assert run("example", "checkins", "--out", path).exit_code == 0
    return path


def test_grid_writes_cells_rows_and_prior(checkins, tmp_path):
    cells, rows, prior = tmp_path / "cells.csv", tmp_path / "rows.csv", tmp_path / "prior.csv"
    r = run("grid", checkins, "--cell", "1km", "--region", RIGA, "--out", cells, "--labelled", rows,
            "--unknown", "drop", "--prior-out", prior, "--prior-epsilon", "1", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rows"] == 300 and out["written"] == 72 and out["dropped"] == 228  # the 72 Riga check-ins
    assert out["grid"]["cells"] == 256 and out["grid"]["cell_m"] == 1000
    assert "TRUE coordinates" in r.stderr
    space = read_points(cells)
    assert space.metric == "haversine" and space.n == 256
    assert space.labels == CellGrid.over(RIGA, 1.0).labels  # the grid depends on the region and cell only
    body = rows.read_text().splitlines()
    assert body[0] == "user,time,city,lat,lon,cell" and len(body) == 73
    assert all(line.split(",")[2] == "Riga" for line in body[1:])
    p = np.loadtxt(prior, delimiter=",", skiprows=1, usecols=1)
    assert len(p) == 256 and abs(p.sum() - 1) < 1e-12 and (p >= 0).all()
    assert out["prior"]["guarantee"].startswith("1.0-DP per row")


def test_grid_then_privatize_the_cell_column(checkins, tmp_path):
    cells, rows = tmp_path / "cells.csv", tmp_path / "rows.csv"
    assert run("grid", checkins, "--cell", "2km", "--region", RIGA, "--out", cells, "--labelled", rows,
               "--unknown", "nearest").exit_code == 0
    mech, out = tmp_path / "m.npz", tmp_path / "rel.csv"
    r = run("build", cells, "-m", "exponential", "--epsilon", "0.5", "--out", mech)
    assert r.exit_code == 0, r.output
    r = run("privatize", mech, rows, "--column", "cell", "--drop", "lat", "--drop", "lon", "--keep", "user",
            "--keep", "time", "--keep", "city", "--out", out)
    assert r.exit_code == 0, r.output
    lines = out.read_text().splitlines()
    assert lines[0] == "user,time,city,cell" and len(lines) == 301


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--cell", "500"], ["--cell '500' needs a unit"]),
        (["--cell", "5 miles"], ["--cell", "unknown unit 'miles'"]),
        (["--cell", "1km", "--prior-out", "p.csv"], ["--prior-out and --prior-epsilon go together"]),
        (["--cell", "1km", "--lat", "latitude", "--labelled", "x.csv"], ["no column 'latitude'"]),
        (["--cell", "1km", "--labelled", "x.csv"], ["228 row(s) outside the grid", "first at line(s) 3,"]),
        (["--cell", "1km", "--region", "nowhere"], ["--region nowhere"]),
        (["--cell", "1km", "--labelled", "x.parquet"], ["has the input's format (csv)"]),
        (["--cell", "1km", "--prior-out", "p.npy", "--prior-epsilon", "1"],
         ["--prior-out p.npy: must be .csv, got .npy"]),
    ],
)
def test_one_line_errors_write_nothing(checkins, tmp_path, monkeypatch, args, fragments):
    monkeypatch.chdir(tmp_path)
    if "--region" not in args:
        args = [*args, "--region", RIGA]
    r = run("grid", checkins, "--out", "cells.csv", *args)
    assert_one_line_error(r, *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkins.csv"]


def test_outputs_must_differ_and_not_be_the_input(checkins, tmp_path):
    r = run("grid", checkins, "--cell", "1km", "--region", RIGA, "--out", tmp_path / "a.csv", "--labelled",
            tmp_path / "a.csv")
    assert_one_line_error(r, "must be different files")
    r = run("grid", checkins, "--cell", "1km", "--region", RIGA, "--out", checkins)
    assert_one_line_error(r, "--out")


def test_a_late_failure_takes_back_the_outputs_already_published(checkins, tmp_path, monkeypatch):
    # the labelled rows and the prior are published before the cells: an I/O error on the last
    # leaves none of the three (no half-finished set of outputs)
    cells, rows, prior = tmp_path / "cells.csv", tmp_path / "rows.csv", tmp_path / "prior.csv"

    def fail(self, path, inputs=()):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CellGrid, "write_points", fail)
    r = run("grid", checkins, "--cell", "1km", "--region", RIGA, "--out", cells, "--labelled", rows,
            "--unknown", "drop", "--prior-out", prior, "--prior-epsilon", "1")
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkins.csv"]


def _vessels(tmp_path: Path) -> Path:
    """Vessel v: 50 fixes in Riga's first cell; w: one fix elsewhere in the grid."""
    path = tmp_path / "fixes.csv"
    rows = ["vessel,lat,lon"] + ["v,56.9010,24.0010"] * 50 + ["w,57.0200,24.2400"]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_prior_per_person_counts_k_rows_and_charges_once(tmp_path):
    """eps 1000 with K = 2: noise at 500 per count is 0 (Pr[nonzero] ~ 2e^-500), so the counts are v: 2, w: 1;
    v (50 rows) is charged 1000 ONCE in the ledger, not 50 x 1000."""
    from metricdp.accounting.ledger import Ledger

    src, prior, led = _vessels(tmp_path), tmp_path / "prior.csv", tmp_path / "l.db"
    base = ("grid", src, "--cell", "1km", "--region", RIGA, "--out", tmp_path / "cells.csv", "--prior-out", prior,
            "--prior-epsilon", "1000", "--user-column", "vessel", "--max-rows-per-user", "2")
    r = run(*base, "--budget", "1500", "--ledger", led, "--json")
    assert r.exit_code == 0, r.output
    acc = json.loads(r.stdout)["prior"]["accounting"]
    assert (acc["rows_in"], acc["rows_counted"], acc["withheld_cap"], acc["persons"]) == (51, 3, 48, 2)
    assert acc["epsilon_per_count"] == 500.0 and acc["epsilon_per_person"] == 1000.0
    p = np.loadtxt(prior, delimiter=",", skiprows=1, usecols=1)
    assert sorted(p[p > 0].tolist()) == [pytest.approx(1 / 3), pytest.approx(2 / 3)] and (p > 0).sum() == 2
    with Ledger(led) as book:
        assert book.spent(["v", "w"]).tolist() == [1000.0, 1000.0] and book.unit == "DP"
    # a second prior would take both to 2000 > 1500: refused, nothing written, nothing spent
    prior.unlink()
    assert_one_line_error(run(*base, "--ledger", led), "2 of 2 persons would exceed their budget of 1500")
    assert not prior.exists()
    with Ledger(led) as book:
        assert book.spent(["v", "w"]).tolist() == [1000.0, 1000.0] and len(book.runs_table()) == 1
    # a ledger of eps per km never adds a DP charge
    km = tmp_path / "km.db"
    with Ledger(km, budget=5000) as book:
        book.commit(book.reserve(["v"], 1.0, unit="km").run_id)
    assert_one_line_error(run(*base, "--ledger", km), "per km", "as standard DP per person")


def test_prior_per_person_option_errors(tmp_path):
    src, prior = _vessels(tmp_path), tmp_path / "prior.csv"
    base = ("grid", src, "--cell", "1km", "--region", RIGA, "--out", tmp_path / "cells.csv")
    assert_one_line_error(run(*base, "--user-column", "vessel", "--max-rows-per-user", "2"),
                          "the accounting options are for the prior")
    assert_one_line_error(run(*base, "--prior-out", prior, "--prior-epsilon", "1", "--user-column", "vessel"),
                          "needs --max-rows-per-user K")
    assert_one_line_error(run(*base, "--prior-out", prior, "--prior-epsilon", "1", "--budget", "1"),
                          "--budget needs --user-column COL")
    assert_one_line_error(run(*base, "--prior-out", prior, "--prior-epsilon", "1", "--user-column", "who",
                              "--max-rows-per-user", "2"), "no user column 'who'")
    assert_one_line_error(run(*base, "--prior-out", prior, "--prior-epsilon", "1", "--user-column", "vessel",
                              "--max-rows-per-user", "2", "--budget", "1/km"), "has a distance unit")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fixes.csv"]
