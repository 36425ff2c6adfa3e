"""What a file format gives the release pipeline: a reader of chunks and a writer of released chunks.

A format is one module of this package holding one :class:`Format` instance named
``FORMAT``; :mod:`metricdp.tabular.formats` finds it by its suffixes, so adding a format
changes no other file. The release pipeline (:mod:`metricdp.pipeline`) never asks which
format it holds: it reads :class:`Chunk` objects, asks them for a column's values, and
hands the writer :class:`Released` columns, each able to give itself as typed Arrow
arrays (typed formats: Parquet, Feather, JSON) or as a table of CSV field texts (a text
format that keeps every byte it does not release).

Why the released values come as objects rather than arrays: a release of labels is
a few output texts indexed per row (the CSV writer splices the table's entries; the
Parquet writer casts the outputs to the column's type once), a release of points is
floats written with a fixed number of decimals in text and as float64 in a typed format,
a text release is one new string per row. Each :class:`Released` knows both of its
forms; each writer takes the one it writes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, Self, cast

import numpy as np
from numpy.typing import NDArray

from ..._optional import import_optional
from ...errors import ValidationError
from ..columns import ColumnPlan
from ..csv import check_names

__all__ = ["Appender", "BatchChunk", "BatchWriter", "Chunk", "Coded", "Column", "Format", "Full", "Layout", "Parts",
           "Points", "Reader", "Released", "Span", "Strings", "WriteSpec", "Writer", "arrow", "changed",
           "checked_names", "place"]


def arrow() -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.compute)``, the optional dependency every format's values go through."""
    return import_optional("pyarrow", extra="parquet"), import_optional("pyarrow.compute", extra="parquet")


class Chunk(ABC):
    """Complete rows of a file, in file order: ``rows`` of them, the first being data row ``first + 1``.

    ``unit`` names what :meth:`places` counts for errors: ``"line"`` (a text format: the
    file's line of each row) or ``"row"`` (the data row's number).
    """

    rows: int
    first: int
    unit: ClassVar[str] = "row"

    def places(self, rows: NDArray[np.intp]) -> NDArray[np.int64]:
        """The line or data-row number (1-based) of each of the chunk's ``rows`` (positions in the chunk)."""
        return self.first + np.asarray(rows, dtype=np.int64) + 1

    @abstractmethod
    def column(self, name: str) -> Any:
        """The column's values as an Arrow array: its stored type, or strings in a text format (nulls: missing)."""

    def quoted(self, name: str) -> NDArray[np.bool_] | None:
        """Which fields of a text format were quoted in the file (kept quoted when released); None elsewhere."""
        return None

    def decimals(self, name: str) -> tuple[NDArray[np.float64], NDArray[np.bool_]] | None:
        """A fast reading of plain decimals, ``(values, ok)``; None when the format has none (the caller parses)."""
        return None

    def spans(self, name: str) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]] | None:
        """The column's values as bytes where they lie, ``(buffer, starts, ends)``: value ``r``'s text is exactly
        ``buffer[starts[r]:ends[r]]``, UTF-8 without NUL (the reader refused anything else) and never missing.

        A capability of a format that keeps the input's bytes: a reader of every row's value
        (the persons of an accounted release) hashes them in place, with no copy. None when the
        format keeps no such bytes or a value's bytes are not its text (a quoted field): the
        caller reads :meth:`column`, which gives the same values.
        """
        return None

    def values(self, name: str, rows: NDArray[np.intp]) -> list[Any]:
        """The values of ``rows`` as Python objects (a text format: their texts), for comparing a few rows."""
        pa, _ = arrow()
        return list(self.column(name).take(pa.array(np.asarray(rows, dtype=np.int64))).to_pylist())

    def texts(self, name: str, rows: NDArray[np.intp]) -> list[str]:
        """The values of ``rows`` as a person reads them in the file, for an error (``null`` for a missing one)."""
        pa, _ = arrow()
        values = self.column(name).take(pa.array(np.asarray(rows, dtype=np.int64))).to_pylist()
        return ["null" if v is None else str(v) for v in values]


