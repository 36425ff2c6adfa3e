"""``metricdp ledger show|export LEDGER``: what a privacy ledger holds, per person and per run.

* ``metricdp ledger show LEDGER [--json]`` -- the budget (with the distance unit its eps are
  per), how many persons and runs, the distribution of eps spent per person (max, median,
  90th and 99th percentiles) and every run with its state, mechanism, eps, rows released and
  withheld; ``--plot FILE.png`` also draws the histogram of the eps spent per person;
* ``metricdp ledger show LEDGER --person ID [--ledger-key FILE]`` -- one person's runs (eps
  of a release, releases charged, eps charged) and totals: the id is hashed with the
  ledger's key (beside a SQLite ledger, or ``--ledger-key``), as every release does.
* ``metricdp ledger export LEDGER [--json] [--out FILE]`` -- one row per person: the
  person's keyed hash (never the id), eps committed, reserved by runs not yet committed,
  total and remaining; CSV by default, one JSON object (persons and runs) with ``--json``.

``LEDGER`` is a SQLite file or a SQLAlchemy URL (``postgresql+psycopg://...``, the
``ledger-sql`` extra). Reading a ledger needs no key (it only shows hashes), except for
``--person``. Nothing is ever created or changed: a missing ledger is an error, and a file
that is not a metricdp ledger is refused before anything is written to it.
"""

from __future__ import annotations

import contextlib
import csv
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .._atomic import atomic_write
from .._jsonable import jsonable
from .._optional import require
from ..accounting.composition import summarize
from ..accounting.ledger import Ledger
from ..errors import ValidationError
from ._accounting import AccountingOptions
from ._common import JsonOption, check_output, console, echo_json, fmt, handle_errors

__all__ = ["ledger_app", "register"]

ledger_app = typer.Typer(
    name="ledger",
    help="Inspect a privacy ledger: spent and remaining eps per person (hashed) and per run.",
    no_args_is_help=True,
)

LedgerArg = Annotated[str, typer.Argument(help="The ledger: a SQLite file or a SQLAlchemy URL.", show_default=False)]


def register(app: typer.Typer) -> None:
    """Add the ``ledger`` command group to ``app``."""
    app.add_typer(ledger_app, name="ledger")


def _open(target: str, key: Path | None = None) -> Ledger:
    return Ledger(target, create=False, key_file=key)


def _snapshot(target: str) -> tuple[float, str | None, dict[str, Any], list[dict[str, Any]]]:
    with _open(target) as ledger:
        return ledger.budget, ledger.unit, ledger.persons_table(), ledger.runs_table()


def per_unit(unit: str | None) -> str:
    """How the ledger's eps are stated: ``"per km"``; no unit bound yet: ``"per unit of distance"``."""
    if unit is None:
        return "per unit of distance (no release has named a unit yet)"
    if unit == "DP":  # grid --prior-out per person: standard DP, no distance
        return "as standard DP per person"
    return f"per {unit}" if unit else "per unit of a unitless distance"


@ledger_app.command("show")
@handle_errors
def show(
    ledger: LedgerArg,
    json_out: JsonOption = False,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="PNG: histogram of the eps each person has spent, with the budget marked.")] = None,
    person: Annotated[str | None, typer.Option(
        "--person", metavar="ID", show_default=False,
        help="One person's releases and totals (the id as in the user column; needs the ledger's key).")] = None,
    ledger_key: Annotated[Path | None, typer.Option(
        "--ledger-key", metavar="FILE", show_default=False,
        help="The key that hashes person ids, for --person (a SQLite ledger's is LEDGER.key beside it).")] = None,
) -> None:
    """The budget, the per-person distribution of eps spent, and every run (or one person's, with --person)."""
    if ledger_key is not None and person is None:
        raise ValidationError("--ledger-key is for --person ID: reading a ledger needs no key otherwise")
    if person is not None:
        if plot is not None:
            raise ValidationError("--plot shows every person: leave it out with --person ID")
        _show_person(ledger, person, ledger_key, json_out)
        return
    if plot is not None:
        require("plot", what="--plot")
        if plot.suffix.lower() != ".png":
            raise ValidationError(f"--plot {plot}: expected a .png file")
        check_output(plot, "--plot", inputs=AccountingOptions(ledger=ledger).files())
    budget, unit, persons, runs = _snapshot(ledger)
    if plot is not None:
        _plot_spent(plot, persons["total"], budget, ledger, unit)
    spent = summarize(persons["total"]).as_dict()
    states = {s: sum(r["state"] == s for r in runs) for s in ("committed", "reserved", "aborted")}
    if json_out:
        echo_json({"ledger": ledger, "budget": budget, "unit": unit, "persons": int(persons["person"].size),
                   "exhausted": int((persons["remaining"] <= 0).sum()), "spent": spent, "runs_by_state": states,
                   "runs": runs, **({"plot": str(plot)} if plot is not None else {})})
        return
    from rich.table import Table

    console.print(f"ledger {ledger}: budget {fmt(budget)} {per_unit(unit)} per person, {persons['person'].size} "
                  "persons "
                  f"({int((persons['remaining'] <= 0).sum())} exhausted), {len(runs)} runs "
                  f"({states['committed']} committed, {states['reserved']} reserved, {states['aborted']} aborted)",
                  markup=False, highlight=False)
    console.print("eps spent per person: " + ", ".join(f"{k} {fmt(v)}" for k, v in spent.items() if k != "persons"),
                  markup=False, highlight=False)
    table = Table("run", "state", "mechanism", "eps", "rows", "withheld", "persons", "over", "eps spent", "created")
    for r in runs:
        table.add_row(r["run"], r["state"], r["mechanism"], fmt(r["eps"]), fmt(r["rows"]), fmt(r["withheld"]),
                      fmt(r["persons"]), fmt(r["persons_over"]), fmt(r["eps_spent"]), r["created"])
    console.print(table)
    if plot is not None:
        console.print(f"wrote {plot}: histogram of the eps spent by {persons['person'].size:,} persons",
                      markup=False, highlight=False)


