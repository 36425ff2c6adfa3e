"""The LP benchmark's data sets: the space (and prior) of each ``--data`` name, built
deterministically from ``n`` and ``seed`` with no download (:func:`bench_data`).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_int
from ..errors import ValidationError
from ..spaces import MetricSpace

__all__ = ["CLUSTER_SIZE", "CLUSTER_SPREAD", "DATASETS", "bench_data", "bench_space", "clustered_points"]

DATASETS = ("glove", "gaussian", "clustered", "geo", "grid")

#: ``clustered``: about this many points per cluster (k = ceil(n / CLUSTER_SIZE) centres).
CLUSTER_SIZE = 25

#: ``clustered``: standard deviation of a point's coordinates around its centre. The
#: centres are standard normal in 50 dimensions, about sqrt(2 * 50) = 10 apart; with this
#: spread two points of one cluster are about 0.2 * 10 = 2 apart: tight groups far from one
#: another, as the words of a vocabulary drawn around a few topics.
CLUSTER_SPREAD = 0.2


def bench_data(n: int, data: str = "glove", seed: int = 0) -> tuple[MetricSpace, np.ndarray | None]:
    """The benchmark's space and its prior (``None``: uniform).

    ``glove``: :func:`metricdp.data.glove.glove_space` (the real GloVe 6B 50-d vectors
    sampled as the paper does); ``gaussian``: n standard normal points
    in 50 dimensions (needs no optional package); ``clustered``: n points in 50 dimensions
    around ceil(n / 25) centres (:func:`clustered_points`; no optional package); ``geo``: the n most populous cells of
    Paris (:func:`metricdp.data.geo.geo_space`, haversine km, prior = population share);
    ``grid``: a k x k grid of unit cells (n = k^2, Euclidean; eps is then eps * cell) with
    a Dirichlet(0.5) prior drawn from ``seed`` (Bordenabe et al., CCS 2014's setting).
    """
    n = check_int(n, "n", minimum=2)
    if data == "glove":
        from ..data.glove import glove_space

        return glove_space(n, seed=seed), None
    if data == "gaussian":
        x = np.random.default_rng(seed).standard_normal((n, 50))
        return MetricSpace.from_points(x), None
    if data == "clustered":
        return MetricSpace.from_points(clustered_points(n, seed)), None
    if data == "geo":
        from ..data.geo import geo_space

        cells = geo_space("paris", size=n)
        return cells.space, cells.prior
    if data == "grid":
        k = math.isqrt(n)
        if k * k != n:
            raise ValidationError(f"grid data needs square sizes n = k*k, got n = {n}")
        prior = np.random.default_rng(seed).dirichlet(np.full(n, 0.5))
        return MetricSpace.grid(k, k, cell=1.0), prior
    raise ValidationError(f"data must be one of {', '.join(DATASETS)}, got {data!r}")


def bench_space(n: int, data: str = "glove", seed: int = 0) -> MetricSpace:
    """The space of :func:`bench_data` alone."""
    return bench_data(n, data, seed)[0]


def clustered_points(n: int, seed: int = 0, dim: int = 50) -> np.ndarray:
    r"""``n`` points in ``dim`` dimensions drawn around :math:`k = \lceil n / 25 \rceil` centres.

    A deterministic function of ``(n, seed, dim)`` (public benchmark data, so a seed is right
    here): the k centres are standard normal; each point picks its centre uniformly and adds
    normal noise of standard deviation :data:`CLUSTER_SPREAD` per coordinate. Why: the LP
    mechanisms' solve times depend on the instance at small eps, and a vocabulary of
    tight, well separated groups (most distances between groups, a few short ones within)
    is the other extreme to a GloVe sample's spread-out words.

    Returns
    -------
    ndarray (n, dim)
        The points, float64 (a centre may draw no point: the draw is uniform).
    """
    n = check_int(n, "n", minimum=2)
    rng = np.random.default_rng(seed)
    k = max(1, math.ceil(n / CLUSTER_SIZE))
    centres = rng.standard_normal((k, dim))
    which = rng.integers(k, size=n)
    return centres[which] + CLUSTER_SPREAD * rng.standard_normal((n, dim))
