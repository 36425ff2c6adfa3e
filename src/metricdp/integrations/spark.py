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

import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from .._optional import import_optional
from ..errors import MetricDPError, ValidationError
from ._common import Shipped, check_seed, partition_rng, release_column

__all__ = ["privatize_file_spark", "privatize_spark"]

#: Rows per Arrow batch in sessions the CLI creates (set it in your own session likewise).
_BATCH_ROWS = 200_000


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

    Notes
    -----
    Releases are drawn one Arrow batch at a time; Spark's default of 10,000 rows per
    batch (``spark.sql.execution.arrow.maxRecordsPerBatch``) halved the throughput in
    ``metricdp bench privatize`` against 200,000 (what the CLI's sessions use).
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


def privatize_file_spark(
    mechanism: Any,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    master: str | None = None,
    seed: int | None = None,
    inputs: Sequence[str | PathLike[str]] = (),
) -> int:
    """The ``--engine spark`` file path: read, release with Spark, write ``out`` atomically.

    ``master`` is a Spark master URL (``spark://host:7077``, ``yarn``, ``local[4]``);
    default ``local[*]``. A session already active in this process is used as it is
    (and left running); one created here is stopped at the end. Python workers run
    this interpreter (``PYSPARK_PYTHON``, unless set). CSV is read as strings with
    RFC 4180 escaping, one record per line (Spark splits files by lines); an empty
    unquoted field is read as null and written back empty. Returns the rows written.
    """
    from ..io import atomic_write
    from ..streaming.files import check_header, file_format
    from ._files import join_parts, part_files, remove, scratch_dir

    import_optional("pyspark", extra="spark")
    from pyspark.sql import SparkSession

    from .dask import _header

    src, target = Path(input_path), Path(out)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    fmt = file_format(src)
    names, schema = _header(src, fmt)
    check_header(names, column, str(src))
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise MetricDPError("the Spark engine needs Java (e.g. apt-get install openjdk-17-jre-headless)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    spark = active or (
        SparkSession.builder.master(master or "local[*]")
        .appName("metricdp privatize")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Arrow batches of 10,000 rows (the default) make one sampler call per 10,000 rows;
        # the sampler's cost per call grows with the distinct inputs, not the rows
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(_BATCH_ROWS))
        .getOrCreate()
    )
    try:
        if fmt == "csv":
            df = spark.read.option("header", True).option("escape", '"').option("inferSchema", False).csv(str(src))
        else:
            df = spark.read.parquet(str(src))
        with atomic_write(target, "wb", inputs=[src, *inputs]) as fh:
            tmp = scratch_dir(target)
            try:
                result = privatize_spark(df, column, mechanism, seed=seed)
                if fmt == "csv":
                    result.write.option("header", False).option("escape", '"').option("emptyValue", "").csv(
                        str(tmp / "out")
                    )
                else:
                    result.write.parquet(str(tmp / "out"))
                return join_parts(part_files(tmp / "out", "." + fmt), fmt, fh, header=names, schema=schema)
            except Exception as ex:
                if isinstance(ex, MetricDPError):
                    raise
                raise MetricDPError(f"the Spark job failed: {_last_line(ex)}") from None
            finally:
                remove(tmp)
    finally:
        if active is None:
            spark.stop()


def _last_line(ex: BaseException) -> str:
    """The Python error at the bottom of a Spark exception (its traceback is on the worker)."""
    lines = [ln.strip() for ln in str(ex).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error: " in ln or "Exception: " in ln]
    return (errors or lines or [type(ex).__name__])[-1]
