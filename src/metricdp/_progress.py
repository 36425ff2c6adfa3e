"""The one progress-callback signature of metricdp.

Long library work (LP builds, calibration, experiments, streaming) reports through an
optional ``progress`` keyword of type :data:`Progress`: ``progress(done, total, message)``
with ``done`` the units finished so far, ``total`` the number expected (``None`` when
unknown, e.g. constraint-generation rounds) and ``message`` one human-readable line
("round 7: 1,204 rows, objective 2.6035"). The library never prints; the CLI renders
the calls (a rich bar in a terminal, one line per event or per 10 s in a pipe).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress", "report"]

#: ``progress(done, total, message)``; see the module docstring.
Progress = Callable[[int, "int | None", str], None]


def report(progress: Progress | None, done: int, total: int | None, message: str) -> None:
    """Call ``progress`` if one was given (a no-op otherwise)."""
    if progress is not None:
        progress(done, total, message)
