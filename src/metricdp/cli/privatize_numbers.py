"""``metricdp privatize-numbers INPUT --column C --epsilon E --range LO,HI [--step S] --out OUTPUT``.

Releases a numeric column on the grid LO, LO+S, ..., HI with an exact mechanism
(:mod:`metricdp.mechanisms.numeric`): ``clamped-geometric`` (releases stay in the range)
or ``discrete-laplace`` (unbiased away from the ends; releases may leave the range). The
guarantee is EPSILON per unit of the value: two values x, x' are
``EPSILON * |x - x'|``-indistinguishable. The file is streamed with the same file layer
as ``privatize`` (:mod:`metricdp.streaming.numbers`; CSV, Parquet, Arrow/Feather, JSON
lines): CSV bytes outside the column kept, a typed format's schema kept, atomic output,
the OS secure random source unless ``--seed``.

What leaves: every other column is written with its TRUE values unless ``--drop COL``
removes it; the command names those columns on stderr and in ``--json``.

Engines: ``--engine dask`` (``--scheduler ADDRESS``) or ``--engine spark`` (``--master
URL``) release the file piece by piece on a cluster with the local engine's record
definition, number rule, errors and output bytes (:class:`metricdp.integrations._rule.NumberRule`);
the per-person options work there too (the driver plans once, the workers release).

Per person (``docs/accounting.md``): the options of ``privatize`` (``--user-column``,
``--budget``, ``--ledger``, ``--max-rows-per-user``, ``--over-budget``, ``--consistent``;
:mod:`metricdp.cli._accounting`, :mod:`metricdp.pipeline.first_pass`). A person's
eps is per unit of the value, summed over their fresh releases; with ``--consistent`` the
true value is the value's grid point.
"""

from __future__ import annotations

import hashlib
import time
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from .._progress import ProgressReporter
from .._validation import check_epsilon
from ..errors import PrivacyLeakWarning, ValidationError
from ..io import parse_decimal
from ..mechanisms.numeric import KINDS, NumericGrid, number_mechanism
from ._accounting import (
    AccountingOptions,
    BudgetOption,
    ConsistentOption,
    LedgerKeyOption,
    LedgerOption,
    MaxRowsOption,
    OverBudgetOption,
    UserColumnOption,
    print_report,
    report_json,
)
from ._common import (
    JsonOption,
    OutOption,
    SeedOption,
    check_output,
    console,
    echo_json,
    handle_errors,
)
from .privatize import (
    FLAGS,
    ChunkRowsOption,
    DropOption,
    Engine,
    EngineOption,
    KeepOption,
    MasterOption,
    SchedulerOption,
    check_engine,
    check_formats,
    flagged,
    leaves_report,
)

__all__ = ["parse_range", "register"]

_FLAGS = {**FLAGS, "out_of_range": "--out-of-range", "off_grid": "--off-grid", "kind": "--mechanism"}


