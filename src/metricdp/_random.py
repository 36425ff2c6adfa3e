"""Randomness: one ``rng`` keyword everywhere.

* ``rng=None`` (the default when privatizing real data) draws from the operating system's
  cryptographically secure source (:func:`os.urandom`), through :class:`SecureRandom`.
* an ``int`` or :class:`numpy.random.SeedSequence` gives a reproducible
  :class:`numpy.random.Generator` (PCG64): right for experiments, wrong for releases,
  because anyone with the seed can replay the noise.
* a :class:`numpy.random.Generator` is used as it is (not secure either: its state can be
  recovered from its output).
* a legacy :class:`numpy.random.RandomState` is refused (:class:`ValidationError`): it is
  Mersenne Twister, predictable from 624 outputs, and its ``random`` cannot be told apart
  from a seeded stream; use ``numpy.random.default_rng(seed)`` for experiments.
* any other object with ``random(size)`` (and optionally ``words(count)``) is wrapped so
  that every uniform it returns is checked: a value outside [0, 1), NaN or infinite is a
  :class:`ValidationError`, never a silently wrong release.

Two kinds of randomness are drawn:

* **random bits** (:func:`random_words`, 64-bit words): the exact finite sampler
  (:mod:`metricdp.sampling`) consumes only these, so its releases follow the audited
  matrix exactly;
* **uniforms** in [0, 1) (``rng.random(size)``, multiples of 2**-53): the continuous
  samplers and the float inverse-CDF path (``exact=False``).

:func:`check_release_rng` is the rule for releases of real data: it returns the source and
emits a :class:`~metricdp.errors.PrivacyLeakWarning` unless the source is the OS's
secure one.
"""

from __future__ import annotations

import os
import warnings
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from .errors import PrivacyLeakWarning, ValidationError

__all__ = [
    "RandomSource",
    "SecureRandom",
    "check_release_rng",
    "check_rng",
    "is_secure",
    "random_words",
    "standard_normal",
    "uniform_open",
]

_TWO_53 = float(2**53)


@runtime_checkable
class RandomSource(Protocol):
    """Anything with ``random(size) -> float64 array in [0, 1)``."""

    def random(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.float64]: ...


def _shape(size: int | tuple[int, ...] | None) -> tuple[int, ...]:
    return () if size is None else (int(size),) if isinstance(size, int | np.integer) else tuple(size)


class SecureRandom:
    """Random bits and uniforms from :func:`os.urandom`.

    ``words(count)`` gives independent uniform 64-bit words; ``random(size)`` gives
    uniforms that are multiples of 2**-53 in [0, 1), each of the 2**53 values with
    probability exactly 2**-53 (the grid numpy's ``Generator.random`` uses).
    """

    def words(self, count: int) -> NDArray[np.uint64]:
        """``count`` independent uniform 64-bit words."""
        return np.frombuffer(os.urandom(8 * int(count)), dtype=np.uint64).copy()

    def random(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.float64]:
        shape = _shape(size)
        count = int(np.prod(shape, dtype=np.int64))
        raw = np.frombuffer(os.urandom(8 * count), dtype=np.uint64) >> np.uint64(11)
        out = raw.astype(np.float64) / _TWO_53
        return out.reshape(shape) if shape else out[0]

    def __repr__(self) -> str:
        return "SecureRandom(os.urandom)"


class _CheckedSource:
    """A user-supplied source whose every uniform (and word) is checked before use."""

    def __init__(self, inner: RandomSource) -> None:
        self.inner = inner

    def random(self, size: int | tuple[int, ...] | None = None) -> NDArray[np.float64]:
        shape = _shape(size)
        try:
            u = np.asarray(self.inner.random(size), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"rng {type(self.inner).__name__}.random() did not return numbers: {exc}") from None
        if u.shape != shape:
            raise ValidationError(f"rng {type(self.inner).__name__}.random({size!r}) returned shape {u.shape}")
        bad = ~(np.isfinite(u) & (u >= 0.0) & (u < 1.0))
        if bad.any():
            value = u.ravel()[int(np.argmax(bad.ravel()))]
            raise ValidationError(
                f"rng {type(self.inner).__name__} returned the uniform {value!r}, outside [0, 1); refusing to sample"
            )
        return u if shape else u[()]

    def words(self, count: int) -> NDArray[np.uint64]:
        inner_words = getattr(self.inner, "words", None)
        if inner_words is not None:
            w = np.asarray(inner_words(count))
            if w.shape != (count,) or w.dtype != np.uint64:
                raise ValidationError(
                    f"rng {type(self.inner).__name__}.words({count}) must return {count} uint64 words, "
                    f"got dtype {w.dtype} shape {w.shape}"
                )
            return w
        # 53 bits from each of two checked uniforms: the top 53 and the next 11 bits.
        u = self.random(2 * count).reshape(count, 2) if count else np.zeros((0, 2))
        k = np.floor(u * _TWO_53).astype(np.uint64)
        return (k[:, 0] << np.uint64(11)) | (k[:, 1] >> np.uint64(42))

    def __repr__(self) -> str:
        return f"checked({self.inner!r})"


