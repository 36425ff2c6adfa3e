"""OPTMech's expected loss on k x k grids with a Dirichlet(0.5) prior, at city scale.

    python benchmarks/bench_lp_grid.py                         # 20 x 20 and 30 x 30, eps 0.1 / 0.3 / 1 per cell
    python benchmarks/bench_lp_grid.py --sides 20 --formulations column-generation --time-limit 180
    python benchmarks/bench_lp_grid.py --quick                 # 4 x 4 at eps 0.3 (a test runs it)

Each build runs in a fresh process (:func:`metricdp.experiments.bench_lp.run_bench`, the
``metricdp bench lp`` machinery, ``--data grid``: unit cells, Euclidean, the prior of seed 0), so
a time-out or the memory of one formulation cannot disturb the next; ``seconds`` is the whole
build (LPs, repair and the builder's audit). ``--certify`` adds the certified gap to the exact
LP optimum (the build's own dual bound where it has one, else an independent lower bound,
:mod:`metricdp.lp.certificate`). Prints one markdown table, one row per (side, eps,
formulation), with the machine's load before and after: timings depend on the machine and its
load, so report them with it.

Targets (issue text): 20 x 20 within 3 minutes and 30 x 30 within 20 minutes at eps x cell 0.1,
0.3 and 1, certified to 1e-9.
"""

from __future__ import annotations

import argparse
import os

from metricdp.experiments.bench_lp import FORMULATIONS, markdown_table, run_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default="20,30", help="grid sides k (n = k * k), comma-separated")
    parser.add_argument("--epsilons", default="0.1,0.3,1", help="eps per cell, comma-separated")
    parser.add_argument("--formulations", default="column-generation,dantzig-wolfe",
                        help=f"comma-separated, among {', '.join(FORMULATIONS)}")
    parser.add_argument("--time-limit", type=float, default=1200.0, help="seconds per build")
    parser.add_argument("--certify", type=float, default=120.0, help="seconds for each certified bound (0: none)")
    parser.add_argument("--quick", action="store_true", help="4 x 4 at eps 0.3 only, 60 s a build")
    args = parser.parse_args(argv)
    if args.quick:
        args.sides, args.epsilons, args.time_limit, args.certify = "4", "0.3", 60.0, 30.0
    sides = [int(s) for s in args.sides.split(",")]
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    rows = run_bench(
        [k * k for k in sides],
        ["optimal-expected"],
        [f.strip() for f in args.formulations.split(",")],
        epsilons=[float(e) for e in args.epsilons.split(",")],
        data="grid",
        time_limit=args.time_limit,
        grace=30.0,  # the child is killed 30 s after its limit (a pricing LP may not watch the clock)
        certify=args.certify or None,
        on_start=lambda n, mech, form, eps: print(f"building n = {n} ({mech}, {form}) at eps {eps:g}", flush=True),
    )
    print(markdown_table(rows))
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0 if all(r.status in ("ok", "time-out", "skipped") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
