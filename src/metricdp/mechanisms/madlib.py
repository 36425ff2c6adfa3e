r"""Madlib (the paper's EuclidMech): noise on word embeddings, then the nearest word.

Feyisetan, Balle, Drake, Diethe, "Privacy- and utility-preserving textual analysis via
calibrated multivariate perturbations", WSDM 2020, Section 3 (Algorithm 1). For a word
with embedding :math:`x \in \mathbb{R}^d`, draw :math:`z` with density

.. math:: p(z) \propto e^{-\varepsilon \lVert z \rVert}

and release the vocabulary word nearest to :math:`x + z`. Sampling: the direction is
uniform on the sphere (a normalised standard normal vector) and the norm has density
:math:`\propto r^{d-1} e^{-\varepsilon r}`, i.e. Gamma(d, 1/eps), drawn as a sum of d
exponentials :math:`-\log U_i / \varepsilon` (uniforms only, so the secure default rng
works).

Privacy: for any outputs set, the density ratio of :math:`x + z` and :math:`x' + z` at a
point y is :math:`e^{\varepsilon(\lVert y - x' \rVert - \lVert y - x \rVert)} \le
e^{\varepsilon \lVert x - x' \rVert}` (triangle inequality), and the nearest-word map is
a fixed function of y (post-processing), so Madlib is eps-mDP for the Euclidean metric
of the embedding (Feyisetan et al., Section 3). Float rounding in the nearest-word
search only changes which fixed function of y is applied, never the guarantee; the
usual caveat of floating-point noise samplers (Mironov, CCS 2012) applies to the noise.

The exact transition matrix over a vocabulary has no closed form: :func:`madlib`
returns a Monte-Carlo estimate (``exact=False``, see :mod:`._montecarlo`) for
evaluation, and releases always come from :func:`madlib_sample`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_rng, standard_normal, uniform_open
from .._validation import check_epsilon, check_indices, check_int
from ..errors import ValidationError
from ..spaces import MetricSpace, check_space
from ._montecarlo import estimate_matrix
from .base import Mechanism

__all__ = ["madlib", "madlib_noise", "madlib_sample", "true_sampler"]

_QUERY_BLOCK = 4096  # queries per BLAS block of the nearest-word search
_KD_MAX_DIM = 8  # a k-d tree beats brute force only in low dimension


def _check_space(space: object) -> MetricSpace:
    space = check_space(space)
    if space.points is None:
        raise ValidationError(
            "madlib needs the embedding vectors: the space has no points (built from distances?); "
            "build it with MetricSpace.from_points"
        )
    if space.metric != "euclidean":
        raise ValidationError(
            f"madlib is eps-mDP for the Euclidean metric only; the space's metric is {space.metric!r}"
        )
    return space


def madlib_noise(dim: int, epsilon: float, size: int, rng: object = None) -> NDArray[np.float64]:
    r"""``size`` vectors in :math:`\mathbb{R}^{dim}` with density :math:`\propto e^{-\varepsilon\lVert z\rVert}`.

    Direction: a standard normal vector (Box-Muller on the rng's uniforms) normalised;
    norm: Gamma(dim, 1/eps) as :math:`\sum_{i=1}^{dim} -\log U_i / \varepsilon`.

    Returns
    -------
    ndarray of shape (size, dim)

    Examples
    --------
    >>> madlib_noise(3, 1.0, 4, rng=0).shape
    (4, 3)
    """
    dim = check_int(dim, "dim", minimum=1)
    size = check_int(size, "size", minimum=0)
    epsilon = check_epsilon(epsilon)
    source = check_rng(rng)
    g = standard_normal(source, (size, dim))
    norm = np.linalg.norm(g, axis=1, keepdims=True)
    # A zero normal vector has probability 0 (Box-Muller radii are > 0); guard anyway.
    direction = np.where(norm > 0, g / np.where(norm > 0, norm, 1.0), np.eye(1, dim))
    radius = -np.log(uniform_open(source, (size, dim))).sum(axis=1) / epsilon
    return direction * radius[:, None]


def _nearest(space: MetricSpace, queries: NDArray[np.float64]) -> NDArray[np.intp]:
    """Index of the nearest point to each query: k-d tree in low dimension, else blocked
    BLAS on :math:`\\lVert p\\rVert^2 - 2 q \\cdot p` (argmin per query, no Python loop
    over points or queries beyond the blocks)."""
    pts = np.asarray(space.points)
    if pts.shape[1] <= _KD_MAX_DIM:
        return space.nearest(queries)
    sq = np.einsum("ij,ij->i", pts, pts)
    out = np.empty(len(queries), dtype=np.intp)
    for start in range(0, len(queries), _QUERY_BLOCK):
        q = queries[start : start + _QUERY_BLOCK]
        out[start : start + len(q)] = np.argmin(sq[None, :] - 2.0 * (q @ pts.T), axis=1)
    return out


def madlib_sample(space: MetricSpace, inputs: ArrayLike, epsilon: float, rng: object = None) -> NDArray[np.intp]:
    """Madlib releases (indices of words) for input word indices: nearest word to x + z.

    ``rng=None`` draws from the OS's secure source (right for real data).

    Examples
    --------
    >>> space = MetricSpace.from_points([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> madlib_sample(space, [0, 0, 2], 50.0, rng=1).tolist()
    [0, 0, 2]
    """
    space = _check_space(space)
    epsilon = check_epsilon(epsilon)
    idx = check_indices(inputs, space.n)
    source = check_rng(rng)
    pts = np.asarray(space.points)
    noisy = pts[idx] + madlib_noise(pts.shape[1], epsilon, len(idx), source)
    return _nearest(space, noisy)


def true_sampler(mechanism: Mechanism, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
    return madlib_sample(mechanism.space, inputs, float(mechanism.params["epsilon"]), rng)


def madlib(space: MetricSpace, epsilon: float, *, samples: int = 2000, rng: object = None) -> Mechanism:
    """Madlib over a finite vocabulary with a Monte-Carlo estimate of its matrix.

    Parameters
    ----------
    space : MetricSpace
        Word embeddings: built with :meth:`MetricSpace.from_points` and the Euclidean
        metric.
    epsilon : float
        The mDP level (Euclidean metric of the embedding): the proven guarantee of the
        true sampler, stored as the mechanism's ``epsilon``.
    samples : int
        Releases drawn per word for the estimate (>= 2).
    rng : None, int or Generator
        Randomness of the estimate (``None``: the OS's secure source).

    Returns
    -------
    Mechanism
        ``name="madlib"``, ``exact=False``; ``matrix`` is the estimate;
        ``info["estimate"]`` holds ``samples_per_row``, ``confidence``,
        ``row_half_width`` and ``loss_half_width`` (see :mod:`._montecarlo`).
        ``sample`` uses the true sampler.

    Raises
    ------
    ValidationError
        The space has no points or is not Euclidean.
    """
    space = _check_space(space)
    epsilon = check_epsilon(epsilon)
    samples = check_int(samples, "samples", minimum=2)
    source = check_rng(rng)
    matrix, estimate = estimate_matrix(space, lambda idx, r: madlib_sample(space, idx, epsilon, r), samples, source)
    params = {"epsilon": epsilon, "samples": samples, "dim": int(np.asarray(space.points).shape[1])}
    return Mechanism(matrix, space, epsilon, "madlib", params, {"estimate": estimate}, exact=False)
