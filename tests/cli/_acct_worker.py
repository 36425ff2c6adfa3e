"""``python -m tests.cli._acct_worker ARGS``: ``metricdp ARGS`` in this process, killed (SIGKILL) at a chosen step.

``ACCT_KILL_AT`` names the step of an accounted release after which the process kills
itself, as ``kill -9`` would: ``planned`` (budget reserved; with two passes nothing
written, with one read the whole temporary output written), ``mid-write`` (part of the
temporary output written; with one read, nothing reserved yet), ``publishing`` (past the
point of no return, before the atomic rename), ``renamed`` (the file is out, the run not
yet committed).
Unset: the command runs to its end (the tests kill it at a random time instead).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from metricdp.streaming.accounted import AccountedRun, OnePassRun
from metricdp.streaming.persons import PersonCollector

STEPS = ("planned", "mid-write", "publishing", "renamed")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _after(name: str, calls: int = 1) -> None:
    original = getattr(AccountedRun, name)
    count = [0]

    def dying(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        count[0] += 1
        if count[0] >= calls:
            _die()
        return out

    setattr(AccountedRun, name, dying)


def _before(name: str) -> None:
    def dying(self: Any, *args: Any, **kwargs: Any) -> Any:
        _die()

    setattr(AccountedRun, name, dying)


if __name__ == "__main__":
    step = os.environ.get("ACCT_KILL_AT", "")
    if step == "planned":
        from metricdp.pipeline import first_pass
        from metricdp.streaming import files

        original = first_pass.start_accounted

        def start(*args: Any, **kwargs: Any) -> Any:
            original(*args, **kwargs)
            _die()

        first_pass.start_accounted = files.start_accounted = start  # type: ignore[assignment]
        plan = OnePassRun.plan  # one read: the plan (reservation) comes after the temporary output is written

        def planned(self: Any) -> Any:
            plan(self)
            _die()

        OnePassRun.plan = planned  # type: ignore[method-assign]
    elif step == "mid-write":
        _after("select", 2)
        add = PersonCollector.add  # one read: the second chunk read, the first one written

        def mid(self: Any, chunk: Any) -> Any:
            if self.rows:
                _die()
            return add(self, chunk)

        PersonCollector.add = mid  # type: ignore[method-assign]
    elif step == "publishing":
        _after("publishing")
    elif step == "renamed":
        _before("commit")
    from metricdp.cli import main

    sys.argv = ["metricdp", *sys.argv[1:]]
    main()
