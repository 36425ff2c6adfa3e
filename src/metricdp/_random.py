"""Randomness: one ``rng`` keyword everywhere.

* ``rng=None`` (the default when privatizing real data) draws from the operating system's
  cryptographically secure source (:func:`os.urandom`), through :class:`SecureRandom`.
* an ``int`` or :class:`numpy.random.SeedSequence` gives a reproducible
  :class:`numpy.random.Generator` (PCG64): right for experiments, wrong for releases,
  because anyone with the seed can replay the noise.
* a :class:`numpy.random.Generator` is used as it is.

Every sampler in metricdp consumes only uniform variates in [0, 1) through
``rng.random(size)``, so the secure source and numpy generators are interchangeable and
no sampler needs a numpy bit generator to be secure.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from .errors import ValidationError

__all__ = ["RandomSource", "SecureRandom", "check_rng", "standard_normal", "uniform_open"]

_TWO_53 = float(2**53)


@runtime_checkable
class RandomSource(Protocol):
    """Anything with ``random(size) -> float64 array in [0, 1)``."""

    def random(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.float64]: ...


class SecureRandom:
    """Uniform variates from :func:`os.urandom`, each a multiple of 2**-53 in [0, 1).

    Every one of the 2**53 values has probability exactly 2**-53, the same grid numpy's
    ``Generator.random`` uses, so samplers are exact to float64 resolution.
    """

    def random(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.float64]:
        shape = () if size is None else (size,) if isinstance(size, int | np.integer) else tuple(size)
        count = int(np.prod(shape, dtype=np.int64))
        raw = np.frombuffer(os.urandom(8 * count), dtype=np.uint64) >> np.uint64(11)
        out = raw.astype(np.float64) / _TWO_53
        return out.reshape(shape) if shape else out[0]

    def __repr__(self) -> str:
        return "SecureRandom(os.urandom)"


def check_rng(rng: object = None) -> RandomSource:
    """Normalise the ``rng`` keyword (see the module docstring)."""
    if rng is None:
        return SecureRandom()
    if isinstance(rng, np.random.Generator | SecureRandom):
        return rng
    if isinstance(rng, bool):
        raise ValidationError(f"rng must be None, an int seed or a numpy Generator, got {rng!r}")
    if isinstance(rng, int | np.integer):
        if rng < 0:
            raise ValidationError(f"rng seed must be >= 0, got {rng}")
        return np.random.default_rng(int(rng))
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, RandomSource):
        return rng
    raise ValidationError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")


def uniform_open(rng: RandomSource, size: int | tuple[int, ...]) -> NDArray[np.float64]:
    """Uniforms in the open interval (0, 1): safe inside ``log``."""
    u = np.asarray(rng.random(size), dtype=np.float64)
    # 0 has probability 2**-53; map it to the half-grid point so log(u) stays finite.
    return np.where(u == 0.0, 0.5 / _TWO_53, u)


def standard_normal(rng: RandomSource, size: int | tuple[int, ...]) -> NDArray[np.float64]:
    """Standard normal variates by the Box-Muller transform of ``rng``'s uniforms."""
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    half = (count + 1) // 2
    u1 = uniform_open(rng, half)
    u2 = np.asarray(rng.random(half), dtype=np.float64)
    radius = np.sqrt(-2.0 * np.log(u1))
    z = np.concatenate([radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)])
    return z[:count].reshape(shape)
