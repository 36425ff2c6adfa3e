"""The first pass of an accounted release: who each row belongs to, and (optionally) its true label.

A release with per-person accounting (:mod:`metricdp.accounting.plan`) must know every
row's person before it draws anything: the cap, the budget and the consistent groups are
decided over the whole file. This pass reads *only* the user column (and, for consistent
releases, the released column) of a CSV or Parquet file, chunk by chunk, and returns:

* ``persons`` -- the distinct ids, sorted, as text (a Parquet integer column is read as
  its decimal text: the ledger hashes ``str(id)``, so ``7`` and ``"7"`` are one person);
* ``codes`` -- one int64 per row, ``persons[codes[i]]`` is row i's person;
* ``labels`` -- with ``labels=`` a mechanism's label list, one label index per row.

Memory: one chunk of the file, the distinct ids, and 4 bytes per row while reading (8 in
the result, 16 with labels), never a string per row. Ids are merged chunk by chunk into an append-only dictionary
(:func:`pyarrow.compute.index_in` against the ids seen so far), sorted once at the end.

An empty id (or a null in Parquet) is refused with its line or row: it would make every
blank row one "person" sharing one budget, which is nobody's intent. So is an id longer
than :data:`MAX_ID_BYTES` (memory), and in Parquet one that is not UTF-8 or holds a NUL
(the ids become text, which would merge ``"ann"`` and ``"ann\\0"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._progress import Progress, report
from ..errors import ValidationError
from ..tabular.csv import DEFAULT_CHUNK_BYTES, CsvReader
from ..tabular.parquet import open_parquet
from . import csvsplit
from .labels import UnknownValues, csv_label_indices, parquet_label_indices

__all__ = ["MAX_ID_BYTES", "SCAN_BYTES", "RowPersons", "scan_persons"]

#: Bytes read at a time by the first pass of a CSV (it keeps one small column per row, not the rows):
#: each chunk costs one hash table of the ids seen so far, so fewer, larger chunks are faster.
SCAN_BYTES = 32 * 2**20

#: The longest person id accepted (UTF-8 bytes; an e-mail address is at most 254). The ids
#: are kept as one fixed-width numpy ``str`` array, 4 bytes per character of the *longest*:
#: one huge id among many persons would ask for (persons x its length x 4) bytes.
MAX_ID_BYTES = 256


@dataclass(frozen=True)
class RowPersons:
    """Per row: the person's code into ``persons`` (sorted, distinct) and, if asked, the label index."""

    persons: NDArray[Any]
    codes: NDArray[np.int64]
    labels: NDArray[np.intp] | None

    @property
    def rows(self) -> int:
        return int(self.codes.size)


class _Dictionary:
    """Distinct ids in order of first sight; chunk codes into it; sorted codes at the end."""

    def __init__(self, pa: Any, pc: Any) -> None:
        self.pa, self.pc = pa, pc
        self.seen = pa.array([], type=pa.binary())
        self.chunks: list[NDArray[np.signedinteger[Any]]] = []

    def add(self, values: Any) -> None:
        pa, pc = self.pa, self.pc
        enc = pc.dictionary_encode(values)
        local, index = enc.dictionary, np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        found = pc.index_in(local, value_set=self.seen)  # one hash of the ids seen so far per chunk
        where = np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        new = np.flatnonzero(where < 0)
        if new.size:
            where[new] = len(self.seen) + np.arange(new.size)
            self.seen = pa.concat_arrays([self.seen, local.take(pa.array(new))])
        self.chunks.append(where[index].astype(np.int32 if len(self.seen) < 2**31 else np.int64))  # 4 B per row

    def finish(self) -> tuple[NDArray[Any], NDArray[np.int64]]:
        pc = self.pc
        order = np.asarray(pc.sort_indices(self.seen).to_numpy(zero_copy_only=False), dtype=np.int64)
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        text = self.pc.cast(self.seen.take(self.pa.array(order)), self.pa.string())
        persons = np.asarray(text.to_numpy(zero_copy_only=False), dtype=str) if len(text) else np.zeros(0, str)
        codes = rank[np.concatenate(self.chunks)] if self.chunks else np.zeros(0, dtype=np.int64)
        return persons, codes


def _refuse_empty(lengths: NDArray[np.int64], where: str, column: str, places: NDArray[np.int64], unit: str) -> None:
    bad = np.flatnonzero(lengths == 0)
    if bad.size:
        first = ", ".join(str(int(x)) for x in places[bad[:5]])
        raise ValidationError(f"{where}: user column {column!r} is empty in {bad.size:,} row(s) (first at {unit} "
                              f"{first}): every row needs a person")
    long = np.flatnonzero(lengths > MAX_ID_BYTES)
    if long.size:
        raise ValidationError(f"{where}: user column {column!r} holds an id of {int(lengths[long[0]]):,} bytes at "
                              f"{unit[:-3]} {int(places[long[0]])} ({long.size:,} row(s) over {MAX_ID_BYTES} bytes): "
                              "a person id is a name, a number or a hash, not a document")


