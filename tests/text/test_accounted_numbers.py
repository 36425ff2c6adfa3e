"""metricdp.text.accounted with numbers released as numbers: their own budget line, in eps per unit of the value.

Two documents by hand: ann writes "the cat 2004 12.50" (2 numbers), bob "a dog 7 8 9" (3 numbers). At 0.25 per
unit of the value per number, ann's numbers cost 0.5 and bob's 0.75, whatever the values; the words cost 0.5 per
token in their own ledger and never meet the numbers' sum.
"""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.accounting.ledger import Ledger
from metricdp.errors import BudgetExceededError, ValidationError
from metricdp.text.accounted import (
    NUMBERS_UNIT,
    NumbersBudgetExceededError,
    TextBudget,
    check_text_release,
    privatize_text_file,
)
from metricdp.text.numbers import NumberRelease
from metricdp.text.rewrite import WITHHELD, Vocabulary

WORDS = ["the", "cat", "dog", "a"]
EPS_N = 0.25


def _input(tmp_path: Path) -> Path:
    src = tmp_path / "in.csv"
    src.write_text("author,body\nann,the cat 2004 12.50\nbob,a dog 7 8 9\n", encoding="utf-8")
    return src


def _draw(idx: np.ndarray) -> np.ndarray:
    return np.asarray(idx)  # the identity: the words' draws do not matter here


def _run(tmp_path: Path, out: str = "out.csv", **kw):  # type: ignore[no-untyped-def]
    plan = TextBudget(0.5, user_column="author", unit="test distance", **kw)
    return privatize_text_file(_input(tmp_path), tmp_path / out, Vocabulary(WORDS), _draw, plan, column="body",
                               keep_columns=("author",), numbers=NumberRelease(EPS_N, rng=0))


