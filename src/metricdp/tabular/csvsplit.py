"""Locate one column's fields in raw CSV bytes and splice new values in, all other bytes kept.

pyarrow's CSV reader returns values, never where they were in the file, so writing its
batches back re-quotes every field. To keep the bytes of the untouched columns exactly
(quoting, spacing, line endings, blank lines, a byte-order mark), this module finds
the fields with numpy on the raw bytes and rewrites only the released column's bytes.

What a record is -- and every refusal -- is :mod:`metricdp.tabular.csv`
(:func:`split_records` is re-exported from there); this module only edits bytes: the
released column's fields are replaced, dropped columns' fields (with one delimiter each)
are removed, every other byte is copied. Memory is linear in the chunk with small
constants: one byte mask and the output, never an index per byte of the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from .csv import Records, split_records

__all__ = [
    "Records",
    "edits_for",
    "edits_for_columns",
    "encode_field",
    "field_values",
    "header_bytes",
    "label_table",
    "splice",
    "splice_to",
    "split_records",
    "without_records",
]

QUOTE = 34
CR, LF = 13, 10


def encode_field(value: str, *, quoted: bool = False) -> bytes:
    """``value`` as one CSV field: quoted when it must be (or when ``quoted``)."""
    if quoted or any(c in value for c in ',"\r\n'):
        return b'"' + value.replace('"', '""').encode("utf-8") + b'"'
    return value.encode("utf-8")


def label_table(labels: Sequence[str]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """Encoded labels as one table: entries 0..n-1 as needed, n..2n-1 always quoted, 2n empty (a removal)."""
    enc = [encode_field(x) for x in labels] + [encode_field(x, quoted=True) for x in labels]
    enc.append(b"")
    offsets = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in enc], out=offsets[1:])
    return np.frombuffer(b"".join(enc), dtype=np.uint8), offsets


def _ranges_mask(n: int, fs: NDArray[np.int64], fe: NDArray[np.int64], *, inside: bool = True) -> NDArray[np.bool_]:
    """``mask[i]`` is ``inside`` when ``fs[k] <= i < fe[k]`` for some k (ranges sorted and disjoint).

    The mask is runs that alternate: the gap before range 0, range 0, the gap before
    range 1, ... and the gap after the last range to ``n``; :func:`numpy.repeat` of the
    alternating pattern by the runs' lengths writes it in one pass of ``n`` bytes (no
    running sum of steps, a few times slower). Ranges sorted and disjoint give lengths
    of at least 0 (an empty range is an empty run); a negative one is refused by ``repeat``.
    """
    bounds = np.empty(2 * len(fs) + 2, dtype=np.int64)
    bounds[0], bounds[-1] = 0, n
    bounds[1:-1:2], bounds[2:-1:2] = fs, fe
    pattern = np.zeros(len(bounds) - 1, dtype=np.bool_)
    pattern[1::2] = True
    if not inside:
        np.logical_not(pattern, out=pattern)
    return np.repeat(pattern, np.diff(bounds))


def field_values(buf: NDArray[np.uint8], fs: NDArray[np.int64], fe: NDArray[np.int64]) -> tuple[
    NDArray[np.uint8], NDArray[np.int32], NDArray[np.bool_], list[bytes]
]:
    """The fields' bytes as Arrow binary buffers (data, offsets), unquoted.

    Returns ``(data, offsets, quoted, raw_quoted)``: unquoted fields are gathered with
    one vectorised mask over their span (a byte per byte), or by index when they are a
    sliver of the span (a long field of another column lies between); quoted ones (rare in practice)
    are unquoted one by one and their values returned in ``raw_quoted`` (in row order)
    for the caller to look up.
    """
    length = fe - fs
    quoted = (length > 0) & (buf[np.minimum(fs, len(buf) - 1)] == QUOTE)
    length = np.where(quoted, 0, length)
    offsets = np.zeros(len(fs) + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise OverflowError("a chunk of over 2 GiB in one column")  # pragma: no cover - chunks are MiB
    plain_s, plain_e = fs[~quoted], fe[~quoted]
    lo = int(plain_s.min()) if len(plain_s) else 0
    hi = int(plain_e.max()) if len(plain_e) else 0
    total = int(offsets[-1])
    if 8 * total < hi - lo:  # the fields are a sliver of their span (a long field elsewhere): gather them
        data = buf[_gather_index(fs, length)]
    else:  # a byte mask over the fields' span: 1 byte per byte, no index per byte
        data = buf[lo:hi][_ranges_mask(hi - lo, plain_s - lo, plain_e - lo)]
    raw_quoted = [bytes(buf[a + 1 : b - 1]).replace(b'""', b'"') for a, b in zip(fs[quoted], fe[quoted], strict=True)]
    return data, offsets.astype(np.int32), quoted, raw_quoted


def edits_for(records: Records, column: int | None, dropped: tuple[int, ...]) -> tuple[
    NDArray[np.int64], NDArray[np.int64], NDArray[np.intp], NDArray[np.intp]
]:
    """The byte ranges to replace in ``records`` (sorted, disjoint) and which they are.

    Returns ``(starts, stops, row, kind)``: ``kind`` is 0 for the released ``column``'s
    field (replaced by a label) and 1 for a removed range (:func:`edits_for_columns`).
    """
    starts, stops, row, kind = edits_for_columns(records, [] if column is None else [column], dropped)
    return starts, stops, row, (kind < 0).astype(np.intp)


def _drop_ranges(records: Records, dropped: tuple[int, ...]) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Each dropped column's range in every record, with one delimiter: the one before it, or after it when
    only dropped columns precede it (columns ``0..r-1`` all dropped: ``[start of 0, start of r)`` goes)."""
    drop = set(dropped)
    r = next(k for k in range(records.ncols) if k not in drop)
    out = []
    for k in sorted(drop):
        if k < r:
            out.append((records.field(k)[0], records.field(k + 1)[0]))
        else:
            out.append((records.field(k - 1)[1], records.field(k)[1]))  # the ',' before it, then it
    return out


