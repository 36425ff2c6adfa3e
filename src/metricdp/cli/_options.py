"""Command-line options generated from the registry's declared parameters.

A command that takes the parameters of mechanism families (``build``, ``text privatize``,
``text stats``) is written with its fixed options and ``**family_options``;
:func:`with_options` gives it one keyword-only Typer option per declared flag (flag,
aliases, type, default, help) through the command's ``__signature__``, which Typer reads.
Adding a family or a parameter to :mod:`metricdp.mechanisms.registry` adds its option.

Ranges are checked by the registry, not by the option's type: one error line in the
registry's message template, naming the flag (``--samples must be finite and >= 2 ...``);
``--help`` states the range and the library's default in words. An option left out is not
passed on, so the library's default applies (the CLI default is the library's).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import MetricDPError
from ..mechanisms import registry

__all__ = ["naming_flags", "option_parameter", "shown", "with_options"]


def option_parameter(option: registry.Option) -> inspect.Parameter:
    """The Typer parameter of one declared family option: flag, type, default and help from the registry.

    The range is the registry's to check (one error line in its message template, with the
    flag), so the command line takes any number and ``--help`` states the range in words.
    """
    p = option.param
    notes = [p.describe()] if p.kind in ("int", "float", "floats") else []
    if p.default is not None and p.kind not in ("bool", "rng"):
        notes.append(f"default {shown(p.default)}")
    text = f"{', '.join(option.families)}: {p.help}{' (' + '; '.join(notes) + ')' if notes else ''}."
    info: dict[str, Any] = {"help": text, "rich_help_panel": "Mechanism parameters", "show_default": False}
    annotation: Any
    if p.kind == "bool":
        annotation, value = bool, False
    elif p.kind == "int":
        annotation, value = int | None, None
    elif p.kind == "float":
        annotation, value = float | None, None
    elif p.kind == "choice":
        choices: Any = StrEnum(option.keyword.title(), {c: c for c in p.choices})  # type: ignore[misc]
        annotation, value = choices | None, None
    elif p.kind == "vector":
        annotation, value = Path | None, None
        info["metavar"] = "FILE"
    elif p.kind == "floats":
        annotation, value = str | None, None
        info["metavar"] = "X,Y,..."
    elif p.kind == "rng":  # a seed
        annotation, value = int | None, None
        info["min"] = 0
    else:  # pragma: no cover - matrices have no flag
        raise RuntimeError(f"{p.flag}: a {p.kind} parameter has no command-line form")
    return inspect.Parameter(
        option.keyword, inspect.Parameter.KEYWORD_ONLY, default=value,
        annotation=Annotated[annotation, typer.Option(p.flag, *p.aliases, **info)],
    )


def shown(value: object) -> str:
    """A default as ``--help`` writes it (``0.001,0.1,1`` for a tuple)."""
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def with_options(
    command: Callable[..., Any], function: Callable[..., Any], options: Mapping[str, registry.Option],
    annotations: Mapping[str, Any] | None = None,
) -> Callable[..., Any]:
    """``command`` (``function`` wrapped) with the signature of ``function`` plus one option per entry of ``options``.

    ``function`` ends with ``**kwargs``, which receives the generated options by keyword;
    ``annotations`` replaces the annotations of fixed parameters (choices read at registration).
    """
    fixed = [p.replace(annotation=(annotations or {}).get(p.name, p.annotation))
             for p in inspect.signature(function, eval_str=True).parameters.values()
             if p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*fixed, *(option_parameter(o) for o in options.values())]
    )
    return command


@contextlib.contextmanager
def naming_flags(flags: Mapping[str, str], prefix: str | None = None) -> Iterator[None]:
    """Put a library error in the command line's terms: the flag the user typed, not the parameter.

    Library messages name Python parameters (``the parameter 'column'``, ``parameter
    'metric'``) and never CLI flags; inside this block an error's message has each
    parameter of ``flags`` replaced by its flag, and ``prefix`` (the option whose value
    the message is about, e.g. ``--outputs``) put in front. The error keeps its type.
    """
    try:
        yield
    except MetricDPError as ex:
        message = str(ex)
        for name, flag in flags.items():
            message = message.replace(f"the parameter {name!r}", flag).replace(f"parameter {name!r}", flag)
        if prefix:
            message = f"{prefix} {message}"
        ex.args = (message, *ex.args[1:])
        raise