def _bodies(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as fh:
        return [row[1] for row in list(csv.reader(fh))[1:]]


def test_spends_by_hand_in_two_ledgers(tmp_path: Path) -> None:
    with Ledger(tmp_path / "w.db", budget=5) as words, Ledger(tmp_path / "n.db", budget=1) as nums:
        rel = _run(tmp_path, ledger=words, numbers_ledger=nums)
        assert rel.numbers is not None
        n = rel.numbers
        assert (n.rows_in, n.rows_released, n.withheld_budget, n.persons_in) == (5, 5, 0, 2)
        assert (n.run.max, n.run.mean, n.total.max) == (0.75, 0.625, 0.75)  # type: ignore[union-attr]
        assert nums.spent(["ann", "bob"]).tolist() == [0.5, 0.75]
        assert words.spent(["ann", "bob"]).tolist() == [1.0, 1.0]  # two word tokens each at 0.5: apart
        assert (nums.unit, words.unit) == (NUMBERS_UNIT, "test distance")
        [w_run], [n_run] = words.runs_table(), nums.runs_table()
        assert n_run["run"] == w_run["run"] == n.run_id == rel.persons.run_id  # one run, read in both ledgers
        assert (n_run["state"], n_run["eps"], n_run["rows"], n_run["persons"], n_run["eps_spent"]) == (
            "committed", EPS_N, 5, 2, 1.25)
    assert rel.stats.numbers == 5 and rel.stats.numbers_withheld == 0
    assert all(WITHHELD not in b for b in _bodies(tmp_path / "out.csv"))


def test_drop_withholds_the_excess_numbers(tmp_path: Path) -> None:
    """Numbers budget 0.5 = 2 numbers per person: ann's 2 fit, one of bob's 3 is withheld."""
    with Ledger(tmp_path / "w.db", budget=5) as words, Ledger(tmp_path / "n.db", budget=0.5) as nums:
        rel = _run(tmp_path, ledger=words, numbers_ledger=nums, policy="drop")
        assert nums.spent(["ann", "bob"]).tolist() == [0.5, 0.5]
    assert rel.numbers is not None and (rel.numbers.withheld_budget, rel.numbers.persons_over) == (1, 1)
    assert (rel.stats.numbers, rel.stats.numbers_withheld, rel.stats.withheld) == (4, 1, 0)
    ann, bob = _bodies(tmp_path / "out.csv")
    assert WITHHELD not in ann and bob.split().count(WITHHELD) == 1 and bob.split()[:2] == ["a", "dog"]


def test_refusal_writes_nothing_and_spends_nothing_in_either_ledger(tmp_path: Path) -> None:
    with Ledger(tmp_path / "w.db", budget=5) as words, Ledger(tmp_path / "n.db", budget=0.5) as nums:
        with pytest.raises(NumbersBudgetExceededError, match="1 of 2 persons") as info:
            _run(tmp_path, ledger=words, numbers_ledger=nums)
        assert isinstance(info.value, BudgetExceededError) and (info.value.over, info.value.persons) == (1, 2)
        assert words.runs_table() == [] and nums.runs_table() == []  # not even a run given back
        assert words.spent(["ann", "bob"]).tolist() == nums.spent(["ann", "bob"]).tolist() == [0.0, 0.0]
    assert not (tmp_path / "out.csv").exists()


def test_a_words_refusal_reserves_no_numbers(tmp_path: Path) -> None:
    with Ledger(tmp_path / "w.db", budget=0.5) as words, Ledger(tmp_path / "n.db", budget=5) as nums:
        with pytest.raises(BudgetExceededError) as info:
            _run(tmp_path, ledger=words, numbers_ledger=nums)
        assert not isinstance(info.value, NumbersBudgetExceededError)
        assert nums.runs_table() == [] and nums.spent(["ann", "bob"]).tolist() == [0.0, 0.0]
    assert not (tmp_path / "out.csv").exists()


def test_budget_for_this_run_and_the_cap(tmp_path: Path) -> None:
    """Without ledgers: numbers budget 0.5 for this run; a cap of 1 releases one number (and one word) each."""
    rel = _run(tmp_path, budget=5, numbers_budget=0.5, policy="drop")
    assert rel.numbers is not None and rel.numbers.total is None
    assert (rel.numbers.run.max, rel.numbers.withheld_budget) == (0.5, 1)
    rel = _run(tmp_path, "capped.csv", max_tokens_per_person=1)
    assert rel.numbers is not None and (rel.numbers.withheld_cap, rel.numbers.run.max) == (3, EPS_N)
    assert rel.persons.withheld_cap == 2
    assert [b.split().count(WITHHELD) for b in _bodies(tmp_path / "capped.csv")] == [2, 3]


def test_plain_text_documents_are_the_persons(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("1 2 3 the\n4\n\n", encoding="utf-8")
    dropped = TextBudget(0.5, budget=1, numbers_budget=0.5, policy="drop")
    rel = privatize_text_file(src, tmp_path / "o.txt", Vocabulary(WORDS), _draw, dropped,
                              numbers=NumberRelease(EPS_N, rng=0))
    assert rel.numbers is not None
    assert (rel.numbers.rows_in, rel.numbers.persons_in, rel.numbers.run.max) == (4, 3, 0.5)  # 3 numbers: 1 dropped
    assert rel.numbers.withheld_budget == 1 and rel.stats.numbers_withheld == 1
    refused = TextBudget(0.5, budget=1, numbers_budget=0.5, policy="refuse")
    with pytest.raises(NumbersBudgetExceededError, match="1 of 2 persons with numbers"):
        privatize_text_file(src, tmp_path / "o2.txt", Vocabulary(WORDS), _draw, refused,
                            numbers=NumberRelease(EPS_N, rng=0))
    assert not (tmp_path / "o2.txt").exists()


@pytest.mark.parametrize(("kw", "fragment"), [
    ({"ledger": "w.db", "numbers": 1}, "needs a ledger of its own, the parameter 'numbers_ledger'"),
    ({"budget": 3, "numbers": 1}, "needs a budget of its own, the parameter 'numbers_budget'"),
    ({"numbers_budget": 3}, "give the parameter 'numbers' too"),
    ({"numbers": 1, "numbers_ledger": "n.db", "numbers_budget": 1}, "give the parameter 'ledger' too"),
    ({"numbers": 1, "ledger": "w.db", "numbers_ledger": "./w.db"}, "must be another ledger"),
    ({"user_column": "body"}, "the parameter 'user_column' names the author's field"),
    ({"user_column": None, "ledger": "w.db"}, "the parameter 'ledger' needs the parameter 'user_column'"),
])
def test_the_rules_are_the_librarys_and_name_no_flag(tmp_path: Path, kw: dict, fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment) as info:
        check_text_release(_input(tmp_path), "body", **{"user_column": "author", **kw})
    assert "--" not in str(info.value)


def test_the_rules_pass_a_release_that_means_something(tmp_path: Path) -> None:
    assert check_text_release(_input(tmp_path), "body", user_column="author", ledger="w.db", budget=1, numbers=1,
                              numbers_ledger="n.db") == "csv"


def test_a_rewrite_without_budget_checks_the_author_field(tmp_path: Path) -> None:
    """The same rule for a caller of rewrite_file: an author's field in plain text means nothing."""
    from metricdp.text.accounting import TextAccounting
    from metricdp.text.rewrite import rewrite_file

    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="names the author's field"):
        rewrite_file(src, tmp_path / "o.txt", Vocabulary(WORDS), _draw,
                     accounting=TextAccounting(0.5, len(WORDS), user_column="author"))
    assert not (tmp_path / "o.txt").exists()


def test_numbers_changed_between_the_passes_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewrite pass meets each number's person as the scan did: bob's number moved to ann is refused."""
    from metricdp.text import accounted

    src = _input(tmp_path)
    scanned = accounted._Rewrite.__init__

    def edit_then_rewrite(self, *args, **kw) -> None:  # type: ignore[no-untyped-def]
        src.write_text("author,body\nann,the cat 2004 12.50 7\nbob,a dog 8 9\n", encoding="utf-8")
        scanned(self, *args, **kw)

    monkeypatch.setattr(accounted._Rewrite, "__init__", edit_then_rewrite)
    with Ledger(tmp_path / "w.db", budget=5) as words, Ledger(tmp_path / "n.db", budget=5) as nums:
        with pytest.raises(ValidationError, match=r"changed while it was being released .* 5 numbers to release"):
            _run(tmp_path, ledger=words, numbers_ledger=nums)
        assert words.spent(["ann", "bob"]).tolist() == nums.spent(["ann", "bob"]).tolist() == [0.0, 0.0]
    assert not (tmp_path / "out.csv").exists()


@settings(max_examples=40, deadline=None)
@given(docs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5)), min_size=1, max_size=4),
       numbers_budget=st.sampled_from([None, 0.25, 0.5, 1.0]), cap=st.sampled_from([None, 1, 2]),
       drop=st.booleans())
def test_numbers_budget_and_cap_bound_every_document(docs: list[tuple[int, int]], numbers_budget: float | None,
                                                     cap: int | None, drop: bool) -> None:
    """Oracle: a document of w words and n numbers releases at most min(n, cap, budget / eps) numbers, each one a
    number in its place or the placeholder; refuse refuses exactly when a document's numbers exceed the numbers
    budget; the words' line is untouched by the numbers' (no words budget: nothing withheld but by the cap)."""
    if numbers_budget is None and cap is None:
        cap = 2
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.txt", Path(tmp) / "out.txt"
        src.write_text("".join(" ".join(["cat"] * w + [str(10 + k) for k in range(n)]) + " .\n" for w, n in docs),
                       encoding="utf-8")
        plan = TextBudget(0.5, max_tokens_per_person=cap, numbers_budget=numbers_budget,
                          policy="drop" if drop else "refuse")
        asked = [EPS_N * (n if cap is None else min(n, cap)) for _, n in docs]
        over = numbers_budget is not None and any(x > numbers_budget for x in asked)
        try:
            rel = privatize_text_file(src, out, Vocabulary(WORDS), _draw, plan, batch_tokens=3,
                                      numbers=NumberRelease(EPS_N))
        except NumbersBudgetExceededError:
            assert over and not drop and not out.exists()
            return
        assert not (over and not drop)
        lines = out.read_text(encoding="utf-8").splitlines()
    assert rel.numbers is not None and rel.numbers.rows_in == sum(n for _, n in docs)
    assert rel.stats.numbers + rel.stats.numbers_withheld == rel.numbers.rows_in
    for (w, n), line in zip(docs, lines, strict=True):
        got = line.split()[:-1]
        assert len(got) == w + n and line.endswith(".")
        words, numbers = got[:w], got[w:]
        released = [x for x in numbers if x != WITHHELD]
        assert all(x.lstrip("-").isdigit() for x in released)
        limit = n if cap is None else min(n, cap)
        if numbers_budget is not None:
            limit = min(limit, int(numbers_budget / EPS_N))
        assert len(released) == limit  # the excess only: a person within both keeps every number
        assert sum(x != WITHHELD for x in words) == (w if cap is None else min(w, cap))


def test_a_numbers_budget_other_than_the_ledgers_is_refused(tmp_path: Path) -> None:
    with Ledger(tmp_path / "w.db", budget=5) as words, Ledger(tmp_path / "n.db", budget=1) as nums:
        with pytest.raises(ValidationError, match="budget 2 differs from the ledger's 1"):
            _run(tmp_path, ledger=words, numbers_ledger=nums, numbers_budget=2)
        assert words.spent(["ann", "bob"]).tolist() == [0.0, 0.0] and nums.runs_table() == []
    assert not (tmp_path / "out.csv").exists()
