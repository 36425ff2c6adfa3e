r"""Calibration to the audit: the largest inner parameter whose matrix passes the exact audit.

Many builders prove privacy through a worst-case argument at an *inner* parameter: the
exponential mechanism at :math:`\varepsilon` is :math:`\varepsilon`-mDP by the triangle
inequality, ConstOPTMech runs its LP at :math:`\varepsilon/2` (Imola et al., UAI 2022,
Theorem 2), SpannerMech at :math:`\varepsilon/\text{stretch}` (Bordenabe et al., CCS 2014).
The audited level of the result is often far below the requested one, so a larger inner
parameter still gives an :math:`\varepsilon`-mDP matrix with lower loss.

:func:`largest_passing` finds it by bisection on the exact, independent audit
(:func:`metricdp.audit.audit_epsilon`). Privacy then rests on the audit alone:

* a matrix is *passing* iff ``audit_epsilon(M, d) <= epsilon`` with **no slack** (not even
  the 1e-9 relative slack :func:`~metricdp.mechanisms.base.certify` allows), so a passing
  matrix always survives the builder's final ``certify``;
* only passing matrices are ever kept or returned, so nothing is assumed about the
  audited level being monotone in the parameter. If it is not monotone, the result is a
  passing parameter at least as large as ``lo`` (not necessarily the largest passing one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_epsilon, check_int, check_number, check_stochastic
from ..audit import audit_epsilon
from ..errors import ValidationError

__all__ = ["Calibration", "largest_passing"]


@dataclass(frozen=True)
class Calibration:
    """Outcome of :func:`largest_passing`.

    Attributes
    ----------
    parameter : float
        The largest parameter found whose matrix passes the audit.
    matrix : ndarray of shape (n, n)
        ``build(parameter)``, row-stochastic, audited.
    epsilon_audit : float
        ``audit_epsilon(matrix, distances)``; always ``<= epsilon``.
    iterations : int
        Number of matrices built and audited (the two ends included).
    """

    parameter: float
    matrix: NDArray[np.float64]
    epsilon_audit: float
    iterations: int


def largest_passing(
    build: Callable[[float], NDArray[np.float64]],
    distances: ArrayLike,
    epsilon: float,
    lo: float,
    hi: float,
    *,
    rtol: float = 1e-6,
    max_iter: int = 60,
) -> Calibration:
    r"""Largest parameter p in [lo, hi] whose matrix ``build(p)`` passes the audit at ``epsilon``.

    Bisection on the exact audit: ``lo`` must pass; if ``hi`` passes it is returned at
    once; otherwise the bracket [passing, failing] is halved until its width is at most
    ``rtol * hi`` or ``max_iter`` matrices have been built. The best *passing* matrix found
    is returned:

    .. math::

        p^\star = \max\{p \in [lo, hi] \text{ examined} :
        \max_{w,\,u \ne v} \frac{\log M_p[u,w] - \log M_p[v,w]}{d(u,v)} \le \varepsilon\}.

    Privacy never depends on the bisection being right: every returned matrix has
    been audited at ``epsilon`` with no slack.

    Parameters
    ----------
    build : callable
        ``build(p)`` returns a row-stochastic (n, n) matrix for inner parameter p, or
        (n, m) for a separate output set.
    distances : array of shape (n, n)
        The metric of the inputs, which the audit uses.
    epsilon : float
        The requested mDP level, > 0.
    lo, hi : float
        The bracket; ``lo <= hi`` and ``build(lo)`` must pass.
    rtol : float, optional
        Relative width of the final bracket (relative to ``hi``), > 0.
    max_iter : int, optional
        The most matrices built, >= 2 (the two ends count).

    Returns
    -------
    Calibration

    Raises
    ------
    ValidationError
        Bad arguments, ``build`` returning something not row-stochastic, or ``lo``
        failing the audit (the message gives its audited level).

    References
    ----------
    Imola, Kasiviswanathan, White, Aggarwal, Teissier. Balancing Utility and Scalability
    in Metric Differential Privacy. UAI 2022.

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> def em(p):
    ...     k = np.exp(-p * d / 2)
    ...     return k / k.sum(axis=1, keepdims=True)
    >>> cal = largest_passing(em, d, 1.0, 1.0, 2.0)
    >>> cal.parameter, cal.epsilon_audit <= 1.0   # two points: EM at 2 is exactly 1-mDP
    (2.0, True)
    """
    epsilon = check_epsilon(epsilon)
    lo = check_number(lo, "lo")
    hi = check_number(hi, "hi")
    if lo > hi:
        raise ValidationError(f"lo must be <= hi, got lo={lo!r} > hi={hi!r}")
    rtol = check_number(rtol, "rtol")
    if rtol <= 0:
        raise ValidationError(f"rtol must be > 0, got {rtol!r}")
    max_iter = check_int(max_iter, "max_iter", minimum=2)
    d = np.asarray(distances, dtype=np.float64)

    def evaluate(p: float) -> tuple[NDArray[np.float64], float]:
        m = check_stochastic(build(p), name=f"build({p!r})", square=False)  # (n, m): a separate output set
        if d.shape != (m.shape[0], m.shape[0]):
            raise ValidationError(f"build({p!r}) has {m.shape[0]} rows but distances has shape {d.shape}")
        return m, audit_epsilon(m, d)

    best_m, best_eps = evaluate(lo)
    iterations = 1
    if not best_eps <= epsilon:
        raise ValidationError(
            f"lower end lo={lo!r} does not pass the audit: its matrix is {best_eps!r}-mDP, "
            f"more than epsilon={epsilon!r}; choose a smaller lo"
        )
    best_p = lo
    if hi == lo:
        return Calibration(best_p, best_m, best_eps, iterations)
    m_hi, eps_hi = evaluate(hi)
    iterations += 1
    if eps_hi <= epsilon:
        return Calibration(hi, m_hi, eps_hi, iterations)

    left, right = lo, hi  # invariant: build(left) passes (it is best_p), build(right) fails
    while iterations < max_iter and right - left > rtol * abs(hi):
        mid = left + (right - left) / 2
        if not left < mid < right:  # float resolution reached
            break
        m, eps = evaluate(mid)
        iterations += 1
        if eps <= epsilon:
            left, best_p, best_m, best_eps = mid, mid, m, eps
        else:
            right = mid
    return Calibration(best_p, best_m, best_eps, iterations)
