"""Texts: a column of documents, each rewritten word by word by :class:`metricdp.text.rewrite.Rewriter`.

A value is a document when it is a string (a typed column must hold strings; a CSV field
always does, an empty one being a document without words); a missing value is refused,
and so is a document without an author when the release is accounted per author (the
rewriter's :class:`~metricdp.text.accounting.TextAccounting` has a ``user_column``): the
error gives the count per reason and the first places. The release of a chunk is the
rewriter's rewrite of its documents, in order, from the rewriter's one sampler: every
rule of the rewrite (vocabulary, kept words and categories, numbers, case, Unicode
normal forms, clitics, withheld tokens) is :mod:`metricdp.text.rewrite`'s, unchanged;
the counts (:class:`~metricdp.text.rewrite.RewriteStats`) add up over the chunks. A
column keeping the true text under another name is refused by
:meth:`~metricdp.tabular.leaks.LeakRule.text`.

:func:`read_only` is a pass that rewrites and writes nothing: the first pass of an
accounted rewrite (:mod:`metricdp.text.accounted`), which learns each released token's
person and word through the same chunk loop, parse and rewrite as the release.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ..tabular.columns import ColumnPlan
from ..tabular.formats import Chunk, Format, Reader, Released, Strings, Writer, WriteSpec, arrow
from ..tabular.leaks import LeakRule
from .kind import Kind, Parsed, Refusals
from .run import Pass, Source

if TYPE_CHECKING:
    from ..text.rewrite import Rewriter

__all__ = ["Documents", "Texts", "read_only"]

_NO_TEXT, _NO_AUTHOR = 1, 2  # reasons a document is refused


@dataclass(frozen=True)
class Documents:
    """A chunk's documents (``texts``) and, with an accounting per author, their ``authors``."""

    texts: list[str]
    authors: list[Any] | None = None


class _Refused(Refusals):
    """Documents with no text, or (accounted per author) no author: counted per reason, first places kept."""

    def __init__(self, column: str, user_column: str | None, show: int) -> None:
        self.show = show
        self.rows = 0
        self.why = {_NO_TEXT: f"column {column!r} has no text (a missing value)",
                    _NO_AUTHOR: f"user column {user_column!r} is empty or not text: every document needs an author"}
        self.counts = dict.fromkeys(self.why, 0)
        self.places: dict[int, list[int]] = {reason: [] for reason in self.why}

    def add(self, places: NDArray[np.int64], texts: list[str], reasons: NDArray[np.int8] | None) -> None:
        assert reasons is not None
        self.rows += len(places)
        for reason, first in self.places.items():
            these = places[reasons == reason]
            self.counts[reason] += len(these)
            first.extend(int(p) for p in these[:max(0, self.show - len(first))])

    def error(self, where: str, unit: str) -> ValidationError:
        parts = [f"{unit} {first[0]}: {self.why[reason]} ({self.counts[reason]:,} document(s); first at {unit}(s) "
                 f"{', '.join(map(str, first))})" for reason, first in self.places.items() if first]
        return ValidationError(f"{where}: {'; '.join(parts)}; nothing written")


def _strings(col: Any, where: str, what: str, integers: bool = False) -> list[Any]:
    """A column's values as Python objects: strings (or, when ``integers``, integers); another type is refused."""
    pa, _ = arrow()
    kind = col.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or (integers and pa.types.is_integer(kind))):
        raise ValidationError(f"{where}: {what} has type {kind}; text{' or integers' if integers else ''} expected")
    return list(col.to_pylist())


class Texts(Kind):
    """The documents of column ``column`` rewritten by ``rewriter`` (its accounting reads the authors)."""

    def __init__(self, column: str, rewriter: Rewriter, *, where: str = "input") -> None:
        self.column, self.rewriter, self.where = column, rewriter, where
        self.columns = (column,)
        accounting = rewriter.accounting
        self.user_column: str | None = None if accounting is None else accounting.user_column
        #: characters of the documents handed to the rewriter so far, one more per document (its
        #: field's separator): the share of a text file read, for the progress' estimate of the total
        self.read = 0
        self._lines = False  # the rows are lines of a text file (its chunks count lines)

    @property
    def epsilon(self) -> float:
        """Not one number: a document's spend is its word tokens' (:mod:`metricdp.text.accounting`)."""
        raise ValidationError("a text release is accounted per document's tokens, not per row")

    @property
    def unit(self) -> str:
        return "token"

    def parse_empty(self) -> Documents:
        return Documents([])

    def rule(self) -> LeakRule:
        return LeakRule.text(self.column)

    def read_fraction(self, size: int, header: int) -> float:
        """The share of a file of ``size`` bytes read so far (``header``: the bytes before the first row), or 0
        (unknown) when the rows are not lines of a text file: a typed format's bytes are not the documents'."""
        return min(1.0, (header + self.read) / max(size, 1)) if self._lines else 0.0

    def parse(self, chunk: Chunk) -> Parsed:
        self._lines = chunk.unit == "line"
        texts = _strings(chunk.column(self.column), self.where, f"column {self.column!r}")
        reasons = np.zeros(len(texts), dtype=np.int8)
        reasons[[i for i, t in enumerate(texts) if t is None]] = _NO_TEXT
        authors = None
        if self.user_column is not None:
            authors = _strings(chunk.column(self.user_column), self.where, f"user column {self.user_column!r}",
                               integers=True)
            no_author = [i for i, a in enumerate(authors) if a is None or a == ""]
            reasons[[i for i in no_author if not reasons[i]]] = _NO_AUTHOR
        refused = np.flatnonzero(reasons)
        return Parsed(Documents(texts, authors), refused, reasons[refused])

    def refusals(self) -> Refusals:
        return _Refused(self.column, self.user_column, self.show)

    def release(self, values: Documents, first_row: int) -> Documents:
        accounting, user = self.rewriter.accounting, self.user_column
        if values.authors is not None and accounting is not None and user is not None:
            for author in values.authors:  # each document's author, in file order (parse refused the empty ones)
                accounting.add_record({user: author}, self.where)
        return Documents(list(self.rewriter.rewrite(self._counted(values.texts))))

    def _counted(self, texts: list[str]) -> Iterator[str]:
        for text in texts:
            self.read += len(text) + 1
            yield text

    def render(self, released: Documents) -> list[Released]:
        return [Strings(self.column, released.texts)]


class _Unwritten(Writer):
    """A writer that writes nothing (the rows it would have written are counted)."""

    def write(self, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Any) -> int:
        return chunk.rows if keep is None else int(keep.sum())


class _Nowhere(Format):
    """The output of a pass that only reads: every release is dropped."""

    name: ClassVar[str] = "nowhere"
    suffixes: ClassVar[tuple[str, ...]] = ()
    reads: ClassVar[bool] = False

    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int, max_record: int | None,
             kernels: Any = None) -> Reader:
        raise ValidationError(f"{path}: nothing is read from a discarded output")  # pragma: no cover - written only

    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        return _Unwritten()


def read_only(kind: Texts, source: Source, plan: ColumnPlan) -> int:
    """Run ``kind`` over every document of ``source`` through the one chunk loop, writing nothing; returns the rows.

    The first pass of an accounted rewrite: the same reading, refusals and rewrite as the
    release, the rewritten documents dropped.
    """
    _rows, seen = Pass(kind, source, plan, _Nowhere()).run(None, kind.every_row)  # type: ignore[arg-type]
    return seen
