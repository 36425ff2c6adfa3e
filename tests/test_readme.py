"""README's shell examples, checked statically: real commands, real options, extras marked.

Every ``metricdp ...`` in a ```sh block must name an existing command and only options
that command has; a command that needs an extra (see :data:`metricdp._optional.EXTRAS`)
must say so on its line, as ``[extra,...]`` in the trailing comment or through a
``pip install 'metricdp[extra]'`` before it. :func:`needed_extras` restates, from the
command line alone, the up-front checks the commands make; ``tests/cli/test_extras.py``
checks the commands themselves. ``.ci/readme-examples`` runs the examples for real.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from metricdp._optional import EXTRAS
from metricdp.cli import app

README = Path(__file__).parents[1] / "README.md"


def sh_lines() -> list[str]:
    """Every line of README's ```sh blocks (continuation lines joined)."""
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S):
        lines.extend(block.replace("\\\n", " ").splitlines())
    return lines


def invocations(line: str) -> list[tuple[list[str], str]]:
    """``(metricdp arguments, the line's comment)`` for each ``metricdp`` command of a line."""
    code, _, comment = line.partition("  #")
    if code.lstrip().startswith("#"):
        return []
    out = []
    for part in re.split(r"&&|;|\|", code):
        words = shlex.split(part.strip()) if part.strip() else []
        if words and words[0] == "metricdp":
            out.append((words[1:], comment))
    return out


def marked_extras(line: str) -> set[str]:
    """Extras a line names: ``metricdp[a,b]`` (pip) or ``[a,b]`` in its comment."""
    names: set[str] = set()
    for group in re.findall(r"\[([a-z0-9,\- ]+)\]", line):
        names.update(x.strip() for x in group.split(","))
    return names & set(EXTRAS)


def _option(args: list[str], name: str, default: str | None = None) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def needed_extras(args: list[str]) -> set[str]:
    """The extras ``metricdp ARGS`` needs, by the rules its commands check up front."""
    need: set[str] = set()
    cmd = [a for a in args[:2] if not a.startswith("-")]
    if "--plot" in args or cmd[:1] == ["report"] or cmd[:1] == ["experiment"]:
        need.add("plot")
    datasets = {"text": "glove", "geo": "geo"}
    if cmd[:1] == ["experiment"] and "--cached-only" not in args:
        sub = cmd[1] if len(cmd) > 1 else ""
        default = {"utility": "text,geo", "scalability": "text,geo", "ablation": "text"}.get(sub, "")
        chosen = _option(args, "--datasets") or _option(args, "--dataset") or default
        need.update(datasets[d] for d in chosen.split(",") if d in datasets)
    if cmd[:1] == ["text"] and not (_option(args, "--mechanism") or _option(args, "-m") or "").endswith(".npz"):
        if _option(args, "--embeddings", "glove") == "glove":
            need.add("glove")
        if _option(args, "--index", "exact") in ("ivf", "hnsw"):
            need.add("faiss-cpu")
    if cmd == ["experiment", "ldp"] and _option(args, "--checkins") is None:
        need.add("geo")  # the stand-in check-ins come from GeoNames' populated places
    if cmd == ["data", "glove"]:
        need.add("glove")
    if cmd == ["data", "geo"]:
        need.add("geo")
    if cmd == ["bench", "lp"] and _option(args, "--data", "glove") in ("glove", "geo"):
        need.add(_option(args, "--data", "glove") or "glove")
    if cmd == ["bench", "text"]:
        need.add("glove")
    if cmd == ["bench", "privatize"]:
        need.update(e for e in (_option(args, "--engines") or "local,dask,spark").split(",") if e != "local")
    if cmd[:1] in (["privatize"], ["privatize-points"], ["privatize-numbers"]) and \
            _option(args, "--engine", "local") != "local":
        need.add(_option(args, "--engine") or "")
    return need


@functools.cache
def _root() -> Any:
    return typer.main.get_command(app)


def _resolve(args: list[str]) -> tuple[Any, list[str]]:
    """The (click) command ``args`` names and the arguments left for it."""
    command: Any = _root()
    rest = list(args)
    while getattr(command, "commands", None) is not None and rest and not rest[0].startswith("-"):
        sub = command.commands.get(rest[0])
        assert sub is not None, f"metricdp has no command {' '.join(args[: len(args) - len(rest) + 1])!r}"
        command, rest = sub, rest[1:]
    return command, rest


CASES = [(line, args) for line in sh_lines() for args, _ in invocations(line)]


def test_readme_has_examples():
    assert len(CASES) > 30
    assert any(a[:1] == ["report"] for _, a in CASES)


@pytest.mark.parametrize(("line", "args"), CASES, ids=[" ".join(a[:3]) for _, a in CASES])
def test_readme_command_is_real(line, args):
    if args in (["--help"], ["--version"]):
        return
    command, rest = _resolve(args)
    assert getattr(command, "commands", None) is None, f"{line!r}: names a group, not a command"
    options = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    for token in rest:
        if token.startswith("-") and not re.fullmatch(r"-\d.*", token):
            assert token.split("=")[0] in options, f"{line!r}: {' '.join(args[:2])} has no option {token}"


@pytest.mark.parametrize(("line", "args"), CASES, ids=[" ".join(a[:3]) for _, a in CASES])
def test_readme_marks_the_extras_a_command_needs(line, args):
    missing = needed_extras(args) - marked_extras(line)
    mark = ",".join(sorted(missing))
    assert not missing, f"README line {line.strip()!r} needs {sorted(missing)}: mark it '# [{mark}]'"


def test_needed_extras_rules():
    assert needed_extras(["report", "m.npz", "--out", "r.html"]) == {"plot"}
    assert needed_extras(["experiment", "scalability", "--out", "d"]) == {"plot", "glove", "geo"}
    assert needed_extras(["experiment", "utility", "--datasets", "gaussian", "--out", "d"]) == {"plot"}
    assert needed_extras(["experiment", "ldp", "--out", "d"]) == {"plot", "geo"}
    assert needed_extras(["experiment", "ldp", "--checkins", "c.csv", "--out", "d"]) == {"plot"}
    assert needed_extras(["privatize-points", "a.csv", "--engine", "spark", "--out", "o.csv"]) == {"spark"}
    assert needed_extras(["text", "privatize", "a.txt", "-m", "w.npz", "--out", "o"]) == set()
    assert needed_extras(["bench", "privatize", "--engines", "local"]) == set()
    assert needed_extras(["build", "p.csv", "-m", "exponential", "-e", "1", "--out", "m.npz"]) == set()
    assert marked_extras("pip install 'metricdp[dask]' && metricdp x   # [plot, glove]") == {"dask", "plot", "glove"}
