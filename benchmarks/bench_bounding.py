"""Contribution bounding: metricdp's ``bound_contributions`` against PipelineDP's ``sample_fixed_per_key``.

``python benchmarks/bench_bounding.py [--rows 1000000] [--k 5] [--zipf 1.5] [--rounds 5] [--quick]``

Both keep at most K rows per person, chosen uniformly at random, on the same N rows whose
persons are Zipf-distributed (``numpy.random.Generator.zipf(a)``: a few persons with very
many rows, most with one). Timed, in one process, in alternating rounds (the order of the
contenders rotates each round, so a slower phase of a loaded machine hits each alike):

* ``metricdp``: :func:`metricdp.accounting.bound_contributions` with the default source (the
  OS secure one), rows as one int64 array, the mask materialised;
* ``metricdp-seeded``: the same with a seeded numpy Generator (a shuffle in place of sorted words);
* ``reference``: the law's plain form (independent 64-bit keys from the OS, ``np.unique`` + ``np.lexsort``),
  kept here as a yardstick;
* ``pipelinedp``: ``pipeline_dp.LocalBackend().sample_fixed_per_key(rows, K)`` on the
  ``(person, row)`` pairs, consumed to the end (it is lazy) -- when ``pipeline_dp`` imports
  (it is not a metricdp dependency: install it beside metricdp in a virtual environment of its
  own).

Prints one JSON object: per contender the median CPU (user + system) and wall seconds, and
every round's figures. ``--quick`` runs 20,000 rows and 2 rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def reference(ids: np.ndarray, k: int) -> np.ndarray:
    """Independent keys, rows sorted by (person, key), rank within the person below ``k``."""
    _, inverse = np.unique(ids, return_inverse=True)
    keys = np.frombuffer(os.urandom(8 * ids.size), dtype=np.uint64)  # the OS source, as metricdp's default
    order = np.lexsort((keys, inverse))
    grouped = inverse[order]
    rank = np.arange(ids.size) - np.searchsorted(grouped, grouped, side="left")
    keep = np.zeros(ids.size, dtype=bool)
    keep[order] = rank < k
    return keep


def contenders(ids: np.ndarray, k: int) -> dict[str, Callable[[], Any]]:
    from metricdp.accounting import bound_contributions

    seeded = np.random.default_rng(1)
    out: dict[str, Callable[[], Any]] = {
        "metricdp": lambda: bound_contributions(ids, k),
        "metricdp-seeded": lambda: bound_contributions(ids, k, rng=seeded),
        "reference": lambda: reference(ids, k),
    }
    try:
        import pipeline_dp
    except ImportError:
        return out
    backend = pipeline_dp.LocalBackend()
    pairs = list(zip(ids.tolist(), range(ids.size), strict=True))
    out["pipelinedp"] = lambda: sum(len(v) for _, v in backend.sample_fixed_per_key(pairs, k))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--zipf", type=float, default=1.5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    rows, rounds = (20_000, 2) if a.quick else (a.rows, a.rounds)
    ids = np.random.default_rng(0).zipf(a.zipf, rows).astype(np.int64)
    runs = contenders(ids, a.k)
    names = list(runs)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            c, w = time.process_time(), time.perf_counter()
            runs[name]()
            times[name].append((time.process_time() - c, time.perf_counter() - w))
    result: dict[str, Any] = {
        "rows": rows, "persons": int(np.unique(ids).size), "k": a.k, "zipf": a.zipf, "rounds": rounds,
        "median": {n: {"cpu_s": statistics.median(t[0] for t in times[n]),
                       "wall_s": statistics.median(t[1] for t in times[n])} for n in names},
        "rounds_s": {n: [[round(c, 4), round(w, 4)] for c, w in times[n]] for n in names},
    }
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
