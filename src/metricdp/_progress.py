"""The one progress-callback signature of metricdp, and the one reporter that renders it.

Long library work (LP builds, calibration, experiments, streaming, the engines) reports
through an optional ``progress`` keyword of type :data:`Progress`: ``progress(done, total,
message)`` with ``done`` the units finished so far, ``total`` the number expected (``None``
when unknown, e.g. constraint-generation rounds) and ``message`` one human-readable line
("round 7: 1,204 rows, objective 2.6035"). Library functions never print.

:class:`ProgressReporter` is a :data:`Progress` that writes one line per tick to a stream
(stderr by default): what was done, the rate, and the time left when the total is known::

    privatize cities.csv: 1,200,000 of 5,000,000 rows (24%), 410,000 rows/s, 9 s left

Rules, in one place for every engine and command:

* **a terminal only**: on a stream that is not a TTY (a pipe, a log file, CI) it writes
  nothing, so machine output (``--json``, a file on stdout) and logs never carry it;
* **at most one line per interval** (2 s by default): a call within ``interval`` of the last
  line is recorded (the rate and ETA use it) but not shown; the first line comes one
  interval after the start, so work that ends sooner prints nothing. A caller that ticks
  rarely still gets a line at each tick once the interval has passed;
* **rate** = ``done / elapsed`` since the pass started; **ETA** = ``(total - done) /
  rate``: with the rate constant, the work ends when the missing units are done at that rate.
  It is shown only when ``total`` is known and ``done > 0``. A ``done`` below the last one
  starts a new pass (a release after its first pass over the file): the clock of the
  rate restarts there.

A ``sink`` (the command line's transient rich bar, :func:`metricdp.cli._common.progress`)
receives every tick as ``(done, total, line)`` instead of the stream: a bar redraws in
place, so the interval bounds only lines that scroll; the terminal rule is the same. The
command line's ``progress()`` is this reporter with such a sink on a terminal and the
reporter alone (silent) elsewhere: one renderer for every engine, command and long step.

The clock and the stream are parameters, so tests drive it deterministically.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

__all__ = ["Progress", "ProgressReporter", "Sink", "eta_seconds", "report"]

#: ``progress(done, total, message)``; see the module docstring.
Progress = Callable[[int, "int | None", str], None]
#: ``sink(done, total, line)``: where a :class:`ProgressReporter` renders instead of its stream.
Sink = Callable[[int, "int | None", str], None]

#: Seconds between two lines of a :class:`ProgressReporter` (and before its first).
INTERVAL = 2.0


def report(progress: Progress | None, done: int, total: int | None, message: str) -> None:
    """Call ``progress`` if one was given (a no-op otherwise)."""
    if progress is not None:
        progress(done, total, message)


def eta_seconds(done: float, total: float | None, elapsed: float) -> float | None:
    """Seconds left at the mean rate so far: ``(total - done) * elapsed / done``; None when unknown.

    Unknown: no total, nothing done yet, or no time elapsed. Never negative (``done``
    past ``total``, an estimated total, gives 0).

    >>> eta_seconds(25, 100, 10.0)
    30.0
    >>> eta_seconds(0, 100, 10.0) is None, eta_seconds(5, None, 1.0) is None
    (True, True)
    """
    if total is None or done <= 0 or elapsed <= 0:
        return None
    return max(0.0, (total - done) * elapsed / done)


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class ProgressReporter:
    """A :data:`Progress` that shows rows (or tokens) done, rate and ETA on a terminal.

    Parameters
    ----------
    label : str
        What runs ("privatize cities.csv"); each line starts with it.
    unit : str
        The unit of ``done`` ("rows", "tokens").
    stream : text stream, optional
        Where lines go; default ``sys.stderr`` (looked up at each line). Nothing is written
        unless ``stream.isatty()``.
    clock : callable, optional
        Seconds, monotonic (default :func:`time.monotonic`).
    interval : float
        The least time between two lines, and before the first.
    sink : callable, optional
        ``sink(done, total, line)`` receives every tick's line instead of the stream (a bar
        redrawn in place); still nothing unless the stream is a terminal.

    Calling it as ``reporter(done, total, message)`` records the tick and writes at most one
    line; ``message`` (when not empty) follows the counts in parentheses.
    ``reporter.update(message)`` changes only the message (a new step of the same work).
    """

    def __init__(self, label: str, unit: str = "rows", *, stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic, interval: float = INTERVAL,
                 sink: Sink | None = None) -> None:
        self.label = label
        self.unit = unit
        self._stream = stream
        self._clock = clock
        self.interval = float(interval)
        self.sink = sink
        self.start = clock()
        self._last = self.start
        self._done = 0
        self._total: int | None = None
        self.lines = 0

    @property
    def stream(self) -> IO[str]:
        return sys.stderr if self._stream is None else self._stream

    def is_live(self) -> bool:
        """True when the stream is a terminal (lines are written)."""
        isatty = getattr(self.stream, "isatty", None)
        try:
            return bool(isatty and isatty())
        except (ValueError, OSError):  # a closed stream
            return False

    def line(self, done: int, total: int | None, message: str = "", now: float | None = None) -> str:
        """The line a tick at ``now`` would show (see the module docstring)."""
        elapsed = (self._clock() if now is None else now) - self.start
        if not done and not total:  # nothing counted yet: what runs, and its message
            return f"{self.label} ({message})" if message else self.label
        counts = f"{done:,} of {total:,} {self.unit}" if total else f"{done:,} {self.unit}"
        if total:
            counts += f" ({min(100.0, 100.0 * done / total):.0f}%)"
        parts = [counts]
        if elapsed > 0:
            parts.append(f"{done / elapsed:,.0f} {self.unit}/s")
        left = eta_seconds(done, total, elapsed)
        if left is not None:
            parts.append(f"{_duration(left)} left")
        text = f"{self.label}: {', '.join(parts)}"
        return f"{text} ({message})" if message else text

    def update(self, message: str) -> None:
        """A new message for the same counts (a new step: "saving out.npz")."""
        self(self._done, self._total, message)

    def __call__(self, done: int, total: int | None, message: str = "") -> None:
        now = self._clock()
        if done < self._done:  # a new pass
            self.start = now
        self._done, self._total = done, total
        if self.sink is not None:  # a bar redrawn in place: every tick
            if self.is_live():
                self.sink(done, total, self.line(done, total, message, now))
            return
        if now - self._last < self.interval or not self.is_live():
            return
        self._last = now
        self.lines += 1
        stream = self.stream
        try:
            stream.write(self.line(done, total, message, now) + "\n")
            stream.flush()
        except (BrokenPipeError, ValueError):  # a closed terminal: progress is never worth a failure
            pass
