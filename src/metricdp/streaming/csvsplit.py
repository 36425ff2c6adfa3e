"""Locate one column's fields in raw CSV bytes and splice new values in, all other bytes kept.

pyarrow's CSV reader returns values, never where they were in the file, so writing its
batches back re-quotes every field. To keep the bytes of the untouched columns exactly
(quoting, spacing, line endings, blank lines, a byte-order mark), this module finds
the fields with numpy on the raw bytes and rewrites only the released column's bytes.

The grammar is RFC 4180 with ``,`` as delimiter and ``"`` as quote character:

* a field is either unquoted (no ``"`` anywhere in it) or quoted (starts and ends with
  ``"``, an inner ``"`` written ``""``; delimiters and line breaks inside are data);
* a record ends at ``\\n`` outside quotes (``\\r\\n`` accepted; the ``\\r`` is kept in the
  output as it was); empty lines are skipped, as pyarrow and the csv module skip them.

Quote state is a parity: a byte is inside quotes exactly when an odd number of ``"``
precede it in the record stream (each ``""`` escape toggles twice). Chunks are always
cut after a record, where the parity is even, so no state crosses a chunk. Every
``"`` is checked to open a field, close one, or be half of a ``""`` (vectorised), so a
file that is not RFC 4180 (``12" pipe``) is refused with its line number instead of
being split differently from other readers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError

__all__ = ["Records", "encode_field", "field_values", "splice", "split_records"]

QUOTE, COMMA, LF, CR = 34, 44, 10, 13


@dataclass(frozen=True)
class Records:
    """The records found at the start of a buffer (see :func:`split_records`).

    ``end`` is the buffer offset just past the last complete record (its ``\\n``
    included); ``starts``/``stops`` delimit each non-empty record's bytes without the
    line break; ``lines`` are their 0-based line offsets within the buffer;
    ``fs``/``fe`` delimit the wanted column's field (quotes included).
    """

    end: int
    starts: NDArray[np.int64]
    stops: NDArray[np.int64]
    lines: NDArray[np.int64]
    fs: NDArray[np.int64]
    fe: NDArray[np.int64]


def split_records(
    buf: NDArray[np.uint8],
    *,
    eof: bool,
    ncols: int | None,
    column: int,
    max_records: int,
    where: str,
    first_line: int = 1,
) -> Records:
    """Split the complete records at the start of ``buf`` (at most ``max_records`` lines).

    ``buf`` starts at a record boundary. Without ``eof``, a trailing partial record is
    left for the next call (``end`` stops before it). ``ncols=None`` splits records only
    (``fs``/``fe`` are then the records). Raises :class:`ValidationError`
    naming ``where`` and the line for a record with the wrong number of fields, a stray
    quote, or a quoted field still open at the end of the file (``first_line`` is the
    file's line number of ``buf[0]``).
    """
    q = np.flatnonzero(buf == QUOTE)
    nl = np.flatnonzero(buf == LF)
    struct_nl = nl[(np.searchsorted(q, nl) & 1) == 0]
    if len(struct_nl) > max_records:
        struct_nl = struct_nl[:max_records]
    ends = struct_nl
    end = int(struct_nl[-1]) + 1 if len(struct_nl) else 0
    if eof and len(struct_nl) < max_records and end < len(buf):
        if len(q) & 1:
            _check_quotes(buf, q, nl, len(buf), where, first_line)  # a stray quote, else an open field
            line = int(np.searchsorted(nl, q[-1]))
            raise ValidationError(
                f"{where}: line {first_line + line}: a quoted field is not closed before the end of the file"
            )
        ends = np.append(struct_nl, len(buf))
        end = len(buf)
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    stops = ends.astype(np.int64)
    has_cr = (stops > starts) & (buf[np.maximum(stops - 1, 0)] == CR)
    stops = stops - has_cr
    keep = stops > starts
    starts, stops = starts[keep], stops[keep]
    lines = np.searchsorted(nl, starts).astype(np.int64)
    region_q = q[q < end]
    _check_quotes(buf, region_q, nl, end, where, first_line)
    if ncols is None:  # records only (the header)
        return Records(end, starts, stops, lines, starts, stops)
    d = np.flatnonzero(buf[:end] == COMMA)
    d = d[(np.searchsorted(region_q, d) & 1) == 0]
    first = np.searchsorted(d, starts)
    count = np.searchsorted(d, stops) - first
    bad = np.flatnonzero(count != ncols - 1)
    if len(bad):
        i = bad[0]
        raise ValidationError(
            f"{where}: line {first_line + lines[i]} has {count[i] + 1} fields, expected {ncols}"
        )
    fs = starts if column == 0 else d[first + column - 1] + 1
    fe = stops if column == ncols - 1 else d[first + column]
    return Records(end, starts, stops, lines, fs.astype(np.int64), fe.astype(np.int64))


def _check_quotes(
    buf: NDArray[np.uint8], q: NDArray[np.int64], nl: NDArray[np.int64], end: int, where: str, first_line: int
) -> None:
    """Every quote opens a field, closes one, or is half of a ``""`` escape (RFC 4180)."""
    if not len(q):
        return
    k = np.arange(len(q))
    prev = np.where(q > 0, buf[np.maximum(q - 1, 0)], LF)
    nxt = np.where(q + 1 < end, buf[np.minimum(q + 1, len(buf) - 1)], LF)
    opener = (k & 1) == 0
    prev_is_closer = np.zeros(len(q), dtype=bool)
    prev_is_closer[1:] = q[1:] - 1 == q[:-1]
    ok_open = (prev == COMMA) | (prev == LF) | ((prev == QUOTE) & prev_is_closer)
    ok_close = (nxt == COMMA) | (nxt == LF) | (nxt == CR) | (nxt == QUOTE)
    bad = np.flatnonzero(np.where(opener, ~ok_open, ~ok_close))
    if len(bad):
        line = first_line + int(np.searchsorted(nl, q[bad[0]]))
        raise ValidationError(
            f'{where}: line {line}: a \'"\' inside an unquoted field or after a closing quote (not RFC 4180 CSV)'
        )


def encode_field(value: str, *, quoted: bool = False) -> bytes:
    """``value`` as one CSV field: quoted when it must be (or when ``quoted``)."""
    if quoted or any(c in value for c in ',"\r\n'):
        return b'"' + value.replace('"', '""').encode("utf-8") + b'"'
    return value.encode("utf-8")


def field_values(buf: NDArray[np.uint8], fs: NDArray[np.int64], fe: NDArray[np.int64]) -> tuple[
    NDArray[np.uint8], NDArray[np.int32], NDArray[np.bool_], list[bytes]
]:
    """The fields' bytes as Arrow binary buffers (data, offsets), unquoted.

    Returns ``(data, offsets, quoted, raw_quoted)``: unquoted fields are gathered with
    one vectorised copy; quoted ones (rare in practice) are unquoted one by one and
    their values returned in ``raw_quoted`` (in row order) for the caller to look up.
    """
    length = fe - fs
    quoted = (length > 0) & (buf[np.minimum(fs, len(buf) - 1)] == QUOTE)
    length = np.where(quoted, 0, length)
    offsets = np.zeros(len(fs) + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    data = buf[_gather_index(fs, length)]
    raw_quoted = [bytes(buf[a + 1 : b - 1]).replace(b'""', b'"') for a, b in zip(fs[quoted], fe[quoted], strict=True)]
    return data, offsets.astype(np.int32), quoted, raw_quoted


def splice(
    buf: NDArray[np.uint8],
    end: int,
    fs: NDArray[np.int64],
    fe: NDArray[np.int64],
    table: NDArray[np.uint8],
    table_offsets: NDArray[np.int64],
    choice: NDArray[np.intp],
) -> NDArray[np.uint8]:
    """``buf[:end]`` with each field ``[fs[i], fe[i])`` replaced by table entry ``choice[i]``.

    One gather: the output is pieces alternating between the raw bytes between fields
    and entries of ``table`` (the encoded labels), located in ``concat(buf[:end], table)``.
    """
    m = len(fs)
    if m == 0:
        return buf[:end]
    src = np.concatenate((buf[:end], table))
    starts = np.empty(2 * m + 1, dtype=np.int64)
    lens = np.empty(2 * m + 1, dtype=np.int64)
    starts[0::2] = np.concatenate(([0], fe))
    lens[0::2] = np.concatenate((fs, [end])) - starts[0::2]
    starts[1::2] = end + table_offsets[choice]
    lens[1::2] = table_offsets[choice + 1] - table_offsets[choice]
    return src[_gather_index(starts, lens)]


def _gather_index(starts: NDArray[np.int64], lens: NDArray[np.int64]) -> NDArray[np.int64]:
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
    step = np.ones(total, dtype=dtype)
    out_off = np.cumsum(lens[:-1])
    step[0] = starts[0]
    step[out_off] = starts[1:] - (starts[:-1] + lens[:-1] - 1)
    np.cumsum(step, out=step)
    return step.astype(np.int64, copy=False)
