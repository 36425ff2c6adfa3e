"""A text rewrite under a per-person budget: scan, plan, rewrite, publish, commit.

The protocol of :mod:`metricdp.accounting.plan` (the one of ``privatize``,
:mod:`metricdp.streaming.accounted`) with word tokens for rows:

1. **scan** -- the input is tokenised once (the same reading, tokeniser, policy and
   vocabulary as the rewrite, :func:`~.rewrite.rewrite_file` with no output; a table goes
   through the release pipeline's one chunk loop, writing nothing): every word token that
   would be released gets its *person* and its word index. The person is the document
   (its number in the file), or the author (``user_column`` of a CSV, Parquet or JSONL input);
2. **plan** -- :func:`~metricdp.accounting.plan.plan_release` over the tokens: the cap
   (``max_tokens_per_person`` tokens per person, chosen uniformly at random), the
   consistent groups ((person, word) pairs), the memo of earlier runs, and the budget.
   Under ``refuse`` a person over budget stops the run here
   (:class:`~metricdp.errors.BudgetExceededError`), before anything is drawn, written or
   spent; otherwise the spend is *reserved* in the ledger. Consistent groups are drawn
   now, one release per fresh group, and memoized under the reservation;
3. **rewrite** -- the input is read again and written to an unnamed temporary file
   (:func:`metricdp.io.atomic_write`, by :func:`~.rewrite.rewrite_file`): a kept token
   gets its release (its group's, or a fresh draw), a withheld one becomes
   :data:`~.rewrite.WITHHELD`. Each batch's words
   and persons are compared with the scan's (a file changed in between is refused);
4. **publish** -- the input's size, times and inode are compared with the scan's,
   :meth:`~metricdp.accounting.plan.Plan.publishing`, the atomic rename, then
   :meth:`~metricdp.accounting.plan.Plan.commit`. A failure before ``publishing``
   aborts the reservation (nothing published, nothing spent); after it the spend stays
   (an interrupted publish counts as spent, never the reverse:
   ``docs/proofs/composition.md``, Section 5).

What a token costs (``docs/proofs/composition.md``, Sections 2 and 4): a released token
``eps`` (per unit of the embedding's distance); under ``consistent`` a (person, word) pair
``eps`` once, however often the word repeats and in however many runs (the repeats publish
the one release drawn and paid for: post-processing, Theorem 4); a withheld token nothing
(nothing about it is released: the placeholder is the same for every word, and which
tokens are withheld depends only on counts and on the secure source, never on the words).

**Numbers, their own line.** With a :class:`~.numbers.NumberRelease` (``numbers``), the
number tokens the scan finds get their persons too and a plan of their own, at the
release's eps per unit of the *value* (``docs/proofs/composition.md``, Section 2.2): a
person's numbers cost ``(numbers released) x eps`` per unit of the value, against
``numbers_budget`` and in ``numbers_ledger`` (a ledger sums one unit: the words' eps is per
unit of the embedding's distance, and the two are never added). The cap and the
over-budget policy are the words'; a withheld number is written as :data:`~.rewrite.WITHHELD`.
Both plans are made (and reserved) before anything is drawn; a refusal of either leaves
nothing written and nothing spent in either ledger (:class:`NumbersBudgetExceededError`
for the numbers'), and the two are published, committed or given back together.

Memory: one person code (int64) and one word index (int32) per released token (and one
person code per number), plus the plans' per-token arrays; the text itself is streamed in
batches, as without a budget.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ..accounting.accountant import Policy
from ..accounting.composition import to_units
from ..accounting.ledger import Ledger
from ..accounting.plan import Plan, plan_release
from ..errors import BudgetExceededError, MetricDPError, ValidationError
from ..streaming.accounted import AccountingReport
from ..tabular.formats import text_format
from .accounting import DocumentReport, TextAccounting, check_persons
from .numbers import NumberRelease
from .rewrite import RewriteStats, Vocabulary, rewrite_file

__all__ = ["NUMBERS_UNIT", "NumbersBudgetExceededError", "TextBudget", "TextRelease", "check_text_release",
           "privatize_text_file"]

Draw = Callable[[NDArray[np.intp]], NDArray[np.intp]]

#: The unit of the numbers' eps in their ledger: per unit of the value of a number in a text (a year's
#: unit is a year, a price's a unit of its currency: the mechanism adds noise on each number's own grid).
NUMBERS_UNIT = "unit of the value of a number in a text"


class NumbersBudgetExceededError(BudgetExceededError):
    """The numbers of some persons would exceed their numbers budget (``refuse``); nothing was spent."""


def check_text_release(
    path: Path,
    column: str | None,
    *,
    user_column: str | None = None,
    ledger: object = None,
    budget: object = None,
    numbers: object = None,
    numbers_budget: object = None,
    numbers_ledger: object = None,
) -> str:
    """Refuse an accounted text release that means nothing, before any work; returns the input's format.

    Any argument but ``path``, ``column`` and ``user_column`` counts by being given (not
    None): a caller may check its options before it opens a ledger or builds a mechanism.
    The rules: :func:`.accounting.check_persons` (the author's field, a ledger's persons);
    numbers released (``numbers``) under a words' budget or ledger need a budget or ledger of
    their own, in units of the value (the words' is per unit of the embedding's distance:
    the two never add up); a numbers budget or ledger needs ``numbers``, and a numbers
    ledger sits beside a words' ledger, never the same one (under any name: a symbolic or hard link to
    it, another spelling of its path).
    """
    fmt = text_format(path, column)[0]
    check_persons(fmt, column, user_column, ledger=ledger)
    if numbers is None:
        for given, name in ((numbers_budget, "numbers_budget"), (numbers_ledger, "numbers_ledger")):
            if given is not None:
                raise ValidationError(f"the parameter {name!r} accounts numbers released as numbers: give the "
                                      "parameter 'numbers' too")
        return fmt.name
    if numbers_ledger is not None and ledger is None:
        raise ValidationError("the parameter 'numbers_ledger' is kept beside the words' ledger: give the parameter "
                              "'ledger' too (or the parameter 'numbers_budget' alone, for this run)")
    if ledger is not None and numbers_ledger is None:
        raise ValidationError("the parameter 'numbers' with the parameter 'ledger' needs a ledger of its own, the "
                              "parameter 'numbers_ledger' (eps per unit of the value; the words' ledger sums eps per "
                              "unit of the embedding's distance, and the two never add up)")
    if ledger is not None and _same_ledger(ledger, numbers_ledger):
        raise ValidationError("the parameter 'numbers_ledger' must be another ledger than the parameter 'ledger': a "
                              "ledger sums eps of one unit only")
    if budget is not None and numbers_budget is None and numbers_ledger is None:
        raise ValidationError("the parameter 'numbers' under a per-person budget needs a budget of its own, the "
                              "parameter 'numbers_budget' (eps per unit of the value; the words' budget is per unit "
                              "of the embedding's distance, and the two never add up)")
    return fmt.name


def _ledger_name(ledger: object) -> str:
    """The name a ledger is opened by: a :class:`Ledger`'s, or the path or URL given (a path resolved: links
    followed, ``./`` and ``..`` gone)."""
    name = ledger.name if isinstance(ledger, Ledger) else os.fspath(ledger)  # type: ignore[call-overload]
    return name if "://" in name else os.path.realpath(name)


def _same_ledger(a: object, b: object) -> bool:
    """Whether two ledgers are one: the same resolved name, or one file under two names (a hard link)."""
    first, second = _ledger_name(a), _ledger_name(b)
    if first == second:
        return True
    try:
        one, other = os.stat(first), os.stat(second)
    except (OSError, ValueError):  # a URL, or a file not created yet: only its name says which it is
        return False
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


@dataclass(frozen=True)
class TextBudget:
    """How a text rewrite is accounted per person (see the module docstring).

    ``budget`` without a ``ledger`` holds for this run only; with a ledger, the ledger's
    budget applies. ``unit`` names the distance the eps is per (needed with a ledger, which
    sums one unit only); ``scope`` names the mechanism, vocabulary and output filter in the
    memo; ``mechanism`` describes the run in the ledger.
    """

    eps: float
    budget: float | None = None
    ledger: Ledger | None = None
    max_tokens_per_person: int | None = None
    policy: Policy = "refuse"
    consistent: bool = False
    user_column: str | None = None
    scope: str = ""
    mechanism: str = ""
    unit: str | None = None
    run_id: str | None = None
    numbers_budget: float | None = None
    numbers_ledger: Ledger | None = None


@dataclass(frozen=True)
class TextRelease:
    """What an accounted rewrite did: the rewrite's counts, the per-document report and the per-person one.

    ``persons.rows_*`` count word tokens (the "rows" of the accounting); ``numbers`` is the
    per-person report of the numbers released as numbers (their own line; None without them),
    its rows number tokens and its eps per unit of the value.
    """

    stats: RewriteStats
    documents: DocumentReport
    persons: AccountingReport
    numbers: AccountingReport | None = None


def _identity(path: Path) -> tuple[int, ...]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Scan(TextAccounting):
    """Pass 1: each released token's person (document or author code) and word; nothing is drawn."""

    def __init__(self, vocabulary: int, user_column: str | None) -> None:
        super().__init__(1.0, vocabulary, user_column=user_column)
        self.owners: list[NDArray[np.int64]] = []
        self.words: list[NDArray[np.int32]] = []
        self.number_owners: list[int] = []  # the person of each number token, in file order

    def _owner(self, doc_in_batch: int) -> int:
        """The person of document ``doc_in_batch`` of the batch being read."""
        if self.user_column is None:
            return self._done + doc_in_batch
        return self._doc_person[self._done + doc_in_batch]

    def number(self, doc_in_batch: int) -> bool:
        self.number_owners.append(self._owner(doc_in_batch))
        return True  # "released" by a release that draws nothing (_Undrawn)

    def owners_of(self, doc_in_batch: Sequence[int], n_docs: int) -> NDArray[np.int64]:
        """The person of each token of a batch: its document's number, or its author's code."""
        d = np.asarray(doc_in_batch, dtype=np.int64)
        if self.user_column is None:
            return d + self._done
        doc_person = np.asarray(self._doc_person[self._done:self._done + n_docs], dtype=np.int64)
        if doc_person.size != n_docs:
            raise ValidationError("a document without an author")  # pragma: no cover - readers add one each
        return doc_person[d]

    def release(self, words: NDArray[np.intp], doc_in_batch: Sequence[int], n_docs: int,
                sample: Callable[[NDArray[np.intp]], NDArray[np.intp]]) -> NDArray[np.intp]:
        self.owners.append(self.owners_of(doc_in_batch, n_docs))
        self.words.append(np.asarray(words, dtype=np.int32))
        self._done += n_docs
        return np.asarray(words, dtype=np.intp)  # discarded

    def persons(self) -> NDArray[Any]:
        """The persons, indexed by code: document numbers, or the authors' ids in order of appearance."""
        if self.user_column is None:
            return np.arange(self._done, dtype=np.int64)
        return np.asarray(list(self._persons), dtype=object)


