"""The per-person accounting options, defined once for every release command, and their report.

``privatize``, ``privatize-points`` and ``text privatize`` take the same options
(``docs/accounting.md``)::

    --user-column COL        who a row belongs to
    --budget B               every person's total eps (without --ledger: this run only)
    --ledger PATH_OR_URL     the persistent ledger (SQLite file, or a SQLAlchemy URL)
    --ledger-key FILE        the key of a URL ledger (a SQLite ledger's is LEDGER.key beside it)
    --max-rows-per-user K    at most K rows per person, chosen uniformly at random
    --over-budget refuse|drop
    --consistent             same person and true value: same release, in this and later runs

A command adds the seven ``Annotated`` parameters below, builds :class:`AccountingOptions`
from them, calls :meth:`AccountingOptions.check` (one clear error for a combination that
means nothing), opens the ledger with :meth:`AccountingOptions.open` around the release,
and prints :func:`print_report` / puts :func:`report_json` in ``--json``. Library errors are
put in the command line's terms here (the library names no flag).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import BudgetExceededError, ValidationError
from ..units import Epsilon, UnitError, parse_epsilon
from ._common import console, fmt

__all__ = [
    "AccountingOptions", "BudgetOption", "ConsistentOption", "LedgerKeyOption", "LedgerOption", "MaxRowsOption",
    "OverBudget", "OverBudgetOption", "UserColumnOption", "mechanism_scope", "print_documents", "print_report",
    "report_json",
]

PANEL = "Privacy per person"


class OverBudget(StrEnum):
    refuse = "refuse"
    drop = "drop"


UserColumnOption = Annotated[str | None, typer.Option(
    "--user-column", metavar="COL", rich_help_panel=PANEL, show_default=False,
    help="Who each row belongs to: the per-person eps is reported, and --budget, --max-rows-per-user and "
         "--consistent apply per person.")]
class Budget(float):
    """A ``--budget``: the number as written and, when it was written per a length (``10/km``), that unit.

    A float, so that a plain ``--budget 3`` is the number it always was; one with a unit is
    converted to the eps unit of the command by :meth:`AccountingOptions.for_unit` (exactly,
    as ``--epsilon`` is), and refused by a command whose eps has no distance unit.
    """

    per: Fraction | None
    unit: str

    def __new__(cls, value: float, per: Fraction | None = None, unit: str = "") -> Budget:
        self = super().__new__(cls, value)
        self.per, self.unit = per, unit
        return self

    def __str__(self) -> str:
        return f"{float(self)!r}/{self.unit}" if self.unit else repr(float(self))


def parse_budget(text: str) -> Budget:
    """``--budget``: a plain number (the command's eps units) or an eps per length like ``--epsilon``'s."""
    if "/" not in text:
        try:
            return Budget(float(text))  # checked by AccountingOptions.check (> 0, finite)
        except ValueError:
            raise typer.BadParameter(f"not a number or an eps per length (10/km): {text!r}") from None
    try:
        eps = parse_epsilon(text)
    except UnitError as ex:
        raise typer.BadParameter(str(ex)) from None
    return Budget(float(eps.per), eps.per, eps.unit)


BudgetOption = Annotated[float | None, typer.Option(
    "--budget", metavar="B", rich_help_panel=PANEL, show_default=False, parser=parse_budget,
    help="Every person's total eps: a plain number in the mechanism's units, or per a length like --epsilon "
         "(10/km, 0.01/m); without --ledger, for this run only.")]
LedgerOption = Annotated[str | None, typer.Option(
    "--ledger", metavar="PATH_OR_URL", rich_help_panel=PANEL, show_default=False,
    help="Persistent per-person spend across runs: a SQLite file (created with --budget) or a SQLAlchemy URL.")]
LedgerKeyOption = Annotated[Path | None, typer.Option(
    "--ledger-key", metavar="FILE", rich_help_panel=PANEL, show_default=False,
    help="The ledger's key file (needed for a URL ledger; a SQLite ledger's is LEDGER.key beside it).")]
MaxRowsOption = Annotated[int | None, typer.Option(
    "--max-rows-per-user", metavar="K", min=1, rich_help_panel=PANEL, show_default=False,
    help="Release at most K rows per person, chosen uniformly at random (the others are withheld).")]
OverBudgetOption = Annotated[OverBudget | None, typer.Option(
    "--over-budget", case_sensitive=False, rich_help_panel=PANEL, show_default=False,
    help="refuse (default): exit 2 if anyone would exceed the budget, nothing written or spent; "
         "drop: withhold their excess rows.")]
ConsistentOption = Annotated[bool, typer.Option(
    "--consistent", rich_help_panel=PANEL,
    help="Same person and same true value: the same release, in this run and (with --ledger) later ones; "
         "repeats cost nothing more but show which rows share a value.")]


def mechanism_scope(kind: str, path: Path) -> str:
    """The memo's name of a mechanism: ``kind`` and the SHA-256 of its file (a changed file is a new scope)."""
    from ..settings import file_sha256

    return f"{kind}:{file_sha256(path)[:32]}"


@dataclass(frozen=True)
class AccountingOptions:
    """The values of the accounting options of one command line."""

    user_column: str | None = None
    budget: float | None = None
    ledger: str | None = None
    ledger_key: Path | None = None
    max_rows_per_user: int | None = None
    over_budget: OverBudget | None = None
    consistent: bool = False

    @property
    def active(self) -> bool:
        """Whether any accounting option was given."""
        return any(v not in (None, False) for v in self.__dict__.values())

    @property
    def policy(self) -> str:
        return (self.over_budget or OverBudget.refuse).value

    def given(self) -> list[str]:
        """The flags given, in the order of ``--help``."""
        flags = {"user_column": "--user-column", "budget": "--budget", "ledger": "--ledger",
                 "ledger_key": "--ledger-key", "max_rows_per_user": "--max-rows-per-user",
                 "over_budget": "--over-budget", "consistent": "--consistent"}
        return [f for k, f in flags.items() if getattr(self, k) not in (None, False)]

    def check(self, *, person: str | None = None) -> None:
        """One clear error for a combination that means nothing.

        ``person`` names what a person is without ``--user-column`` (``text privatize``: the
        document); None means the command needs ``--user-column`` for any accounting option.
        """
        if person is None and self.user_column is None:
            others = [f for f in self.given() if f != "--user-column"]
            if others:
                raise ValidationError(f"{', '.join(others)} need{'s' if len(others) == 1 else ''} --user-column COL: "
                                      "the budget, the cap and consistent releases are per person")
        if self.budget is not None and not (self.budget > 0 and self.budget < float("inf")):
            raise ValidationError(f"--budget must be a finite number > 0, got {float(self.budget)!r}")
        if self.ledger is not None and not self.ledger.strip():
            raise ValidationError("--ledger is empty: give a SQLite file or a SQLAlchemy URL")
        if self.ledger_key is not None and self.ledger is None:
            raise ValidationError("--ledger-key is the key of a --ledger: give --ledger PATH_OR_URL too")
        if self.over_budget is not None and self.budget is None and self.ledger is None:
            raise ValidationError("--over-budget needs a budget: --budget B or --ledger PATH_OR_URL")
        if self.ledger is not None and "://" in self.ledger and self.ledger_key is None:
            raise ValidationError("--ledger given by URL needs --ledger-key FILE (the key that hashes person ids)")

    def for_unit(self, unit: str) -> AccountingOptions:
        """These options with a ``--budget`` written per a length (``10/km``) converted to eps per ``unit``.

        Exact, as ``--epsilon``'s conversion (:meth:`metricdp.units.Epsilon.to`): ``0.01/m`` is
        10 per km. A plain number is taken in ``unit`` already.
        """
        per, unit_of = getattr(self.budget, "per", None), getattr(self.budget, "unit", "")
        if per is None or not unit_of:
            return self
        try:
            value = Epsilon(per, unit_of).to(unit)
        except UnitError as ex:
            raise ValidationError(f"--budget: {ex}") from None
        return dataclasses.replace(self, budget=value)

    def _plain_budget(self) -> None:
        if getattr(self.budget, "unit", ""):
            raise ValidationError(f"--budget {self.budget} has a distance unit, but this command's eps is not per a "
                                  "distance in m or km: give a plain number in its units")

    def refuse_command(self, command: str, supported: tuple[str, ...]) -> None:
        """One clear error for the options ``command`` does not support yet."""
        unsupported = [f for f in self.given() if f not in supported]
        if unsupported:
            raise ValidationError(f"{', '.join(unsupported)}: not yet supported by {command} (it supports "
                                  f"{', '.join(supported)})")

    @contextlib.contextmanager
    def open(self) -> Iterator[Any]:
        """The ledger (None without ``--ledger``), opened with the CLI's errors, closed at the end."""
        self._plain_budget()
        if self.ledger is None:
            with _flags(self):
                yield None
            return
        from ..accounting.ledger import Ledger

        if "://" not in self.ledger and self.budget is None and not Path(self.ledger).exists():
            raise ValidationError(f"--ledger {self.ledger} does not exist: create it with --budget B")
        with _flags():
            ledger = Ledger(self.ledger, budget=self.budget, key_file=self.ledger_key)
        try:
            with _flags(self, ledger.budget):
                yield ledger
        except BaseException:
            ledger.discard()  # a ledger this run created and then refused to spend in: no file left behind
            raise
        finally:
            ledger.close()

    def files(self) -> list[Path]:
        """The ledger's local files (database, journals, key): inputs a release must never overwrite."""
        if self.ledger is None:
            return []
        given = [] if self.ledger_key is None else [self.ledger_key]
        if "://" in self.ledger:
            return given
        from ..accounting.ledger import key_path_for

        db = Path(self.ledger)
        if not self.ledger.strip() or not db.name:
            raise ValidationError(f"the ledger path {self.ledger!r} names no file: give a SQLite file or a "
                                  "SQLAlchemy URL")
        return [db, *(db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")), key_path_for(db), *given]

    def accounting(self, *, ledger: Any, scope: str, mechanism: str, additive: float = 0.0) -> Any:
        """The library's :class:`~metricdp.streaming.accounted.Accounting` of these options.

        ``additive``: the additive loss of one release (the lattice's), budgeted with eps.
        """
        from ..streaming.accounted import Accounting

        self._plain_budget()
        if self.user_column is None:
            raise ValidationError("--user-column COL is needed")  # pragma: no cover - check() said so
        return Accounting(self.user_column, budget=None if ledger is not None else self.budget, ledger=ledger,
                          max_rows_per_user=self.max_rows_per_user, policy=self.policy,  # type: ignore[arg-type]
                          consistent=self.consistent, scope=scope, mechanism=mechanism, additive=additive)

    def describe(self) -> dict[str, Any]:
        """The options as given, for ``--json``."""
        budget = None if self.budget is None else float(self.budget)
        return {"user_column": self.user_column, "budget": budget, "ledger": _redacted(self.ledger),
                "max_rows_per_user": self.max_rows_per_user, "over_budget": self.policy,
                "consistent": self.consistent}


def _redacted(target: str | None) -> str | None:
    if target is None or "://" not in target:
        return target
    from ..accounting._store import redact

    return redact(target)


@contextlib.contextmanager
def _flags(opts: AccountingOptions | None = None, budget_of_ledger: float | None = None) -> Iterator[None]:
    """Library errors of the ledger and the budget in the command line's terms."""
    try:
        yield
    except BudgetExceededError as ex:
        b = budget_of_ledger if budget_of_ledger is not None else None if opts is None else opts.budget
        budget = "" if b is None else f" of {b:g}"
        raise BudgetExceededError(
            f"--over-budget refuse: {ex.over:,} of {ex.persons:,} persons would exceed their budget{budget}; "
            "nothing written, nothing spent (--over-budget drop withholds their excess rows, "
            "--max-rows-per-user K caps every person)", over=ex.over, persons=ex.persons) from None
    except ValidationError as ex:
        text = str(ex)
        if "is new: it needs a budget" in text:
            text = text.replace("ledger ", "--ledger ", 1).replace("it needs a budget", "create it with --budget B")
        elif "change it explicitly" in text:
            text = ("--budget differs from the ledger's: " + text.split("; change it explicitly")[0]
                    + "; leave --budget out to use the ledger's")
        elif text.startswith("ledger key file"):
            text = "--ledger-key: " + text
        elif "needs the path of its key file" in text:
            text = "--ledger given by URL needs --ledger-key FILE"
        ex.args = (text, *ex.args[1:])
        raise


def report_json(report: Any, opts: AccountingOptions, eps: float) -> dict[str, Any]:
    """The ``accounting`` object of ``--json``: the options, the rows, the per-person eps (run, total)."""
    return {**opts.describe(), "eps_per_release": eps, **report.as_dict()}


def _summary(s: Any) -> str:
    return (f"max {fmt(s.max)}, median {fmt(s.median)}, p90 {fmt(s.p90)}, p99 {fmt(s.p99)}, mean {fmt(s.mean)} "
            f"({s.persons:,} persons)")


def print_report(report: Any, opts: AccountingOptions, eps: float, unit: str = "rows", *,
                 distance: str | None = None) -> None:
    """The composed guarantee and what was withheld, on stdout (after the command's own line).

    ``distance`` is the unit the eps are per (``"km"``); None says "per unit of distance".
    """
    lines = [f"per person ({opts.user_column!r}): {report.rows_in:,} {unit} of {report.persons_in:,} persons, "
             f"{report.rows_released:,} released at eps {fmt(eps)} each"]
    withheld = []
    if opts.max_rows_per_user is not None:
        withheld.append(f"{report.withheld_cap:,} by --max-rows-per-user {opts.max_rows_per_user}")
    if opts.budget is not None or opts.ledger is not None:
        withheld.append(f"{report.withheld_budget:,} by the budget ({report.persons_over:,} persons over)")
    if withheld:
        lines.append("withheld: " + "; ".join(withheld))
    if opts.consistent:
        lines.append(f"--consistent: {report.fresh_releases:,} fresh releases, "
                     f"{report.extra.get('memo_hits', 0):,} repeats of paid releases (free)")
    lines.append(f"eps per person, this run: {_summary(report.run)}")
    if report.total is not None:
        lines.append(f"eps per person, in total in the ledger: {_summary(report.total)}")
    worst = report.total.max if report.total is not None else report.run.max
    lines.append(f"guarantee: each person's released values are (eps_p)-mDP w.r.t. the summed distance, "
                 f"eps_p <= {fmt(worst)} per {distance or 'unit of distance'}"
                 f"{' in total' if report.total is not None else ''}")
    for line in lines:
        console.print(line, markup=False, highlight=False)



def print_documents(report: Any, opts: AccountingOptions) -> None:
    """The per-document (and per-author) eps of a text rewrite, on stdout."""
    d = report.as_dict()
    mode = (" (--consistent: one replacement per word and " + ("author" if opts.user_column else "document") + ")"
            if opts.consistent else "")
    lines = [f"per document{mode}: tokens released {_dist(d['tokens_released'])}; distinct words "
             f"{_dist(d['distinct_words'])}",
             f"eps per document (summed distance): {_dist(d['eps_per_document'])}",
             f"eps of a document's most repeated word: {_dist(d['eps_repeated_word'])}"]
    if d["eps_per_author"] is not None:
        lines.append(f"eps per author ({opts.user_column!r}): {_dist(d['eps_per_author'])}, "
                     f"{d['eps_per_author']['persons']:,} authors")
    for line in lines:
        console.print(line, markup=False, highlight=False)


def _dist(s: dict[str, Any]) -> str:
    return f"max {fmt(s['max'])}, median {fmt(s['median'])}, p90 {fmt(s['p90'])}, p99 {fmt(s['p99'])}"
