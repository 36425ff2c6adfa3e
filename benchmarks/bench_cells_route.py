"""The cells route at city scale: ``build planar-laplace`` (and ``exponential``) on thousands of 1 km cells.

    python benchmarks/bench_cells_route.py --out /tmp/cells                  # 5,304 cells of New York harbour
    python benchmarks/bench_cells_route.py --out /tmp/cells --big            # also ~20,000 cells (built or refused)
    python benchmarks/bench_cells_route.py --out /tmp/cells --mechanisms planar-laplace

Writes ``cells.csv`` (``label,lat,lon``: the centres of the 1 km tiling of a box around New
York harbour, :class:`metricdp.location.grid.CellGrid`) and ``prior.csv`` (a public prior:
uniform), then runs each ``metricdp build`` as its own process and prints, for each, the
wall time, the peak resident memory of the child (``ru_maxrss``), its exit status and the
first line of its error when it refused; after each build that wrote a file, a ``load`` row:
:func:`metricdp.mechanisms.file.load_mechanism` of that file in its own process (every check
of the file, and the audit its ``structure`` record names re-derived from its content), with
the audit it ran and the level it proved; then one JSON line with all of them. Timings
depend on the machine and its load: report ``uptime`` with them.
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

#: lat0, lon0, lat1, lon1 around New York harbour: 5,304 cells of 1 km (a 68 x 78 rectangle).
HARBOUR = (40.35, -74.35, 41.05, -73.55)
#: A box about 20,000 km^2 around it.
BIG = (40.05, -74.75, 41.32, -73.08)


def write_cells(path: Path, box: tuple[float, float, float, float], cell_km: float = 1.0) -> int:
    """The cell centres of ``box`` as ``label,lat,lon``; returns the number of cells."""
    from metricdp.location.grid import CellGrid

    grid = CellGrid.over(box, cell_km)
    with path.open("w", encoding="ascii") as fh:
        fh.write("label,lat,lon\n")
        for label, (lat, lon) in zip(grid.labels, grid.centres, strict=True):
            fh.write(f"{label},{lat:.10f},{lon:.10f}\n")
    return len(grid.labels)


def write_prior(cells: Path, path: Path) -> None:
    """A uniform public prior over the cells (``label,weight``)."""
    labels = [line.split(",", 1)[0] for line in cells.read_text(encoding="ascii").splitlines()[1:]]
    path.write_text("label,weight\n" + "".join(f"{lab},1\n" for lab in labels), encoding="ascii")


#: The child that loads a mechanism file: every check of the loader, then the audit it ran and its level.
LOAD = ("import sys; from metricdp.mechanisms.file import load_mechanism; m = load_mechanism(sys.argv[1]); "
        "print(m.info['audit'], m.info['epsilon_audit'])")


def timed(args: list[str], cwd: Path, timeout: float, cmd: list[str] | None = None) -> dict[str, object]:
    """Run ``metricdp ARGS`` (or ``cmd``) in ``cwd``: seconds, peak RSS (MiB, from ``wait4``), exit status,
    first error line."""
    exe = shutil.which("metricdp")
    if cmd is None:
        cmd = [exe, *args] if exe else [sys.executable, "-m", "metricdp", *args]
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                child.kill()
                _, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.2)
        dt = time.perf_counter() - t0
        code = child.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4: tell Popen
        err.seek(0)
        out.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
        stdout = out.read().decode(errors="replace")
    return {"seconds": round(dt, 1), "peak_mib": round(usage.ru_maxrss / 1024.0), "rc": code,
            "stderr": lines[-3:] if code else lines[:2], "stdout": stdout.strip().splitlines()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="working directory (files are written there)")
    ap.add_argument("--epsilon", default="1/km")
    ap.add_argument("--mechanisms", default="planar-laplace,exponential")
    ap.add_argument("--big", action="store_true", help="also the ~20,000-cell box")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per build before it is killed")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    boxes = [("harbour", HARBOUR)] + ([("big", BIG)] if args.big else [])
    for name, box in boxes:
        cells = args.out / f"{name}.csv"
        n = write_cells(cells, box)
        prior = args.out / f"{name}-prior.csv"
        write_prior(cells, prior)
        print(f"{name}: {n:,} cells of 1 km in {box}", flush=True)
        for mech in args.mechanisms.split(","):
            for remap in (False, True):
                tag = f"{mech}{'+remap' if remap else ''}"
                out = args.out / f"{name}-{tag}.npz"
                out.unlink(missing_ok=True)
                argv = ["build", str(cells), "--mechanism", mech, "--epsilon", args.epsilon, "--out", str(out)]
                if remap:
                    argv += ["--remap", "--prior", str(prior)]
                r = timed(argv, args.out, args.timeout)
                r.update(box=name, n=n, build=tag)
                results.append(r)
                state = "ok" if r["rc"] == 0 else f"rc {r['rc']}: {' | '.join(r['stderr'])}"
                print(f"  {tag:<24} {r['seconds']:>8} s  {r['peak_mib']:>6} MiB  {state}", flush=True)
                if r["rc"] == 0 and out.is_file():
                    load = timed([], args.out, args.timeout, [sys.executable, "-c", LOAD, str(out)])
                    load.update(box=name, n=n, load=tag)
                    results.append(load)
                    state = " ".join(load["stdout"]) if load["rc"] == 0 else f"rc {load['rc']}: {load['stderr']}"
                    print(f"  {'load ' + tag:<24} {load['seconds']:>8} s  {load['peak_mib']:>6} MiB  {state}",
                          flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