class _Rewrite(_Scan):
    """Pass 2: the plan's releases (or :data:`~.rewrite.WITHHELD`, -1) for each batch, checked against the scan."""

    def __init__(self, scan: _Scan, eps: float, consistent: bool, plan: Plan,
                 group_release: NDArray[np.intp] | None, path: Path, numbers: Plan | None = None) -> None:
        super().__init__(scan.vocabulary, scan.user_column)
        self.eps, self._units, self.consistent = float(eps), to_units(eps), consistent
        self.plan, self.group_release, self.path = plan, group_release, path
        self.scan_owners = np.concatenate(scan.owners) if scan.owners else np.zeros(0, np.int64)
        self.scan_words = np.concatenate(scan.words) if scan.words else np.zeros(0, np.int32)
        self.pos = 0
        self.numbers_plan, self.scan_numbers, self.npos = numbers, scan.number_owners, 0

    def changed(self) -> ValidationError:
        return ValidationError(f"{self.path}: the file changed while it was being released (the first pass read "
                               f"{self.scan_words.size:,} word tokens and {len(self.scan_numbers):,} numbers to "
                               "release); nothing written, nothing spent")

    def number(self, doc_in_batch: int) -> bool:
        """The numbers' plan for the next number token, whose person must be the scan's."""
        at = self.npos
        if self.numbers_plan is None or at >= len(self.scan_numbers) or \
                self.scan_numbers[at] != self._owner(doc_in_batch):
            raise self.changed()
        self.npos = at + 1
        return bool(self.numbers_plan.keep[at])

    def release(self, words: NDArray[np.intp], doc_in_batch: Sequence[int], n_docs: int,
                sample: Callable[[NDArray[np.intp]], NDArray[np.intp]]) -> NDArray[np.intp]:
        x = np.asarray(words, dtype=np.int64)
        start, stop = self.pos, self.pos + x.size
        owners = self.owners_of(doc_in_batch, n_docs)
        if stop > self.scan_words.size or not (np.array_equal(x, self.scan_words[start:stop])
                                                and np.array_equal(owners, self.scan_owners[start:stop])):
            raise self.changed()
        keep = self.plan.keep[start:stop]
        out = np.full(x.size, -1, dtype=np.intp)
        if self.group_release is not None:
            out[keep] = self.group_release[self.plan.group[start:stop][keep]]
        elif keep.any():
            out[keep] = np.asarray(sample(np.asarray(words)[keep]), dtype=np.intp)
        self._count(np.asarray(doc_in_batch, dtype=np.int64)[keep], x[keep], n_docs)
        self.pos = stop
        self._done += n_docs
        return out

    def report(self, documents: int) -> DocumentReport:
        """Per document over the *released* tokens; per author, the plan's eps of this run."""
        rep = super().report(documents)
        return replace(rep, persons=self.plan.run if self.user_column is not None else None)


