r"""Monte-Carlo estimates of the transition matrix of a mechanism known only by its sampler.

Used by Madlib and the subsampled exponential mechanism, whose exact matrices are
intractable. The estimate is for *evaluation* (losses, comparisons with other
mechanisms); it is never audited (its zeros would make the audited level infinite and
meaningless) and never sampled from: releases come from the true sampler.

Confidence statements (``info["estimate"]``), each at level ``confidence`` per row (not
simultaneous over rows):

* ``row_half_width[u]``: every entry of row u is within it of the true probability,
  by Hoeffding's inequality with a union bound over the row's n entries:
  :math:`\sqrt{\ln(2n/\delta) / (2N)}`, :math:`\delta = 1 - \text{confidence}`.
* ``loss_half_width[u]``: the true loss :math:`L(M,u) = \mathbb{E}\, d(u, M(u))` is within
  it of the estimate, by the empirical Bernstein bound (Maurer and Pontil, COLT 2009,
  Theorem 4, applied to both tails with :math:`\delta/2` each) for samples in
  :math:`[0, R_u]`, :math:`R_u = \max_v d(u,v)`:

  .. math:: \sqrt{\frac{2 V_N \ln(4/\delta)}{N}} + \frac{7 R_u \ln(4/\delta)}{3 (N - 1)},

  with :math:`V_N` the unbiased sample variance of the N losses. It is valid for every
  N (no normal approximation) and shrinks with the variance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._random import RandomSource
from ..spaces import MetricSpace

__all__ = ["estimate_matrix"]

#: Releases drawn per call of the sampler (bounds the sampler's temporaries).
_DRAWS_PER_CALL = 100_000


def estimate_matrix(
    space: MetricSpace,
    draw: Callable[[NDArray[np.intp], RandomSource], NDArray[np.intp]],
    samples: int,
    rng: RandomSource,
    confidence: float = 0.95,
) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """Empirical transition matrix from ``samples`` releases per row, with half-widths.

    Parameters
    ----------
    space : MetricSpace
    draw : callable
        ``draw(inputs, rng) -> outputs``, the true sampler on input indices.
    samples : int
        N >= 2 releases per row.
    rng : RandomSource
        Already normalised (:func:`metricdp._random.check_rng`).
    confidence : float

    Returns
    -------
    matrix : ndarray of shape (n, n)
        Counts / N (rows sum to 1 up to rounding).
    estimate : dict
        JSON-serialisable: ``samples_per_row``, ``confidence``, ``method``,
        ``row_half_width`` and ``loss_half_width`` (lists of n floats), ``loss`` (the
        estimated per-row losses).
    """
    n = space.n
    d = np.asarray(space.distances)
    counts = np.zeros((n, n), dtype=np.int64)
    rows_per_call = max(1, _DRAWS_PER_CALL // samples)
    for start in range(0, n, rows_per_call):  # a loop over row blocks, vectorised inside
        rows = np.arange(start, min(start + rows_per_call, n), dtype=np.intp)
        inputs = np.repeat(rows, samples)
        outputs = np.asarray(draw(inputs, rng), dtype=np.intp)
        flat = (inputs - start) * n + outputs
        counts[rows] += np.bincount(flat, minlength=len(rows) * n).reshape(len(rows), n)
    matrix = counts / float(samples)
    delta = 1.0 - confidence
    loss = np.einsum("ij,ij->i", matrix, d)
    second = np.einsum("ij,ij->i", matrix, d * d)
    variance = np.maximum(second - loss**2, 0.0) * samples / (samples - 1)
    log_term = math.log(4.0 / delta)
    loss_hw = np.sqrt(2.0 * variance * log_term / samples) + 7.0 * d.max(axis=1) * log_term / (3.0 * (samples - 1))
    row_hw = math.sqrt(math.log(2.0 * n / delta) / (2.0 * samples))
    estimate = {
        "samples_per_row": int(samples),
        "confidence": confidence,
        "method": (
            "per row: entries by Hoeffding with a union bound over the row; loss by the "
            "empirical Bernstein bound (Maurer and Pontil 2009, Thm 4, two-sided)"
        ),
        "row_half_width": [row_hw] * n,
        "loss_half_width": loss_hw.tolist(),
        "loss": loss.tolist(),
    }
    return matrix, estimate
