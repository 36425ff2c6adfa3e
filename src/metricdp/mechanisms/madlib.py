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

import functools

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_rng, standard_normal, uniform_open
from .._validation import check_epsilon, check_indices, check_int
from ..errors import ValidationError
from ..pointspace import PointSpace
from ..spaces import MetricSpace, check_space
from ._montecarlo import estimate_matrix
from .base import Mechanism
from .registry import declared

__all__ = [
    "madlib", "madlib_epsilon", "madlib_noise", "madlib_polar", "madlib_sample", "nearest_release", "true_sampler",
]


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


def madlib_polar(
    dim: int, epsilon: float, size: int, rng: object = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Madlib's noise as (direction, G): the noise is ``direction * G / epsilon``.

    ``direction`` is uniform on the unit sphere (a normalised standard normal vector,
    Box-Muller on the rng's uniforms) and :math:`G = \sum_{i=1}^{dim} -\log U_i` is
    Gamma(dim, 1); the radius :math:`G/\varepsilon` is Gamma(dim, 1/eps). Keeping G and
    eps apart lets the nearest-word search work at any eps (see :func:`nearest_release`)
    where ``G / epsilon`` would overflow or swamp the coordinates. Consumes the rng
    exactly as :func:`madlib_noise`.
    """
    dim = check_int(dim, "dim", minimum=1)
    size = check_int(size, "size", minimum=0)
    check_epsilon(epsilon)
    source = check_rng(rng)
    g = standard_normal(source, (size, dim))
    norm = np.linalg.norm(g, axis=1, keepdims=True)
    # A zero normal vector has probability 0 (Box-Muller radii are > 0); guard anyway.
    direction = np.where(norm > 0, g / np.where(norm > 0, norm, 1.0), np.eye(1, dim))
    gamma = -np.log(uniform_open(source, (size, dim))).sum(axis=1)
    return direction, gamma


def madlib_noise(dim: int, epsilon: float, size: int, rng: object = None) -> NDArray[np.float64]:
    r"""``size`` vectors in :math:`\mathbb{R}^{dim}` with density :math:`\propto e^{-\varepsilon\lVert z\rVert}`.

    Direction: a standard normal vector (Box-Muller on the rng's uniforms) normalised;
    norm: Gamma(dim, 1/eps) as :math:`\sum_{i=1}^{dim} -\log U_i / \varepsilon`.

    Returns
    -------
    ndarray of shape (size, dim)

    Raises
    ------
    ValidationError
        When eps is so small that a radius overflows float64 (the vectors themselves
        cannot be represented; releases use :func:`madlib_polar` and work at any eps).

    Examples
    --------
    >>> madlib_noise(3, 1.0, 4, rng=0).shape
    (4, 3)
    """
    direction, gamma = madlib_polar(dim, epsilon, size, rng)
    with np.errstate(over="ignore"):
        radius = gamma / float(epsilon)
    if not np.all(np.isfinite(radius)):
        raise ValidationError(f"epsilon={epsilon!r} is too small: the noise radius overflows float64")
    return direction * radius[:, None]


def nearest_release(
    space: PointSpace,
    inputs: NDArray[np.intp],
    direction: NDArray[np.float64],
    gamma: NDArray[np.float64],
    epsilon: float,
) -> NDArray[np.intp]:
    r"""The word nearest to :math:`x + (G/\varepsilon) v` for each input x, exactly, at any eps.

    With :math:`r = G/\varepsilon`, :math:`\lVert x + r v - p\rVert^2 = r^2\lVert v\rVert^2
    + \lVert x-p\rVert^2 - 2 r v\cdot(p - x)`. For :math:`r \le 1` the search minimises
    it directly (coefficients :math:`a = 1`, :math:`w = x + r v`); for :math:`r > 1` it
    minimises it divided by r, :math:`r^{-1}\lVert x-p\rVert^2 - 2 v\cdot(p-x)`
    (:math:`a = 1/r`, :math:`w = x/r + v`): the same argmin, and every term stays of the
    size of the vocabulary's coordinates whatever eps is (r = inf, i.e. 1/r = 0, gives
    the limit: the word furthest along v). All in centred coordinates
    (:class:`~metricdp.pointspace.PointSpace`), ranked exactly to float64 precision of
    the directly computed objective (:meth:`PointSpace.argmin_quadratic`).
    ``direction`` need not be a unit vector (the Mahalanobis mechanism passes
    :math:`S^{1/2}u`).
    """
    x = space.vectors[inputs]
    with np.errstate(over="ignore", divide="ignore"):
        r = gamma / epsilon
        inv_r = epsilon / gamma
    small = r <= 1.0
    r_s = np.where(small, r, 0.0)
    inv_s = np.where(small, 0.0, inv_r)
    a = np.where(small, 1.0, inv_s)
    w = np.where(small[:, None], x + r_s[:, None] * direction, inv_s[:, None] * x + direction)
    vec = space.vectors

    def exact(rows: NDArray[np.intp], cols: NDArray[np.intp]) -> NDArray[np.float64]:
        diff = x[rows] - vec[cols]  # x - p
        direct = diff + r_s[rows, None] * direction[rows]
        v_small = np.einsum("ij,ij->i", direct, direct)
        v_large = inv_s[rows] * np.einsum("ij,ij->i", diff, diff) + 2.0 * np.einsum("ij,ij->i", direction[rows], diff)
        return np.where(small[rows], v_small, v_large)

    return space.argmin_quadratic(a, w, exact)


@functools.lru_cache(maxsize=4)
def _point_space(space: MetricSpace) -> PointSpace:
    return PointSpace.from_points(np.asarray(space.points), space.labels, "euclidean")


def madlib_sample(
    space: MetricSpace | PointSpace, inputs: ArrayLike, epsilon: float, rng: object = None
) -> NDArray[np.intp]:
    """Madlib releases (indices of words) for input word indices: nearest word to x + z.

    Works on a dense :class:`MetricSpace` built from points or on a matrix-free
    :class:`~metricdp.pointspace.PointSpace`; the search runs in coordinates centred on
    the space and is exact at any finite eps > 0 (:func:`nearest_release`).
    ``rng=None`` draws from the OS's secure source (right for real data).

    Examples
    --------
    >>> space = MetricSpace.from_points([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> madlib_sample(space, [0, 0, 2], 50.0, rng=1).tolist()
    [0, 0, 2]
    """
    if isinstance(space, PointSpace):
        if space.metric != "euclidean":
            raise ValidationError(
                f"madlib is eps-mDP for the Euclidean metric only; the space's metric is {space.metric!r}"
            )
        pspace = space
    else:
        pspace = _point_space(_check_space(space))
    epsilon = check_epsilon(epsilon)
    idx = check_indices(inputs, pspace.n)
    source = check_rng(rng)
    direction, gamma = madlib_polar(pspace.dim, epsilon, len(idx), source)
    return nearest_release(pspace, idx, direction, gamma, epsilon)


def true_sampler(mechanism: Mechanism, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
    return madlib_sample(mechanism.space, inputs, float(mechanism.params["epsilon"]), rng)


@declared("madlib")
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
    source = check_rng(rng)
    matrix, estimate = estimate_matrix(space, lambda idx, r: madlib_sample(space, idx, epsilon, r), samples, source)
    params = {"epsilon": epsilon, "samples": samples, "dim": int(np.asarray(space.points).shape[1])}
    return Mechanism(matrix, space, epsilon, "madlib", params, {"estimate": estimate}, exact=False)


def madlib_epsilon(epsilon: float, **_: object) -> float:
    """Proven mDP level (Euclidean metric of the embedding) of Madlib with parameter eps: eps."""
    return check_epsilon(epsilon)
