"""The format layer: one module per file format, and the one suffix table built from them.

Each module of this package that holds a ``FORMAT`` (a :class:`Format`: a reader of
chunks and a writer of released chunks, see :mod:`._base`) is a format of every release
(:data:`RELEASE_FORMATS`, :func:`release_format`); adding one changes no other file. Every
command that reads or writes a data file asks :func:`format_of` instead of looking at
``Path.suffix`` itself, so a suffix means the same thing everywhere. The formats as shipped:

============  ===========  ======================================================
suffix        format       read as
============  ===========  ======================================================
``.csv``      ``csv``      RFC 4180, comma, UTF-8 (:mod:`metricdp.tabular.csv`)
``.parquet``  ``parquet``  Apache Parquet (pyarrow)
``.pq``       ``parquet``
``.feather``  ``feather``  Arrow IPC file, Feather v2 (pyarrow)
``.arrow``    ``feather``
``.jsonl``    ``jsonl``    one JSON object per line (:mod:`.jsonl`)
``.ndjson``   ``jsonl``
``.geojson``  ``geojson``  a FeatureCollection of points, written only
``.txt``      ``text``     plain UTF-8 text, one document per line (:mod:`.lines`)
``.tsv``      ``tsv``      tab-separated: named so that it is refused by name
``.npy``      ``npy``      a numpy array (a distance matrix)
============  ===========  ======================================================

Why ``.tsv`` is a format of its own and not a table format: the record definition of
:mod:`metricdp.tabular.csv` is comma-separated, and reading a tab-separated file as CSV
would make each whole line one field -- a release of a column that does not exist, or
true values passed through as one opaque field. Commands that take tables therefore
refuse ``.tsv`` with a message saying so (``allowed`` below); a reader of plain text
rows (``text privatize``) may accept it explicitly. ``.txt`` is plain text, never a
CSV in disguise.

A caller outside this package never asks which format it holds: it asks the :class:`Format`
-- :meth:`~Format.header` (the checked names, a CSV's header line named), :meth:`~Format.open`
(chunks), :attr:`~Format.unit` (an error's ``line 12`` or ``row 12``, :func:`place`),
:attr:`~Format.typed` (whether values carry their types or are texts to parse),
:meth:`~Format.appender` (the rows with one column more), :meth:`~Format.write_table` (a small
table of texts and numbers) -- or :func:`read_table` (a small file read whole), and finds it
by :func:`release_format`, :func:`table_format` or :func:`text_format`; the format a release
writes its output in is :func:`output_format`'s.

Plain text is a format of this package (:mod:`.lines`: its one column, the document, is
named by the format, not by a header), but not a table: :data:`RELEASE_FORMATS` and
:func:`release_format` leave it out, so a command that reads a table refuses a ``.txt``
file by name. A release of documents asks :func:`text_format` instead: a table by its
suffix with the documents' column named, or plain text (``.txt``, and any suffix the
table above does not name).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Collection
from os import PathLike
from pathlib import Path
from typing import Final

from ...errors import ValidationError
from ._base import (
    Appender,
    BatchChunk,
    BatchWriter,
    Chunk,
    Coded,
    Format,
    Layout,
    Parts,
    Points,
    Reader,
    Released,
    Strings,
    Writer,
    WriteSpec,
    arrow,
    checked_names,
    place,
)
from ._table import Table, read_table
from .lines import COLUMN

__all__ = [
    "FORMATS", "RELEASE_FORMATS", "TABLE_FORMATS", "Appender", "BatchChunk", "BatchWriter", "Chunk", "Coded", "Format",
    "Layout", "Parts", "Points", "Reader", "Released", "Strings", "Table", "WriteSpec", "Writer", "arrow",
    "checked_names", "format_of", "named_format", "output_format", "place", "read_table", "release_format",
    "table_format", "text_format",
]


def _discover() -> dict[str, Format]:
    """Every format module of this package (a module with a ``FORMAT``), by format name."""
    found: dict[str, Format] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            fmt = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FORMAT", None)
            if isinstance(fmt, Format):
                found[fmt.name] = fmt
    return found


#: format name -> every format module's reader/writer pair (:class:`Format`), one module each in this package.
_FOUND: Final[dict[str, Format]] = _discover()

#: Formats of documents, not tables: no header, one column named by the format (plain text, :mod:`.lines`).
_DOCUMENTS: Final[tuple[str, ...]] = ("text",)

#: format name -> the reader/writer pair of every format a table is released in (plain text aside).
RELEASE_FORMATS: Final[dict[str, Format]] = {n: f for n, f in _FOUND.items() if n not in _DOCUMENTS}

#: Suffixes of files that no format module reads: tab-separated (refused by name), numpy arrays.
_OTHER: Final[dict[str, str]] = {".tsv": "tsv", ".npy": "npy"}

#: suffix (lower case, with the dot) -> format name. The only such table in the package: the format
#: modules' suffixes, then the others.
FORMATS: Final[dict[str, str]] = {
    **{s: f.name for f in _FOUND.values() for s in f.suffixes},
    **{s: f for s, f in _OTHER.items() if s not in {x for f2 in _FOUND.values() for x in f2.suffixes}},
}

#: Formats whose rows have named columns that every table reader of the package reads (points, priors, ...).
TABLE_FORMATS: Final[tuple[str, ...]] = ("csv", "parquet")

_WHY_NOT = {
    "tsv": "tab-separated files are not read as tables (the CSV reader is comma-separated); convert it to .csv",
    "text": "a .txt file is plain text, not a table with a header",
}


def _suffixes(fmt: str) -> str:
    return "/".join(s for s, f in FORMATS.items() if f == fmt)


def named_format(path: str | PathLike[str]) -> str | None:
    """The format name the module table gives ``path``'s suffix, or None for a suffix it does not name."""
    return FORMATS.get(Path(path).suffix.lower())


