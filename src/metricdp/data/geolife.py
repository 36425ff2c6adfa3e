"""Geolife GPS trajectories (Zheng et al., Microsoft Research Asia) and Imola et al.'s bins.

Geolife 1.3 is a folder ``Data/<user>/Trajectory/<time>.plt``; each ``.plt`` file is one
trace: 6 header lines, then one point per line
``lat,lon,0,altitude_ft,days_since_1899,date,time``. The dataset cannot be installed
from a package index, so metricdp ships this loader (tested on fixture files) and the
pipeline of Imola et al. (UAI 2022, experimental setup): 0.005 degree bins; each
trace's 30 most visited bins; a histogram, over traces, of how many traces have each
bin among their top 30; the ``n`` most popular bins.

References
----------
.. [1] Y. Zheng, X. Xie, W.-Y. Ma. "GeoLife: A Collaborative Social Networking Service
   among User, Location and Trajectory." IEEE Data Eng. Bull. 33(2), 2010.
.. [2] J. Imola et al. "Balancing utility and scalability in metric differential
   privacy." UAI 2022.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from .._validation import check_int
from ..errors import ValidationError
from .geo import DEFAULT_CELL, GeoCells, _cell_index, _check_cell, _select, parse_region

__all__ = ["PLT_HEADER_LINES", "geolife_bins", "plt_files", "read_plt"]

#: Header lines at the top of every ``.plt`` file.
PLT_HEADER_LINES = 6

_WORLD = (-90.0, -180.0, 90.0, 180.0)


def read_plt(path: str | PathLike[str]) -> NDArray[np.float64]:
    """The ``(lat, lon)`` points of one Geolife trajectory file, shape (m, 2), degrees.

    The 6 header lines are skipped; only the first two fields of each point line are
    read (a trailing blank line is fine). Coordinates are returned as they are in the
    file, including Geolife's occasional impossible ones; :func:`geolife_bins` drops
    points outside its region.

    Raises
    ------
    ValidationError
        The file is missing, has fewer than 6 header lines, or a point line has fewer
        than two fields or a non-numeric coordinate (the error names the line).
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    try:
        lines = p.read_text(encoding="utf-8", errors="strict").splitlines()
    except UnicodeDecodeError as ex:
        raise ValidationError(f"{p}: not a text file ({ex.reason} at byte {ex.start})") from None
    if len(lines) < PLT_HEADER_LINES:
        raise ValidationError(
            f"{p}: not a Geolife .plt file (expected {PLT_HEADER_LINES} header lines, got {len(lines)} lines)"
        )
    body = lines[PLT_HEADER_LINES:]
    while body and not body[-1].strip():
        body.pop()
    if not body:
        return np.empty((0, 2), dtype=np.float64)
    try:
        # numpy's C parser; the Python loop below only runs to name a bad line.
        points = np.loadtxt(body, delimiter=",", usecols=(0, 1), dtype=np.float64, ndmin=2)
    except ValueError:
        for offset, line in enumerate(body, start=PLT_HEADER_LINES + 1):
            fields = line.split(",")
            if len(fields) < 2:
                raise ValidationError(
                    f"{p}: line {offset} has {len(fields)} field(s), expected lat,lon,..."
                ) from None
            try:
                float(fields[0])
                float(fields[1])
            except ValueError:
                raise ValidationError(
                    f"{p}: line {offset}: latitude/longitude {fields[0]!r},{fields[1]!r} are not numbers"
                ) from None
        raise  # pragma: no cover - loadtxt failed on a body every line of which parses
    bad = ~np.isfinite(points).all(axis=1)
    if bad.any():
        raise ValidationError(f"{p}: line {int(np.flatnonzero(bad)[0]) + PLT_HEADER_LINES + 1} is not finite")
    return points


def plt_files(root_or_files: str | PathLike[str] | Iterable[str | PathLike[str]]) -> list[Path]:
    """The ``.plt`` files of a Geolife folder (searched recursively, sorted), a file, or a list."""
    if isinstance(root_or_files, str | PathLike):
        root = Path(root_or_files)
        if root.is_dir():
            files = sorted(f for f in root.rglob("*") if f.suffix.lower() == ".plt" and f.is_file())
            if not files:
                raise ValidationError(f"{root}: no .plt files in this folder or below")
            return files
        if not root.is_file():
            raise ValidationError(f"{root}: no such file or folder")
        return [root]
    files = [Path(f) for f in root_or_files]
    if not files:
        raise ValidationError("no .plt files given")
    return files


def geolife_bins(
    root_or_files: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    region: str | Sequence[float] | None = "beijing",
    cell: float = DEFAULT_CELL,
    top_regions: int = 30,
    size: int = 200,
) -> GeoCells:
    """Imola et al.'s Geolife geolocation space: the ``size`` most popular bins.

    For each trace (one ``.plt`` file) the points inside ``region`` are binned into
    ``cell``-degree cells (see :mod:`metricdp.data.geo`) and the trace's
    ``top_regions`` cells with the most points are taken (ties: the smaller cell key).
    A cell's weight is the number of traces that have it among their top cells, and
    the ``size`` cells of largest weight are kept (ties as in :mod:`metricdp.data.geo`).

    Parameters
    ----------
    root_or_files : path or iterable of paths
        Geolife's ``Data`` folder (or any folder: ``.plt`` files are found
        recursively), one ``.plt`` file, or a list of them.
    region : str, 4 numbers or None
        Box of the grid (see :func:`~metricdp.data.geo.parse_region`; default the
        ``beijing`` municipality). ``None``: the whole globe, grid anchored at
        (-90, -180).
    cell : float
        Bin side in degrees (default 0.005, as in the paper).
    top_regions : int
        Cells counted per trace (default 30, as in the paper).
    size : int
        Number of bins kept.

    Returns
    -------
    GeoCells
        Unpacks as ``space, weights``: haversine km between bin centres, weights the
        trace counts (decreasing); ``counts`` equals ``weights``.
    """
    if region is None:
        name, box = "the globe", _WORLD
    else:
        name, box = parse_region(region)
    cell = _check_cell(cell)
    top = check_int(top_regions, "top_regions", minimum=1)
    size = check_int(size, "size", minimum=2)
    picked: list[NDArray[np.int64]] = []
    traces = 0
    for f in plt_files(root_or_files):
        points = read_plt(f)
        traces += 1
        if not len(points):
            continue
        _, keys = _cell_index(points[:, 0], points[:, 1], box, cell)
        if not keys.size:
            continue
        cells, visits = np.unique(keys, return_counts=True)
        picked.append(cells[np.lexsort((cells, -visits))[:top]])
    if not picked:
        raise ValidationError(f"none of the {traces} trace(s) has a point in {name} {box}")
    uniq, hist = np.unique(np.concatenate(picked), return_counts=True)
    hist = hist.astype(np.int64)
    where = f"the {traces} Geolife trace(s)" + (f" in {name!r}" if region is not None else "")
    return _select(uniq, hist.astype(np.float64), hist, box, cell, size, "visits", where)
