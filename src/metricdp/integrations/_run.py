"""The one driver of every engine release: check, release piece by piece on a backend, verify, publish.

1. The output path is vetted and opened (:func:`metricdp.io.atomic_write`: a hidden
   temporary file renamed into place at the end), then the driver checks the whole
   input in one pass (:func:`._plan.plan_file`): every engine accepts exactly the files
   the local engine accepts and refuses the rest with its one-line message.
2. The engine's backend (:class:`._backend.Backend`) runs :func:`._pieces.release_piece`
   once per piece; parts go to a scratch directory beside the output.
3. Each part must report the rows the driver counted for its piece (so the parts' total
   is the rows the plan writes). Any mismatch, any
   partition error, any engine failure is one typed error (:meth:`._backend.Backend.error`), and
   nothing is published: the scratch directory and the temporary file are removed on
   every path out (an exception, SIGINT, SIGTERM). A scratch directory left by a
   process killed with SIGKILL is removed by the next run beside the same output.

Progress (:data:`metricdp._progress.Progress`) is told by the driver as partitions complete
(:class:`._backend.PieceProgress`): the rows of the finished pieces, of the rows the plan counted.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import Any, TypedDict, Unpack, cast

from .._progress import Progress
from ..errors import EngineError, MetricDPError, ValidationError
from ..tabular.columns import ColumnPlan
from ._backend import Backend, one_line
from ._common import check_seed
from ._pieces import Done, Failed, Job, part_path
from ._plan import DEFAULT_PIECE_BYTES, Piece, Plan, check_unchanged, engine_format, plan_file
from ._rule import LabelRule, Rule

__all__ = ["FileOptions", "Runner", "release_file", "release_on"]

#: ``runner(job, pieces, mechanism, progress)`` runs :func:`._pieces.release_piece` for every piece (in
#: any order, anywhere) and returns the results in the order of ``pieces``; ``progress`` (or None) is
#: told as pieces finish (:class:`._backend.PieceProgress`). A :class:`._backend.Backend` is one.
Runner = Callable[[Job, Sequence[Piece], Any, "Progress | None"], Sequence[Done | Failed]]


class FileOptions(TypedDict, total=False):
    """The options of a file release on an engine (:func:`release_on`), whatever its kind."""

    seed: int | None
    inputs: Sequence[str | PathLike[str]]
    piece_bytes: int | None
    keep: Sequence[str]
    drop: Sequence[str]
    max_record: int | None
    accounting: Any
    on_report: Callable[[Any], None] | None
    progress: Progress | None
    plan_check: Callable[[ColumnPlan], None] | None


def release_on(backend: Backend, rule: Rule, mechanism: Any, input_path: str | PathLike[str], column: str,
               out: str | PathLike[str], **options: Unpack[FileOptions]) -> tuple[int, ColumnPlan]:
    """Release ``column`` of ``input_path`` into ``out`` on ``backend`` by ``rule``; the rows written and the
    driver's column plan (what left). The one entry point of every kind (labels, numbers, points).

    One cluster serves every job of the release (the count of rows per person, then the
    release). ``options`` (:class:`FileOptions`) as in :func:`release_file`; ``seed`` None
    draws from the OS secure source in every partition, an int makes partition ``k`` draw
    from :func:`~metricdp.integrations.partition_rng` ``(seed, k)``; ``piece_bytes`` is the
    input per partition (default 64 MiB); ``inputs`` are further files of the command that
    ``out`` must not be.

    Raises
    ------
    ValidationError
        the input is refused as the local engine refuses it (one line naming file, line
        or row, and the reasons), or changed while it was released.
    EngineError
        the cluster failed (a worker died, the scheduler cannot be reached, no Java, ...):
        the root cause in one line, the engine's exception chained. Nothing is written.
    """
    with backend.session():
        rows, plan = release_file(backend.name, backend, mechanism, input_path, column, out, rule=rule, **options)
    return rows, cast(ColumnPlan, plan.columns)  # the planner's: never None


def release_file(
    engine: str,
    runner: Runner,
    mechanism: Any,
    input_path: str | PathLike[str],
    column: str,
    out: str | PathLike[str],
    *,
    seed: int | None = None,
    inputs: Sequence[str | PathLike[str]] = (),
    piece_bytes: int | None = None,
    keep: Sequence[str] = (),
    drop: Sequence[str] = (),
    max_record: int | None = None,
    accounting: Any = None,
    on_report: Callable[[Any], None] | None = None,
    rule: Rule | None = None,
    progress: Progress | None = None,
    plan_check: Callable[[ColumnPlan], None] | None = None,
) -> tuple[int, Plan]:
    """Release ``column`` of ``input_path`` into ``out`` with ``runner``; the rows written and the driver's plan
    (its column plan says what left).

    ``accounting`` (:class:`metricdp.streaming.accounted.Accounting`) makes it a release per
    person with the local engine's plan: the driver reads the user column once more, plans
    and reserves the budget once for the job (:mod:`metricdp.streaming.accounted`), each
    piece carries the rows it writes (and, for consistent releases, their releases, drawn
    by the driver), the workers draw the others; ``publishing()`` before the rename,
    ``commit`` after, ``abort`` on any failure before. ``on_report`` gets the report.

    ``keep``/``drop``: the columns written unreleased on purpose / left out, planned by
    :func:`metricdp.tabular.columns.plan_columns` as the local engine plans them
    (``plan_check`` sees that plan first); ``max_record`` caps a CSV record's bytes
    (:func:`metricdp.tabular.csv.max_record_bytes`).

    ``rule`` is the kind of release (:class:`._rule.Rule`; default labels:
    :class:`._rule.LabelRule`; :class:`._rule.NumberRule` numbers on the mechanism's
    grid, :class:`._points.PointRule` points): the kind the driver checks every value with
    and every partition releases with, and the accounting's first pass.

    ``progress`` is told the rows done as the engine's partitions complete (the count of
    rows per person first, when the accounting needs it, then the release).
    """
    from ..io import atomic_write, scratch_directory
    from ..streaming.accounted import Settlement

    src, target = Path(input_path), Path(out)
    if not src.is_file():
        raise ValidationError(f"{src}: no such file")
    _same_format(src, target)
    seed = check_seed(seed)
    rule = rule or LabelRule()
    run = None
    with Settlement() as settlement, atomic_write(target, "wb", inputs=[src, *inputs]) as fh:
        plan = plan_file(src, rule.kind(column, str(src), mechanism, None), values=rule.checked,
                         piece_bytes=piece_bytes or DEFAULT_PIECE_BYTES, keep=keep, drop=drop, max_record=max_record,
                         plan_check=plan_check)
        rule.check_planned(plan)
        if accounting is not None:
            run = _accounted(mechanism, src, plan, column, accounting, seed, max_record, rule, (engine, runner),
                             progress)
            settlement.run = run
            plan = replace(plan, pieces=_selected(run, plan))
        # named like atomic_write's temporaries: atomic_write (above) removes those a kill -9 left
        scratch = scratch_directory(target)
        try:
            job = Job(replace(plan, pieces=()), column, seed, str(scratch), rule)
            results = list(runner(job, plan.pieces, mechanism, progress)) if plan.pieces else []
            _check(engine, plan, results)
            check_unchanged(plan)
            written = sum(p.written for p in plan.pieces)
            parts = [Path(part_path(str(scratch), p.index, plan.fmt)) for p in plan.pieces]
            plan.parts.join(plan.layout, parts, fh, written)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if run is not None:
            run.seen = run.rows  # every piece was released as planned (_check)
            run.publishing()
    if run is not None and on_report is not None:
        on_report(run.report())
    return written, plan


def _same_format(src: Path, target: Path) -> None:
    """The engines write the input's format (its parts joined): an output named as another format is refused."""
    from ..tabular.formats import RELEASE_FORMATS, named_format

    fmt = engine_format(src)
    other = named_format(target)
    if other in RELEASE_FORMATS and other != fmt.name:
        raise ValidationError(f"{target}: the engines write the input's format ({fmt.name}); a {other} output is "
                              "written by the local engine only")


