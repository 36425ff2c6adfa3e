"""Files: POINTS files in, atomic writes out (:mod:`metricdp._atomic`, re-exported here).

Mechanism files are written by :meth:`metricdp.mechanisms.base.Mechanism.save` and read
by :func:`metricdp.mechanisms.file.load_mechanism` (beside :class:`Mechanism`, so this
module imports nothing of the mechanisms).
"""

from __future__ import annotations

import tokenize
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import IO, Any

import numpy as np

from ._atomic import TEMP_SUFFIX, atomic_write, check_output_path, clean_stale_temporaries, scratch_directory
from ._resources import check_allocation
from .errors import ValidationError
from .outputs import OutputSet
from .spaces import METRICS, MetricSpace
from .tabular.formats import arrow, format_of, read_table, table_format
from .tabular.formats.csv import read_csv

__all__ = [
    "TEMP_SUFFIX", "atomic_write", "check_npy_header", "check_output_path", "clean_stale_temporaries",
    "parse_decimal", "read_csv_table", "read_output_distances", "read_output_points", "read_point_columns",
    "read_points", "scratch_directory",
]


#: What numpy raises on a malformed .npy header (it parses the header as a Python literal).
NPY_HEADER_ERRORS = (ValueError, SyntaxError, TypeError, KeyError, EOFError, OSError, tokenize.TokenError)


