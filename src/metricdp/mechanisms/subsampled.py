r"""Subsampled exponential mechanism (Lantz, Boyd, Page, "Subsampled exponential
mechanism: differential privacy in large output spaces", AISec 2015).

For an input x: draw m candidates :math:`z_1..z_m` independently from a base
distribution :math:`\mu` that does not depend on the data (uniform, or weights such as
word frequencies from a public corpus), then release :math:`z_i` with probability

.. math:: \frac{e^{-\varepsilon d(x, z_i)/2}}{\sum_{j=1}^m e^{-\varepsilon d(x, z_j)/2}}

(the exponential mechanism with score :math:`-d(x,z)` on the candidates only; a
candidate drawn twice counts twice).

Privacy (mDP): for a fixed candidate list, the release probability of index i changes
between x and x' by at most :math:`e^{\varepsilon d(x,x')/2}` in the numerator and
:math:`e^{\varepsilon d(x,x')/2}` in the denominator (triangle inequality), so each list
gives an eps-mDP choice; the list is drawn independently of x, and a mixture of eps-mDP
mechanisms with input-independent weights is eps-mDP. For standard DP with a quality
function of sensitivity :math:`\Delta` and :math:`\varepsilon` in the exponent, the same
argument gives :math:`2\varepsilon\Delta`-DP (Lantz et al., Theorem 4).

The base distribution must not depend on the private data, or the argument fails.

Exact matrix: :func:`subsampled_exponential_exact` sums over the multisets of
candidates (multinomial weights), feasible for small n and m; otherwise
:func:`subsampled_exponential` returns a Monte-Carlo estimate (``exact=False``) and
releases come from :func:`subsampled_exponential_sample`.

The sampler and the enumeration are the generic SSEM of :mod:`metricdp.mechanisms.selection`
(quality :math:`-d(x, z)`, exponent :math:`\varepsilon/2`), which also serves central DP.
"""

from __future__ import annotations

from math import comb

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_rng
from .._validation import check_epsilon, check_indices, check_int
from ..errors import ValidationError
from ..sampling import clamp_distances
from ..spaces import MetricSpace, check_space
from ._montecarlo import estimate_matrix
from .base import Mechanism
from .registry import declared
from .selection import compositions, draw_base, exponential_choice, multiset_probabilities

__all__ = ["subsampled_exponential", "subsampled_exponential_exact", "subsampled_exponential_sample", "true_sampler"]

#: Largest number of candidate multisets :func:`subsampled_exponential_exact` enumerates.
MAX_MULTISETS = 2_000_000
_ENUM_BLOCK = 1 << 22  # elements of the (multisets, n, n) temporaries



def _base(base: ArrayLike | None, n: int) -> NDArray[np.float64]:
    """The base distribution mu: uniform when None, else weights normalised to sum 1."""
    if base is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(base, dtype=np.float64)
    if w.shape != (n,):
        raise ValidationError(f"base must be {n} weights (one per point), got shape {w.shape}")
    if not np.all(np.isfinite(w)) or (w < 0).any():
        i = int(np.flatnonzero(~np.isfinite(w) | (w < 0))[0])
        raise ValidationError(f"base weight {i} is {w[i]!r}; weights must be finite and >= 0")
    if w.sum() <= 0:
        raise ValidationError("base weights are all zero")
    return w / w.sum()


def subsampled_exponential_sample(
    space: MetricSpace,
    inputs: ArrayLike,
    epsilon: float,
    candidates: int,
    base: ArrayLike | None = None,
    rng: object = None,
) -> NDArray[np.intp]:
    """Releases of the subsampled exponential mechanism for input indices.

    Per input: m uniforms pick the candidates by inverse CDF on mu, one more picks
    among them by inverse CDF on the exponential-mechanism weights (shifted by the
    nearest candidate's distance, so nothing underflows to an all-zero row).

    Parameters
    ----------
    space : MetricSpace
    inputs : array of int
    epsilon : float
    candidates : int
        m >= 1.
    base : array of n weights, optional
        Data-independent base distribution (uniform when omitted).
    rng : None, int or Generator
        ``None`` draws from the OS's secure source.

    Returns
    -------
    ndarray of int, one release per input

    Examples
    --------
    >>> space = MetricSpace.from_points([[0.0], [1.0], [5.0]])
    >>> subsampled_exponential_sample(space, [0, 2], 1.0, 3, rng=0).shape
    (2,)
    """
    space = check_space(space)
    epsilon = check_epsilon(epsilon)
    m = check_int(candidates, "candidates", minimum=1)
    mu = _base(base, space.n)
    idx = check_indices(inputs, space.n)
    source = check_rng(rng)
    return _sample(np.asarray(space.distances), idx, epsilon, m, mu, source)


