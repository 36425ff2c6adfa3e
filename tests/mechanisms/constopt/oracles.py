"""Oracles shared by the ConstOPTMech tests: closed forms and naive dense LPs.

The exponential mechanism in closed form, OPTMech solved naively (dense
``scipy.optimize.linprog``), the paper's reduced LP written naively (dense, one Python loop
per row family) and the black-hole space of the paper's Lemma 1.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linprog

from metricdp.spaces import MetricSpace


def em_matrix(d: np.ndarray, epsilon: float) -> np.ndarray:
    """The exponential mechanism at epsilon (inner epsilon / 2), closed form."""
    k = np.exp(-epsilon / 2 * d)
    return k / k.sum(axis=1, keepdims=True)


def loss(m: np.ndarray, d: np.ndarray) -> np.ndarray:
    return (m * d).sum(axis=1)


def quantile95(values: np.ndarray) -> float:
    return float(np.sort(values)[math.ceil(0.95 * len(values) - 1e-9) - 1])


def opt_worst_case(d: np.ndarray, epsilon: float) -> float:
    """OPTMech (worst case) by a dense linprog: variables M (row-major) and k."""
    n = len(d)
    nv = n * n + 1
    rows, rhs = [], []
    for u in range(n):  # sum_v d(u,v) M[u,v] - k <= 0
        r = np.zeros(nv)
        r[u * n : (u + 1) * n] = d[u]
        r[-1] = -1
        rows.append(r)
        rhs.append(0.0)
    for u in range(n):
        for v in range(n):
            if u == v:
                continue
            for w in range(n):  # M[u,w] - e^{eps d(u,v)} M[v,w] <= 0
                r = np.zeros(nv)
                r[u * n + w] = 1
                r[v * n + w] = -math.exp(epsilon * d[u, v])
                rows.append(r)
                rhs.append(0.0)
    eq = np.zeros((n, nv))
    for u in range(n):
        eq[u, u * n : (u + 1) * n] = 1
    c = np.zeros(nv)
    c[-1] = 1
    res = linprog(c, A_ub=np.array(rows), b_ub=rhs, A_eq=eq, b_eq=np.ones(n), bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def naive_paper_lp(d: np.ndarray, free: np.ndarray, level: float, lam: float) -> float:
    """The paper's reduced LP (Theorem 1 proof) written out naively, dense: optimum k."""
    n = len(d)
    pairs = [(u, w) for w in range(n) for u in range(n) if free[u, w]]
    index = {p: n + i for i, p in enumerate(pairs)}
    nv = n + len(pairs) + 1

    def entry(u: int, w: int) -> dict[int, float]:  # M_full[u, w] as a linear form
        return {index[(u, w)]: 1.0} if free[u, w] else {w: math.exp(-level * d[u, w])}

    rows, rhs = [], []

    def add(coefs: dict[int, float], b: float) -> None:
        r = np.zeros(nv)
        for j, val in coefs.items():
            r[j] += val
        rows.append(r)
        rhs.append(b)

    for w in range(n):
        eighteen: dict[int, float] = {nv - 1: -1.0}
        twenty: dict[int, float] = {}
        for v in range(n):
            for j, val in entry(w, v).items():
                eighteen[j] = eighteen.get(j, 0.0) + val * (d[w, v] + lam)
                twenty[j] = twenty.get(j, 0.0) - val
        add(eighteen, 0.0)  # (18)
        add(twenty, -1.0)  # (20): row sum >= 1
    for w in range(n):
        inside = [u for u in range(n) if free[u, w]]
        outside = [x for x in range(n) if not free[x, w]]
        for u in inside:
            for v in inside:
                if u != v:  # (22)
                    add({index[(u, w)]: 1.0, index[(v, w)]: -math.exp(level * d[u, v])}, 0.0)
            if outside:  # (25) and (26)
                hi = min(math.exp(level * (d[u, x] - d[x, w])) for x in outside)
                lo = max(math.exp(-level * (d[x, w] + d[x, u])) for x in outside)
                add({index[(u, w)]: 1.0, w: -hi}, 0.0)
                add({w: lo, index[(u, w)]: -1.0}, 0.0)
    c = np.zeros(nv)
    c[-1] = 1
    bounds = [(0, None)] * (nv - 1) + [(None, None)]
    res = linprog(c, A_ub=np.array(rows), b_ub=rhs, bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def black_hole(n: int) -> MetricSpace:
    """One point at distance 1 from n - 1 points that are within 1e-3 of each other."""
    x = np.linspace(0.0, 1e-3, n - 1)
    d = np.zeros((n, n))
    d[: n - 1, : n - 1] = np.abs(x[:, None] - x[None, :])
    d[-1, :-1] = d[:-1, -1] = 1.0
    return MetricSpace.from_distances(d)