def check_npy_header(fh: IO[bytes], what: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Read and vet a .npy header before numpy allocates anything: (shape, dtype).

    Refuses (ValidationError naming ``what``) a malformed header, an object dtype (which
    would need pickle) and a declared size over the memory limit
    (:func:`metricdp._resources.check_allocation`); a hostile header can declare any shape.
    """
    try:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _fortran, dtype = read(fh)
    except NPY_HEADER_ERRORS as ex:
        raise ValidationError(f"{what} is not a .npy array ({type(ex).__name__}: {ex})") from None
    if dtype.hasobject:
        raise ValidationError(f"{what} holds Python objects; refused (no pickle)")
    check_allocation(float(np.prod(shape, dtype=np.float64)) * max(dtype.itemsize, 1), f"{what} of shape {shape}")
    return shape, dtype


def read_points(path: str | PathLike[str], metric: str | None = None) -> MetricSpace:
    """Read a POINTS file into a :class:`MetricSpace`.

    * ``.npy``: a precomputed distance matrix (all metric axioms checked);
    * ``.csv`` / ``.parquet``: first column ``label``, other columns coordinates; with
      ``metric="haversine"`` (the default when the columns are ``lat``, ``lon``) they
      are latitude and longitude in degrees and distances are in km.
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    fmt = format_of(p, ("csv", "parquet", "npy"), what=f"{p}: POINTS")
    if fmt == "npy":
        try:
            with p.open("rb") as fh:
                check_npy_header(fh, str(p))
                fh.seek(0)
                d = np.load(fh, allow_pickle=False)
        except NPY_HEADER_ERRORS as ex:
            raise ValidationError(f"{p}: not a readable .npy distance matrix ({type(ex).__name__}: {ex})") from None
        if metric not in (None, "precomputed"):
            raise ValidationError(f"{p}: a .npy distance matrix takes no parameter 'metric' (got {metric!r})")
        try:
            return MetricSpace.from_distances(d)
        except ValidationError as ex:
            raise ValidationError(f"{p}: {ex}") from None
    header, labels, coords = _read_labelled(p)
    if header[0].strip().lower() != "label":
        raise ValidationError(f"{p}: the first column must be 'label', got {header[0]!r}")
    if len(header) < 2:
        raise ValidationError(f"{p}: needs at least one coordinate column after 'label'")
    cols = [h.strip().lower() for h in header[1:]]
    if metric is None:
        metric = "haversine" if cols == ["lat", "lon"] else "euclidean"
    if metric not in METRICS:
        raise ValidationError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if metric == "haversine" and cols != ["lat", "lon"]:
        raise ValidationError(f"{p}: haversine needs the columns label,lat,lon; got {','.join(header)}")
    try:
        return MetricSpace.from_points(coords, labels, metric)
    except ValidationError as ex:
        raise ValidationError(f"{p}: {ex}") from None


def read_point_columns(path: str | PathLike[str]) -> list[str] | None:
    """The coordinate columns (after ``label``, stripped, lower case) of a ``.csv`` / ``.parquet``
    POINTS file already read by :func:`read_points`; None for a ``.npy`` distance matrix."""
    p = Path(path)
    if format_of(p, ("csv", "parquet", "npy"), what=f"{p}: POINTS") == "npy":
        return None
    return [h.strip().lower() for h in table_format(p).header(p)[1:]]


def read_output_points(
    path: str | PathLike[str], space: MetricSpace, *, columns: Sequence[str] | None = None
) -> OutputSet:
    """A separate output set from a POINTS file (``.csv`` / ``.parquet``, as :func:`read_points`),
    measured with ``space``'s own metric (the space must have coordinates).

    ``build --outputs POINTS``: a coarse release grid, points of interest. ``columns``, the
    space's coordinate columns (:func:`read_point_columns`), when given must equal the
    file's: outputs in ``lat,lon`` are not measured as the ``x,y`` of a Euclidean space,
    nor ``y,x`` as ``x,y``.
    """
    p = Path(path)
    if space.points is None or space.metric not in METRICS:
        raise ValidationError(f"{p}: output points need a space of points under a coordinate metric; "
                              f"this space's metric is {space.metric!r} (give the outputs by their distances instead)")
    table_format(p, what=f"{p}: output points")
    header, labels, coords = _read_labelled(p)
    cols = [h.strip().lower() for h in header[1:]]
    if header[0].strip().lower() != "label" or not cols:
        raise ValidationError(f"{p}: the columns must be label then coordinates, got {','.join(header)}")
    if space.metric == "haversine" and cols != ["lat", "lon"]:
        raise ValidationError(f"{p}: the space is haversine, so the columns must be label,lat,lon")
    if columns is not None and cols != [c.strip().lower() for c in columns]:
        raise ValidationError(f"{p}: the coordinate columns are {','.join(cols)}, but the space's POINTS "
                              f"has {','.join(columns)}: outputs must be points of the same coordinates and metric")
    try:
        return OutputSet.from_points(space, coords, labels)
    except ValidationError as ex:
        raise ValidationError(f"{p}: {ex}") from None


def read_output_distances(path: str | PathLike[str], space: MetricSpace) -> OutputSet:
    """A separate output set from its distances to the inputs, a CSV file.

    Format (``build --output-distances FILE``): the header row is ``label`` then the
    output labels; then one row per input: its label, then its distance to every output.
    Every input label of ``space`` appears exactly once (in any order).
    """
    p = Path(path)
    format_of(p, ("csv",), what=f"{p}: the file (label, then one column per output)")
    header, rows, lines = read_csv_table(p)
    if header[0].strip().lower() != "label" or len(header) < 2:
        raise ValidationError(f"{p}: the header must be 'label' then the output labels")
    order: dict[str, int] = {}
    values = np.empty((len(rows), len(header) - 1))
    for k, (row, line) in enumerate(zip(rows, lines, strict=True)):
        if row[0] in order:
            raise ValidationError(f"{p}: input {row[0]!r} appears twice (line {line})")
        order[row[0]] = k
        try:
            values[k] = [parse_decimal(x) for x in row[1:]]
        except ValueError:
            raise ValidationError(f"{p}: line {line} has a non-numeric distance") from None
    missing = [lab for lab in space.labels if lab not in order]
    known = set(space.labels)
    extra = [lab for lab in order if lab not in known]
    if missing or extra:
        what = f"lacks input(s) {missing[:5]}" if missing else f"names input(s) not in the space: {extra[:5]}"
        raise ValidationError(f"{p}: {what}")
    cross = values[[order[lab] for lab in space.labels]]
    try:
        return OutputSet.from_distances(space, cross, [h.strip() for h in header[1:]])
    except ValidationError as ex:
        raise ValidationError(f"{p}: {ex}") from None


def read_csv_table(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, rows and each row's line number of a small CSV file read whole.

    :func:`metricdp.tabular.formats.csv.read_csv`: the one CSV record definition (RFC 4180, LF or
    CRLF records; a bare CR, a ragged row, a stray quote, a BOM past the first byte, a NUL,
    invalid UTF-8, an empty or duplicated header name, a record over the cap are each one
    :class:`ValidationError` naming the file, the line and the byte offset). Blank lines
    are skipped. (``privatize`` streams instead: :mod:`metricdp.streaming`.)
    """
    return read_csv(path)


def parse_decimal(text: str) -> float:
    """``float(text)`` of a plain ASCII number: Python's float() also reads ``1_000`` and
    non-ASCII digits (``'\\u0661'`` is 1.0), which a data file never means (a ValueError)."""
    if "_" in text or not text.isascii():
        raise ValueError(f"not a plain decimal number: {text!r}")
    return float(text)


def _read_labelled(p: Path) -> tuple[list[str], list[str], np.ndarray]:
    """The header, the labels (first column) and the coordinates (the other columns) of a table of points, any
    table format (:func:`metricdp.tabular.formats.read_table`): a text format's coordinates are parsed by
    :func:`parse_decimal` (an error names the row's line and its coordinates), a typed format's must be numbers
    (an error names the column and its type)."""
    table = read_table(p, table_format(p))
    header = list(table.names)
    if not header:
        raise ValidationError(f"{p}: no columns")
    if not table.rows:
        raise ValidationError(f"{p}: no points")
    raw = table.columns[header[0]].to_pylist()
    if None in raw:
        raise ValidationError(f"{p}: the label of row {raw.index(None)} is null; every point needs a label")
    labels = [str(x) for x in raw]
    if not table.format.typed:
        texts = [table.columns[c].to_pylist() for c in header[1:]]
        coords = np.empty((table.rows, len(texts)), dtype=np.float64)
        for i in range(table.rows):
            try:
                coords[i] = [parse_decimal(t[i]) for t in texts]
            except ValueError:
                raise ValidationError(f"{p}: {table.place(i)} has a non-numeric coordinate: "
                                      f"{[t[i] for t in texts]}") from None
        return header, labels, coords
    pa, _ = arrow()
    for c in header[1:]:  # numbers only: numpy would run float() on strings ('1_0' is 10.0)
        kind = table.columns[c].type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
            raise ValidationError(f"{p}: coordinate column {c!r} has type {kind}; coordinates must be numbers")
    try:
        coords = np.column_stack([np.asarray(table.columns[c].to_numpy(zero_copy_only=False), dtype=np.float64)
                                  for c in header[1:]])
    except (ValueError, TypeError) as ex:
        raise ValidationError(f"{p}: coordinates must be numeric ({ex})") from None
    return header, labels, coords
