r"""The exponential mechanism and the weighted exponential mechanism.

Imola, Kasiviswanathan, White, Aggarwal, Teissier, *Balancing Utility and Scalability in
Metric Differential Privacy*, UAI 2022: Section 3.1 (exponential mechanism) and
Proposition 1 (weighted exponential mechanism).

.. math::

    M[u,v] = \frac{Y_v\, e^{-\varepsilon' d(u,v)/2}}{\sum_w Y_w\, e^{-\varepsilon' d(u,w)/2}},
    \qquad Y_v > 0,

with :math:`Y \equiv 1` for the plain mechanism. For any :math:`u, v, w`,

.. math::

    \frac{M[u,w]}{M[v,w]}
    = e^{-\varepsilon'(d(u,w) - d(v,w))/2}\,\frac{Z_v}{Z_u}
    \le e^{\varepsilon' d(u,v)/2}\, e^{\varepsilon' d(u,v)/2} = e^{\varepsilon' d(u,v)},

by the triangle inequality, once for the numerator and once term by term for the
normalisers :math:`Z_u = \sum_w Y_w e^{-\varepsilon' d(u,w)/2}`. So the mechanism at inner
parameter :math:`\varepsilon' = \varepsilon` is :math:`\varepsilon`-mDP. The audited level
is often lower; ``calibrate=True`` then raises :math:`\varepsilon'` in
:math:`[\varepsilon, 2\varepsilon]` to the largest value whose matrix passes the exact audit
at :math:`\varepsilon` (:func:`~metricdp.mechanisms.calibration.largest_passing`), which
lowers every element's loss (the loss of row u is the mean of d(u, .) under a tilted
distribution, non-increasing in :math:`\varepsilon'`).

**A separate output set** (``outputs=``, :mod:`metricdp.outputs`; Chatzikokolakis et al.,
"Broadening the scope of differential privacy using metrics", PETS 2013, Section 5, where
the exponential mechanism ranges over any output set): :math:`M[x, y] \propto
e^{-\varepsilon' d(x,y)/2}` for inputs x in the space and outputs y in Y. The proof above
uses the triangle inequality only in the form :math:`|d(u,y) - d(v,y)| \le d(u,v)` for
inputs u, v and an output y (numerator: :math:`-(d(u,w) - d(v,w)) \le d(u,v)`; normalisers:
:math:`e^{-\varepsilon' d(v,y)/2} \ge e^{-\varepsilon' d(u,v)/2} e^{-\varepsilon'
d(u,y)/2}` term by term, so :math:`Z_v \ge e^{-\varepsilon' d(u,v)/2} Z_u`). That *cross
triangle inequality* holds whenever X and Y are points of one metric space
(:meth:`~metricdp.outputs.OutputSet.from_points`); for given cross distances it is
checked (:func:`~metricdp.outputs.cross_triangle_violation`) and a violation is refused
naming the worst (u, v, y). The rounding slack of that check (1e-9 relative) is what the
final audit at :math:`\varepsilon` allows too, and :func:`~.base.certify` audits the
matrix over the inputs for every output before it is returned.

**Audit at scale.** Above :data:`~metricdp.audit_structured.DENSE_MAX_N` points, on a space
whose distances are a coordinate metric recomputed bit for bit from its points
(:func:`proven_metric`), the plain mechanism (no weights, no output set, not calibrated)
is certified by the kernel proof (:func:`~metricdp.audit_structured.kernel_audit`, O(n^2)):
the matrix is checked entry by entry to be the kernel above, and the triangle inequality of
the metric does the rest. Elsewhere the dense audit runs; ``info["audit"]`` says which.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_epsilon
from ..audit import audit_epsilon
from ..audit_structured import DENSE_MAX_N, PROVEN_METRICS, kernel_audit
from ..errors import ValidationError
from ..outputs import CROSS_TRIANGLE_RTOL, OutputSet, check_outputs
from ..spaces import MetricSpace, check_space, pairwise_distances
from .base import Mechanism, certify
from .calibration import largest_passing
from .dense_plan import check_dense_plan, plan_dense
from .registry import declared

__all__ = ["exponential", "exponential_matrix", "weighted_exponential"]

_TINY = float(np.finfo(np.float64).tiny)


def _check_weights(weights: ArrayLike, n: int) -> NDArray[np.float64]:
    """Positive finite weights of length n (the error names the first bad index)."""
    try:
        y = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError("weights must be a numeric vector") from None
    if y.shape != (n,):
        raise ValidationError(f"weights must have shape ({n},) (one per point), got {y.shape}")
    bad = np.flatnonzero(~np.isfinite(y) | (y <= 0))
    if bad.size:
        i = int(bad[0])
        raise ValidationError(f"weights must be finite and > 0, but weights[{i}] = {float(y[i])!r}")
    return y


def _check_representable(matrix: NDArray[np.float64], name: str, epsilon: float) -> None:
    """Refuse a matrix whose true probabilities underflowed float64.

    A probability below the smallest normal float (zero or subnormal) beside a normal one
    in the same column makes the float matrix fail the audit (a positive entry over a
    zero is infinitely far from eps-mDP) even though the true mechanism is private; say
    so clearly instead of leaving it to the audit's PrivacyViolationError.
    """
    small = matrix < _TINY
    if not small.any():
        return
    col_ok = np.asarray((matrix >= _TINY).any(axis=0))
    bad = np.argwhere(small & col_ok[None, :])
    if bad.size:
        u, w = (int(x) for x in bad[0])
        raise ValidationError(
            f"{name}: epsilon={epsilon!r} is too large for this space: Pr[M({u}) = {w}] underflows "
            f"float64 (below {_TINY:.3g}), so the matrix cannot represent the mechanism; use a smaller "
            "epsilon or rescale the distances"
        )


def exponential_matrix(
    distances: ArrayLike, inner_epsilon: float, weights: ArrayLike | None = None
) -> NDArray[np.float64]:
    r"""The (weighted) exponential mechanism's matrix at inner parameter ``inner_epsilon``.

    .. math:: M[u,v] \propto Y_v\, e^{-\varepsilon' d(u,v)/2}

    (Imola et al., UAI 2022, Section 3.1 and Proposition 1). Computed in log space and
    shifted by each row's largest log-weight (for Y = 1: the row's smallest distance), so
    nothing overflows and the largest entry of every row is exact before normalising.

    Parameters
    ----------
    distances : array of shape (n, n), or (n, m) from n inputs to m outputs
    inner_epsilon : float
        :math:`\varepsilon' > 0`; the matrix is :math:`\varepsilon'`-mDP (for (n, m)
        distances: when they meet the cross triangle inequality, module docstring).
    weights : array of shape (m,), optional
        Positive weights Y of the outputs (default 1).

    Returns
    -------
    ndarray of shape (n, m)
        Row-stochastic.

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([[0.0, 2.0], [2.0, 0.0]])
    >>> m = exponential_matrix(d, 1.0)
    >>> bool(np.isclose(m[0, 0], 1 / (1 + np.exp(-1.0))))
    True
    """
    inner_epsilon = check_epsilon(inner_epsilon, "inner_epsilon")
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or 0 in d.shape:
        raise ValidationError(f"distances must be a non-empty 2-d matrix, got shape {d.shape}")
    logits = -0.5 * inner_epsilon * d
    if weights is not None:
        logits = logits + np.log(_check_weights(weights, d.shape[1]))[None, :]
    logits -= logits.max(axis=1, keepdims=True)
    k = np.exp(logits)
    return k / k.sum(axis=1, keepdims=True)


def _check_cross(space: MetricSpace, outputs: OutputSet) -> None:
    """Refuse cross distances that break |d(u,y) - d(v,y)| <= d(u,v), naming the worst triple."""
    worst = outputs.triangle_violation(space)
    if worst.ratio > 1.0 + CROSS_TRIANGLE_RTOL:
        u, v, y = worst.u, worst.v, worst.y
        raise ValidationError(
            f"exponential: the output distances break the triangle inequality with the space's metric: "
            f"|d({space.labels[u]!r}, {outputs.labels[y]!r}) - d({space.labels[v]!r}, {outputs.labels[y]!r})| = "
            f"{worst.ratio:.6g} x d({space.labels[u]!r}, {space.labels[v]!r}); the exponential mechanism is "
            "eps-mDP only when it is at most 1 (give the outputs as points of the space's metric)"
        )


def _build(
    space: MetricSpace, epsilon: float, weights: NDArray[np.float64] | None, calibrate: bool, name: str,
    outputs: OutputSet | None = None,
) -> Mechanism:
    space = check_space(space)
    outputs = check_outputs(outputs, space)
    if outputs is None:
        check_dense_plan(plan_dense("exponential", space.n))
    if outputs is not None:
        _check_cross(space, outputs)
    d = space.distances if outputs is None else outputs.distances  # the utility: d(x, y)
    audit_d = space.distances  # privacy: over the inputs
    params: dict[str, object] = {"calibrated": calibrate}
    if weights is not None:
        params["weights"] = weights.tolist()
    info: dict[str, object] = {}
    textbook = None
    if calibrate:
        # The bracket's lower end is the textbook matrix, eps-mDP in exact arithmetic; rounding of
        # d(u,y) - d(v,y) = d(u,v) (outputs on the line through u and v) can put its float audit a few
        # ulps over epsilon, within certify's slack but not largest_passing's: no room to calibrate then.
        textbook = exponential_matrix(d, epsilon, weights)
        if not audit_epsilon(textbook, audit_d) <= epsilon:
            info["calibration"] = {"inner_epsilon": epsilon, "bracket": [epsilon, 2 * epsilon], "iterations": 1,
                                   "note": "the textbook matrix audits above epsilon by rounding: not calibrated"}
            calibrate = False
    if calibrate:
        cal = largest_passing(lambda p: exponential_matrix(d, p, weights), audit_d, epsilon, epsilon, 2 * epsilon)
        matrix, inner = cal.matrix, cal.parameter
        info["calibration"] = {
            "inner_epsilon": inner,
            "bracket": [epsilon, 2 * epsilon],
            "iterations": cal.iterations,
            "epsilon_audit": cal.epsilon_audit,
        }
    elif textbook is not None:
        matrix, inner = textbook, epsilon
    else:
        matrix, inner = exponential_matrix(d, epsilon, weights), epsilon
    params["inner_epsilon"] = inner
    _check_representable(matrix, name, epsilon)
    proof = None
    if outputs is None and weights is None and inner <= epsilon and space.n > DENSE_MAX_N and proven_metric(space):
        proof = kernel_audit(matrix, space.distances, inner)
    return certify(matrix, space, epsilon, name, params, info, outputs=outputs, proof=proof)


#: Largest great-circle distance (km) the kernel proof takes: the haversine formula keeps its
#: relative accuracy (DISTANCE_RTOL) away from antipodes (asin's slope is at most 1.6 below it).
_HAVERSINE_MAX_KM = 10_000.0


def proven_metric(space: MetricSpace) -> bool:
    """Whether ``space``'s distances are, bit for bit, a coordinate metric of
    :data:`~metricdp.audit_structured.PROVEN_METRICS` recomputed from its points: a metric by
    construction, which the kernel proof (:func:`~metricdp.audit_structured.kernel_audit`) needs.

    The provenance is checked, not read from a name: the distances are recomputed as
    :meth:`MetricSpace.from_points` computes them (O(n^2)) and must be identical.
    """
    pts = space.points
    if pts is None or space.metric not in PROVEN_METRICS or space.covariance is not None:
        return False
    d = np.asarray(space.distances)
    if space.metric == "haversine" and not float(d.max()) <= _HAVERSINE_MAX_KM:
        return False
    fresh = pairwise_distances(pts, pts, space.metric)
    fresh = (fresh + fresh.T) / 2
    np.fill_diagonal(fresh, 0.0)
    return bool(np.array_equal(fresh, d))


@declared("exponential")
def exponential(
    space: MetricSpace, epsilon: float, *, calibrate: bool = False, outputs: OutputSet | None = None
) -> Mechanism:
    r"""The exponential mechanism, :math:`M[u,v] \propto e^{-\varepsilon' d(u,v)/2}`.

    Imola et al., UAI 2022, Section 3.1. Exactly :math:`\varepsilon`-mDP at
    :math:`\varepsilon' = \varepsilon` (proof in the module docstring).

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
        The mDP guarantee, > 0.
    calibrate : bool, optional
        Use the largest :math:`\varepsilon' \in [\varepsilon, 2\varepsilon]` whose matrix
        passes the exact audit at ``epsilon`` (privacy then rests on the audit, which
        :func:`~metricdp.mechanisms.base.certify` repeats before returning).
    outputs : OutputSet, optional
        A separate output set Y (:mod:`metricdp.outputs`): the matrix is (n, m),
        :math:`M[x, y] \propto e^{-\varepsilon' d(x,y)/2}` (proof in the module docstring).

    Returns
    -------
    Mechanism
        Named ``exponential``; ``params`` holds ``inner_epsilon`` and ``calibrated``.

    Raises
    ------
    ValidationError
        ``epsilon`` not finite and > 0, or so large that probabilities underflow; output
        distances that break the cross triangle inequality (the worst triple is named).

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> m = exponential(MetricSpace.grid(1, 3), 1.0)
    >>> m.name, m.params["inner_epsilon"], m.audit().epsilon <= 1.0
    ('exponential', 1.0, True)
    """
    epsilon = check_epsilon(epsilon)
    return _build(space, epsilon, None, calibrate, "exponential", outputs)


@declared("weighted-exponential")
def weighted_exponential(
    space: MetricSpace, epsilon: float, weights: ArrayLike, *, calibrate: bool = False
) -> Mechanism:
    r"""The weighted exponential mechanism, :math:`M[u,v] \propto Y_v e^{-\varepsilon' d(u,v)/2}`.

    Imola et al., UAI 2022, Proposition 1: :math:`\varepsilon`-mDP for any positive weights
    Y at :math:`\varepsilon' = \varepsilon` (proof in the module docstring).

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
        The mDP guarantee, > 0.
    weights : array of shape (n,)
        Positive, finite weights Y, one per point in the space's order.
    calibrate : bool, optional
        As for :func:`exponential`.

    Returns
    -------
    Mechanism
        Named ``weighted-exponential``; ``params`` holds ``inner_epsilon``,
        ``calibrated`` and ``weights``.

    Raises
    ------
    ValidationError
        Bad ``epsilon``, or ``weights`` of the wrong length, not finite or not positive.
    """
    epsilon = check_epsilon(epsilon)
    y = _check_weights(weights, check_space(space).n)
    return _build(space, epsilon, y, calibrate, "weighted-exponential")
