"""Helpers shared by every ``metricdp`` command: errors, progress, output, shared options.

Every command module uses this small API and nothing else of the CLI's internals:

* :data:`console` / :data:`err_console` -- rich consoles on stdout (results) and
  stderr (errors, warnings, progress). Both follow ``sys.stdout`` / ``sys.stderr`` at
  print time, so ``typer.testing.CliRunner`` captures them.
* :func:`handle_errors` -- decorator *and* context manager. A
  :class:`~metricdp.errors.MetricDPError` or an :class:`OSError` becomes ONE line
  ``error: ...`` on stderr and a non-zero exit (:data:`EXIT_PRIVACY` for an audit
  violation or a solver failure, :data:`EXIT_ERROR` otherwise), never a traceback; under
  the global ``--debug`` (or ``METRICDP_DEBUG=1``) the exception propagates with its full
  traceback instead.
* :func:`progress` -- :class:`metricdp._progress.ProgressReporter` as a transient rich
  bar on stderr for anything that may take more than a few seconds; silent when stderr
  is not a terminal.
* :func:`echo_json`, :func:`warn`, :func:`fmt` -- machine output (one JSON object,
  non-finite floats as the strings ``"inf"``/``"nan"`` because JSON has no such
  numbers), warnings, and number formatting for tables.
* :func:`read_label_values` -- a per-label vector (weights, priors) from a CSV
  ``label,value`` or a ``.npy`` file, ordered like a space's labels.
* :func:`check_output` -- fail *before* a long computation when ``--out`` cannot be
  written; the write itself goes through :func:`metricdp.io.atomic_write`.
* :data:`OutOption`, :data:`SeedOption`, :data:`JsonOption` -- shared ``Annotated``
  option types.

Example (a command module)::

    from ._common import handle_errors, progress, console

    def register(app: typer.Typer) -> None:
        @app.command()
        @handle_errors
        def hello(out: OutOption) -> None:
            with progress("working"):
                ...
            console.print("done")
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any, TypeVar, cast, overload

import numpy as np
import typer
from numpy.typing import NDArray
from rich.console import Console

from .._atomic import check_output_path
from .._jsonable import jsonable
from .._progress import ProgressReporter
from ..errors import MetricDPError, PrivacyViolationError, SolverError, UnsafeOutputError, ValidationError
from ..tabular.formats import format_of
from ..tabular.formats.csv import iter_csv_rows

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "EXIT_ERROR",
    "EXIT_PRIVACY",
    "JsonOption",
    "OutOption",
    "OverwriteOption",
    "SeedOption",
    "check_output",
    "console",
    "echo_json",
    "err_console",
    "error_message",
    "fmt",
    "handle_errors",
    "is_debug",
    "jsonable",
    "progress",
    "read_label_values",
    "set_debug",
    "warn",
]

#: Exit code of a user error (bad input, bad file, missing module). Typer's own usage
#: errors exit 2 as well.
EXIT_ERROR = 2
#: Exit code of an audit violation or a solver failure: the input was fine, the result
#: could not be certified.
EXIT_PRIVACY = 1

class _Console(Console):
    """rich's console, but a closed pipe ends the command as every other write to one does."""

    def on_broken_pipe(self) -> None:  # rich's own exits with status 1
        from ._pipes import end_quietly

        end_quietly()


#: Results (tables, summaries).
console = _Console(soft_wrap=True)
#: Errors, warnings and progress.
err_console = _Console(stderr=True, soft_wrap=True)

_state = {"debug": os.environ.get("METRICDP_DEBUG", "") not in ("", "0")}


def set_debug(value: bool) -> None:
    """Turn full tracebacks on or off (the global ``--debug`` flag)."""
    _state["debug"] = bool(value)


def is_debug() -> bool:
    """Whether ``--debug`` is on."""
    return _state["debug"]