def edits_for_columns(records: Records, columns: Sequence[int], dropped: tuple[int, ...]) -> tuple[
    NDArray[np.int64], NDArray[np.int64], NDArray[np.intp], NDArray[np.intp]
]:
    """The byte ranges to replace in ``records`` (sorted, disjoint): the ``columns``' fields and the dropped columns.

    Returns ``(starts, stops, row, kind)`` sorted by start: ``kind`` is the position in
    ``columns`` of a replaced field, ``-1`` for a removed range (a dropped column with one
    delimiter, :func:`_drop_ranges`).
    """
    n = len(records.starts)
    spans = [(*records.field(c), pos) for pos, c in enumerate(columns)]
    spans += [(s, e, -1) for s, e in _drop_ranges(records, dropped)]
    if not spans:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    if not dropped and len(set(columns)) == len(columns):  # the fields in column order in every row: no sort
        spans.sort(key=lambda t: columns[t[2]])
        return (np.column_stack([a for a, _, _ in spans]).ravel(), np.column_stack([b for _, b, _ in spans]).ravel(),
                np.repeat(np.arange(n, dtype=np.intp), len(spans)),
                np.tile(np.array([p for _, _, p in spans], dtype=np.intp), n))
    starts = np.concatenate([a for a, _, _ in spans])
    order = np.argsort(starts, kind="stable")
    return (starts[order], np.concatenate([b for _, b, _ in spans])[order],
            np.tile(np.arange(n, dtype=np.intp), len(spans))[order],
            np.repeat(np.array([p for _, _, p in spans], dtype=np.intp), n)[order])


def without_records(
    buf: NDArray[np.uint8],
    records: Records,
    gone: NDArray[np.bool_],
    starts: NDArray[np.int64],
    stops: NDArray[np.int64],
    row: NDArray[np.intp],
    kind: NDArray[np.intp],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.intp], NDArray[np.intp]]:
    """The edits of :func:`edits_for` with the records ``gone`` (a mask per record) removed whole.

    A removed record goes with its line break (``\r\n`` or ``\n``; the last record of
    a file may have none), so the output has no trace of it; its own edits are dropped
    (they lie inside it), blank lines between records stay. The result is again sorted
    and disjoint, ``kind`` 1 (a removal) for the new ranges.
    """
    take = ~gone[row]
    w = np.flatnonzero(gone)
    ws, we = records.starts[w], records.stops[w].copy()
    for byte in (CR, LF):  # stops point at the record's \r (if any), then its \n
        inside = we < records.end
        hit = np.zeros(we.size, dtype=bool)
        hit[inside] = buf[we[inside]] == byte
        we += hit
    all_s = np.concatenate([starts[take], ws])
    order = np.argsort(all_s, kind="stable")
    return (all_s[order], np.concatenate([stops[take], we])[order],
            np.concatenate([row[take], w.astype(np.intp)])[order],
            np.concatenate([kind[take], np.ones(w.size, dtype=np.intp)])[order])


