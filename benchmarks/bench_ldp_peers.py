"""Every local-DP path against multi-freq-ldpy, side by side in one run: IBU per update, client releases.

Run (metricdp's interpreter, with the peer in a virtual environment of its own)::

    python3 -m venv /tmp/mfl-venv && /tmp/mfl-venv/bin/pip install multi-freq-ldpy numpy
    PYTHONPATH=src python benchmarks/bench_ldp_peers.py --peer-python /tmp/mfl-venv/bin/python

``--peer-python`` (or the environment variable ``MFL_PYTHON``) names the peer's interpreter; without
it, or when that interpreter cannot import multi-freq-ldpy, the peer's columns read "absent" and the
reason is printed once. multi-freq-ldpy is no dependency of metricdp and never enters its environment:
this same file runs as the peer's worker (``--worker``, numpy and multi-freq-ldpy only), answering one
JSON request per line, so both sides build the same channel and data from the same recipe and seed.

Rows (each side times itself: wall ``perf_counter`` and the process's CPU ``process_time``, which
counts every thread, so a BLAS that spins extra threads shows in CPU):

* ``ibu`` -- time per IBU update on k = 10, 100, 1,000, 10,000 categories (``--ks``), each side
  running the same number of updates with a tolerance that never stops it, after a warm-up
  (numba's compilation excluded). metricdp's figure includes its one-off input checks spread over
  the updates. Channels, each given to both sides as a dense k x k matrix:

  - ``krr``: k-RR at eps 1; metricdp detects the a I + b J structure (every LDP support channel
    has it) and updates in O(k), multi-freq-ldpy uses the dense matrix as ``GRR_Aggregator_IBU`` does;
  - ``line``: a row-normalised exp(-|x - y| / 4) channel on a line (a row scaling of a
    Toeplitz matrix); from 1,000 categories metricdp detects it
    (``metricdp._toeplitz.lattice_structure``) and multiplies by FFT, below that and for
    multi-freq-ldpy it is dense;
  - ``grid``: a row-normalised exp(-d / 2) channel on a sqrt(k) x sqrt(k) grid (Euclidean d;
    block Toeplitz), square k only: structured for metricdp from 1,000 categories as ``line``;
  - ``dense``: a row-normalised exp(-d / 2) channel on k random points of a sqrt(k) x sqrt(k)
    square (seeded): no structure, dense for both (metricdp: one compiled pass over M an update,
    shared by two threads from ``metricdp.estimation.IBU_THREADS_MIN_ENTRIES`` entries of M).

  multi-freq-ldpy's ``IBU`` multiplies by its matrix A where the transpose is due; it gets
  A = M^T so that its estimates are right (the cost is the same).
* ``ss`` / ``oue`` -- client release of N users (subset selection with its optimal subset size,
  optimized unary encoding; eps 1): metricdp's ``privatize`` from the OS secure source (the
  default for real data) against multi-freq-ldpy's ``SS_Client`` / ``UE_Client`` (numba,
  numpy's seeded Mersenne Twister), called once per user as its documentation does.
* ``hh`` -- heavy hitters over a domain too large to enumerate (metricdp only: the peer has no
  such protocol): ``metricdp.ldp.heavy_hitters.PrefixExtendingMethod`` on N users, its
  estimation time and its error against the exact-domain OLH estimate on the same population.

multi-freq-ldpy's ``IBU`` calls BLAS through numba with the pools as installed (a thread per core);
on a busy machine the spinning threads cost it CPU, so ``--peer-blas-threads 1`` runs it bounded as
metricdp's products are (metricdp's compiled IBU calls no BLAS).

Each row runs ``--repeats`` interleaved rounds (the machine may be shared) and prints the medians.
"ratio" is the peer's median over metricdp's (above 1: metricdp is faster). Timings depend on the
machine and its load: the script prints the load average before and after.
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
from typing import Any

import numpy as np

EPS = 1.0
SEED = 0


# --------------------------------------------------------------------------- shared recipes (both sides)
def channel(name: str, k: int) -> np.ndarray:
    """The k x k channel ``name`` (rows: true values, each summing to 1)."""
    if name == "krr":
        e = np.exp(EPS)
        m = np.full((k, k), 1.0 / (e + k - 1))
        np.fill_diagonal(m, e / (e + k - 1))
        return m
    # in place: one k x k array at a time (800 MB at k = 10,000)
    if name == "line":
        x = np.arange(k, dtype=np.float64)
        m = np.subtract.outer(x, x)
        np.abs(m, out=m)
        m /= -4.0
    elif name == "grid":
        side = round(k**0.5)
        gx, gy = (v.ravel().astype(np.float64) for v in np.meshgrid(np.arange(side), np.arange(side), indexing="ij"))
        m = np.subtract.outer(gx, gx)
        m **= 2
        t = np.subtract.outer(gy, gy)
        t **= 2
        m += t
        del t
        np.sqrt(m, out=m)
        m /= -2.0
    elif name == "dense":
        pts = np.random.default_rng(SEED).random((k, 2)) * k**0.5
        m = np.subtract.outer(pts[:, 0], pts[:, 0])
        m **= 2
        t = np.subtract.outer(pts[:, 1], pts[:, 1])
        t **= 2
        m += t
        del t
        np.sqrt(m, out=m)
        m /= -2.0
    else:
        raise ValueError(name)
    np.exp(m, out=m)
    m /= m.sum(axis=1, keepdims=True)
    return m


def frequencies(m: np.ndarray) -> np.ndarray:
    """Observed report frequencies: 10 k reports through m from a Zipf-like population (seeded)."""
    k = m.shape[0]
    rng = np.random.default_rng(SEED)
    prior = 1.0 / np.arange(1, k + 1)
    prior /= prior.sum()
    x = np.sort(rng.choice(k, size=10 * k, p=prior))
    y = np.empty(x.size, dtype=np.int64)
    for v in np.unique(x):  # one row's CDF at a time: never a (reports, k) array
        at = x == v
        y[at] = np.minimum(np.searchsorted(np.cumsum(m[v]), rng.random(int(at.sum())), side="right"), k - 1)
    c = np.bincount(y, minlength=k).astype(np.float64)
    return c / c.sum()


def population(k: int, n: int) -> np.ndarray:
    """n true values in 0..k-1 (Zipf-like, seeded)."""
    prior = 1.0 / np.arange(1, k + 1)
    return np.random.default_rng(SEED).choice(k, size=n, p=prior / prior.sum())


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def settle(seconds: float = 0.5) -> None:
    """Idle between the two sides: a BLAS pool keeps its threads spinning for a while after a call
    (OpenBLAS's thread timeout), which would run on the cores the next side is timed on."""
    time.sleep(seconds)


def timed(fn: Any, *args: Any) -> tuple[float, float, Any]:
    """Wall and CPU seconds of ``fn(*args)`` (CPU: the whole process, every thread), and its value."""
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return time.perf_counter() - w, time.process_time() - c, out


def _per_user(client: Any, values: list[int], k: int) -> list[Any]:
    return [client(v, k, EPS) for v in values]


# --------------------------------------------------------------------------- the peer's side
def worker() -> None:
    """Answer requests on stdin, one JSON object a line, with the peer's timings."""
    from multi_freq_ldpy.estimators.Histogram_estimator import IBU
    from multi_freq_ldpy.pure_frequency_oracles.SS import SS_Client
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Client

    cache: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
    IBU(2, np.eye(2), np.array([0.5, 0.5]), 2, 1e-300, "max_abs")  # compile
    SS_Client(0, 10, EPS)
    UE_Client(0, 10, EPS)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        k = int(req["k"])
        if req["task"] == "ibu":
            key = (req["channel"], k)
            if key not in cache:
                cache.clear()
                m = channel(req["channel"], k)
                cache[key] = (np.ascontiguousarray(m.T), frequencies(m))
                del m
            a, f = cache[key]
            n = int(req["updates"])
            wall, cpu, _ = timed(IBU, k, a, f, n, 1e-300, "max_abs")
            out = {"wall": wall / n, "cpu": cpu / n}
        else:
            client = SS_Client if req["task"] == "ss" else UE_Client
            values = [int(v) for v in population(k, int(req["n"]))]
            wall, cpu, _ = timed(_per_user, client, values, k)
            out = {"wall": wall / len(values), "cpu": cpu / len(values)}
        print(json.dumps(out), flush=True)


def _thread_env(threads: int | None) -> dict[str, str]:
    """Environment variables that bound the BLAS and OpenMP pools of a process (none: unbounded)."""
    if threads is None:
        return {}
    return {v: str(threads) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


class Peer:
    """The peer's worker process, or the reason it is absent."""

    def __init__(self, python: str | None, blas_threads: int | None = None) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self._err: Any = None
        self.absent = "no peer interpreter given (--peer-python or MFL_PYTHON)" if not python else ""
        if not python:
            return
        self._err = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: the worker never blocks on it
        try:
            self.proc = subprocess.Popen(
                [python, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                text=True, env={**os.environ, "PYTHONPATH": "", **_thread_env(blas_threads)})
        except OSError as exc:
            self.absent = f"{python} could not run: {exc}"
            return
        assert self.proc.stdout is not None
        if not self.proc.stdout.readline():
            self._err.seek(0)
            last = self._err.read().strip().splitlines()[-1:]
            self.absent = f"{python} could not start the worker: {last[0] if last else 'no message'}"
            self.close()

    def ask(self, **req: Any) -> dict[str, float] | None:
        if self.proc is None:
            return None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        if self.proc is not None:
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
            self.proc.wait(timeout=60)
            self.proc = None
        if self._err is not None:
            self._err.close()
            self._err = None


# --------------------------------------------------------------------------- metricdp's side
def ours_ibu(m: np.ndarray, f: np.ndarray, n: int) -> dict[str, float]:
    from metricdp.estimation import ibu

    wall, cpu, res = timed(lambda: ibu(f, m, tol=1e-300, max_iter=n))
    done = int(res.iterations)
    return {"wall": wall / done, "cpu": cpu / done}


def ours_release(task: str, k: int, n: int) -> dict[str, float]:
    from metricdp.ldp import OUE, SubsetSelection

    oracle = SubsetSelection(k, EPS) if task == "ss" else OUE(k, EPS)
    values = population(k, n)
    wall, cpu, _ = timed(oracle.privatize, values)
    return {"wall": wall / n, "cpu": cpu / n}


def hh_population(bits: int, n: int) -> np.ndarray:
    """n items of ``bits`` bits: 1,000 random items with Zipf(1.1) weights (seeded)."""
    rng = np.random.default_rng(SEED)
    pool = rng.choice(1 << bits, size=1000, replace=False)
    w = 1.0 / np.arange(1, 1001) ** 1.1
    return pool[rng.choice(1000, size=n, p=w / w.sum())]


def heavy_hitter_rows(quick: bool) -> None:
    """PEM against the exact-domain OLH (where the domain can be listed): CPU and error on the true top 10."""
    from metricdp.ldp import OLH, PrefixExtendingMethod

    n = 20_000 if quick else 100_000
    print("\n| heavy hitters: items, users, eps | PEM CPU s (groups) | PEM max error, top 10 (found) "
          "| exact-domain OLH CPU s | exact-domain max error, top 10 |\n|---|---|---|---|---|")
    for bits in (12,) if quick else (12, 24):
        x = hh_population(bits, n)
        items, counts = np.unique(x, return_counts=True)
        top = items[np.argsort(-counts, kind="stable")[:10]]
        truth = {int(i): c / n for i, c in zip(items, counts, strict=True)}
        for eps in (1.0, 4.0):
            pem = PrefixExtendingMethod(bits, eps, top=16)
            _, cpu, hh = timed(lambda p=pem, x=x: p.identify(p.privatize(x)))
            found = [int(i) for i in top if i in set(hh.items.tolist())]
            est = dict(zip(hh.items.tolist(), hh.estimates.tolist(), strict=True))
            err = max(abs(est.get(int(i), 0.0) - truth[int(i)]) for i in top)
            cells = [f"{cpu:.2f} ({pem.groups})", f"{err:.4f} ({len(found)}/10)"]
            if bits <= 16:
                olh = OLH(1 << bits, eps)
                _, cpu2, full = timed(lambda o=olh, x=x: o.estimate(o.support(o.privatize(x)), n))
                cells += [f"{cpu2:.2f}", f"{max(abs(full[int(i)] - truth[int(i)]) for i in top):.4f}"]
            else:
                cells += [f"not run: {1 << bits:,} categories to list", "-"]
            print(f"| 2^{bits}, {n:,}, {eps:g} | " + " | ".join(cells) + " |", flush=True)


def updates_for(name: str, k: int, quick: bool) -> int:
    """Updates per timed run: enough to dominate the one-off costs, few enough for k^2 products."""
    if quick:
        return 20
    if name == "krr" and k <= 1000:
        return 2000
    return 2000 if k <= 300 else 200 if k <= 3000 else 20


def row(label: str, ours: list[dict[str, float]], theirs: list[dict[str, float] | None], unit: float) -> str:
    def med(v: list[dict[str, float]], key: str) -> float:
        return statistics.median(x[key] for x in v) * unit

    cells = [f"{med(ours, 'wall'):.2f} / {med(ours, 'cpu'):.2f}"]
    if all(t is not None for t in theirs):
        th = [t for t in theirs if t is not None]
        cells.append(f"{med(th, 'wall'):.2f} / {med(th, 'cpu'):.2f}")
        cells.append(f"{med(th, 'wall') / med(ours, 'wall'):.2f}x / {med(th, 'cpu') / med(ours, 'cpu'):.2f}x")
    else:
        cells += ["absent", "-"]
    return f"| {label} | " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer-python", default=os.environ.get("MFL_PYTHON"),
                    help="the interpreter that has multi-freq-ldpy (default: $MFL_PYTHON)")
    ap.add_argument("--ks", default="10,100,1000,10000", help="IBU category counts")
    ap.add_argument("--channels", default="krr,line,grid,dense")
    ap.add_argument("--release-ks", default="10,100,1000")
    ap.add_argument("--users", type=int, default=20_000, help="users per client release")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--peer-blas-threads", type=int, default=None,
                    help="bound the peer's BLAS pools (default: as installed, one thread per core)")
    ap.add_argument("--quick", action="store_true", help="smoke sizes (k <= 100, few updates, 2 rounds)")
    ap.add_argument("--no-hh", action="store_true", help="skip the heavy-hitter rows")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return
    ks = [int(v) for v in args.ks.split(",")]
    rks = [int(v) for v in args.release_ks.split(",")]
    users, repeats = args.users, args.repeats
    if args.quick:
        ks, rks, users, repeats = [k for k in ks if k <= 100], [k for k in rks if k <= 100], 2000, 2
    peer = Peer(args.peer_python, args.peer_blas_threads)
    if args.peer_blas_threads:
        print(f"multi-freq-ldpy's BLAS pools bounded to {args.peer_blas_threads} thread(s)")
    if peer.absent:
        print(f"multi-freq-ldpy rows skipped: {peer.absent}")
    from metricdp._threads import blas_threads  # noqa: F401  (imports threadpoolctl before timing)

    print(f"load average (1, 5, 15 min): {load()} at {time.strftime('%H:%M:%S UTC', time.gmtime())}")
    print("\n| IBU: channel, k (updates) | metricdp wall / CPU, us per update | multi-freq-ldpy wall / CPU "
          "| ratio wall / CPU |\n|---|---|---|---|")
    for k in ks:
        for name in args.channels.split(","):
            if name == "grid" and round(k**0.5) ** 2 != k:
                continue
            m = channel(name, k)
            f = frequencies(m)
            n = updates_for(name, k, args.quick)
            ours_ibu(m, f, 2)  # warm-up: numba's compilation
            ours, theirs = [], []
            for _ in range(repeats):
                settle()
                ours.append(ours_ibu(m, f, n))
                settle()
                theirs.append(peer.ask(task="ibu", channel=name, k=k, updates=n))
            del m
            print(row(f"{name}, {k} ({n})", ours, theirs, 1e6), flush=True)
    print("\n| release: oracle, k | metricdp wall / CPU, us per user | multi-freq-ldpy wall / CPU "
          "| ratio wall / CPU |\n|---|---|---|---|")
    for k in rks:
        for task in ("ss", "oue"):
            ours, theirs = [], []
            for _ in range(repeats):
                ours.append(ours_release(task, k, users))
                theirs.append(peer.ask(task=task, k=k, n=users))
            print(row(f"{task}, {k} ({users} users)", ours, theirs, 1e6), flush=True)
    peer.close()
    if not args.no_hh:
        heavy_hitter_rows(args.quick)
    print(f"\nload average (1, 5, 15 min): {load()} at {time.strftime('%H:%M:%S UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
