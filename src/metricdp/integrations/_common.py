"""What both engines share: one stream per partition, label lookup, release of a pandas column."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._random import RandomSource, SecureRandom, warn_unless_secure
from ..errors import PrivacyLeakWarning, ValidationError

__all__ = ["Shipped", "check_seed", "partition_rng", "release_column"]

_SHOW = 5


class Shipped:
    """A mechanism packed for the wire: a plain holder whose pickle is the mechanism's own.

    :meth:`Mechanism.__reduce__ <metricdp.mechanisms.base.Mechanism.__reduce__>` rebuilds it
    through the auditing constructor on the worker, once per worker (a broadcast / one graph
    node), so what a partition samples is always an audited mechanism.
    """

    def __init__(self, mechanism: Any) -> None:
        self.mechanism = mechanism


def check_seed(seed: int | None) -> int | None:
    """Validate a user seed and warn that it is not private (None: nothing to say)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValidationError(f"seed must be None or an int >= 0, got {seed!r}")
    warn_unless_secure(int(seed), stacklevel=3)
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


def release_column(values: Any, mechanism: Any, rng: RandomSource, where: str) -> Any:
    """Releases for a pandas Series of labels, as an array of the Series' dtype.

    Labels are looked up with :func:`pyarrow.compute.index_in` (no Python objects for
    Arrow-backed strings, pandas' default); a value that is not a label (or a null) is a
    :class:`ValidationError` naming ``where``, the count and the first row numbers.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    labels = pa.array(list(mechanism.labels), type=pa.string())
    arr = pa.array(values, from_pandas=True)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.string())
    codes = np.asarray(pc.fill_null(pc.index_in(arr, value_set=labels), -1).to_numpy(zero_copy_only=False),
                       dtype=np.intp)
    bad = np.flatnonzero(codes < 0)
    if len(bad):
        shown = ", ".join(repr(values.iloc[i]) for i in bad[:_SHOW])
        raise ValidationError(
            f"{where}: {len(bad):,} value(s) not in the space's labels (first at row(s) "
            f"{', '.join(str(int(i) + 1) for i in bad[:_SHOW])} of the partition: {shown})"
        )
    if len(codes):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # announced once by the caller
            released = np.asarray(mechanism.sample(codes, rng), dtype=np.intp)
    else:
        released = codes
    outs = getattr(mechanism, "output_labels", None)  # a separate output set releases its own labels
    out = (labels if outs is None else pa.array(list(outs), type=pa.string())).take(pa.array(released))
    from_arrow = getattr(values.dtype, "__from_arrow__", None)
    return from_arrow(out) if from_arrow is not None else out.to_numpy(zero_copy_only=False)
