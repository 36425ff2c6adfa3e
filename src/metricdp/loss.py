r"""Losses of a finite mechanism (Imola et al., UAI 2022, Section 2).

* per element: :math:`L(M,u) = \sum_v d(u,v) M[u,v]`;
* worst case: :math:`L(M) = \max_u L(M,u)`;
* quantile: :math:`L_q(M)` = the q-quantile of :math:`\{L(M,u)\}` in the
  *inverted-CDF* sense, the smallest value x such that at least
  :math:`\lceil q n \rceil` elements have :math:`L(M,u) \le x` (so :math:`L_1 = L`);
* expected under a prior :math:`\pi`: :math:`\sum_u \pi_u L(M,u)`;
* the uniform baseline: the loss of releasing a uniformly random element.

With a separate output set (:mod:`metricdp.outputs`) the matrix is (n, m) and the
distances are the (n, m) cross distances d(u, y) from inputs to outputs: every formula
above reads the same with v ranging over the outputs.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_probability_vector, check_quantile
from .errors import ValidationError

__all__ = [
    "element_losses",
    "expected_loss",
    "quantile_loss",
    "quantile_rank",
    "uniform_losses",
    "worst_case_loss",
]


def element_losses(matrix: ArrayLike, distances: ArrayLike) -> NDArray[np.float64]:
    """Loss on every element, shape (n,): ``(matrix * distances).sum(axis=1)``.

    ``matrix`` and ``distances`` have one shape: (n, n), or (n, m) with the distances
    from the n inputs to the m outputs.
    """
    m = np.asarray(matrix, dtype=np.float64)
    d = np.asarray(distances, dtype=np.float64)
    if m.shape != d.shape or m.ndim != 2 or 0 in m.shape:
        raise ValidationError(f"matrix {m.shape} and distances {d.shape} must have the same non-empty 2-d shape")
    if not np.isfinite(d).all():  # a policy graph: an output never released costs nothing (0 * inf = 0)
        d = np.where(m > 0, d, 0.0)
    return np.einsum("ij,ij->i", m, d)


def worst_case_loss(matrix: ArrayLike, distances: ArrayLike) -> float:
    """:math:`L(M) = \\max_u L(M,u)`."""
    return float(element_losses(matrix, distances).max())


def quantile_rank(n: int, q: float) -> int:
    """Number of elements the q-quantile must cover: ``ceil(q n)`` (at least 1).

    Computed with a tiny guard so that ``q n`` that is an integer up to float rounding
    (0.95 * 200 = 190.00000000000003) is not pushed to the next integer.
    """
    q = check_quantile(q)
    return max(1, min(n, math.ceil(q * n - 1e-9)))


def quantile_loss(matrix: ArrayLike, distances: ArrayLike, q: float = 0.95) -> float:
    """Inverted-CDF q-quantile of the element losses (see the module docstring)."""
    losses = np.sort(element_losses(matrix, distances))
    return float(losses[quantile_rank(len(losses), q) - 1])


def expected_loss(matrix: ArrayLike, distances: ArrayLike, prior: ArrayLike | None = None) -> float:
    """:math:`\\sum_u \\pi_u L(M,u)`; the uniform prior when ``prior`` is None."""
    losses = element_losses(matrix, distances)
    if prior is None:
        return float(losses.mean())
    pi = check_probability_vector(prior, len(losses))
    return float(pi @ losses)


def uniform_losses(distances: ArrayLike) -> NDArray[np.float64]:
    """Per-element loss of releasing a uniformly random output: the row means of d ((n, n) or (n, m))."""
    d = np.asarray(distances, dtype=np.float64)
    return d.mean(axis=1)
