"""accounted_prior: a histogram prior DP per person: K rows each, noise at eps / K, eps charged once per person."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metricdp.errors import BudgetExceededError, ValidationError
from metricdp.location.grid import CellGrid
from metricdp.streaming.accounted import Accounting
from metricdp.streaming.accounted_prior import accounted_prior

RIGA = "56.90,24.00,57.03,24.25"


def _fixes(tmp_path: Path) -> Path:
    """v: 50 fixes in one cell, w: 3 in another, u: one outside the grid."""
    path = tmp_path / "f.csv"
    rows = ["who,lat,lon"] + ["v,56.9010,24.0010"] * 50 + ["w,57.0200,24.2400"] * 3 + ["u,10,10"]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_counts_k_rows_per_person_and_charges_once(tmp_path: Path) -> None:
    grid = CellGrid.over(RIGA, 1.0)
    got: list[np.ndarray] = []
    res = accounted_prior(_fixes(tmp_path), "csv", grid, "lat", "lon", "1000", Accounting("who", max_rows_per_user=2),
                          got.append, unknown="drop")
    v, w = grid.locate([[56.9010, 24.0010], [57.0200, 24.2400]]).tolist()
    assert res.noisy[v] == 2 and res.noisy[w] == 2 and int(res.noisy.sum()) == 4  # noise at 500 per count: 0
    assert got[0][v] == got[0][w] == 0.5
    assert (res.rows_in, res.rows_counted, res.withheld_cap, res.persons) == (54, 4, 49, 2)
    assert (res.epsilon, res.count_epsilon) == (1000.0, 500.0)


def test_budget_refuse_and_drop_without_a_ledger(tmp_path: Path) -> None:
    grid = CellGrid.over(RIGA, 1.0)
    src = _fixes(tmp_path)
    with pytest.raises(BudgetExceededError, match="2 of 2 persons"):
        accounted_prior(src, "csv", grid, "lat", "lon", "1", Accounting("who", budget=0.5, max_rows_per_user=2),
                        lambda p: None, unknown="drop")
    res = accounted_prior(src, "csv", grid, "lat", "lon", "1",
                          Accounting("who", budget=0.5, max_rows_per_user=2, policy="drop"), lambda p: None,
                          unknown="drop")
    assert (res.rows_counted, res.withheld_budget, res.persons_over) == (0, 4, 2)


def test_refusals(tmp_path: Path) -> None:
    grid = CellGrid.over(RIGA, 1.0)
    src = _fixes(tmp_path)
    with pytest.raises(ValidationError, match="needs a bound on each person's rows"):
        accounted_prior(src, "csv", grid, "lat", "lon", "1", Accounting("who"), lambda p: None)
    with pytest.raises(ValidationError, match="below the smallest"):
        accounted_prior(src, "csv", grid, "lat", "lon", "1e-9", Accounting("who", max_rows_per_user=2),
                        lambda p: None)
    with pytest.raises(ValidationError, match="1 rows are outside the grid"):
        accounted_prior(src, "csv", grid, "lat", "lon", "1", Accounting("who", max_rows_per_user=2), lambda p: None)
