"""A release of columns held in memory (a DataFrame's, an array's): one Arrow record batch through a kind.

A file release reads chunks from a format (:mod:`.run`); a DataFrame is already in memory,
so its released column(s) become one :class:`~metricdp.tabular.formats.BatchChunk` and go
through the same steps with the same kind: :meth:`~.kind.Kind.parse` (the one rule of what
a value is: :mod:`.labels`, :mod:`.numbers`), the refused rows gathered by
:meth:`~.kind.Kind.refusals` into one error, :meth:`~.kind.Kind.release` from the kind's
one source, :meth:`~.kind.Kind.render`, and the :class:`~metricdp.tabular.formats.Released`
values given back as Arrow arrays (:meth:`~metricdp.tabular.formats.Released.arrays`) of the
input's types where the output labels fit them, as text otherwise.

The refusal names rows as the caller does (a pandas index label, a Polars row number):
the kind's error is written with a marker for the unit, and each place after it (a row's
position in the batch) is renamed by ``name(position)``. The marker holds a control
character, which a value never shows in an error (values are shown by ``repr``, which
escapes it), so a value cannot be mistaken for a place. A kind that refuses a value at
once (points) opens its error with ``where: data row N`` (1-based), renamed alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ValidationError
from ..mechanisms.base import Mechanism
from ..tabular.formats import BatchChunk, arrow
from .kind import Kind

if TYPE_CHECKING:
    from .labels import Labels
    from .numbers import Numbers

__all__ = ["column_kind", "plain_column", "release_batch"]

#: the unit a kind's refusal is written with, before its places are renamed (module docstring)
_MARK = "\x00row"
_PLACES = re.compile(re.escape(_MARK) + r"(\(s\))? (\d+(?:, \d+)*)")


def column_kind(mechanism: object, column: str, where: str) -> Labels | Numbers:
    """The kind releasing ``column`` through ``mechanism``: numbers on a grid, or a mechanism's labels.

    The kind's source of randomness is None until the caller sets it (``kind.source``), after
    the checks of what leaves.
    """
    from ..mechanisms.numeric import NumberMechanism
    from .labels import Labels
    from .numbers import Numbers

    if isinstance(mechanism, NumberMechanism):
        return Numbers(mechanism, column, None, where=where)
    if not isinstance(mechanism, Mechanism):
        raise ValidationError(f"mechanism must be a Mechanism, got {type(mechanism).__name__}")
    return Labels(mechanism, column, None)


def plain_column(values: Any, column: str, where: str) -> Any:
    """An Arrow array of ``values`` as a kind reads it: a dictionary decoded, a string view (or nulls only) as text.

    ``values``: an Arrow array or chunked array, or anything :func:`pyarrow.array` reads with
    pandas' missing values (None, NaN, NA) as nulls. Values of more than one type (a pandas
    object column holding numbers and text) are refused: a column has one type, as in a file.
    """
    pa, _ = arrow()
    if not isinstance(values, pa.Array | pa.ChunkedArray):
        try:
            values = pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as ex:
            raise ValidationError(f"{where}: column {column!r} does not hold values of one type ({ex}); "
                                  "convert it first (astype)") from None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_string_view(values.type) or pa.types.is_null(values.type):  # no values: no type either
        values = values.cast(pa.large_string())
    return values


def release_batch(kind: Kind, batch: Any, where: str, name: Callable[[int], str] = str) -> list[Any]:
    """The release of ``batch``'s ``kind.columns``: one Arrow array per column, in ``kind.columns`` order.

    Each array has its input column's type where the released values fit it (a label cast
    as a Parquet output casts it), else it is text. A row the kind refuses stops the release:
    one :class:`ValidationError` with the kind's count, values and reasons, its places named
    by ``name(position)`` (0-based positions in the batch).
    """
    pa, _ = arrow()
    chunk = BatchChunk(batch, 0)
    try:
        got = kind.parse(chunk)
    except ValidationError as ex:  # a kind that refuses at once (points) names the 1-based data row
        raise ValidationError(_data_row(str(ex), where, name)) from None
    if got.refused.size:
        refused = kind.refusals()
        refused.add(got.refused.astype(np.int64), chunk.texts(kind.columns[0], got.refused[:kind.show]),
                    got.reasons)
        raise ValidationError(_named(str(refused.error(where, _MARK)), name))
    kind.check_written(chunk.rows, where)
    out: dict[str, Any] = {}
    for item in kind.render(kind.release(got.values, 0)):
        types = [batch.schema.field(c).type for c in item.columns]
        try:
            arrays = item.arrays(types, where)
        except ValidationError:  # the output labels do not fit the input's type: they stay text
            arrays = item.arrays([pa.string()] * len(types), where)
        out.update(zip(item.columns, arrays, strict=True))
    return [out[c] for c in kind.columns]


def _data_row(message: str, where: str, name: Callable[[int], str]) -> str:
    """``message`` with the data row it opens with (``where: data row N``, 1-based) named by ``name``."""
    m = re.match(re.escape(where) + r": data row (\d+)", message)
    return message if m is None else f"{where}: row {name(int(m.group(1)) - 1)}{message[m.end():]}"


def _named(message: str, name: Callable[[int], str]) -> str:
    """``message`` with each place after the marker renamed by ``name`` (module docstring)."""
    def rename(m: re.Match[str]) -> str:
        places = ", ".join(name(int(p)) for p in m.group(2).split(", "))
        return f"row{m.group(1) or ''} {places}"

    return _PLACES.sub(rename, message).replace(_MARK, "row")
