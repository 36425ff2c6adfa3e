"""What the CLI tests share: invoking the app, the one-line error contract, test apps."""

from __future__ import annotations

import re
from collections.abc import Callable

import typer
from typer.testing import CliRunner, Result

runner = CliRunner()


def run(*args: object) -> Result:
    """``metricdp ARGS...`` in-process (arguments turned into strings)."""
    from metricdp.cli import app

    return runner.invoke(app, [str(a) for a in args])


def usage_text(result: Result) -> str:
    """A usage error's stderr as one line of words: the panel's box characters dropped and its wrapping undone
    (the panel wraps at the terminal's width, so a long path can split a phrase across lines)."""
    return " ".join(re.sub(r"[\u2500-\u257f]", " ", result.stderr).split())


def assert_one_line_error(result: Result, *fragments: str, code: int = 2) -> None:
    """Non-zero exit, exactly one 'error: ...' line on stderr, no traceback, nothing on stdout."""
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def make_app(register: Callable[[typer.Typer], None], group: str | None = None) -> typer.Typer:
    """A root app with one module's commands registered (under ``group`` when given)."""
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    if group is None:
        register(app)
    else:
        sub = typer.Typer()
        register(sub)
        app.add_typer(sub, name=group)
    return app
