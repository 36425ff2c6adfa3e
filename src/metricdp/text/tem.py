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

Sampling here uses the law directly: per distinct word one blocked pass finds
:math:`L_x` and its weights; a table of their cumulative sums plus the bottom mass
:math:`|W\setminus L_x| e^{-\varepsilon\gamma/2}` draws each token; a bottom draw picks
the j-th word outside :math:`L_x` with j uniform (a second uniform). Tables are cached
(bounded) as in :mod:`.exponential`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from .._validation import check_epsilon
from ..errors import ValidationError
from ..mechanisms.base import Mechanism, certify
from ..pointspace import PointSpace
from ..sampling import DISTANCE_EXPONENT_CAP, ExactTable, clamp_distances, uniform_below
from ..spaces import MetricSpace
from .base import TextMechanism, check_point_space
from .exponential import CACHE_BYTES, CumulativeCache, sample_tables

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


class TEMText(TextMechanism):
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
        super().__init__(space, epsilon, {"epsilon": epsilon, "gamma": g, "beta": float(beta)})
        self.gamma = g
        self.radius = radius  # the range search's radius: the same law as gamma (see above)
        self.cache = CumulativeCache(cache_bytes)

    def _make(self, words: NDArray[np.intp]) -> list[tuple[NDArray, ExactTable, NDArray]]:
        n = self.space.n
        out = []
        # gamma's own weight: above e^-700 for any gamma the paper's rule gives; clamped like every
        # distance (metricdp.sampling.clamp_distances) so that no weight underflows to 0
        bottom_w = math.exp(-0.5 * self.epsilon * float(clamp_distances(self.radius, self.epsilon)))
        for inside, dist in self.space.within(words, self.radius):  # L_x by an exact range search
            w = np.empty((1, len(inside) + 1))  # L_x's weights, then the bottom candidate's mass
            np.multiply(clamp_distances(dist, self.epsilon), -0.5 * self.epsilon, out=w[0, :-1])
            np.exp(w[0, :-1], out=w[0, :-1])
            w[0, -1] = (n - len(inside)) * bottom_w
            w.setflags(write=False)  # kept by the table as it is (no copy)
            table = ExactTable.from_matrix(w)
            out.append((inside.astype(np.intp), table, table.matrix))
        return out

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        out = np.empty(len(inputs), dtype=np.intp)
        n = self.space.n

        def draw(table: tuple[NDArray, ExactTable, NDArray], pos: NDArray) -> None:
            inside, exact, _ = table
            # exact draw among the inside words and the "bottom" candidate, then an exact uniform
            # word outside the ball when the bottom wins (integers from random words only)
            k = exact.sample(np.zeros(len(pos), dtype=np.intp), rng)
            res = np.empty(len(pos), dtype=np.intp)
            hit = k < len(inside)
            res[hit] = inside[k[hit]]
            if (~hit).any():
                outside = n - len(inside)
                j = uniform_below(np.full(int((~hit).sum()), outside), rng)
                # the j-th index not in `inside` (sorted): j + #{inside members <= answer}
                res[~hit] = j + np.searchsorted(inside - np.arange(len(inside)), j, side="right")
            out[pos] = res

        sample_tables(inputs, out, self._make, self.cache, draw, self.space.block_size(n))
        return out
