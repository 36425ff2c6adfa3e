"""The first pass of an accounted release: who each row belongs to, and (optionally) its true label.

A release with per-person accounting (:mod:`metricdp.accounting.plan`) must know every
row's person before it draws anything: the cap, the budget and the consistent groups are
decided over the whole file. This pass reads *only* the user column (and, for consistent
releases, the released column) of the input, chunk by chunk, through its format
(:mod:`metricdp.tabular.formats`: every chunk is asked for the column by name, whatever the
format), and returns:

* ``ids`` -- the distinct ids, sorted bytewise (= by code point), as one Arrow ``binary``
  array of their UTF-8 bytes (a typed integer column is read as its decimal text: the
  ledger hashes ``str(id)``, so ``7`` and ``"7"`` are one person);
* ``codes`` -- one int32 per row (int64 past 2**31 persons), ``ids[codes[i]]`` is row i's person;
* ``labels`` -- with ``labels=`` a mechanism's label list, one label index per row.

Memory: one chunk of the file, the distinct ids (their bytes plus 4 bytes of offset each, never
a fixed-width string sized by the longest id), and 4 bytes per row, never a string per row.

**One hash pass, not one per chunk.** Each chunk is dictionary-encoded alone
(:func:`pyarrow.compute.dictionary_encode`: its distinct ids and a code into them per row);
the chunks' small dictionaries are merged into the global one by one dictionary encoding of
the chunked array ``[global, chunk dictionaries...]`` (Arrow unifies the dictionary across
chunks, in order of first sight, so the global ids keep their codes and every chunk's local
code maps to a global one by a ``take``). A merge happens only when the pending chunk
dictionaries outgrow the global one in bytes (:data:`MERGE_BYTES`, and at the end): the
global dictionary is rehashed only after at least as many bytes of new chunk dictionaries
were seen, so the pass is linear, where looking every chunk up in the ids seen so far
rehashed all of them per chunk.

An empty or missing id is refused with its line or row (the chunk's
:meth:`~metricdp.tabular.formats.Chunk.places`): it would make every blank row one "person"
sharing one budget, which is nobody's intent. So is an id longer than :data:`MAX_ID_BYTES`
(memory), one that is not UTF-8 or holds a NUL (the ids are hashed as text: ``"ann\\0"``
must not be a person the text view cannot name), and a typed column that holds neither
integers nor text.

:func:`person_table` is the per-person form an engine builds after counting rows per person
in a distributed pass: distinct ids and a count each, checked by the same rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._progress import Progress, report
from ..errors import ValidationError
from ..mechanisms._kernel_loader import LAZY
from ..tabular.formats._base import arrow

if TYPE_CHECKING:
    from ..tabular.formats import Chunk, Reader

__all__ = ["COMPILED_BYTES", "FIRST_PASS", "MAX_ID_BYTES", "MERGE_BYTES", "SCAN_BYTES", "PersonCollector",
           "PersonTable", "RowPersons", "id_book", "person_table", "scan_persons", "text_view"]

#: The progress message of the scan that reads who each row belongs to, before any release.
FIRST_PASS = "first pass (who each row belongs to)"

#: Bytes read at a time by the first pass of a text format (it keeps one small column per row, not the rows).
SCAN_BYTES = 32 * 2**20

#: The longest person id accepted (UTF-8 bytes; an e-mail address is at most 254).
MAX_ID_BYTES = 256

#: Inputs from this size on encode their ids with the compiled table (:class:`_HashBook`); below it,
#: importing numba and loading the kernels costs more than the pyarrow dictionary's time.
COMPILED_BYTES = 64 * 2**20

#: Pending chunk dictionaries are merged into the global one when their bytes (ids and offsets)
#: exceed the global one's and this floor (so that the first chunks do not merge one by one):
#: 64 MiB is 5.6M ids of 8 bytes, a fraction of what a scan chunk's record arrays take.
MERGE_BYTES = 64 * 2**20


def text_view(ids: Any) -> NDArray[Any]:
    """Arrow ids (``binary``, UTF-8) as a numpy ``str`` array (for display and the library's id-based API)."""
    if len(ids) == 0:
        return np.zeros(0, dtype=str)
    pa, pc = arrow()
    return np.asarray(pc.cast(ids, pa.string()).to_numpy(zero_copy_only=False), dtype=str)


@dataclass(frozen=True)
class RowPersons:
    """Per row: the person's code into ``ids`` (sorted, distinct) and, if asked, the label index."""

    ids: Any
    codes: NDArray[np.signedinteger[Any]]
    labels: NDArray[np.intp] | None

    @property
    def rows(self) -> int:
        return int(self.codes.size)

    @property
    def persons(self) -> NDArray[Any]:
        """The distinct ids as numpy text (built on demand: the accounting uses :attr:`ids`)."""
        return text_view(self.ids)


@dataclass(frozen=True)
class PersonTable:
    """Distinct persons (Arrow ``binary`` ids, sorted bytewise) and the rows of each (int64); ``codes``, where
    a plan needs them, every row's code into the ids (the engines' count, :mod:`metricdp.integrations._persons`)."""

    ids: Any
    counts: NDArray[np.int64]
    codes: NDArray[np.int64] | None = None

    @property
    def persons(self) -> NDArray[Any]:
        """The ids as numpy text."""
        return text_view(self.ids)


def person_table(ids: Any, counts: ArrayLike, *, where: str = "the persons") -> PersonTable:
    """THE constructor of the per-person table from an engine's count of rows per person.

    ``ids``: a pyarrow ``binary``/``string`` (or ``large_*``) array of person ids, one per
    entry, possibly repeated (partial counts from several partitions: they are summed);
    ``counts``: one int64 >= 0 per entry. Ids are checked by the first pass's rules (non-empty,
    at most :data:`MAX_ID_BYTES` bytes, UTF-8 without NUL) and returned distinct and sorted
    bytewise with their total count. The result feeds
    :meth:`Ledger.reserve(table.ids, eps, table.counts) <metricdp.accounting.ledger.Ledger.reserve>`
    (the ledger hashes the ids' bytes directly) or ``plan_release(..., persons=table.ids)``.
    """
    pa, pc = arrow()
    arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    if not isinstance(arr, pa.Array) or not (pa.types.is_binary(arr.type) or pa.types.is_string(arr.type)
                                             or pa.types.is_large_binary(arr.type)
                                             or pa.types.is_large_string(arr.type)):
        raise ValidationError(f"{where}: ids must be a pyarrow binary or string array")
    c = np.asarray(counts)
    if c.shape != (len(arr),) or (c.size and c.dtype.kind not in "iu") or (c.size and int(c.min()) < 0):
        raise ValidationError(f"{where}: counts must be one integer >= 0 per id ({len(arr)}), got {c.dtype} {c.shape}")
    if arr.null_count:
        raise ValidationError(f"{where}: {arr.null_count:,} null id(s): every row needs a person")
    as_bin = _as_text(pa, pc, arr, where, "user", lambda i: f"row {i + 1:,}")
    lengths = np.asarray(pc.binary_length(as_bin).to_numpy(zero_copy_only=False), dtype=np.int64)
    _refuse_empty(lengths, where, "user", lambda rows: np.asarray(rows, dtype=np.int64) + 1, "entry(s)")
    book = id_book(pa, pc, as_bin.nbytes)
    book.add(as_bin)
    table, codes = book.finish()
    total = np.zeros(len(table), dtype=np.int64)
    np.add.at(total, codes, c.astype(np.int64))  # exact integer sums (bincount's weights are floats)
    return PersonTable(table, total)


class _Dictionary:
    """Distinct ids of all chunks: per chunk a local dictionary, merged globally now and then (module docstring)."""

    def __init__(self, pa: Any, pc: Any) -> None:
        self.pa, self.pc = pa, pc
        self.seen = pa.array([], type=pa.binary())  # global distinct ids, in order of first sight
        self.codes: list[NDArray[np.signedinteger[Any]]] = []  # per chunk: global (merged) or local codes
        self.pending: list[tuple[int, Any]] = []  # (chunk number, local dictionary) not merged yet
        self.pending_bytes = 0
        self.rows = 0

    def add(self, values: Any) -> None:
        pa, pc = self.pa, self.pc
        if values.type != pa.binary():
            values = values.cast(pa.binary())
        enc = pc.dictionary_encode(values)
        self.codes.append(np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int32))
        self.pending.append((len(self.codes) - 1, enc.dictionary))
        self.pending_bytes += enc.dictionary.nbytes
        self.rows += len(values)
        if self.pending_bytes > max(self.seen.nbytes, MERGE_BYTES):
            self._merge()

    def _merge(self) -> None:
        """One dictionary encoding of [global, pending...]: the global codes stay, local codes become global."""
        if not self.pending:
            return
        pa, pc = self.pa, self.pc
        parts = [self.seen] + [d for _, d in self.pending]
        enc = pc.dictionary_encode(pa.chunked_array(parts, type=pa.binary()))
        self.seen = enc.chunk(enc.num_chunks - 1).dictionary if enc.num_chunks else self.seen  # one, unified
        wide = len(self.seen) >= 2**31
        # every part's global codes, flat (Arrow may drop empty chunks: cut by the parts' lengths)
        flat = np.concatenate([np.asarray(c.indices.to_numpy(zero_copy_only=False)) for c in enc.chunks]
                              or [np.zeros(0, dtype=np.int32)]).astype(np.int64 if wide else np.int32, copy=False)
        at = len(parts[0])
        for k, local in self.pending:
            self.codes[k] = flat[at : at + len(local)][self.codes[k]]
            at += len(local)
        self.pending, self.pending_bytes = [], 0

    def finish(self) -> tuple[Any, NDArray[np.signedinteger[Any]]]:
        """``(ids, codes)``: the distinct ids sorted bytewise (Arrow ``binary``) and every row's code into them."""
        self._merge()
        codes, self.codes = self.codes, []
        return _sorted(self.pa, self.pc, self.seen, codes, self.rows)