class Reader(ABC):
    """An open input: its column ``names`` and its chunks, read once in order.

    ``line``: the file line of the header record that names the columns (a text format with
    a header), named by an error about a name; None where no line holds the names.
    """

    names: tuple[str, ...]
    line: int | None = None

    @abstractmethod
    def chunks(self) -> Iterator[Chunk]:
        """The file's rows, chunk by chunk (memory: about one chunk)."""

    def project(self, columns: Sequence[str]) -> None:  # noqa: B027 - a record format reads whole records
        """Read only ``columns`` from now on (a hint: a columnar format reads no other; the chunks of a
        record format hold whole records anyway)."""

    def close(self) -> None:  # noqa: B027 - most readers hold nothing to close
        """Release what the reader holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Released(ABC):
    """The released values of one chunk for one or more columns (``columns``), kept rows only."""

    columns: tuple[str, ...]

    @property
    @abstractmethod
    def rows(self) -> int:
        """How many rows were released."""

    @abstractmethod
    def arrays(self, types: Sequence[Any], where: str) -> list[Any]:
        """One Arrow array per column, of the input's ``types`` where the values allow it (typed formats)."""

    @abstractmethod
    def table(self, quoted: Sequence[NDArray[np.bool_] | None]) -> tuple[
        NDArray[np.uint8], NDArray[np.int64], list[NDArray[np.intp]]
    ]:
        """CSV field texts: ``(data, offsets, choice)``, entry ``choice[p][r]`` holding row ``r`` of column ``p``.

        ``quoted[p]``: which of the kept rows' fields were quoted in the input (they stay quoted).
        """

    def texts(self) -> list[list[str]]:
        """The values as text, one list per column (for formats that write text from values)."""
        data, offsets, choice = self.table([None] * len(self.columns))
        raw = bytes(data)
        out = []
        for ch in choice:
            col = []
            for c in ch:
                text = raw[offsets[c]:offsets[c + 1]]
                col.append((text[1:-1].replace(b'""', b'"') if text[:1] == b'"' else text).decode("utf-8"))
            out.append(col)
        return out


def _encode(value: str, quoted: bool) -> bytes:
    if quoted or any(c in value for c in ',"\r\n'):
        return b'"' + value.replace('"', '""').encode("utf-8") + b'"'
    return value.encode("utf-8")


def _packed(parts: Sequence[bytes]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets


@dataclass(frozen=True)
class Coded(Released):
    """A column released as indices ``codes`` into the texts ``outputs`` (a mechanism's output labels).

    ``what`` says what the outputs are, for an error when they cannot be written as the
    column's type (``"the mechanism's labels"``).
    """

    column: str
    codes: NDArray[np.intp]
    outputs: tuple[str, ...]
    what: str = "the released values"
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.column,)

    @property
    def rows(self) -> int:
        return len(self.codes)

    def arrays(self, types: Sequence[Any], where: str) -> list[Any]:
        pa, _ = arrow()
        key = str(types[0])
        if key not in self._cache:
            try:
                self._cache[key] = pa.array(list(self.outputs), type=pa.string()).cast(types[0])
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as ex:
                raise ValidationError(f"{where}: column {self.column!r} has type {types[0]}; {self.what} cannot "
                                      f"be written as it ({ex})") from None
        return [self._cache[key].take(pa.array(self.codes))]

    def table(self, quoted: Sequence[NDArray[np.bool_] | None]) -> tuple[
        NDArray[np.uint8], NDArray[np.int64], list[NDArray[np.intp]]
    ]:
        if "table" not in self._cache:  # entries 0..n-1 as needed, n..2n-1 always quoted
            from ..csvsplit import label_table

            self._cache["table"] = label_table(self.outputs)
        data, offsets = self._cache["table"]
        q = quoted[0]
        return data, offsets, [self.codes if q is None else self.codes + len(self.outputs) * q]


#: ``full(rounded (k, 2)) -> mask (k,)``: rows written at full precision instead of rounded.
Full = Callable[[NDArray[np.float64]], NDArray[np.bool_]]