def _show_person(target: str, person: str, key: Path | None, json_out: bool) -> None:
    """``--person``: one person's runs and totals (hashed with the ledger's key; the id itself is not stored)."""
    try:
        with _open(target, key) as ledger:
            found, budget, unit = ledger.person_history(person), ledger.budget, ledger.unit
    except ValidationError as ex:
        if str(ex).startswith("ledger key file") or "key file is needed" in str(ex):
            raise ValidationError(f"--person needs the ledger's key (--ledger-key FILE): {ex}") from None
        raise
    if json_out:
        echo_json({"ledger": target, "budget": budget, "unit": unit, **found})
        return
    from rich.table import Table

    console.print(f"person {person!r} in ledger {target}: {fmt(found['total'])} of {fmt(budget)} {per_unit(unit)} "
                  f"spent ({fmt(found['committed'])} committed, {fmt(found['reserved'])} reserved), "
                  f"{fmt(found['remaining'])} remaining; {len(found['runs'])} runs", markup=False, highlight=False)
    if not found["runs"]:
        return
    table = Table("run", "state", "mechanism", "eps", "releases", "eps spent", "created")
    for r in found["runs"]:
        table.add_row(r["run"], r["state"], r["mechanism"], fmt(r["eps"]), fmt(r["releases"]), fmt(r["eps_spent"]),
                      r["created"])
    console.print(table)


def _plot_spent(path: Path, spent: Any, budget: float, name: str, unit: str | None = None) -> None:
    """Histogram of the eps spent per person (hashed persons: the figure shows no id).

    When every person spent the same (up to rounding) the histogram's bins would be about
    1e-6 of the value wide, invisible on an axis that reaches the budget: one bar 2% of the
    axis wide is drawn instead, labelled with the value in the legend.
    """
    import numpy as np

    from .._figure import hist_range, new_figure, save_png

    fig = new_figure(6.4, 3.6)
    ax = fig.add_subplot()
    if len(spent) and hist_range(spent) is not None:  # one value
        value = float(np.mean(spent))
        ax.bar([value], [len(spent)], width=0.02 * max(abs(value), budget), color="tab:blue",
               label=f"all {len(spent):,} persons: {value:g}")
    elif len(spent):
        ax.hist(spent, bins=min(50, max(5, len(spent) // 5)), color="tab:blue")
    ax.axvline(budget, color="tab:red", linestyle="--", label=f"budget {budget:g}")
    ax.set_xlabel(f"eps spent per person (reserved + committed, {per_unit(unit)})")
    ax.set_ylabel("persons")
    ax.set_title(f"{Path(name).name}: {len(spent):,} persons", parse_math=False)  # a file name, not mathtext
    ax.legend()
    save_png(fig, path)


@ledger_app.command("export")
@handle_errors
def export(
    ledger: LedgerArg,
    json_out: JsonOption = False,
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file (atomically), not stdout.")] = None,
) -> None:
    """Every person (keyed hash) with eps committed, reserved, total and remaining."""
    protected = AccountingOptions(ledger=ledger).files()  # the ledger, its journals and key: never --out
    if out is not None:
        check_output(out, inputs=protected)
    budget, _, persons, runs = _snapshot(ledger)
    columns = ["person", "committed", "reserved", "total", "remaining"]
    if json_out:
        rows = [dict(zip(columns, values, strict=True))
                for values in zip(*(persons[c].tolist() for c in columns), strict=True)]
        obj = {"ledger": ledger, "budget": budget, "persons": rows, "runs": runs}
        if out is None:
            echo_json(obj)
            return
        with atomic_write(out, "w", inputs=protected) as fh:
            fh.write(json.dumps(jsonable(obj), allow_nan=False) + "\n")
        return
    with atomic_write(out, "w", inputs=protected) if out is not None else contextlib.nullcontext(sys.stdout) as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(zip(persons["person"].tolist(), *(map(repr, persons[c].tolist()) for c in columns[1:]),
                             strict=True))