def driver_source(seed: int | None) -> Any:
    """The driver's own source: secure, or a seeded child no partition uses (partitions are 0, 1, ...)."""
    import numpy as np

    from .._random import SecureRandom

    return SecureRandom() if seed is None else np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2**31,)))


def _accounted(mechanism: Any, src: Path, plan: Plan, column: str, accounting: Any, seed: int | None,
               max_record: int | None, rule: Rule | None = None, cluster: tuple[str, Runner] | None = None,
               progress: Progress | None = None) -> Any:
    """The driver's plan of an accounted release (the local engine's: :mod:`metricdp.pipeline.first_pass`).

    The rule's kind, drawing from the driver's own source, gives the eps, the unit and the
    releases of consistent groups. Without consistent releases the plan needs only who each
    row belongs to: with ``cluster`` (engine name, runner) the engine counts it in one
    distributed pass (:mod:`._persons`) where the rule allows (:attr:`._rule.Rule.counts_persons`);
    otherwise the local first pass reads the file (every row's value too, for consistent releases).
    """
    rule = rule or LabelRule()
    source = driver_source(seed)
    kind = rule.kind(column, str(src), mechanism, source)
    if cluster is not None and rule.counts_persons and not accounting.consistent:
        from ..streaming.accounted import _identity
        from ._persons import distributed_persons, start_counted

        identity = _identity(src)  # before the pass: publishing compares it with the file then
        persons = distributed_persons(cluster[0], cluster[1], plan, column, accounting.user_column, mechanism,
                                      progress)
        return start_counted(src, identity, persons, kind.epsilon, accounting, source, kind.unit,
                             lambda values: kind.release(values, 0), refuse_empty=kind.refuses_empty)
    from ..pipeline.first_pass import start_accounted
    from ..pipeline.run import Source

    return start_accounted(kind, Source.of(src, max_record=max_record), accounting, source)


