r"""The regularised Mahalanobis mechanism (Xu, Aggarwal, Feyisetan, Teissier, "A
differentially private text perturbation method using a regularized Mahalanobis metric",
PrivateNLP @ EMNLP 2020, Section 3, Algorithm 1).

With :math:`\Sigma` the sample covariance of the vocabulary's vectors normalised to
trace dim (:math:`\tilde\Sigma = \mathrm{dim}\,\Sigma/\mathrm{tr}\,\Sigma`, so the noise
has Madlib's average scale) and :math:`\lambda \in [0, 1)`, let
:math:`S = \lambda\tilde\Sigma + (1-\lambda) I`. For a word x, draw u uniform on the
unit sphere and :math:`R \sim \Gamma(\mathrm{dim}, 1/\varepsilon_R)`, and release the
vocabulary word nearest (Euclidean) to :math:`x + R\,S^{1/2}u`.

Privacy. :math:`z = R S^{1/2} u` has density :math:`\propto e^{-\varepsilon_R\lVert
S^{-1/2}z\rVert}` (a linear image of Madlib's noise), so by the triangle inequality for
the norm :math:`\lVert S^{-1/2}\cdot\rVert` the noisy vector is :math:`\varepsilon_R
d_R`-private for :math:`d_R(x,x') = \lVert S^{-1/2}(x-x')\rVert` (Xu et al., Theorem 1).
Since :math:`d_R(x,x') \le \lVert x - x'\rVert / \sqrt{\lambda_{\min}(S)}`, it is
:math:`\varepsilon`-mDP for the Euclidean metric with :math:`\varepsilon = \varepsilon_R /
\sqrt{\lambda_{\min}(S)}`. Here the user's ``epsilon`` is that Euclidean guarantee, as for
every other text mechanism, and the noise uses :math:`\varepsilon_R = \varepsilon
\sqrt{\lambda_{\min}(S)}` (computed with ``numpy.linalg.eigvalsh``, lowered by a
relative 1e-9 against its rounding). The nearest-word search is post-processing (exact
or HNSW, as in :mod:`.madlib`). :math:`\Sigma` comes from the public vocabulary, never
from the private text.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from .._validation import check_epsilon
from ..errors import ValidationError
from ..pointspace import PointSpace
from .ann import ANNIndex
from .madlib import MadlibText

__all__ = ["MahalanobisText", "mahalanobis_epsilon", "proven_epsilon", "regularised_covariance"]


def regularised_covariance(space: PointSpace, lam: float) -> NDArray[np.float64]:
    r""":math:`S = \lambda\,\mathrm{dim}\,\Sigma/\mathrm{tr}\Sigma + (1-\lambda)I` of the space's vectors."""
    lam = float(lam)
    if not 0.0 <= lam < 1.0:
        raise ValidationError(f"lam must be in [0, 1), got {lam!r}")
    v = space.vectors  # centred
    sigma = (v.T @ v) / max(1, space.n - 1)
    tr = float(np.trace(sigma))
    sigma = sigma * (space.dim / tr) if tr > 0 else np.eye(space.dim)
    return lam * sigma + (1.0 - lam) * np.eye(space.dim)


def proven_epsilon(epsilon: float, **_: object) -> float:
    """Proven Euclidean mDP level of the mechanism at parameter eps: eps itself.

    By construction the elliptical noise runs at :math:`\varepsilon_R = \varepsilon
    \\sqrt{\\lambda_{\\min}}` (:func:`mahalanobis_epsilon` proves the converse bound), so the
    guarantee for the Euclidean distance is the parameter, whatever ``lam`` and ``index``.
    """
    return check_epsilon(epsilon)


def mahalanobis_epsilon(epsilon_r: float, min_eigenvalue: float, **_: object) -> float:
    """Proven Euclidean mDP level of the noise at :math:`\\varepsilon_R`.

    It is :math:`\\varepsilon_R/\\sqrt{\\lambda_{\\min}(S)}` (module docstring).
    """
    return check_epsilon(epsilon_r, "epsilon_r") / math.sqrt(float(min_eigenvalue))


class MahalanobisText(MadlibText):
    """The regularised Mahalanobis mechanism over a :class:`PointSpace`.

    Parameters
    ----------
    space : PointSpace
    epsilon : float
        The Euclidean mDP guarantee (see the module docstring for the noise's eps_R).
    lam : float
        :math:`\\lambda \\in [0, 1)` (default 0.2, as in Xu et al.'s experiments).
    index : "exact", "ivf", "hnsw" or an ANNIndex
    """

    name = "mahalanobis"

    def __init__(
        self, space: PointSpace, epsilon: float, *, lam: float = 0.2, index: str | ANNIndex = "exact"
    ) -> None:
        super().__init__(space, epsilon, index=index)
        s = regularised_covariance(self.space, lam)
        vals, vecs = np.linalg.eigh(s)
        lam_min = float(vals.min()) * (1.0 - 1e-9)
        if not lam_min > 0:
            raise ValidationError("the regularised covariance is singular")
        self._sqrt = (vecs * np.sqrt(np.maximum(vals, 0.0))) @ vecs.T  # S^{1/2}, symmetric
        self.epsilon_r = check_epsilon(self.epsilon * math.sqrt(lam_min), "epsilon * sqrt(min eigenvalue)")
        self.params.update({"lam": float(lam), "epsilon_r": self.epsilon_r, "min_eigenvalue": lam_min})

    def _directions(self, direction: NDArray[np.float64]) -> NDArray[np.float64]:
        return direction @ self._sqrt

    def _noise_epsilon(self) -> float:
        return self.epsilon_r
