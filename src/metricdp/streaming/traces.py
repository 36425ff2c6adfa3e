"""The trace release of a file: :func:`release_traces_file`, the entry point of the trace kind
(:class:`metricdp.pipeline.traces.Traces`: order, accounting and engines are described there), on the local
engine's chunk loop or on Dask and Spark (:mod:`metricdp.integrations._traces`)."""

from __future__ import annotations

from os import PathLike
from typing import Any

import numpy as np

from .._progress import Progress
from .._random import check_rng, warn_unless_secure
from .._validation import check_epsilon
from ..accounting.accountant import canonical_ids
from ..errors import ValidationError
from ..pipeline.engine import Engine, check_engine, cluster_seed
from ..pipeline.run import Source, release_pass, unnamed
from ..pipeline.trace_budget import Grants, budget_of, reserve
from ..pipeline.trace_places import settle
from ..pipeline.trace_states import PerPlace, TraceMechanism, grown
from ..pipeline.traces import TraceRun, Traces

__all__ = ["release_traces_file"]


def release_traces_file(
    input_path: str | PathLike[str],
    output_path: str | PathLike[str],
    *,
    user: str,
    time: str,
    lat: str,
    lon: str,
    mechanism: TraceMechanism,
    keep: tuple[str, ...] = (),
    drop: tuple[str, ...] = (),
    budget: float | None = None,
    ledger: Any = None,
    policy: str = "refuse",
    run_id: str | None = None,
    rng: object = None,
    digits: int = 6,
    chunk_rows: int | None = None,
    inputs: tuple[str | PathLike[str], ...] = (),
    engine: str = "local",
    scheduler: str | None = None,
    master: str | None = None,
    piece_bytes: int | None = None,
    progress: Progress | None = None,
) -> TraceRun:
    """Release the fixes of ``input_path`` into ``output_path`` (module docstring: order, accounting).

    Parameters
    ----------
    user, time, lat, lon : str
        The columns: who, when (numbers or ISO 8601 times), and the coordinates released.
    mechanism : Independent, Predictive or PerPlace
        A fresh instance per release (it holds the run's state per person).
    keep, drop : column names
        The column plan of :func:`metricdp.tabular.columns.plan_columns`.
    budget : float, optional
        Every person's eps per km for this run (without a ``ledger``); a mechanism with a ``spread`` budget and
        neither ``budget`` nor ``ledger`` is accounted against its spread.
    ledger : Ledger, optional
        The persistent per-person spend (its budget): the worst case is reserved in it and committed.
    policy : "refuse" or "drop"
        A person whose worst case does not fit: refuse the run (nothing drawn, written or spent),
        or withhold their rows past the grant.
    rng : None, int or Generator
        ``None`` (default): the OS's secure source; a seed is for experiments only (on Dask or Spark, an
        int: partition k draws from :func:`~metricdp.integrations.partition_rng` ``(seed, k)``).
    engine, scheduler, master : str
        Where it runs, as in :func:`~.files.privatize_file`: ``"local"`` (this chunk
        loop), ``"dask"`` or ``"spark"`` (:mod:`metricdp.integrations._traces`: the rows of each person
        meet in one partition, released by the trace kind; the output holds the same rows, grouped
        by partition, each person's in file order). ``piece_bytes``: the input per engine partition.
    progress : callable, optional
        Told the rows released (:data:`metricdp._progress.Progress`): as chunks are written, or, on an engine,
        as its partitions complete.

    Returns
    -------
    TraceRun

    Raises
    ------
    ValidationError
        A missing column, a fix out of order or out of range, an option of another engine.
    EngineError
        The cluster failed (nothing written, nothing spent).
    """
    if policy not in ("refuse", "drop"):
        raise ValidationError(f"policy must be 'refuse' or 'drop', got {policy!r}")
    if budget is not None and ledger is not None:
        raise ValidationError("give a budget or a ledger (which holds its budget), not both")
    if budget is not None:
        budget = check_epsilon(budget, "budget")
    from ..pipeline.first_pass import first_pass

    src = Source.of(input_path) if chunk_rows is None else Source.of(input_path, chunk_rows=chunk_rows)
    runs_on = check_engine(engine, scheduler, master, chunk_rows,
                           [(src.output_format(output_path) is not src.format, f"an output in another format "
                             f"({output_path})")])
    if runs_on is Engine.local and piece_bytes is not None:
        raise ValidationError("the parameter 'piece_bytes' is for engine='dask' or engine='spark'")
    kind = Traces(user, time, lat, lon, mechanism, digits=digits, where=src.where)
    names = src.names()
    for what, name in (("user", user), ("time", time)):
        if name not in names:
            raise ValidationError(f"{src.where}: no {what} column {name!r} (columns: "
                                  f"{', '.join(repr(h) for h in names[:20])})")
    if runs_on is not Engine.local:
        from ..integrations._traces import release_traces_engine

        seed = cluster_seed(rng)
        warn_unless_secure(seed, stacklevel=2)
        return release_traces_engine(
            runs_on.value, kind, src.path, output_path, keep=keep, drop=drop, budget=budget, ledger=ledger,
            policy=policy, run_id=run_id, seed=seed, inputs=inputs, scheduler=scheduler, master=master,
            piece_bytes=piece_bytes, progress=progress)
    plan = src.plan(kind, keep, drop)
    warn_unless_secure(rng, stacklevel=2)
    source = check_rng(rng)
    budget = budget_of(mechanism, budget, ledger)
    accounted = budget is not None or ledger is not None
    g = Grants(np.zeros(0, dtype=np.int64), 0, None, None, None)
    if accounted:
        from .accounted import _identity

        identity = _identity(src.path)
        kind.begin()
        first_pass(kind, src, user, others=unnamed(plan, kind), per_row=False)  # counts per person
        n = len(kind.persons)
        g = reserve(mechanism, canonical_ids(kind.persons.ids) if n else np.zeros(0, dtype=np.int64), kind.rows,
                    kind.seen, shown=kind.persons.ids, where=kind.where, unit=kind.unit, path=src.path,
                    identity=identity, budget=budget, ledger=ledger, policy=policy, run_id=run_id)
    granted, over, run, run_id_used = g.granted, g.over, g.run, g.run_id
    try:
        mechanism.start(granted if accounted else None, source)  # not accounted: no grants
        if g.memo is not None and isinstance(mechanism, PerPlace):  # every place decided before the pass
            settle(kind.seen, mechanism, granted, *g.memo, ledger, run_id_used, source)
        kind.begin()
    except BaseException:
        if run is not None:
            run.abort()
        raise
    stats = release_pass(kind, src, output_path, plan, inputs=inputs, select=kind.select, run=run,
                         progress=progress)
    report = kind.report()
    reserved = None
    if accounted:
        ids = canonical_ids(kind.persons.ids) if len(kind.persons) else np.zeros(0, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        reserved = grown(np.asarray(granted, dtype=np.int64), len(kind.persons), 0)[order] * mechanism.piece
    withheld = (kind.rows.sum() - stats.rows) if accounted else 0
    return TraceRun(stats, report, mechanism.name, reserved, int(withheld), over, run_id_used)