def privatize_text_file(
    path: Path,
    out: Path,
    vocabulary: Vocabulary,
    draw: Draw,
    budget: TextBudget,
    *,
    rng: object = None,
    inputs: Sequence[Path | None] = (),
    progress: Any = None,
    numbers: NumberRelease | None = None,
    **rewrite: Any,
) -> TextRelease:
    """Rewrite ``path`` into ``out`` under ``budget`` (the module docstring's protocol).

    ``draw(words)`` releases word indices (fresh draws, output filter included); ``rng``
    is the source of the cap's and the budget's choices of tokens (None: the OS secure
    source); ``numbers`` releases number tokens as numbers, charged as their own line
    (``budget.numbers_budget``, ``budget.numbers_ledger``); ``rewrite`` goes to
    :func:`~.rewrite.rewrite_file` (``column``, ``keep``, ``policy``, ``keep_columns``,
    ``drop_columns``, ``max_record``, ``batch_tokens``). ``inputs``: files ``out`` must
    never overwrite (the ledgers', say). The rules of :func:`check_text_release` are checked
    first. Raises :class:`~metricdp.errors.BudgetExceededError` under ``refuse``
    (:class:`NumbersBudgetExceededError` for the numbers), nothing written or spent.
    """
    check_text_release(path, rewrite.get("column"), user_column=budget.user_column, ledger=budget.ledger,
                       budget=budget.budget, numbers=numbers, numbers_budget=budget.numbers_budget,
                       numbers_ledger=budget.numbers_ledger)
    identity = _identity(path)
    scan = _Scan(len(vocabulary.labels), budget.user_column)
    undrawn = None if numbers is None else cast(NumberRelease, _Undrawn(numbers))  # the scan draws nothing
    rewrite_file(path, None, vocabulary, draw, accounting=scan, numbers=undrawn, **rewrite)
    words = np.concatenate(scan.words) if scan.words else np.zeros(0, np.int32)
    owners = np.concatenate(scan.owners) if scan.owners else np.zeros(0, np.int64)
    persons = scan.persons()
    # one run id in both ledgers: the words' and the numbers' spends of one run read together
    run_id = budget.run_id if budget.run_id is not None or numbers is None else uuid.uuid4().hex
    number_owners = np.asarray(scan.number_owners, dtype=np.int64)
    if numbers is not None:  # a refusal of the numbers before the words' reservation: no run left in either ledger
        _refuse_numbers(number_owners, persons, numbers, budget)
    # no token at all: nothing to group (plan_release cannot reshape zero consistent values)
    consistent = budget.consistent and words.size > 0
    plan = plan_release(owners, budget.eps, budget=budget.budget, ledger=budget.ledger,
                        max_rows_per_user=budget.max_tokens_per_person, policy=budget.policy,
                        consistent=consistent, true_values=words if consistent else None,
                        scope=budget.scope, rng=rng, run_id=run_id, mechanism=budget.mechanism,
                        persons=persons, unit=budget.unit)
    run = _Publish([plan], path, identity)
    try:  # reserved from here: a failure before the publish gives the reservations back (run.abort)
        numbers_plan = None
        if numbers is not None:
            numbers_plan = _plan_numbers(number_owners, persons, numbers, budget, rng, run_id)
            run.plans.append(numbers_plan)
        group_release = None
        if consistent:
            fresh_words = words[plan.group_row[plan.fresh]].astype(np.intp)
            drawn = draw(fresh_words) if fresh_words.size else np.zeros(0, dtype=np.intp)
            group_release = np.asarray(plan.releases(np.asarray(drawn, dtype=np.int64)), dtype=np.intp)
        run.book = book = _Rewrite(scan, budget.eps, budget.consistent, plan, group_release, path, numbers_plan)
        # published and settled by the rewrite: run.publishing() just before the rename, then run.commit()
        st = rewrite_file(path, out, vocabulary, draw, accounting=book, progress=progress, inputs=inputs, run=run,
                          numbers=numbers, **rewrite)
    except BaseException:
        run.abort()
        raise
    report = _report(plan, int(owners.size), int(persons.size), budget.consistent)
    numbers_report = None if numbers_plan is None else _report(numbers_plan, len(scan.number_owners),
                                                               int(persons.size), False)
    return TextRelease(st, book.report(st.documents), report, numbers_report)


