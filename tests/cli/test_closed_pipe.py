"""A reader that goes away (``metricdp ... | head``) ends any command quietly with status 141 (128 + SIGPIPE)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import metricdp
from metricdp.cli import EXIT_CLOSED_PIPE, closed_output
from metricdp.cli.example import example_text

MAIN = "from metricdp.cli import main; main()"
ENV = {**os.environ, "PYTHONPATH": str(Path(metricdp.__file__).parents[1])}


def closed_early(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    """Run ``metricdp ARGS`` with its stdout a pipe whose reader closed before the command wrote a byte."""
    proc = subprocess.Popen([sys.executable, "-c", MAIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=ENV)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=120), err


def test_exit_status_is_128_plus_sigpipe():
    assert EXIT_CLOSED_PIPE == 141


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("example", "--list")])
def test_a_closed_pipe_ends_quietly(args):
    assert closed_early(*args) == (EXIT_CLOSED_PIPE, "")


@pytest.mark.slow
def test_a_table_and_json_into_a_closed_pipe(tmp_path):
    (tmp_path / "caps.csv").write_text(example_text("europe-capitals"))
    subprocess.run([sys.executable, "-c", MAIN, "build", "caps.csv", "-m", "exponential", "-e", "0.01", "-o", "em.npz"],
                   cwd=tmp_path, env=ENV, check=True, capture_output=True, timeout=120)
    assert closed_early("evaluate", "em.npz", cwd=tmp_path) == (EXIT_CLOSED_PIPE, "")
    assert closed_early("evaluate", "em.npz", "--json", cwd=tmp_path) == (EXIT_CLOSED_PIPE, "")


def test_an_open_pipe_is_read_to_the_end():
    proc = subprocess.run([sys.executable, "-c", MAIN, "example", "--list"], capture_output=True, text=True,
                          env=ENV, timeout=120, check=False)
    assert proc.returncode == 0 and "europe-capitals" in proc.stdout


def test_closed_output_tells_a_closed_reader_from_an_open_one():
    """A BrokenPipeError from a socket must stay an error: only a closed stdout/stderr is a quiet end."""
    code = "import os; from metricdp.cli import closed_output; os.write(2, str(closed_output()).encode())"
    for close in (False, True):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        assert proc.stdout is not None and proc.stderr is not None
        if close:
            proc.stdout.close()
        told = proc.stderr.read().decode()
        proc.stderr.close()
        proc.wait(timeout=60)
        assert told == str(close)
        if not close:
            proc.stdout.close()
    assert closed_output() is False  # this process: pytest reads its output
