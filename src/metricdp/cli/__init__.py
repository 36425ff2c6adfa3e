"""The ``metricdp`` command line (Typer).

One module per command; each exposes ``register(app)``. Commands stay thin: parse the
arguments, call the library, render the result (a rich table for people, ``--json`` for
machines). Errors are one ``error: ...`` line on stderr with a non-zero exit code (see
:mod:`metricdp.cli._common`); ``metricdp --debug ...`` shows the full traceback instead.

A command's module is imported only when that command is named (:class:`_LazyGroup`):
``metricdp --help`` imports no command module, ``metricdp ledger show`` only the ledger's, so
that the command starts without scipy, pyarrow or the mechanisms it does not use.

A closed output pipe (``metricdp ledger show ... | head -1``) ends the command quietly
with exit status 141, as a shell reports a process that SIGPIPE ended (:func:`main`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    from typer._click import Command, Context, HelpFormatter  # Typer's own click (vendored since 0.22)

from .._lazy import submodule_getattr
from .._version import __version__
from ._pipes import EXIT_CLOSED_PIPE, _is_devnull, closed_output, end_quietly

try:  # Typer's own click (vendored since 0.22), else click
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover - older Typer
    from click import exceptions as _click_errors  # type: ignore[no-redef]
#: click < 8.2 prints a bare group's help itself and has no such error
_NO_ARGS: Any = getattr(_click_errors, "NoArgsIsHelpError", ())

__all__ = ["EXIT_CLOSED_PIPE", "app", "closed_output", "end_quietly", "main"]


#: Every command, in the order ``metricdp --help`` lists them -> (its module, its one-line help).
#: The help is the command's own (``test_lazy_help_is_each_commands_own`` compares them), kept
#: here so that the listing needs no command module.
COMMANDS: dict[str, tuple[str, str]] = {
    "example": ("example", "Write a built-in POINTS file (a small metric space to try the other commands on), "
                           "or example check-ins."),
    "build": ("build", "Build a mechanism on a metric space, audit it, and save it as a mechanism file."),
    "evaluate": ("evaluate", "Verify a mechanism file and report its privacy (epsilon) and utility (losses)."),
    "evaluate-trace": ("evaluate_trace", "Attack released traces (averaging, Bayes adversary per place) and measure "
                                         "their utility."),
    "report": ("report", "Write one self-contained HTML page: audited epsilon, eps_tight vs delta, losses and a "
                         "picture."),
    "explore": ("explore", "Compare mechanism families across epsilons: losses, adversary error and "
                           "re-identification."),
    "privatize": ("privatize", "Replace each value of a column by a release of the mechanism."),
    "privatize-points": ("privatize_points", "Release latitude/longitude columns with planar Laplace "
                                             "(geo-indistinguishability)."),
    "privatize-trace": ("privatize_trace", "Release the fixes of traces per person: predictive, one release per "
                                           "place, or independent."),
    "privatize-numbers": ("privatize_numbers", "Release a numeric column with an exact geometric / discrete "
                                               "Laplace mechanism on a grid."),
    "estimate": ("estimate", "Estimate the distribution of the true values from released ones (CSV "
                             "label,probability)."),
    "calibrate": ("calibrate", "Choose eps from a target: the largest eps meeting a privacy target, the smallest "
                               "meeting a utility one."),
    "grid": ("grid", "Bin lat/lon rows to square cells of a public grid; write the cells, the labelled rows, a "
                     "DP prior."),
    "text": ("text", "Word-level mDP for texts over a large embedding vocabulary."),
    "data": ("data", "Real data as POINTS files: word vocabularies, populated-place cells, Geolife bins."),
    "bench": ("bench", "Benchmarks (not tests): LP formulations side by side."),
    "experiment": ("experiment", "Reproduce the papers' experiments (numbers as CSV, a PNG plot, a markdown "
                                 "summary)."),
    "ledger": ("ledger", "Inspect a privacy ledger: spent and remaining eps per person (hashed) and per run."),
}

_registered: dict[str, typer.Typer] = {}


def _typer_of(module_name: str) -> typer.Typer:
    """A Typer holding the commands ``module_name`` registers (imported and registered once per process)."""
    if module_name not in _registered:
        module = importlib.import_module(f"{__name__}.{module_name}")
        holder = typer.Typer()
        module.register(holder)
        if module_name == "experiment":
            from . import paper_experiments

            paper_experiments.register(module.experiment_app)
        _registered[module_name] = holder
    return _registered[module_name]


def load_command(name: str) -> Command:
    """The click command (or group) ``metricdp NAME``, built from its module."""
    group = typer.main.get_group(_typer_of(COMMANDS[name][0]))
    return group.commands[name]


class _Commands(MutableMapping[str, "Command"]):
    """The root group's commands: a listed command is built from its module on first lookup."""

    def __init__(self, eager: MutableMapping[str, Command]) -> None:
        self._loaded: dict[str, Command] = dict(eager)
        self.listing = False  # while True, an unloaded command is a stub carrying its help

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            if self.listing:
                return TyperCommand(name, short_help=COMMANDS[name][1])
            self._loaded[name] = load_command(name)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self._loaded if name not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(name not in COMMANDS for name in self._loaded)


