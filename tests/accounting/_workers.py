"""Child processes of the concurrency and crash tests (started by a forkserver, so imports are paid once)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from metricdp.accounting.ledger import Ledger

#: Points of a run where the crash test kills its child (SIGKILL, as ``kill -9``).
#: "abort" is not a kill: the run fails before publishing and gives its reservation back.
STEPS = ("open", "in-reserve", "reserved", "abort", "mid-publish", "published", "committed")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def concurrent_runs(target: str, key_file: str, persons: list[str], eps: float, runs: int, seed: int,
                    out: str, start: Any) -> None:
    """``runs`` reservations of random demands (drop, or refuse every third run); grants go to ``out``."""
    rng = np.random.default_rng(seed)
    ledger = Ledger(target, key_file=key_file)
    start.wait(60)
    granted = dict.fromkeys(persons, 0)
    for i in range(runs):
        counts = rng.integers(1, 4, size=len(persons))
        try:
            r = ledger.reserve(persons, eps, counts, policy="refuse" if i % 3 == 2 else "drop")
        except Exception as exc:  # BudgetExceededError under refuse: nothing granted
            if type(exc).__name__ != "BudgetExceededError":
                raise
            continue
        ledger.commit(r.run_id)
        for p, g in zip(r.grant.persons.tolist(), r.grant.granted.tolist(), strict=True):
            granted[p] += int(g)
    ledger.close()
    Path(out).write_text(json.dumps(granted))


def crash_run(target: str, key_file: str, persons: list[str], eps: float, seed: int, publish_dir: str,
              kill_at: str | None) -> None:
    """One run: reserve, publish a file atomically, commit; SIGKILL itself at ``kill_at`` (a step of STEPS).

    At "abort" the run fails before publishing and aborts, as a run whose release raised would.
    The published file (``publish_dir/RUN.json``) is what the world has seen: the oracle.
    """
    rng = np.random.default_rng(seed)
    if kill_at == "open":
        _die()
    ledger = Ledger(target, key_file=key_file)
    chosen = rng.choice(len(persons), size=int(rng.integers(1, len(persons) + 1)), replace=False)
    who = [persons[i] for i in sorted(chosen.tolist())]
    counts = rng.integers(1, 4, size=len(who))
    if kill_at == "in-reserve":  # inside the reservation's transaction, after the persons' totals were raised
        original = Ledger._insert_run

        def dying(self: Ledger, *args: Any) -> None:
            original(self, *args)
            _die()

        Ledger._insert_run = dying  # type: ignore[method-assign]
    time.sleep(float(rng.uniform(0, 0.01)))
    r = ledger.reserve(who, eps, counts, policy="drop", run_id=f"run{seed}")
    if kill_at == "reserved":
        _die()
    if kill_at == "abort":  # the release failed before anything was published
        ledger.abort(r.run_id)
        return
    record = {"run": r.run_id, "persons": r.grant.persons.tolist(), "granted": r.grant.granted.tolist()}
    tmp = Path(publish_dir) / f".{r.run_id}.tmp"
    with open(tmp, "w") as fh:
        fh.write(json.dumps(record))
        fh.flush()
        os.fsync(fh.fileno())
    if kill_at == "mid-publish":
        _die()
    os.replace(tmp, Path(publish_dir) / f"{r.run_id}.json")
    if kill_at == "published":
        _die()
    ledger.commit(r.run_id)
    if kill_at == "committed":
        _die()
    ledger.close()
