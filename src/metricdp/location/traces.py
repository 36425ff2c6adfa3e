r"""Attacks on released location traces, and the utility left in them.

A trace is a person's sequence of fixes (lat, lon); a release replaces each fix by a
noisy one. The functions here take the true and the released fixes *paired* row by row
(:func:`pair_traces`: one key per fix, e.g. its time) and measure:

* **the averaging attack** (:func:`averaging_attack`): a person revisits a few places;
  the mean of k independent planar Laplace releases of one place is off by about
  :math:`\sqrt{6}/(\varepsilon\sqrt{k})` (root mean square: the noise is centred and its
  Gamma(2, 1/eps) radius has :math:`E\rho^2 = 6/\varepsilon^2`). The attacker clusters each
  person's releases (:func:`top_places`), and each estimated place is compared with the
  person's *true* top places, found the same way from the true fixes;
* **the Bayes-optimal adversary per place** (:func:`place_adversary`): the library's
  adversary (:func:`metricdp.adversary.adversary_error`) on each person's true top places,
  with the person's visit frequencies as the prior and one release of a place as the
  observation;
* **utility**: the displacement of each fix (:func:`displacement_km`), the error of each
  person's trip length (:func:`trip_length_error`) and of the visit counts per cell of a
  fixed public grid (:func:`visit_count_error`, total variation).

All distances are great-circle km on the sphere of the ``haversine`` metric; clustering
works in a local equirectangular plane around each person (post-processing, no privacy
claim rests on it). Everything is deterministic: no randomness is drawn here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_epsilon, check_int, check_number
from ..adversary import adversary_error
from ..errors import ValidationError
from ..spaces import EARTH_RADIUS_KM, haversine_km, haversine_rows_km
from .projection import check_latlon, equirectangular

__all__ = [
    "AttackResult",
    "PairedTraces",
    "PlaceAdversary",
    "TopPlaces",
    "TripLengthError",
    "VisitCountError",
    "attack_radius",
    "averaging_attack",
    "displacement_km",
    "evaluate_traces",
    "grid_cells",
    "pair_traces",
    "place_adversary",
    "read_traces",
    "top_places",
    "trip_length_error",
    "visit_count_error",
]


# ------------------------------------------------------------------------------ pairing
@dataclass(frozen=True)
class PairedTraces:
    """True and released fixes, row i of both for the same person and key.

    Rows are grouped by person (sorted) and ordered by key inside a person: numerically
    when every key is a number, else as text (ISO 8601 times sort as text).
    """

    person: NDArray[np.str_]
    key: NDArray[np.str_]
    true: NDArray[np.float64]
    released: NDArray[np.float64]

    def groups(self) -> list[tuple[str, slice]]:
        """``(person, rows)`` for each person, in order."""
        if not len(self.person):
            return []
        cut = np.flatnonzero(self.person[1:] != self.person[:-1]) + 1
        starts, ends = np.r_[0, cut], np.r_[cut, len(self.person)]
        return [(str(self.person[s]), slice(int(s), int(e))) for s, e in zip(starts, ends, strict=True)]


def _index(person: NDArray[np.str_], key: NDArray[np.str_], side: str) -> dict[tuple[str, str], int]:
    seen: dict[tuple[str, str], int] = {}
    for i, pk in enumerate(zip(person.tolist(), key.tolist(), strict=True)):
        j = seen.setdefault(pk, i)
        if j != i:
            raise ValidationError(f"{side} fixes: person {pk[0]!r} has key {pk[1]!r} twice (rows {j} and {i}); "
                                  "each person's fixes need distinct keys")
    return seen


def _order(key: NDArray[np.str_]) -> NDArray[np.float64] | NDArray[np.str_]:
    try:
        numbers = np.array([float(k) for k in key.tolist()], dtype=np.float64)
    except ValueError:
        return key
    return numbers if np.isfinite(numbers).all() else key


def pair_traces(
    true_person: ArrayLike,
    true_key: ArrayLike,
    true_latlon: ArrayLike,
    released_person: ArrayLike,
    released_key: ArrayLike,
    released_latlon: ArrayLike,
) -> PairedTraces:
    """Pair true and released fixes by (person, key): every true fix needs exactly one release.

    Raises
    ------
    ValidationError
        Lengths differ, a coordinate is not (lat, lon) in degrees, a (person, key) occurs
        twice on one side, or occurs on one side only (the first such fix is named).

    Examples
    --------
    >>> p = pair_traces(["a", "a"], ["2", "1"], [[0, 0], [0, 1]], ["a", "a"], ["1", "2"], [[0, 1], [0, 0]])
    >>> p.key.tolist(), p.true.tolist() == p.released.tolist()
    (['1', '2'], True)
    """
    sides = []
    for side, person, key, latlon in (("true", true_person, true_key, true_latlon),
                                      ("released", released_person, released_key, released_latlon)):
        pts, _ = check_latlon(np.atleast_2d(np.asarray(latlon, dtype=np.float64)), name=f"{side} latlon")
        p = np.asarray(person).astype(np.str_).reshape(-1)
        k = np.asarray(key).astype(np.str_).reshape(-1)
        if not (len(p) == len(k) == len(pts)):
            raise ValidationError(f"{side} fixes: {len(p)} persons, {len(k)} keys and {len(pts)} coordinates; "
                                  "expected one of each per fix")
        sides.append((p, k, pts, _index(p, k, side)))
    (tp, tk, tpts, tindex), (_, _, rpts, rindex) = sides
    for (side, index), (other, other_index) in ((("true", tindex), ("released", rindex)),
                                                (("released", rindex), ("true", tindex))):
        for pk, i in index.items():
            if pk not in other_index:
                raise ValidationError(f"{side} fixes: person {pk[0]!r}, key {pk[1]!r} (row {i}) has no {other} fix")
    match = np.array([rindex[pk] for pk in zip(tp.tolist(), tk.tolist(), strict=True)], dtype=np.intp)
    order = np.lexsort((_order(tk), tp))
    return PairedTraces(person=tp[order], key=tk[order], true=tpts[order], released=rpts[match][order])


def read_traces(path: str | PathLike[str], *, person: str, key: str, lat: str = "lat", lon: str = "lon",
                ) -> tuple[NDArray[np.str_], NDArray[np.str_], NDArray[np.float64]]:
    """``(person, key, latlon)`` from the named columns of a CSV or Parquet file.

    Read by the format's own reader (:mod:`metricdp.tabular.formats`), which says where each row
    is (a text format's line, a typed format's data row). Raises :class:`ValidationError` naming
    the file and the missing column, or the file, line (or data row) and value of a non-numeric
    or empty coordinate.
    """
    from ..io import parse_decimal
    from ..tabular.csv import DEFAULT_CHUNK_BYTES
    from ..tabular.formats import RELEASE_FORMATS, TABLE_FORMATS, format_of

    p = Path(path)
    fmt = RELEASE_FORMATS[format_of(p, TABLE_FORMATS)]
    if not p.is_file():
        raise ValidationError(f"{p}: no such file")
    names = (person, key, lat, lon)
    cols: list[list[str]] = [[] for _ in names]
    places: list[NDArray[np.int64]] = []
    unit = "row"
    with fmt.open(p, chunk_rows=1 << 16, chunk_bytes=DEFAULT_CHUNK_BYTES, max_record=None) as reader:
        header = list(reader.names)
        missing = [c for c in names if c not in header]
        if missing:
            raise ValidationError(f"{p}: no column {missing[0]!r} (columns: {', '.join(map(repr, header))})")
        for chunk in reader.chunks():
            for j, c in enumerate(names):
                cols[j] += ["" if v is None else str(v) for v in chunk.column(c).to_pylist()]
            places.append(chunk.places(np.arange(chunk.rows)))
            unit = chunk.unit
    at = np.concatenate(places) if places else np.zeros(0, dtype=np.int64)
    coords = np.empty((len(cols[0]), 2))
    for j, c in enumerate((lat, lon)):
        for i, text in enumerate(cols[2 + j]):
            try:
                coords[i, j] = parse_decimal(text)
            except ValueError:
                raise ValidationError(f"{p}: {_where(unit, at[i])}: column {c!r} is not a number: {text!r}") from None
            if not abs(coords[i, j]) <= (90, 180)[j]:  # also NaN
                raise ValidationError(f"{p}: {_where(unit, at[i])}: column {c!r} is not a "
                                      f"{('latitude', 'longitude')[j]} in degrees: {text!r}")
    return np.array(cols[0], dtype=np.str_), np.array(cols[1], dtype=np.str_), coords


def _where(unit: str, place: int) -> str:
    """Where a row is, as its reader counts it (:attr:`~metricdp.tabular.formats.Chunk.unit`: a line of a text
    format, a 1-based data row of a typed one)."""
    return f"{'line' if unit == 'line' else 'data row'} {int(place)}"


# ------------------------------------------------------------------------------ utility
def displacement_km(paired: PairedTraces) -> NDArray[np.float64]:
    """The distance (km) between each true fix and its release."""
    return haversine_rows_km(paired.true, paired.released)


@dataclass(frozen=True)
class TripLengthError:
    """Per person: the length (km) of the true and the released trip, and the error.

    ``relative`` is ``abs_error / true_km``, NaN for a person who did not move.
    """

    persons: tuple[str, ...]
    true_km: NDArray[np.float64]
    released_km: NDArray[np.float64]

    @property
    def abs_error(self) -> NDArray[np.float64]:
        """``|released_km - true_km|``."""
        return np.abs(self.released_km - self.true_km)

    @property
    def relative(self) -> NDArray[np.float64]:
        """``abs_error / true_km`` (NaN where ``true_km`` is 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.true_km > 0, self.abs_error / np.where(self.true_km > 0, self.true_km, 1), np.nan)