def _sorted(pa: Any, pc: Any, seen: Any, chunks: list[NDArray[np.signedinteger[Any]]],
            rows: int) -> tuple[Any, NDArray[np.signedinteger[Any]]]:
    """``(ids, codes)`` of a book: ``seen`` (distinct ids in order of first sight) sorted bytewise as Arrow
    ``binary``, and the ``rows`` codes of ``chunks`` (codes into ``seen``) mapped to ranks in that order.

    The chunks are mapped one by one into one array and emptied as they go: never two copies of every row's code.
    """
    n = len(seen)
    dtype = np.int64 if n >= 2**31 else np.int32
    order = np.asarray(pc.sort_indices(seen).to_numpy(zero_copy_only=False), dtype=np.int64)
    rank = np.empty(n, dtype=dtype)
    rank[order] = np.arange(n, dtype=dtype)
    ids = seen.take(pa.array(order)) if n else seen
    if ids.type != pa.binary():  # pragma: no cover - over 2 GiB of distinct ids (large_binary)
        ids = ids.cast(pa.binary())
    codes: NDArray[np.signedinteger[Any]] = np.empty(rows, dtype=dtype)
    at = 0
    for i, c in enumerate(chunks):
        np.take(rank, c, out=codes[at : at + c.size])
        at += c.size
        chunks[i] = c[:0]
    return ids, codes


