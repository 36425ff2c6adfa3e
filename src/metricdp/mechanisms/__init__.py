"""Mechanism families, one module each; the LP family lives in :mod:`metricdp.mechanisms.lp`."""

from __future__ import annotations

from .base import Mechanism, certify, register_sampler
from .calibration import Calibration, largest_passing
from .exponential import exponential, exponential_matrix, weighted_exponential
from .geometric import geometric
from .krr import krr

__all__ = [
    "Calibration",
    "Mechanism",
    "certify",
    "exponential",
    "exponential_matrix",
    "geometric",
    "krr",
    "largest_passing",
    "register_sampler",
    "weighted_exponential",
]