def trip_length_error(paired: PairedTraces) -> TripLengthError:
    """Each person's trip length: the sum of the legs between consecutive fixes (in key order).

    Examples
    --------
    One person, two fixes 1 degree of latitude apart (111.195 km), released on the same spot:

    >>> p = pair_traces(["a", "a"], [1, 2], [[0, 0], [1, 0]], ["a", "a"], [1, 2], [[0, 0], [0, 0]])
    >>> e = trip_length_error(p)
    >>> round(float(e.true_km[0]), 3), float(e.released_km[0]), float(e.relative[0])
    (111.195, 0.0, 1.0)
    """
    groups = paired.groups()
    lengths = np.zeros((2, len(groups)))
    for g, (_, rows) in enumerate(groups):
        for s, pts in enumerate((paired.true[rows], paired.released[rows])):
            lengths[s, g] = haversine_rows_km(pts[:-1], pts[1:]).sum() if len(pts) > 1 else 0.0
    return TripLengthError(tuple(name for name, _ in groups), lengths[0], lengths[1])


def grid_cells(latlon: NDArray[np.float64], cell_km: float) -> NDArray[np.int64]:
    r"""The cell (row, column) of each point in a fixed public grid of about ``cell_km`` squares.

    Rows are bands of :math:`h = \mathrm{cell\_km}/(R\pi/180)` degrees of latitude from the
    equator; in band i the columns are :math:`h/\cos\varphi_i` degrees of longitude wide
    (:math:`\varphi_i` the band's middle latitude), from longitude 0. The grid depends on
    ``cell_km`` only, never on the data.
    """
    h = cell_km / (EARTH_RADIUS_KM * math.pi / 180)
    row = np.floor(latlon[:, 0] / h)
    mid = np.clip((row + 0.5) * h, -89.999, 89.999)
    col = np.floor(latlon[:, 1] * np.cos(np.radians(mid)) / h)
    return np.column_stack([row, col]).astype(np.int64)