_KERNELS: Any = LAZY  # the compiled table of :mod:`._person_kernels` (None: the pyarrow dictionary)


def person_kernels(current: Any = LAZY) -> Any:
    """The compiled id table's kernels (None without numba), or ``current`` when a test set it."""
    if current is not LAZY:
        return current
    from ._person_kernels import KERNELS

    return KERNELS


class _HashBook:
    """Distinct ids of all chunks in ONE compiled hash table (:mod:`._person_kernels`).

    Same interface and same result as :class:`_Dictionary` (``add`` a chunk's ids, ``finish``
    the sorted ids and every row's code): the ids are exactly the distinct byte strings
    seen, and a row's code is the rank of its id in bytewise order, whatever the hash
    (``mask`` narrows it for the tests: equal hashes only cost an exact comparison).
    Memory: the distinct ids' bytes, 8 bytes of offset each, a table of at most 4 slots of
    24 bytes per id (at least half of them empty), and 4 bytes per row (the codes).
    """

    def __init__(self, pa: Any, pc: Any, kernels: Any, *, mask: int = 2**64 - 1) -> None:
        self.pa, self.pc, self.k = pa, pc, kernels
        self.mask = np.uint64(mask)
        self.slots = np.full((1024, 3), -1, dtype=np.int64)
        self.store = np.zeros(4096, dtype=np.uint8)
        self.store_off = np.zeros(513, dtype=np.int64)
        self.n = 0
        self.rows = 0
        self.codes: list[NDArray[np.signedinteger[Any]]] = []

    def _room(self, rows: int, nbytes: int) -> None:
        """Grow the store so that ``rows`` new ids of ``nbytes`` in all fit."""
        need = self.n + rows
        if need + 1 > self.store_off.size:
            size = max(need + 1, 2 * self.store_off.size)
            self.store_off = np.concatenate([self.store_off, np.zeros(size - self.store_off.size, dtype=np.int64)])
        used = int(self.store_off[self.n])
        if used + nbytes > self.store.size:
            store = np.zeros(max(used + nbytes, 2 * self.store.size), dtype=np.uint8)
            store[:used] = self.store[:used]
            self.store = store

    def _grow(self) -> None:
        """Twice the table's slots (the kernel stopped at half full)."""
        old, self.slots = self.slots, np.full((2 * len(self.slots), 3), -1, dtype=np.int64)
        self.k["rehash"](old, self.slots)

    def add(self, values: Any) -> None:
        pa = self.pa
        if values.type != pa.binary():
            values = values.cast(pa.binary())
        m = len(values)
        bufs = values.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int32)[values.offset : values.offset + m + 1]
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and m else np.zeros(0, dtype=np.uint8)
        self.add_spans(data, offs[:-1], offs[1:])

    def add_spans(self, data: NDArray[np.uint8], starts: NDArray[Any], ends: NDArray[Any]) -> None:
        """One chunk's ids, ``data[starts[r]:ends[r]]`` (:meth:`Chunk.spans
        <metricdp.tabular.formats.Chunk.spans>`: the bytes where they lie)."""
        m = int(starts.size)
        self._room(m, int((ends - starts).sum()) if m else 0)
        codes = np.empty(m, dtype=np.int64)
        r = 0
        while True:
            n, r = self.k["encode"](data, starts, ends, r, self.slots, self.store, self.store_off, self.n,
                                   len(self.slots) // 2, self.mask, codes)
            self.n = int(n)
            if r >= m:
                break
            self._grow()
        self.codes.append(codes.astype(np.int32) if self.n < 2**31 else codes)
        self.rows += m

    def finish(self) -> tuple[Any, NDArray[np.signedinteger[Any]]]:
        """``(ids, codes)`` exactly as :meth:`_Dictionary.finish` returns them."""
        pa = self.pa
        n = self.n
        end = int(self.store_off[n])
        kind = pa.binary() if end < 2**31 else pa.large_binary()
        offs = self.store_off[: n + 1].astype(np.int32 if end < 2**31 else np.int64)
        seen = pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offs), pa.py_buffer(self.store[:end].copy())])
        self.store, self.slots = self.store[:0], self.slots[:0]  # the table's memory goes before the codes'
        codes, self.codes = self.codes, []
        return _sorted(pa, self.pc, seen, codes, self.rows)


