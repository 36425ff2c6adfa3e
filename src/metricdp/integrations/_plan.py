"""What the driver's one pass over an input file makes before any engine runs: the plan and its pieces.

Dask's and Spark's own readers guess: pandas infers an index when the data rows have
one field more than the header (every column then shifts left and true values are
written under another column's name), Spark drops the extra field, splits records at
line breaks inside quotes, trims blanks on write. So the engines do not read the file
with them. The driver reads it once with the local engine's reader of its format
(:mod:`metricdp.tabular.formats`: for CSV the one record definition, RFC 4180, each
refusal with file, line and byte offset), plans the columns that leave as the local
engine does (:func:`metricdp.tabular.columns.plan_columns`), checks what a kept column
holds by name (:func:`metricdp.tabular.leaks.check_names`, before any row is read), then
in ONE pass over the file (:func:`plan_file`) checks it by content as the local engine
does (:class:`metricdp.tabular.leaks.ContentScan`), checks every value of the released
column(s) with the release's own kind (:mod:`metricdp.pipeline`: its parse, its refusals,
the local engine's message with the count and first line numbers: :class:`KindCheck`),
and cuts the file into :class:`Piece` s of whole rows (how, is the format's own
:class:`~metricdp.tabular.formats.Parts`), each chunk the cut reads checked as it is read.
Every engine partition then releases exactly one piece read by the same reader
(:mod:`._pieces`), so the three engines accept the same files and release the same rows.

Memory is one chunk (``chunk_bytes``) plus one record, and the chunk before it while a block of the content
check runs on past its end (:class:`~metricdp.tabular.leaks.ContentScan`); time is linear in the file.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ..pipeline.kind import Kind
from ..pipeline.run import unnamed
from ..tabular.columns import ColumnPlan, plan_columns
from ..tabular.csv import DEFAULT_CHUNK_BYTES
from ..tabular.formats import RELEASE_FORMATS, BatchChunk, Chunk, Format, Parts, arrow, format_of
from ..tabular.formats._base import Layout, changed
from ..tabular.leaks import ContentScan, check_names

__all__ = ["DEFAULT_PIECE_BYTES", "ENGINE_FORMATS", "KindCheck", "Piece", "Plan", "changed", "check_unchanged",
           "cut_file", "engine_format", "plan_file"]

#: format name -> the engines' side of it: every readable format that has one (:meth:`Format.parts`).
ENGINE_FORMATS: dict[str, Parts] = {n: p for n, f in RELEASE_FORMATS.items() if (p := f.parts()) is not None}

#: Input bytes per engine partition (a text format; a typed one: groups adding up to about as much). Large enough that
#: a partition's fixed cost (a task, a part file) is small against its work, small enough that a file of a
#: few GB gives every core of a small cluster several partitions.
DEFAULT_PIECE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Piece:
    """One partition's share of the file (a :data:`~metricdp.tabular.formats.Span` of its format's cut).

    ``start``/``stop`` in the format's units (bytes of whole records; row groups or record
    batches), ``first`` the place of its first row (a file line; a 1-based row number),
    ``rows`` the rows the driver counted in it; ``row``: the 0-based number of its first
    data row in the file (a worker's error names data rows).

    An accounted release (:mod:`metricdp.streaming.accounted`) sets ``keep``, the rows
    written (``numpy.packbits``; None: every row, drawn by the worker), ``kept`` their
    count and, for consistent releases, ``given``: the kept rows' releases drawn by the
    driver (:meth:`given_bytes`: numpy's own format, so a kind's releases keep their dtype
    and shape -- codes or (k, 2) points).
    """

    index: int
    start: int
    stop: int
    rows: int
    first: int
    row: int = 0
    keep: bytes | None = None
    kept: int | None = None
    given: bytes | None = None

    @property
    def written(self) -> int:
        """The rows this piece's part must hold."""
        return self.rows if self.kept is None else self.kept

    def selection(self) -> tuple[NDArray[np.bool_] | None, NDArray[Any] | None]:
        """The rows written (None: all) and, for a consistent release, their releases."""
        if self.keep is None:
            return None, None
        keep = np.unpackbits(np.frombuffer(self.keep, dtype=np.uint8), count=self.rows).astype(bool)
        if self.given is None:
            return keep, None
        return keep, np.load(io.BytesIO(self.given), allow_pickle=False)

    @staticmethod
    def given_bytes(released: NDArray[Any]) -> bytes:
        """``released`` as :attr:`given` holds it (codes as int32: a quarter of the wire's bytes)."""
        out = io.BytesIO()
        np.save(out, released.astype(np.int32) if released.dtype.kind in "iu" else released, allow_pickle=False)
        return out.getvalue()


@dataclass(frozen=True)
class Plan:
    """What the driver checked: the format, the header, the pieces and the row count.

    ``size``/``mtime_ns`` identify the version of the file that was checked (a partition
    that finds another one refuses it); ``columns`` says what leaves
    (:func:`metricdp.tabular.columns.plan_columns`); ``layout`` is what the format's
    workers need to read a piece and write its part (:class:`~metricdp.tabular.formats.Parts`).
    """

    path: str
    fmt: str
    names: tuple[str, ...]
    pieces: tuple[Piece, ...]
    rows: int
    size: int
    mtime_ns: int
    layout: Layout
    columns: ColumnPlan | None = None

    @property
    def parts(self) -> Parts:
        """The format's engine side (by the format's name: a plan travels to the workers as data)."""
        return ENGINE_FORMATS[self.fmt]


def engine_format(src: Path) -> Format:
    """The format of ``src``, one the engines cut into pieces (the others refused by their suffix)."""
    return RELEASE_FORMATS[format_of(src, tuple(ENGINE_FORMATS))]


def cut_file(src: Path, fmt: Format, cols: ColumnPlan, check: KindCheck | None = None, *,
             piece_bytes: int = DEFAULT_PIECE_BYTES, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
             max_record: int | None = None) -> Plan:
    """The format's one pass over ``src`` (``check`` sees every chunk and refuses what the kind refuses), the plan."""
    if piece_bytes < 1:
        raise ValidationError(f"piece_bytes must be >= 1, got {piece_bytes}")
    st = os.stat(src)
    spans, layout = ENGINE_FORMATS[fmt.name].cut(src, cols, piece_bytes=piece_bytes, chunk_bytes=chunk_bytes,
                                                 max_record=max_record, check=check)
    if check is not None:
        refused = check.error(str(src))
        if refused is not None:
            raise refused
    pieces, row = [], 0
    for i, (start, stop, n, first) in enumerate(spans):
        pieces.append(Piece(i, start, stop, n, first, row))
        row += n
    return Plan(str(src), fmt.name, cols.header, tuple(pieces), row, st.st_size, st.st_mtime_ns, layout, cols)


def plan_file(
    src: Path, kind: Kind, *, piece_bytes: int = DEFAULT_PIECE_BYTES, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    keep: Sequence[str] = (), drop: Sequence[str] = (), max_record: int | None = None, values: bool = True,
    plan_check: Callable[[ColumnPlan], None] | None = None,
) -> Plan:
    """Read ``src`` once: check what leaves and every value of ``kind``'s columns, and cut the file into pieces.

    The one planner of every engine release: the reader, the column plan and the pieces
    are the local engine's whatever is released. ``kind`` (a pipeline kind that never
    draws here) says which values are refused and how (:class:`KindCheck`;
    ``values=False``: none read here, each worker refuses its piece's), and what a kept
    column must not hold (:meth:`~metricdp.pipeline.kind.Kind.rule`, checked by name and
    content as the local engine checks it, on the chunks the cut reads). ``keep``/``drop`` plan
    the columns that leave as the local engine plans them; ``plan_check`` sees that plan before
    anything is read. Every refusal comes before anything is written or reserved: the plan is
    returned only after the whole file was read.

    Raises
    ------
    ValidationError
        the local engine's errors, with its messages: a missing or repeated column, a
        bad ``keep``/``drop`` name, any refusal of the format's reader (line, byte offset
        or row), a kept column that holds the released values, the values the kind
        refuses (count and first line numbers or rows), "nothing written".
    """
    fmt = engine_format(src)
    names = fmt.names(src, max_record=max_record)  # the local engine's header and its errors
    cols = plan_columns(names, list(kind.columns), keep=keep, drop=drop, where=str(src))
    if plan_check is not None:
        plan_check(cols)
    rule = kind.rule()
    check_names(cols.header, cols.unacknowledged, rule, str(src))
    content = ContentScan(rule, unnamed(cols, kind), str(src))
    return cut_file(src, fmt, cols, KindCheck(kind, values, content), piece_bytes=piece_bytes,
                    chunk_bytes=chunk_bytes, max_record=max_record)


class KindCheck:
    """The driver's reading of the released values: the kind's own parse, its refusals gathered for one error.

    What the local engine's pass (:class:`metricdp.pipeline.run.Pass`) does with each chunk,
    without releasing: a chunk's refused rows noted with their places and some of their
    texts; :meth:`error` is the local engine's one error for all of them. ``values=False``
    counts the rows only (a kind whose workers refuse a bad value of their piece). ``content``,
    when given, sees every chunk too: the content check of the columns nobody named, in the
    same pass (its refusal raised as it is found, or by :meth:`error`, before the kind's).
    """

    def __init__(self, kind: Kind, values: bool = True, content: ContentScan | None = None) -> None:
        self.kind, self.values, self.content = kind, values, content
        self.refused = kind.refusals()
        self.unit = "line"

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads: the released ones, those the kind reads beside them (``reads``: a trace's
        person and time) and those whose content is checked."""
        checked = self.content.others if self.content is not None else ()
        return tuple(dict.fromkeys((*self.kind.columns, *getattr(self.kind, "reads", ()), *checked)))

    def check_type(self, schema: Any, where: str) -> None:
        """Refuse a typed column the kind cannot read or write back (before any row is read)."""
        pa, _ = arrow()
        kind = self.kind
        fields = [schema.field(c) for c in kind.columns]
        empty = BatchChunk(pa.RecordBatch.from_pylist([], schema=pa.schema(fields)), 0)
        try:
            values = kind.parse(empty).values  # the kind's own type errors (numbers: "numbers or text expected")
        except pa.ArrowException:
            values = None  # a type the kind cannot read as text: the cast below names the column and its type
        for item in kind.render(values if values is not None else np.zeros(0, dtype=np.intp)):
            item.arrays([schema.field(c).type for c in item.columns], where)
        if values is None:
            name = kind.columns[0]
            raise ValidationError(f"{where}: column {name!r} has type {schema.field(name).type}; "
                                  "its values cannot be read as text")

    def add(self, chunk: Chunk) -> None:
        """Note the rows of ``chunk`` that the kind refuses."""
        self.unit = chunk.unit
        if self.content is not None:
            self.content.add(chunk)
        if not self.values:
            return
        got = self.kind.parse(chunk)
        if got.refused.size:
            shown = got.refused[:self.kind.show]
            self.refused.add(chunk.places(got.refused), chunk.texts(self.kind.columns[0], shown), got.reasons)

    def error(self, where: str) -> ValidationError | None:
        """The local engine's one error for every refused value noted (None: none); first, the content check's
        last block (raised: a column that leaves with the released values)."""
        if self.content is not None:
            self.content.finish()
        return self.refused.error(where, self.unit) if self.refused.rows else None


def check_unchanged(plan: Plan) -> None:
    """Refuse a file that is not the version the plan checked (size or mtime differ)."""
    try:
        st = os.stat(plan.path)
    except OSError as ex:
        raise ValidationError(f"{plan.path}: cannot be read any more ({ex.strerror}); nothing written") from None
    if (st.st_size, st.st_mtime_ns) != (plan.size, plan.mtime_ns):
        raise changed(plan.path)
