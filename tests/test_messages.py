"""Library error messages name Python parameters, never command-line flags (the CLI adds its flags).

A Python caller of ``read_points(path, metric=...)`` never typed ``--metric``; the CLI
translates a parameter into its flag (:func:`metricdp.cli._options.naming_flags`). The scan
reads every string literal inside a ``raise`` statement of the library (``metricdp.cli``
excluded), f-string parts included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import metricdp
from metricdp.cli._options import naming_flags
from metricdp.errors import ValidationError

SRC = Path(metricdp.__file__).parent
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def flags_in_raises(source: str) -> list[tuple[int, str]]:
    """(line, flag) for each ``--flag`` in a string literal of a raise statement."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for sub in ast.walk(node.exc):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    found += [(sub.lineno, m) for m in FLAG.findall(sub.value)]
    return found


def test_scan_sees_a_flag_in_an_f_string() -> None:
    src = 'def f(p):\n    raise ValueError(f"{p}: give --metric or "\n                     "--out-dir")\n'
    assert [flag for _, flag in flags_in_raises(src)] == ["--metric", "--out-dir"]
    assert flags_in_raises('raise ValueError("a --- b, x--y")') == []


def test_no_library_message_names_a_flag() -> None:
    found = [
        f"{path.relative_to(SRC.parent)}:{line}: {flag}"
        for path in sorted(SRC.rglob("*.py"))
        if "cli" not in path.relative_to(SRC).parts
        for line, flag in flags_in_raises(path.read_text(encoding="utf-8"))
    ]
    assert not found, "library messages naming CLI flags:\n" + "\n".join(found)


def test_the_cli_puts_its_flags_in() -> None:
    with pytest.raises(ValidationError) as info, naming_flags({"column": "--column"}, "--in"):
        raise ValidationError("x.txt: the parameter 'column' applies to .csv inputs")
    assert str(info.value) == "--in x.txt: --column applies to .csv inputs"
