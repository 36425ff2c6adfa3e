"""The release pipeline against an earlier checkout: throughput and peak memory, side by side in one run.

``python benchmarks/bench_pipeline.py --baseline SRC [--rows 2000000] [--runs 3] [--kinds labels,numbers,points]
[--formats csv,parquet] [--ledger] [--quick]``

``SRC`` is the ``src`` folder of another checkout of metricdp at the commit compared with
(``git clone . /tmp/base && git -C /tmp/base checkout <commit>``: ``/tmp/base/src``); each release runs
as a whole process (``python -c ...`` with ``PYTHONPATH`` set to this
checkout's ``src`` or to ``SRC``), the two in turn -- this, baseline, this, baseline ... -- so a slower phase of
a loaded machine hits both alike. One input, generated once: ``--rows`` rows of ``id,person,city,age,lat,lon``
(20 city labels, ages 0..99, points around Paris), as CSV and as Parquet. The releases:

* ``labels``: ``privatize_file`` of ``city`` with the exponential mechanism on 20 labels;
* ``numbers``: ``privatize_numbers_file`` of ``age`` on the grid 0..99 (two-sided geometric, eps 0.5);
* ``points``: ``privatize_points_file`` of ``lat, lon`` with the planar Laplace float sampler;

each keeping the other columns; with ``--ledger``, ``labels`` also runs per person (``id`` mod 1,000 persons)
against a fresh ledger. Prints one JSON object: per release and format, the median CPU (user + system), wall
and peak memory (the child's maximum resident set) of each side, their ratios (this / baseline), and every
run. ``--quick`` runs 20,000 rows once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "src"

RELEASE = r"""
import sys, warnings
import numpy as np
warnings.simplefilter("ignore")
kind, path, out, ledger = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
accounting = None
if ledger != "-":
    from metricdp.accounting.ledger import Ledger
    from metricdp.streaming.accounted import Accounting
    accounting = Accounting("person", ledger=Ledger(ledger, budget=1e6), policy="drop")
if kind == "labels":
    from metricdp.mechanisms import build
    from metricdp.spaces import MetricSpace
    from metricdp.streaming.files import privatize_file
    space = MetricSpace.from_points(np.arange(20.0)[:, None], labels=[f"c{i}" for i in range(20)])
    keep = ["id", "age", "lat", "lon"] + (["person"] if accounting else [])
    privatize_file(build("exponential", space, epsilon=1.0), path, "city", out, keep=keep, accounting=accounting)
elif kind == "numbers":
    from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
    from metricdp.streaming.numbers import privatize_numbers_file
    privatize_numbers_file(number_mechanism(NumericGrid(0, 99, 1), 0.5), path, "age", out,
                           keep=["id", "city", "lat", "lon", "person"])
else:
    from metricdp.location.release import PointSettings, make_release
    from metricdp.streaming.points import privatize_points_file
    privatize_points_file(path, "lat", "lon", out, make_release(PointSettings(1.0, None), None),
                          keep=["id", "city", "age", "person"], epsilon=1.0)
"""


def make_input(folder: Path, rows: int) -> dict[str, Path]:
    """The input as CSV and Parquet (pyarrow writes the Parquet from the CSV)."""
    import numpy as np
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    g = np.random.default_rng(0)
    csv = folder / "in.csv"
    with csv.open("w") as fh:
        fh.write("id,person,city,age,lat,lon\n")
        for start in range(0, rows, 200_000):
            n = min(200_000, rows - start)
            ids = range(start, start + n)
            city, age = g.integers(0, 20, n), g.integers(0, 100, n)
            lat, lon = 48.85 + g.normal(0, 0.05, n), 2.35 + g.normal(0, 0.05, n)
            fh.write("".join(f"u{i},p{i % 1000},c{c},{a},{x:.6f},{y:.6f}\n"
                             for i, c, a, x, y in zip(ids, city, age, lat, lon, strict=True)))
    parquet = folder / "in.parquet"
    pq.write_table(pacsv.read_csv(csv), parquet)
    return {"csv": csv, "parquet": parquet}


def run_once(src: Path, kind: str, path: Path, out: Path, ledger: str) -> dict[str, float]:
    """One release as a whole process: CPU, wall and peak memory from the kernel's accounting of the child."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", RELEASE, kind, str(path), str(out), ledger], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{src}: {kind} {path.name} failed: {err.strip().splitlines()[-1:]}")
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "peak_mib": usage.ru_maxrss / 1024}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, type=Path, help="the src folder of the checkout compared with")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kinds", default="labels,numbers,points")
    ap.add_argument("--formats", default="csv,parquet")
    ap.add_argument("--ledger", action="store_true", help="also labels per person against a fresh ledger")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    rows, runs = (20_000, 1) if args.quick else (args.rows, args.runs)
    out: dict[str, Any] = {"rows": rows, "runs": runs, "baseline": str(args.baseline), "results": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # made in a child: a child's peak resident set starts at its parent's (fork), so this process stays small
        subprocess.run([sys.executable, __file__, "--make-input", str(folder), str(rows)], check=True)
        inputs = {"csv": folder / "in.csv", "parquet": folder / "in.parquet"}
        cases = [(k, f, False) for k in args.kinds.split(",") for f in args.formats.split(",")]
        if args.ledger:
            cases += [("labels", f, True) for f in args.formats.split(",")]
        for kind, fmt, accounted in cases:
            name = f"{kind}-{fmt}{'-ledger' if accounted else ''}"
            sides: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
            for r in range(runs):
                for side, src in (("this", HERE), ("baseline", args.baseline)):
                    ledger = str(folder / f"{side}-{r}.db") if accounted else "-"
                    sides[side].append(run_once(src, kind, inputs[fmt], folder / f"out-{side}.{fmt}", ledger))
            med = {s: {m: statistics.median(x[m] for x in v) for m in ("cpu", "wall", "peak_mib")}
                   for s, v in sides.items()}
            out["results"][name] = {"median": med, "ratio": {m: med["this"][m] / med["baseline"][m]
                                                             for m in ("cpu", "wall", "peak_mib")}, "runs": sides}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--make-input"]:
        make_input(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
