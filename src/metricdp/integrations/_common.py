"""What both engines share: one stream per partition, label lookup, release of a pandas column."""

from __future__ import annotations

import dataclasses
import warnings
from types import MappingProxyType
from typing import Any

import numpy as np

from .._random import RandomSource, SecureRandom
from ..errors import PrivacyLeakWarning, ValidationError

__all__ = ["Shipped", "check_seed", "partition_rng", "release_column"]

_SHOW = 5


class Shipped:
    """A mechanism packed for the wire: ``pickle`` of :class:`Mechanism` as its fields.

    ``Mechanism`` keeps ``params``/``info`` in read-only ``mappingproxy`` objects,
    which pickle refuses; this holder sends the same fields as plain dicts and rebuilds
    the identical (already audited) object on the worker, without a second audit.
    """

    def __init__(self, mechanism: Any) -> None:
        self.mechanism = mechanism

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        fields = {f.name: getattr(self.mechanism, f.name) for f in dataclasses.fields(self.mechanism)}
        fields = {k: dict(v) if isinstance(v, MappingProxyType) else v for k, v in fields.items()}
        return _unship, (type(self.mechanism), fields)


def _unship(cls: type, fields: dict[str, Any]) -> Shipped:
    obj = object.__new__(cls)
    for k, v in fields.items():
        object.__setattr__(obj, k, MappingProxyType(v) if isinstance(v, dict) else v)
    return Shipped(obj)


def check_seed(seed: int | None) -> int | None:
    """Validate a user seed and warn that it is not private (None: nothing to say)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValidationError(f"seed must be None or an int >= 0, got {seed!r}")
    warnings.warn(
        "seed makes every partition's releases reproducible by anyone who knows it: not private for real data",
        PrivacyLeakWarning,
        stacklevel=3,
    )
    return int(seed)


def partition_rng(seed: int | None, partition: int) -> RandomSource:
    """The random source of partition number ``partition``.

    ``seed=None``: a fresh :class:`~metricdp._random.SecureRandom` (os.urandom), so no
    two partitions share anything. With a seed: a PCG64 generator seeded by
    ``SeedSequence(seed).spawn(k)[partition]`` for any ``k > partition``, which numpy
    defines as ``SeedSequence(seed, spawn_key=(partition,))``: computed here directly,
    so a worker needs neither the partition count nor the other children.

    >>> a = partition_rng(7, 3).random(2)
    >>> b = np.random.default_rng(np.random.SeedSequence(7).spawn(4)[3]).random(2)
    >>> bool((a == b).all())
    True
    """
    if seed is None:
        return SecureRandom()
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(partition),)))


def release_column(values: Any, mechanism: Any, rng: RandomSource, where: str) -> list[str] | np.ndarray:
    """Releases (labels, object array) for a pandas Series of labels; unknown labels are an error."""
    import pandas as pd

    index = pd.Index(list(mechanism.labels))
    codes = index.get_indexer(values.astype(object).where(values.notna(), None))
    bad = np.flatnonzero(codes < 0)
    if len(bad):
        shown = ", ".join(repr(values.iloc[i]) for i in bad[:_SHOW])
        raise ValidationError(
            f"{where}: {len(bad):,} value(s) not in the space's labels (first at row(s) "
            f"{', '.join(str(int(i) + 1) for i in bad[:_SHOW])} of the partition: {shown})"
        )
    if len(codes) == 0:
        return np.asarray([], dtype=object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # announced once by the caller
        released = mechanism.sample(codes.astype(np.intp), rng)
    return np.asarray(mechanism.labels, dtype=object)[np.asarray(released)]