def parse_range(text: str) -> tuple[str, str]:
    """``"LO,HI"`` -> (LO, HI) as text (the grid reads them as decimals)."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ValidationError(f"--range must be LO,HI (two numbers), got {text!r}")
    return parts[0], parts[1]


def _epsilon(text: str) -> float:
    """``--epsilon`` by the CSV number rule (plain ASCII decimal): Python's float() would read
    ``4_8`` as 48 and non-ASCII digits as digits, which a privacy parameter must never mean."""
    try:
        value = parse_decimal(text)
    except ValueError:
        raise ValidationError(f"--epsilon must be a plain decimal number, got {text!r}") from None
    return check_epsilon(value, "--epsilon")


def _grid(lo: str, hi: str, step: str) -> NumericGrid:
    try:
        return NumericGrid(lo, hi, step)
    except ValidationError as ex:
        raise ValidationError(f"--range {lo},{hi} --step {step}: {ex}") from None


def register(app: typer.Typer) -> None:
    """Add the ``privatize-numbers`` command to ``app``."""

    @app.command("privatize-numbers")
    @handle_errors
    def privatize_numbers(
        input_file: Annotated[Path, typer.Argument(
            metavar="INPUT", help="CSV (with a header row), Parquet, Arrow/Feather or JSON lines file.")],
        column: Annotated[str, typer.Option("--column", "-c", help="Numeric column whose values are released.")],
        epsilon_text: Annotated[str, typer.Option("--epsilon", "-e", metavar="FLOAT",
                                                  help="Guarantee per unit of the value.")],
        value_range: Annotated[str, typer.Option("--range", metavar="LO,HI", help="The values' range (public).")],
        out: OutOption,
        step: Annotated[str, typer.Option("--step", help="Grid step: values are LO, LO+STEP, ..., HI.")] = "1",
        mechanism: Annotated[
            str, typer.Option("--mechanism", "-m", help=f"{' | '.join(KINDS)}: clamped to the range, or unbiased "
                              "discrete Laplace (releases may leave the range).")
        ] = "clamped-geometric",
        out_of_range: Annotated[
            str, typer.Option("--out-of-range", help="error: refuse values outside LO,HI; clamp: move them to the "
                              "nearest end (the guarantee is unchanged: clamping never increases |x - x'|).")
        ] = "error",
        off_grid: Annotated[
            str, typer.Option("--off-grid", help="error: refuse values between grid points; round: move them to "
                              "the nearest one (the guarantee becomes EPSILON * (|x - x'| + STEP)).")
        ] = "error",
        chunk_rows: ChunkRowsOption = None,
        engine: EngineOption = Engine.local,
        scheduler: SchedulerOption = None,
        master: MasterOption = None,
        drop: DropOption = None,
        keep: KeepOption = None,
        seed: SeedOption = None,
        json: JsonOption = False,
        user_column: UserColumnOption = None,
        budget: BudgetOption = None,
        ledger: LedgerOption = None,
        ledger_key: LedgerKeyOption = None,
        max_rows_per_user: MaxRowsOption = None,
        over_budget: OverBudgetOption = None,
        consistent: ConsistentOption = False,
    ) -> None:
        """Release a numeric column with an exact geometric / discrete Laplace mechanism on a grid.

        Each row is released independently at EPSILON per unit of the value; other
        columns are written with their TRUE values (named on stderr) unless --drop
        removes them. A person with k rows gets k x EPSILON: with --user-column the
        per-person eps is reported, and --budget, --ledger, --max-rows-per-user,
        --over-budget and --consistent account, cap and reuse releases per person.
        """
        acct = AccountingOptions(user_column, budget, ledger, ledger_key, max_rows_per_user, over_budget, consistent)
        acct.check()
        from ..pipeline.numbers import check_choices
        from ..streaming.numbers import privatize_numbers_file

        epsilon = _epsilon(epsilon_text)
        lo, hi = parse_range(value_range)
        grid = _grid(lo, hi, step)
        with flagged(flags=_FLAGS):
            check_choices(out_of_range, off_grid)
            try:
                mech = number_mechanism(grid, epsilon, mechanism)
            except ValidationError as ex:
                raise ValidationError(f"--mechanism {mechanism} --epsilon {epsilon:g}: {ex}") from None
        check_output(out, inputs=(input_file, *acct.files()))  # never the ledger, its journals or its key
        if not input_file.is_file():
            raise ValidationError(f"{input_file}: no such file")
        check_formats(input_file, out)
        check_engine(engine, scheduler, master, chunk_rows)
        t0 = time.perf_counter()
        scope = "numbers:" + hashlib.sha256(repr((mechanism, repr(epsilon), str(grid.lo), str(grid.hi),
                                                 str(grid.step), out_of_range, off_grid)).encode()).hexdigest()[:32]
        with flagged(flags=_FLAGS), acct.open() as book, warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # said once below, as a warning line
            accounting = None if not acct.active else acct.accounting(
                ledger=book, scope=scope, mechanism=f"privatize-numbers {mechanism} eps={epsilon:g} per unit")
            stats = privatize_numbers_file(
                mech, input_file, column, out, rng=seed, out_of_range=out_of_range,  # type: ignore[arg-type]
                off_grid=off_grid, chunk_rows=chunk_rows, keep=keep or (), drop=drop or (),  # type: ignore[arg-type]
                progress=ProgressReporter(f"privatize-numbers {input_file.name}"), accounting=accounting,
                inputs=acct.files(), engine=engine, scheduler=scheduler, master=master)
        rows, plan, report = stats.rows, stats.columns, stats.accounting
        dt = time.perf_counter() - t0
        leaves_report(plan, seed, engine)
        guarantee = "epsilon * |x - x'|" + (" + epsilon * step" if off_grid == "round" else "")
        summary: dict[str, Any] = {
            "out": str(out), "rows": rows, "column": column, "mechanism": mechanism, "epsilon": epsilon,
            "range": [str(grid.lo), str(grid.hi)], "step": str(grid.step), "grid_points": grid.n,
            "outputs": [mech.output_labels[0], mech.output_labels[-1]], "log_ratio": mech.log_ratio,
            "out_of_range": out_of_range, "off_grid": off_grid, "guarantee": guarantee,
            "seconds": dt, "seeded": seed is not None, "columns": plan.as_dict(), "engine": engine.value,
        }
        if report is not None:
            summary["accounting"] = {**report_json(report, acct, epsilon), "epsilon_unit": "per unit"}
            if off_grid == "round":  # rounding onto the grid adds eps * step per release, composed like eps
                per = epsilon * float(grid.step)
                summary["accounting"].update(additive_per_release=per, additive_per_person_max=per * round(
                    report.run.max / epsilon))
        if json:
            echo_json(summary)
            return
        console.print(
            f"wrote {out}: {rows} values of {column!r} released by {mechanism} on {grid.lo}..{grid.hi} step "
            f"{grid.step} at epsilon={epsilon:g} per unit "
            f"(releases in {mech.output_labels[0]}..{mech.output_labels[-1]})"
            f"{'' if seed is None else ' [seeded]'}; {engine.value} engine, {dt:.1f} s, "
            f"{rows / dt if dt > 0 else 0:,.0f} rows/s",
            markup=False,
            highlight=False,
        )
        if report is not None:
            print_report(report, acct, epsilon)