# ---------------------------------------------------------------------------- errors
def error_message(exc: BaseException) -> str:
    """The one-line text of a user-facing error (newlines folded into spaces)."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


class _ErrorHandler(contextlib.AbstractContextManager):
    """The context manager behind :func:`handle_errors`."""

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or not isinstance(exc, MetricDPError | OSError) or is_debug():
            return None
        if isinstance(exc, BrokenPipeError):  # the reader of our output went away: no message, status 141
            from ._pipes import closed_output, end_quietly

            if closed_output():
                end_quietly()
        code = EXIT_PRIVACY if isinstance(exc, PrivacyViolationError | SolverError) else EXIT_ERROR
        err_console.print(f"error: {error_message(exc)}", style="red", markup=False, highlight=False)
        raise typer.Exit(code) from None


@overload
def handle_errors(func: F) -> F: ...
@overload
def handle_errors(func: None = None) -> contextlib.AbstractContextManager[Any]: ...
def handle_errors(func: F | None = None) -> F | contextlib.AbstractContextManager[Any]:
    """Render :class:`MetricDPError` / :class:`OSError` as one line and exit non-zero.

    Use as ``@handle_errors`` on a command function (*under* ``@app.command()``) or as
    ``with handle_errors():``. Exit code :data:`EXIT_PRIVACY` (1) for an audit violation
    or a solver failure, :data:`EXIT_ERROR` (2) otherwise. Any other exception is a bug
    and keeps its traceback; under ``--debug`` every exception does.
    """
    if func is None:
        return _ErrorHandler()

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _ErrorHandler():
            return func(*args, **kwargs)

    return cast(F, wrapper)


def warn(message: str) -> None:
    """One line ``warning: ...`` on stderr."""
    err_console.print(f"warning: {' '.join(message.split())}", style="yellow", markup=False, highlight=False)


# ---------------------------------------------------------------------------- progress
#: What :func:`progress` yields: the library's one reporter (:class:`metricdp._progress.ProgressReporter`).
Reporter = ProgressReporter


@contextlib.contextmanager
def progress(description: str, total: int | None = None, unit: str = "steps") -> Iterator[Reporter]:
    """Progress of long work on stderr while the block runs: the library's one reporter, rendered.

    ``reporter(done, total, message)`` is the library's :data:`~metricdp._progress.Progress`
    (LP rounds, calibration probes, experiment units; ``unit`` names what ``done``
    counts) and ``reporter.update(message)`` changes only the text. On a terminal: a
    transient rich bar whose text is the reporter's line (done, rate, time left, message),
    from the start of the block. Anywhere else (a pipe, a log, CI): nothing, so ``--json``
    and other machine output stay clean (:mod:`metricdp._progress` states the rules).
    """
    reporter = ProgressReporter(description, unit, stream=err_console.file)
    if not reporter.is_live():
        yield reporter
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(description, total=total)

        def show(done: int, tot: int | None, line: str) -> None:
            bar.update(task, description=line, completed=done, total=tot)

        reporter.sink = show
        yield reporter


# ---------------------------------------------------------------------------- output
def echo_json(obj: Any) -> None:
    """Print ``obj`` as one JSON object on stdout (strict JSON: no NaN/Infinity)."""
    typer.echo(json.dumps(jsonable(obj), allow_nan=False, sort_keys=False))


def fmt(value: Any, digits: int = 6) -> str:
    """A number for a table: ``digits`` significant digits; ``None`` -> ``n/a``."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return "inf" if math.isinf(value) else f"{float(value):.{digits}g}"
    return str(value)


