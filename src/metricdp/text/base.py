"""The interface of the matrix-free text mechanisms."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._random import RandomSource, check_rng
from .._validation import check_indices
from ..errors import ValidationError
from ..pointspace import PointSpace

__all__ = ["TextMechanism", "check_point_space"]


def check_point_space(space: object, metric: str = "euclidean") -> PointSpace:
    """A :class:`PointSpace` with the given metric, or one clear error."""
    if not isinstance(space, PointSpace):
        raise ValidationError(f"space must be a PointSpace, got {type(space).__name__}")
    if space.metric != metric:
        raise ValidationError(f"this mechanism is mDP for the {metric} metric; the space's metric is {space.metric!r}")
    return space


class TextMechanism(ABC):
    """A word-level mechanism over a :class:`PointSpace` vocabulary, sampled without a matrix.

    Attributes
    ----------
    name : str
        Family name (as the CLI spells it).
    space : PointSpace
    epsilon : float
        The proven mDP level for the space's Euclidean distance (per token).
    params : mapping
        Family parameters, derived ones included.
    """

    name: str = ""
    #: The distance ``epsilon`` is proven for.
    guarantee: str = "Euclidean distance of the embedding"

    def __init__(self, space: PointSpace, epsilon: float, params: Mapping[str, Any]) -> None:
        self.space = space
        self.epsilon = float(epsilon)
        self.params = dict(params)

    def sample(self, inputs: ArrayLike, rng: object = None) -> NDArray[np.intp]:
        """One release (a word index) per input word index; ``rng=None``: the OS's secure source."""
        idx = check_indices(inputs, self.space.n)
        return self._sample(idx.astype(np.intp), check_rng(rng))

    def release(self, words: Sequence[str], rng: object = None) -> list[str]:
        """Released words for words of the vocabulary (exact spelling)."""
        if isinstance(words, str):
            raise ValidationError("release takes a sequence of words; wrap a single word in a list")
        out = self.sample(self.space.index(list(words)), rng)
        return [self.space.labels[i] for i in out]

    @abstractmethod
    def _sample(self, inputs: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]: ...

    def __repr__(self) -> str:
        params = ", ".join(
            f"{k}={v!r}" for k, v in self.params.items() if k != "epsilon" and not isinstance(v, list | dict)
        )
        return f"{type(self).__name__}(n={self.space.n}, epsilon={self.epsilon:.6g}{', ' if params else ''}{params})"