def id_book(pa: Any, pc: Any, nbytes: int = COMPILED_BYTES) -> Any:
    """The table of distinct ids of a pass over ``nbytes`` of input: compiled (:class:`_HashBook`) where numba
    is and the input has at least :data:`COMPILED_BYTES`, else :class:`_Dictionary`."""
    kernels = person_kernels(_KERNELS) if nbytes >= COMPILED_BYTES or _KERNELS not in (LAZY, None) else None
    return _Dictionary(pa, pc) if kernels is None else _HashBook(pa, pc, kernels)


def _refuse_empty(lengths: NDArray[np.int64], where: str, column: str,
                  places: Callable[[NDArray[np.intp]], NDArray[np.int64]], unit: str) -> None:
    """Refuse empty ids and ids over :data:`MAX_ID_BYTES` (``lengths`` in bytes, one per row).

    ``places`` gives the line, row or entry number of rows (positions in ``lengths``), asked of
    the culprits only; ``unit`` names them (``"line(s)"``, ``"row(s)"``, ``"entry(s)"``).
    """
    bad = np.flatnonzero(lengths == 0)
    if bad.size:
        first = ", ".join(str(int(x)) for x in places(bad[:5]))
        raise ValidationError(f"{where}: user column {column!r} is empty in {bad.size:,} row(s) (first at {unit} "
                              f"{first}): every row needs a person")
    long = np.flatnonzero(lengths > MAX_ID_BYTES)
    if long.size:
        raise ValidationError(f"{where}: user column {column!r} holds an id of {int(lengths[long[0]]):,} bytes at "
                              f"{unit[:-3]} {int(places(long[:1])[0])} ({long.size:,} row(s) over {MAX_ID_BYTES} "
                              "bytes): a person id is a name, a number or a hash, not a document")


