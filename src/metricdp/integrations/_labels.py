"""A mechanism's labels as the CSV byte layer sees them: lookup codes and encoded outputs.

The driver's validation pass and every engine partition map a column's raw CSV fields
to the mechanism's row indices with the same code (:meth:`Labels.codes`), and splice
releases back with the same encoded table (:meth:`Labels.splice`), so a value that the
local engine refuses is refused by every engine, and a released field is written
exactly as the local engine writes it (quoted when its input field was, or when it must
be). Built once per process from the mechanism: a few label-sized arrays.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from .._random import RandomSource
from ..errors import PrivacyLeakWarning
from ..streaming.labels import csv_label_indices, parquet_label_indices
from ..tabular import csvsplit
from ..tabular.csvsplit import label_table as _label_table

__all__ = ["Labels", "Outputs", "field_text", "sample"]


def sample(mechanism: Any, codes: NDArray[np.intp], rng: RandomSource) -> NDArray[np.intp]:
    """Releases of ``codes`` (row indices) from ``mechanism``'s public sampler."""
    if len(codes) == 0:
        return codes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # a seed is announced once, by the caller
        return np.asarray(mechanism.sample(codes, rng), dtype=np.intp)


class Outputs:
    """Output labels encoded as CSV fields, and the splice that writes releases with them.

    ``table`` holds entries ``0..n-1`` encoded as needed, ``n..2n-1`` always quoted
    (:func:`metricdp.tabular.csvsplit.encode_field`) and ``2n`` empty (a removed
    range: a dropped column), the layout of the local engine
    (:func:`metricdp.streaming.files._label_table`, which builds it). A labels release
    writes the mechanism's output labels, a numbers release its grid points' text.
    """

    def __init__(self, outs: Sequence[str]) -> None:
        self.n_out = len(outs)
        self.table, self.table_offsets = _label_table(outs)

    def splice(
        self, buf: NDArray[np.uint8], recs: csvsplit.Records, column: int, dropped: tuple[int, ...],
        released: NDArray[np.intp], quoted: NDArray[np.bool_], keep: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.uint8]:
        """``buf[:recs.end]`` with field ``column`` of each record replaced by its release and the
        ``dropped`` columns removed (:func:`metricdp.tabular.csvsplit.edits_for`), every other byte kept.

        With ``keep``, ``released`` holds the kept records' releases and the others are removed whole
        (:func:`metricdp.tabular.csvsplit.without_records`): a withheld record's field is never written."""
        starts, stops, row, kind = csvsplit.edits_for(recs, column, dropped)
        if keep is None:
            per_row = released + self.n_out * quoted
        else:
            per_row = np.full(keep.size, 2 * self.n_out, dtype=np.intp)
            per_row[keep] = released + self.n_out * quoted[keep]
            starts, stops, row, kind = csvsplit.without_records(buf, recs, ~keep, starts, stops, row, kind)
        choice = np.full(len(starts), 2 * self.n_out, dtype=np.intp)
        if len(per_row):
            field = kind == 0
            choice[field] = per_row[row[field]]
        return csvsplit.splice(buf, recs.end, starts, stops, self.table, self.table_offsets, choice)


class Labels(Outputs):
    """Input labels for lookup (the local engine's, :mod:`metricdp.streaming.labels`) and output labels
    encoded as CSV fields (:class:`Outputs`)."""

    def __init__(self, mechanism: Any) -> None:
        pa = import_optional("pyarrow", extra="parquet")
        self.labels = list(mechanism.labels)
        super().__init__(list(getattr(mechanism, "output_labels", None) or self.labels))  # a separate output set
        self.value_set = pa.array([x.encode("utf-8") for x in self.labels], type=pa.binary())
        self.lookup = {x.encode("utf-8"): i for i, x in enumerate(self.labels)}

    def codes(self, buf: NDArray[np.uint8], recs: csvsplit.Records) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        """Row index of each record's field (-1: not a label) and whether the field was quoted."""
        pa = import_optional("pyarrow", extra="parquet")
        pc = import_optional("pyarrow.compute", extra="parquet")
        idx, quoted = csv_label_indices(pa, pc, buf, recs.fs, recs.fe, self.value_set, self.lookup, with_quoted=True)
        return idx, quoted

    def parquet_codes(self, col: Any) -> tuple[NDArray[np.intp], Any]:
        """Row index of each value of a Parquet column (-1: not a label, null included) and the values as text."""
        pa = import_optional("pyarrow", extra="parquet")
        pc = import_optional("pyarrow.compute", extra="parquet")
        return parquet_label_indices(pa, pc, col, self.labels)


def field_text(buf: bytes | NDArray[np.uint8], a: int, b: int) -> str:
    """A field's value for an error message (unquoted, undecodable bytes replaced)."""
    raw = bytes(buf[a:b])
    if raw[:1] == b'"':
        raw = raw[1:-1].replace(b'""', b'"')
    return raw.decode("utf-8", errors="replace")
