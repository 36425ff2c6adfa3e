"""Text mechanism families by name: a thin reader of the one registry.

The matrix-free families (``exponential``, ``tem``, ``madlib``, ``mahalanobis``,
``subsampled-exponential``) are entries of :data:`metricdp.mechanisms.registry.SAMPLER_FAMILIES`,
with their declared parameters and proven-epsilon functions. Every family's guarantee is
eps-mDP per token for the Euclidean distance of the embedding (see each module's proof).
"""

from __future__ import annotations

from os import PathLike
from typing import Any

from ..mechanisms import registry
from ..pointspace import PointSpace
from .base import TextMechanism

__all__ = ["build", "names", "proven_epsilon"]


def names() -> list[str]:
    """The family names."""
    return list(registry.sampler_names())


def proven_epsilon(name: str, epsilon: float, **params: Any) -> float:
    """The proven Euclidean epsilon of family ``name`` at these parameters."""
    return registry.get_sampler(name).proven_epsilon(epsilon, **params)


def build(name: str, space: PointSpace, epsilon: float, *, cache_dir: str | PathLike[str] | None = None,
          **params: Any) -> TextMechanism:
    """Build the text mechanism ``name`` over ``space`` at Euclidean mDP level ``epsilon``.

    ``cache_dir``: an existing directory where the families that build a structure per
    vocabulary (CusText's output sets and weights, 1-Diffractor's lists) keep it between
    runs (:mod:`metricdp.text.disk_cache`: read only when it checks out); the others ignore it.
    """
    return registry.get_sampler(name).build(space, epsilon, cache_dir=cache_dir, **params)
