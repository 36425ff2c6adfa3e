"""The release pipeline against an earlier checkout: throughput and peak memory, side by side in one run.

``python benchmarks/bench_pipeline.py --baseline SRC [--rows 2000000] [--runs 3] [--kinds labels,numbers,points]
[--formats csv,parquet] [--engine local|dask] [--ledger] [--data DIR] [--quick]``

``SRC`` is the ``src`` folder of another checkout of metricdp at the commit compared with
(``git clone . /tmp/base && git -C /tmp/base checkout <commit>``: ``/tmp/base/src``); each release runs
as a whole process (``python -c ...`` with ``PYTHONPATH`` set to this
checkout's ``src`` or to ``SRC``), the two in turn -- this, baseline, this, baseline ... -- so a slower phase of
a loaded machine hits both alike. One input: ``--rows`` rows of ``id,person,city,age,lat,lon``
(20 city labels, ages 0..99, points around Paris, in micro-degrees), as CSV and as Parquet (row groups of
2**20 rows), generated once per row count with Arrow's compute functions (about 25 s of CPU for 20,000,000
rows: 0.8 GB of CSV, 0.45 GB of Parquet) and kept in ``--data`` (default ``/tmp/metricdp-bench-pipeline``) for
the next run. The releases:

* ``labels``: ``privatize_file`` of ``city`` with the exponential mechanism on 20 labels;
* ``numbers``: ``privatize_numbers_file`` of ``age`` on the grid 0..99 (two-sided geometric, eps 0.5);
* ``points``: ``privatize_points_file`` of ``lat, lon`` with the planar Laplace float sampler;

each keeping the other columns (``labels`` names all but ``person`` in ``keep``: that one leaves unnamed,
so the content check of unnamed columns runs); with ``--ledger``, ``labels`` also runs per person (``id`` mod
1,000 persons, ``person`` kept) against a fresh ledger. ``--engine dask`` makes the same releases on a local
Dask cluster (one single-threaded worker process per core) through the engine's entry points, which both sides have
(``metricdp.integrations.dask.privatize_file_dask``, ``metricdp.integrations.numbers.privatize_numbers_engine``,
``metricdp.integrations._points.privatize_points_engine``); its CPU counts the workers (processes the release
started and waited for), its peak memory is the largest one process's, not their sum. Prints one JSON
object: per release and format, the median CPU (user + system), wall and peak memory (the maximum resident
set) of each side, their ratios (this / baseline), and every run. ``--quick`` runs 20,000 rows once. Each
side's source is compiled once, before anything is timed, into a bytecode cache of its own in ``--data``
(as an installed package's is), so a release never pays for compiling it, even where
``PYTHONDONTWRITEBYTECODE`` is set.
"""

from __future__ import annotations

import argparse
import hashlib
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
kind, path, out, ledger, engine = sys.argv[1:6]
accounting = None
if ledger != "-":
    from metricdp.accounting.ledger import Ledger
    from metricdp.streaming.accounted import Accounting
    accounting = Accounting("person", ledger=Ledger(ledger, budget=1e6), policy="drop")
if kind == "labels":
    from metricdp.mechanisms import build
    from metricdp.spaces import MetricSpace
    space = MetricSpace.from_points(np.arange(20.0)[:, None], labels=[f"c{i}" for i in range(20)])
    keep = ["id", "age", "lat", "lon"] + (["person"] if accounting else [])
    if engine == "dask":
        from metricdp.integrations.dask import privatize_file_dask
        privatize_file_dask(build("exponential", space, epsilon=1.0), path, "city", out, keep=keep,
                            accounting=accounting)
    else:
        from metricdp.streaming.files import privatize_file
        privatize_file(build("exponential", space, epsilon=1.0), path, "city", out, keep=keep, accounting=accounting)
elif kind == "numbers":
    from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
    keep = ["id", "city", "lat", "lon", "person"]
    if engine == "dask":
        from metricdp.integrations.numbers import privatize_numbers_engine
        privatize_numbers_engine("dask", number_mechanism(NumericGrid(0, 99, 1), 0.5), path, "age", out, keep=keep)
    else:
        from metricdp.streaming.numbers import privatize_numbers_file
        privatize_numbers_file(number_mechanism(NumericGrid(0, 99, 1), 0.5), path, "age", out, keep=keep)
else:
    from metricdp.location.release import PointSettings, make_release
    keep = ["id", "city", "age", "person"]
    if engine == "dask":
        from metricdp.integrations._points import privatize_points_engine
        privatize_points_engine("dask", path, "lat", "lon", out, PointSettings(1.0, None), keep=keep)
    else:
        from metricdp.streaming.points import privatize_points_file
        privatize_points_file(path, "lat", "lon", out, make_release(PointSettings(1.0, None), None), keep=keep,
                              epsilon=1.0)
"""

#: Where the inputs are kept between runs, one folder per row count.
DATA = Path(tempfile.gettempdir()) / "metricdp-bench-pipeline"
#: Rows generated at once: one Parquet row group (pyarrow's default largest group).
BLOCK = 1 << 20


def _micro(x: Any) -> tuple[Any, Any]:
    """Degrees rounded to micro-degrees: as CSV text (``48.850123``, six decimals) and as the float it reads as."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    micro = np.rint(x * 1e6).astype(np.int64)
    whole, frac = np.divmod(np.abs(micro), 10**6)
    head = pc.binary_join_element_wise(pa.array(np.where(micro < 0, "-", "")), pc.cast(pa.array(whole), pa.string()),
                                       "")
    text = pc.binary_join_element_wise(head, pc.utf8_lpad(pc.cast(pa.array(frac), pa.string()), 6, "0"), ".")
    return text, pa.array(micro / 1e6)


