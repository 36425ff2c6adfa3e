"""``python -m tests.text._kill_worker ARGS``: ``metricdp ARGS`` in this process, killed (SIGKILL) at a chosen step.

``TEXT_KILL_AT`` names the step of an accounted text rewrite after which the process kills
itself, as ``kill -9`` would: ``planned`` (budget reserved, nothing written), ``mid-write``
(the temporary output open, the first batch being rewritten), ``publishing`` (past the
point of no return, before the atomic rename), ``renamed`` (the file is out, the run not
yet committed).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from metricdp.text import accounted

STEPS = ("planned", "mid-write", "publishing", "renamed")


def _die(*_: Any, **__: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    step = os.environ.get("TEXT_KILL_AT", "")
    if step == "planned":
        accounted._Publish.__init__ = _die  # type: ignore[method-assign]  # right after plan_release
    elif step == "mid-write":
        accounted._Rewrite.release = _die  # type: ignore[method-assign]
    elif step == "publishing":
        original = accounted._Publish.publishing

        def publishing(self: Any) -> None:
            original(self)
            _die()

        accounted._Publish.publishing = publishing  # type: ignore[method-assign]
    elif step == "renamed":
        accounted._Publish.commit = _die  # type: ignore[method-assign]
    from metricdp.cli import main

    sys.argv = ["metricdp", *sys.argv[1:]]
    main()