def _check_type(pa: Any, utype: Any, where: str, column: str) -> None:
    """A typed user column must be integers or text (binary and dictionaries: their values are checked as text)."""
    if not (pa.types.is_integer(utype) or pa.types.is_string(utype) or pa.types.is_large_string(utype)
            or pa.types.is_binary(utype) or pa.types.is_dictionary(utype)):
        raise ValidationError(f"{where}: user column {column!r} has type {utype}: person ids must be "
                              "integers or text")


def chunk_ids(chunk: Chunk, column: str, where: str) -> Any:
    """A chunk's ids (:meth:`Chunk.column <metricdp.tabular.formats.Chunk.column>`) as UTF-8 ``binary``, checked:
    the column's type, then missing, not UTF-8, NUL, empty and over-long ids, each named by its line or row."""
    pa, pc = arrow()
    ids = chunk.column(column)
    _check_type(pa, ids.type, where, column)
    unit = f"{chunk.unit}(s)"
    if ids.null_count:
        _refuse_empty(np.where(np.asarray(ids.is_null().to_numpy(zero_copy_only=False)), 0, 1), where, column,
                      chunk.places, unit)
    as_bin = _as_text(pa, pc, ids, where, column, lambda r: f"{chunk.unit} {int(chunk.places(np.array([r]))[0]):,}")
    _refuse_empty(np.asarray(pc.binary_length(as_bin).to_numpy(zero_copy_only=False)), where, column, chunk.places,
                  unit)
    return as_bin


