"""Several processes against one ledger: no overspend, and kill -9 never frees published spend.

Children are forked by a multiprocessing forkserver that has imported the ledger once, so a
child costs a fork, not an interpreter start.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp.accounting.composition import to_units
from metricdp.accounting.ledger import Ledger

from . import _workers

PERSONS = ["ann", "bob", "cy", "dee", "eve"]


@pytest.fixture(scope="module")
def ctx() -> Any:
    context = multiprocessing.get_context("forkserver")
    preload = ["numpy", "metricdp.accounting.ledger", "tests.accounting._workers"]
    # the PostgreSQL driver too, where installed (a failed preload is ignored by the forkserver)
    preload += ["sqlalchemy", "sqlalchemy.dialects.postgresql.psycopg", "psycopg"]
    context.set_forkserver_preload(preload)
    return context


def test_concurrent_processes_never_overspend(ctx: Any, target: tuple[str, Path], tmp_path: Path) -> None:
    """4 processes x 12 runs asking 1-3 values per person at eps 0.1; budget 1: at most 10 values per person."""
    url, key = target
    budget, eps = 1.0, 0.1
    Ledger(url, budget=budget, key_file=key).close()
    start = ctx.Event()
    procs = [ctx.Process(target=_workers.concurrent_runs,
                         args=(url, str(key), PERSONS, eps, 12, seed, str(tmp_path / f"w{seed}.json"), start))
             for seed in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    granted = dict.fromkeys(PERSONS, 0)
    for seed in range(4):
        for person, g in json.loads((tmp_path / f"w{seed}.json").read_text()).items():
            granted[person] += g
    cap = to_units(budget, budget=True) // to_units(eps)
    assert cap == 10
    # demand (4 x 12 x 1-3 values) far exceeds the budget, so drop grants everyone exactly the cap
    assert granted == dict.fromkeys(PERSONS, cap)
    with Ledger(url, key_file=key) as ledger:
        assert ledger.spent(PERSONS).tolist() == [budget] * len(PERSONS)
        ledger.check_integrity()
        assert sum(r["rows"] for r in ledger.runs_table()) == cap * len(PERSONS)


def _published(publish_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(publish_dir.glob("*.json"))]


def test_kill_9_never_frees_published_spend(ctx: Any, target: tuple[str, Path], tmp_path: Path) -> None:
    """50 runs, 5 at a time, each killed at a chosen step or at a random time: spent >= published."""
    url, key = target
    budget, eps = 4.0, 0.1
    Ledger(url, budget=budget, key_file=key).close()
    publish_dir = tmp_path / "published"
    publish_dir.mkdir()
    rng = np.random.default_rng(33)
    plan: list[str | None] = [*_workers.STEPS * 5, *[None] * (50 - 5 * len(_workers.STEPS))]
    order = rng.permutation(len(plan))
    for wave in range(0, len(plan), 5):
        procs = []
        for seed in order[wave:wave + 5].tolist():
            p = ctx.Process(target=_workers.crash_run,
                            args=(url, str(key), PERSONS, eps, seed, str(publish_dir), plan[seed]))
            p.start()
            procs.append((p, plan[seed]))
        time.sleep(float(rng.uniform(0.0, 0.15)))
        for p, step in procs:  # the runs without a planned step: kill -9 at a random time, if still running
            if step is None and p.is_alive():
                p.kill()
        for p, step in procs:
            p.join(60)
            assert p.exitcode == {None: p.exitcode, "abort": 0}.get(step, -9)
            assert p.exitcode in (0, -9)
    records = _published(publish_dir)
    published = dict.fromkeys(PERSONS, 0)
    for rec in records:
        for person, g in zip(rec["persons"], rec["granted"], strict=True):
            published[person] += g * to_units(eps)
    with Ledger(url, key_file=key) as ledger:
        ledger.check_integrity()
        spent = dict(zip(PERSONS, ledger.spent_units(PERSONS).tolist(), strict=True))
        runs = {r["run"]: r for r in ledger.runs_table()}
    for person in PERSONS:
        assert published[person] <= spent[person] <= to_units(budget, budget=True), person
    for rec in records:  # a published run is never aborted nor missing
        assert runs[rec["run"]]["state"] in ("reserved", "committed")
    states = {r["state"] for r in runs.values()}
    assert {"reserved", "committed", "aborted"} <= states, states  # every path was exercised
    assert any(rec["run"] in runs and runs[rec["run"]]["state"] == "reserved" for rec in records)
    assert len(records) >= 10
