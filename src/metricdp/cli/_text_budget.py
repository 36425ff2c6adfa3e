"""The budget part of ``metricdp text privatize``: ``--budget``, ``--ledger``, ``--max-rows-per-user``,
``--numbers-budget``, ``--numbers-ledger``.

A person is a document, or an author with ``--user-column``; each released word token costs its eps,
once per distinct word under ``--consistent`` (docs/proofs/composition.md, section 2.1); each number
released as a number (``--numbers-epsilon``) costs its eps per unit of the value, a line of its own
with its own budget and ledger (section 2.2). The release itself is
:func:`metricdp.text.accounted.privatize_text_file`; this module names the ledger's unit and the
memo's scope from the mechanism and the embedding, opens the numbers' ledger, turns a refusal into
its one line, and prints the per-person report.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from .._progress import ProgressReporter
from ..errors import ValidationError
from ..mechanisms import registry
from ..settings import file_sha256
from ._accounting import PANEL, AccountingOptions
from ._common import console
from ._common import fmt as fmt_number
from ._options import naming_flags
from .privatize import with_flags

__all__ = ["TEXT_FLAGS", "WITHHELD", "Identity", "NumbersBudgetOption", "NumbersLedgerOption", "NumbersOptions",
           "print_numbers", "print_persons", "privatize_budgeted"]

WITHHELD = "[WITHHELD]"  # metricdp.text.rewrite.WITHHELD, without importing the rewrite at start-up

#: The library's parameters of ``text privatize``'s rules and the flags that give them (:func:`naming_flags`).
TEXT_FLAGS = {"column": "--column", "user_column": "--user-column", "ledger": "--ledger", "budget": "--budget",
              "numbers": "--numbers-epsilon", "numbers_budget": "--numbers-budget",
              "numbers_ledger": "--numbers-ledger"}


NumbersBudgetOption = Annotated[float | None, typer.Option(
    "--numbers-budget", metavar="B", rich_help_panel=PANEL, show_default=False,
    help="Every person's total eps for their numbers (--numbers-epsilon), per unit of the value: their own "
         "budget, never added to the words' (per unit of the embedding's distance); without --numbers-ledger, "
         "for this run only.")]
NumbersLedgerOption = Annotated[str | None, typer.Option(
    "--numbers-ledger", metavar="PATH_OR_URL", rich_help_panel=PANEL, show_default=False,
    help="With --ledger and --numbers-epsilon: the numbers' own ledger (eps per unit of the value), created "
         "with --numbers-budget; each run under the same run id as the words' run in --ledger.")]


@dataclass(frozen=True)
class NumbersOptions:
    """``--numbers-budget`` and ``--numbers-ledger`` (its key: ``--ledger-key``, as the words' ledger's)."""

    budget: float | None = None
    ledger: str | None = None
    ledger_key: Path | None = None

    @property
    def given(self) -> bool:
        """Whether the numbers have a budget (for this run or in a ledger)."""
        return self.budget is not None or self.ledger is not None

    def check(self) -> None:
        """One clear error for a value that means nothing (the rules between options: the library's)."""
        if self.budget is not None and not (0 < self.budget < float("inf")):
            raise ValidationError(f"--numbers-budget must be a finite number > 0, got {float(self.budget)!r}")
        if self.ledger is not None and not self.ledger.strip():
            raise ValidationError("--numbers-ledger is empty: give a SQLite file or a SQLAlchemy URL")

    def files(self) -> list[Path]:
        """The numbers' ledger's local files: inputs a release must never overwrite."""
        if self.ledger is None:
            return []
        return AccountingOptions(ledger=self.ledger, ledger_key=self.ledger_key).files()

    @contextlib.contextmanager
    def open(self) -> Iterator[Any]:
        """The numbers' ledger (None without ``--numbers-ledger``), closed at the end; a ledger this run created
        and then did not spend in is removed again."""
        if self.ledger is None:
            yield None
            return
        from ..accounting.ledger import Ledger

        if "://" not in self.ledger and self.budget is None and not Path(self.ledger).exists():
            raise ValidationError(f"--numbers-ledger {self.ledger} does not exist: create it with --numbers-budget B")
        try:
            ledger = Ledger(self.ledger, budget=self.budget, key_file=self.ledger_key)
        except ValidationError as ex:
            text = str(ex)
            if "is new: it needs a budget" in text:  # an empty file, or a new database at a URL
                text = f"--numbers-ledger {text.split('ledger ', 1)[-1].split(' is new')[0]} is new: create it with " \
                       "--numbers-budget B"
            elif "change it explicitly" in text:
                text = ("--numbers-budget differs from the numbers ledger's: " + text.split("; change it explicitly")[0]
                        + "; leave --numbers-budget out to use the ledger's")
            elif "needs the path of its key file" in text:
                text = "--numbers-ledger given by URL needs --ledger-key FILE"
            else:
                text = f"--numbers-ledger: {text}"
            raise ValidationError(text) from None
        try:
            yield ledger
        except BaseException:
            ledger.discard()
            raise
        finally:
            ledger.close()

    def report_json(self, report: Any, eps: float | None) -> dict[str, Any]:
        """The ``numbers`` object of ``--json``'s ``accounting``: the numbers' line of the per-person report."""
        from ..text.accounted import NUMBERS_UNIT

        return {"budget": self.budget, "ledger": self.ledger, "eps_per_release": eps, "rows_are": "numbers",
                "ledger_unit": NUMBERS_UNIT if self.ledger is not None else None, **report.as_dict()}


class Identity(NamedTuple):
    """What a text release is, for the ledger: the mechanism, its parameters, the vocabulary, the output filter."""

    mechanism: str
    embeddings: str
    params: dict[str, Any]
    outputs: str
    labels: Sequence[str]

    def _embedding(self) -> str:
        """The embedding's name: ``glove-6B-50d``, or a file's name and the start of its SHA-256 (its content)."""
        if self.embeddings == "glove":
            return "glove-6B-50d"
        return f"{Path(self.embeddings).name[:20]}#{file_sha256(Path(self.embeddings))[:12]}"

    def unit(self, guarantee: str) -> str:
        """The distance the eps is per, named from the embedding (a ledger sums one unit only).

        Euclidean families share ``euclidean distance of <embedding>`` (any family, any size of
        vocabulary: the same distances); a family proven for another distance (diffractor's
        list position, custext's output sets) names itself and a hash of its parameters.
        A mechanism file: the unit its metadata declares, as ``privatize`` reads it.
        """
        if self.mechanism.lower().endswith(".npz"):
            from ..mechanisms.file import load_mechanism
            from ..units import space_unit

            loaded = load_mechanism(self.mechanism)
            return space_unit(loaded.space, loaded.metadata)
        if guarantee.startswith("Euclidean"):
            return f"euclidean distance of {self._embedding()}"
        params = hashlib.sha256(repr(sorted(self.params.items())).encode()).hexdigest()[:8]
        return f"{self.mechanism}#{params} distance of {self._embedding()}"

    def scope(self, eps: float) -> str:
        """The memo's name of this release: a memoized replacement is reused only by the same one."""
        from ._accounting import mechanism_scope

        h = hashlib.sha256("\n".join(self.labels).encode("utf-8", "surrogatepass"))
        if self.mechanism.lower().endswith(".npz"):
            base = mechanism_scope("text", Path(self.mechanism))
        else:
            base = f"{self.mechanism}:{eps!r}:{sorted(self.params.items())!r}:{self._embedding()}"
        h.update(f"\0{base}\0{self.outputs}".encode())
        return f"text:{h.hexdigest()[:32]}"


def privatize_budgeted(src: Path, out: Path, acct: AccountingOptions, vocabulary: Any, draw: Any, rng: Any,
                        eps: float, desc: str, ident: Identity, rewrite: dict[str, Any],
                        inputs: list[Path | None], numbers: NumbersOptions | None = None) -> tuple[Any, str | None]:
    """``text privatize`` with --budget, --ledger, --max-rows-per-user or --numbers-budget
    (:mod:`metricdp.text.accounted`)."""
    from ..errors import BudgetExceededError
    from ..text.accounted import NumbersBudgetExceededError, TextBudget, privatize_text_file

    numbers = numbers if numbers is not None else NumbersOptions()
    person = "author" if acct.user_column else "document"
    guarantee = _family_guarantee(ident.mechanism)
    shown_budget, shown_numbers = acct.budget, numbers.budget
    try:
        with acct.open() as book, numbers.open() as numbers_book:
            if book is not None:
                shown_budget = book.budget
            if numbers_book is not None:
                shown_numbers = numbers_book.budget
            plan = TextBudget(eps, budget=None if book is not None else acct.budget, ledger=book,
                              max_tokens_per_person=acct.max_rows_per_user, policy=acct.policy,  # type: ignore[arg-type]
                              consistent=acct.consistent, user_column=acct.user_column,
                              scope=ident.scope(eps) if book is not None and acct.consistent else "",
                              mechanism=f"text privatize {desc} eps={eps:g}"[:256],
                              unit=ident.unit(guarantee) if book is not None else None,
                              numbers_budget=None if numbers_book is not None else numbers.budget,
                              numbers_ledger=numbers_book)
            try:
                with naming_flags(TEXT_FLAGS):
                    told = ProgressReporter(f"text {src.name}", "tokens")  # a terminal only, every 2 s
                    rel = privatize_text_file(src, out, vocabulary, draw, plan, rng=rng,
                                              inputs=[*inputs, *acct.files(), *numbers.files()], progress=told,
                                              **rewrite)
                    return rel, plan.unit
            except ValidationError as ex:
                raise ValidationError(with_flags(str(ex))) from None
            except NumbersBudgetExceededError as ex:  # carried past the words' ledger's handler (it words its own)
                raise _NumbersRefused(ex) from None
    except _NumbersRefused as refused:
        error = refused.error
        of = "" if shown_numbers is None else f" of {shown_numbers:g}"
        raise NumbersBudgetExceededError(
            f"--over-budget refuse: {error.over:,} of {error.persons:,} {person}s with numbers to release would exceed "
            f"their numbers budget{of} (--numbers-epsilon {rewrite['numbers'].epsilon:g} per unit of the value per "
            f"number); nothing written, nothing spent (--over-budget drop withholds their excess numbers as "
            f"{WITHHELD}, --max-rows-per-user K releases at most K numbers per {person})", over=error.over,
            persons=error.persons) from None
    except BudgetExceededError as ex:
        of = "" if shown_budget is None else f" of {shown_budget:g}"
        raise BudgetExceededError(
            f"--over-budget refuse: {ex.over:,} of {ex.persons:,} {person}s with words to release would exceed "
            f"their budget{of} "
            f"(eps {eps:g} per released word token{', once per distinct word' if acct.consistent else ''}); "
            f"nothing written, nothing spent (--over-budget drop withholds their excess tokens as {WITHHELD}, "
            f"--max-rows-per-user K releases at most K tokens per {person})", over=ex.over, persons=ex.persons,
        ) from None


class _NumbersRefused(Exception):
    """A refusal of the numbers' budget, carried out of the ledgers' blocks to be put in its own words."""

    def __init__(self, error: Any) -> None:
        super().__init__(str(error))
        self.error = error


def _family_guarantee(name: str) -> str:
    """The distance family ``name`` is proven for (its class's ``guarantee``; a mechanism file: its own)."""
    import importlib

    family = registry.SAMPLER_FAMILIES.get(name)
    if family is None:
        return ""
    module, _, cls = family.builder.partition(":")
    return str(getattr(getattr(importlib.import_module(module), cls), "guarantee", ""))


def print_persons(report: Any, acct: AccountingOptions, eps: float) -> None:
    """The budget's part of the report: tokens released and withheld, eps per person (run, ledger total)."""
    person = "author" if acct.user_column else "document"
    lines = [f"per {person}{'' if acct.user_column is None else f' ({acct.user_column!r})'}: {report.rows_in:,} "
             f"word tokens of {report.persons_in:,} {person}s, {report.rows_released:,} released at eps "
             f"{fmt_number(eps)} each"]
    withheld = []
    if acct.max_rows_per_user is not None:
        withheld.append(f"{report.withheld_cap:,} by --max-rows-per-user {acct.max_rows_per_user}")
    if acct.budget is not None or acct.ledger is not None:
        withheld.append(f"{report.withheld_budget:,} by the budget ({report.persons_over:,} {person}(s) over)")
    if withheld:
        lines.append(f"withheld (written as {WITHHELD}): " + "; ".join(withheld))
    if acct.consistent:
        lines.append(f"--consistent: {report.fresh_releases:,} fresh releases, "
                     f"{report.extra.get('memo_hits', 0):,} repeats of releases paid in earlier runs (free)")
    for name, s in (("this run", report.run), ("in total in the ledger", report.total)):
        if s is not None:
            lines.append(f"eps per {person}, {name}: max {fmt_number(s.max)}, median {fmt_number(s.median)}, "
                         f"p90 {fmt_number(s.p90)}, p99 {fmt_number(s.p99)} ({s.persons:,} {person}s)")
    for line in lines:
        console.print(line, markup=False, highlight=False)


def print_numbers(report: Any, acct: AccountingOptions, numbers: NumbersOptions, eps: float | None) -> None:
    """The numbers' line of the per-person report: numbers released and withheld, eps per unit of the value."""
    person = "author" if acct.user_column else "document"
    lines = [f"numbers per {person}: {report.rows_in:,} numbers of {report.persons_in:,} {person}s, "
             f"{report.rows_released:,} released at eps {fmt_number(eps or 0.0)} per unit of the value each (their "
             "own budget line: never added to the words' eps)"]
    withheld = []
    if acct.max_rows_per_user is not None:
        withheld.append(f"{report.withheld_cap:,} by --max-rows-per-user {acct.max_rows_per_user}")
    if numbers.budget is not None or numbers.ledger is not None:
        withheld.append(f"{report.withheld_budget:,} by the numbers budget ({report.persons_over:,} {person}(s) "
                        "over)")
    if withheld:
        lines.append(f"numbers withheld (written as {WITHHELD}): " + "; ".join(withheld))
    for name, s in (("this run", report.run), ("in total in the numbers ledger", report.total)):
        if s is not None:
            lines.append(f"numbers eps per {person} (per unit of the value), {name}: max {fmt_number(s.max)}, "
                         f"median {fmt_number(s.median)}, p90 {fmt_number(s.p90)}, p99 {fmt_number(s.p99)} "
                         f"({s.persons:,} {person}s)")
    for line in lines:
        console.print(line, markup=False, highlight=False)
