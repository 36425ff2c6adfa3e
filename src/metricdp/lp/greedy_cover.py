r"""A greedy feasible flow for the pricing of :mod:`.colgen`: most outputs proved non-improving without an LP.

One concept: the pricing test of :func:`.colgen.covers` asks, for one output's column g, for
a flow from the surpluses (:math:`g_v > 0`, capacity :math:`g_v`) to the deficits
(:math:`g_k < 0`, need :math:`-g_k`) in which a unit delivered to k costs the surplus v
:math:`f_{kv} = e^{\lambda d(k,v)}` units of its capacity. *Any* feasible flow is a valid
certificate: what it leaves uncovered is :math:`\lVert r \rVert_1` of :math:`g + r \in C^*`
(the proof is in :mod:`.colgen`). The maximum flow is an LP; on a grid most outputs are
covered with room to spare, and the LPs of their flows (hundreds of thousands of arcs a
pricing on a 14 x 14 grid) cost HiGHS far more than the answer needs.

**The greedy flow** (:func:`greedy_flow`). Deficits in order of decreasing need; each takes
from the surpluses nearest to it first (increasing d, the best exchange rate
:math:`1/f_{kv}`), :math:`t = \min(\text{need left}, \text{capacity left} / f_{kv})`, until its
need is met or no surplus is left. Every step keeps the flow feasible (in exact arithmetic:
each deficit receives at most its need, each surplus pays at most its capacity), so the flow
is a certificate whatever it leaves uncovered; :func:`.colgen.covers` then asks the LP only
about the outputs it leaves with more than the tolerance. The rounding of the running
remainders is absorbed by the same final scaling onto the needs and capacities as the LP's
flows (:func:`.colgen.fit`), so the certificate holds in floating point.

It costs :math:`O(n)` per deficit only in the worst case: a deficit stops at the first
surpluses that cover it, which on a grid are a few neighbours, and the loop ends when no
capacity is left. The loop runs compiled where
numba is installed (:data:`KERNEL`); the pure Python function is its reference and the
fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["KERNEL", "greedy_flow", "load_kernel"]

Array = NDArray[np.float64]


def _greedy(g: Array, floor: float, order: NDArray[np.intp], factor: Array, k_out: NDArray[np.intp],
            v_out: NDArray[np.intp], t_out: Array) -> int:
    """The loop of :func:`greedy_flow`: writes the arcs into the three buffers (each of
    length at least n * n) and returns their count."""
    n = g.shape[0]
    cap = np.zeros(n)
    need = np.zeros(n)
    for i in range(n):
        if g[i] > 0.0:
            cap[i] = g[i]
        elif g[i] < -floor:
            need[i] = -g[i]
    deficits = np.argsort(-need, kind="mergesort")
    surpluses = 0
    for i in range(n):
        if cap[i] > 0.0:
            surpluses += 1
    count = 0
    for j in range(n):
        k = deficits[j]
        left = need[k]
        if left <= 0.0 or surpluses == 0:
            break
        for r in range(n):
            v = order[k, r]
            c = cap[v]
            if c <= 0.0:
                continue
            f = factor[k, v]
            t = min(left, c / f)
            if t <= 0.0:
                continue
            k_out[count] = k
            v_out[count] = v
            t_out[count] = t
            count += 1
            left -= t
            cap[v] = max(0.0, c - t * f)
            if cap[v] <= 0.0:
                surpluses -= 1
                if surpluses == 0:
                    break
            if left <= 0.0:
                break
    return count


#: The compiled :func:`_greedy` (None without numba, or until :func:`load_kernel`).
KERNEL: Any = None
_LOADED = False


def load_kernel() -> Any:
    """The compiled loop (once; None where numba is missing): numba is imported on first use."""
    global KERNEL, _LOADED
    if not _LOADED:
        from .._numba import njit

        KERNEL = None if njit is None else njit(cache=True, nogil=True)(_greedy)
        _LOADED = True
    return KERNEL


def greedy_flow(g: Array, floor: float, order: NDArray[np.intp],
                factor: Array) -> tuple[NDArray[np.intp], NDArray[np.intp], Array]:
    r"""A feasible flow for the column ``g`` (n,) (module docstring): arcs (deficit k,
    surplus v, flow t), global indices, before the final scaling.

    ``floor``: deficits of need at most ``floor`` are left out (:func:`.colgen.covers` counts
    them in the shortfall); ``order`` (n, n): row k lists the points by increasing distance
    from k (ties in any order); ``factor`` (n, n): :math:`f_{kv}`.
    """
    n = g.shape[0]
    size = n * n
    k_out, v_out, t_out = np.empty(size, np.intp), np.empty(size, np.intp), np.empty(size)
    run = load_kernel() or _greedy
    count = int(run(np.ascontiguousarray(g, np.float64), float(floor), order, factor, k_out, v_out, t_out))
    return k_out[:count].copy(), v_out[:count].copy(), t_out[:count].copy()
