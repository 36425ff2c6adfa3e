"""The LP benchmark's data sets: the space (and prior) of each ``--data`` name, built
deterministically from ``n`` and ``seed`` with no download (:func:`bench_data`).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_int
from ..errors import ValidationError
from ..spaces import MetricSpace

__all__ = ["DATASETS", "bench_data", "bench_space"]

DATASETS = ("glove", "gaussian", "geo", "grid")


def bench_data(n: int, data: str = "glove", seed: int = 0) -> tuple[MetricSpace, np.ndarray | None]:
    """The benchmark's space and its prior (``None``: uniform).

    ``glove``: :func:`metricdp.data.glove.glove_space` (the real GloVe 6B 50-d vectors
    sampled as the paper does); ``gaussian``: n standard normal points
    in 50 dimensions (needs no optional package); ``geo``: the n most populous cells of
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

