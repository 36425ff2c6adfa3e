"""``privatize-trace --engine dask|spark``: the trace release with each person's fixes in one partition.

A trace release keeps a state per person (:mod:`metricdp.pipeline.trace_states`), so the
pieces of whole records the other kinds release one by one (:mod:`._run`) do not fit it: a
person's fixes lie in many pieces. This path runs the local engine's kind
(:class:`metricdp.pipeline.traces.Traces`) after the persons are brought together:

1. **check** -- the driver reads the file once with the local engine's reader, column plan
   and leak check (:func:`._plan.plan_file`) and the kind's own parse and order check
   (the first fix out of time order in the file refused as the local engine refuses it),
   and cuts it into pieces;
2. **keys** -- each piece's persons, read by the format's engine side
   (:meth:`~metricdp.tabular.formats.Parts.read`) and the kind's own person ids, as a frame
   of ``(person, row)``; an accounted release counts them on the engine (a group-by count:
   Dask's ``groupby().count()``, Spark's ``reduceByKey``) and reserves each person's worst
   case on the driver (:func:`metricdp.pipeline.trace_budget.reserve`, the local engine's
   reservation): a refused run draws, writes and spends nothing;
3. **shuffle** -- the keys are repartitioned on the person (Dask: ``shuffle(on="person")``;
   Spark: ``partitionBy`` on the person key), so each person's rows meet in one partition;
4. **release** -- partition ``k`` reads the pieces that hold its rows, takes its rows in file
   order (each person's fixes in the order the local engine reads them: a fix earlier than
   its person's previous one is refused there), releases them by the kind's
   :meth:`~metricdp.pipeline.traces.Traces.select` with each person's grant, drawing from
   :func:`~metricdp.integrations.partition_rng` ``(seed, k)``, and writes one part per piece
   with the format's writer (:meth:`~metricdp.tabular.formats.Parts.write`); the driver joins
   the parts (:meth:`~metricdp.tabular.formats.Parts.join`), publishes atomically and settles
   the ledger, and merges the partitions' per-person reports.

**Order of the output.** The rows are grouped by partition (a hash of the person), each
partition's rows in file order: every person's fixes keep their order, the persons
interleave differently from the input.

**Cost.** A partition reads every piece that holds one of its rows: with many persons, each
partition reads about the whole file (the keys alone cross the network, 8 bytes and an id
per row), so the reads grow with the partitions times the file. The partitions are as many
as the cluster runs at once (Dask: its workers' threads; Spark: its default parallelism),
at most one per piece.

**Not on the engines** (one :class:`~metricdp.errors.ValidationError`, before anything is
read): a ``spread`` budget (each person's eps comes from a first pass the partitions would
have to share) and an accounted per-place release (its places are settled with the
ledger's memo before the pass): the local engine releases both.
"""

from __future__ import annotations

import copy
import functools
import operator
import os
import shutil
import traceback
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ..accounting.accountant import canonical_ids
from ..errors import EngineError, MetricDPError, ValidationError
from ..location.trace_report import TraceReport
from ..pipeline.trace_budget import Grants, reserve
from ..pipeline.trace_places import Places
from ..pipeline.trace_states import Fixes, PerPlace
from ..pipeline.traces import TraceRun, Traces
from ..tabular.columns import ColumnPlan
from ._backend import Backend, one_line
from ._common import partition_rng
from ._pieces import Failed, part_path
from ._plan import DEFAULT_PIECE_BYTES, Plan, check_unchanged, plan_file

__all__ = ["TracePart", "release_traces_engine"]


class _Checked(Traces):
    """The driver's reading of the file: the kind's parse, then its order check (and counts) on every chunk."""

    @property
    def reads(self) -> tuple[str, ...]:
        """The columns read beside the released ones (a typed format's check reads only what it is told)."""
        return (self.user, self.time)

    def parse(self, chunk: Any) -> Any:
        got = super().parse(chunk)
        self.check(got.values, chunk.first)
        return got

    def render(self, released: Any) -> Any:
        """The released columns' types (the driver's type check passes parsed values: none drawn here)."""
        return super().render(np.zeros((0, 2)) if isinstance(released, Fixes) else released)