@dataclass(frozen=True)
class Points(Released):
    """Released (lat, lon) rows: float64 in a typed format, ``digits`` decimals in text (``full``: rows in full)."""

    lat: str
    lon: str
    values: NDArray[np.float64]
    digits: int
    full: Full | None = None

    @property
    def columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.lat, self.lon)

    @property
    def rows(self) -> int:
        return len(self.values)

    def arrays(self, types: Sequence[Any], where: str) -> list[Any]:
        pa, _ = arrow()
        return [pa.array(self.values[:, 0], pa.float64()), pa.array(self.values[:, 1], pa.float64())]

    def table(self, quoted: Sequence[NDArray[np.bool_] | None]) -> tuple[
        NDArray[np.uint8], NDArray[np.int64], list[NDArray[np.intp]]
    ]:
        from ..decimal_text import point_texts

        data, offsets = point_texts(self.values, self.digits, self.full)
        n = len(self.values)
        rows = np.arange(n, dtype=np.intp)
        return data, offsets, [rows, rows + n]


@dataclass(frozen=True)
class Strings(Released):
    """A column released as new texts, one per kept row (a rewritten document)."""

    column: str
    values: Sequence[str]

    @property
    def columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.column,)

    @property
    def rows(self) -> int:
        return len(self.values)

    def arrays(self, types: Sequence[Any], where: str) -> list[Any]:
        pa, _ = arrow()
        return [pa.array(list(self.values), type=pa.string())]

    def table(self, quoted: Sequence[NDArray[np.bool_] | None]) -> tuple[
        NDArray[np.uint8], NDArray[np.int64], list[NDArray[np.intp]]
    ]:
        q = quoted[0]
        data, offsets = _packed([_encode(v, bool(q is not None and q[i])) for i, v in enumerate(self.values)])
        return data, offsets, [np.arange(len(self.values), dtype=np.intp)]


class Writer(ABC):
    """An open output of released chunks; :meth:`close` finishes the file (a footer, a closing bracket)."""

    @abstractmethod
    def write(self, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released]) -> int:
        """Write ``chunk``'s rows where ``keep`` (all when None) with the ``released`` columns; returns rows written.

        A row not kept leaves no trace in the output. Columns the plan drops are left out.
        """

    def close(self) -> None:  # noqa: B027 - most writers finish with nothing
        """Finish the file."""


class Appender(ABC):
    """An open output of the input's rows with one text column more, each row's value one of a few texts
    (a cell's label); :meth:`close` finishes the file. Nothing in it is released: it holds the rows' values."""

    @abstractmethod
    def write(self, chunk: Chunk, choice: NDArray[np.intp]) -> None:
        """Write ``chunk``'s rows, row ``r`` with text ``choice[r]`` appended; a row whose choice is ``-1`` is
        left out (a record goes whole, its line break included)."""

    def close(self) -> None:  # noqa: B027 - most outputs finish with nothing
        """Finish the file."""


@dataclass(frozen=True)
class WriteSpec:
    """What a writer needs besides the file: the input's reader, the column plan, the released columns.

    ``geometry``: the (lat, lon) columns of a release of points (a geometry format needs them).
    """

    source: Reader
    plan: ColumnPlan
    released: tuple[str, ...]
    where: str
    geometry: tuple[str, str] | None = None


#: A column of a small table written whole (:meth:`Format.write_table`): texts, or float64 numbers (a text
#: format writes each as Python's shortest repr, read back exactly; a typed format as float64).
Column = Sequence[str] | NDArray[np.float64]


