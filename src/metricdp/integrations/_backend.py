"""The one interface the driver runs an engine through: :class:`Backend` (Dask's and Spark's in their modules).

As in PipelineDP's ``pipeline_backend``, the release logic is written once
(:mod:`._run`: plan, account, check, join, publish; :mod:`._pieces`: what a partition does)
and never asks which engine runs it. An engine is a :class:`Backend`: a session that
shares one cluster between the jobs of a release, :meth:`Backend.map` (a function over
items on the workers, one value sent once per worker, the results in order, a tally as
items finish) and :meth:`Backend.error` (the engine's failure as one typed line). Calling
a backend runs :func:`._pieces.release_piece` over pieces: the runner of
:func:`._run.release_file` and of the counting pass (:mod:`._persons`).
"""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from .._progress import Progress, report
from ..errors import EngineError, MetricDPError
from ._common import Shipped

__all__ = ["Backend", "PieceProgress", "Tally", "one_line", "root_cause"]

#: ``tally(weight, count)``: the summed weights and the number of the items finished so far.
Tally = Callable[[int, int], None]


class PieceProgress:
    """The rows of the pieces finished so far, told to ``progress`` as partitions complete.

    ``progress(rows, total, "PASS: k of n partitions")`` with ``total`` the rows the driver
    counted in all ``pieces`` and PASS what ``job`` does (counting rows per person, or
    releasing). An engine's tally is capped at the plan's: a retried task cannot count twice
    past the end.
    """

    def __init__(self, job: Any, pieces: Sequence[Any], progress: Progress | None) -> None:
        from ._persons import PersonCount

        self.total, self.parts = sum(p.rows for p in pieces), len(pieces)
        self._progress = progress
        self._what = "counting rows per person" if isinstance(job.rule, PersonCount) else "releasing"

    def update(self, rows: int, count: int) -> None:
        """``rows`` of ``count`` pieces done."""
        report(self._progress, min(rows, self.total), self.total,
               f"{self._what}: {min(count, self.parts)} of {self.parts} partitions")


def _release(job: Any, piece: Any, shipped: Shipped) -> Any:
    from ._pieces import release_piece

    return release_piece(job, piece, shipped.mechanism)


class Backend(ABC):
    """One engine (module docstring). Subclasses say how to connect, map and name a failure."""

    #: how messages name the engine ("the Dask job failed: ...")
    name: ClassVar[str]

    def __init__(self) -> None:
        self._session: contextlib.ExitStack | None = None
        self._cluster: Any = None

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Within it, the backend's jobs share one cluster: started by the first, closed at the end
        (an accounted release runs two jobs: the count of rows per person, then the release)."""
        with contextlib.ExitStack() as stack:
            self._session = stack
            try:
                yield
            finally:
                self._session = self._cluster = None

    @contextlib.contextmanager
    def cluster(self, items: int) -> Iterator[Any]:
        """The cluster of one job of ``items`` items: the session's, or one of its own closed at the end."""
        with contextlib.ExitStack() as own:
            if self._session is None:
                yield self.connect(own, items)
                return
            if self._cluster is None:
                self._cluster = self.connect(self._session, items)
            yield self._cluster

    @abstractmethod
    def connect(self, stack: contextlib.ExitStack, items: int) -> Any:
        """The engine's client for a job of ``items`` items; what must be closed goes on ``stack``."""

    @abstractmethod
    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], shared: Any, weights: Sequence[int],
            tally: Tally | None) -> list[Any]:
        """``fn(item, shared)`` for every item on the engine's workers, the results in the order of ``items``.

        ``shared`` is sent once per worker, not once per item; ``tally`` (or None) is told
        the summed ``weights`` and the count of the items finished, as they finish.
        """

    def error(self, ex: BaseException) -> MetricDPError:
        """``ex`` (raised by the engine, not by metricdp) as one typed error."""
        return EngineError(f"the {self.name} job failed: {root_cause(ex)}")

    def __call__(self, job: Any, pieces: Sequence[Any], mechanism: Any, progress: Progress | None = None
                 ) -> list[Any]:
        """:func:`._pieces.release_piece` of ``job`` for every piece, the results in order (a runner)."""
        import functools

        tally = None if progress is None else PieceProgress(job, pieces, progress).update
        try:
            return self.map(functools.partial(_release, job), pieces, Shipped(mechanism), [p.rows for p in pieces],
                            tally)
        except MetricDPError:
            raise
        except Exception as ex:  # the cluster's own failure (a worker died, no scheduler, a JVM error)
            raise self.error(ex) from ex


# ------------------------------------------------------------------------------ the root cause
_EXC_LINE = re.compile(
    r"^\s*(?:Caused by: )?(?P<cls>[A-Za-z_][\w.$]*(?:Error|Exception|Exit|Interrupt))(?::\s*(?P<msg>.*))?$"
)
_JAVA_PREFIXES = ("org.", "java.", "javax.", "scala.", "py4j.", "com.", "io.")
_JAVA_EXC = re.compile(r"((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))(?::\s*)?")


def _text(ex: BaseException) -> str:
    """``str(ex)``, or the type's name when that fails (engine exceptions format lazily)."""
    try:
        return str(ex)
    except Exception:
        return type(ex).__name__


def one_line(text: str, limit: int = 400) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _java_cause(lines: list[str]) -> str | None:
    """The innermost Java exception with a message (``Job aborted ...`` is Spark's wrapper, not a cause)."""
    pairs: list[tuple[str, str]] = []
    for ln in lines:
        if ln.startswith("at "):
            continue
        found = list(_JAVA_EXC.finditer(ln))
        for k, m in enumerate(found):
            stop = found[k + 1].start() if k + 1 < len(found) else len(ln)
            pairs.append((m[1], ln[m.end() : stop].strip(" :")))
    told = [(c, msg) for c, msg in pairs if msg and not msg.startswith("Job aborted")]
    if not (told or pairs):
        return None
    cls, msg = (told or pairs)[-1]
    return f"{cls}: {msg}" if msg else cls


def root_cause(ex: BaseException) -> str:
    """The root cause of an engine exception in one line.

    In the exception's text and its innermost chained one's (a Py4J error carries the
    Java stack and the Python worker's traceback): the last line naming a Python
    exception (what the Python worker raised), else the innermost Java exception that
    carries a message (a crashed worker: ``Python worker exited unexpectedly``), else
    the first line.
    """
    inner = ex
    seen = {id(ex)}
    while (nxt := inner.__cause__ or inner.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        inner = nxt
    for cand in (ex, inner):
        lines = [ln.strip() for ln in _text(cand).splitlines() if ln.strip()]
        python = [
            ln for ln in lines
            if (m := _EXC_LINE.match(ln)) is not None and not m["cls"].startswith(_JAVA_PREFIXES)
        ]
        if python:
            return one_line(python[-1])
        java = _java_cause(lines)
        if java:
            return one_line(java)
    text = _text(ex).strip()
    first = text.splitlines()[0] if text else ""
    return one_line(f"{type(ex).__name__}: {first}" if first else type(ex).__name__)