def _sample(
    d: NDArray[np.float64], idx: NDArray[np.intp], epsilon: float, m: int, mu: NDArray[np.float64], rng: RandomSource
) -> NDArray[np.intp]:
    """The generic SSEM core (:mod:`metricdp.mechanisms.selection`) with quality -d(x, z) and exponent eps/2."""
    u = np.asarray(rng.random((len(idx), m)), dtype=np.float64)
    cand = draw_base(np.cumsum(mu), u)
    # clamped distances: no weight underflows to 0 (metricdp.sampling.clamp_distances, proof there)
    pick = exponential_choice(-clamp_distances(d[idx[:, None], cand], epsilon), epsilon / 2.0, rng)
    return cand[np.arange(len(idx)), pick]


def subsampled_exponential_exact(
    space: MetricSpace, epsilon: float, candidates: int, base: ArrayLike | None = None
) -> NDArray[np.float64]:
    r"""The exact transition matrix by enumeration of the candidate multisets.

    .. math::

        M[x, z] = \sum_{c} \binom{m}{c_1 \dots c_n} \prod_j \mu_j^{c_j}\,
                  \frac{c_z\, e^{-\varepsilon d(x,z)/2}}{\sum_j c_j e^{-\varepsilon d(x,j)/2}}

    over the count vectors c of m draws. Vectorised over blocks of multisets; the
    weights are shifted per (multiset, x) by the nearest drawn candidate, so no
    denominator underflows.

    Raises
    ------
    ValidationError
        When there are more than ``MAX_MULTISETS`` multisets, C(n + m - 1, m).
    """
    space = check_space(space)
    epsilon = check_epsilon(epsilon)
    m = check_int(candidates, "candidates", minimum=1)
    n = space.n
    mu = _base(base, n)
    count = comb(n + m - 1, m)
    if count > MAX_MULTISETS:
        raise ValidationError(
            f"candidates={m} on {n} points gives {count} multisets (more than {MAX_MULTISETS}); "
            "use subsampled_exponential (Monte-Carlo) instead"
        )
    d = clamp_distances(space.distances, epsilon)  # the sampler's clamped score
    comps = compositions(n, m)
    comps = comps[comps[:, mu == 0].sum(axis=1) == 0]  # multisets with a zero-weight point never occur
    prob = multiset_probabilities(comps, mu)
    out = np.zeros((n, n))
    block = max(1, _ENUM_BLOCK // (n * n))
    for start in range(0, len(comps), block):
        c = comps[start : start + block].astype(np.float64)  # (b, z)
        present = c > 0
        # nearest drawn candidate per (multiset, x): the shift of the weights
        near = np.where(present[:, None, :], d[None, :, :], np.inf).min(axis=2)  # (b, x)
        # Undrawn z get weight 0 through exp(-inf); only drawn z (d >= near) reach exp,
        # whose exponent is then <= 0, so nothing overflows into inf * 0 = nan.
        expo = np.where(present[:, None, :], -epsilon / 2.0 * (d[None, :, :] - near[:, :, None]), -np.inf)
        w = np.exp(expo) * c[:, None, :]  # (b, x, z)
        w /= w.sum(axis=2, keepdims=True)
        out += np.einsum("b,bxz->xz", prob[start : start + block], w)
    return out / out.sum(axis=1, keepdims=True)


def true_sampler(mechanism: Mechanism, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
    p = mechanism.params
    mu = _base(p.get("base"), mechanism.n)
    return _sample(np.asarray(mechanism.distances), inputs, float(p["epsilon"]), int(p["candidates"]), mu, rng)


@declared("subsampled-exponential")
def subsampled_exponential(
    space: MetricSpace,
    epsilon: float,
    *,
    candidates: int = 10,
    base: ArrayLike | None = None,
    samples: int = 2000,
    rng: object = None,
) -> Mechanism:
    """The subsampled exponential mechanism with a Monte-Carlo estimate of its matrix.

    Parameters
    ----------
    space : MetricSpace
    epsilon : float
        The mDP level (proven for the true sampler, see the module docstring).
    candidates : int
        m, candidates drawn per release.
    base : array of n weights, optional
        Data-independent base distribution (uniform when omitted); stored in ``params``
        as a list so that the true sampler can be rebuilt from a mechanism file.
    samples : int
        Releases per row for the estimate (>= 2).
    rng : None, int or Generator
        Randomness of the estimate (``None``: the OS's secure source).

    Returns
    -------
    Mechanism
        ``name="subsampled-exponential"``, ``exact=False``; ``info["estimate"]`` as in
        :mod:`._montecarlo`; ``sample`` uses the true sampler. For small n and m,
        :func:`subsampled_exponential_exact` gives the exact matrix.
    """
    space = check_space(space)
    epsilon = check_epsilon(epsilon)
    m = int(candidates)
    mu = _base(base, space.n)
    source = check_rng(rng)
    d = np.asarray(space.distances)
    matrix, estimate = estimate_matrix(space, lambda idx, r: _sample(d, idx, epsilon, m, mu, r), samples, source)
    params = {
        "epsilon": epsilon,
        "candidates": m,
        "base": None if base is None else mu.tolist(),
        "samples": samples,
    }
    return Mechanism(matrix, space, epsilon, "subsampled-exponential", params, {"estimate": estimate}, exact=False)