class Format(ABC):
    """A file format: its name, its suffixes, a reader and a writer.

    ``reads``: whether it is an input format (GeoJSON is written only); ``read_ahead``:
    whether splitting its chunks costs enough that a release reads the next chunk in a
    worker thread while it releases one (a text format parsed by compiled kernels that
    release the GIL; a typed format's reader is Arrow's, threaded already, and a worker
    thread would only add its own malloc arena to the peak memory).
    """

    name: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]]
    reads: ClassVar[bool] = True
    read_ahead: ClassVar[bool] = False
    #: What an error counts to name a row (:attr:`Chunk.unit`): ``"line"`` (a text format) or ``"row"``.
    unit: ClassVar[str] = "row"
    #: Whether its values carry their types (a text format's are strings, parsed by whoever reads the column).
    typed: ClassVar[bool] = True
    #: Whether a header names its columns (plain text's one column is named by the format).
    named: ClassVar[bool] = True

    @abstractmethod
    def open(self, path: Path, *, chunk_rows: int, chunk_bytes: int, max_record: int | None,
             kernels: Any = None) -> Reader:
        """The file's reader; a malformed header or an unreadable file is one :class:`ValidationError`."""

    @abstractmethod
    def writer(self, fh: IO[bytes], spec: WriteSpec, *, kernels: Any = None) -> Writer:
        """A writer of ``spec``'s release to ``fh`` (a new file, published by the caller when complete)."""

    def names(self, path: Path, *, max_record: int | None = None) -> tuple[str, ...]:
        """The column names of ``path``'s header."""
        with self.open(path, chunk_rows=1, chunk_bytes=65536, max_record=max_record) as reader:
            return reader.names

    def header(self, path: Path, *, released: Sequence[str] = (), max_record: int | None = None) -> tuple[str, ...]:
        """The column names of ``path``'s header, checked (:func:`checked_names`); only the header is read.

        Raises :class:`ValidationError` naming the file: missing, unreadable, an empty or
        duplicated name (a duplicated ``released`` column said so; the header's line where a
        line holds it).
        """
        if not path.is_file():
            raise ValidationError(f"{path}: no such file")
        with self.open(path, chunk_rows=1, chunk_bytes=65536, max_record=max_record) as reader:
            return checked_names(reader, str(path), released)

    def parts(self) -> Parts | None:
        """The engines' side of the format (:class:`Parts`); None: the engines do not read it."""
        return None

    def write_table(self, fh: IO[bytes], names: Sequence[str], columns: Sequence[Column]) -> None:
        """A small table written whole to ``fh`` (a POINTS file, a trace table): each column texts or float64
        numbers (:data:`Column`); a format that writes no such table refuses, naming itself."""
        raise ValidationError(f"a .{self.name} file is not written from a table of texts and numbers")

    def appender(self, fh: IO[bytes], source: Reader, column: str, texts: Sequence[str]) -> Appender:
        """A writer to ``fh`` of ``source``'s rows with the column ``column`` appended, its values ``texts``
        (:class:`Appender`); a format that cannot append a column refuses, naming itself."""
        raise ValidationError(f"a .{self.name} file cannot be written with a column appended")

    def withhold(self, fh: IO[bytes], keep: NDArray[np.bool_], where: str, cap: int) -> int | None:
        """Remove the rows not ``keep`` from the release just written to ``fh``, in place (rows kept);
        None when the format cannot (the caller writes the release again without them)."""
        return None


def checked_names(reader: Reader, where: str, released: Sequence[str] = ()) -> tuple[str, ...]:
    """``reader``'s column names, every one non-empty and unique (:func:`metricdp.tabular.csv.check_names`, with
    the header's line where the format has one)."""
    check_names(reader.names, where, released, reader.line)
    return reader.names


def place(unit: str, number: int) -> str:
    """How an error names a row: ``"line 12"`` (a text format's file line) or ``"row 12"`` (a data row)."""
    return f"{unit} {number}"


class BatchChunk(Chunk):
    """Rows of a typed format as one Arrow record batch (Parquet, Feather, JSON lines)."""

    def __init__(self, batch: Any, first: int) -> None:
        self.batch, self.first, self.rows = batch, first, batch.num_rows

    def column(self, name: str) -> Any:
        return self.batch.column(name)