def check_rng(rng: object = None) -> RandomSource:
    """Normalise the ``rng`` keyword (see the module docstring)."""
    if rng is None:
        return SecureRandom()
    if type(rng) is np.random.Generator or type(rng) is SecureRandom or type(rng) is _CheckedSource:
        return rng
    if isinstance(rng, np.random.RandomState):
        raise ValidationError(
            "rng: a legacy numpy RandomState is refused (Mersenne Twister, predictable); "
            "use None (the OS secure source) or numpy.random.default_rng(seed) for experiments"
        )
    if isinstance(rng, bool):
        raise ValidationError(f"rng must be None, an int seed or a numpy Generator, got {rng!r}")
    if isinstance(rng, int | np.integer):
        if rng < 0:
            raise ValidationError(f"rng seed must be >= 0, got {rng}")
        return np.random.default_rng(int(rng))
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, RandomSource):
        return _CheckedSource(rng)
    raise ValidationError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")


def is_secure(source: object) -> bool:
    """Whether ``source`` (as returned by :func:`check_rng`) is the OS's secure source."""
    return type(source) is SecureRandom


def insecure_message(rng: object) -> str:
    """The one text of the :class:`~metricdp.errors.PrivacyLeakWarning` for a release
    source that is not the OS's secure one (what it is, why it leaks, what to do)."""
    if isinstance(rng, int | np.integer) and not isinstance(rng, bool):
        what = f"the seed {int(rng)}"
    elif isinstance(rng, np.random.SeedSequence):
        what = f"the seed sequence {rng.entropy!r:.40}"
    else:
        what = f"the generator {rng!r:.60}"
    return (f"{what} is not the OS secure source: anyone who knows the seed or the generator's state can reproduce "
            "the releases, which are NOT private; use the default source (the OS's) for real data")


def warn_unless_secure(rng: object, *, stacklevel: int = 2) -> bool:
    """The one rule of release randomness: True when ``rng`` is the OS secure source
    (``None``, the default, or a :class:`SecureRandom`), else a
    :class:`~metricdp.errors.PrivacyLeakWarning` (:func:`insecure_message`) and False.

    Every releasing entry point asks this function -- :func:`check_release_rng`, the file
    and point releases, the engines' seeds -- so the rule and its message are stated
    once. ``stacklevel`` is the caller's, as if the caller had called :func:`warnings.warn`
    (2: the line that called the caller). A subclass of :class:`SecureRandom` is not the
    secure source (it may override the draws).
    """
    if rng is None or type(rng) is SecureRandom:
        return True
    warnings.warn(insecure_message(rng), PrivacyLeakWarning, stacklevel=stacklevel + 1)
    return False


def check_release_rng(rng: object = None, *, stacklevel: int = 3) -> RandomSource:
    """:func:`check_rng` for releases of real data, warning unless the source is secure
    (:func:`warn_unless_secure`: once per call)."""
    source = check_rng(rng)
    warn_unless_secure(rng, stacklevel=stacklevel)
    return source


def random_words(rng: RandomSource, count: int) -> NDArray[np.uint64]:
    """``count`` independent uniform 64-bit words from ``rng`` (normalised by :func:`check_rng`).

    The secure source reads :func:`os.urandom`; a numpy Generator uses
    ``integers(0, 2**64, dtype=uint64)``; a checked user source its own ``words`` or,
    failing that, 53 + 11 bits of two of its checked uniforms.
    """
    count = int(count)
    if type(rng) is np.random.Generator:
        return rng.integers(0, 2**64, size=count, dtype=np.uint64, endpoint=False)
    words = getattr(rng, "words", None)
    if words is None:
        return _CheckedSource(rng).words(count)
    return words(count)


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