@dataclass(frozen=True)
class _Job:
    """What every partition shares: the plan (with its pieces), the kind's settings, the seed, the scratch."""

    plan: Plan
    user: str
    time: str
    lat: str
    lon: str
    digits: int
    seed: int | None
    scratch: str

    def kind(self, mechanism: Any) -> Traces:
        return Traces(self.user, self.time, self.lat, self.lon, mechanism, digits=self.digits, where=self.plan.path)


@dataclass(frozen=True)
class _Shared:
    """Sent once per worker: the mechanism (each partition releases with a copy) and, when accounted, the persons
    reserved (canonical ids, sorted) with their grants in pieces."""

    mechanism: Any
    ids: NDArray[Any] | None = None
    granted: NDArray[np.int64] | None = None

    def grants(self, ids: NDArray[Any]) -> NDArray[np.int64]:
        """The grants of ``ids``; a person the count did not see means the file changed."""
        assert self.ids is not None and self.granted is not None
        at = np.minimum(np.searchsorted(self.ids, ids), max(self.ids.size - 1, 0))
        if not self.ids.size or not bool((self.ids[at] == ids).all()):
            raise EngineError("a partition met a person the count of fixes per person did not see")
        return self.granted[at]


@dataclass(frozen=True)
class TracePart:
    """What partition ``index`` did: its ``rows``, the rows ``written``, the parts it wrote, its persons' report."""

    index: int
    rows: int
    written: int
    parts: tuple[int, ...]
    report: TraceReport


def person_keys(job: _Job, piece: Any, mechanism: Any) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """Each row's person (canonical id) and data row in the file, of one piece (the kind's own reading of ids)."""
    plan = job.plan
    chunk = plan.parts.read(piece, plan.layout)
    kind = job.kind(mechanism)
    codes = kind.persons.codes(chunk.column(job.user), chunk, job.user, plan.path)
    ids = canonical_ids(kind.persons.ids) if len(kind.persons) else np.zeros(0, dtype=np.int64)
    return ids[codes], piece.row + np.arange(chunk.rows, dtype=np.int64)


def release_rows(job: _Job, k: int, rows: NDArray[np.int64], shared: _Shared) -> TracePart | Failed:
    """Partition ``k``: its ``rows`` (every fix of its persons) released in file order; never raises
    (:class:`Failed`)."""
    try:
        check_unchanged(job.plan)
        return _release(job, k, np.sort(np.asarray(rows, dtype=np.int64)), shared)
    except ValidationError as ex:
        return Failed(k, True, str(ex), traceback.format_exc())
    except MetricDPError as ex:
        return Failed(k, False, str(ex), traceback.format_exc())
    except Exception as ex:  # any other worker-side failure: reported by the driver in one line
        return Failed(k, False, f"{type(ex).__name__}: {ex}", traceback.format_exc())