def format_of(
    path: str | PathLike[str], allowed: Collection[str] | None = None, *, what: str | None = None
) -> str:
    """The format name of ``path`` from its suffix (see the module table).

    ``allowed`` restricts the answer (default: every format); ``what`` replaces the
    ``PATH:`` that starts the error (``f"{path}: POINTS"`` gives ``PATH: POINTS must be ...``).
    Raises :class:`ValidationError` naming the path, the suffix found and the suffixes
    accepted, with the reason for ``.tsv`` and ``.txt``.
    """
    p = Path(path)
    where = what or f"{p}:"
    suffix = p.suffix.lower()
    fmt = named_format(p)
    if fmt is not None and (allowed is None or fmt in allowed):
        return fmt
    names = [_suffixes(f) for f in (allowed if allowed is not None else dict.fromkeys(FORMATS.values()))]
    wanted = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    why = f" ({_WHY_NOT[fmt]})" if fmt in _WHY_NOT else ""
    raise ValidationError(f"{where} must be {wanted}, got {suffix or 'no extension'}{why}")


def release_format(path: str | PathLike[str], *, write: bool = False, what: str | None = None) -> Format:
    """The :class:`Format` that reads (or, with ``write``, writes) ``path``, from its suffix.

    Raises :class:`ValidationError` naming the path and the suffixes a release reads or writes.
    """
    allowed = [name for name, f in RELEASE_FORMATS.items() if write or f.reads]
    return RELEASE_FORMATS[format_of(path, allowed, what=what)]


def table_format(path: str | PathLike[str], *, what: str | None = None) -> Format:
    """The :class:`Format` of a table that every table reader of the package reads (:data:`TABLE_FORMATS`).

    Raises :class:`ValidationError` naming the path and the suffixes accepted (:func:`format_of`).
    """
    return RELEASE_FORMATS[format_of(path, TABLE_FORMATS, what=what)]


def text_format(path: str | PathLike[str], column: str | None) -> tuple[Format, str]:
    """The :class:`Format` of a file of documents and the column that holds them.

    A table a release reads (:data:`RELEASE_FORMATS`), by its suffix: ``column`` names the
    documents' field. Otherwise plain text (``.txt``, and any suffix the module table does
    not name): one document per line, its one column (:data:`.lines.COLUMN`), ``column``
    None. A suffix of the table that is neither (``.tsv``, ``.npy``, a format written only)
    is refused with its reason (:func:`format_of`).

    Raises :class:`ValidationError` naming the path: the suffix refused, a table without
    ``column``, plain text with one.
    """
    p = Path(path)
    name = named_format(p) or _DOCUMENTS[0]
    allowed = [*(n for n, f in RELEASE_FORMATS.items() if f.reads), *_DOCUMENTS]
    if name not in allowed:
        format_of(p, allowed, what=f"{p}: a text input")  # raises, with the reason
    if name in _DOCUMENTS:
        if column is not None:
            raise ValidationError(f"{p}: the parameter 'column' applies to .csv/.jsonl/.parquet inputs; this file "
                                  "is read as plain text")
        return _FOUND[name], COLUMN
    if column is None:
        raise ValidationError(f"{p}: a {name.upper()} input needs the parameter 'column' (the text's field)")
    return RELEASE_FORMATS[name], column


def output_format(fmt: Format, out: str | PathLike[str], *, written_only: bool = True) -> Format:
    """The format a release of an input in ``fmt`` writes ``out`` in: ``fmt`` itself, or, where
    ``written_only``, a format that is only written (GeoJSON, for points).

    A release does not convert (a CSV into Parquet): an output named for another format is
    refused; a suffix that names no format keeps the input's.

    Raises
    ------
    ValidationError
        ``out`` names another format (the message names both).
    """
    name = named_format(out)
    if name is None or name == fmt.name:
        return fmt
    named = RELEASE_FORMATS.get(name)
    if named is fmt or (named is not None and written_only and not named.reads):
        return named
    raise ValidationError(f"{out}: a release is written in its input's format ({fmt.name}: "
                          f"{'/'.join(fmt.suffixes)}), got {Path(out).suffix.lower()}")