def _refuse_numbers(owners: NDArray[np.int64], persons: NDArray[Any], numbers: NumberRelease,
                    budget: TextBudget) -> None:
    """The numbers' ledger's refusals read before anything is reserved: a ledger bound to another unit, and
    under ``refuse`` a person over budget (the reservation checks again, in its transaction: a run of another
    process in between is refused there, and given back)."""
    ledger = budget.numbers_ledger
    if ledger is None:
        return
    bound = ledger.unit
    if bound is not None and bound != NUMBERS_UNIT[:64]:  # the reservation would refuse it after the words'
        raise ValidationError(f"ledger {ledger.name} accounts eps per {bound or 'a unitless distance'}; the numbers' "
                              f"eps is per {NUMBERS_UNIT}: their sum would mean nothing (use another ledger)")
    if budget.policy != "refuse" or owners.size == 0:
        return
    counts = np.bincount(owners, minlength=persons.size)
    if budget.max_tokens_per_person is not None:
        counts = np.minimum(counts, budget.max_tokens_per_person)
    who = np.flatnonzero(counts)
    asked = ledger.spent_units(persons[who]) + counts[who].astype(np.int64) * to_units(numbers.epsilon)
    over = int((asked > to_units(ledger.budget, "budget", budget=True)).sum())
    if over:
        raise _numbers_refused(over, int(who.size), numbers)


