"""The CLI and the package import lazily: a command loads only its own module; the listing is the commands' own.

``metricdp --help`` and ``metricdp ledger show`` run in a fresh interpreter and must not import
scipy (the mechanisms' algebra) or pyarrow; ``import metricdp`` imports neither numpy nor scipy,
yet every public name of ``metricdp.__all__`` is the object its module defines.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperGroup

import metricdp
from metricdp.cli import COMMANDS, app, load_command

SRC = Path(metricdp.__file__).parent.parent
HEAVY = ("scipy", "pyarrow", "pandas", "matplotlib", "numba", "metricdp.mechanisms", "metricdp.spaces")


def _imported_by(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter has imported after running ``code``."""
    script = f"""
import sys
{code}
print("HEAVY:" + ",".join(m for m in {HEAVY!r} if m in sys.modules))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)})
    assert result.returncode == 0, result.stderr
    line = [x for x in result.stdout.splitlines() if x.startswith("HEAVY:")][-1]
    return [m for m in line.removeprefix("HEAVY:").split(",") if m]


def _cli(*args: str) -> str:
    return f"""
sys.argv = ["metricdp", *{list(args)!r}]
from metricdp.cli import main
try:
    main()
except SystemExit:
    pass
"""


def test_import_metricdp_is_light() -> None:
    assert _imported_by("import metricdp") == []


def test_help_imports_no_command_module(tmp_path: Path) -> None:
    assert _imported_by(_cli("--help")) == []


def test_ledger_show_needs_no_scipy(tmp_path: Path) -> None:
    from metricdp.accounting.ledger import Ledger

    Ledger(tmp_path / "l.db", budget=1.0).close()
    assert _imported_by(_cli("ledger", "show", str(tmp_path / "l.db"))) == []


def test_the_checker_sees_a_heavy_import() -> None:
    assert _imported_by("import scipy.linalg\nimport metricdp.spaces") == ["scipy", "metricdp.spaces"]


def test_lazy_help_is_each_commands_own() -> None:
    """The listing's one-line help (kept in COMMANDS) is the help of the command it names, for every command."""
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    ctx = typer.Context(root)
    assert root.list_commands(ctx) == list(COMMANDS)
    for name, (_module, short) in COMMANDS.items():
        command = root.get_command(ctx, name)
        assert command is not None and command.name == name
        assert command.get_short_help_str(1000) == short, name
        assert load_command(name).get_short_help_str(1000) == short, name


def test_every_command_module_is_listed() -> None:
    """A new command module with a ``register`` must be named in COMMANDS (else it would never load)."""
    import pkgutil

    import metricdp.cli as cli

    registering = set()
    for info in pkgutil.iter_modules(cli.__path__):
        module = importlib.import_module(f"metricdp.cli.{info.name}")
        if hasattr(module, "register"):
            registering.add(info.name)
    listed = {module for module, _ in COMMANDS.values()}
    assert registering - listed == {"paper_experiments"}  # registers into `experiment`, loaded with it


def test_unknown_command_is_still_refused() -> None:
    from tests.cli_helpers import run

    result = run("no-such-command")
    assert result.exit_code == 2
    assert "No such command" in result.output


@pytest.mark.parametrize("name", metricdp.__all__)
def test_every_public_name_is_its_modules_object(name: str) -> None:
    value = getattr(metricdp, name)
    namespace: dict[str, object] = {}
    exec(f"from metricdp import {name}", namespace)  # the statement users write
    assert namespace[name] is value
    assert name in dir(metricdp)
    module = getattr(value, "__module__", None)
    if module and module.startswith("metricdp.") and name != "__version__":
        assert getattr(importlib.import_module(module), name) is value


def test_a_missing_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        metricdp.no_such_name  # noqa: B018
