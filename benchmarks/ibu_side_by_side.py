"""IBU time per iteration: metricdp vs multi-freq-ldpy, side by side in one run.

Run: ``PYTHONPATH=src python benchmarks/ibu_side_by_side.py`` with multi-freq-ldpy installed
(``pip install multi-freq-ldpy``; only this script uses it, it is no dependency of metricdp).

Channels, k = 100, 225, 400, 900 categories, counts of 10 k * 10 reports drawn from a Zipf-like
distribution through the channel (seeded; timing only):

* ``krr``   -- k-RR at eps = 1 (metricdp: the a I + b J structured product; multi-freq-ldpy:
  its GRR matrix, dense, as ``GRR_Aggregator_IBU`` builds it);
* ``oue``   -- the OUE support channel at eps = 1 (structured too; multi-freq-ldpy: its UE matrix);
* ``dense`` -- a row-normalised exponential channel exp(-d/2) on a sqrt(k) x sqrt(k) grid (asymmetric:
  no structure; both dense. multi-freq-ldpy multiplies by A where A^T is due, which gives wrong
  estimates on asymmetric channels but the same cost).

Each side runs ITER updates (ITER / 4 for k = 900; tolerance tiny so that neither stops) after a
warm-up (numba's compilation excluded), and the time is divided by the updates done: metricdp's one-off
input checks (O(k^2), about a millisecond at k = 225 on the shared machine) are spread over them;
REPEATS runs are interleaved (the machine is shared); each cell is the median and the best wall time
(``perf_counter``) and the median CPU time (``process_time``: every thread of the process, so a BLAS
that spins a thread per core shows there), in microseconds per update. ``numpy`` is metricdp without
numba (the ``fast`` extra absent).
"""

from __future__ import annotations

import os
import time

import numpy as np
from multi_freq_ldpy.estimators.Histogram_estimator import IBU as mfl_ibu

from metricdp import _ibu_kernels
from metricdp.estimation import ibu
from metricdp.ldp import OUE
from metricdp.mechanisms.krr import krr_matrix

ITER, REPEATS = 1000, 7
KS = tuple(int(v) for v in os.environ.get("IBU_KS", "100,225,400,900").split(","))


def channels(k: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (metricdp's matrix, multi-freq-ldpy's A)."""
    e = np.exp(1.0)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    a_grr = np.full((k, k), q)
    np.fill_diagonal(a_grr, p)
    a_ue = np.full((k, k), 1 / (e + 1))
    np.fill_diagonal(a_ue, 0.5)
    side = round(k**0.5)
    g = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1).reshape(-1, 2)
    d = np.sqrt(((g[:, None, :] - g[None, :, :]) ** 2).sum(-1))
    dense = np.exp(-d / 2)
    dense /= dense.sum(axis=1, keepdims=True)
    return {"krr": (krr_matrix(k, 1.0), a_grr), "oue": (OUE(k, 1.0).channel(), a_ue), "dense": (dense, dense)}


def ours_run(counts: np.ndarray, m: np.ndarray, n: int) -> tuple[float, float]:
    """Wall and CPU seconds per update."""
    t0, c0 = time.perf_counter(), time.process_time()
    res = ibu(counts, m, tol=1e-300, max_iter=n)
    done = int(res.iterations)
    return (time.perf_counter() - t0) / done, (time.process_time() - c0) / done


def theirs_run(a: np.ndarray, freq: np.ndarray, n: int) -> tuple[float, float]:
    """Wall and CPU seconds per update."""
    t0, c0 = time.perf_counter(), time.process_time()
    mfl_ibu(len(freq), a, freq, n, 1e-300, "max_abs")  # stops early only at an exact fixed point (favours it)
    return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n


def cell(times: list[tuple[float, float]]) -> str:
    """Median / best wall, median CPU, in microseconds."""
    wall, cpu = np.array(times).T * 1e6
    return f"{np.median(wall):.1f} / {wall.min():.1f}, CPU {np.median(cpu):.1f}"


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print("| k | channel | metricdp (numba) wall median / best, CPU | metricdp numpy "
          "| multi-freq-ldpy | speed-up (medians) wall / CPU |")
    print("|---|---|---|---|---|---|")
    for k in KS:
        for name, (m, a) in channels(k).items():
            prior = 1.0 / np.arange(1, k + 1)
            prior /= prior.sum()
            x = rng.choice(k, size=10 * k * 10, p=prior)
            cdf = np.cumsum(m, axis=1)
            y = np.minimum((rng.random(x.size)[:, None] > cdf[x]).sum(axis=1), k - 1)
            counts = np.bincount(y, minlength=k).astype(np.float64)
            freq = counts / counts.sum()
            mfl_ibu(k, a, freq, 2, 1e-300, "max_abs")  # compile
            ibu(counts, m, tol=1e-300, max_iter=2)
            kernels = _ibu_kernels.KERNELS
            n_iter = ITER if k <= 400 else ITER // 4
            ours, plain, theirs = [], [], []

            for _ in range(REPEATS):
                ours.append(ours_run(counts, m, n_iter))
                _ibu_kernels.KERNELS = None
                try:
                    plain.append(ours_run(counts, m, n_iter))
                finally:
                    _ibu_kernels.KERNELS = kernels
                theirs.append(theirs_run(a, freq, n_iter))
            cells = [cell(v) for v in (ours, plain, theirs)]
            up = np.median(theirs, axis=0) / np.median(ours, axis=0)
            print(f"| {k} | {name} | {' | '.join(cells)} | {up[0]:.1f}x / {up[1]:.1f}x |", flush=True)
    print(f"uptime: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
