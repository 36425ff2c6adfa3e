r"""TEM, the Truncated Exponential Mechanism (Carvalho, Vasiloudis, Feyisetan, Wang,
"TEM: High utility metric differential privacy on text", SDM 2023; arXiv:2107.07928).

For an input word x and a threshold :math:`\gamma`: :math:`L_x = \{y : d(x,y) \le
\gamma\}` scored :math:`-d(x,y)`, one extra candidate :math:`\bot` scored
:math:`-\gamma + \frac{2}{\varepsilon}\ln|W \setminus L_x|`; add Gumbel noise of scale
:math:`2/\varepsilon` to each score, take the argmax; if :math:`\bot` wins, release a
uniform word of :math:`W \setminus L_x` (Carvalho et al., Algorithm 1, Section 4).

Release law (Gumbel-max lemma: argmax of score + Gumbel(2/eps) is the softmax of
:math:`\varepsilon \cdot score / 2`): :math:`P(\bot) \propto |W\setminus L_x|
e^{-\varepsilon\gamma/2}`, shared uniformly over :math:`W \setminus L_x`, so

.. math::

    P(y \mid x) = \frac{e^{-\varepsilon \min(d(x,y), \gamma)/2}}
                       {\sum_{z \in W} e^{-\varepsilon \min(d(x,z), \gamma)/2}},

the exponential mechanism with the truncated score :math:`-\min(d, \gamma)`.

Privacy (Carvalho et al., Theorem 1): :math:`|\min(d(x,y),\gamma) - \min(d(x',y),\gamma)|
\le |d(x,y) - d(x',y)| \le d(x,x')` (min with a constant is 1-Lipschitz; triangle
inequality), so numerator and normaliser each move by at most
:math:`e^{\varepsilon d(x,x')/2}`: eps-mDP for the Euclidean metric, for every
:math:`\gamma \ge 0`. The law above is a finite matrix, so :func:`tem_matrix` builds it
on a small vocabulary and :func:`metricdp.mechanisms.base.certify` audits it.

Threshold: as the paper (Section 4.3, Theorem 3) sets it, :math:`\gamma = \frac{2}{\varepsilon}
\ln\frac{(1-\beta)|W|}{\beta}` with :math:`\beta = 0.001` (:func:`tem_gamma`); gamma
depends only on eps, |W| and beta, never on the data.

Sampling: TEM is the exponential mechanism with the score capped at gamma, so it is drawn
by the exact sampler of :mod:`.exponential` (:class:`~.exponential.BallExponential`) with
the cap gamma in place of 1400/eps: the words of a ball around x with their exact weights,
and the others by exact rejection against their common bound, with d the text samplers'
one float distance (:func:`metricdp.text.ball.pair_distances`). When the ball's radius
reaches gamma, every word outside it weighs exactly :math:`e^{-\varepsilon\gamma/2}`: the
paper's bottom candidate, a uniform word outside :math:`L_x`, accepted (but for the bound's
rounding, about 2**-20) at once.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from .._validation import check_epsilon
from ..errors import ValidationError
from ..mechanisms.base import Mechanism, certify
from ..pointspace import PointSpace
from ..sampling import DISTANCE_EXPONENT_CAP, clamp_distances
from ..spaces import MetricSpace
from .base import check_point_space
from .exponential import CACHE_BYTES, BallExponential

__all__ = ["MAX_RADIUS", "TEMText", "tem_epsilon", "tem_gamma", "tem_matrix", "tem_mechanism"]

#: The largest range-search radius: its square (with a relative margin) stays a finite float.
MAX_RADIUS = 1e150


def tem_gamma(epsilon: float, n: int, beta: float = 0.001) -> float:
    """The paper's threshold :math:`(2/\\varepsilon)\\ln((1-\\beta) n / \\beta)`, clipped at 0.

    Examples
    --------
    >>> round(tem_gamma(10.0, 400_000), 4)
    3.9612
    """
    epsilon = check_epsilon(epsilon)
    beta = float(beta)
    if not 0.0 < beta < 1.0:
        raise ValidationError(f"beta must be in (0, 1), got {beta!r}")
    return max(0.0, 2.0 / epsilon * math.log((1.0 - beta) * int(n) / beta))


def tem_epsilon(epsilon: float, **_: object) -> float:
    """Proven mDP level of TEM at parameter eps (any gamma >= 0): eps."""
    return check_epsilon(epsilon)


def tem_matrix(distances: NDArray[np.float64], epsilon: float, gamma: float) -> NDArray[np.float64]:
    """TEM's exact matrix :math:`\\propto e^{-\\varepsilon\\min(d,\\gamma)/2}` (rows shifted by their max)."""
    epsilon = check_epsilon(epsilon)
    d = np.asarray(distances, dtype=np.float64)
    logits = -0.5 * epsilon * np.minimum(d, float(gamma))
    logits -= logits.max(axis=1, keepdims=True)
    k = np.exp(logits)
    return k / k.sum(axis=1, keepdims=True)


def tem_mechanism(space: MetricSpace, epsilon: float, *, gamma: float | None = None, beta: float = 0.001) -> Mechanism:
    """TEM on a small vocabulary as an audited :class:`Mechanism` (exact matrix, certify)."""
    epsilon = check_epsilon(epsilon)
    g = tem_gamma(epsilon, space.n, beta) if gamma is None else float(gamma)
    if not g >= 0:
        raise ValidationError(f"gamma must be >= 0, got {gamma!r}")
    return certify(
        tem_matrix(space.distances, epsilon, g), space, epsilon, "tem", {"epsilon": epsilon, "gamma": g, "beta": beta}
    )


class TEMText(BallExponential):
    """TEM over a :class:`PointSpace` (see the module docstring).

    Parameters
    ----------
    space : PointSpace
    epsilon : float
    gamma : float, optional
        The threshold (default: :func:`tem_gamma` of eps, n and beta).
    beta : float
        The paper's beta (default 0.001).
    cache_bytes : int
        Bytes of cached per-word tables.
    """

    name = "tem"

    def __init__(
        self,
        space: PointSpace,
        epsilon: float,
        *,
        gamma: float | None = None,
        beta: float = 0.001,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        space = check_point_space(space)
        epsilon = check_epsilon(epsilon)
        g = tem_gamma(epsilon, space.n, beta) if gamma is None else float(gamma)
        if not (g >= 0 and math.isfinite(g)):
            given = f"{gamma!r}" if gamma is not None else f"{g!r} (from epsilon={epsilon!r}, beta={beta!r})"
            raise ValidationError(f"gamma must be finite and >= 0, got {given}")
        # every weight is clamped at distance 2C/eps (clamp_distances), so a word farther than that
        # weighs e^-C inside L_x or out of it: any gamma above 2C/eps gives the same law as 2C/eps
        radius = min(g, float(clamp_distances(g, epsilon)))
        if radius > MAX_RADIUS:
            raise ValidationError(
                f"gamma = {g:g} at epsilon = {epsilon:g}: the truncation radius min(gamma, 2*{DISTANCE_EXPONENT_CAP:g}"
                f"/epsilon) = {radius:g} exceeds {MAX_RADIUS:g}, beyond what a range search can square; give a "
                "smaller gamma or a larger epsilon"
            )
        # the weights e^{-eps min(d, radius)/2}: the law of the module docstring
        super().__init__(space, epsilon, {"epsilon": epsilon, "gamma": g, "beta": float(beta)}, radius, cache_bytes)
        self.gamma = g
        self.radius = radius  # the truncation radius: the same law as gamma (see above)