class BatchWriter(Writer):
    """A typed output: the written columns of each batch with the released ones replaced, in header order.

    ``open_file(schema)`` starts the file at the first batch (the released columns' types are
    those of the first release: a point is float64 whatever the input's type); ``append(batch)``
    writes one. :meth:`close` starts the file with the input's schema when no batch came.
    """

    def __init__(self, spec: WriteSpec, schema: Any, open_file: Callable[[Any], Any]) -> None:
        self._spec, self._schema, self._open = spec, schema, open_file
        self._written = list(spec.plan.written)
        self._file: Any = None

    def write(self, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released]) -> int:
        pa, _ = arrow()
        batch = cast(BatchChunk, chunk).batch
        if keep is not None:  # a row not kept is left out
            batch = batch.filter(pa.array(keep))
        new: dict[str, Any] = {}
        for item in released:
            types = [self._schema.field(c).type for c in item.columns]
            new.update(zip(item.columns, item.arrays(types, self._spec.where), strict=True))
        columns = [new[c] if c in new else batch.column(c) for c in self._written]
        fields = [pa.field(c, col.type) if c in new else self._schema.field(c)
                  for c, col in zip(self._written, columns, strict=True)]
        out = pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=self._schema.metadata))
        if self._file is None:
            self._file = self._open(out.schema)
        self._file.write_batch(out)
        return out.num_rows

    def close(self) -> None:
        pa, _ = arrow()
        if self._file is None:
            fields = [self._schema.field(c) for c in self._written]
            self._file = self._open(pa.schema(fields, metadata=self._schema.metadata))
        self._file.close()


# ------------------------------------------------------------------ the engines' side of a format
def changed(path: object, what: str = "") -> ValidationError:
    """The one error of a file that differs from what the driver planned (an engine worker's check)."""
    return ValidationError(f"{path}: the file changed while it was being released{f' ({what})' if what else ''}; "
                           "nothing written")


@dataclass(frozen=True)
class Layout:
    """What an engine worker needs besides its piece to read and write it: the file, its column plan
    (:attr:`ColumnPlan.header` the file's names), and what the format adds (a subclass). Small, picklable."""

    where: str
    columns: ColumnPlan


#: One piece of a cut: ``(start, stop, rows, first)`` in the format's units (:class:`Parts`).
Span = tuple[int, int, int, int]


class Parts(ABC):
    """The engines' side of a format: cut a file into pieces, read a piece, write its part, join the parts.

    The engines (:mod:`metricdp.integrations`) release a file piece by piece on a cluster and
    never ask which format it is:

    1. the driver calls :meth:`cut` once: one pass over the file in the format's own chunks,
       each shown to ``check`` (the release's refusals; ``check.columns`` are the columns it
       reads, ``check.check_type(schema, where)`` sees a typed file's schema before its first row), the file
       cut into pieces of whole rows of about ``piece_bytes`` each. It returns the pieces as
       :data:`Span` s -- ``start``/``stop`` in the format's units (bytes of whole records, or
       row groups / record batches), ``rows`` the rows counted, ``first`` the place of the
       piece's first row (a file line, or a 1-based row number) -- and the :class:`Layout`;
    2. a worker calls :meth:`read` (``piece`` has the span's fields and ``row``, the 0-based
       number of its first row; a piece that is not what the driver counted is refused with
       :func:`changed`: the file changed since the plan) and :meth:`write` (the part's bytes);
    3. the driver calls :meth:`join`: the parts, in order, into the output.

    Two families cover the formats as shipped (:mod:`._parts`): ``RecordParts`` (records on
    lines, pieces are byte ranges, parts are concatenated) and ``BatchParts`` (typed record
    batches).
    """

    @abstractmethod
    def cut(self, path: Path, columns: ColumnPlan, *, piece_bytes: int, chunk_bytes: int, max_record: int | None,
            check: Any = None) -> tuple[list[Span], Layout]:
        """The driver's one pass: every chunk shown to ``check`` (None: a cut without a check), the pieces."""

    @abstractmethod
    def read(self, piece: Any, layout: Layout, kernels: Any = None) -> Chunk:
        """The piece's rows as one chunk (its first row data row ``piece.row + 1``)."""

    @abstractmethod
    def write(self, layout: Layout, chunk: Chunk, keep: NDArray[np.bool_] | None, released: Sequence[Released],
              kernels: Any = None) -> bytes:
        """The part of ``chunk``: its rows where ``keep`` (all when None) with the ``released`` columns."""

    @abstractmethod
    def join(self, layout: Layout, parts: Sequence[Path], fh: IO[bytes], rows: int) -> None:
        """The output into ``fh``: the ``parts`` in order, holding ``rows`` rows, and what goes around them."""
