r"""k-ary randomized response: the flat mechanism of Alvim et al.

Alvim, Chatzikokolakis, Palamidessi, Pazii, *Invited Paper: Local Differential Privacy on
Metric Spaces: Optimizing the Trade-off with Utility*, CSF 2018 (the flat mechanism, i.e.
k-RR of Kairouz, Oh, Viswanath):

.. math::

    M[u,v] = \begin{cases} \dfrac{e^{a}}{n - 1 + e^{a}} & u = v \\[1ex]
                           \dfrac{1}{n - 1 + e^{a}} & u \ne v. \end{cases}

Every ratio :math:`M[u,w]/M[v,w]` is :math:`e^{a}`, 1 or :math:`e^{-a}`, so the mechanism
is a-LDP, and :math:`e^{a} \le e^{\varepsilon d(u,v)}` for all :math:`u \ne v` exactly when
:math:`a \le \varepsilon\, d_{\min}`: it is :math:`(a/d_{\min})`-mDP and no better (the
pair at distance :math:`d_{\min}` attains it).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .._validation import check_epsilon
from ..errors import ValidationError
from ..spaces import MetricSpace, check_space
from .base import Mechanism, certify
from .exponential import _check_representable
from .registry import declared

__all__ = ["krr", "krr_matrix"]


def krr_matrix(n: int, ldp_epsilon: float) -> NDArray[np.float64]:
    r"""The n x n k-RR matrix at LDP parameter a.

    Written with :math:`e^{-a}` (diagonal :math:`1/(1 + (n-1)e^{-a})`, off-diagonal
    :math:`e^{-a}/(1 + (n-1)e^{-a})`) so that large a cannot overflow.

    Examples
    --------
    >>> m = krr_matrix(3, float(np.log(2.0)))   # e^a = 2: diagonal 2/4, others 1/4
    >>> m[0].tolist()
    [0.5, 0.25, 0.25]
    """
    a = check_epsilon(ldp_epsilon, "ldp_epsilon")
    x = np.exp(-a)
    den = 1.0 + (n - 1) * x
    m = np.full((n, n), x / den)
    np.fill_diagonal(m, 1.0 / den)
    return m


@declared("krr")
def krr(space: MetricSpace, epsilon: float | None = None, *, ldp_epsilon: float | None = None) -> Mechanism:
    r"""k-ary randomized response on ``space``, exactly eps-mDP.

    Give exactly one of:

    * ``epsilon``, the mDP guarantee: the mechanism is built at
      :math:`a = \varepsilon\, d_{\min}`, the largest a-LDP parameter that is
      :math:`\varepsilon`-mDP;
    * ``ldp_epsilon`` = a: the mDP guarantee reported is :math:`a / d_{\min}`.

    Parameters
    ----------
    space : MetricSpace
    epsilon : float, optional
        mDP guarantee, > 0.
    ldp_epsilon : float, optional
        LDP parameter a, > 0.

    Returns
    -------
    Mechanism
        Named ``krr``; ``epsilon`` = :math:`a/d_{\min}`; ``params`` holds ``ldp_epsilon``
        (a) and ``d_min``.

    Raises
    ------
    ValidationError
        Both or neither of ``epsilon`` and ``ldp_epsilon``, or a value not finite and > 0.

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> m = krr(MetricSpace.grid(1, 3, cell=2.0), ldp_epsilon=1.0)
    >>> m.epsilon, m.params["ldp_epsilon"], m.params["d_min"]
    (0.5, 1.0, 2.0)
    """
    if (epsilon is None) == (ldp_epsilon is None):
        raise ValidationError(
            "krr takes exactly one of epsilon (the mDP guarantee) and ldp_epsilon (the LDP parameter a), "
            f"got epsilon={epsilon!r} and ldp_epsilon={ldp_epsilon!r}"
        )
    d_min = check_space(space).d_min
    if epsilon is not None:
        eps = check_epsilon(epsilon)
        a = eps * d_min
    else:
        a = float(ldp_epsilon)  # type: ignore[arg-type]  # not None here; declared finite and > 0 (registry)
        eps = a / d_min
    matrix = krr_matrix(space.n, a)
    _check_representable(matrix, "krr", eps)
    return certify(matrix, space, eps, "krr", {"ldp_epsilon": a, "d_min": d_min})