class PersonCollector:
    """The persons of a pass over an input's chunks (:class:`metricdp.tabular.formats.Chunk`), the first pass
    or a release pass that reads every row anyway (the one-pass protocol of :mod:`.accounted`): each chunk's
    user column is encoded as it goes by (:func:`chunk_ids`'s checks and messages); :meth:`finish` returns
    its :class:`RowPersons`.

    One path for every format: the chunk is asked for the user column. Where the chunk keeps the
    column's values as bytes in place (:meth:`Chunk.spans <metricdp.tabular.formats.Chunk.spans>`: a
    text format's fields, checked as UTF-8 without NUL by its reader) and the compiled table runs, the
    ids are hashed where they lie, with no copy; the result is the same.
    """

    def __init__(self, where: str, user_column: str, nbytes: int = COMPILED_BYTES) -> None:
        self.pa, self.pc = arrow()
        self.where, self.column = where, user_column
        self.book = id_book(self.pa, self.pc, nbytes)

    def start_reader(self, reader: Reader) -> None:
        """The input's declared type of the user column, checked before any row is read (a typed format's
        ``schema``; a chunk's column is checked again as it comes)."""
        schema = getattr(reader, "schema", None)
        if schema is not None:
            _check_type(self.pa, schema.field(self.column).type, self.where, self.column)

    def add(self, chunk: Chunk) -> None:
        """Encode the ids of one chunk of the input."""
        spans = chunk.spans(self.column) if isinstance(self.book, _HashBook) else None
        if spans is not None:  # the values' bytes are the ids: hashed where they lie (no gather)
            buf, starts, ends = spans
            _refuse_empty(ends - starts, self.where, self.column, chunk.places, f"{chunk.unit}(s)")
            self.book.add_spans(buf, starts, ends)
            return
        self.book.add(chunk_ids(chunk, self.column, self.where))

    @property
    def rows(self) -> int:
        return int(self.book.rows)

    def finish(self) -> RowPersons:
        ids, codes = self.book.finish()
        return RowPersons(ids, codes, None)


def scan_persons(
    src: Path,
    fmt: str,
    user_column: str,
    *,
    chunk_rows: int = 1_000_000,
    chunk_bytes: int = SCAN_BYTES,
    max_record: int | None = None,
    progress: Progress | None = None,
) -> RowPersons:
    """Read ``user_column`` of every row of ``src`` (format ``fmt``): a code per row into the sorted ids.

    The release's own reader (:mod:`metricdp.tabular.formats`) and :class:`PersonCollector`'s
    checks and messages; reads of at least :data:`SCAN_BYTES`, so few chunks and few hashes.
    """
    from ..tabular.formats import RELEASE_FORMATS

    where = str(src)
    collector = PersonCollector(where, user_column, src.stat().st_size)
    with RELEASE_FORMATS[fmt].open(src, chunk_rows=chunk_rows, chunk_bytes=max(chunk_bytes, SCAN_BYTES),
                                   max_record=max_record) as reader:
        if user_column not in reader.names:
            shown = ", ".join(repr(h) for h in reader.names[:20])
            raise ValidationError(f"{where}: no user column {user_column!r} (columns: {shown})")
        collector.start_reader(reader)
        for chunk in reader.chunks():
            if chunk.rows:
                collector.add(chunk)
                report(progress, collector.rows, None, FIRST_PASS)
    return collector.finish()


def _as_text(pa: Any, pc: Any, ids: Any, where: str, column: str, at: Callable[[int], str]) -> Any:
    """Ids as UTF-8 bytes; binary that is not UTF-8, or a NUL, is refused with its place (``at(i)`` names
    position ``i``: ``"row 12"``, ``"line 7"``).

    The ids become text (numpy ``str``, which drops trailing NULs: ``"ann\\0"`` would be ``"ann"``,
    and the ledger hashes text), so both would merge or split persons behind the user's back.
    """
    try:
        text = pc.cast(ids, pa.string())
    except pa.ArrowInvalid:
        lo, hi = 0, len(ids)  # the first row that does not cast: bisection, log2(rows) casts
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                pc.cast(ids.slice(lo, mid - lo), pa.string())
                lo = mid
            except pa.ArrowInvalid:
                hi = mid
        raise ValidationError(f"{where}: user column {column!r} is not UTF-8 text at {at(lo)}: "
                              "person ids must be integers or text") from None
    as_bin = pc.cast(text, pa.binary())
    nul = np.flatnonzero(np.asarray(pc.fill_null(pc.match_substring(as_bin, "\x00"), False)
                                    .to_numpy(zero_copy_only=False)))
    if nul.size:
        raise ValidationError(f"{where}: user column {column!r} holds a NUL character in {nul.size:,} row(s) (first "
                              f"at {at(int(nul[0]))}): person ids must be printable text")
    return as_bin
