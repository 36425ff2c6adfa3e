"""Privatize a column of a Spark DataFrame (``pip install 'metricdp[spark]'``; needs Java).

The mechanism is broadcast once (``SparkContext.broadcast``); each task reads it from
the broadcast, and releases run on Arrow batches through ``DataFrame.mapInPandas``.
Each partition draws from its own stream (see
:func:`metricdp.integrations.partition_rng`), keyed by ``TaskContext.partitionId()``.

Every action on the returned DataFrame re-runs the releases and draws NEW noise:
computing it twice is two releases of the same data (twice the privacy loss), and
Spark may recompute a lost partition. Write it once (or ``persist`` it) and use the
written copy.

Example::

    from pyspark.sql import SparkSession
    from metricdp.integrations.spark import privatize_spark

    spark = SparkSession.builder.master("local[*]").getOrCreate()
    df = spark.read.parquet("cities.parquet")
    privatize_spark(df, "city", mechanism).write.parquet("released/")
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._optional import import_optional
from ..errors import ValidationError
from ._common import Shipped, check_seed, partition_rng, release_column

__all__ = ["privatize_spark"]


def privatize_spark(df: Any, column: str, mechanism: Any, *, seed: int | None = None) -> Any:
    """A lazy Spark DataFrame with ``column`` (a string column) replaced by releases.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
    column : str
        A string column of labels of ``mechanism``'s space; a value that is not one
        fails the job with a :class:`~metricdp.errors.ValidationError` naming the
        partition and its row numbers.
    mechanism : Mechanism
    seed : int, optional
        Experiments only: partition k uses ``SeedSequence(seed).spawn(...)[k]``
        (:class:`~metricdp.errors.PrivacyLeakWarning`). Default: the OS secure source
        in every task.
    """
    import_optional("pyspark", extra="spark")
    types = import_optional("pyspark.sql.types", extra="spark")
    if column not in df.columns:
        raise ValidationError(f"no column {column!r}; available: {', '.join(repr(c) for c in df.columns)}")
    dtype = df.schema[column].dataType
    if not isinstance(dtype, types.StringType):
        raise ValidationError(f"column {column!r} must be a string column, got {dtype.simpleString()}")
    seed = check_seed(seed)
    shipped = df.sparkSession.sparkContext.broadcast(Shipped(mechanism))

    def release(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        rng = partition_rng(seed, partition)  # one stream for all batches of the partition
        mech = shipped.value.mechanism
        for pdf in batches:
            pdf[column] = release_column(pdf[column], mech, rng, f"partition {partition}, column {column!r}")
            yield pdf

    return df.mapInPandas(release, schema=df.schema)
