r"""The subsampled exponential mechanism (Lantz, Boyd, Page, AISec 2015) over a
:class:`~metricdp.pointspace.PointSpace`: per token, m candidates drawn from a
data-independent base distribution :math:`\mu` (uniform, or public word frequencies),
then the exponential mechanism :math:`\propto e^{-\varepsilon d(x, z_i)/2}` among them.
Never the whole vocabulary is scored: a token costs m distances.

Privacy: eps-mDP for the Euclidean metric, proven in
:mod:`metricdp.mechanisms.subsampled` (each candidate list gives an eps-mDP choice by
the triangle inequality; the list is drawn independently of the input, and a mixture of
eps-mDP mechanisms with input-independent weights is eps-mDP). Distances to candidates
are computed directly from centred float64 vectors. On a small vocabulary
:func:`metricdp.mechanisms.subsampled.subsampled_exponential_exact` gives the exact
matrix of the same law.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource
from .._resources import check_allocation
from .._validation import check_epsilon, check_int
from ..errors import ValidationError
from ..pointspace import PointSpace
from ..sampling import clamp_distances, draw_exact
from .base import TextMechanism, check_point_space

__all__ = ["SubsampledText", "subsampled_epsilon", "zipf_base"]

_ELEMENTS = 1 << 22  # tokens x m x dim float64 per chunk (32 MiB)


def subsampled_epsilon(epsilon: float, **_: object) -> float:
    """Proven mDP level of the subsampled exponential mechanism at eps (any m, any base): eps."""
    return check_epsilon(epsilon)


def zipf_base(n: int, s: float = 1.0) -> NDArray[np.float64]:
    """Zipf weights :math:`\\propto 1/(k+1)^s` by rank k: a public frequency prior for
    vocabularies sorted by frequency (GloVe's order)."""
    return 1.0 / np.arange(1, int(n) + 1, dtype=np.float64) ** float(s)


class SubsampledText(TextMechanism):
    """Subsampled exponential mechanism over a :class:`PointSpace`.

    Parameters
    ----------
    space : PointSpace
    epsilon : float
    candidates : int
        m (default 50).
    base : None, "zipf" or array of n weights
        The base distribution (uniform when None; "zipf": :func:`zipf_base`, right when
        the vocabulary is sorted by public frequency). Must not depend on private data.
    """

    name = "subsampled-exponential"

    def __init__(
        self, space: PointSpace, epsilon: float, *, candidates: int = 50, base: str | ArrayLike | None = None
    ) -> None:
        space = check_point_space(space)
        epsilon = check_epsilon(epsilon)
        m = check_int(candidates, "candidates", minimum=1)
        # one token's candidates (their vectors, distances, weights) are the smallest block _sample allocates
        check_allocation(8.0 * m * (space.dim + 4), f"candidates = {m}: one token's {m} candidate vectors")
        if isinstance(base, str):
            if base != "zipf":
                raise ValidationError(f"base must be None, 'zipf' or n weights, got {base!r}")
            w = zipf_base(space.n)
        elif base is None:
            w = np.ones(space.n)
        else:
            w = np.asarray(base, dtype=np.float64)
            if w.shape != (space.n,) or not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
                raise ValidationError(f"base must be {space.n} finite weights >= 0, not all zero")
        self._cdf = np.cumsum(w / w.sum())
        super().__init__(
            space,
            epsilon,
            {"epsilon": epsilon, "candidates": m, "base": base if isinstance(base, str) or base is None else "custom"},
        )
        self.m = m

    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
        n, m, vec = self.space.n, self.m, self.space.vectors
        out = np.empty(len(inputs), dtype=np.intp)
        chunk = max(1, _ELEMENTS // (m * self.space.dim))
        for s in range(0, len(inputs), chunk):
            idx = inputs[s : s + chunk]
            u = np.asarray(rng.random((len(idx), m)), dtype=np.float64)
            cand = np.minimum(np.searchsorted(self._cdf, u * self._cdf[-1], side="right"), n - 1)
            diff = vec[cand] - vec[idx][:, None, :]
            dist = np.sqrt(np.einsum("tmk,tmk->tm", diff, diff))
            dist = clamp_distances(dist, self.epsilon)  # no weight underflows to 0 (proof there)
            weight = np.exp(-self.epsilon / 2.0 * (dist - dist.min(axis=1, keepdims=True)))
            pick = draw_exact(weight, rng)  # exact in the float weights: no float uniform
            out[s : s + len(idx)] = cand[np.arange(len(idx)), pick]
        return out
