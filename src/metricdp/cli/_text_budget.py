"""The budget part of ``metricdp text privatize``: ``--budget``, ``--ledger``, ``--max-rows-per-user``.

A person is a document, or an author with ``--user-column``; each released word token costs its eps,
once per distinct word under ``--consistent`` (docs/proofs/composition.md, section 2.1). The release
itself is :func:`metricdp.text.accounted.privatize_text_file`; this module names the ledger's unit and the
memo's scope from the mechanism and the embedding, turns a refusal into its one line, and prints the
per-person report.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .._progress import ProgressReporter
from ..errors import ValidationError
from ..mechanisms import registry
from ..settings import file_sha256
from ._accounting import AccountingOptions
from ._common import console
from ._common import fmt as fmt_number
from ._options import naming_flags
from .privatize import with_flags

__all__ = ["WITHHELD", "Identity", "print_persons", "privatize_budgeted"]

WITHHELD = "[WITHHELD]"  # metricdp.text.rewrite.WITHHELD, without importing the rewrite at start-up


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
                        inputs: list[Path | None]) -> tuple[Any, str | None]:
    """``text privatize`` with --budget, --ledger or --max-rows-per-user (:mod:`metricdp.text.accounted`)."""
    from ..errors import BudgetExceededError
    from ..text.accounted import TextBudget, privatize_text_file

    person = "author" if acct.user_column else "document"
    guarantee = _family_guarantee(ident.mechanism)
    shown_budget = acct.budget
    try:
        with acct.open() as book:
            if book is not None:
                shown_budget = book.budget
            plan = TextBudget(eps, budget=None if book is not None else acct.budget, ledger=book,
                              max_tokens_per_person=acct.max_rows_per_user, policy=acct.policy,  # type: ignore[arg-type]
                              consistent=acct.consistent, user_column=acct.user_column,
                              scope=ident.scope(eps) if book is not None and acct.consistent else "",
                              mechanism=f"text privatize {desc} eps={eps:g}"[:256],
                              unit=ident.unit(guarantee) if book is not None else None)
            try:
                with naming_flags({"column": "--column"}):
                    told = ProgressReporter(f"text {src.name}", "tokens")  # a terminal only, every 2 s
                    rel = privatize_text_file(src, out, vocabulary, draw, plan, rng=rng,
                                              inputs=[*inputs, *acct.files()], progress=told, **rewrite)
                    return rel, plan.unit
            except ValidationError as ex:
                raise ValidationError(with_flags(str(ex))) from None
    except BudgetExceededError as ex:
        of = "" if shown_budget is None else f" of {shown_budget:g}"
        raise BudgetExceededError(
            f"--over-budget refuse: {ex.over:,} of {ex.persons:,} {person}s with words to release would exceed "
            f"their budget{of} "
            f"(eps {eps:g} per released word token{', once per distinct word' if acct.consistent else ''}); "
            f"nothing written, nothing spent (--over-budget drop withholds their excess tokens as {WITHHELD}, "
            f"--max-rows-per-user K releases at most K tokens per {person})", over=ex.over, persons=ex.persons,
        ) from None


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