def _release(job: _Job, k: int, rows: NDArray[np.int64], shared: _Shared) -> TracePart:
    plan = job.plan
    mech = copy.deepcopy(shared.mechanism)  # a worker's copy serves many partitions: each starts afresh
    kind = job.kind(mech)
    accounted = shared.ids is not None
    mech.start(np.zeros(0, dtype=np.int64) if accounted else None, partition_rng(job.seed, k))
    firsts = np.array([p.row for p in plan.pieces], dtype=np.int64)
    at = np.searchsorted(firsts, rows, side="right") - 1
    own: list[NDArray[np.int64]] = []
    written, numbers = 0, []
    for i in np.unique(at).tolist():
        piece = plan.pieces[i]
        mine = np.zeros(piece.rows, dtype=bool)
        mine[rows[at == i] - piece.row] = True
        chunk = plan.parts.read(piece, plan.layout)
        before = len(kind.persons)
        fixes = kind.parse(chunk).values
        if accounted and len(kind.persons) > before:  # persons met here get their grants before any release
            new = np.arange(before, len(kind.persons))
            mech.grant(new, shared.grants(canonical_ids(kind.persons.ids[new])))
        sub = Fixes(fixes.persons[mine], fixes.times[mine], fixes.latlon[mine], fixes.places[mine], fixes.unit)
        kept, released = kind.select(piece.row, sub)
        keep = mine
        if kept is not None:
            keep = mine.copy()
            keep[np.flatnonzero(mine)[~kept]] = False
        data = plan.parts.write(plan.layout, chunk, keep, kind.render(released))
        number = k * len(plan.pieces) + i
        final = part_path(job.scratch, number, plan.fmt)
        tmp = f"{final}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, final)
        numbers.append(number)
        written += len(released)
        own.append(sub.persons)
    return TracePart(k, int(rows.size), written, tuple(numbers), _report(kind, own))


def _report(kind: Traces, own: list[NDArray[np.int64]]) -> TraceReport:
    """The report of the persons whose rows the partition released (a piece's other persons are coded, not its)."""
    full = kind.report()
    n = len(kind.persons)
    mine = np.zeros(n, dtype=bool)
    for codes in own:
        mine[codes] = True
    ids = canonical_ids(kind.persons.ids) if n else np.zeros(0, dtype=np.int64)
    keep = np.isin(full.persons, ids[mine])
    return TraceReport(*(getattr(full, f)[keep] for f in ("persons", "spent_units", "fresh", "reused", "tests",
                                                           "passed")))


# ------------------------------------------------------------------------------ the engines
#: ``decide(ids, counts)``: the shared value of the release from the fixes per person (None: not accounted).
Decide = Callable[[NDArray[Any] | None, NDArray[np.int64] | None], _Shared]


def _dask(backend: Backend, job: _Job, mechanism: Any, accounted: bool, decide: Decide, id_type: str) -> list[Any]:
    """Keys as a Dask DataFrame, counted (accounted), shuffled on the person, released per partition."""
    from .._optional import import_optional

    dask = import_optional("dask", extra="dask")
    dd = import_optional("dask.dataframe", extra="dask")
    pd = import_optional("pandas", extra="dask")
    pieces = job.plan.pieces
    meta = pd.DataFrame({"person": pd.Series([], dtype="int64" if id_type in "iu" else object),
                         "row": pd.Series([], dtype="int64")})
    with backend.cluster(len(pieces)) as client:
        frames = [dask.delayed(functools.partial(_key_frame, job, mechanism))(p) for p in pieces]
        keys = client.persist(dd.from_delayed(frames, meta=meta, verify_meta=False))
        ids = counts = None
        if accounted:
            counted = client.compute(keys.groupby("person")["row"].count()).result()
            ids, counts = counted.index.to_numpy(), counted.to_numpy(dtype=np.int64)
        shared = decide(ids, counts)
        value = client.submit(_same, shared, pure=False)
        slots = sum(int(w.get("nthreads", 1)) for w in client.scheduler_info()["workers"].values())
        parts = keys.shuffle(on="person", npartitions=_partitions(len(pieces), slots)).to_delayed()
        tasks = [dask.delayed(functools.partial(_release_frame, job))(k, part, value) for k, part in enumerate(parts)]
        return list(client.gather(client.compute(tasks)))


def _key_frame(job: _Job, mechanism: Any, piece: Any) -> Any:
    from .._optional import import_optional

    pd = import_optional("pandas", extra="dask")

    ids, rows = person_keys(job, piece, mechanism)
    return pd.DataFrame({"person": ids if ids.dtype.kind == "i" else ids.astype(object), "row": rows})


def _release_frame(job: _Job, k: int, frame: Any, shared: _Shared) -> TracePart | Failed:
    return release_rows(job, k, frame["row"].to_numpy(dtype=np.int64), shared)


