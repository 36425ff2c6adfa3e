"""The ``metricdp`` entry point (metricdp.cli.main): click's own usage errors are one line like every other error."""

from __future__ import annotations

import subprocess
import sys

import pytest

MAIN = "import sys; from metricdp.cli import main; sys.argv[0] = 'metricdp'; main()"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", MAIN, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("args", "says"), [
    (("privatize", "--bogus"), "No such option: --bogus"),
    (("privatize-numbers", "in.csv"), "Missing option '--column'"),
    (("build", "caps.csv", "-m", "exponential", "-e", "1", "-o", "m.npz", "--samples", "x"),
     "Invalid value for '--samples'"),
    (("no-such-command",), "No such command"),
])
def test_a_usage_error_is_one_line_with_status_2(args, says):
    proc = _run(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and says in lines[0]
    assert f"(see 'metricdp {args[0]} --help')" in lines[0] or args[0] == "no-such-command"


def test_help_version_and_a_bare_group_are_unchanged():
    assert _run("--version").stdout.startswith("metricdp ")
    assert _run("--version").returncode == 0
    bare = _run("ledger")
    assert bare.returncode == 2 and "show" in bare.stdout + bare.stderr
    helped = _run("privatize", "--help")
    assert helped.returncode == 0 and "--column" in helped.stdout
