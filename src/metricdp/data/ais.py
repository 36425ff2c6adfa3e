"""AIS ship tracks shipped by the optional package ``tracktable-data`` (``metricdp[traces]``).

Tracktable (Sandia National Laboratories) ships, in its data package, AIS position reports
of ships (MarineCadastre.gov) as ``.traj`` text files: one trajectory per line,

``*T*,UUID,terrestrial,N,0,*P*,terrestrial,2,1,1,K,[NAME,TYPE]*K,`` then N points of
``OBJECT_ID,YYYY-MM-DD HH:MM:SS,LON,LAT`` followed by K point properties each.

A vessel (its MMSI, the object id) appears in several trajectories; :func:`ais_traces`
returns every fix of a dataset as one person (vessel) / time / lat / lon table, which is
the shape of a person's location trace: a ferry revisits its piers as a person revisits
home and work. Nothing downloads: the files come with the wheel
(``pip install 'metricdp[traces]'``) and are found through :mod:`importlib.resources`.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from .._optional import import_optional
from ..errors import ValidationError
from .embeddings import _is_float

__all__ = ["AIS_DATASETS", "DEFAULT_AIS", "Traces", "ais_path", "ais_traces", "read_traj"]

#: The AIS datasets of ``tracktable-data`` (module ``tracktable_data.python_example_data``):
#: name -> what it holds.
AIS_DATASETS: dict[str, str] = {
    "NYHarbor_2020_12_first_week": "New York harbour, 1-7 December 2020",
    "NYHarbor_2020_12_08": "New York harbour, 8 December 2020",
    "VirginiaBeach_2020_06_04_to_06_filtered": "Virginia Beach, 4-6 June 2020",
    "US_coastal_2020_06_30": "US coastal waters, 30 June 2020",
}

#: The dataset of ``metricdp data ais`` when none is named: a week, so that vessels revisit places.
DEFAULT_AIS = "NYHarbor_2020_12_first_week"

_PACKAGE = "tracktable_data.python_example_data"


@dataclass(frozen=True)
class Traces:
    """Fixes of several persons: ``person[i]`` was at ``(lat[i], lon[i])`` (degrees) at ``time[i]``.

    ``person`` is a string array, ``time`` a ``datetime64[s]`` array; rows are sorted by
    person, then time.
    """

    person: NDArray[np.str_]
    time: NDArray[np.datetime64]
    lat: NDArray[np.float64]
    lon: NDArray[np.float64]

    @property
    def n(self) -> int:
        """Number of fixes."""
        return len(self.person)

    @property
    def persons(self) -> int:
        """Number of distinct persons."""
        return len(np.unique(self.person))


def _fail(path: Path, line: int, message: str) -> ValidationError:
    return ValidationError(f"{path}: line {line}: {message}")


def _count(fields: list[str], i: int, path: Path, line: int, what: str) -> int:
    try:
        value = int(fields[i])
    except (IndexError, ValueError):
        got = fields[i] if i < len(fields) else "nothing"
        raise _fail(path, line, f"{what} must be a count, got {got!r}") from None
    if value < 0:
        raise _fail(path, line, f"{what} must be a count, got {value}")
    return value


def _parse_line(text: str, path: Path, line: int) -> tuple[list[str], list[str], list[str], list[str]]:
    """(object ids, times, lons, lats) of one trajectory line."""
    f = text.rstrip("\r\n").split(",")
    if len(f) < 11 or f[0] != "*T*" or f[5] != "*P*":
        raise _fail(path, line, "not a tracktable trajectory (expected '*T*,UUID,DOMAIN,N,0,*P*,DOMAIN,2,1,1,K,...')")
    n = _count(f, 3, path, line, "the number of points")
    if _count(f, 4, path, line, "the number of trajectory properties") != 0:
        raise _fail(path, line, "trajectory properties are not supported (expected 0)")
    if f[7:10] != ["2", "1", "1"]:
        raise _fail(path, line, f"expected 2-d points with an object id and a time, got {','.join(f[7:10])!r}")
    k = _count(f, 10, path, line, "the number of point properties")
    start, width = 11 + 2 * k, 4 + k
    if len(f) != start + n * width:
        raise _fail(path, line, f"{len(f)} fields for {n} points of {width} fields after {start} header fields")
    body = f[start:]
    return body[0::width], body[1::width], body[2::width], body[3::width]


def read_traj(path: str | PathLike[str]) -> Traces:
    """Every fix of a tracktable ``.traj`` file (the layout of the module docstring), sorted.

    Raises
    ------
    ValidationError
        The file is missing, or a line is not a trajectory of 2-d timed points, or has a
        non-numeric coordinate, a coordinate out of range or an unreadable time (the
        error names the line).
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    ids: list[str] = []
    times: list[str] = []
    lons: list[str] = []
    lats: list[str] = []
    first_line: list[int] = []
    with p.open(encoding="utf-8") as fh:
        for line, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            a, t, x, y = _parse_line(text, p, line)
            first_line.append(len(ids))
            ids += a
            times += t
            lons += x
            lats += y
    lines = np.repeat(np.arange(1, len(first_line) + 1), np.diff([*first_line, len(ids)]))
    try:
        lat = np.array(lats, dtype=np.float64)
        lon = np.array(lons, dtype=np.float64)
    except ValueError:
        bad = next(i for i, (u, v) in enumerate(zip(lats, lons, strict=True)) if not _is_float(u) or not _is_float(v))
        raise _fail(p, int(lines[bad]), f"non-numeric coordinate lat={lats[bad]!r}, lon={lons[bad]!r}") from None
    out = ~(np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90) & (np.abs(lon) <= 180))
    if out.any():
        bad = int(np.flatnonzero(out)[0])
        raise _fail(p, int(lines[bad]), f"coordinate out of range: lat={lats[bad]}, lon={lons[bad]}")
    try:
        time = np.array(times, dtype="datetime64[s]")
    except ValueError:
        bad = next(i for i, t in enumerate(times) if not _is_time(t))
        raise _fail(p, int(lines[bad]), f"unreadable time {times[bad]!r}") from None
    person = np.array(ids, dtype=np.str_)
    order = np.lexsort((time, person))
    return Traces(person=person[order], time=time[order], lat=lat[order], lon=lon[order])


def _is_time(text: str) -> bool:
    try:
        np.datetime64(text, "s")
    except ValueError:
        return False
    return True


def ais_path(name: str = DEFAULT_AIS) -> Path:
    """The installed ``.traj`` file of the AIS dataset ``name`` (one of :data:`AIS_DATASETS`).

    Raises :class:`metricdp.MissingExtraError` naming ``pip install 'metricdp[traces]'``
    when ``tracktable-data`` is not installed.
    """
    if name not in AIS_DATASETS:
        raise ValidationError(f"unknown AIS dataset {name!r}; known: {', '.join(AIS_DATASETS)}")
    import_optional("tracktable_data", "traces")
    from importlib.resources import files

    resource = files(_PACKAGE).joinpath(f"{name}.traj")
    path = Path(str(resource))
    if not path.is_file():  # pragma: no cover - a broken or unpacked-elsewhere install
        raise ValidationError(f"AIS dataset {name!r}: {path} is not installed; reinstall 'metricdp[traces]'")
    return path


def ais_traces(name: str = DEFAULT_AIS) -> Traces:
    """The fixes of the AIS dataset ``name``: person = vessel MMSI, time, lat, lon (degrees).

    Examples
    --------
    >>> t = ais_traces()  # doctest: +SKIP
    >>> t.n, t.persons  # doctest: +SKIP
    """
    return read_traj(ais_path(name))
