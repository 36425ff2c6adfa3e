"""Location check-ins (Gowalla, Foursquare, or any ``user,time,lat,lon`` CSV).

Accepted layouts, recognised from the first non-blank line:

* **a header** naming the columns, comma- or tab-separated, in any order, with extra
  columns ignored. Recognised names (case-insensitive): user -- ``user``, ``userid``,
  ``user_id``, ``uid``; time -- ``time``, ``timestamp``, ``utctimestamp``,
  ``check-in time``, ``checkin_time``, ``datetime``; latitude -- ``lat``, ``latitude``;
  longitude -- ``lon``, ``lng``, ``long``, ``longitude``.
* **Gowalla's raw file** (SNAP ``loc-gowalla_totalCheckins.txt``): no header, tab-
  separated ``user, time, latitude, longitude, location id``.
* **Foursquare's raw file** (``dataset_TSMC2014_NYC.txt`` / ``_TKY``): no header, 8
  tab-separated columns ``user, venue, category id, category, latitude, longitude,
  timezone offset, UTC time``.

Times become ``datetime64[s]`` in UTC: ISO 8601 (``2010-10-19T23:55:27Z``; a trailing
``Z`` is dropped, other offsets are applied), Foursquare's ``Tue Apr 03 18:00:09 +0000
2012``, or Unix seconds.

References
----------
.. [1] E. Cho, S. A. Myers, J. Leskovec. "Friendship and mobility: user movement in
   location-based social networks." KDD 2011 (Gowalla).
.. [2] D. Yang, D. Zhang, V. W. Zheng, Z. Yu. "Modeling user activity preference by
   leveraging user spatial temporal characteristics in LBSNs." IEEE TSMC 2015
   (Foursquare TSMC2014).
"""

from __future__ import annotations

import csv
import itertools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from .._validation import check_int
from ..errors import ValidationError
from .geo import DEFAULT_CELL, GeoCells, cells_from_points

__all__ = ["Checkins", "checkin_cells", "read_checkins"]

_ALIASES = {
    "user": ("user", "userid", "user_id", "uid", "user id"),
    "time": ("time", "timestamp", "utctimestamp", "check-in time", "checkin_time", "checkin time",
             "datetime"),
    "lat": ("lat", "latitude"),
    "lon": ("lon", "lng", "long", "longitude"),
}
_GOWALLA = {"user": 0, "time": 1, "lat": 2, "lon": 3}
_FOURSQUARE = {"user": 0, "lat": 4, "lon": 5, "time": 7}
_FOURSQUARE_TIME = "%a %b %d %H:%M:%S %z %Y"


@dataclass(frozen=True, eq=False, repr=False)
class Checkins:
    """Check-ins as parallel arrays, in file order.

    Attributes
    ----------
    user : ndarray of str, shape (m,)
    time : ndarray of datetime64[s], shape (m,), UTC
    lat, lon : ndarray of float64, shape (m,), degrees
    """

    user: NDArray[np.str_]
    time: NDArray[np.datetime64]
    lat: NDArray[np.float64]
    lon: NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.lat)

    @property
    def users(self) -> int:
        """Number of distinct users."""
        return len(np.unique(self.user))

    def __repr__(self) -> str:
        span = f", {self.time.min()} .. {self.time.max()}" if len(self) else ""
        return f"Checkins(n={len(self)}, users={self.users}{span})"


def _columns(fields: list[str]) -> dict[str, int] | None:
    """Column of each of user/time/lat/lon when ``fields`` is a header, else None."""
    names = [f.strip().lower() for f in fields]
    found: dict[str, int] = {}
    for key, aliases in _ALIASES.items():
        for i, name in enumerate(names):
            if name in aliases:
                found[key] = i
                break
    if "lat" in found and "lon" in found:
        return found
    return None


def _parse_times(raw: list[str], lines: list[int], p: Path) -> NDArray[np.datetime64]:
    """Vectorised ISO parse; one value at a time only for other formats or to name a bad line."""
    cleaned = [t.strip().removesuffix("Z") for t in raw]
    try:
        # numpy only warns on (and ignores) a UTC offset: make that a failure too.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return np.array(cleaned, dtype="datetime64[s]")
    except (ValueError, UserWarning, DeprecationWarning):
        pass
    out = np.empty(len(raw), dtype="datetime64[s]")
    for i, text in enumerate(cleaned):
        out[i] = _parse_time(text, lines[i], p)
    return out


