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

For a CSV file use :func:`privatize_file_spark`, not ``spark.read.csv``: Spark drops a
surplus field, splits records at quoted line breaks unless ``multiLine`` is set and
reads an empty field as null.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any, Unpack

from .._optional import import_optional
from ..errors import EngineError, ValidationError
from ._backend import Backend, Tally
from ._common import Shipped, check_seed, partition_rng, release_column

if TYPE_CHECKING:
    from ._run import FileOptions

__all__ = ["SparkBackend", "privatize_file_spark", "privatize_spark", "spark_ready"]


def privatize_spark(df: Any, column: str, mechanism: Any, *, seed: int | None = None, keep: Sequence[str] = (),
                    drop: Sequence[str] = ()) -> Any:
    """A lazy Spark DataFrame with ``column`` (a string column) replaced by releases, ``drop`` left out.

    What leaves is decided as for :func:`metricdp.frames.privatize_frame`, before the frame
    is returned (:mod:`._frames`: small jobs compare the rows the pandas API compares): a
    column neither released nor named in ``keep``/``drop`` that is named like ``column`` or
    holds its true values in most compared rows is refused; the others are named in an
    :class:`~metricdp.errors.UnnamedColumnsWarning`.

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
    keep, drop : sequence of str
        Columns written unreleased on purpose / left out.

    Raises
    ------
    ValidationError
        a missing or non-string column, a bad ``keep``/``drop`` name, an unnamed column
        that reveals ``column`` (named with its first compared row): nothing is returned.

    Notes
    -----
    Releases are drawn one Arrow batch at a time; Spark's default of 10,000 rows per
    batch (``spark.sql.execution.arrow.maxRecordsPerBatch``) halved the throughput in
    ``metricdp bench privatize`` against 200,000: set it in your session.
    """
    import_optional("pyspark", extra="spark")
    types = import_optional("pyspark.sql.types", extra="spark")
    if column not in df.columns:
        raise ValidationError(f"no column {column!r}; available: {', '.join(repr(c) for c in df.columns)}")
    dtype = df.schema[column].dataType
    if not isinstance(dtype, types.StringType):
        raise ValidationError(f"column {column!r} must be a string column, got {dtype.simpleString()}")
    plan = _checked(df, column, keep, drop)
    seed = check_seed(seed)
    shipped = df.sparkSession.sparkContext.broadcast(Shipped(mechanism))

    def release(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        rng = partition_rng(seed, partition)  # one stream for all batches of the partition
        mech = shipped.value.mechanism
        for pdf in batches:
            pdf[inner] = release_column(pdf[inner], mech, rng, f"partition {partition}, column {column!r}")
            yield pdf

    names = list(df.columns)  # positional names inside the job: Spark reads a dot in a name as a struct field
    inner = f"c{names.index(column)}"
    plain = df.toDF(*[f"c{i}" for i in range(len(names))])
    out = plain.mapInPandas(release, schema=plain.schema).toDF(*names)
    gone = set(plan.dropped)
    return out.select(*[out[f"`{n.replace('`', '``')}`"] for n in names if n not in gone]) if gone else out


def _checked(df: Any, column: str, keep: Sequence[str], drop: Sequence[str]) -> Any:
    """The column plan of :func:`privatize_spark`, after the checks of what leaves (:mod:`._frames`)."""
    from ._frames import plan_frame, sample_blocks

    types = import_optional("pyspark.sql.types", extra="spark")

    def sample(columns: list[str], block: str, place: str) -> Any:
        # plain positional names inside the job (Spark reads a dot as a struct field); the real ones after
        sub = df.select(*[df[f"`{c.replace('`', '``')}`"].alias(f"c{i}") for i, c in enumerate(columns)])
        schema = types.StructType([*sub.schema.fields, types.StructField(block, types.LongType()),
                                   types.StructField(place, types.StringType())])
        firsts, n = _firsts(sub)

        def blocks(batches: Iterator[Any]) -> Iterator[Any]:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            partition = ctx.partitionId() if ctx is not None else 0
            first = firsts.get(partition, 0)
            for pdf in batches:  # each batch is a chunk the task sees
                yield sample_blocks(pdf, str(partition), first, n, block, place)
                first += len(pdf)

        pd = import_optional("pandas", extra="spark")
        rows = [tuple(r) for r in sub.mapInPandas(blocks, schema=schema).collect()]  # small: no toPandas round trip
        return pd.DataFrame.from_records(rows, columns=[*columns, block, place])

    return plan_frame(list(df.columns), column, keep, drop, sample)


def _firsts(df: Any) -> tuple[dict[int, int], int]:
    """Each partition's place in ``df`` (its first row's 0-based position: the rows of the partitions before
    it) and the rows of ``df``: a count per partition, run by Spark itself (no Python worker)."""
    functions = import_optional("pyspark.sql.functions", extra="spark")
    counts = dict(df.select(functions.spark_partition_id().alias("p")).groupBy("p").count().collect())
    firsts, n = {}, 0
    for p in sorted(counts):
        firsts[p], n = n, n + int(counts[p])
    return firsts, n


def privatize_file_spark(mechanism: Any, input_path: str | PathLike[str], column: str, out: str | PathLike[str], *,
                         master: str | None = None, **options: Unpack[FileOptions]) -> int:
    """The ``--engine spark`` file path: ``column`` of ``input_path`` released into ``out``; the rows written.

    ``master`` is a Spark master URL (``spark://host:7077``, ``yarn``, ``local[4]``; its
    executors must see ``input_path`` and the output's directory at the same paths);
    default ``local[*]``. A SparkContext already active in this process is used as it
    is (and left running); one created here runs quietly (the JVM's console output
    discarded) and is stopped at the end. Python workers run this interpreter
    (``PYSPARK_PYTHON``, unless set). ``options`` and errors:
    :func:`metricdp.integrations._run.release_on`.
    """
    from ._rule import LabelRule
    from ._run import release_on

    return release_on(SparkBackend(master), LabelRule(), mechanism, input_path, column, out, **options)[0]


#: Seconds between two looks of the driver at the job's accumulators.
POLL_S = 0.5


class SparkBackend(Backend):
    """Spark (:mod:`._backend`): a task per item, the shared value broadcast (sent once per executor).

    With a tally, each task adds its weight and 1 to two accumulators, which Spark merges
    into the driver's as tasks complete; the job runs in a thread of the driver while this
    one reads them every :data:`POLL_S`.
    """

    name = "Spark"

    def __init__(self, master: str | None) -> None:
        import_optional("pyspark", extra="spark")  # the extra missing: said before any file is read
        super().__init__()
        self.master = master

    def connect(self, stack: contextlib.ExitStack, items: int) -> Any:
        """The active SparkContext (not ours to stop), or a new quiet one, stopped with ``stack``."""
        from pyspark import SparkConf, SparkContext

        active = SparkContext._active_spark_context
        if active is not None:
            return active
        conf = (SparkConf().setMaster(self.master or "local[*]").setAppName("metricdp privatize")
                .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false"))
        gateway = None
        if SparkContext._gateway is None:  # the JVM's log4j output and progress bars are not the CLI's output
            from pyspark.java_gateway import launch_gateway

            gateway = launch_gateway(conf, popen_kwargs={"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL})
        sc = SparkContext(conf=conf, gateway=gateway)
        stack.callback(_stop, sc)
        sc.setLogLevel("OFF")
        return sc

    def map(self, fn: Any, items: Sequence[Any], shared: Any, weights: Sequence[int], tally: Tally | None) -> list[Any]:
        spark_ready()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")  # "pandas >= 3 unsupported"
            with self.cluster(len(items)) as sc:
                value = sc.broadcast(shared)
                try:
                    tasks = sc.parallelize(list(zip(items, weights, strict=True)), len(items))
                    if tally is None:
                        return list(tasks.map(lambda task: fn(task[0], value.value)).collect())
                    return _collect_told(sc, tasks, fn, value, tally)
                finally:
                    value.unpersist()


def spark_ready() -> None:
    """Java is there (else one :class:`~metricdp.errors.EngineError`), and the Python workers run this interpreter
    (``PYSPARK_PYTHON``, unless set)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise EngineError("the Spark engine needs Java (e.g. apt-get install openjdk-17-jre-headless)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _stop(sc: Any) -> None:
    with contextlib.suppress(Exception):
        sc.stop()


def _collect_told(sc: Any, tasks: Any, fn: Any, value: Any, tally: Tally) -> list[Any]:
    """``tasks`` run and collected in a thread; this one tells ``tally`` what the accumulators say."""
    import threading

    weight, count = sc.accumulator(0), sc.accumulator(0)

    def counted(task: tuple[Any, int]) -> Any:
        done = fn(task[0], value.value)
        weight.add(task[1])
        count.add(1)
        return done

    out: dict[str, Any] = {}

    def collect() -> None:
        try:
            out["results"] = tasks.map(counted).collect()
        except BaseException as ex:  # re-raised on the driver's own thread below
            out["error"] = ex

    worker = threading.Thread(target=collect, name="metricdp-spark-collect", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            tally(weight.value, count.value)
    except BaseException:  # SIGINT on the driver: the job is cancelled, not left running
        sc.cancelAllJobs()
        worker.join()
        raise
    if "error" in out:
        raise out["error"]
    return list(out["results"])
