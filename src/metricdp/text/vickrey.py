r"""The Vickrey mechanism (Xu, Aggarwal, Feyisetan, Teissier, "On a Utilitarian Approach to
Privacy Preserving Text Generation", PrivateNLP 2021, Section 3): Madlib's noisy vector, then
the nearest *or the second-nearest* word.

For an input word x: :math:`\hat\phi = \phi(x) + z` with z of density
:math:`\propto e^{-\varepsilon\lVert z\rVert}` (Madlib's noise, :mod:`.madlib`); with
:math:`w_1, w_2` the nearest and second-nearest vocabulary words to :math:`\hat\phi` and
:math:`d_i = \lVert\hat\phi - \phi(w_i)\rVert`, release :math:`w_2` with probability

.. math:: p_t(\hat\phi) = \frac{t\, d_1}{t\, d_1 + (1 - t)\, d_2}

and :math:`w_1` otherwise (the paper's Eq. 3; t in [0, 1], ``threshold``; t = 0 is Madlib,
t = 0.5 releases :math:`w_2` with probability :math:`d_1/(d_1+d_2) \le 1/2`). The second
price of a Vickrey auction names it: the runner-up wins sometimes, so that a word that is
its own nearest neighbour is replaced more often at a given eps.

*Proof* (the paper's Theorem 1). :math:`\hat\phi` is eps-mDP for the Euclidean distance
(Madlib: the density ratio at any point is at most :math:`e^{\varepsilon\lVert\phi(x) -
\phi(x')\rVert}`); the choice between :math:`w_1` and :math:`w_2` is a randomised function of
:math:`\hat\phi` and of the public vocabulary alone (its coin has the same law for every
input once :math:`\hat\phi` is fixed), so the release is post-processing: eps-mDP for d, for
every t. Exactness of the search matters for utility, not for privacy; it is exact here:
:func:`two_nearest` ranks every word within a rigorous float64 rounding bound of the
second-best score by the directly computed objective (as
:meth:`~metricdp.pointspace.PointSpace.argmin_quadratic` does for the nearest), ties to the
smaller index.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource, uniform_open
from .._validation import check_epsilon, check_number
from ..mechanisms.madlib import madlib_polar
from ..pointspace import BLOCK_BYTES, PointSpace
from .base import TextMechanism, check_point_space

__all__ = ["VickreyText", "two_nearest", "vickrey_epsilon"]

_QUERIES = 256  # queries per block
_CHUNK = 8192  # tokens per noise draw


def vickrey_epsilon(epsilon: float, **_: object) -> float:
    """Proven mDP level of the Vickrey mechanism (any threshold): eps, as Madlib's."""
    return check_epsilon(epsilon)


