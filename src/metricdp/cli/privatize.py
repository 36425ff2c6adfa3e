"""``metricdp privatize MECH.npz INPUT --column COL --out OUTPUT [--engine local|dask|spark]``.

INPUT is a table in a format a release reads (CSV, Parquet, Arrow/Feather, JSON lines:
:mod:`metricdp.tabular.formats`); OUTPUT gets the same format. The local engine streams the file
in chunks with bounded memory (:func:`metricdp.streaming.privatize_file`): every byte of
a CSV outside the released column is kept. ``--engine dask`` / ``--engine spark`` run
the release on a cluster (:mod:`metricdp.integrations`), a local one unless
``--scheduler`` / ``--master`` names an existing one. Progress (rows, rows/s, the time
left when the total is known; the engines tell it as partitions complete) goes to stderr
at most every 2 s in a terminal, never in a pipe (:class:`metricdp._progress.ProgressReporter`).

What leaves: every column other than ``--column`` is written with its TRUE values unless
``--drop COL`` removes it; the command names those columns on stderr (a warning for
each one not named by ``--keep COL``) and in ``--json`` (:mod:`metricdp.tabular.columns`).
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from .._progress import ProgressReporter
from ..errors import MetricDPError, PrivacyLeakWarning, ValidationError
from ..mechanisms.file import load_mechanism
from ..pipeline.engine import Engine
from ..pipeline.engine import check_engine as library_check_engine
from ..tabular.columns import ColumnPlan, plan_columns
from ..units import epsilon_forms, space_unit
from ._accounting import (
    AccountingOptions,
    BudgetOption,
    ConsistentOption,
    LedgerKeyOption,
    LedgerOption,
    MaxRowsOption,
    OverBudgetOption,
    UserColumnOption,
    mechanism_scope,
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
    err_console,
    handle_errors,
    warn,
)

__all__ = ["FLAGS", "ChunkRowsOption", "DropOption", "Engine", "EngineOption", "KeepOption", "MasterOption",
           "SchedulerOption", "check_engine", "check_formats", "flagged", "leaves_report", "register", "with_flags"]

DropOption = Annotated[
    list[str] | None,
    typer.Option("--drop", metavar="COL", help="Leave this column out of the output (repeatable)."),
]
KeepOption = Annotated[
    list[str] | None,
    typer.Option("--keep", metavar="COL", help="Write this column unreleased, on purpose (repeatable; "
                 "silences its warning)."),
]

EngineOption = Annotated[
    Engine, typer.Option("--engine", case_sensitive=False, help="local (streaming), dask or spark.")
]
SchedulerOption = Annotated[
    str | None, typer.Option("--scheduler", help="Dask scheduler address (default: a local cluster).")
]
MasterOption = Annotated[str | None, typer.Option("--master", help="Spark master URL (default: local[*]).")]
ChunkRowsOption = Annotated[int | None, typer.Option("--chunk-rows", min=1, help="Rows per chunk (local engine).")]


def leaves_report(plan: ColumnPlan, seed: int | None = None, engine: Engine = Engine.local) -> None:
    """Name on stderr every column written with its true values (a warning for those nobody named), after
    the warning a ``--seed`` carries (said after the run: an input error is the one line of a failed command)."""
    if seed is not None:
        warn("--seed makes the releases reproducible by anyone who knows the seed: not private for real data"
             + ("" if engine is Engine.local else " (one SeedSequence child per partition)"))
    if plan.unacknowledged:
        names = ", ".join(repr(c) for c in plan.unacknowledged)
        warn(f"column(s) {names} are written UNRELEASED, with their true values: --drop COL to leave one out, "
             f"--keep COL to keep it on purpose")
    if plan.kept:
        err_console.print(f"kept unreleased (--keep): {', '.join(repr(c) for c in plan.kept)}",
                          markup=False, highlight=False)
    if plan.dropped:
        err_console.print(f"dropped (--drop): {', '.join(repr(c) for c in plan.dropped)}",
                          markup=False, highlight=False)


#: Library parameters -> the flags of the release commands that set them (each command adds its own).
FLAGS = {"scheduler": "--scheduler", "master": "--master", "chunk_rows": "--chunk-rows"}


def with_flags(message: str, flags: Mapping[str, str] = FLAGS) -> str:
    """A library error with the CLI's flag names (the library names none): ``flags``', the engine's and
    the column plan's."""
    for name, flag in flags.items():
        message = message.replace(f"the parameter {name!r}", flag)
    message = re.sub(r"(engine|sampler)='(\w+)'", r"--\1 \2", message)
    return (message.replace("to be kept;", "to be kept (--keep);").replace("to be dropped;", "to be dropped (--drop);")
            .replace("name it among the columns to keep or to drop", "--keep or --drop it by name")
            .replace("drop it, or keep it on purpose by naming it among the columns to keep",
                     "--drop it, or --keep it on purpose")
            .replace("drop each one, or keep it on purpose", "--drop each one, or --keep it"))


@contextmanager
def flagged(where: Path | None = None, flags: Mapping[str, str] = FLAGS) -> Iterator[None]:
    """A library error in the command line's terms (:func:`with_flags`), starting with ``where`` if given."""
    try:
        yield
    except MetricDPError as ex:
        msg = with_flags(str(ex), flags)
        ex.args = (msg if where is None or msg.startswith(str(where)) else f"{where}: {msg}", *ex.args[1:])
        raise


