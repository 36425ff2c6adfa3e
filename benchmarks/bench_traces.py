"""Trace releases on the pipeline (``metricdp privatize-trace``'s library call): fixes per second, peak memory.

    python benchmarks/bench_traces.py --persons 1000000 --fixes 10     # 10M fixes of 1M persons (Parquet)
    python benchmarks/bench_traces.py --ais                            # the AIS ship tracks, three mechanisms
    python benchmarks/bench_traces.py --quick                          # 20,000 fixes
    python benchmarks/bench_traces.py --persons 100000 --engine dask   # 1M fixes, locally then on Dask

Synthetic traces: each person has a home and a work place in the Riga box of
docs/location.md and alternates between them in stays of 5 fixes with 100 m of GPS
jitter; the file holds the fixes **in time order** (every person's first fix, then every
person's second, ...), as a feed is written, so the persons interleave and the release
keeps one state per person. The file is written first (not timed); then
:func:`metricdp.streaming.traces.release_traces_file` releases it with the OS's secure
source, accounted with a per-run budget (the first pass and the reservation included in
the time); the user and time columns are kept on purpose (a trace release publishes
them). ``--ais`` writes the AIS tracks of ``tracktable-data`` (``metricdp data ais``'s
default week: real vessels, sorted by vessel then time) to CSV and releases them by each
mechanism. Each release runs in a child process of its own, so its peak resident memory is
its own (not the writer's, nor an earlier run's). Prints one JSON line per run: fixes,
persons, seconds, fixes/s, the peak resident memory of the child, fresh releases and reuses.
``--engine dask`` (or ``spark``) releases the same file on that engine too (a local cluster of the
machine's cores; the child's peak memory is the driver's only), after the local run, so both are
timed under the same load.
Timings depend on the machine and its load: report ``uptime`` with them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from metricdp.location.grid import CellGrid
from metricdp.pipeline.traces import Independent, PerPlace, Predictive
from metricdp.streaming.traces import release_traces_file

REGION = (56.90, 24.00, 57.03, 24.25)
KM_LAT = 1.0 / 111.19


def write_synthetic(path: Path, persons: int, fixes: int, seed: int = 0) -> None:
    """``fixes`` fixes of each of ``persons`` persons, in time order (persons interleaved), as Parquet or CSV."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    lat0, lon0, lat1, lon1 = REGION
    places = np.stack([np.column_stack([rng.uniform(lat0, lat1, persons), rng.uniform(lon0, lon1, persons)])
                       for _ in range(2)])  # (2, persons, 2): home and work
    ids = np.arange(persons, dtype=np.int64)
    writer = None
    try:
        for t in range(fixes):  # one time step of every person per batch: the file is in time order
            pts = places[(t // 5) % 2] + rng.normal(0.0, 0.1 * KM_LAT, (persons, 2))
            table = pa.table({"user": ids, "time": np.full(persons, t, dtype=np.int64), "lat": pts[:, 0],
                              "lon": pts[:, 1]})
            if path.suffix == ".csv":
                import pyarrow.csv as pcsv

                with open(path, "ab") as fh:
                    pcsv.write_csv(table, fh, pcsv.WriteOptions(include_header=t == 0))
                continue
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def write_ais(path: Path) -> tuple[int, int]:
    """The default AIS week as CSV (vessel, time, lat, lon); returns (fixes, vessels)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from metricdp.data.ais import ais_traces

    t = ais_traces()
    times = np.datetime_as_string(t.time, unit="s")
    pcsv.write_csv(pa.table({"vessel": t.person, "time": np.char.replace(times, "T", " "), "lat": t.lat,
                             "lon": t.lon}), path)
    return t.n, t.persons


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench(path: Path, mechanism: Any, user: str, budget: float | None, engine: str = "local") -> dict[str, Any]:
    t0 = time.perf_counter()
    out = path.with_name(f"out-{engine}{path.suffix}")
    run = release_traces_file(path, out, user=user, time="time", lat="lat", lon="lon", mechanism=mechanism,
                              budget=budget, policy="drop", keep=(user, "time"), engine=engine)
    seconds = time.perf_counter() - t0
    r = run.report
    return {"engine": engine, "mechanism": run.mechanism, "fixes": run.stats.rows, "persons": len(r),
            "seconds": round(seconds, 3),
            "fixes_per_second": round(run.stats.rows / seconds), "peak_rss_mb": round(peak_mb()),
            "fresh": int(r.fresh.sum()), "reuses": int(r.reused.sum()), "accounted": budget is not None,
            "load": os.getloadavg()[0]}


def _mechanism(name: str) -> Any:
    if name == "synthetic":
        return Predictive(1.0, 0.5, 2.0)
    grid = CellGrid.over("40.3,-74.5,41.0,-73.5", 1.0)  # New York harbour, 1 km cells
    return {"independent": lambda: Independent(0.5), "predictive": lambda: Predictive(0.5, 0.1, 4.0),
            "per-place": lambda: PerPlace(grid, 0.5)}[name]()


def in_child(path: Path, mechanism: str, user: str, budget: float | None, engine: str = "local") -> dict[str, Any]:
    """:func:`bench` of ``mechanism`` (a name of :func:`_mechanism`) in a child process: its own peak memory."""
    args = [sys.executable, __file__, "--child", str(path), mechanism, user, "" if budget is None else repr(budget),
            engine]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"the benchmark's child failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark of the command line ``argv``; prints and returns one result per run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--persons", type=int, default=100_000)
    parser.add_argument("--fixes", type=int, default=10)
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    parser.add_argument("--ais", action="store_true", help="the AIS ship tracks of tracktable-data")
    parser.add_argument("--quick", action="store_true", help="2,000 persons x 10 fixes")
    parser.add_argument("--engine", choices=["dask", "spark"], help="also release on this engine (local cluster)")
    parser.add_argument("--child", nargs=5, metavar=("PATH", "MECHANISM", "USER", "BUDGET", "ENGINE"),
                        help=argparse.SUPPRESS)  # one release, run by in_child
    args = parser.parse_args(argv)
    if args.child:
        path_, mech, user, budget, engine = args.child
        result = bench(Path(path_), _mechanism(mech), user, float(budget) if budget else None, engine)
        print(json.dumps(result))
        return [result]
    results = []
    engines = ("local",) if args.engine is None else ("local", args.engine)
    with tempfile.TemporaryDirectory() as tmp:
        if args.ais:
            path = Path(tmp) / "ais.csv"
            write_ais(path)
            for name in ("independent", "predictive", "per-place"):
                for engine in engines:
                    results.append({"data": "AIS NYHarbor_2020_12_first_week",
                                    **in_child(path, name, "vessel", None, engine)})
                    print(json.dumps(results[-1]))
            return results
        persons, fixes = (2_000, 10) if args.quick else (args.persons, args.fixes)
        path = Path(tmp) / f"fixes.{args.format}"
        write_synthetic(path, persons, fixes)
        for budget in (None, float(fixes)):
            for engine in engines:
                results.append({"data": f"synthetic {persons} persons x {fixes} fixes ({args.format})",
                                **in_child(path, "synthetic", "user", budget, engine)})
                print(json.dumps(results[-1]))
    return results


if __name__ == "__main__":
    main()
