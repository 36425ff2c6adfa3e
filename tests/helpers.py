"""Test helpers, independent of metricdp's own code paths.

``brute_force_epsilon`` is a second, deliberately naive audit (a Python loop over
output columns) used as an oracle for :mod:`metricdp.audit` and for builders.
"""

from __future__ import annotations

import numpy as np

from metricdp.spaces import MetricSpace


def brute_force_epsilon(matrix: np.ndarray, distances: np.ndarray) -> float:
    """max over w, u != v of log(M[u,w] / M[v,w]) / d(u,v); inf when M[u,w] > 0 = M[v,w].

    ``matrix`` is (n, n) or (n, m) (a separate output set: w ranges over the m outputs).
    """
    n = matrix.shape[0]
    worst = 0.0
    for w in range(matrix.shape[1]):
        for u in range(n):
            for v in range(n):
                if u == v or matrix[u, w] == 0:
                    continue
                if matrix[v, w] == 0:
                    return float("inf")
                worst = max(worst, float(np.log(matrix[u, w] / matrix[v, w]) / distances[u, v]))
    return worst


def random_space(seed: int, n: int, dim: int = 2, clustered: bool = False) -> MetricSpace:
    """Gaussian points (optionally a spread part plus a tight cluster), Euclidean."""
    g = np.random.default_rng(seed)
    if clustered:
        k = n // 2
        x = np.r_[g.normal(0, 1, (n - k, dim)), g.normal(4, 0.05, (k, dim))]
    else:
        x = g.normal(0, 1, (n, dim))
    return MetricSpace.from_points(x)


def assert_private(mechanism, epsilon: float | None = None, rtol: float = 1e-9) -> None:
    """The mechanism's matrix passes the naive audit at its epsilon (small n only)."""
    eps = mechanism.epsilon if epsilon is None else epsilon
    got = brute_force_epsilon(np.asarray(mechanism.matrix), np.asarray(mechanism.space.distances))
    assert got <= eps * (1 + rtol), f"{mechanism!r}: naive audit gives {got!r} > {eps!r}"
    assert np.allclose(np.asarray(mechanism.matrix).sum(axis=1), 1.0, atol=1e-9)
