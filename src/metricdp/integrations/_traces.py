"""``privatize-trace --engine dask|spark``: the trace release with each person's fixes in one partition.

A trace release keeps a state per person (:mod:`metricdp.pipeline.trace_states`), so the
pieces of whole records the other kinds release one by one (:mod:`._run`) do not fit it: a
person's fixes lie in many pieces. This path runs the local engine's kind
(:class:`metricdp.pipeline.traces.Traces`) after the persons are brought together:

1. **check** -- the driver reads the file once with the local engine's reader, column plan
   and leak check (:func:`._plan.plan_file`) and the kind's own parse and order check
   (the first fix out of time order in the file refused as the local engine refuses it),
   and cuts it into pieces; that pass is the local engine's first pass
   (:meth:`metricdp.pipeline.traces.Traces.check`): it counts the fixes per person and, per place,
   each distinct (person, cell) with the row of its first fix, the cells being public functions of
   the true fixes, counted inside the accounted run as there;
2. **keys** -- each piece's persons, read by the format's engine side
   (:meth:`~metricdp.tabular.formats.Parts.read`) and the kind's own person ids, as a frame
   of ``(person, row)``;
3. **reserve** -- on the driver, the local engine's reservation
   (:func:`metricdp.pipeline.trace_budget.reserve`): a ``spread`` budget gives each person's eps
   (or budget manager) from the check pass's counts (:meth:`~metricdp.pipeline.trace_states.TraceMechanism.fit`),
   each person's worst case is reserved (a refused run draws, writes and spends nothing), and an
   accounted per-place release settles every place of the run there
   (:func:`metricdp.pipeline.trace_places.settle`): the ledger's memo read back for the persons of
   the file, the places each grant pays for drawn and stored under the run's reservation;
4. **shuffle** -- the keys are repartitioned on the person (Dask: ``shuffle(on="person")``;
   Spark: ``partitionBy`` on the person key), so each person's rows meet in one partition;
5. **release** -- partition ``k`` reads the pieces that hold its rows, takes its rows in file
   order (each person's fixes in the order the local engine reads them: a fix earlier than
   its person's previous one is refused there), releases them by the kind's
   :meth:`~metricdp.pipeline.traces.Traces.select`, drawing from
   :func:`~metricdp.integrations.partition_rng` ``(seed, k)``, and writes one part per piece
   with the format's writer (:meth:`~metricdp.tabular.formats.Parts.write`); the driver joins
   the parts (:meth:`~metricdp.tabular.formats.Parts.join`), publishes atomically and settles
   the ledger (the charges and the memo's new places commit together), and merges the
   partitions' per-person reports. Progress is told as partitions complete (rows done, of the
   file's).

**Accounted, the partitions run the driver's mechanism.** Every partition codes the persons as
the driver does (the local engine's codes: in the order they first come in the file) and gets
the fitted mechanism (each person's eps or manager), every person's grant and, per place, the
settled places of its own persons (:meth:`~metricdp.pipeline.trace_states.PerPlace.remember`).
Each partition checks that the fixes it reads of each of its persons are as many as the driver
counted (a file changed between the passes fails the partition; every partition and the publish
also check the file's identity), so no engine-side count is needed.
A person's releases are then the local engine's, on the same counts, grant and places: the
privacy argument is the local one (``docs/proofs/trace_accounting.md``). Spread: each person's
eps is B / n_p (or B / k_p) of their whole file, computed once, so a person's spend is at most
B whatever partition holds them. Per place: a place is released once across runs because it is
decided before any partition draws -- read back from the memo (a committed run paid for it:
repeated at no cost) or drawn on the driver within the person's grant and stored under this
run's reservation (first stored wins, as locally: a place another run stored meanwhile is
published with that run's release, this run having paid for one) -- and a partition draws no
place: a place past the grant is withheld. The driver draws the places from
:func:`~metricdp.integrations.partition_rng` ``(seed, pieces)``, a stream no partition draws
from (the partitions are at most the pieces).

**Order of the output.** The rows are grouped by partition (a hash of the person), each
partition's rows in file order: every person's fixes keep their order, the persons
interleave differently from the input.

**Cost.** A partition reads every piece that holds one of its rows: with many persons, each
partition reads about the whole file (the keys alone cross the network, 8 bytes and an id
per row), so the reads grow with the partitions times the file. The
partitions are as many as the cluster runs at once (Dask: its workers' threads; Spark: its default parallelism),
at most one per piece. Accounted, every partition holds every person's id, grant and eps
(memory per person, as the local run's); per place, the driver holds the run's distinct
(person, cell) pairs, as the local run's first pass does.
"""