def _block(g: Any, start: int, n: int) -> tuple[bytes, Any]:
    """Rows ``start`` .. ``start + n``: their CSV lines and the same rows as an Arrow table (typed as
    ``pyarrow.csv`` reads the CSV)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def tagged(tag: str, numbers: Any) -> Any:
        return pc.binary_join_element_wise(tag, pc.cast(pa.array(numbers), pa.string()), "")

    ids = np.arange(start, start + n, dtype=np.int64)
    city, age = g.integers(0, 20, n), g.integers(0, 100, n)
    (lat_text, lat), (lon_text, lon) = _micro(48.85 + g.normal(0, 0.05, n)), _micro(2.35 + g.normal(0, 0.05, n))
    table = pa.table({"id": tagged("u", ids), "person": tagged("p", ids % 1000), "city": tagged("c", city),
                      "age": pa.array(age, pa.int64()), "lat": lat, "lon": lon})
    lines = pc.binary_join_element_wise(*table.columns[:3], pc.cast(table["age"], pa.string()), lat_text, lon_text,
                                        ",")
    lines = pc.binary_join_element_wise(lines, "\n", "").combine_chunks()
    if not len(lines):
        return b"", table
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset:lines.offset + len(lines) + 1]
    return lines.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]], table


def make_input(folder: Path, rows: int) -> dict[str, Path]:
    """The input as CSV and Parquet in ``folder``, made unless there: each file written under a name of its own,
    then renamed, so a file of that name is whole (two runs making it at once write the same bytes)."""
    import numpy as np
    import pyarrow.parquet as pq

    paths = {"csv": folder / "in.csv", "parquet": folder / "in.parquet"}
    if all(p.exists() for p in paths.values()):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    part = {k: p.with_name(f"{p.name}.{os.getpid()}.part") for k, p in paths.items()}
    g = np.random.default_rng(0)
    writer = None
    try:
        with part["csv"].open("wb") as fh:
            fh.write(b"id,person,city,age,lat,lon\n")
            for start in range(0, rows, BLOCK):
                text, table = _block(g, start, min(BLOCK, rows - start))
                fh.write(text)
                writer = writer or pq.ParquetWriter(part["parquet"], table.schema)
                writer.write_table(table)
        if writer is None:  # no rows: the header's schema
            _, table = _block(g, 0, 0)
            writer = pq.ParquetWriter(part["parquet"], table.schema)
        writer.close()
        for k, p in paths.items():
            os.replace(part[k], p)
    finally:
        for p in part.values():
            p.unlink(missing_ok=True)
    return paths


def side_env(src: Path, data: Path) -> dict[str, str]:
    """The environment of one side's releases: ``src`` first on the path, its modules compiled once into a
    bytecode cache of its own (as an installed package's are), whatever ``PYTHONDONTWRITEBYTECODE`` says here,
    so that neither side pays for compiling its source in every release."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    tag = hashlib.sha256(str(src.resolve()).encode()).hexdigest()[:12]
    return {**env, "PYTHONPATH": str(src), "PYTHONPYCACHEPREFIX": str(data / f"pycache-{tag}")}


def compile_side(src: Path, data: Path) -> None:
    """Compile ``src`` into its side's bytecode cache (:func:`side_env`) before anything is timed."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], env=side_env(src, data), check=True,
                   stdout=subprocess.DEVNULL)


def run_once(src: Path, kind: str, path: Path, out: Path, ledger: str, engine: str,
             data: Path = DATA) -> dict[str, float]:
    """One release as a whole process: CPU, wall and peak memory from the kernel's accounting of the child
    (CPU: with the processes it waited for, a Dask cluster's workers; peak: the largest one's)."""
    env = side_env(src, data)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", RELEASE, kind, str(path), str(out), ledger, engine], env=env,
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
    ap.add_argument("--engine", choices=("local", "dask"), default="local",
                    help="the local pipeline, or the engine's entry points on a local Dask cluster")
    ap.add_argument("--ledger", action="store_true", help="also labels per person against a fresh ledger")
    ap.add_argument("--data", type=Path, default=DATA, help="where the inputs are made once and kept")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    rows, runs = (20_000, 1) if args.quick else (args.rows, args.runs)
    out: dict[str, Any] = {"rows": rows, "runs": runs, "engine": args.engine, "baseline": str(args.baseline),
                           "results": {}}
    folder = args.data / f"rows-{rows}"
    # made in a child: a child's peak resident set starts at its parent's (fork), so this process stays small
    subprocess.run([sys.executable, __file__, "--make-input", str(folder), str(rows)], check=True)
    inputs = {"csv": folder / "in.csv", "parquet": folder / "in.parquet"}
    for src in (HERE, args.baseline):
        compile_side(src, args.data)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        cases = [(k, f, False) for k in args.kinds.split(",") for f in args.formats.split(",")]
        if args.ledger:
            cases += [("labels", f, True) for f in args.formats.split(",")]
        for kind, fmt, accounted in cases:
            name = f"{kind}-{fmt}{'-ledger' if accounted else ''}"
            sides: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
            for r in range(runs):
                for side, src in (("this", HERE), ("baseline", args.baseline)):
                    ledger = str(scratch / f"{side}-{r}.db") if accounted else "-"
                    target = scratch / f"out-{side}.{fmt}"
                    sides[side].append(run_once(src, kind, inputs[fmt], target, ledger, args.engine,
                                                      args.data))
                    target.unlink(missing_ok=True)  # at 20M rows an output is as large as the input
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