def splice(
    buf: NDArray[np.uint8],
    end: int,
    fs: NDArray[np.int64],
    fe: NDArray[np.int64],
    table: NDArray[np.uint8],
    table_offsets: NDArray[np.int64],
    choice: NDArray[np.intp],
) -> NDArray[np.uint8]:
    """``buf[:end]`` with each range ``[fs[i], fe[i])`` replaced by table entry ``choice[i]``.

    Ranges are sorted and disjoint (an empty table entry removes a range). Range ``i``
    starts in the output at ``fs[i]`` less the bytes the earlier ranges removed plus the
    bytes their entries put in; so one mask of the output marks the entries' bytes, the
    table entries (short: labels) are gathered into it and the bytes outside the ranges
    (one mask of the input) into the rest, both in order. This is what :func:`numpy.insert`
    does with sorted positions, without its sort of the ``n`` positions and its repeat of
    them per byte: memory is a byte per input byte plus the output, time linear.
    """
    if len(fs) == 0:
        return buf[:end]
    lens = table_offsets[choice + 1] - table_offsets[choice]
    shift = np.cumsum(lens - (fe - fs))  # output length less input length after each range
    at = fs.copy()  # each entry's start in the output
    at[1:] += shift[:-1]
    out = np.empty(end + int(shift[-1]), dtype=buf.dtype)
    entries = _ranges_mask(len(out), at, at + lens)
    out[entries] = table[_gather_index(table_offsets[choice], lens)]
    np.logical_not(entries, out=entries)
    out[entries] = buf[:end][_ranges_mask(end, fs, fe, inside=False)]
    return out


#: Bytes spliced at a time by :func:`splice_to`: its temporaries are a few times this, whatever the chunk.
SPLICE_BLOCK = 4 * 2**20


def header_bytes(header: Any, dropped: tuple[int, ...]) -> bytes:
    """The header record (and what precedes it, a byte-order mark) with the ``dropped`` columns removed:
    what every CSV release writes first."""
    hs, he, _, _ = edits_for(header.record, None, dropped)
    raw = np.frombuffer(header.raw, dtype=np.uint8)
    return bytes(splice(raw, len(raw), hs, he, np.zeros(0, dtype=np.uint8), np.zeros(2, dtype=np.int64),
                        np.zeros(len(hs), dtype=np.intp)))


def splice_to(
    fh: IO[bytes],
    buf: NDArray[np.uint8],
    end: int,
    fs: NDArray[np.int64],
    fe: NDArray[np.int64],
    table: NDArray[np.uint8],
    table_offsets: NDArray[np.int64],
    choice: NDArray[np.intp],
    *,
    block: int = SPLICE_BLOCK,
) -> None:
    """Write :func:`splice` of ``buf[:end]`` to ``fh``, block by block, never building it whole.

    Blocks end after an edited range; a stretch of more than ``block`` unedited bytes (a
    long field of a kept column) is written straight from ``buf``, with no copy. So the
    temporaries stay a few times ``block`` (plus one edited range: a long dropped field)
    however long a record is; the loop runs once per block, not once per row.
    """
    view = buf.data  # a memoryview: slices are written without a copy
    lo, k, m = 0, 0, len(fs)
    while k < m:
        if fs[k] - lo > block:
            fh.write(view[lo : fs[k]])
            lo = int(fs[k])
        k2 = max(k + 1, int(np.searchsorted(fe, lo + block, side="right")))
        hi = int(fe[k2 - 1])
        part = splice(buf[lo:hi], hi - lo, fs[k:k2] - lo, fe[k:k2] - lo, table, table_offsets, choice[k:k2])
        fh.write(part.data)
        lo, k = hi, k2
    fh.write(view[lo:end])


def _gather_index(starts: NDArray[np.int64], lens: NDArray[np.int64]) -> NDArray[np.integer[Any]]:
    """Concatenated ranges ``[starts[k], starts[k] + lens[k])``, as one index array.

    A running sum of steps (+1 inside a piece, a jump at each piece's first byte):
    one pass to fill and one to sum, in int32 when the source fits (half the memory
    traffic of ``repeat`` + ``arange`` in int64).
    """
    keep = lens > 0
    starts, lens = starts[keep], lens[keep]
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    dtype = np.int32 if int((starts + lens).max()) < 2**31 else np.int64
    step: NDArray[np.integer[Any]] = np.ones(total, dtype=dtype)
    out_off = np.cumsum(lens[:-1])
    step[0] = starts[0]
    step[out_off] = starts[1:] - (starts[:-1] + lens[:-1] - 1)
    np.cumsum(step, out=step)
    return step