@dataclass(frozen=True)
class VisitCountError:
    """Visit counts per grid cell: the total variation between the true and released
    histograms (0: identical, 1: disjoint), the L1 distance of the counts, the cells used."""

    total_variation: float
    l1_counts: int
    cells: int
    cell_km: float


def visit_count_error(paired: PairedTraces, cell_km: float = 1.0) -> VisitCountError:
    """Compare how many fixes fall in each cell of :func:`grid_cells`, true against released.

    Examples
    --------
    Two fixes in one cell; one release stays, the other moves about 10 km away:

    >>> p = pair_traces(["a", "a"], [1, 2], [[0.001, 0.001], [0.002, 0.002]],
    ...                 ["a", "a"], [1, 2], [[0.001, 0.001], [0.092, 0.002]])
    >>> e = visit_count_error(p, cell_km=1.0)
    >>> e.total_variation, e.l1_counts, e.cells
    (0.5, 2, 2)
    """
    cell_km = check_number(cell_km, "cell_km", minimum=0, open_minimum=True)
    cells = np.vstack([grid_cells(paired.true, cell_km), grid_cells(paired.released, cell_km)])
    _, inverse = np.unique(cells, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    n = len(paired.true)
    size = int(inverse.max()) + 1 if n else 0
    true_counts = np.bincount(inverse[:n], minlength=size)
    rel_counts = np.bincount(inverse[n:], minlength=size)
    l1 = int(np.abs(true_counts - rel_counts).sum())
    return VisitCountError(total_variation=l1 / (2 * n) if n else 0.0, l1_counts=l1, cells=size, cell_km=cell_km)


# ------------------------------------------------------------------------------ places
@dataclass(frozen=True)
class TopPlaces:
    """A person's top places: ``centres[j]`` (lat, lon) gathered ``counts[j]`` fixes, densest first."""

    centres: NDArray[np.float64]
    counts: NDArray[np.int64]


def top_places(latlon: ArrayLike, k: int, radius_km: float, *, min_visits: int = 1) -> TopPlaces:
    """The (at most) ``k`` densest places of a set of fixes, by a deterministic greedy clustering.

    Repeat k times: take the fix with the most fixes within ``radius_km`` (the first one on
    a tie), move to the mean of the fixes within ``radius_km`` until that set stops
    changing (mean shift with a flat kernel, at most 50 steps), record the mean and its
    count, and remove those fixes. Stop early when the densest fix has fewer than
    ``min_visits`` fixes around it. A dense place is found whatever the outliers (a
    k-means centre would be dragged by them). Distances are planar in the equirectangular
    projection at the fixes' median latitude (accurate to well under 1% over a city).

    Examples
    --------
    >>> pl = top_places([[0, 0], [0, 0.0001], [1, 1]], 2, radius_km=1.0)
    >>> pl.counts.tolist(), pl.centres.round(5).tolist()
    ([2, 1], [[0.0, 5e-05], [1.0, 1.0]])
    """
    from scipy.spatial import cKDTree

    k = check_int(k, "k", minimum=1)
    radius = check_number(radius_km, "radius_km", minimum=0, open_minimum=True)
    min_visits = check_int(min_visits, "min_visits", minimum=1)
    pts, _ = check_latlon(np.atleast_2d(np.asarray(latlon, dtype=np.float64)), name="latlon")
    if not len(pts):
        return TopPlaces(np.empty((0, 2)), np.empty(0, dtype=np.int64))
    lat0 = float(np.median(pts[:, 0]))
    lon0 = float(np.median(pts[:, 1]))
    shifted = np.column_stack([pts[:, 0], (pts[:, 1] - lon0 + 180) % 360 - 180])  # no seam at the antimeridian
    xy = equirectangular(shifted, lat0)
    alive = np.ones(len(xy), dtype=bool)
    centres, counts = [], []
    for _ in range(k):
        idx = np.flatnonzero(alive)
        if not len(idx):
            break
        tree = cKDTree(xy[idx])
        density = tree.query_ball_point(xy[idx], radius, return_length=True)
        best = int(np.argmax(density))
        if density[best] < min_visits:
            break
        members = np.asarray(tree.query_ball_point(xy[idx[best]], radius), dtype=np.intp)
        for _ in range(50):
            centre = xy[idx[members]].mean(axis=0)
            moved = np.sort(np.asarray(tree.query_ball_point(centre, radius), dtype=np.intp))
            if not len(moved) or np.array_equal(moved, np.sort(members)):
                break
            members = moved
        centre = xy[idx[members]].mean(axis=0)
        centres.append(centre)
        counts.append(len(members))
        alive[idx[members]] = False
    if not centres:
        return TopPlaces(np.empty((0, 2)), np.empty(0, dtype=np.int64))
    back = np.column_stack([np.degrees(np.asarray(centres)[:, 1] / EARTH_RADIUS_KM),
                            np.degrees(np.asarray(centres)[:, 0] / (EARTH_RADIUS_KM * math.cos(math.radians(lat0))))])
    back[:, 1] = (back[:, 1] + lon0 + 180) % 360 - 180
    return TopPlaces(back, np.asarray(counts, dtype=np.int64))


@dataclass(frozen=True)
class AttackResult:
    """The averaging attack: ``errors_km[j]`` is the distance from estimated place j to the
    true top place it is matched with, a place of person ``place_person[j]``;
    ``person_error_km[i]`` the mean over person ``persons[i]``'s places."""

    persons: tuple[str, ...]
    person_error_km: NDArray[np.float64]
    errors_km: NDArray[np.float64]
    place_person: NDArray[np.intp]

    def summary(self) -> dict[str, Any]:
        """Median and mean error over places and over persons (None when there is no place)."""
        def stats(a: NDArray[np.float64]) -> dict[str, float | None]:
            return {"median_km": float(np.median(a)) if len(a) else None,
                    "mean_km": float(a.mean()) if len(a) else None}

        return {"persons": len(self.persons), "places": len(self.errors_km),
                "per_place": stats(self.errors_km), "per_person": stats(self.person_error_km)}


def _true_places(paired: PairedTraces, radius: float, max_places: int, min_visits: int,
                 ) -> list[tuple[str, slice, TopPlaces]]:
    out = []
    for name, rows in paired.groups():
        places = top_places(paired.true[rows], max_places, radius, min_visits=min_visits)
        if len(places.counts):
            out.append((name, rows, places))
    return out


def attack_radius(place_radius_km: float, epsilon_per_km: float | None) -> float:
    """The attacker's clustering radius: the place radius, widened to the noise's mean
    radius :math:`2/\\varepsilon` when the attacker knows epsilon (the mechanism is public)."""
    if epsilon_per_km is None:
        return place_radius_km
    return max(place_radius_km, 2.0 / check_epsilon(epsilon_per_km, "epsilon_per_km"))


def averaging_attack(
    paired: PairedTraces,
    *,
    epsilon_per_km: float | None = None,
    place_radius_km: float = 0.5,
    max_places: int = 3,
    min_visits: int = 5,
) -> AttackResult:
    r"""Estimate each person's top places from their releases; the error against the true ones.

    For each person: the true top places are :func:`top_places` of the true fixes (at most
    ``max_places``, each with at least ``min_visits`` fixes within ``place_radius_km``);
    a person with none is left out. The attacker, told how many places there are (k),
    runs :func:`top_places` with k on the releases at radius :func:`attack_radius`, and
    each estimate is matched to a true place by the assignment of least total distance
    (Hungarian method); its error is the distance to that place.

    For k independent releases of one place the estimate is about the mean of the releases,
    whose distance to the place shrinks like :math:`1/\sqrt{k}`: the planar Laplace noise
    is centred with :math:`E\rho^2 = 6/\varepsilon^2`, so the mean's squared error is
    :math:`6/(k\varepsilon^2)` (the flat-kernel trimming keeps the order).
    """
    from scipy.optimize import linear_sum_assignment

    radius = check_number(place_radius_km, "place_radius_km", minimum=0, open_minimum=True)
    max_places = check_int(max_places, "max_places", minimum=1)
    min_visits = check_int(min_visits, "min_visits", minimum=1)
    wide = attack_radius(radius, epsilon_per_km)
    persons: list[str] = []
    person_error: list[float] = []
    errors: list[float] = []
    owner: list[int] = []
    for name, rows, truth in _true_places(paired, radius, max_places, min_visits):
        guess = top_places(paired.released[rows], len(truth.counts), wide)
        cost = haversine_km(guess.centres, truth.centres)  # (guessed place, true place)
        r, c = linear_sum_assignment(cost)
        e = cost[r, c]
        owner += [len(persons)] * len(e)
        persons.append(name)
        person_error.append(float(e.mean()))
        errors += e.tolist()
    return AttackResult(tuple(persons), np.asarray(person_error, dtype=np.float64),
                        np.asarray(errors, dtype=np.float64), np.asarray(owner, dtype=np.intp))


@dataclass(frozen=True)
class PlaceAdversary:
    """Per person with at least two top places: the Bayes-optimal adversary's expected error
    (km) and re-identification probability for one release of a place, and the same
    without seeing the release (the prior alone)."""

    persons: tuple[str, ...]
    expected_error_km: NDArray[np.float64]
    reidentification: NDArray[np.float64]
    prior_error_km: NDArray[np.float64]
    prior_reidentification: NDArray[np.float64]


def _laplace_matrix(centres: NDArray[np.float64], epsilon: float, cells: int) -> tuple[NDArray, NDArray]:
    """Planar Laplace from each place, rounded to a ``cells`` x ``cells`` grid; the places' distances."""
    lat0 = float(centres[:, 0].mean())
    xy = equirectangular(centres, lat0)
    reach = 8.0 / epsilon  # the noise leaves the box with probability <= (1 + 8) e^-8 < 0.4%
    lo, hi = xy.min(axis=0) - reach, xy.max(axis=0) + reach
    side = float((hi - lo).max()) / cells
    axis = (np.arange(cells) + 0.5) * side
    gx, gy = np.meshgrid(lo[0] + axis, lo[1] + axis)
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    d = np.sqrt(((xy[:, None, :] - grid[None, :, :]) ** 2).sum(axis=2))
    m = np.exp(-epsilon * d)
    m /= m.sum(axis=1, keepdims=True)
    places = np.sqrt(((xy[:, None, :] - xy[None, :, :]) ** 2).sum(axis=2))
    return m, places


def place_adversary(
    paired: PairedTraces,
    epsilon_per_km: float,
    *,
    place_radius_km: float = 0.5,
    max_places: int = 3,
    min_visits: int = 5,
    cells: int = 120,
) -> PlaceAdversary:
    r"""The Bayes-optimal adversary of :mod:`metricdp.adversary` applied to each person's places.

    The inputs are the person's true top places (as in :func:`averaging_attack`), the prior
    is how often the person is at each (the counts of :func:`top_places`, normalised), and
    the mechanism is one planar Laplace release at ``epsilon_per_km`` rounded to a
    ``cells`` x ``cells`` grid around the places (reaching :math:`8/\varepsilon` beyond
    them; the rows are renormalised over that box, which holds all but
    :math:`(1+8)e^{-8} < 0.4\%` of each row). :func:`metricdp.adversary.adversary_error`
    then gives AE, the least expected distance from the true place to the adversary's
    guess, and RI, the probability that its MAP guess names the true place. Rounding to
    cells is post-processing, so the adversary is at most as good as one seeing the exact
    release (AE from above, RI from below, up to the grid's resolution). This is the
    attacker of *one* release; :func:`averaging_attack` is the one of many.
    """
    epsilon = check_epsilon(epsilon_per_km, "epsilon_per_km")
    radius = check_number(place_radius_km, "place_radius_km", minimum=0, open_minimum=True)
    cells = check_int(cells, "cells", minimum=2)
    rows_out: list[tuple[str, float, float, float, float]] = []
    for name, _, truth in _true_places(paired, radius, check_int(max_places, "max_places", minimum=1),
                                       check_int(min_visits, "min_visits", minimum=1)):
        if len(truth.counts) < 2:
            continue
        matrix, dist = _laplace_matrix(truth.centres, epsilon, cells)
        prior = truth.counts / truth.counts.sum()
        result = adversary_error(matrix, dist, prior)
        rows_out.append((name, result.expected_error, result.reidentification,
                         float((prior @ dist).min()), float(prior.max())))
    cols = list(zip(*rows_out, strict=True)) if rows_out else [(), (), (), (), ()]
    return PlaceAdversary(tuple(cols[0]), *(np.asarray(c, dtype=np.float64) for c in cols[1:]))


# ------------------------------------------------------------------------------ report
def _number(x: float) -> float | None:
    """``x``, or None for NaN (no value: a person who did not move has no relative trip error)."""
    return None if math.isnan(x) else float(x)


def _stats(a: NDArray[np.float64]) -> dict[str, float | None]:
    a = a[np.isfinite(a)]
    if not len(a):
        return {"median": None, "mean": None}
    return {"median": float(np.median(a)), "mean": float(a.mean())}


def evaluate_traces(
    paired: PairedTraces,
    *,
    epsilon_per_km: float | None = None,
    place_radius_km: float = 0.5,
    max_places: int = 3,
    min_visits: int = 5,
    cell_km: float = 1.0,
) -> dict[str, Any]:
    """Every measure of this module on one pairing, JSON-ready (``metricdp evaluate-trace``).

    Keys: ``fixes``, ``persons``, ``displacement_km`` (median, mean, p95), ``trip_length``
    (median/mean of the absolute km and relative errors), ``visit_counts`` (total
    variation, L1, cells, cell_km), ``averaging_attack`` (:meth:`AttackResult.summary`),
    ``place_adversary`` (median/mean AE and RI; only with ``epsilon_per_km``), and
    ``per_person`` (one record per person). A statistic over nothing (no person with a top
    place, no person who moved) is None.
    """
    disp = displacement_km(paired)
    trips = trip_length_error(paired)
    visits = visit_count_error(paired, cell_km)
    attack = averaging_attack(paired, epsilon_per_km=epsilon_per_km, place_radius_km=place_radius_km,
                              max_places=max_places, min_visits=min_visits)
    per_person: dict[str, dict[str, Any]] = {
        name: {"person": name, "fixes": rows.stop - rows.start,
               "displacement_median_km": float(np.median(disp[rows])),
               "trip_true_km": float(trips.true_km[i]), "trip_released_km": float(trips.released_km[i]),
               "trip_relative_error": _number(float(trips.relative[i]))}
        for i, (name, rows) in enumerate(paired.groups())}
    for name, err in zip(attack.persons, attack.person_error_km.tolist(), strict=True):
        places = int((attack.place_person == attack.persons.index(name)).sum())
        per_person[name].update(places=places, attack_error_km=err)
    result: dict[str, Any] = {
        "fixes": len(paired.person),
        "persons": len(per_person),
        "settings": {"epsilon_per_km": epsilon_per_km, "place_radius_km": place_radius_km,
                     "attack_radius_km": attack_radius(place_radius_km, epsilon_per_km),
                     "max_places": max_places, "min_visits": min_visits, "cell_km": visits.cell_km},
        "displacement_km": {**_stats(disp), "p95": float(np.percentile(disp, 95)) if len(disp) else None},
        "trip_length": {"abs_error_km": _stats(trips.abs_error), "relative_error": _stats(trips.relative)},
        "visit_counts": {"total_variation": visits.total_variation, "l1_counts": visits.l1_counts,
                         "cells": visits.cells, "cell_km": visits.cell_km},
        "averaging_attack": attack.summary(),
    }
    if epsilon_per_km is not None:
        adv = place_adversary(paired, epsilon_per_km, place_radius_km=place_radius_km, max_places=max_places,
                              min_visits=min_visits)
        result["place_adversary"] = {"persons": len(adv.persons),
                                     "expected_error_km": _stats(adv.expected_error_km),
                                     "reidentification": _stats(adv.reidentification),
                                     "prior_error_km": _stats(adv.prior_error_km),
                                     "prior_reidentification": _stats(adv.prior_reidentification)}
        for name, ae, ri in zip(adv.persons, adv.expected_error_km.tolist(), adv.reidentification.tolist(),
                                strict=True):
            per_person[name].update(adversary_error_km=ae, adversary_reidentification=ri)
    result["per_person"] = list(per_person.values())
    return result