def _same(x: Any) -> Any:
    return x


def _spark(backend: Backend, job: _Job, mechanism: Any, accounted: bool, decide: Decide, id_type: str) -> list[Any]:
    """Keys as an RDD of ``(person, row)``, counted (accounted), partitioned by the person, released per partition."""
    from .spark import spark_ready

    spark_ready()
    pieces = job.plan.pieces
    with warnings.catch_warnings(), backend.cluster(len(pieces)) as sc:
        warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")  # "pandas >= 3 unsupported"
        keys = sc.parallelize(list(pieces), len(pieces)).flatMap(functools.partial(_key_pairs, job, mechanism))
        keys.cache()
        try:
            ids = counts = None
            if accounted:
                counted = keys.mapValues(lambda _row: 1).reduceByKey(operator.add).collect()
                ids = np.asarray([p for p, _ in counted]) if counted else np.zeros(0, dtype=np.int64)
                counts = np.asarray([c for _, c in counted], dtype=np.int64)
            value = sc.broadcast(decide(ids, counts))
            try:
                by_person = keys.partitionBy(_partitions(len(pieces), int(sc.defaultParallelism)), _person_hash)
                return list(by_person.mapPartitionsWithIndex(
                    lambda k, pairs: [_release_pairs(job, k, pairs, value.value)]).collect())
            finally:
                value.unpersist()
        finally:
            keys.unpersist()


def _partitions(pieces: int, slots: int) -> int:
    """The partitions of the release: as many as the cluster runs at once, at most one per piece (each partition
    reads the pieces of its persons: fewer partitions, fewer reads of the file)."""
    return max(1, min(pieces, slots))


def _key_pairs(job: _Job, mechanism: Any, piece: Any) -> list[tuple[Any, int]]:
    ids, rows = person_keys(job, piece, mechanism)
    return list(zip(ids.tolist(), rows.tolist(), strict=True))


def _person_hash(person: Any) -> int:
    """A partition's share of the persons, the same in every Python process (``hash`` of text is salted)."""
    return zlib.crc32(repr(person).encode("utf-8"))


def _release_pairs(job: _Job, k: int, pairs: Iterable[tuple[Any, int]], shared: _Shared) -> TracePart | Failed:
    return release_rows(job, k, np.fromiter((row for _, row in pairs), dtype=np.int64), shared)