from __future__ import annotations

import copy
import functools
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

from .._progress import Progress, report
from ..accounting.accountant import canonical_ids
from ..errors import EngineError, MetricDPError, ValidationError
from ..location.trace_report import TraceReport
from ..pipeline.trace_budget import Grants, budget_of, reserve
from ..pipeline.trace_places import settle
from ..pipeline.trace_states import Fixes, PerPlace
from ..pipeline.traces import TraceRun, Traces
from ..tabular.columns import ColumnPlan
from ._backend import Backend, one_line
from ._common import partition_rng
from ._pieces import Failed, part_path
from ._plan import DEFAULT_PIECE_BYTES, Plan, check_unchanged, plan_file

__all__ = ["TracePart", "release_traces_engine"]

#: The settled places a partition remembers: keys (person code x cells + cell) and releases an earlier run paid
#: for, then those drawn and paid for by this run (:func:`metricdp.pipeline.trace_places.settle`).
Settled = tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]


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
    """What every partition shares: the plan (with its pieces), the kind's settings, the seed and the scratch."""

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
    """Sent once per worker: the mechanism (each partition releases with a copy) and, when accounted, the driver's
    coding of the persons (``persons[c]`` is person code ``c``'s id as the file holds it, in the order they first
    come: the local engine's codes), their ``granted`` pieces by code, the mechanism fitted to them (a spread's eps
    per person), per place, the places ``settled`` before the pass, and the driver's ``counts`` of fixes by code
    (what each partition's own persons must have: the cross-check that the pieces it reads are the ones counted)."""

    mechanism: Any
    persons: NDArray[Any] | None = None
    granted: NDArray[np.int64] | None = None
    settled: Settled | None = None
    counts: NDArray[np.int64] | None = None

    def places(self, own: NDArray[Any], cells: int) -> Settled | None:
        """The settled places of the persons ``own`` (canonical ids): what one partition remembers."""
        if self.settled is None or self.persons is None:
            return None
        codes = _codes(canonical_ids(self.persons), canonical_ids(own))
        k_old, old, k_new, new = self.settled
        a, b = np.isin(k_old // cells, codes), np.isin(k_new // cells, codes)
        return k_old[a], old[a], k_new[b], new[b]


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


def release_rows(job: _Job, k: int, rows: NDArray[np.int64], persons: NDArray[Any],
                 shared: _Shared) -> TracePart | Failed:
    """Partition ``k``: its ``rows`` (every fix of its ``persons``, canonical ids) released in file order; never
    raises (:class:`Failed`)."""
    try:
        check_unchanged(job.plan)
        return _release(job, k, np.sort(np.asarray(rows, dtype=np.int64)), np.asarray(persons), shared)
    except ValidationError as ex:
        return Failed(k, True, str(ex), traceback.format_exc())
    except MetricDPError as ex:
        return Failed(k, False, str(ex), traceback.format_exc())
    except Exception as ex:  # any other worker-side failure: reported by the driver in one line
        return Failed(k, False, f"{type(ex).__name__}: {ex}", traceback.format_exc())


def _start(job: _Job, k: int, kind: Traces, mech: Any, persons: NDArray[Any], shared: _Shared) -> None:
    """The partition's mechanism started: accounted, with the driver's codes, grants and settled places."""
    if shared.persons is None or shared.granted is None:
        mech.start(None, partition_rng(job.seed, k))
        return
    kind.persons._lookup(shared.persons, None)  # codes in the driver's order: its grants, eps and places by code
    mech.start(shared.granted, partition_rng(job.seed, k))
    settled = shared.places(persons, mech.cell_count)
    if settled is not None:
        mech.remember(settled[0], settled[1], fresh=False)
        mech.remember(settled[2], settled[3], fresh=True)


def _release(job: _Job, k: int, rows: NDArray[np.int64], persons: NDArray[Any], shared: _Shared) -> TracePart:
    plan = job.plan
    mech = copy.deepcopy(shared.mechanism)  # a worker's copy serves many partitions: each starts afresh
    kind = job.kind(mech)
    _start(job, k, kind, mech, persons, shared)
    known = len(kind.persons)
    firsts = np.array([p.row for p in plan.pieces], dtype=np.int64)
    at = np.searchsorted(firsts, rows, side="right") - 1
    own: list[NDArray[np.int64]] = []
    written, numbers = 0, []
    for i in np.unique(at).tolist():
        piece = plan.pieces[i]
        mine = np.zeros(piece.rows, dtype=bool)
        mine[rows[at == i] - piece.row] = True
        chunk = plan.parts.read(piece, plan.layout)
        fixes = kind.parse(chunk).values
        if shared.persons is not None and len(kind.persons) > known:
            raise EngineError("a partition met a person the count of fixes per person did not see")
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
    if shared.counts is not None and own:
        codes, counted = np.unique(np.concatenate(own), return_counts=True)
        if not np.array_equal(counted, shared.counts[codes]):
            raise EngineError("a partition read other fixes per person than the driver counted")
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
#: ``decide()``: the shared value of the release (accounted: from the driver's counts of its check pass).
Decide = Callable[[], _Shared]
#: ``told(rows, partitions)``: the rows of the partitions released so far, and how many partitions.
Told = Callable[[int, int], None]


def _dask(backend: Backend, job: _Job, mechanism: Any, decide: Decide, id_type: str, told: Told) -> list[Any]:
    """Keys as a Dask DataFrame, shuffled on the person, released per partition."""
    from .._optional import import_optional

    dask = import_optional("dask", extra="dask")
    dd = import_optional("dask.dataframe", extra="dask")
    pd = import_optional("pandas", extra="dask")
    distributed = import_optional("distributed", extra="dask")
    pieces = job.plan.pieces
    meta = pd.DataFrame({"person": pd.Series([], dtype="int64" if id_type in "iu" else object),
                         "row": pd.Series([], dtype="int64")})
    with backend.cluster(len(pieces)) as client:
        frames = [dask.delayed(functools.partial(_key_frame, job, mechanism))(p) for p in pieces]
        keys = dd.from_delayed(frames, meta=meta, verify_meta=False)
        value = client.submit(_same, decide(), pure=False)
        slots = sum(int(w.get("nthreads", 1)) for w in client.scheduler_info()["workers"].values())
        parts = keys.shuffle(on="person", npartitions=_partitions(len(pieces), slots)).to_delayed()
        tasks = [dask.delayed(functools.partial(_release_frame, job))(k, part, value) for k, part in enumerate(parts)]
        futures = client.compute(tasks)
        rows = count = 0
        for _future, result in distributed.as_completed(futures, with_results=True):
            rows, count = rows + (result.rows if isinstance(result, TracePart) else 0), count + 1
            told(rows, count)
        return list(client.gather(futures))


def _key_frame(job: _Job, mechanism: Any, piece: Any) -> Any:
    from .._optional import import_optional

    pd = import_optional("pandas", extra="dask")

    ids, rows = person_keys(job, piece, mechanism)
    return pd.DataFrame({"person": ids if ids.dtype.kind == "i" else ids.astype(object), "row": rows})


def _release_frame(job: _Job, k: int, frame: Any, shared: _Shared) -> TracePart | Failed:
    return release_rows(job, k, frame["row"].to_numpy(dtype=np.int64), frame["person"].to_numpy(), shared)


def _same(x: Any) -> Any:
    return x


def _spark(backend: Backend, job: _Job, mechanism: Any, decide: Decide, id_type: str, told: Told) -> list[Any]:
    """Keys as an RDD of ``(person, row)``, partitioned by the person, released per partition."""
    from .spark import _collect_told, spark_ready

    spark_ready()
    pieces = job.plan.pieces
    with warnings.catch_warnings(), backend.cluster(len(pieces)) as sc:
        warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")  # "pandas >= 3 unsupported"
        keys = sc.parallelize(list(pieces), len(pieces)).flatMap(functools.partial(_key_pairs, job, mechanism))
        value = sc.broadcast(decide())
        try:
            by_person = keys.partitionBy(_partitions(len(pieces), int(sc.defaultParallelism)), _person_hash)
            tasks = by_person.mapPartitionsWithIndex(_task)
            return _collect_told(sc, tasks, functools.partial(_release_pairs, job), value,
                                 lambda rows, count: told(int(rows), int(count)))
        finally:
            value.unpersist()


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


def _task(k: int, pairs: Iterable[tuple[Any, int]]) -> list[tuple[tuple[int, list[Any]], int]]:
    """Partition ``k``'s pairs as one task weighing its rows (what the progress counts)."""
    got = list(pairs)
    return [((k, got), len(got))]


def _release_pairs(job: _Job, task: tuple[int, list[tuple[Any, int]]], shared: _Shared) -> TracePart | Failed:
    k, pairs = task
    rows = np.fromiter((row for _, row in pairs), dtype=np.int64, count=len(pairs))
    return release_rows(job, k, rows, np.asarray([p for p, _ in pairs]), shared)


# ------------------------------------------------------------------------------ the driver
def release_traces_engine(engine: str, kind: Traces, src: Path, out: str | PathLike[str], *,
                          keep: Sequence[str], drop: Sequence[str], budget: float | None, ledger: Any, policy: str,
                          run_id: str | None, seed: int | None, inputs: Sequence[str | PathLike[str]],
                          scheduler: str | None, master: str | None, piece_bytes: int | None,
                          progress: Progress | None = None) -> TraceRun:
    """:func:`metricdp.streaming.traces.release_traces_file` on ``engine`` ("dask" or "spark"; module docstring).

    ``kind`` is the release's kind (its mechanism fresh), ``seed`` None (the OS secure source in every
    partition) or the int whose :func:`~metricdp.integrations.partition_rng` children the partitions draw from;
    ``progress`` is told the rows released as partitions complete.
    """
    import time

    from .._atomic import atomic_write, scratch_directory
    from ..pipeline.run import ReleaseStats
    from ..streaming.accounted import Settlement, _identity
    from ._engines import engine_runner
    from ._run import _same_format

    mech = kind.mechanism
    budget = budget_of(mech, budget, ledger)
    accounted = budget is not None or ledger is not None
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

        def decide() -> _Shared:
            if not accounted:
                return _Shared(mech)
            # the driver's check pass counted what the local first pass counts (the fixes per person and, per
            # place, the distinct (person, cell) with their first rows), persons coded as the local engine codes
            # them; every partition checks its persons' fixes against these counts, and the file's identity is
            # checked by every partition and before the publish
            persons = check.persons.ids
            ids = canonical_ids(persons) if persons.size else np.zeros(0, dtype=np.int64)
            rows, seen = check.rows[:ids.size], check.seen
            if int(rows.sum()) != plan.rows:  # pragma: no cover - one parse per chunk of the plan
                raise EngineError(f"the check pass counted {int(rows.sum()):,} fixes where the input has "
                                  f"{plan.rows:,}")
            g = reserve(mech, ids, rows, seen, shown=persons, where=kind.where, unit=kind.unit, path=src,
                        identity=identity, budget=budget, ledger=ledger, policy=policy, run_id=run_id)
            settlement.run = g.run
            grants.append(g)
            granted = np.asarray(g.granted, dtype=np.int64)
            shipped = copy.deepcopy(mech)  # fitted to every person's counts, not started
            settled = None
            if g.memo is not None and isinstance(mech, PerPlace):  # every place decided before the pass
                source = partition_rng(seed, len(plan.pieces))  # no partition's stream: they are at most the pieces
                mech.start(granted, source)
                settled = settle(seen, mech, granted, *g.memo, ledger, g.run_id, source)
            return _Shared(shipped, persons, granted, settled, rows.copy())

        def told(rows: int, count: int) -> None:
            report(progress, min(rows, plan.rows), plan.rows, f"releasing: {count} partitions done")

        scratch = scratch_directory(target)
        try:
            job = _Job(plan, kind.user, kind.time, kind.lat, kind.lon, kind.digits, seed, str(scratch))
            ran = _dask if engine == "dask" else _spark
            try:
                results = ran(backend, job, mech, decide, check.persons.ids.dtype.kind, told)
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
    merged = TraceReport.concat([p.report for p in done])
    order = np.argsort(merged.persons, kind="stable")
    merged = TraceReport(*(getattr(merged, f)[order] for f in ("persons", "spent_units", "fresh", "reused",
                                                                 "tests", "passed")))
    stats = ReleaseStats(written, time.perf_counter() - t0, plan.fmt, cast(ColumnPlan, plan.columns))
    g = grants[0] if grants else None
    reserved = None
    if g is not None:  # in the report's order (sorted by id), as the local engine's
        order = np.argsort(canonical_ids(check.persons.ids), kind="stable")
        reserved = np.asarray(g.granted, dtype=np.int64)[order] * mech.piece
    return TraceRun(stats, merged, mech.name, reserved, plan.rows - written if accounted else 0,
                    0 if g is None else g.over, None if g is None else g.run_id)


def _codes(ids: NDArray[Any], which: NDArray[Any]) -> NDArray[np.intp]:
    """The codes (positions in ``ids``, distinct) of ``which`` (values of ``ids``)."""
    order = np.argsort(ids, kind="stable")
    at = np.minimum(np.searchsorted(ids[order], which), max(ids.size - 1, 0))
    return order[at] if ids.size else np.zeros(0, dtype=np.intp)


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
