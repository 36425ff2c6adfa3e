"""A closed output pipe: how the command line tells it apart and ends quietly.

``metricdp ledger show ... | head -1`` closes the pipe once ``head`` has its line; the
command then ends with no message and exit status 141, as a shell reports a process that
SIGPIPE ended. Used by :func:`metricdp.cli.main` and :func:`metricdp.cli._common.handle_errors`.
"""

from __future__ import annotations

import os
import select
import signal
import sys

__all__ = ["EXIT_CLOSED_PIPE", "closed_output", "end_quietly"]

#: The exit status of a command whose reader went away: 128 + SIGPIPE, what a shell reports for a
#: process SIGPIPE killed (``head`` in ``cmd | head`` closes the pipe once it has its lines).
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE


def closed_output() -> bool:
    """True when stdout's or stderr's reader has gone (a pipe whose read end is closed).

    ``poll`` reports ``POLLERR`` on the write end of such a pipe; a terminal, a file or a
    pipe still read reports none. A :class:`BrokenPipeError` from anything else (a socket
    to a Dask scheduler, a Spark gateway or a PostgreSQL ledger) is then an error like any
    other, not a quiet end.
    """
    if not hasattr(select, "poll"):  # Windows: no poll; a broken pipe there stays an error line
        return False
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            fd = stream.fileno() if stream is not None else -1
        except (OSError, ValueError):
            continue
        if fd < 0:
            continue
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(events & select.POLLERR for _, events in poller.poll(0)):
            return True
    return False


def end_quietly() -> None:
    """End the process quietly after its output pipe closed: exit status :data:`EXIT_CLOSED_PIPE`.

    stdout and stderr are pointed at ``/dev/null`` first (the pattern of Python's
    documentation of SIGPIPE), so that the interpreter's last flush of what is still
    buffered fails no more and prints no ``Exception ignored ... BrokenPipeError``.

    Why not restore SIGPIPE's default action at start, which ends the process at once with
    the same status: that kills it wherever it writes, to any pipe or socket -- a Dask
    scheduler, a Spark gateway, a PostgreSQL ledger connection that drops would end the
    command with no error message, and no ``finally`` would run: the temporary output file,
    the engines' scratch directory and a ledger reservation's abort would be left to the
    next run's clean-up. Python's documentation warns against it for this reason. Catching
    the error lets every clean-up run first and still ends with the Unix convention.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):  # a stream without a descriptor (a test's capture)
            pass
    os.close(devnull)
    raise SystemExit(EXIT_CLOSED_PIPE)


def _is_devnull(fd: int) -> bool:
    """Whether descriptor ``fd`` is ``/dev/null``."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(os.devnull))
    except OSError:
        return False