def check_engine(engine: Engine, scheduler: str | None, master: str | None, chunk_rows: int | None,
                 local_only: Sequence[tuple[bool, str]] = (), flags: Mapping[str, str] = FLAGS) -> None:
    """The library's engine rule (:func:`metricdp.pipeline.engine.check_engine`) before anything is read or
    started, in the command line's terms."""
    with flagged(flags=flags):
        library_check_engine(engine, scheduler, master, chunk_rows, local_only)


def check_formats(input_file: Path, out: Path, *, what: str | None = None) -> str:
    """The format name of INPUT, a format a release reads; ``--out`` names a format a release writes, and the
    one the library writes for INPUT (:func:`metricdp.tabular.formats.output_format`). ``what`` starts INPUT's
    error."""
    from ..tabular.formats import output_format, release_format

    fmt = release_format(input_file, what=what)
    release_format(out, write=True, what=f"--out {out}:")
    try:
        output_format(fmt, out)
    except ValidationError:
        raise ValidationError(f"--out {out}: write the same format as INPUT ({fmt.name})") from None
    return fmt.name


def register(app: typer.Typer) -> None:
    """Add the ``privatize`` command to ``app``."""

    @app.command("privatize")
    @handle_errors
    def privatize(
        mechanism_file: Annotated[Path, typer.Argument(metavar="MECH.npz", help="A mechanism file.")],
        input_file: Annotated[
            Path, typer.Argument(metavar="INPUT", help="CSV (with a header row), Parquet, Arrow/Feather or JSON "
                                 "lines file.")
        ],
        column: Annotated[str, typer.Option("--column", "-c", help="Column whose values are released.")],
        out: OutOption,
        engine: EngineOption = Engine.local,
        scheduler: SchedulerOption = None,
        master: MasterOption = None,
        chunk_rows: ChunkRowsOption = None,
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
        """Replace each value of a column by a release of the mechanism.

        Other columns are written with their TRUE values (each one named on stderr)
        unless --drop removes them; --keep COL keeps one on purpose. With --user-column,
        the per-person eps is reported and --budget, --ledger, --max-rows-per-user,
        --over-budget and --consistent account, cap and reuse releases per person.
        """
        acct = AccountingOptions(user_column, budget, ledger, ledger_key, max_rows_per_user, over_budget, consistent)
        acct.check()
        from ..streaming.files import privatize_file
        from ..tabular.header import table_header

        check_output(out, inputs=(mechanism_file, input_file, *acct.files()))  # never the ledger or its key
        if not input_file.is_file():
            raise ValidationError(f"{input_file}: no such file")
        check_formats(input_file, out)
        kept, dropped = list(keep or ()), list(drop or ())
        with flagged():
            plan_columns(table_header(input_file, [column]), [column], keep=kept, drop=dropped, where=str(input_file))
        check_engine(engine, scheduler, master, chunk_rows)  # before the mechanism is loaded and audited
        mech = load_mechanism(mechanism_file)
        acct = acct.for_unit(space_unit(mech.space, mech.metadata))  # a --budget per length in the space's unit
        if mech.space.policy:  # docs/proofs/policy_graphs.md: cross-component pairs get no guarantee
            warn(f"{mechanism_file} is built on a policy graph of {mech.space.n_components} components: each "
                 "release reveals the component of its true value (only pairs within a component are protected)")
        t0 = time.perf_counter()
        with flagged(), acct.open() as book, warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # said once below, as a warning line
            accounting = None if not acct.active else acct.accounting(
                ledger=book, scope=mechanism_scope("privatize", mechanism_file),
                mechanism=f"privatize {mech.name} eps={mech.epsilon:g} {mechanism_file.name}")
            stats = privatize_file(  # never the output: the mechanism, the ledger, its journals, its key
                mech, input_file, column, out, rng=seed, chunk_rows=chunk_rows, inputs=[mechanism_file, *acct.files()],
                progress=ProgressReporter(f"privatize {input_file.name}"), keep=kept, drop=dropped,
                accounting=accounting, engine=engine, scheduler=scheduler, master=master)
        rows, plan, report = stats.rows, stats.columns, stats.accounting
        dt = time.perf_counter() - t0
        leaves_report(plan, seed, engine)
        if json:
            echo_json({
                "out": str(out), "rows": rows, "column": column, "mechanism": mech.name, "epsilon": mech.epsilon,
                "epsilon_forms": epsilon_forms(mech.epsilon, space_unit(mech.space, mech.metadata)),
                "engine": engine.value, "seconds": dt, "seeded": seed is not None, "columns": plan.as_dict(),
                **({} if report is None else {"accounting": report_json(report, acct, mech.epsilon)}),
            })
            return
        console.print(
            f"wrote {out}: {rows} values of {column!r} released by {mech.name} "
            f"(epsilon={mech.epsilon:.6g}){'' if seed is None else ' [seeded]'}; "
            f"{engine.value} engine, {dt:.1f} s, {rows / dt if dt > 0 else 0:,.0f} rows/s",
            markup=False,
            highlight=False,
        )
        if report is not None:
            print_report(report, acct, mech.epsilon, distance=space_unit(mech.space, mech.metadata) or None)
