"""Tables and mechanisms the format tests share. The oracle of a release in a new format is the same
table released as CSV with the same seed and chunks: the pipeline draws the same values whatever the format."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metricdp import MetricSpace, PrivacyLeakWarning
from metricdp.mechanisms.base import certify
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism

LABELS = ["Paris", "Lyon", "Lille", "Nice"]
LATLON = [[48.8566, 2.3522], [45.7640, 4.8357], [50.6292, 3.0573], [43.7102, 7.2620]]
AGES = number_mechanism(NumericGrid(0, 99, 1), 0.5)


def labels_mechanism() -> object:
    """An exponential mechanism over four cities (eps 0.004 per km)."""
    space = MetricSpace.from_points(LATLON, LABELS, metric="haversine")
    m = np.exp(-0.004 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 0.004, "exponential")


def seeded(release: Any, *args: Any, **kwargs: Any) -> Any:
    """``release(*args, **kwargs)`` with an int seed (``rng``), which warns that it is not private."""
    with pytest.warns(PrivacyLeakWarning):
        return release(*args, **kwargs)


def shift(pts: np.ndarray, first_row: int) -> np.ndarray:
    """A deterministic 'release' of points (the format is under test, not the mechanism)."""
    return pts + np.array([0.5, -0.25])


def rows(n: int) -> list[dict[str, object]]:
    """``n`` rows: an id, a city, an age, a point, and a note that owes nothing to the city (no leak)."""
    rng = np.random.default_rng(3)
    notes = ["a", "b", "c"]
    return [{"id": i, "city": LABELS[int(rng.integers(4))], "age": int(rng.integers(100)),
             "lat": float(np.round(rng.uniform(43, 51), 4)), "lon": float(np.round(rng.uniform(0, 7), 4)),
             "note": notes[int(rng.integers(3))]} for i in range(n)]


def write_csv(path: Path, table: list[dict[str, object]]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(list(table[0]))
        w.writerows([list(r.values()) for r in table])
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
