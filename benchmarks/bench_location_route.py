"""The exactly sampled location route at scale: synthetic GPS rows -> grid -> planar Laplace -> privatize.

    python benchmarks/bench_location_route.py --rows 10000000 --out /tmp/route   # the doc's 10M-row numbers
    python benchmarks/bench_location_route.py --quick                            # 20,000 rows (a test runs it)

Writes ``rows.csv`` (``id,lat,lon``: uniform over the Riga box of docs/location.md, 5% of
the rows outside it, generated in chunks), then runs, each as its own ``metricdp`` process:
``grid --unknown nearest --labelled --prior-out``, ``build --mechanism planar-laplace
--remap --prior``, and ``privatize --drop lat --drop lon``. For each step it prints the
wall time, rows per second and the peak resident memory of the child (``ru_maxrss``), and
one JSON line with all of them. Timings depend on the machine and its load: report
``uptime`` with them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REGION = (56.90, 24.00, 57.03, 24.25)


def write_rows(path: Path, rows: int, seed: int = 0, chunk: int = 1_000_000) -> None:
    """``rows`` synthetic fixes, 5% outside the region, written chunk by chunk."""
    rng = np.random.default_rng(seed)
    lat0, lon0, lat1, lon1 = REGION
    with path.open("w", encoding="ascii") as fh:
        fh.write("id,lat,lon\n")
        for start in range(0, rows, chunk):
            k = min(chunk, rows - start)
            pad = 0.05 * (lat1 - lat0)
            lat = rng.uniform(lat0 - pad, lat1 + pad, k)
            lon = rng.uniform(lon0 - pad, lon1 + pad, k)
            ids = np.arange(start, start + k)
            np.savetxt(fh, np.column_stack([ids, lat, lon]), fmt=["%d", "%.6f", "%.6f"], delimiter=",")


def timed(args: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``metricdp ARGS`` in ``cwd``: (seconds, peak RSS of that child in MiB, from ``wait4``)."""
    exe = shutil.which("metricdp")
    cmd = [exe, *args] if exe else [sys.executable, "-c", "from metricdp.cli import main; main()", *args]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        dt = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise SystemExit(f"metricdp {' '.join(args)} failed ({child.returncode}): {err.read().decode().strip()}")
    return dt, usage.ru_maxrss / 1024.0  # KiB on Linux


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--cell", default="1km")
    parser.add_argument("--epsilon", default="2/km")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    parser.add_argument("--quick", action="store_true", help="20,000 rows, 2 km cells")
    a = parser.parse_args(argv)
    rows, cell = (20_000, "2km") if a.quick else (a.rows, a.cell)
    work = a.out or Path(tempfile.mkdtemp(prefix="metricdp-route-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        write_rows(work / "rows.csv", rows)
        region = ",".join(str(v) for v in REGION)
        steps: dict[str, object] = {"rows": rows, "cell": cell, "epsilon": a.epsilon, "load": os.getloadavg()}
        for name, args, per_row in [
            ("grid", ["grid", "rows.csv", "--cell", cell, "--region", region, "--unknown", "nearest", "--out",
                      "cells.csv", "--labelled", "labelled.csv", "--prior-out", "prior.csv", "--prior-epsilon", "1"],
             True),
            ("build", ["build", "cells.csv", "-m", "planar-laplace", "--epsilon", a.epsilon, "--remap", "--prior",
                       "prior.csv", "--out", "pl.npz"], False),
            ("privatize", ["privatize", "pl.npz", "labelled.csv", "--column", "cell", "--drop", "lat", "--drop",
                           "lon", "--keep", "id", "--out", "released.csv"], True),
        ]:
            seconds, rss = timed(args, work)
            steps[name] = {"seconds": round(seconds, 3), "peak_rss_mib": round(rss, 1),
                           **({"rows_per_s": round(rows / seconds)} if per_row else {})}
            print(f"{name:>9}: {seconds:8.2f} s  peak RSS {rss:8.1f} MiB"
                  + (f"  {rows / seconds:12,.0f} rows/s" if per_row else ""))
        print(json.dumps(steps))
        return steps
    finally:
        if a.out is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
