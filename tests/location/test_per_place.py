"""One release per public cell: sharing within a run, reuse across runs through one ledger,
the budget, the law of the release, and what the result states."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError, PrivacyLeakWarning, ValidationError
from metricdp.location.grid import CellGrid
from metricdp.location.per_place import DISCLOSURE, place_scope, release_per_place
from metricdp.location.region import Region
from metricdp.mechanisms.planar_laplace import planar_laplace_radius_cdf
from metricdp.spaces import haversine_rows_km

BOX = Region.box(56.90, 24.00, 56.95, 24.10)  # Riga, 48 cells of 1 km


@pytest.fixture(scope="module")
def grid() -> CellGrid:
    return CellGrid.over(BOX, 1.0)


def jitter(grid: CellGrid, cells: list[int], seed: int) -> np.ndarray:
    """A point within 200 m of the centre of each of ``cells`` (inside the 1 km cell)."""
    xy = grid.plane.forward(grid.centres[cells])
    xy = xy + np.random.default_rng(seed).uniform(-0.2, 0.2, xy.shape)
    pts = grid.plane.inverse(xy)
    assert (grid.locate(pts) == np.asarray(cells)).all()
    return pts


def release(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return release_per_place(*args, **kw)


def test_rows_of_a_place_share_one_release(grid):
    persons = [1, 1, 1, 2, 2, 1]
    cells = [0, 0, 5, 0, 0, 5]
    r = release(persons, jitter(grid, cells, 0), grid, 0.5, rng=1)
    z = r.released
    assert (z[0] == z[1]).all() and (z[2] == z[5]).all() and (z[3] == z[4]).all()
    assert not (z[0] == z[2]).all() and not (z[0] == z[3]).all()  # another place, another person: another draw
    one, two = r.report.person(1), r.report.person(2)
    assert (one.fresh, one.reused, one.eps_spent) == (2, 2, 1.0)
    assert (two.fresh, two.reused, two.eps_spent) == (1, 1, 0.5)
    assert r.kept.all()


def test_the_release_depends_on_the_cell_only(grid):
    # the same seed and other fixes in the same cells: bit for bit the same releases (moves within a cell are unseen)
    persons, cells = [4, 4, 7, 7], [3, 9, 3, 20]
    a = release(persons, jitter(grid, cells, 1), grid, 0.8, rng=5)
    b = release(persons, jitter(grid, cells, 2), grid, 0.8, rng=5)
    assert np.array_equal(a.released, b.released)


def test_two_runs_with_one_ledger_reuse_each_place(tmp_path, grid):
    with Ledger(tmp_path / "ledger.db", budget=3.0) as ledger:
        first = release([1, 1, 2], jitter(grid, [0, 5, 0], 3), grid, 0.5, ledger=ledger, rng=1)
        assert ledger.spent([1, 2]).tolist() == [1.0, 0.5]
        # run 2: other fixes in the same places, and one new place for person 2
        second = release([2, 1, 1, 2], jitter(grid, [0, 5, 0, 7], 4), grid, 0.5, ledger=ledger, rng=2)
        assert (second.released[0] == first.released[2]).all()  # person 2, cell 0
        assert (second.released[1] == first.released[1]).all()  # person 1, cell 5
        assert (second.released[2] == first.released[0]).all()  # person 1, cell 0
        assert ledger.spent([1, 2]).tolist() == [1.0, 1.0]  # only person 2's new place was paid for
        assert (second.report.person(1).fresh, second.report.person(1).reused) == (0, 2)
        assert (second.report.person(2).fresh, second.report.person(2).eps_spent) == (1, 0.5)
        # another eps is another mechanism: nothing reused
        again = release([1, 2], jitter(grid, [0, 7], 6), grid, 0.5, ledger=ledger, rng=4)  # all paid for
        assert (again.released[0] == first.released[0]).all() and (again.released[1] == second.released[3]).all()
        assert again.report.fresh.tolist() == [0, 0] and ledger.spent([1, 2]).tolist() == [1.0, 1.0]
        third = release([1], jitter(grid, [0], 5), grid, 0.25, ledger=ledger, rng=3)
        assert not (third.released[0] == first.released[0]).all()
        assert ledger.spent([1]).tolist() == [1.25]


def test_budget_refuses_or_withholds_places(tmp_path, grid):
    pts = jitter(grid, [0, 1, 2, 2], 6)
    with Ledger(tmp_path / "l.db", budget=1.0) as ledger:
        with pytest.raises(BudgetExceededError):
            release([1, 1, 1, 1], pts, grid, 0.5, ledger=ledger, rng=1)
        assert ledger.spent([1]).tolist() == [0.0]  # refused: nothing charged
        r = release([1, 1, 1, 1], pts, grid, 0.5, ledger=ledger, policy="drop", rng=1)
        assert ledger.spent([1]).tolist() == [1.0]
        assert int(r.kept.sum()) in (2, 3)  # two of the three places fit; the dropped one has 1 or 2 rows
        assert np.isnan(r.released[~r.kept]).all() and np.isfinite(r.released[r.kept]).all()
        assert r.report.person(1).fresh == 2


def test_release_follows_planar_laplace_around_the_centre(grid):
    n = 4000
    cells = np.arange(n) % grid.n
    r = release(np.arange(n), jitter(grid, cells.tolist(), 7), grid, 2.0, rng=11)
    radius = haversine_rows_km(grid.centres[cells], r.released)
    assert stats.kstest(radius, lambda x: planar_laplace_radius_cdf(x, 2.0)).pvalue > 1e-3


def test_result_states_guarantee_and_disclosure(grid):
    r = release([1], jitter(grid, [0], 8), grid, 0.5, rng=1)
    assert r.disclosure == DISCLOSURE and "reveal a shared cell" in r.disclosure
    assert "for each distinct (person, cell)" in r.guarantee and "0.5" in r.guarantee


def test_scope_names_eps_and_tiling(grid):
    assert place_scope(grid, 0.5) != place_scope(grid, 0.25)
    assert place_scope(grid, 0.5) != place_scope(CellGrid.over(BOX, 0.5), 0.5)
    assert place_scope(grid, 0.5) == place_scope(CellGrid.over(BOX, 1.0), 0.5)


def test_rows_outside_the_tiling_are_refused(grid):
    pts = np.vstack([jitter(grid, [0], 9), [[48.0, 2.0]]])
    with pytest.raises(ValidationError, match=r"data row 2: \(48.0, 2.0\) lies in no cell"):
        release_per_place([1, 1], pts, grid, 0.5)
    with pytest.raises(ValidationError, match="data row 1"):
        release_per_place([1], [[np.nan, 2.0]], grid, 0.5)


def test_secure_by_default(grid):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        release_per_place([1], jitter(grid, [0], 10), grid, 0.5)
    with pytest.warns(PrivacyLeakWarning):
        release_per_place([1], jitter(grid, [0], 10), grid, 0.5, rng=3)
