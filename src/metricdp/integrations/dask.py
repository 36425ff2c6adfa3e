"""Privatize a column of a Dask DataFrame (``pip install 'metricdp[dask]'``).

The mechanism is one node of the task graph (``dask.delayed(mechanism)``): it is
serialised once and sent to each worker once, not once per partition. Each partition
draws from its own stream (see :func:`metricdp.integrations.partition_rng`).

Every computation of the returned DataFrame draws NEW releases: computing it twice is
two releases of the same data (twice the privacy loss). Persist it or write it once.

Example (a local cluster)::

    import dask.dataframe as dd
    from metricdp.integrations.dask import privatize_dask

    df = dd.read_parquet("cities.parquet")
    privatize_dask(df, "city", mechanism).to_parquet("released/")
"""

from __future__ import annotations

from typing import Any

from .._optional import import_optional
from ..errors import ValidationError
from ._common import Shipped, check_seed, partition_rng, release_column

__all__ = ["privatize_dask"]


def _release_partition(part: Any, mechanism: Any, column: str, seed: int | None, partition_info: Any = None) -> Any:
    number = 0 if partition_info is None else int(partition_info["number"])
    if partition_info is None and seed is not None:
        raise ValidationError("dask gave no partition number: cannot spawn a per-partition seed")
    rng = partition_rng(seed, number)
    out = part.copy()
    released = release_column(part[column], mechanism.mechanism, rng, f"partition {number}, column {column!r}")
    out[column] = released
    out[column] = out[column].astype(part[column].dtype)
    return out


def privatize_dask(df: Any, column: str, mechanism: Any, *, seed: int | None = None) -> Any:
    """A lazy Dask DataFrame with ``column`` replaced by releases of ``mechanism``.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
    column : str
        A column of labels of ``mechanism``'s space (a value that is not one makes the
        computation fail with :class:`~metricdp.errors.ValidationError`, naming the
        partition and its row numbers).
    mechanism : Mechanism
    seed : int, optional
        Experiments only: partition k uses ``SeedSequence(seed).spawn(...)[k]``
        (:class:`~metricdp.errors.PrivacyLeakWarning`). Default: the OS secure source
        in every partition.
    """
    dask = import_optional("dask", extra="dask")
    if column not in df.columns:
        raise ValidationError(f"no column {column!r}; available: {', '.join(repr(str(c)) for c in df.columns)}")
    seed = check_seed(seed)
    shipped = dask.delayed(Shipped(mechanism), pure=True)  # one graph node, sent once per worker
    return df.map_partitions(_release_partition, shipped, column, seed, meta=df._meta)