def _selected(run: Any, plan: Plan) -> tuple[Piece, ...]:
    """Each piece with the rows it writes (and their releases, for consistent releases)."""
    import numpy as np

    out, offset = [], 0
    for p in plan.pieces:
        keep = run.plan.keep[offset : offset + p.rows]
        given = None
        if run.group_release is not None:
            given = Piece.given_bytes(np.asarray(run.group_release)[run.plan.group[offset : offset + p.rows][keep]])
        out.append(replace(p, keep=np.packbits(keep).tobytes(), kept=int(keep.sum()), given=given))
        offset += p.rows
    if offset != run.rows:
        raise run._changed()
    return tuple(out)


def _check(engine: str, plan: Plan, results: Sequence[Done | Failed]) -> None:
    """Every piece done with the driver's row count, else one typed error."""
    failed = [r for r in results if isinstance(r, Failed)]
    if failed:
        first = min(failed, key=lambda r: (not r.input, r.index))  # a problem of the input explains the rest
        err: MetricDPError = (
            ValidationError(first.message) if first.input
            else EngineError(f"the {engine} job failed in partition {first.index}: {one_line(first.message)}")
        )
        if first.detail:
            err.add_note(f"partition {first.index}, on the worker:\n{first.detail.rstrip()}")  # for --debug
        raise err
    if len(results) != len(plan.pieces):
        raise EngineError(f"the {engine} job returned {len(results)} partition(s) for {len(plan.pieces)}")
    for piece, done in zip(plan.pieces, results, strict=True):
        if not isinstance(done, Done) or done.index != piece.index or done.rows != piece.written:
            got = done.rows if isinstance(done, Done) else "no"
            raise EngineError(
                f"the {engine} job wrote {got} row(s) for partition {piece.index} where the input has "
                f"{piece.written:,}; nothing written"
            )
