"""Argument checks shared by the whole library.

Each check raises :class:`~metricdp.errors.ValidationError` naming the argument and the
index that failed, and returns the normalised value. No ``assert``: checks must survive
``python -O``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._resources import scan_threads
from .errors import ValidationError

__all__ = [
    "check_bool",
    "check_delta",
    "check_epsilon",
    "check_int",
    "check_metric",
    "check_number",
    "check_probability_vector",
    "check_quantile",
    "check_stochastic",
    "check_triangle_inequality",
]

#: Largest distance accepted: the triangle check and the builders add two distances, and
#: 2 * 1e300 is still finite in float64.
MAX_DISTANCE = 1e300

#: Relative tolerance of the triangle-inequality and symmetry checks (float rounding of
#: distances computed from coordinates is far below it).
METRIC_RTOL = 1e-9


def check_number(
    value: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    open_minimum: bool = False,
    open_maximum: bool = False,
) -> float:
    """A finite real number within the given bounds (booleans and strings are refused).

    The one scalar check: every other scalar check of metricdp is this one with its bounds.

    >>> check_number(0.5, "tol", minimum=0, maximum=1, open_minimum=True, open_maximum=True)
    0.5
    >>> check_number(True, "tol")
    Traceback (most recent call last):
    ...
    metricdp.errors.ValidationError: tol must be a number, got True
    """
    if isinstance(value, bool | np.bool_ | str | bytes):
        raise ValidationError(f"{name} must be a number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(f"{name} must be a number, got {value!r}") from None
    low = minimum is not None and (x <= minimum if open_minimum else x < minimum)
    high = maximum is not None and (x >= maximum if open_maximum else x > maximum)
    if not math.isfinite(x) or low or high:
        bounds = []
        if minimum is not None:
            bounds.append(f"{'>' if open_minimum else '>='} {minimum:g}")
        if maximum is not None:
            bounds.append(f"{'<' if open_maximum else '<='} {maximum:g}")
        raise ValidationError(f"{name} must be finite{' and ' if bounds else ''}{' and '.join(bounds)}, got {value!r}")
    return x


def check_epsilon(epsilon: Any, name: str = "epsilon") -> float:
    """A finite epsilon > 0."""
    if isinstance(epsilon, bool | np.bool_):
        raise ValidationError(f"{name} must be a number, got {epsilon!r}")
    try:
        value = float(epsilon)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(f"{name} must be a number, got {epsilon!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValidationError(f"{name} must be finite and > 0, got {epsilon!r}")
    return value


def check_delta(delta: Any, name: str = "delta") -> float:
    """A delta in [0, 1)."""
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number, got {delta!r}") from None
    if not (0.0 <= value < 1.0):
        raise ValidationError(f"{name} must be in [0, 1), got {delta!r}")
    return value


def check_quantile(q: Any, name: str = "quantile") -> float:
    """A quantile level in (0, 1]."""
    try:
        value = float(q)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number, got {q!r}") from None
    if not (0.0 < value <= 1.0):
        raise ValidationError(f"{name} must be in (0, 1], got {q!r}")
    return value


def check_bool(value: object, name: str) -> bool:
    """True or False (numpy bools too); 1, "yes" and None are refused, not coerced."""
    if not isinstance(value, bool | np.bool_):
        raise ValidationError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_int(value: object, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer within [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValidationError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValidationError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValidationError(f"{name} must be <= {maximum}, got {value}")
    return value


def _pair(labels: Sequence[str] | None, i: int, j: int) -> str:
    if labels is None:
        return f"({i}, {j})"
    return f"({i}, {j}) = ({str(labels[i])!r}, {str(labels[j])!r})"


def check_metric(
    distances: ArrayLike,
    name: str = "distances",
    labels: Sequence[str] | None = None,
    triangle: bool = True,
) -> NDArray[np.float64]:
    """Validate a distance matrix against the metric axioms; return it as float64.

    Checks, in order: 2-d and square, finite, zero diagonal, symmetric (relative
    tolerance ``METRIC_RTOL``), strictly positive off the diagonal, and (when
    ``triangle``) the triangle inequality. The error names the first pair or triple
    that fails.
    """
    d = np.asarray(distances)
    if d.dtype == object or not np.issubdtype(d.dtype, np.number):
        raise ValidationError(f"{name} must be a numeric matrix, got dtype {d.dtype}")
    d = d.astype(np.float64, copy=True)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValidationError(f"{name} must be a square matrix, got shape {d.shape}")
    n = d.shape[0]
    if n < 2:
        raise ValidationError(f"{name} must have at least 2 points, got {n}")
    bad = np.argwhere(~np.isfinite(d))
    if bad.size:
        i, j = bad[0]
        raise ValidationError(f"{name} is not finite at {_pair(labels, i, j)}: {float(d[i, j])}")
    huge = np.argwhere(np.abs(d) > MAX_DISTANCE)
    if huge.size:
        i, j = huge[0]
        raise ValidationError(
            f"{name} at {_pair(labels, i, j)} is {float(d[i, j])!r}, above {MAX_DISTANCE:g}: sums of two such "
            "distances overflow float64; rescale the distances"
        )
    diag = np.flatnonzero(np.diag(d) != 0)
    if diag.size:
        i = int(diag[0])
        raise ValidationError(f"{name} has a non-zero diagonal at {_pair(labels, i, i)}: {float(d[i, i])}")
    asym = np.abs(d - d.T) > METRIC_RTOL * np.maximum(np.abs(d), np.abs(d.T))
    if asym.any():
        i, j = np.argwhere(asym)[0]
        raise ValidationError(
            f"{name} is not symmetric at {_pair(labels, i, j)}: "
            f"d[i,j]={float(d[i, j])!r} but d[j,i]={float(d[j, i])!r}"
        )
    d = (d + d.T) / 2  # exact symmetry from here on
    off = ~np.eye(n, dtype=bool)
    nonpos = off & (d <= 0)
    if nonpos.any():
        i, j = np.argwhere(nonpos)[0]
        kind = "zero (duplicate points?)" if d[i, j] == 0 else "negative"
        raise ValidationError(
            f"{name} is {kind} off the diagonal at {_pair(labels, i, j)}: {float(d[i, j])!r}"
        )
    if triangle:
        check_triangle_inequality(d, name=name, labels=labels)
    return d


def check_triangle_inequality(
    d: NDArray[np.float64], name: str = "distances", labels: Sequence[str] | None = None, block: int = 64
) -> None:
    """Raise naming a triple (i, k, j) with d(i,j) > d(i,k) + d(k,j) (relative tol).

    Blocked min-plus product: for a block of rows i, ``min_k d(i,k) + d(k,j)`` is built
    one k at a time in place (O(n^3) flops, O(block * n) memory, no Python loop over
    triples).
    """
    n = d.shape[0]
    limit = d * (1 - METRIC_RTOL)
    from concurrent.futures import ThreadPoolExecutor

    def scan(start: int) -> tuple[int, int] | None:
        stop = min(start + block, n)
        rows = d[start:stop]
        best = np.full((stop - start, n), np.inf)
        tmp = np.empty_like(best)
        for k in range(n):
            np.add(rows[:, k : k + 1], d[k], out=tmp)
            np.minimum(best, tmp, out=best)
        bad = best < limit[start:stop]
        if bad.any():
            i, j = np.argwhere(bad)[0]
            return start + int(i), int(j)
        return None

    workers = scan_threads()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for found in pool.map(scan, range(0, n, block)):
            if found is not None:
                i, j = found
                k = int(np.argmin(d[i] + d[:, j]))
                raise ValidationError(
                    f"{name} breaks the triangle inequality at i={i}, k={k}, j={j}"
                    + (f" {tuple(str(labels[x]) for x in (i, k, j))}" if labels is not None else "")
                    + f": d(i,j)={float(d[i, j])!r} > d(i,k)+d(k,j)={float(d[i, k] + d[k, j])!r}"
                )


def check_stochastic(
    matrix: ArrayLike, name: str = "matrix", atol: float = 1e-9, *, square: bool = True
) -> NDArray[np.float64]:
    """A finite, non-negative matrix whose rows sum to 1 within ``atol``; square unless
    ``square=False`` (a channel from n inputs to m outputs, non-empty)."""
    m = np.asarray(matrix)
    if m.dtype == object or not np.issubdtype(m.dtype, np.number):
        raise ValidationError(f"{name} must be a numeric matrix, got dtype {m.dtype}")
    m = m.astype(np.float64, copy=False)
    if square and (m.ndim != 2 or m.shape[0] != m.shape[1]):
        raise ValidationError(f"{name} must be a square matrix, got shape {m.shape}")
    if not square and (m.ndim != 2 or 0 in m.shape):
        raise ValidationError(f"{name} must be a non-empty 2-d matrix, got shape {m.shape}")
    # two passes over a good matrix and no temporary of its size: a NaN or an infinity makes its
    # row's sum non-finite, and the minimum is negative iff an entry is; argwhere on the error path only
    with np.errstate(over="ignore", invalid="ignore"):  # inf + -inf, 1e308 + 1e308: said below
        sums = m.sum(axis=1)
    if not np.isfinite(sums).all():
        bad = np.argwhere(~np.isfinite(m))
        if bad.size:
            i, j = bad[0]
            raise ValidationError(f"{name} is not finite at ({i}, {j}): {m[i, j]}")
    if not m.min() >= 0:
        i, j = np.argwhere(m < 0)[0]
        raise ValidationError(f"{name} has a negative probability at ({i}, {j}): {float(m[i, j])!r}")
    off = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if off.size:
        i = int(off[0])
        raise ValidationError(f"row {i} of {name} sums to {float(sums[i])!r}, not 1 (tolerance {atol})")
    return m


def check_probability_vector(p: ArrayLike, n: int, name: str = "prior", atol: float = 1e-9) -> NDArray[np.float64]:
    """A length-n, non-negative vector summing to 1 within ``atol``."""
    v = np.asarray(p, dtype=np.float64)
    if v.shape != (n,):
        raise ValidationError(f"{name} must have shape ({n},), got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValidationError(f"{name} is not finite at index {int(np.flatnonzero(~np.isfinite(v))[0])}")
    if (v < 0).any():
        i = int(np.flatnonzero(v < 0)[0])
        raise ValidationError(f"{name} is negative at index {i}: {float(v[i])!r}")
    if abs(v.sum() - 1.0) > atol:
        raise ValidationError(f"{name} sums to {float(v.sum())!r}, not 1")
    return v


def check_indices(inputs: ArrayLike, n: int, name: str = "inputs") -> NDArray[np.intp]:
    """A 1-d array of integer indices in 0..n-1 (a scalar becomes a 1-element array)."""
    idx = np.atleast_1d(np.asarray(inputs))
    if idx.ndim != 1:
        raise ValidationError(f"{name} must be an index or a 1-d array of indices, got shape {idx.shape}")
    if not np.issubdtype(idx.dtype, np.integer):
        raise ValidationError(f"{name} must be integer indices, got dtype {idx.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx[(idx < 0) | (idx >= n)][0])
        raise ValidationError(f"{name}: index {bad} is outside 0..{n - 1}")
    return idx.astype(np.intp)
