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

For a CSV file use :func:`privatize_file_dask`, not ``dd.read_csv``: pandas infers an
index from a trailing delimiter (every column shifts left, true values land under
another column's name) and Dask's byte blocks split records at quoted line breaks.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any, Unpack

from .._optional import import_optional
from .._resources import usable_cpus
from ..errors import EngineError, MetricDPError, ValidationError
from ._backend import Backend, Tally
from ._common import Shipped, check_seed, partition_rng, release_column

if TYPE_CHECKING:
    from ._run import FileOptions

__all__ = ["DaskBackend", "privatize_dask", "privatize_file_dask"]


def _release_partition(part: Any, mechanism: Any, column: str, seed: int | None, partition_info: Any = None) -> Any:
    number = 0 if partition_info is None else int(partition_info["number"])
    if partition_info is None and seed is not None:
        raise ValidationError("dask gave no partition number: cannot spawn a per-partition seed")
    rng = partition_rng(seed, number)
    released = release_column(part[column], mechanism.mechanism, rng, f"partition {number}, column {column!r}")
    out = part.copy(deep=False)
    out[column] = released
    return out


def privatize_dask(df: Any, column: str, mechanism: Any, *, seed: int | None = None, keep: Sequence[str] = (),
                   drop: Sequence[str] = ()) -> Any:
    """A lazy Dask DataFrame with ``column`` replaced by releases of ``mechanism``, ``drop`` left out.

    What leaves is decided as for :func:`metricdp.frames.privatize_frame`, before the frame
    is returned (:mod:`._frames`: small jobs compare the rows the pandas API compares): a
    column neither released nor named in ``keep``/``drop`` that is named like ``column`` or
    holds its true values in most compared rows is refused; the others are named in an
    :class:`~metricdp.errors.UnnamedColumnsWarning`.

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
    keep, drop : sequence of str
        Columns written unreleased on purpose / left out.

    Raises
    ------
    ValidationError
        a missing column, a bad ``keep``/``drop`` name, an unnamed column that reveals
        ``column`` (named with its first compared row): nothing is returned.
    """
    dask = import_optional("dask", extra="dask")
    from ..frames import frame_layout
    from ._frames import plan_frame

    # the index leaves with the frame: planned from the pandas meta as pandas plans it
    names, levels = frame_layout(df._meta, [column], index=True)
    if column not in names:
        raise ValidationError(f"no column {column!r}; available: {', '.join(repr(c) for c in names)}")

    def sample(columns: list[str], block: str, place: str) -> Any:
        # the partitions' places in the frame first (a count of rows), then each one's share of the compared rows
        sub = df[[c for c in columns if c not in levels]]
        firsts = list(itertools.accumulate((int(x) for x in sub.map_partitions(len).compute()), initial=0))
        n = firsts.pop()
        found = dask.compute(*[dask.delayed(_sampled)(p, levels, columns, str(k), firsts[k], n, block, place)
                               for k, p in enumerate(sub.to_delayed())])
        return import_optional("pandas", extra="dask").concat(found) if found else None

    plan = plan_frame([*levels, *names], column, keep, drop, sample)
    seed = check_seed(seed)
    shipped = dask.delayed(Shipped(mechanism), pure=True)  # one graph node, sent once per worker
    out = df.map_partitions(_release_partition, shipped, column, seed, meta=df._meta)
    if levels and levels[0] in plan.dropped:
        out = out.reset_index(drop=True)
    gone = [c for c in plan.dropped if c not in levels]
    return out.drop(columns=gone) if gone else out


def _sampled(part: Any, levels: list[str], columns: list[str], partition: str, first: int, n: int, block: str,
             place: str) -> Any:
    """:func:`._frames.sample_blocks` of one partition's ``columns`` (its first row row ``first`` of ``n``), its
    index as the column ``levels[0]``."""
    from ._frames import sample_blocks

    if levels:
        part = part.rename_axis(levels[0]).reset_index()
    return sample_blocks(part[columns], partition, first, n, block, place)


def privatize_file_dask(mechanism: Any, input_path: str | PathLike[str], column: str, out: str | PathLike[str], *,
                        scheduler: str | None = None, **options: Unpack[FileOptions]) -> int:
    """The ``--engine dask`` file path: ``column`` of ``input_path`` released into ``out``; the rows written.

    ``scheduler`` is the address of an existing Dask scheduler (``tcp://host:8786``; its
    workers must see ``input_path`` and the output's directory at the same paths);
    without it a local cluster (one single-threaded worker process per core, at most
    one per partition) is started and closed, its logs silenced. ``options`` and errors:
    :func:`metricdp.integrations._run.release_on`.
    """
    from ._rule import LabelRule
    from ._run import release_on

    return release_on(DaskBackend(scheduler), LabelRule(), mechanism, input_path, column, out, **options)[0]


class DaskBackend(Backend):
    """Dask (:mod:`._backend`): a task per item, the shared value one task of its own.

    That task is sent once per worker and recomputed if its worker dies (scattered data
    would be lost with it); the tally is told on the driver as each future completes.
    """

    name = "Dask"

    def __init__(self, scheduler: str | None) -> None:
        import_optional("distributed", extra="dask")  # the extra missing: said before any file is read
        super().__init__()
        self.scheduler = scheduler

    def connect(self, stack: contextlib.ExitStack, items: int) -> Any:
        """A client of ``scheduler``, or of a local cluster of one single-threaded worker process per usable
        processor (at most one per item)."""
        import logging

        distributed = import_optional("distributed", extra="dask")
        if self.scheduler:
            return stack.enter_context(distributed.Client(self.scheduler))
        cluster = stack.enter_context(distributed.LocalCluster(
            n_workers=max(1, min(usable_cpus(), items)), threads_per_worker=1, processes=True,
            dashboard_address=":0", silence_logs=logging.CRITICAL))
        return stack.enter_context(distributed.Client(cluster))

    def map(self, fn: Any, items: Sequence[Any], shared: Any, weights: Sequence[int], tally: Tally | None) -> list[Any]:
        distributed = import_optional("distributed", extra="dask")
        with self.cluster(len(items)) as client:
            token = uuid.uuid4().hex
            value = client.submit(_identity, shared, key=f"metricdp-shared-{token}", pure=False)
            futures = [client.submit(fn, item, value, key=f"metricdp-piece-{token}-{k}", pure=False)
                       for k, item in enumerate(items)]
            if tally is not None:
                at = {f.key: k for k, f in enumerate(futures)}
                weight = count = 0
                for done in distributed.as_completed(futures):
                    if done.status == "finished":
                        weight, count = weight + weights[at[done.key]], count + 1
                        tally(weight, count)
            return list(client.gather(futures))

    def error(self, ex: BaseException) -> MetricDPError:
        """A worker killed again and again (out of memory?) names its partition; the rest as every engine's."""
        if type(ex).__name__ != "KilledWorker":
            return super().error(ex)
        task = str(getattr(ex, "task", "")).rsplit("-", 1)[-1]
        tries = int(getattr(ex, "allowed_failures", 0) or 0) + 1
        which = f"partition {task}" if task.isdigit() else "a partition"
        return EngineError(f"the {self.name} job failed: the worker processes running {which} died {tries} "
                           "time(s) (out of memory? the workers' logs say why)")


def _identity(x: Any) -> Any:
    return x