def _parse_time(text: str, line: int, p: Path) -> np.datetime64:
    if text.isdigit():
        return np.datetime64(int(text), "s")
    for parse in (datetime.fromisoformat, lambda s: datetime.strptime(s, _FOURSQUARE_TIME)):
        try:
            moment = parse(text)
        except ValueError:
            continue
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        return np.datetime64(moment, "s")
    raise ValidationError(
        f"{p}: line {line}: time {text!r} is not ISO 8601, Foursquare's 'Tue Apr 03 18:00:09 +0000 2012' "
        "or Unix seconds"
    )


def read_checkins(path: str | PathLike[str], *, limit: int | None = None) -> Checkins:
    try:
        return _read_checkins(path, limit=limit)
    except UnicodeDecodeError as ex:  # a binary file, or another encoding
        raise ValidationError(f"{path}: not a UTF-8 text file ({ex.reason})") from None


def _read_checkins(path: str | PathLike[str], *, limit: int | None = None) -> Checkins:
    """Read a check-in file (see the module docstring for the layouts).

    Parameters
    ----------
    path : path-like
        UTF-8 text (a byte-order mark is ignored).
    limit : int, optional
        Read at most this many check-ins.

    Returns
    -------
    Checkins

    Raises
    ------
    ValidationError
        Naming the file and line: an unrecognised layout, too few fields, a latitude or
        longitude that is not a number or out of range, or an unreadable time.
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    lim = None if limit is None else check_int(limit, "limit", minimum=1)
    users: list[str] = []
    times: list[str] = []
    lats: list[float] = []
    lons: list[float] = []
    lines: list[int] = []
    with p.open(newline="", encoding="utf-8-sig") as fh:
        first, start = "", 0
        for start, first in enumerate(fh, start=1):  # noqa: B007 - both are used after the loop
            if first.strip():
                break
        if not first.strip():
            raise ValidationError(f"{p}: empty file")
        delimiter = "\t" if "\t" in first else ","
        fields = next(csv.reader([first], delimiter=delimiter))
        cols = _columns(fields)
        pending: list[str] = []
        if cols is None:
            if delimiter == "\t" and len(fields) == 8:
                cols = _FOURSQUARE
            elif len(fields) in (4, 5):
                cols = _GOWALLA
            else:
                raise ValidationError(
                    f"{p}: line {start}: cannot tell the columns; expected a header naming "
                    "user,time,lat,lon, Gowalla's 5 tab-separated columns or Foursquare's 8"
                )
            pending = [first]  # no header: the first line is data
        if "user" not in cols or "time" not in cols:
            missing = " and ".join(k for k in ("user", "time") if k not in cols)
            raise ValidationError(f"{p}: line {start}: the header has no {missing} column")
        need = max(cols.values()) + 1
        iu, it, ila, ilo = cols["user"], cols["time"], cols["lat"], cols["lon"]
        line_no = start - 1 if pending else start
        reader = csv.reader(itertools.chain(pending, fh), delimiter=delimiter)
        for row in reader:
            line_no += 1
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) < need:
                raise ValidationError(
                    f"{p}: line {line_no} has {len(row)} field(s), expected at least {need}"
                )
            try:
                la, lo = float(row[ila]), float(row[ilo])
            except ValueError:
                raise ValidationError(
                    f"{p}: line {line_no}: latitude/longitude {row[ila]!r},{row[ilo]!r} are not numbers"
                ) from None
            if not (-90 <= la <= 90 and -180 <= lo <= 180):
                raise ValidationError(
                    f"{p}: line {line_no}: ({la}, {lo}) is not a latitude/longitude in degrees"
                )
            users.append(row[iu].strip())
            times.append(row[it])
            lats.append(la)
            lons.append(lo)
            lines.append(line_no)
            if lim is not None and len(lats) >= lim:
                break
    if not lats:
        raise ValidationError(f"{p}: no check-ins")
    return Checkins(
        np.array(users, dtype=str),
        _parse_times(times, lines, p),
        np.array(lats, dtype=np.float64),
        np.array(lons, dtype=np.float64),
    )


read_checkins.__doc__ = _read_checkins.__doc__


def checkin_cells(
    checkins: Checkins,
    region: str | Sequence[float],
    *,
    cell: float = DEFAULT_CELL,
    size: int = 200,
) -> GeoCells:
    """The ``size`` cells with the most check-ins in a region (see :mod:`metricdp.data.geo`).

    Weights are check-in counts per cell (decreasing); haversine km between centres.
    """
    if not isinstance(checkins, Checkins):
        raise ValidationError(f"checkins must be a Checkins, got {type(checkins).__name__}")
    return cells_from_points(checkins.lat, checkins.lon, region=region, cell=cell, size=size)