def _numbers_refused(over: int, persons: int, numbers: NumberRelease) -> NumbersBudgetExceededError:
    return NumbersBudgetExceededError(
        f"the numbers of {over:,} of {persons:,} persons with numbers to release would exceed their numbers "
        f"budget (eps {numbers.epsilon:g} per unit of the value per number); nothing written, nothing spent",
        over=over, persons=persons)


def _plan_numbers(owners: NDArray[np.int64], persons: NDArray[Any], numbers: NumberRelease, budget: TextBudget,
                  rng: object, run_id: str | None) -> Plan:
    """The numbers' plan: one release per number token at ``numbers.epsilon`` per unit of the value, against
    the numbers' budget or ledger, with the words' cap and policy (module docstring)."""
    ledger = budget.numbers_ledger
    try:
        return plan_release(owners, numbers.epsilon, budget=budget.numbers_budget,
                            ledger=ledger, max_rows_per_user=budget.max_tokens_per_person, policy=budget.policy,
                            rng=rng, run_id=run_id, mechanism=f"{budget.mechanism[:200]} numbers".strip(),
                            persons=persons, unit=NUMBERS_UNIT if ledger is not None else None)
    except BudgetExceededError as ex:
        raise _numbers_refused(ex.over, ex.persons, numbers) from None


def _report(p: Plan, rows: int, persons: int, consistent: bool) -> AccountingReport:
    return AccountingReport(
        rows, int(p.keep.sum()), p.withheld_cap, p.withheld_budget, persons, p.persons_over,
        int(p.fresh.size), p.run, p.total, None if p.reservation is None else p.reservation.run_id,
        {"memo_hits": int(p.memo_hit.sum())} if consistent else {})


class _Undrawn:
    """A number release that draws nothing (the scan's): which tokens it would release, each left as it is."""

    def __init__(self, numbers: NumberRelease) -> None:
        self.releasable = numbers.releasable

    def release_token(self, piece: str) -> str:
        return piece


class _Publish:
    """The point of no return of one accounted rewrite (module docstring, step 4), for its plans together."""

    def __init__(self, plans: list[Plan], path: Path, identity: tuple[int, ...]) -> None:
        self.plans, self.path, self.identity = plans, path, identity
        self.book: _Rewrite | None = None  # the rewrite pass, which must have met every token of the scan
        self.published = self.aborted = False

    def publishing(self) -> None:
        """Just before the atomic rename: the input must be the one scanned; from here on the spend stays."""
        if self.book is not None and (self.book.pos != self.book.scan_words.size
                                      or self.book.npos != len(self.book.scan_numbers)):
            raise self.book.changed()
        if _identity(self.path) != self.identity:
            raise ValidationError(f"{self.path}: the file changed while it was being released; nothing written, "
                                  "nothing spent")
        for plan in self.plans:
            plan.publishing()
        self.published = True

    def abort(self) -> None:
        """Give the reservations back unless the output was being published (once: later calls do nothing)."""
        if not self.published and not self.aborted:
            self.aborted = True
            for plan in self.plans:
                with contextlib.suppress(MetricDPError):  # a failed refund leaves the spend recorded: the safe side
                    plan.abort()

    def commit(self) -> None:
        for plan in self.plans:
            plan.commit()

    def report(self) -> None:
        """Nothing: the report of an accounted rewrite is its :class:`TextRelease`."""
