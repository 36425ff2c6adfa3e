r"""ConstOPTMech's replacement function: which entries of the mechanism are LP variables.

A *replacement function* :math:`I` names, for every output :math:`v`, the inputs
:math:`u \in I(v)` whose probability :math:`M[u,v]` is free (Imola et al., UAI 2022,
Section 4); the paper's choice is :math:`I_{NN,r}` (:func:`nearest_neighbour_replacement`),
a user may give any set (:func:`free_mask`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..._validation import check_int
from ...errors import ValidationError
from ...spaces import MetricSpace

__all__ = ["free_mask", "nearest_neighbour_replacement"]


def nearest_neighbour_replacement(space: MetricSpace, r: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    r"""The paper's replacement function :math:`I_{NN,r}` as (free rows, free columns).

    :math:`u \in I_{NN,r}(v)` iff :math:`v` is one of the ``r`` nearest neighbours of
    :math:`u` (``u`` itself excluded, ties broken by the smaller index, as
    :meth:`MetricSpace.neighbours`). Entry ``k`` of the result says that
    ``M[rows[k], cols[k]]`` is a free LP variable; there are exactly ``n r`` of them and
    the diagonal is never free.

    Examples
    --------
    >>> from metricdp.spaces import MetricSpace
    >>> s = MetricSpace.from_points([[0.0], [1.0], [3.0]])
    >>> rows, cols = nearest_neighbour_replacement(s, 1)
    >>> rows.tolist(), cols.tolist()
    ([0, 1, 2], [1, 0, 1])
    """
    nb = space.neighbours(r)
    rows = np.repeat(np.arange(space.n, dtype=np.intp), nb.shape[1])
    return rows, np.ascontiguousarray(nb.ravel(), dtype=np.intp)


def free_mask(space: MetricSpace, replacement: object, neighbours: object) -> NDArray[np.bool_]:
    """The (n, n) mask of free entries, from ``replacement`` or the default I_NN,r."""
    n = space.n
    if replacement is None:
        r = min(check_int(neighbours, "neighbours", minimum=0), n - 1)  # r >= n - 1: all free
        rows, cols = nearest_neighbour_replacement(space, r)
    elif isinstance(replacement, np.ndarray) and replacement.ndim == 2:
        if replacement.dtype != np.bool_:
            raise ValidationError(
                "replacement as a matrix must be a boolean (n, n) mask (True = free entry), "
                f"got dtype {replacement.dtype}"
            )
        if replacement.shape != (n, n):
            raise ValidationError(f"replacement mask must have shape ({n}, {n}), got {replacement.shape}")
        return np.array(replacement, dtype=bool)
    elif isinstance(replacement, tuple | list) and len(replacement) == 2:
        rows, cols = (np.asarray(a) for a in replacement)
        for name, a in (("rows", rows), ("cols", cols)):
            if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
                raise ValidationError(f"replacement {name} must be a 1-d integer array, got shape {a.shape} {a.dtype}")
        if rows.shape != cols.shape:
            raise ValidationError(f"replacement rows and cols differ in length: {rows.size} != {cols.size}")
        bad = (rows < 0) | (rows >= n) | (cols < 0) | (cols >= n)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValidationError(f"replacement entry {k} = ({rows[k]}, {cols[k]}) is outside 0..{n - 1}")
    else:
        raise ValidationError(
            "replacement must be None, a boolean (n, n) mask, or a pair (rows, cols) of index arrays, "
            f"got {type(replacement).__name__}"
        )
    mask = np.zeros((n, n), dtype=bool)
    mask[rows.astype(np.intp), cols.astype(np.intp)] = True
    return mask