class _LazyGroup(TyperGroup):
    """The root group: lists every command, imports a command's module when the command is looked up."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands(self.commands)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        commands = self.commands
        assert isinstance(commands, _Commands)
        commands.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            commands.listing = False


app = typer.Typer(
    name="metricdp",
    cls=_LazyGroup,
    help="Metric differential privacy on finite metric spaces: build, audit, evaluate and apply mechanisms.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold private data
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"metricdp {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show full tracebacks instead of one-line errors.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Metric differential privacy (mDP) on finite metric spaces."""
    from ._common import set_debug

    set_debug(debug)


def main() -> None:
    """Entry point of the ``metricdp`` script; a closed output pipe ends it quietly (:func:`end_quietly`).

    Inside a command, the CLI's consoles and :func:`metricdp.cli._common.handle_errors` end
    it so; elsewhere (``--help`` into ``head``) click or rich has already ended it quietly
    with status 1 (rich after pointing stdout at ``/dev/null``), made 141 here.
    """
    null_before = _is_devnull(1)
    try:
        code = app(standalone_mode=False)  # click's own errors come back here, said in one line below
        raise SystemExit(code if isinstance(code, int) and not isinstance(code, bool) else 0)
    except _NO_ARGS as ex:  # a bare group: its help, as click prints it
        ex.show()
        raise SystemExit(ex.exit_code) from None
    except _click_errors.UsageError as ex:
        raise SystemExit(_usage_line(ex)) from None
    except _click_errors.ClickException as ex:
        _err(f"error: {' '.join(ex.format_message().split())}")
        raise SystemExit(ex.exit_code) from None
    except typer.Abort:
        _err("error: aborted")
        raise SystemExit(1) from None
    except BrokenPipeError:
        if not closed_output():
            raise
        end_quietly()
    except SystemExit as ex:
        if ex.code == 1 and (closed_output() or (_is_devnull(1) and not null_before)):
            end_quietly()
        raise


def _usage_line(ex: Any) -> int:
    """A usage error (unknown option, missing option, bad value) as ONE line on stderr, like every
    other error of the command line, with where to look; its exit status (2)."""
    where = f" (see '{ex.ctx.command_path} --help')" if ex.ctx is not None else ""
    _err(f"error: {' '.join(ex.format_message().split())}{where}")
    return int(ex.exit_code)


def _err(line: str) -> None:
    """``line`` on stderr (quietly nothing when stderr is closed)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (BrokenPipeError, OSError):
        pass


__getattr__ = submodule_getattr(__name__, __path__)