# ---------------------------------------------------------------------------- files
def check_output(
    path: Path, option: str = "--out", inputs: Iterable[str | os.PathLike[str] | None] = (), *,
    replace: bool = True,
) -> Path:
    """Refuse an output path that cannot be written, before any long computation.

    ``inputs`` are every file the command reads (``None`` for an option not given) and
    every other file it writes: ``path`` may be none of them, by any name (a symlink, a
    hard link, ``..``). Devices, FIFOs, sockets and directories are refused too
    (:func:`metricdp.io.check_output_path`, the refusals :func:`metricdp.io.atomic_write`
    makes again when it writes). With ``replace=False`` (a command's ``--overwrite`` not
    given) an existing ``path`` is refused as well; the command then writes with
    ``atomic_write(..., replace=False)``.
    """
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ValidationError(f"{option} {path} is a directory, expected a file name")
    if not parent.is_dir():
        raise ValidationError(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValidationError(f"{option} {path}: directory {parent} is not writable")
    try:
        check_output_path(path, [p for p in inputs if p is not None and p is not path], replace=replace)
    except UnsafeOutputError as ex:
        hint = "; pass --overwrite to replace it" if not replace and os.path.lexists(path) else ""
        raise UnsafeOutputError(f"{option}: {ex}{hint}") from None
    return path


def read_label_values(path: Path, labels: Sequence[str], what: str) -> NDArray[np.float64]:
    """A vector of one number per label, ordered like ``labels``.

    ``path`` is a ``.npy`` vector (already in label order) or a CSV ``label,value``
    (an optional header row is skipped when its value is not a number). Every label
    must appear exactly once; the error names ``what`` (e.g. ``--weights``), the file,
    and the offending labels or line.
    """
    from ..io import NPY_HEADER_ERRORS, check_npy_header, parse_decimal  # here: io loads scipy (spaces)

    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{what} {p}: no such file")
    n = len(labels)
    if format_of(p, ("csv", "npy"), what=f"{what} {p}:") == "npy":
        try:
            with p.open("rb") as fh:
                check_npy_header(fh, f"{what} {p}")  # no pickle, no absurd declared size
                fh.seek(0)
                v = np.load(fh, allow_pickle=False)
        except NPY_HEADER_ERRORS as ex:
            raise ValidationError(f"{what} {p}: not a readable .npy vector ({ex})") from None
        if v.dtype == object or not np.issubdtype(v.dtype, np.number) or v.shape != (n,):
            raise ValidationError(
                f"{what} {p}: expected a numeric vector of shape ({n},), got {v.dtype} {v.shape}"
            )
        return v.astype(np.float64)
    index = {lab: i for i, lab in enumerate(labels)}
    out = np.full(n, np.nan)
    unknown: list[str] = []
    # the file layer's one CSV record definition (metricdp.tabular.csv); its first record is read as
    # a header, and is data when its value is a number (label,value files have an optional header)
    with _named(what), iter_csv_rows(p) as (header, stream):
        if len(header) != 2:
            raise ValidationError(f"{what} {p}: line 1 has {len(header)} fields, expected 2 (label,value)")
        first = [(1, list(header))] if _is_number(header[1]) else []
        for line_no, row in itertools.chain(first, stream):
            if len(row) != 2:
                raise ValidationError(
                    f"{what} {p}: line {line_no} has {len(row)} fields, expected 2 (label,value)"
                )
            label, raw = row[0], row[1]
            try:
                value = parse_decimal(raw)
            except ValueError:
                raise ValidationError(f"{what} {p}: line {line_no}: {raw!r} is not a number") from None
            if label not in index:
                unknown.append(label)
                continue
            i = index[label]
            if not np.isnan(out[i]):
                raise ValidationError(f"{what} {p}: label {label!r} appears twice (line {line_no})")
            out[i] = value
    if unknown:
        raise ValidationError(f"{what} {p}: {len(unknown)} label(s) not in the space: {_few(unknown)}")
    missing = [labels[int(i)] for i in np.flatnonzero(np.isnan(out))]
    if missing:
        raise ValidationError(f"{what} {p}: no value for {len(missing)} label(s): {_few(missing)}")
    return out


@contextlib.contextmanager
def _named(what: str) -> Iterator[None]:
    """Put ``what`` (the option, e.g. ``--prior``) in front of the file layer's errors that lack it."""
    try:
        yield
    except ValidationError as ex:
        if str(ex).startswith(what):
            raise
        raise ValidationError(f"{what} {ex}") from None


def _is_number(text: str) -> bool:
    from ..io import parse_decimal

    try:
        parse_decimal(text)
    except ValueError:
        return False
    return True


def _few(items: Sequence[str], k: int = 5) -> str:
    shown = ", ".join(repr(x) for x in items[:k])
    return shown + (f" and {len(items) - k} more" if len(items) > k else "")


# ---------------------------------------------------------------------------- options
OutOption = Annotated[
    Path, typer.Option("--out", "-o", help="Output file (written atomically).", dir_okay=False)
]
SeedOption = Annotated[
    int | None,
    typer.Option(
        "--seed", min=0, help="Seed: reproducible, NOT private for real data (default: the OS secure source)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]
OverwriteOption = Annotated[bool, typer.Option("--overwrite", help="Replace output files that exist (else refused).")]
