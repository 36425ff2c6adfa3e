"""The predictive mechanism at scale: synthetic traces, released chunk by chunk.

    python benchmarks/bench_predictive.py --persons 1000000 --fixes 10 # 10M fixes of 1M persons
    python benchmarks/bench_predictive.py --quick                      # 20,000 fixes (a test runs it)

Each person has a home and a work place in the Riga box of docs/location.md and alternates
between them in stays of 5 fixes with 100 m of GPS jitter, so predictions pass within a stay. Rows are
generated chunk by chunk, already sorted by person and time, and fed to
:class:`~metricdp.location.predictive.PredictiveReleaser` with the OS's secure source
(the default), so memory is a chunk plus one person. Prints the fixes per second of the
release alone (generation excluded), the share of rows per outcome, the mean eps spent per
person and the peak resident memory of the process, then one JSON line with all of them.
Timings depend on the machine and its load: report ``uptime`` with them.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Iterator

import numpy as np

from metricdp.location.predictive import (
    EXHAUSTED,
    FRESH,
    PASSED,
    AdaptiveRate,
    FixedSplit,
    PredictiveReleaser,
)

REGION = (56.90, 24.00, 57.03, 24.25)
KM_LAT = 1.0 / 111.19


def chunks(persons: int, fixes: int, chunk_persons: int, seed: int) -> Iterator[tuple[np.ndarray, ...]]:
    """(persons, times, latlon) for ``chunk_persons`` persons at a time, sorted by person and time."""
    rng = np.random.default_rng(seed)
    lat0, lon0, lat1, lon1 = REGION
    for first in range(0, persons, chunk_persons):
        k = min(chunk_persons, persons - first)
        places = np.stack([np.column_stack([rng.uniform(lat0, lat1, k), rng.uniform(lon0, lon1, k)])
                           for _ in range(2)])  # (2, k, 2): home and work
        which = (np.arange(fixes) // 5) % 2  # stays of 5 fixes, home then work
        pts = places[which][:, :, :].transpose(1, 0, 2).reshape(-1, 2)
        pts = pts + rng.normal(0.0, 0.1 * KM_LAT, pts.shape)  # 100 m of jitter
        ids = np.repeat(np.arange(first, first + k, dtype=np.int64), fixes)
        times = np.tile(np.arange(fixes, dtype=np.int64), k)
        yield ids, times, pts


def bench(persons: int, fixes: int, chunk_persons: int, manager: str, seed: int = 0) -> dict[str, float]:
    m = (FixedSplit(eps_test=0.5, eps_noise=1.0, budget=float(fixes), threshold_km=2.0) if manager == "fixed"
         else AdaptiveRate(budget=float(fixes), horizon=fixes, threshold_km=2.0))
    releaser = PredictiveReleaser(m)
    seconds, outcomes, spent, rows = 0.0, np.zeros(3, dtype=np.int64), 0.0, 0
    for ids, times, pts in chunks(persons, fixes, chunk_persons, seed):
        t0 = time.perf_counter()
        out = releaser.release(ids, times, pts)
        seconds += time.perf_counter() - t0
        outcomes += np.bincount(out.outcome, minlength=3)
        spent += float(out.report.eps_spent.sum())
        rows += ids.size
    spent += float(releaser.close().eps_spent.sum())
    return {
        "persons": persons, "fixes": rows, "manager": manager, "seconds": round(seconds, 3),
        "fixes_per_s": round(rows / seconds), "fresh": float(outcomes[FRESH] / rows),
        "passed": float(outcomes[PASSED] / rows), "exhausted": float(outcomes[EXHAUSTED] / rows),
        "mean_eps_per_person": spent / persons,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--persons", type=int, default=1_000_000)
    ap.add_argument("--fixes", type=int, default=10, help="fixes per person")
    ap.add_argument("--chunk-persons", type=int, default=100_000)
    ap.add_argument("--manager", choices=["fixed", "adaptive"], default="fixed")
    ap.add_argument("--quick", action="store_true", help="2,000 persons x 10 fixes")
    args = ap.parse_args(argv)
    persons = 2_000 if args.quick else args.persons
    result = bench(persons, args.fixes, min(args.chunk_persons, persons), args.manager)
    print(f"{result['fixes']:,} fixes of {persons:,} persons ({args.manager}): {result['seconds']} s, "
          f"{result['fixes_per_s']:,} fixes/s; fresh {result['fresh']:.1%}, passed {result['passed']:.1%}, "
          f"exhausted {result['exhausted']:.1%}; mean eps {result['mean_eps_per_person']:.3f} per person; "
          f"peak RSS {result['peak_rss_mib']:.0f} MiB")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