# ------------------------------------------------------------------------------ the driver
def release_traces_engine(engine: str, kind: Traces, src: Path, out: str | PathLike[str], *,
                          keep: Sequence[str], drop: Sequence[str], budget: float | None, ledger: Any, policy: str,
                          run_id: str | None, seed: int | None, inputs: Sequence[str | PathLike[str]],
                          scheduler: str | None, master: str | None, piece_bytes: int | None) -> TraceRun:
    """:func:`metricdp.pipeline.traces.release_traces_file` on ``engine`` ("dask" or "spark"; module docstring).

    ``kind`` is the release's kind (its mechanism fresh), ``seed`` None (the OS secure source in every
    partition) or the int whose :func:`~metricdp.integrations.partition_rng` children the partitions draw from.
    """
    import time

    from .._atomic import atomic_write, scratch_directory
    from ..pipeline.run import ReleaseStats
    from ..streaming.accounted import Settlement, _identity
    from ._engines import engine_runner
    from ._run import _same_format

    mech = kind.mechanism
    if mech.spread is not None:
        raise ValidationError("a spread budget is for engine='local' (each person's eps comes from their counts "
                              "of one first pass)")
    accounted = budget is not None or ledger is not None
    if accounted and isinstance(mech, PerPlace):
        raise ValidationError("an accounted per-place release is for engine='local' (its places are settled with "
                              "the ledger's memo before the pass)")
    target = Path(out)
    _same_format(src, target)
    backend = engine_runner(engine, scheduler, master)
    t0 = time.perf_counter()
    grants: list[Grants] = []
    with backend.session(), Settlement() as settlement, atomic_write(target, "wb", inputs=[src, *inputs]) as fh:
        check = _Checked(kind.user, kind.time, kind.lat, kind.lon, mech, digits=kind.digits, where=kind.where)
        plan = plan_file(src, check, piece_bytes=piece_bytes or DEFAULT_PIECE_BYTES, keep=keep, drop=drop)
        if plan.rows == 0:
            raise ValidationError(f"{src}: no data rows")
        identity = _identity(src)

        def decide(ids: NDArray[Any] | None, counts: NDArray[np.int64] | None) -> _Shared:
            if ids is None or counts is None:
                return _Shared(mech)
            if int(counts.sum()) != plan.rows:
                raise EngineError(f"the {backend.name} job counted {int(counts.sum()):,} fixes where the input has "
                                  f"{plan.rows:,}")
            ids = canonical_ids(ids)
            order = np.argsort(ids, kind="stable")
            ids, counts = ids[order], counts[order]
            g = reserve(mech, ids, counts, Places(0), shown=ids, where=kind.where, unit=kind.unit, path=src,
                        identity=identity, budget=budget, ledger=ledger, policy=policy, run_id=run_id)
            settlement.run = g.run
            grants.append(g)
            return _Shared(mech, ids, np.asarray(g.granted, dtype=np.int64))

        scratch = scratch_directory(target)
        try:
            job = _Job(plan, kind.user, kind.time, kind.lat, kind.lon, kind.digits, seed, str(scratch))
            ran = _dask if engine == "dask" else _spark
            try:
                results = ran(backend, job, mech, accounted, decide, check.persons.ids.dtype.kind)
            except MetricDPError:
                raise
            except Exception as ex:  # the cluster's own failure (a worker died, no scheduler, a JVM error)
                raise backend.error(ex) from ex
            done = _checked(backend.name, plan, results)
            written = sum(p.written for p in done)
            numbers = sorted(n for p in done for n in p.parts)
            plan.parts.join(plan.layout, [Path(part_path(str(scratch), n, plan.fmt)) for n in numbers], fh, written)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        check_unchanged(plan)
        if settlement.run is not None:
            settlement.run.publishing()
    report = TraceReport.concat([p.report for p in done])
    order = np.argsort(report.persons, kind="stable")
    report = TraceReport(*(getattr(report, f)[order] for f in ("persons", "spent_units", "fresh", "reused", "tests",
                                                               "passed")))
    stats = ReleaseStats(written, time.perf_counter() - t0, plan.fmt, cast(ColumnPlan, plan.columns))
    g = grants[0] if grants else None
    reserved = None if g is None else np.asarray(g.granted, dtype=np.int64) * mech.piece
    return TraceRun(stats, report, mech.name, reserved, plan.rows - written if accounted else 0,
                    0 if g is None else g.over, None if g is None else g.run_id)


def _checked(engine: str, plan: Plan, results: Sequence[Any]) -> list[TracePart]:
    """Every partition done, each row of the file in exactly one, else one typed error."""
    failed = [r for r in results if isinstance(r, Failed)]
    if failed:
        first = min(failed, key=lambda r: (not r.input, r.index))  # a problem of the input explains the rest
        err: MetricDPError = (ValidationError(first.message) if first.input else
                              EngineError(f"the {engine} job failed in partition {first.index}: "
                                          f"{one_line(first.message)}"))
        if first.detail:
            err.add_note(f"partition {first.index}, on the worker:\n{first.detail.rstrip()}")  # for --debug
        raise err
    done = [r for r in results if isinstance(r, TracePart)]
    if len(done) != len(results) or sum(p.rows for p in done) != plan.rows:
        raise EngineError(f"the {engine} job released {sum(p.rows for p in done):,} fixes in its partitions where "
                          f"the input has {plan.rows:,}; nothing written")
    return done
