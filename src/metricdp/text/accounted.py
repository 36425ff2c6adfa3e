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

Memory: one person code (int64) and one word index (int32) per released token, plus the
plan's per-token arrays; the text itself is streamed in batches, as without a budget.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..accounting.accountant import Policy
from ..accounting.composition import to_units
from ..accounting.ledger import Ledger
from ..accounting.plan import Plan, plan_release
from ..errors import MetricDPError, ValidationError
from ..streaming.accounted import AccountingReport
from .accounting import DocumentReport, TextAccounting
from .rewrite import RewriteStats, Vocabulary, rewrite_file

__all__ = ["TextBudget", "TextRelease", "privatize_text_file"]

Draw = Callable[[NDArray[np.intp]], NDArray[np.intp]]


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


@dataclass(frozen=True)
class TextRelease:
    """What an accounted rewrite did: the rewrite's counts, the per-document report and the per-person one.

    ``persons.rows_*`` count word tokens (the "rows" of the accounting).
    """

    stats: RewriteStats
    documents: DocumentReport
    persons: AccountingReport


def _identity(path: Path) -> tuple[int, ...]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Scan(TextAccounting):
    """Pass 1: each released token's person (document or author code) and word; nothing is drawn."""

    def __init__(self, vocabulary: int, user_column: str | None) -> None:
        super().__init__(1.0, vocabulary, user_column=user_column)
        self.owners: list[NDArray[np.int64]] = []
        self.words: list[NDArray[np.int32]] = []

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
                 group_release: NDArray[np.intp] | None, path: Path) -> None:
        super().__init__(scan.vocabulary, scan.user_column)
        self.eps, self._units, self.consistent = float(eps), to_units(eps), consistent
        self.plan, self.group_release, self.path = plan, group_release, path
        self.scan_owners = np.concatenate(scan.owners) if scan.owners else np.zeros(0, np.int64)
        self.scan_words = np.concatenate(scan.words) if scan.words else np.zeros(0, np.int32)
        self.pos = 0

    def changed(self) -> ValidationError:
        return ValidationError(f"{self.path}: the file changed while it was being released (the first pass read "
                               f"{self.scan_words.size:,} word tokens to release); nothing written, nothing spent")

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
    **rewrite: Any,
) -> TextRelease:
    """Rewrite ``path`` into ``out`` under ``budget`` (the module docstring's protocol).

    ``draw(words)`` releases word indices (fresh draws, output filter included); ``rng``
    is the source of the cap's and the budget's choices of tokens (None: the OS secure
    source); ``rewrite`` goes to :func:`~.rewrite.rewrite_file` (``column``, ``keep``,
    ``policy``, ``keep_columns``, ``drop_columns``, ``max_record``, ``batch_tokens``).
    ``inputs``: files ``out`` must never overwrite (the ledger's, say).
    Raises :class:`~metricdp.errors.BudgetExceededError` under ``refuse``, nothing written
    or spent.
    """
    if budget.ledger is not None and budget.user_column is None:
        raise ValidationError("a ledger needs persons that keep their identity across runs: name the author "
                              "(or document id) field with the user column; a document's number in a file is not "
                              "an identity")
    identity = _identity(path)
    scan = _Scan(len(vocabulary.labels), budget.user_column)
    rewrite_file(path, None, vocabulary, draw, accounting=scan, **rewrite)
    words = np.concatenate(scan.words) if scan.words else np.zeros(0, np.int32)
    owners = np.concatenate(scan.owners) if scan.owners else np.zeros(0, np.int64)
    persons = scan.persons()
    # no token at all: nothing to group (plan_release cannot reshape zero consistent values)
    consistent = budget.consistent and words.size > 0
    plan = plan_release(owners, budget.eps, budget=budget.budget, ledger=budget.ledger,
                        max_rows_per_user=budget.max_tokens_per_person, policy=budget.policy,
                        consistent=consistent, true_values=words if consistent else None,
                        scope=budget.scope, rng=rng, run_id=budget.run_id, mechanism=budget.mechanism,
                        persons=persons, unit=budget.unit)
    run = _Publish(plan, path, identity)
    try:  # reserved from here: a failure before the publish gives the reservation back (run.abort)
        group_release = None
        if consistent:
            fresh_words = words[plan.group_row[plan.fresh]].astype(np.intp)
            drawn = draw(fresh_words) if fresh_words.size else np.zeros(0, dtype=np.intp)
            group_release = np.asarray(plan.releases(np.asarray(drawn, dtype=np.int64)), dtype=np.intp)
        run.book = book = _Rewrite(scan, budget.eps, budget.consistent, plan, group_release, path)
        # published and settled by the rewrite: run.publishing() just before the rename, then run.commit()
        st = rewrite_file(path, out, vocabulary, draw, accounting=book, progress=progress, inputs=inputs, run=run,
                          **rewrite)
    except BaseException:
        run.abort()
        raise
    p = plan
    report = AccountingReport(
        int(owners.size), int(p.keep.sum()), p.withheld_cap, p.withheld_budget, int(persons.size), p.persons_over,
        int(p.fresh.size), p.run, p.total, None if p.reservation is None else p.reservation.run_id,
        {"memo_hits": int(p.memo_hit.sum())} if budget.consistent else {})
    return TextRelease(st, book.report(st.documents), report)


class _Publish:
    """The point of no return of one accounted rewrite (module docstring, step 4)."""

    def __init__(self, plan: Plan, path: Path, identity: tuple[int, ...]) -> None:
        self.plan, self.path, self.identity = plan, path, identity
        self.book: _Rewrite | None = None  # the rewrite pass, which must have met every token of the scan
        self.published = self.aborted = False

    def publishing(self) -> None:
        """Just before the atomic rename: the input must be the one scanned; from here on the spend stays."""
        if self.book is not None and self.book.pos != self.book.scan_words.size:
            raise self.book.changed()
        if _identity(self.path) != self.identity:
            raise ValidationError(f"{self.path}: the file changed while it was being released; nothing written, "
                                  "nothing spent")
        self.plan.publishing()
        self.published = True

    def abort(self) -> None:
        """Give the reservation back unless the output was being published (once: later calls do nothing)."""
        if not self.published and not self.aborted:
            self.aborted = True
            with contextlib.suppress(MetricDPError):  # a failed refund leaves the spend recorded: the safe side
                self.plan.abort()

    def commit(self) -> None:
        self.plan.commit()

    def report(self) -> None:
        """Nothing: the report of an accounted rewrite is its :class:`TextRelease`."""
