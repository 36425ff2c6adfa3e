"""Text mechanism families by name, with their proven-epsilon functions.

Every family's guarantee is eps-mDP per token for the Euclidean distance of the
embedding, whatever its other parameters (see each module's proof).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ValidationError
from ..pointspace import PointSpace
from .base import TextMechanism
from .exponential import ExponentialText, exponential_epsilon
from .madlib import MadlibText, madlib_epsilon
from .mahalanobis import MahalanobisText
from .subsampled import SubsampledText, subsampled_epsilon
from .tem import TEMText, tem_epsilon

__all__ = ["FAMILIES", "PROVEN_EPSILON", "build", "names"]

#: name -> class
FAMILIES: dict[str, type[TextMechanism]] = {
    "exponential": ExponentialText,
    "tem": TEMText,
    "madlib": MadlibText,
    "mahalanobis": MahalanobisText,
    "subsampled-exponential": SubsampledText,
}

#: name -> proven Euclidean epsilon as a function of the family's parameters
PROVEN_EPSILON: dict[str, Callable[..., float]] = {
    "exponential": exponential_epsilon,
    "tem": tem_epsilon,
    "madlib": madlib_epsilon,
    "mahalanobis": lambda epsilon, **_: float(epsilon),  # epsilon is the Euclidean guarantee
    "subsampled-exponential": subsampled_epsilon,
}


def names() -> list[str]:
    """The family names."""
    return list(FAMILIES)


def build(name: str, space: PointSpace, epsilon: float, **params: Any) -> TextMechanism:
    """Build the text mechanism ``name`` over ``space`` at Euclidean mDP level ``epsilon``."""
    if name not in FAMILIES:
        raise ValidationError(f"unknown text mechanism {name!r}; choose one of {', '.join(FAMILIES)}")
    try:
        return FAMILIES[name](space, epsilon, **params)
    except TypeError as ex:
        raise ValidationError(f"{name}: bad parameters {sorted(params)}: {ex}") from None