def two_nearest(
    space: PointSpace, inputs: NDArray[np.intp], direction: NDArray[np.float64], gamma: NDArray[np.float64],
    epsilon: float,
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float64]]:
    r"""For each token: the nearest and second-nearest words to :math:`x + (G/\varepsilon) v` and
    the ratio :math:`d_1/d_2 \in [0, 1]` of their distances to it.

    The objective is Madlib's (:func:`metricdp.mechanisms.madlib.nearest_release`):
    :math:`a\lVert p\rVert^2 - 2p\cdot w` with (a, w) = (1, x + rv) for r <= 1 and (1/r, x/r +
    v) beyond, whose values differ from :math:`\lVert q - p\rVert^2` (resp. its 1/r multiple)
    by a constant per token. A float64 GEMM pass finds the two smallest scores; a second pass
    keeps every word within twice the rounding bound of the second one (the bound of
    :func:`metricdp.pointspace._tolerance` with the float64 unit), which holds the true two,
    and ranks those by the directly computed value.
    """
    vec, sq = space.vectors, space.sqnorms
    x = vec[inputs]
    with np.errstate(over="ignore", divide="ignore"):
        r = gamma / epsilon
        inv_r = epsilon / gamma
    small = r <= 1.0
    r_s = np.where(small, r, 0.0)
    inv_s = np.where(small, 0.0, inv_r)
    a = np.where(small, 1.0, inv_s)
    w = np.where(small[:, None], x + r_s[:, None] * direction, inv_s[:, None] * x + direction)
    tol = 2.0 * (space.dim + 4) * 2.0**-53 * (a * float(sq.max()) + 2.0 * np.linalg.norm(w, axis=1) * space.radius_max)
    tol = 2.0 * tol + np.finfo(np.float64).tiny

    def exact(rows: NDArray[np.intp], cols: NDArray[np.intp]) -> NDArray[np.float64]:
        diff = x[rows] - vec[cols]  # x - p
        direct = diff + r_s[rows, None] * direction[rows]
        v_small = np.einsum("ij,ij->i", direct, direct)
        v_large = inv_s[rows] * np.einsum("ij,ij->i", diff, diff) + 2.0 * np.einsum("ij,ij->i", direction[rows], diff)
        return np.where(small[rows], v_small, v_large)

    n = space.n
    first = np.empty(len(inputs), dtype=np.intp)
    second = np.empty(len(inputs), dtype=np.intp)
    ratio = np.empty(len(inputs))
    for q0 in range(0, len(inputs), _QUERIES):
        rows = np.arange(q0, min(len(inputs), q0 + _QUERIES))
        step = max(2, min(n, BLOCK_BYTES // (8 * len(rows))))
        two = np.full((len(rows), 2), np.inf)
        for s in range(0, n, step):  # pass 1: the two smallest scores
            sc = a[rows, None] * sq[None, s : s + step] - 2.0 * (w[rows] @ vec[s : s + step].T)
            part = np.partition(sc, 1, axis=1)[:, :2] if sc.shape[1] > 1 else np.column_stack([sc[:, 0], sc[:, 0]])
            two = np.sort(np.concatenate([two, part], axis=1), axis=1)[:, :2]
        limit = two[:, 1] + tol[rows]
        cand_r, cand_c = [], []
        for s in range(0, n, step):  # pass 2: every word that can be one of the true two
            sc = a[rows, None] * sq[None, s : s + step] - 2.0 * (w[rows] @ vec[s : s + step].T)
            rr, cc = np.nonzero(sc <= limit[:, None])
            cand_r.append(rows[rr])
            cand_c.append(cc + s)
        rr, cc = np.concatenate(cand_r), np.concatenate(cand_c)
        vals = exact(rr, cc)
        order = np.lexsort((cc, vals, rr))
        rr, cc, vals = rr[order], cc[order], vals[order]
        starts = np.flatnonzero(np.r_[True, rr[1:] != rr[:-1]])
        first[rr[starts]] = cc[starts]
        second[rr[starts]] = cc[starts + 1]
        # distances: |q - p|^2 = v (r <= 1) or r (v + r |dir|^2) (r > 1); the ratio without r's scale
        k = rr[starts]
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            lift = np.where(small[k], 0.0, np.einsum("ij,ij->i", direction[k], direction[k]) * r[k])
            d1 = np.sqrt(np.maximum(vals[starts] + lift, 0.0))
            d2 = np.sqrt(np.maximum(vals[starts + 1] + lift, 0.0))
            rho = d1 / d2
        ratio[k] = np.where(np.isfinite(lift) & (d2 > 0), np.minimum(rho, 1.0), 1.0)  # r = inf: both equally far
    return first, second, ratio


class VickreyText(TextMechanism):
    """The Vickrey mechanism over a :class:`PointSpace` (see the module docstring).

    Parameters
    ----------
    space : PointSpace
        Euclidean vocabulary (at least 2 words).
    epsilon : float
        The mDP level of the noise.
    threshold : float
        The paper's t in [0, 1] (default 0.75); 0 gives Madlib.

    Examples
    --------
    >>> space = PointSpace.from_points([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], ["a", "b", "c"])
    >>> VickreyText(space, 200.0, threshold=0.0).sample([0, 1, 2], rng=0).tolist()
    [0, 1, 2]
    """

    name = "vickrey"

    def __init__(self, space: PointSpace, epsilon: float, *, threshold: float = 0.75) -> None:
        space = check_point_space(space)
        epsilon = check_epsilon(epsilon)
        self.threshold = check_number(threshold, "threshold", minimum=0.0, maximum=1.0)
        super().__init__(space, epsilon, {"epsilon": epsilon, "threshold": self.threshold})

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        out = np.empty(len(inputs), dtype=np.intp)
        t = self.threshold
        for s in range(0, len(inputs), _CHUNK):
            idx = inputs[s : s + _CHUNK]
            direction, gamma = madlib_polar(self.space.dim, self.epsilon, len(idx), rng)
            w1, w2, rho = two_nearest(self.space, idx, direction, gamma, self.epsilon)
            denominator = t * rho + (1.0 - t)
            p2 = np.divide(t * rho, denominator, out=np.full(len(idx), 0.5), where=denominator > 0)
            coin = uniform_open(rng, len(idx)) < p2  # a function of the noisy vector only: post-processing
            out[s : s + len(idx)] = np.where(coin, w2, w1)
        return out
