r"""Bayesian remapping of a finite mechanism (Chatzikokolakis, ElSalamouny, Palamidessi,
Pazii, "Efficient utility improvement for location privacy", PETS 2017, Section 3).

Given a mechanism M (n x n, inputs and outputs the points of a space), a prior
:math:`\pi` over inputs and a loss :math:`\ell(x, z)` (the metric by default), the
remap sends each output y to the point that minimises the posterior expected loss,

.. math:: \mathrm{remap}(y) = \arg\min_z \sum_x \pi(x)\, M[x, y]\, \ell(x, z)

(the posterior :math:`\pi(x) M[x,y] / \Pr[y]` has the same argmin; y itself wins ties,
then the smaller index). The remapped mechanism is :math:`M' = M R` with the 0/1 matrix
:math:`R[y, z] = [z = \mathrm{remap}(y)]`.

Privacy: R is a fixed function of the output, so M' is eps-mDP whenever M is:
:math:`M'[u, z] = \sum_{y \in \mathrm{remap}^{-1}(z)} M[u, y] \le e^{\varepsilon d(u,v)} M'[v, z]`.
:func:`bayesian_remap` nevertheless passes M' through
:func:`~metricdp.mechanisms.base.certify`, so what it returns has been audited: the matrix
audited is M' itself, the one its releases are drawn from. Above
:data:`~metricdp.audit_structured.DENSE_MAX_N` inputs that audit is the post-processing
proof (:func:`~metricdp.audit_structured.postprocessing_audit`): M' is checked entry by
entry to be the regrouping of M's columns, whose audited level (``info["epsilon_audit"]``)
plus the rounding of the regrouped sums bounds M''s level; below it, the dense audit.

Utility: z = y is a candidate in every minimum, so for the prior it was computed with,

.. math:: \sum_x \pi(x) \sum_y M[x,y]\, \ell(x, \mathrm{remap}(y))
          \le \sum_x \pi(x) \sum_y M[x,y]\, \ell(x, y),

the expected loss never increases (the remap keeps y unless another z is strictly
better in floating point). It is also exactly the expected error of the Bayes-optimal
adversary of :mod:`metricdp.adversary`: the remap is that adversary's guess.

With a separate output set (:mod:`metricdp.outputs`; M is n x m) the candidates z are
the outputs and the loss is the cross distance d(x, z) (n x m): R is m x m and M R is
again n x m over the same outputs. Privacy and the utility argument are unchanged.

The remap depends on the prior; the released outputs reveal the map, so the prior must
be public (e.g. populations) or itself released privately.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import csr_matrix

from ._resources import check_allocation
from ._validation import check_probability_vector, check_stochastic
from .audit_structured import DENSE_MAX_N, postprocessing_audit
from .errors import ValidationError
from .mechanisms.base import Mechanism, certify
from .mechanisms.dense_plan import ARRAYS

__all__ = ["bayesian_remap", "posterior_costs", "remap_targets"]


def _loss(loss: ArrayLike | None, distances: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    if loss is None:
        return distances
    a = np.asarray(loss, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != n:
        raise ValidationError(f"loss must be a matrix with {n} rows (inputs x candidates), got shape {a.shape}")
    if not np.all(np.isfinite(a)) or (a < 0).any():
        raise ValidationError("loss must be finite and >= 0")
    return a


def posterior_costs(matrix: ArrayLike, prior: ArrayLike, loss: ArrayLike) -> NDArray[np.float64]:
    r""":math:`C[y, z] = \sum_x \pi(x) M[x, y]\, \ell(x, z)`, shape (outputs, candidates).

    ``matrix`` may be rectangular (n inputs x m outputs); ``loss`` is (n inputs x k
    candidates). One BLAS product, O(n m k).
    """
    m = check_stochastic(matrix, name="matrix", square=False)
    pi = check_probability_vector(prior, m.shape[0], name="prior")
    ell = np.asarray(loss, dtype=np.float64)
    if ell.ndim != 2 or ell.shape[0] != m.shape[0]:
        raise ValidationError(f"loss must have {m.shape[0]} rows, got shape {ell.shape}")
    return (pi[:, None] * m).T @ ell


def remap_targets(costs: ArrayLike) -> NDArray[np.intp]:
    """The remap of every output from its cost matrix (square): argmin, keeping y unless strictly beaten.

    Examples
    --------
    >>> remap_targets([[1.0, 0.5], [2.0, 2.0]]).tolist()
    [1, 1]
    """
    c = np.asarray(costs, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValidationError(f"costs must be square (outputs x candidates = points), got shape {c.shape}")
    best = np.argmin(c, axis=1)  # smallest index among ties
    rows = np.arange(len(c))
    keep = c[rows, rows] <= c[rows, best]
    return np.where(keep, rows, best).astype(np.intp)


def bayesian_remap(mechanism: Mechanism, prior: ArrayLike, *, loss: ArrayLike | None = None) -> Mechanism:
    """The remapped mechanism M R for ``prior`` (see the module docstring), audited at the same epsilon.

    Parameters
    ----------
    mechanism : Mechanism
        An exact mechanism (an estimated one has no matrix to remap: its releases come
        from a true sampler).
    prior : array of shape (n,)
        Probabilities over the inputs (public).
    loss : array of shape (n, m), optional
        ``loss[x, z]`` for inputs x and outputs z; the mechanism's
        :attr:`~metricdp.mechanisms.base.Mechanism.loss_distances` by default (the space's
        distances, or the cross distances of a separate output set).

    Returns
    -------
    Mechanism
        Name ``<name>+remap``, the same epsilon and space; ``params`` adds ``remap:
        True``; ``info["remap"]`` holds the target of every output, the number of
        distinct outputs left, and the expected loss before and after under ``prior``.

    Raises
    ------
    ValidationError
        Bad prior or loss, or an estimated mechanism.
    PrivacyViolationError
        The audit refuses the remapped matrix (impossible for an eps-mDP input up to
        rounding; never returned unaudited).

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> from metricdp.mechanisms.exponential import exponential
    >>> space = MetricSpace.from_distances([[0, 1, 2], [1, 0, 1], [2, 1, 0]])
    >>> m = exponential(space, 0.5)
    >>> r = bayesian_remap(m, [0.8, 0.1, 0.1])
    >>> r.name, r.info["remap"]["targets"]
    ('exponential+remap', [0, 0, 0])
    >>> bool(r.expected_loss([0.8, 0.1, 0.1]) <= m.expected_loss([0.8, 0.1, 0.1]))
    True
    """
    if not isinstance(mechanism, Mechanism):
        raise ValidationError(f"mechanism must be a Mechanism, got {type(mechanism).__name__}")
    if not mechanism.exact:
        raise ValidationError(
            f"{mechanism.name}: an estimated (Monte-Carlo) mechanism cannot be remapped from its matrix; "
            "build an exact one"
        )
    n, k = mechanism.n, mechanism.m
    pi = check_probability_vector(prior, n, name="prior")
    d = np.asarray(mechanism.loss_distances)
    ell = _loss(loss, d, n)
    if ell.shape != (n, k):
        raise ValidationError(f"loss must be ({n}, {k}) (inputs x outputs), got {ell.shape}")
    check_allocation(ARRAYS["remap"] * 8.0 * n * k, f"a Bayesian remap on {n:,} x {k:,} ({ARRAYS['remap']:g} "
                     "dense arrays of that size)")
    targets = remap_targets(posterior_costs(mechanism.matrix, pi, ell))
    r = csr_matrix((np.ones(k), (np.arange(k), targets)), shape=(k, k))
    remapped = np.asarray((r.T @ np.asarray(mechanism.matrix).T).T)
    before = float(pi @ np.einsum("ij,ij->i", mechanism.matrix, ell))
    after = float(pi @ np.einsum("ij,ij->i", remapped, ell))
    params: dict[str, Any] = {**dict(mechanism.params), "remap": True}
    info: dict[str, Any] = {k: v for k, v in mechanism.info.items() if k != "epsilon_audit"}
    info["remap"] = {
        "source": mechanism.name,
        "targets": targets.tolist(),
        "outputs_used": len(np.unique(targets)),
        "loss": "distances" if loss is None else "custom",
        "expected_loss_before": before,
        "expected_loss_after": after,
        "prior": pi.tolist(),
    }
    proof = None
    if n > DENSE_MAX_N:  # post-processing, checked entry by entry: O(n m) instead of the dense O(n^2 m)
        proof = postprocessing_audit(remapped, mechanism.distances, mechanism.matrix,
                                     float(mechanism.info["epsilon_audit"]), targets)
    return certify(remapped, mechanism.space, mechanism.epsilon, f"{mechanism.name}+remap", params, info,
                   outputs=mechanism.outputs, proof=proof)
