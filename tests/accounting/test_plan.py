"""plan_release: cap, consistent groups, memo across runs, refuse and drop, abort on failure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from metricdp.accounting.ledger import Ledger
from metricdp.accounting.plan import plan_release
from metricdp.errors import BudgetExceededError, ValidationError


def test_cap_without_budget() -> None:
    ids = np.array(["a"] * 6 + ["b"] * 2)
    plan = plan_release(ids, 0.5, max_rows_per_user=3, rng=1)
    assert ids[plan.keep].tolist().count("a") == 3 and ids[plan.keep].tolist().count("b") == 2
    assert (plan.withheld_cap, plan.withheld_budget, plan.total) == (3, 0, None)
    assert (plan.run.max, plan.run.median, plan.run.persons) == (1.5, 1.0, 2)
    assert plan.group[plan.keep].tolist() == list(range(5)) and (plan.group[~plan.keep] == -1).all()


def test_consistent_groups_by_hand() -> None:
    ids = ["a", "a", "b", "a", "b"]
    values = ["x", "x", "x", "y", "x"]
    plan = plan_release(ids, 0.25, consistent=True, true_values=values)
    # groups in order of first row: (a, x) rows 0 1, (b, x) rows 2 4, (a, y) row 3
    assert plan.group.tolist() == [0, 0, 1, 2, 1]
    assert plan.group_row.tolist() == [0, 2, 3]
    assert (plan.run.max, plan.run.median) == (0.5, 0.25)  # a: two values, b: one
    rel = plan.releases(np.array([7, 8, 9]))
    assert rel[plan.group].tolist() == [7, 7, 8, 9, 8]


def test_consistent_plan_of_no_rows() -> None:
    """An input without rows plans an empty consistent release (it raised a numpy reshape error)."""
    plan = plan_release([], 0.5, consistent=True, true_values=np.zeros(0, np.int32))
    assert plan.fresh_count == 0 and plan.group.size == 0 and plan.run.persons == 0


def test_consistent_across_runs_costs_nothing_more(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db", budget=1.0)
    ids, values = ["a", "a", "b"], ["x", "y", "x"]
    first = plan_release(ids, 0.5, ledger=ledger, unit="", consistent=True, true_values=values, scope="m")
    assert first.memo_hit.tolist() == [False, False, False]
    out1 = first.releases(np.array([3, 4, 5]))[first.group]
    first.publishing()
    first.commit()
    assert ledger.spent(["a", "b"]).tolist() == [1.0, 0.5]
    # again, plus one new pair for b: only that one costs
    second = plan_release([*ids, "b"], 0.5, ledger=ledger, unit="", consistent=True, true_values=[*values, "z"],
                          scope="m")
    assert second.memo_hit.tolist() == [True, True, True, False]
    out2 = second.releases(np.array([6]))[second.group]
    second.commit()
    assert out2[:3].tolist() == out1.tolist() and out2[3] == 6
    assert ledger.spent(["a", "b"]).tolist() == [1.0, 1.0]
    assert second.run.max == 0.5 and second.total is not None and second.total.max == 1.0
    # a's budget is exhausted, but repeats of paid releases are still free
    third = plan_release(["a", "a"], 0.5, ledger=ledger, unit="", consistent=True, true_values=["x", "y"], scope="m")
    assert third.memo_hit.all() and third.keep.all()
    third.commit()


def test_refuse_and_drop_with_a_ledger(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db", budget=0.3)
    ids = np.array(["a"] * 5 + ["b"])
    with pytest.raises(BudgetExceededError):
        plan_release(ids, 0.1, ledger=ledger, unit="")
    assert ledger.spent(["a", "b"]).tolist() == [0.0, 0.0] and ledger.runs_table() == []
    plan = plan_release(ids, 0.1, ledger=ledger, unit="", policy="drop", rng=3)
    assert (plan.persons_over, plan.withheld_budget) == (1, 2)
    assert ids[plan.keep].tolist().count("a") == 3
    plan.abort()
    assert ledger.spent(["a"]).tolist() == [0.0]
    with pytest.raises(ValidationError, match="differs"):
        plan_release(ids, 0.1, ledger=ledger, unit="", budget=1.0)


def test_drop_withholds_whole_groups(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db", budget=0.2)
    ids = ["a"] * 6
    values = ["x", "x", "y", "y", "z", "z"]
    plan = plan_release(ids, 0.1, ledger=ledger, unit="", policy="drop", consistent=True, true_values=values,
                        scope="m", rng=0)
    assert plan.keep.sum() == 4 and plan.withheld_budget == 2
    kept = {v for v, k in zip(values, plan.keep, strict=True) if k}
    assert len(kept) == 2  # two pairs of rows, each whole


def test_budget_without_a_ledger() -> None:
    plan = plan_release(["a", "a", "a"], 0.5, budget=1.0, policy="drop", rng=0)
    assert (plan.keep.sum(), plan.withheld_budget, plan.run.max) == (2, 1, 1.0)
    with pytest.raises(BudgetExceededError):
        plan_release(["a", "a", "a"], 0.5, budget=1.0)


def test_drop_choice_is_uniform() -> None:
    """Budget for 1 of 4 rows: each row is the released one with probability 1/4."""
    ids = np.repeat(np.arange(1000), 4)
    plan = plan_release(ids, 0.5, budget=0.5, policy="drop", rng=11)
    which = np.flatnonzero(plan.keep) % 4
    assert stats.chisquare(np.bincount(which, minlength=4)).pvalue > 1e-3


def test_failure_after_reserving_gives_the_budget_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(tmp_path / "l.db", budget=1.0)

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("failed while planning")

    monkeypatch.setattr("metricdp.accounting.plan._finish", boom)
    with pytest.raises(RuntimeError):
        plan_release(["a"], 0.5, ledger=ledger, unit="")
    assert ledger.spent(["a"]).tolist() == [0.0]
    assert [r["state"] for r in ledger.runs_table()] == ["aborted"]


def test_points(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db", budget=1.0)
    pts = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, 4.0]])
    plan = plan_release(["a", "a", "a"], 0.5, ledger=ledger, unit="", consistent=True, true_values=pts, scope="pl",
                        width=2)
    assert plan.group.tolist() == [0, 0, 1]
    rel = plan.releases(np.array([[1.1, 2.1], [3.3, 4.4]]))
    plan.commit()
    again = plan_release(["a"], 0.5, ledger=ledger, unit="", consistent=True, true_values=pts[2:], scope="pl", width=2)
    assert again.memo_hit.all() and np.array_equal(again.releases(np.zeros((0, 2))), rel[1:])
    with pytest.raises(ValidationError, match="fresh releases"):
        again.releases(np.zeros((1, 2)))


def test_a_ledger_run_must_name_its_unit(tmp_path):
    # one ledger sums eps of one distance unit: a run that does not say which is refused before it reserves
    ledger = Ledger(tmp_path / "l.db", budget=1.0)
    with pytest.raises(ValidationError, match="distance unit"):
        plan_release(["a"], 0.5, ledger=ledger)
    assert ledger.spent(["a"]).tolist() == [0.0]


def test_an_additive_term_over_the_budget_is_refused_before_anything_is_reserved(tmp_path: Path) -> None:
    """eps 1.5/km at a 10 km step: a = 1.5 (10 sqrt 2 + 2e-6) = 21.2132 > budget 1.5 (composition.md, section 6)."""
    from metricdp.accounting.plan import check_additive
    from metricdp.location.lattice import LatticePlane

    a = LatticePlane(50.0, 10.0, cell_km=10.0, extent_km=100.0).additive(1.5)
    assert a == pytest.approx(1.5 * (10 * 2**0.5 + 2e-6), rel=1e-12) and a == pytest.approx(21.2132064, abs=1e-6)
    ledger = Ledger(tmp_path / "l.db", budget=1.5)
    with pytest.raises(ValidationError, match=r"additive loss of one release, 21.2, exceeds the per-person budget 1.5"):
        plan_release(["a", "b"], 1.5, ledger=ledger, unit="km", additive=a)
    with pytest.raises(ValidationError, match=r"exceeds the per-person budget 1\.5"):
        plan_release(["a", "b"], 1.5, budget=1.5, additive=a)
    assert ledger.runs_table() == [] and ledger.spent(["a", "b"]).tolist() == [0.0, 0.0]
    # a 500 m step: a = 1.5 (0.5 sqrt 2 + 2e-6) = 1.0606632 <= 1.5, admitted; the budget allows one release each
    small = LatticePlane(50.0, 10.0, cell_km=0.5, extent_km=100.0).additive(1.5)
    assert small == pytest.approx(1.0606632, abs=1e-7)
    plan = plan_release(["a", "a", "b"], 1.5, ledger=ledger, unit="km", additive=small, policy="drop", rng=0)
    assert plan.keep.sum() == 2 and plan.run.max == 1.5  # A_p = c E_p = 0.7071088 x 1.5 = a, = B c
    plan.commit()
    check_additive(1.5, 1.5)  # equal: admitted
    check_additive(1e9, None)  # no budget: only reported
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValidationError, match="additive loss of a release must be a finite number"):
            check_additive(bad, 1.0)


def test_unit_defaults_to_the_one_the_ledger_is_bound_to(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db", budget=1.0)
    with pytest.raises(ValidationError, match="not been bound to one yet"):
        plan_release(["a"], 0.25, ledger=ledger)  # a new ledger: nothing to infer from
    assert ledger.spent(["a"]).tolist() == [0.0]
    plan_release(["a"], 0.25, ledger=ledger, unit="km").commit()
    plan_release(["a"], 0.25, ledger=ledger).commit()  # the ledger's km
    assert ledger.unit == "km"
    assert ledger.spent(["a"]).tolist() == [0.5]
    with pytest.raises(ValidationError):
        plan_release(["a"], 0.25, ledger=ledger, unit="m")  # a stated unit is still checked against it


@pytest.mark.parametrize("as_text", [True, False])
def test_a_path_given_for_the_ledger_is_refused_by_name(as_text: bool, tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with pytest.raises(ValidationError, match=r"ledger must be an open Ledger .*got (str|PosixPath)"):
        plan_release([1, 2], 0.5, budget=1.0, ledger=str(path) if as_text else path, unit="km")  # type: ignore[arg-type]
    assert not path.exists()
