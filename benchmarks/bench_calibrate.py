"""Choosing eps on a grid: ``calibrate --target adversary-error=...`` per family, checked; user-centric beside each.

    python benchmarks/bench_calibrate.py --out /tmp/calib      # 20 x 20 cells of 250 m, target 450 m: the target run
    python benchmarks/bench_calibrate.py --quick               # 4 x 4 cells, target 150 m (a test runs it)

Writes ``grid.csv`` (``label,x,y`` in metres: the cell centres) and ``prior.csv`` (a
Dirichlet(0.5) prior of ``--seed``), then for each family runs, as its own process under a
wall limit (60 s for exponential and planar-laplace, 10 minutes for optimal: ``--limit``)

    metricdp calibrate grid.csv --mechanism F --prior prior.csv --target adversary-error=V --json --out F.npz

and checks the answer eps from outside the command: the file it wrote is loaded (the loader
audits it again) and its adversary error under the prior is computed here; it must be at
least V. Then the family at eps x 1.05 must fall below V: built here for the closed-form
families, read from the command's own witness build for the LP ones (a second OPTMech build
would double the run), the table says which.

User-centric beside each calibrated family: at that family's eps and its expected loss Q
under the prior, ``metricdp build -m user-centric --epsilon eps --quality Q --prior``. The
rival is eps-mDP with expected loss Q, so it is a feasible point of user-centric's LP, and
the LP's weak-duality bound (``info["certificate"]``) is at least the rival's adversary
error; the row checks that bound, a certified gap of at most 1e-9, and the adversary error
achieved (no lower than the rival's, to 1e-9 of the bound). The LP is solved by row
generation (only the rows that bind are held); its builds run with
``METRICDP_MEMORY_LIMIT`` at ``--memory-limit`` and under the command's time limit, so a
grid out of its reach stops with a clear error rather than swapping.

Each command's wall time, peak resident memory (``wait4``) and exit status are printed in
markdown tables, then one JSON line with everything. Timings depend on the machine and its
load: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cells_route import timed  # one runner for the benchmarks' metricdp processes

FAMILIES = ("exponential", "planar-laplace", "optimal")
LIMITS = {"exponential": 60.0, "planar-laplace": 60.0, "optimal": 600.0, "user-centric": 600.0}
#: The witness build's factor and the certificate's tolerance (the targets of the run).
FACTOR, CERTIFIED = 1.05, 1e-9


def write_inputs(work: Path, k: int, cell: float, seed: int) -> None:
    """``grid.csv``: the k x k cell centres in metres; ``prior.csv``: a Dirichlet(0.5) prior over them."""
    n = k * k
    pi = np.random.default_rng(seed).dirichlet(np.full(n, 0.5))
    (work / "grid.csv").write_text("label,x,y\n" + "".join(
        f"c{i},{(i % k) * cell:g},{(i // k) * cell:g}\n" for i in range(n)), encoding="ascii")
    (work / "prior.csv").write_text("label,probability\n" + "".join(
        f"c{i},{float(p)!r}\n" for i, p in enumerate(pi)), encoding="ascii")


def _status(r: dict[str, Any], limit: float) -> str:
    if r["rc"] == 0:
        return "ok"
    if r["rc"] < 0 and r["seconds"] >= limit:
        return f"time-out: killed at {limit:g} s"
    return f"exit {r['rc']}: {' | '.join(r['stderr'])}"


def calibrate(family: str, work: Path, target: float, limit: float, pi: np.ndarray) -> dict[str, Any]:
    """Run ``metricdp calibrate`` for ``family`` and check its answer from outside (module docstring)."""
    from metricdp import load_mechanism
    from metricdp.adversary import adversary_error
    from metricdp.io import read_points
    from metricdp.mechanisms import build, registry

    out = work / f"{family}.npz"
    r = timed(["calibrate", "grid.csv", "--mechanism", family, "--prior", "prior.csv", "--target",
               f"adversary-error={target!r}", "--json", "--out", out.name], work, limit)
    row: dict[str, Any] = {"family": family, "seconds": r["seconds"], "peak_mib": r["peak_mib"],
                           "status": _status(r, limit), "limit_s": limit}
    if family == "optimal":  # what the builder itself expects of one build: the reason when the search runs out
        from metricdp.mechanisms.lp_plan import plan_optimal

        row["plan"] = plan_optimal(len(pi)).summary()
    if r["rc"] != 0:
        return row
    rep = json.loads("\n".join(r["stdout"]))
    eps = float(rep["epsilon"])
    mech = load_mechanism(out)
    ae = adversary_error(mech.matrix, mech.distances, pi).expected_error
    row.update(epsilon=eps, builds=rep["search"]["builds"], notes=rep["notes"], adversary_error=ae,
               expected_loss=float(mech.expected_loss(pi)), meets=bool(ae >= target), file_epsilon=mech.epsilon)
    if registry.get(family).lp:  # the command's own witness: the same builder at eps * 1.05
        nb = rep["neighbour"]
        row.update(witness_source="calibrate's witness", witness_note=rep["neighbour_note"])
        if nb is not None:
            row.update(witness_epsilon=nb["epsilon"], witness_error=nb["figures"].get("adversary_error"))
    else:
        space = read_points(work / "grid.csv")
        other = build(family, space, eps * FACTOR)
        row.update(witness_source="rebuilt here", witness_epsilon=eps * FACTOR,
                   witness_error=adversary_error(other.matrix, other.distances, pi).expected_error)
    we = row.get("witness_error")
    row["witness_fails"] = None if we is None else bool(we < target)
    return row


def versus(rival: dict[str, Any], work: Path, limit: float, memory: str, pi: np.ndarray) -> dict[str, Any]:
    """User-centric at the rival's eps and expected loss: its adversary error, certificate and the checks."""
    from metricdp import load_mechanism
    from metricdp.adversary import adversary_error

    q, eps, theirs = rival["expected_loss"], rival["epsilon"], rival["adversary_error"]
    out = work / f"user-centric-vs-{rival['family']}.npz"
    saved = os.environ.get("METRICDP_MEMORY_LIMIT")
    os.environ["METRICDP_MEMORY_LIMIT"] = memory
    try:
        r = timed(["build", "grid.csv", "--mechanism", "user-centric", "--epsilon", repr(eps), "--quality", repr(q),
                   "--prior", "prior.csv", "--out", out.name], work, limit)
    finally:
        if saved is None:
            del os.environ["METRICDP_MEMORY_LIMIT"]
        else:
            os.environ["METRICDP_MEMORY_LIMIT"] = saved
    row: dict[str, Any] = {"rival": rival["family"], "epsilon": eps, "quality": q, "rival_error": theirs,
                           "seconds": r["seconds"], "peak_mib": r["peak_mib"], "status": _status(r, limit)}
    if r["rc"] != 0:
        return row
    mech = load_mechanism(out)
    ours = adversary_error(mech.matrix, mech.distances, pi).expected_error
    cert = mech.info["certificate"]
    bound, gap = float(cert["adversary_error_bound"]), float(cert["gap"])
    row.update(adversary_error=ours, bound=bound, gap=gap, quality_loss=float(mech.expected_loss(pi)),
               bound_at_least_rival=bool(bound >= theirs), certified=bool(gap <= CERTIFIED),
               no_lower=bool(ours >= theirs - CERTIFIED * bound), within_quality=bool(
                   mech.expected_loss(pi) <= q * (1 + CERTIFIED)))
    return row