def scan_persons(
    src: Path,
    fmt: str,
    user_column: str,
    *,
    value_column: str | None = None,
    labels: Sequence[str] | None = None,
    chunk_rows: int = 1_000_000,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_record: int | None = None,
    progress: Progress | None = None,
) -> RowPersons:
    """Read ``user_column`` (and ``value_column`` as indices into ``labels``) of every row.

    A value of ``value_column`` that is not a label is refused like the release refuses
    it (count and first lines, :class:`~metricdp.streaming.files.UnknownValues`).
    """
    pa = import_optional("pyarrow", extra="parquet")
    pc = import_optional("pyarrow.compute", extra="parquet")
    where = str(src)
    book = _Dictionary(pa, pc)
    found: list[NDArray[np.intp]] = []
    unknown = UnknownValues()
    value_set = None if labels is None else pa.array([x.encode("utf-8") for x in labels], type=pa.binary())
    if fmt == "csv":
        lookup = {} if labels is None else {x.encode("utf-8"): i for i, x in enumerate(labels)}
        with src.open("rb") as inp:  # reads of at least SCAN_BYTES: few chunks, so few hashes of the ids seen
            reader = CsvReader(inp, where, chunk_rows=chunk_rows, chunk_bytes=max(chunk_bytes, SCAN_BYTES),
                               max_record=max_record)
            names = list(reader.header().names)
            ucol = names.index(user_column)
            vcol = None if value_column is None else names.index(value_column)
            for chunk in reader.chunks(ucol):
                recs, buf = chunk.records, chunk.buf
                data, offs, quoted, raw_quoted = csvsplit.field_values(buf, recs.fs, recs.fe)
                values = pa.Array.from_buffers(pa.binary(), len(offs) - 1,
                                               [None, pa.py_buffer(offs), pa.py_buffer(data)])
                if quoted.any():
                    values = pc.replace_with_mask(values, pa.array(quoted), pa.array(raw_quoted, type=pa.binary()))
                lines = chunk.first_line + recs.lines
                _refuse_empty(np.asarray(pc.binary_length(values).to_numpy(zero_copy_only=False)), where,
                              user_column, lines, "line(s)")
                book.add(values)
                done = sum(c.size for c in book.chunks)
                report(progress, done, None, f"first pass (who each row belongs to): {done:,} rows")
                if vcol is not None and value_set is not None:
                    fs, fe = recs.field(vcol)
                    idx = csv_label_indices(pa, pc, buf, fs, fe, value_set, lookup)
                    _note_unknown(unknown, idx, lines,
                                  lambda i, fs=fs, fe=fe, chunk=chunk: _text(chunk.data, fs, fe, i))
                    found.append(idx)
    else:
        pf = open_parquet(src)
        names = list(pf.schema_arrow.names)
        wanted = [user_column] + ([] if value_column is None else [value_column])
        utype = pf.schema_arrow.field(user_column).type
        if not (pa.types.is_integer(utype) or pa.types.is_string(utype) or pa.types.is_large_string(utype)
                or pa.types.is_binary(utype) or pa.types.is_dictionary(utype)):
            raise ValidationError(f"{where}: user column {user_column!r} has type {utype}: person ids must be "
                                  "integers or text")
        seen = 0
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=wanted):
            ids = batch.column(0)
            rows = seen + 1 + np.arange(len(ids), dtype=np.int64)
            if ids.null_count:
                _refuse_empty(np.where(np.asarray(ids.is_null().to_numpy(zero_copy_only=False)), 0, 1), where,
                              user_column, rows, "row(s)")
            as_bin = _as_text(pa, pc, ids, where, user_column, seen)
            _refuse_empty(np.asarray(pc.binary_length(as_bin).to_numpy(zero_copy_only=False)), where, user_column,
                          rows, "row(s)")
            book.add(as_bin)
            report(progress, seen + len(ids), None, f"first pass (who each row belongs to): {seen + len(ids):,} rows")
            if value_column is not None and value_set is not None:
                col = batch.column(1)
                idx, as_text = parquet_label_indices(pa, pc, col, labels or [])
                _note_unknown(unknown, idx, rows, lambda i, t=as_text: "null" if t[int(i)].as_py() is None
                              else str(t[int(i)].as_py()))
                found.append(idx)
            seen += len(ids)
        del names
    if unknown.rows:
        raise unknown.error(where, value_column or "", "line(s)" if fmt == "csv" else "row(s)")
    persons, codes = book.finish()
    return RowPersons(persons, codes, None if value_column is None else (
        np.concatenate(found) if found else np.zeros(0, dtype=np.intp)))


def _as_text(pa: Any, pc: Any, ids: Any, where: str, column: str, seen: int) -> Any:
    """A Parquet batch of ids as UTF-8 bytes; binary that is not UTF-8, or a NUL, is refused with its row.

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
        raise ValidationError(f"{where}: user column {column!r} is not UTF-8 text at row {seen + lo + 1:,}: "
                              "person ids must be integers or text") from None
    as_bin = pc.cast(text, pa.binary())
    nul = np.flatnonzero(np.asarray(pc.fill_null(pc.match_substring(as_bin, "\x00"), False)
                                    .to_numpy(zero_copy_only=False)))
    if nul.size:
        raise ValidationError(f"{where}: user column {column!r} holds a NUL character in {nul.size:,} row(s) (first "
                              f"at row {seen + int(nul[0]) + 1:,}): person ids must be printable text")
    return as_bin


def _text(data: bytes, fs: NDArray[np.int64], fe: NDArray[np.int64], i: int) -> str:
    raw = data[int(fs[i]) : int(fe[i])]
    if raw[:1] == b'"':
        raw = raw[1:-1].replace(b'""', b'"')
    return raw.decode("utf-8", errors="replace")


def _note_unknown(unknown: Any, idx: NDArray[np.intp], places: NDArray[np.int64], text: Any) -> None:
    bad = np.flatnonzero(idx < 0)
    if bad.size:
        unknown.add(places[bad], [text(i) for i in bad[:40_000]])
