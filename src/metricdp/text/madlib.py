r"""Madlib (Feyisetan, Balle, Drake, Diethe, WSDM 2020, Section 3, Algorithm 1) over a
:class:`~metricdp.pointspace.PointSpace`: each token's vector plus noise of density
:math:`\propto e^{-\varepsilon\lVert z\rVert}`, released as the nearest vocabulary word.

Privacy (Feyisetan et al., Theorem 1; proof in :mod:`metricdp.mechanisms.madlib`): the
noisy vector is eps-mDP for the Euclidean metric (the density ratio at any point is at
most :math:`e^{\varepsilon\lVert x - x'\rVert}` by the triangle inequality), and the word
search is a fixed function of it (post-processing), exact or approximate.

Search: ``index="exact"`` (default) is the certified search of
:func:`metricdp.mechanisms.madlib.nearest_release` (centred coordinates, any eps), run by
:func:`.nearest.two_pass_argmin` (the same answer, bit for bit, in a fraction of the time);
``index="ivf"`` or ``"hnsw"`` uses a faiss index (:mod:`.ann`) for queries whose noise radius is below
``1e6`` times the vocabulary's radius and the exact search beyond it.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from .._validation import check_epsilon
from ..errors import ValidationError
from ..mechanisms.madlib import madlib_epsilon, madlib_polar, nearest_release
from ..pointspace import PointSpace
from .ann import ANNIndex, make_index
from .base import TextMechanism, check_point_space
from .nearest import TwoPassSearch

__all__ = ["MadlibText", "madlib_epsilon", "noisy_release"]

_ANN_MAX_RADIUS = 1e6  # noise radius (in vocabulary radii) above which the exact search is used
_CHUNK = 8192  # tokens per noise draw (bounded memory)


def noisy_release(
    space: PointSpace,
    inputs: NDArray[np.intp],
    direction: NDArray[np.float64],
    gamma: NDArray[np.float64],
    epsilon: float,
    index: ANNIndex | None,
) -> NDArray[np.intp]:
    """Nearest word to :math:`x + (G/\\varepsilon) v` per token: exact, or approximate through ``index``."""
    if index is None:
        return nearest_release(_search(space), inputs, direction, gamma, epsilon)
    with np.errstate(over="ignore"):
        r = gamma / epsilon
    scale = np.linalg.norm(direction, axis=1) * r
    near = scale <= _ANN_MAX_RADIUS * max(space.radius_max, 1e-300)
    out = np.empty(len(inputs), dtype=np.intp)
    if near.any():
        q = space.vectors[inputs[near]] + r[near, None] * direction[near]
        out[near] = index.search(q)
    if (~near).any():
        out[~near] = nearest_release(_search(space), inputs[~near], direction[~near], gamma[~near], epsilon)
    return out


def _search(space: PointSpace) -> PointSpace:
    """``space`` searched by :func:`.nearest.two_pass_argmin` (the same answer, faster)."""
    return cast(PointSpace, TwoPassSearch(space))


class MadlibText(TextMechanism):
    """Madlib over a :class:`PointSpace`.

    Parameters
    ----------
    space : PointSpace
        Euclidean vocabulary.
    epsilon : float
        The mDP level.
    index : "exact", "ivf", "hnsw" or an :class:`~.ann.ANNIndex`
        The nearest-word search (post-processing; privacy unaffected).

    Examples
    --------
    >>> space = PointSpace.from_points([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], ["a", "b", "c"])
    >>> MadlibText(space, 50.0).sample([0, 1, 2], rng=0).tolist()
    [0, 1, 2]
    """

    name = "madlib"

    def __init__(self, space: PointSpace, epsilon: float, *, index: str | ANNIndex = "exact") -> None:
        space = check_point_space(space)
        epsilon = check_epsilon(epsilon)
        if isinstance(index, ANNIndex):
            self.index: ANNIndex | None = index
        elif index == "exact":
            self.index = None
        elif index in ("ivf", "hnsw"):
            self.index = make_index(index, space)
        else:
            raise ValidationError(f"index must be 'exact', 'ivf' or 'hnsw', got {index!r}")
        kind = "exact" if self.index is None else self.index.kind
        super().__init__(space, epsilon, {"epsilon": epsilon, "index": kind})

    def _directions(self, direction: NDArray[np.float64]) -> NDArray[np.float64]:
        return direction

    def _noise_epsilon(self) -> float:
        return self.epsilon

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        out = np.empty(len(inputs), dtype=np.intp)
        eps = self._noise_epsilon()
        for s in range(0, len(inputs), _CHUNK):
            idx = inputs[s : s + _CHUNK]
            direction, gamma = madlib_polar(self.space.dim, eps, len(idx), rng)
            out[s : s + len(idx)] = noisy_release(self.space, idx, self._directions(direction), gamma, eps, self.index)
        return out