def _f(v: object, digits: int = 6) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.{digits}g}"
    return str(v)


def print_tables(rows: list[dict[str, Any]], uc: list[dict[str, Any]], target: float) -> None:
    print(f"\n| family | eps (per m) | wall s | limit s | peak MiB | builds | AE at eps (m) | >= {target:g} | "
          f"AE at eps x {FACTOR} | < {target:g} | witness | status |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {_f(r.get('epsilon'), 8)} | {r['seconds']} | {r['limit_s']:g} | {r['peak_mib']} | "
              f"{_f(r.get('builds'))} | {_f(r.get('adversary_error'), 8)} | {_f(r.get('meets'))} | "
              f"{_f(r.get('witness_error'), 8)} | {_f(r.get('witness_fails'))} | {r.get('witness_source', '-')} | "
              f"{r['status']} |")
    for r in rows:
        if "plan" in r:
            print(f"\n{r['family']}, one build (the builder's own plan): {r['plan']}")
    print("\n| user-centric vs | eps (per m) | quality Q (m) | rival AE | user-centric AE | certified bound | gap | "
          "no lower | quality <= Q | wall s | peak MiB | status |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---|")
    for u in uc:
        print(f"| {u['rival']} | {_f(u['epsilon'], 8)} | {_f(u['quality'], 10)} | {_f(u['rival_error'], 12)} | "
              f"{_f(u.get('adversary_error'), 12)} | {_f(u.get('bound'), 12)} | {_f(u.get('gap'), 3)} | "
              f"{_f(u.get('no_lower'))} | {_f(u.get('within_quality'))} | {u['seconds']} | {u['peak_mib']} | "
              f"{u['status']} |")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=20, help="k: a k x k grid")
    parser.add_argument("--cell", type=float, default=250.0, help="cell side in metres")
    parser.add_argument("--target", type=float, default=450.0, help="adversary error in metres")
    parser.add_argument("--seed", type=int, default=0, help="of the Dirichlet(0.5) prior")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--limit", action="append", default=[], metavar="FAMILY=SECONDS",
                        help="wall limit of a family's command (user-centric: each build)")
    parser.add_argument("--memory-limit", default="6GiB", help="METRICDP_MEMORY_LIMIT of the user-centric builds")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    parser.add_argument("--quick", action="store_true", help="4 x 4 cells, target 150 m")
    a = parser.parse_args(argv)
    k, target = (4, 150.0) if a.quick else (a.cells, a.target)
    limits = dict(LIMITS)
    for text in a.limit:
        name, _, seconds = text.partition("=")
        limits[name.strip()] = float(seconds)
    holder = None if a.out else tempfile.TemporaryDirectory(prefix="metricdp-calibrate-")
    work = a.out if holder is None else Path(holder.name)
    work.mkdir(parents=True, exist_ok=True)
    try:
        write_inputs(work, k, a.cell, a.seed)
        pi = np.random.default_rng(a.seed).dirichlet(np.full(k * k, 0.5))
        load = os.getloadavg()
        print(f"{k} x {k} grid of {a.cell:g} m cells, Dirichlet(0.5) prior (seed {a.seed}), target adversary-error="
              f"{target:g} m; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
        rows = []
        for family in a.families.split(","):
            rows.append(calibrate(family, work, target, limits.get(family, 600.0), pi))
            print(f"  calibrate {family}: {rows[-1]['status']} in {rows[-1]['seconds']} s", flush=True)
        uc = []
        for rival in rows:
            if rival["status"] == "ok":
                uc.append(versus(rival, work, limits["user-centric"], a.memory_limit, pi))
                print(f"  user-centric vs {rival['family']}: {uc[-1]['status']} in {uc[-1]['seconds']} s", flush=True)
        print_tables(rows, uc, target)
        result = {"k": k, "cell_m": a.cell, "target_m": target, "seed": a.seed, "load_start": load,
                  "load_end": os.getloadavg(), "calibrate": rows, "user_centric": uc}
        print(json.dumps(result))
        return result
    finally:
        if holder is not None:
            holder.cleanup()


if __name__ == "__main__":
    main()
