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
import uuid
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from os import PathLike
from typing import Any

from .._optional import import_optional
from .._resources import usable_cpus
from ..errors import ValidationError
from ._common import Shipped, check_seed, partition_rng, release_column

__all__ = ["one_cluster", "privatize_dask", "privatize_file_dask"]

#: Within :func:`one_cluster`: the ExitStack that owns the shared cluster, and its client once started.
_SESSION: ContextVar[dict[str, Any] | None] = ContextVar("metricdp_dask_session", default=None)


@contextlib.contextmanager
def one_cluster() -> Iterator[None]:
    """Within it, the jobs of this context share one cluster: started by the first, closed at the end.

    An accounted release runs two jobs (the count of rows per person, then the release):
    without a scheduler address they would start two local clusters.
    """
    with contextlib.ExitStack() as stack:
        token = _SESSION.set({"stack": stack})
        try:
            yield
        finally:
            _SESSION.reset(token)


@contextlib.contextmanager
def client_for(scheduler: str | None, pieces: int) -> Iterator[Any]:
    """The Dask client of one job: within :func:`one_cluster` the session's (started by its first job),
    else one of its own, closed at the end; ``scheduler`` an address, or None for a local cluster of one
    single-threaded worker process per usable processor (at most one per piece)."""
    import logging

    distributed = import_optional("distributed", extra="dask")
    with contextlib.ExitStack() as own:
        session = _SESSION.get()
        client = None if session is None else session.get("client")
        if client is None:
            stack = own if session is None else session["stack"]
            if scheduler:
                client = stack.enter_context(distributed.Client(scheduler))
            else:
                cluster = stack.enter_context(
                    distributed.LocalCluster(
                        n_workers=max(1, min(usable_cpus(), pieces)), threads_per_worker=1,
                        processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL,
                    )
                )
                client = stack.enter_context(distributed.Client(cluster))
            if session is not None:
                session["client"] = client
        yield client


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
    is returned (:mod:`._frames`: one small job compares a sample of every partition): a
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
    if column not in df.columns:
        raise ValidationError(f"no column {column!r}; available: {', '.join(repr(str(c)) for c in df.columns)}")
    from ..frames import _announce
    from ._frames import WHERE, check_sample, frame_plan, free_name, sample_blocks

    names = [str(c) for c in df.columns]
    plan, rule = frame_plan(names, column, keep, drop)
    if plan.unacknowledged:
        block, place = free_name(names, "block"), free_name(names, "place")
        parts = df[[column, *plan.unacknowledged]].to_delayed()
        found = dask.compute(*[dask.delayed(sample_blocks)(p, str(k), 0, block, place) for k, p in enumerate(parts)])
        if found:
            check_sample(import_optional("pandas", extra="dask").concat(found), plan, rule, block, place)
    _announce(plan, WHERE)
    seed = check_seed(seed)
    shipped = dask.delayed(Shipped(mechanism), pure=True)  # one graph node, sent once per worker
    out = df.map_partitions(_release_partition, shipped, column, seed, meta=df._meta)
    return out.drop(columns=list(plan.dropped)) if plan.dropped else out


def privatize_file_dask(
    mechanism: Any,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    scheduler: str | None = None,
    seed: int | None = None,
    inputs: Sequence[str | PathLike[str]] = (),
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    piece_bytes: int | None = None,
    max_record: int | None = None,
    accounting: Any = None,
    on_report: Any = None,
    progress: Any = None,
) -> int:
    """The ``--engine dask`` file path: check, release on a cluster, write ``out`` atomically.

    ``scheduler`` is the address of an existing Dask scheduler (``tcp://host:8786``; its
    workers must see ``input_path`` and the output's directory at the same paths);
    without it a local cluster (one single-threaded worker process per core, at most
    one per partition) is started and closed, its logs silenced.

    The file is not read by Dask's or pandas' CSV reader (pandas infers an index from a
    trailing delimiter and shifts every column): the driver checks it in one pass with
    the local engine's record definition, and each task releases one piece of whole
    records with it (see :mod:`metricdp.integrations._run`), so the output is what the
    local engine writes (every byte outside the released column kept), with partition
    ``k`` drawing from :func:`~metricdp.integrations.partition_rng` ``(seed, k)``.
    ``drop`` names columns left out of ``out`` and ``keep`` columns written unreleased on
    purpose, with the local engine's rules and messages
    (:func:`metricdp.tabular.columns.plan_columns`: every column neither released nor
    dropped leaves with its true values), ``max_record`` caps a CSV record's bytes (as
    for the local engine). ``accounting`` makes it a release per person, planned by the
    driver as the local engine plans it (:func:`metricdp.integrations._run.release_file`),
    ``on_report`` receives its report. ``piece_bytes`` is the input per partition
    (default 64 MiB). ``progress`` (:data:`metricdp._progress.Progress`) is told by the
    driver the rows done as partitions complete. Returns the rows written.

    Raises
    ------
    ValidationError
        the file is refused as the local engine refuses it (one line naming file and
        line), or changed while it was released.
    EngineError
        the cluster failed (a worker died, the scheduler cannot be reached, ...): the
        root cause in one line, the engine's exception chained. Nothing is written.
    """
    from ._run import release_file

    import_optional("distributed", extra="dask")

    def runner(job: Any, pieces: Sequence[Any], mech: Any, told: Any = None) -> list[Any]:
        return _run_pieces(job, pieces, mech, scheduler, told)

    with one_cluster():
        return release_file(
            "Dask", runner, mechanism, input_path, column, out, seed=seed, inputs=inputs, piece_bytes=piece_bytes,
            keep=keep, drop=drop, max_record=max_record, accounting=accounting, on_report=on_report,
            progress=progress,
        )[0]


def _run_pieces(job: Any, pieces: Sequence[Any], mechanism: Any, scheduler: str | None,
                progress: Any = None) -> list[Any]:
    """:func:`~metricdp.integrations._pieces.release_piece` for every piece on a Dask cluster.

    ``progress`` is told on the driver as each piece's future completes (``as_completed``).
    """
    from ._run import PieceProgress, engine_error

    try:
        with client_for(scheduler, len(pieces)) as client:
            token = uuid.uuid4().hex
            # one task holding the mechanism: sent once per worker, and recomputed if its worker dies
            # (scattered data would be lost with it)
            shipped = client.submit(_identity, Shipped(mechanism), key=f"metricdp-mechanism-{token}", pure=False)
            futures = [
                client.submit(_release, job, piece, shipped, key=f"metricdp-piece-{token}-{piece.index}", pure=False)
                for piece in pieces
            ]
            if progress is not None:
                distributed = import_optional("distributed", extra="dask")
                told = PieceProgress(job, pieces, progress)
                index = {f.key: p.index for f, p in zip(futures, pieces, strict=True)}
                for done in distributed.as_completed(futures):
                    if done.status == "finished":
                        told.finished(index[done.key])
            return list(client.gather(futures))
    except Exception as ex:  # the cluster's own failure (a worker died, no scheduler, ...): one typed line
        raise engine_error("Dask", ex) from ex


def _identity(x: Any) -> Any:
    return x


def _release(job: Any, piece: Any, shipped: Shipped) -> Any:
    from ._pieces import release_piece

    return release_piece(job, piece, shipped.mechanism)
