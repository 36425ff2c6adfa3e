"""One release per place across runs: the ledger's memo of (person, public cell) in a trace release."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from metricdp.accounting.composition import from_units
from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError
from metricdp.location.grid import CellGrid
from metricdp.location.per_place import release_per_place
from metricdp.pipeline.trace_places import Places
from metricdp.pipeline.traces import PerPlace
from metricdp.streaming.traces import release_traces_file

pytest.importorskip("pyarrow")

GRID = CellGrid.over("48.7,2.2,49.0,2.5", 1.0)
HOME, WORK = GRID.centres[0], GRID.centres[-1]


def write(path: Path, rows: list[tuple[object, int, np.ndarray]]) -> Path:
    lines = ["user,time,lat,lon"] + [f"{u},{t},{float(p[0])!r},{float(p[1])!r}" for u, t, p in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def released(path: Path) -> np.ndarray:
    return np.array([[float(x) for x in r.split(",")[2:4]] for r in path.read_text().splitlines()[1:]])


def run(src: Path, out: Path, **kw: object):  # seeded: for tests only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return release_traces_file(src, out, user="user", time="time", lat="lat", lon="lon",
                                   mechanism=PerPlace(GRID, 0.5), rng=kw.pop("rng", 7), **kw)


def test_the_places_of_a_first_pass_keep_the_row_of_their_first_fix():
    places = Places(10)
    places.add(np.array([0, 1, 0]), np.array([3, 3, 3]), 0)  # (0, 3) first at row 0, (1, 3) at row 1
    places.add(np.array([1, 0]), np.array([3, 4]), 3)  # (1, 3) again at row 3: stays at 1; (0, 4) at row 4
    assert places.keys.tolist() == [3, 4, 13] and places.first.tolist() == [0, 4, 1]
    assert places.per_person(3).tolist() == [2, 1, 0]
    assert places.per_person(3, np.array([False, True, True])).tolist() == [1, 1, 0]


def test_a_second_run_with_the_ledger_reuses_each_place_and_spends_nothing_more(tmp_path):
    src = write(tmp_path / "in.csv", [("a", 1, HOME), ("a", 2, WORK), ("b", 1, HOME)])
    with Ledger(tmp_path / "l.db", budget=5.0) as ledger:
        first = run(src, tmp_path / "one.csv", ledger=ledger, rng=1)
        assert ledger.spent(["a", "b"]).tolist() == [1.0, 0.5]
        again = run(write(tmp_path / "in2.csv", [("a", 5, WORK), ("a", 6, HOME), ("a", 7, HOME + 1e-4)]),
                    tmp_path / "two.csv", ledger=ledger, rng=2)  # another seed: only the memo gives equal points
        assert ledger.spent(["a", "b"]).tolist() == [1.0, 0.5]  # the spend stays
        assert from_units(again.reserved).tolist() == [0.0] and again.report.eps_spent.tolist() == [0.0]
        assert (again.report.fresh.tolist(), again.report.reused.tolist()) == ([0], [3])
    one, two = released(tmp_path / "one.csv"), released(tmp_path / "two.csv")
    assert (two[0] == one[1]).all() and (two[1] == one[0]).all() and (two[2] == one[0]).all()
    assert (first.report.fresh.tolist(), first.report.reused.tolist()) == ([2, 1], [0, 0])


def test_a_new_place_beside_memoized_ones_is_the_only_spend(tmp_path):
    middle = GRID.centres[GRID.n // 2]
    with Ledger(tmp_path / "l.db", budget=5.0) as ledger:
        run(write(tmp_path / "in.csv", [("a", 1, HOME)]), tmp_path / "one.csv", ledger=ledger)
        r = run(write(tmp_path / "in2.csv", [("a", 1, HOME), ("a", 2, middle), ("a", 3, middle)]),
                tmp_path / "two.csv", ledger=ledger)
        assert ledger.spent(["a"]).tolist() == [1.0] and from_units(r.reserved).tolist() == [0.5]
        assert (r.report.fresh.tolist(), r.report.reused.tolist()) == ([1], [2])
    two = released(tmp_path / "two.csv")
    assert (two[0] == released(tmp_path / "one.csv")[0]).all() and (two[1] == two[2]).all()


def test_another_person_or_another_ledger_draws_afresh(tmp_path):
    with Ledger(tmp_path / "l.db", budget=5.0) as ledger:
        run(write(tmp_path / "in.csv", [("a", 1, HOME)]), tmp_path / "one.csv", ledger=ledger, rng=1)
        r = run(write(tmp_path / "b.csv", [("b", 1, HOME)]), tmp_path / "b_out.csv", ledger=ledger, rng=2)
        assert ledger.spent(["a", "b"]).tolist() == [0.5, 0.5] and r.report.fresh.tolist() == [1]
    with Ledger(tmp_path / "other.db", budget=5.0) as other:  # its own key: nothing of the first ledger is known
        r = run(tmp_path / "in.csv", tmp_path / "other_out.csv", ledger=other, rng=3)
        assert other.spent(["a"]).tolist() == [0.5] and r.report.fresh.tolist() == [1]
    one = released(tmp_path / "one.csv")
    assert not (released(tmp_path / "b_out.csv") == one).all() and not (released(tmp_path / "other_out.csv")
                                                                        == one).all()


def test_without_a_ledger_each_run_draws_its_places_again(tmp_path):
    src = write(tmp_path / "in.csv", [("a", 1, HOME), ("a", 2, HOME)])
    one = run(src, tmp_path / "one.csv", budget=1.0, rng=1)
    two = run(src, tmp_path / "two.csv", budget=1.0, rng=2)
    assert one.report.fresh.tolist() == two.report.fresh.tolist() == [1]
    assert not (released(tmp_path / "one.csv")[0] == released(tmp_path / "two.csv")[0]).all()


def test_a_refused_run_leaves_the_memo_untouched(tmp_path):
    """Budget 1, eps 0.5: a, after home, cannot pay three new places; nothing is stored, home stays a reuse."""
    places = [GRID.centres[i] for i in (0, 1, 2, 3)]
    with Ledger(tmp_path / "l.db", budget=1.0) as ledger:
        run(write(tmp_path / "in.csv", [("a", 1, places[0])]), tmp_path / "one.csv", ledger=ledger, rng=1)
        with pytest.raises(BudgetExceededError):
            run(write(tmp_path / "in2.csv", [("a", t, p) for t, p in enumerate(places)]), tmp_path / "two.csv",
                ledger=ledger, rng=2)
        assert not (tmp_path / "two.csv").exists() and ledger.spent(["a"]).tolist() == [0.5]
        r = run(write(tmp_path / "in3.csv", [("a", 1, places[1]), ("a", 2, places[0])]), tmp_path / "three.csv",
                ledger=ledger, rng=3)
        assert ledger.spent(["a"]).tolist() == [1.0] and r.report.fresh.tolist() == [1]
    three = released(tmp_path / "three.csv")
    assert (three[1] == released(tmp_path / "one.csv")[0]).all()
    assert not (three[0] == three[1]).all()


def test_drop_pays_the_first_new_places_and_withholds_the_later_ones(tmp_path):
    places = [GRID.centres[i] for i in (0, 1, 2)]
    with Ledger(tmp_path / "l.db", budget=1.0) as ledger:
        run(write(tmp_path / "in.csv", [("a", 1, places[2])]), tmp_path / "one.csv", ledger=ledger)
        r = run(write(tmp_path / "in2.csv", [("a", t, p) for t, p in enumerate(places)]), tmp_path / "two.csv",
                ledger=ledger, policy="drop")
        assert ledger.spent(["a"]).tolist() == [1.0]
        assert (r.withheld, r.over, r.report.fresh.tolist(), r.report.reused.tolist()) == (1, 1, [1], [1])
    two = released(tmp_path / "two.csv")
    assert len(two) == 2 and (two[1] == released(tmp_path / "one.csv")[0]).all()  # place 1 withheld


def test_a_place_paid_by_release_per_place_is_reused_by_the_trace_release(tmp_path):
    """One mechanism, one scope (eps and tiling), one key: the library call's place is the trace's."""
    with Ledger(tmp_path / "l.db", budget=5.0) as ledger, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paid = release_per_place(["a"], [HOME], GRID, 0.5, ledger=ledger, rng=1)
        r = run(write(tmp_path / "in.csv", [("a", 1, HOME)]), tmp_path / "out.csv", ledger=ledger, rng=2)
        assert ledger.spent(["a"]).tolist() == [0.5] and r.report.reused.tolist() == [1]
    assert np.abs(released(tmp_path / "out.csv")[0] - paid.released[0]).max() <= 5e-7  # written to 6 decimals


def test_a_run_aborted_after_drawing_its_places_leaves_no_memo(tmp_path, monkeypatch):
    """The input changes after the reservation: the run is refunded, its stored places deleted with it."""
    import metricdp.pipeline.first_pass as fp

    src = write(tmp_path / "in.csv", [("a", 1, HOME)])
    read = fp.first_pass

    def then_append(*args, **kw):
        got = read(*args, **kw)
        with open(src, "a") as fh:
            fh.write(f"a,2,{float(HOME[0])!r},{float(HOME[1])!r}\n")
        return got

    with Ledger(tmp_path / "l.db", budget=5.0) as ledger:
        monkeypatch.setattr(fp, "first_pass", then_append)
        with pytest.raises(Exception, match="the file changed while it was released"):
            run(src, tmp_path / "one.csv", ledger=ledger)
        monkeypatch.setattr(fp, "first_pass", read)
        r = run(src, tmp_path / "two.csv", ledger=ledger)
        assert ledger.spent(["a"]).tolist() == [0.5] and r.report.fresh.tolist() == [1]
        assert [x["state"] for x in ledger.runs_table()] == ["aborted", "committed"]
