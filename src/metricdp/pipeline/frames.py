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
the batch's chunk gives each row's place as ``name(position)`` (:meth:`_Named.places`), which
the kind's error shows as it shows a file's line or row numbers.
"""

from __future__ import annotations

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


class _Named(BatchChunk):
    """A batch whose rows are named by the caller (index labels), not numbered."""

    def __init__(self, batch: Any, name: Callable[[int], str]) -> None:
        super().__init__(batch, 0)
        self._name = name

    def places(self, rows: Any) -> Any:
        return np.asarray([self._name(int(r)) for r in np.asarray(rows)], dtype=object)


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
    return Labels(mechanism, column, None, where=where)


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
    chunk = _Named(batch, name)
    got = kind.parse(chunk)
    if got.refused.size:
        refused = kind.refusals()
        refused.add(chunk.places(got.refused), chunk.texts(kind.columns[0], got.refused[:kind.show]), got.reasons)
        raise refused.error(where, "row")
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
