"""The ``metricdp`` command line (Typer).

One module per command; each exposes ``register(app)``. Commands stay thin: parse the
arguments, call the library, render the result (a rich table for people, ``--json`` for
machines). Errors are one ``error: ...`` line on stderr with a non-zero exit code (see
:mod:`metricdp.cli._common`); ``metricdp --debug ...`` shows the full traceback instead.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .._version import __version__
from . import (
    bench,
    build,
    calibrate,
    data,
    estimate,
    evaluate,
    example,
    experiment,
    grid,
    ledger,
    paper_experiments,
    privatize,
    privatize_numbers,
    privatize_points,
    report,
    text,
)
from ._common import set_debug

__all__ = ["app", "main"]

app = typer.Typer(
    name="metricdp",
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
    set_debug(debug)


for _module in (example, build, evaluate, report, privatize, privatize_points, privatize_numbers, text, estimate,
                calibrate, data, bench, experiment, ledger, grid):
    _module.register(app)
paper_experiments.register(experiment.experiment_app)


def main() -> None:
    """Entry point of the ``metricdp`` script."""
    app()
