"""Mechanism families, one module each; the LP family lives in :mod:`metricdp.mechanisms.lp`.

Builders are imported from their family module (``from metricdp.mechanisms.exponential
import exponential``): the package does not re-export functions named like their modules,
which would shadow the modules. Importing this package registers the true samplers of the
Monte-Carlo-estimated families (Madlib, the subsampled exponential mechanism), so a loaded
mechanism file samples from the mechanism itself, never from its estimated matrix.
"""

from __future__ import annotations

from . import calibration, exponential, geometric, krr, madlib, planar_laplace, subsampled
from .base import Mechanism, certify, register_sampler

__all__ = [
    "Mechanism",
    "calibration",
    "certify",
    "exponential",
    "geometric",
    "krr",
    "madlib",
    "planar_laplace",
    "register_sampler",
    "subsampled",
]
