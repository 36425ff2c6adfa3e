r"""The public covariance of a Mahalanobis space, from a file (``build --metric mahalanobis``).

:math:`d(x, y) = \sqrt{(x - y)^\top \Sigma^{-1} (x - y)}` (Geo-Ellipse-Indistinguishability,
Zhao et al. 2022; :func:`metricdp.spaces.mahalanobis_distances`). :math:`\Sigma` is part of
the mechanism's *definition*, like the metric itself, so it must be public:

* :func:`read_covariance` -- a given (dim, dim) matrix: a CSV whose header row names the
  POINTS file's coordinate columns, then dim rows of dim numbers, or a ``.npy`` array;
* :func:`covariance_from_public` -- the sample covariance of a PUBLIC file of points (a
  census sample, a published survey), recorded as "estimated from FILE".

**Why never from the private records.** eps-mDP is a statement about one fixed metric d:
for all x, x', :math:`M(x)(S) \le e^{\varepsilon d(x, x')} M(x')(S)`. If :math:`\Sigma` were
estimated from the records being released, d (hence every release's distribution) would
depend on the whole data set: changing one person's record changes :math:`\Sigma`, and the
release of *another* person then shifts in a way the guarantee does not bound (the same
reason diffprivlib warns when bounds come from the data). A covariance from public data,
or a given one, is data-independent, and the guarantee holds as proven. metricdp cannot
tell public from private files; it records where the covariance came from in the mechanism
file and in the command's output, so an auditor can check it, and it recomputes every
distance from the recorded covariance when a file is loaded.

Every refusal is one :class:`~metricdp.errors.ValidationError` naming the file (and the
line of a CSV): not a matrix of numbers, a shape other than (dim, dim), not symmetric,
not positive definite (:func:`metricdp.spaces.check_covariance`).
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from .errors import ValidationError
from .spaces import check_covariance, estimate_covariance

__all__ = ["covariance_from_public", "read_covariance"]


def _numbers(row: Sequence[str], where: str) -> list[float]:
    from .io import parse_decimal

    try:
        return [parse_decimal(x.strip()) for x in row]
    except ValueError:
        raise ValidationError(f"{where}: not a row of numbers: {','.join(row)!r}") from None


def read_covariance(path: str | PathLike[str], dim: int, columns: Sequence[str] | None = None) -> NDArray[np.float64]:
    """A given (dim, dim) symmetric positive definite covariance from a CSV or ``.npy`` file.

    A CSV's first row is its header: the coordinate ``columns`` of the POINTS file, in
    their order (checked when ``columns`` is given), so the matrix cannot be read in the
    wrong coordinates.
    """
    from .io import NPY_HEADER_ERRORS, check_npy_header, read_csv_table
    from .tabular.formats import format_of

    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    if format_of(p, ("csv", "npy"), what=f"{p}: the covariance") == "npy":
        try:
            with p.open("rb") as fh:
                check_npy_header(fh, str(p))
                fh.seek(0)
                c = np.load(fh, allow_pickle=False)
        except NPY_HEADER_ERRORS as ex:
            raise ValidationError(f"{p}: not a readable .npy covariance ({type(ex).__name__}: {ex})") from None
        if c.dtype == object or not np.issubdtype(c.dtype, np.number):
            raise ValidationError(f"{p}: the covariance must be numeric, got dtype {c.dtype}")
    else:
        header, rows, lines = read_csv_table(p)  # the one CSV definition: the first record is the header
        names = [h.strip().lower() for h in header]
        if columns is not None and names != [c.strip().lower() for c in columns]:
            raise ValidationError(f"{p}: the header names {','.join(header)}, but the POINTS coordinates are "
                                  f"{','.join(columns)}: the covariance's header row must name the same coordinates, "
                                  "in the same order")
        c = np.array([_numbers(r, f"{p}: line {line}") for r, line in zip(rows, lines, strict=True)],
                     dtype=np.float64).reshape(len(rows), len(header))
    try:
        check_covariance(c, dim)
    except ValidationError as ex:
        raise ValidationError(f"{p}: {ex}") from None
    return np.asarray(c, dtype=np.float64)


def covariance_from_public(path: str | PathLike[str], columns: Sequence[str]) -> NDArray[np.float64]:
    """The sample covariance (ddof 1) of the points of a PUBLIC CSV/Parquet file.

    The file has the POINTS file's coordinate ``columns`` (a ``label`` column and others
    are ignored; duplicates are fine: a sample, not a space), more rows than columns, and
    must be public data (module docstring): never the records that will be released.
    """
    from .tabular.formats import read_table, table_format

    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    want = [c.strip().lower() for c in columns]
    table = read_table(p, table_format(p, what=f"{p}: the public points"))
    names = [h.strip().lower() for h in table.names]
    missing = [c for c in want if c not in names]
    if missing:
        raise ValidationError(f"{p}: lacks the coordinate column(s) {','.join(missing)} of the POINTS file")
    picked = [table.columns[table.names[names.index(c)]] for c in want]
    if not table.format.typed:  # texts, each row's read by the one number rule (an error names its line)
        texts = [c.to_pylist() for c in picked]
        x = np.array([_numbers([t[i] for t in texts], f"{p}: {table.place(i)}") for i in range(table.rows)],
                     dtype=np.float64).reshape(table.rows, len(want))
    else:
        try:
            x = np.column_stack([np.asarray(c.to_numpy(zero_copy_only=False), dtype=np.float64) for c in picked])
        except (TypeError, ValueError) as ex:
            raise ValidationError(f"{p}: the coordinate columns must be numbers ({ex})") from None
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        raise ValidationError(f"{p}: row {int(np.flatnonzero(bad)[0]) + 1} is not finite")
    try:
        cov = estimate_covariance(x)
        check_covariance(cov, len(want))
    except ValidationError as ex:
        raise ValidationError(f"{p}: {ex}") from None
    return cov
