"""The experiments' records: datasets, the resumable result cache, CSV and markdown writers.

Every Imola et al. experiment (:mod:`.utility`, :mod:`.scalability`, :mod:`.ablation`)
builds its spaces with :func:`dataset_space`, keeps one JSON line per finished unit in a
:class:`ResultCache` (so a killed run resumes, and ``--cached-only`` redraws from it), and
writes its tables with :func:`write_csv` and :func:`markdown_table`. Tuning itself is
:mod:`._tuning`; plots are :mod:`._plot`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._jsonable import jsonable
from .._validation import check_int
from ..errors import SolverTimeLimitError, ValidationError
from ..spaces import MetricSpace
from ..tabular.formats import format_of
from ._tuning import Tuned

__all__ = [
    "DATASETS",
    "ResultCache",
    "auto_eps_range",
    "check_dataset",
    "check_datasets",
    "check_sizes",
    "dataset_key",
    "dataset_metric",
    "dataset_sha256",
    "dataset_size",
    "dataset_slug",
    "dataset_space",
    "flags",
    "has_embedding",
    "is_file_dataset",
    "is_timeout",
    "markdown_table",
    "number",
    "open_cache",
    "tuning_note",
    "write_csv",
]

#: Built-in datasets of the experiments: ``text`` = a GloVe 6B 50-d vocabulary sampled as
#: the paper does (:func:`metricdp.data.glove.glove_space`); ``geo`` = the most populous
#: 0.005-degree cells of Beijing (:func:`metricdp.data.geo.geo_space`, the stand-in for
#: the paper's Geolife bins); ``gaussian`` = standard normal points in 50 dimensions
#: (no optional package; for tests and machines without the data extras). Any other
#: dataset token is the path of a POINTS file (see :func:`dataset_space`).
DATASETS = ("text", "geo", "gaussian")

#: Formats of POINTS files :func:`metricdp.io.read_points` reads (suffixes: :mod:`metricdp.tabular.formats`).
POINTS_FORMATS = ("csv", "parquet", "npy")


def is_file_dataset(name: str) -> bool:
    """Whether a dataset token names a POINTS file rather than a built-in dataset."""
    return name not in DATASETS


def check_datasets(datasets: Sequence[str]) -> None:
    """A non-empty list of built-in names (:data:`DATASETS`) or existing POINTS files.

    One error names the first bad token and lists the built-in names; two files with the
    same stem are refused too (their plots would share a file name).
    """
    if not datasets:
        raise ValidationError(f"datasets must not be empty: give some of {', '.join(DATASETS)} or POINTS files")
    for d in datasets:
        check_dataset(d)
    slugs = [dataset_slug(d) for d in datasets]
    dup = next((d for d, s in zip(datasets, slugs, strict=True) if slugs.count(s) > 1), None)
    if dup is not None:
        raise ValidationError(f"datasets {list(datasets)!r}: two datasets share the name {dataset_slug(dup)!r} "
                              "(plots are named after it); rename one file")


def check_dataset(name: str) -> None:
    """A built-in name or the path of an existing POINTS file (.csv, .parquet, .npy)."""
    from pathlib import Path

    if not is_file_dataset(name):
        return
    p = Path(name)
    if not p.is_file():
        raise ValidationError(f"dataset {name!r} is neither one of the built-in datasets ({', '.join(DATASETS)}) "
                              "nor an existing POINTS file (.csv/.parquet label+coordinates, .npy distance matrix)")
    format_of(p, POINTS_FORMATS, what=f"dataset {name!r}: a POINTS file")


def check_sizes(datasets: Sequence[str], sizes: Sequence[int]) -> None:
    """Every size fits every file dataset (a clear error naming the file and its size)."""
    for d in datasets:
        have = dataset_size(d)
        if have is not None and max(sizes) > have:
            raise ValidationError(f"dataset {d}: the file has {have} points, fewer than the size n = {max(sizes)} "
                                  f"asked for; use sizes <= {have} or a larger file")


def dataset_slug(name: str) -> str:
    """A short file-name-safe name of a dataset: the name itself, or a file's stem."""
    import re
    from pathlib import Path

    if not is_file_dataset(name):
        return name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).stem) or "points"


def dataset_sha256(name: str) -> str:
    """SHA-256 of a POINTS file's bytes (``""`` for a built-in dataset).

    Goes into every cache key and record of a file dataset, so a resumed run whose file
    changed under the same path recomputes instead of mixing old and new results.
    """
    from ..settings import file_sha256

    if not is_file_dataset(name):
        return ""
    check_dataset(name)
    return file_sha256(name)


def dataset_key(name: str) -> str:
    """A dataset's identity in cache keys: the name, or ``path#sha256`` of a file."""
    if not is_file_dataset(name):
        return name
    from pathlib import Path

    return f"{Path(name).resolve()}#{dataset_sha256(name)}"


_FILE_SPACES: dict[str, MetricSpace] = {}


def _file_space(name: str) -> MetricSpace:
    """The whole space of a POINTS file, read once per content (keyed by path and hash)."""
    from ..io import read_points

    key = dataset_key(name)
    if key not in _FILE_SPACES:
        if len(_FILE_SPACES) >= 4:  # a few files per run; never hold stale ones for long
            _FILE_SPACES.pop(next(iter(_FILE_SPACES)))
        _FILE_SPACES[key] = read_points(name)
    return _FILE_SPACES[key]


def dataset_size(name: str) -> int | None:
    """Number of points of a file dataset (``None`` for a built-in one: any size)."""
    return _file_space(name).n if is_file_dataset(name) else None


def dataset_metric(name: str) -> str:
    """The metric of a dataset: ``haversine`` for ``geo``, ``euclidean`` for ``text`` and
    ``gaussian``, a file's own (``precomputed`` for a ``.npy`` distance matrix)."""
    if not is_file_dataset(name):
        return "haversine" if name == "geo" else "euclidean"
    return _file_space(name).metric


def has_embedding(name: str) -> bool:
    """Whether the dataset has Euclidean coordinates (what Madlib needs)."""
    if not is_file_dataset(name):
        return name != "geo"
    space = _file_space(name)
    return space.metric == "euclidean" and space.points is not None


def dataset_space(name: str, n: int, *, seed: int = 0) -> MetricSpace:
    """The ``n``-point space of a dataset: a built-in name (:data:`DATASETS`) or a POINTS file.

    A POINTS file (read by :func:`metricdp.io.read_points`: CSV/Parquet ``label`` +
    coordinates, ``lat,lon`` in km, or a ``.npy`` distance matrix) gives its **first**
    ``n`` points, whatever the seed: ``metricdp data geolife`` writes bins from the most
    popular down and ``metricdp data vec`` writes words in the order the paper's sampling
    adds them, so the first ``n`` rows of a size-``N`` file are the paper's size-``n``
    selection (the n most popular bins; the vocabulary grown to ``n`` words from the
    same seed). A file with fewer than ``n`` points is an error naming it and its size.
    """
    n = check_int(n, "n", minimum=2)
    if name == "text":
        from ..data.glove import glove_space

        return glove_space(n, seed=seed)
    if name == "geo":
        from ..data.geo import geo_space

        # Beijing alone has 246 populated cells in GeoNames; the paper's sizes reach 400,
        # so every size draws from Beijing and Tianjin together (one geometry for all n).
        return geo_space("beijing-tianjin", size=n).space
    if name == "gaussian":
        return MetricSpace.from_points(np.random.default_rng(seed).standard_normal((n, 50)))
    space = _file_space(name)
    if n > space.n:
        raise ValidationError(f"dataset {name}: the file has {space.n} points, fewer than the size n = {n} "
                              f"asked for; use sizes <= {space.n} or a larger file")
    return space if n == space.n else space.subspace(np.arange(n))


def auto_eps_range(space: MetricSpace) -> tuple[float, float]:
    r"""The eps_tight range where mechanisms differ: from near-uniform to near-exact.

    With :math:`\bar d` the median distance and :math:`\bar d_1` the median
    nearest-neighbour distance, the range is :math:`[1/\bar d,\ 3 \ln n / \bar d_1]`: at
    the low end :math:`e^{-\varepsilon d/2}` barely varies over typical distances (every
    mechanism is close to the uniform baseline), at the high end even the nearest
    neighbour gets :math:`e^{-\varepsilon \bar d_1/2} \le n^{-3/2}` of a point's own mass
    (every mechanism is close to the identity).
    """
    d = np.asarray(space.distances)
    off = d[~np.eye(space.n, dtype=bool)]
    nearest = np.partition(d + np.diag(np.full(space.n, np.inf)), 0, axis=1)[:, 0]
    return 1.0 / float(np.median(off)), 3.0 * math.log(space.n) / float(np.median(nearest))


class ResultCache:
    """Finished units of an experiment, one JSON object per line (``--out DIR``/``*.jsonl``).

    Lets a long full-mode run resume: a unit whose key is in the file is not recomputed.
    Keys are strings; records are JSON objects (non-finite floats as strings).
    """

    def __init__(self, path: Any | None, *, frozen: bool = False) -> None:
        import json
        from pathlib import Path

        self.path = None if path is None else Path(path)
        #: Report from the cache only: the experiments build nothing and list what is
        #: missing as "not run" (``--cached-only``).
        self.frozen = frozen
        self.records: dict[str, dict[str, Any]] = {}
        if self.path is not None and self.path.is_file():
            text = self.path.read_text(encoding="utf-8")
            if text and not text.endswith("\n"):  # cut short: new records start on a new line
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write("\n")
            for line in text.splitlines():
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by an interrupted run
                    continue
                if isinstance(item, dict) and "key" in item:
                    self.records[str(item["key"])] = item["record"]

    def get(self, key: str, time_limit: float | None = None) -> dict[str, Any] | None:
        """The record of ``key``; ``None`` (recompute) also for an error, or for a time-out
        under a shorter time limit than ``time_limit`` (``None`` = unlimited). A frozen
        cache returns errors as they were (nothing will be recomputed)."""
        rec = self.records.get(key)
        if rec is None or (rec.get("status") == "error" and not self.frozen):
            return None
        if rec.get("status") == "time-out":
            before = number(rec.get("time_limit"))
            now = math.inf if time_limit is None else float(time_limit)
            if not before >= now:
                return None
        return rec

    def put(self, key: str, record: dict[str, Any], time_limit: float | None = None) -> None:
        import json

        if self.frozen:
            return

        record.setdefault("time_limit", math.inf if time_limit is None else float(time_limit))
        self.records[key] = record
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"key": key, "record": jsonable(record)}, allow_nan=False) + "\n")


def open_cache(path: Any, *, resume: bool = True, cached_only: bool = False) -> ResultCache:
    """An experiment's cache at ``path``: emptied when not resuming; with ``cached_only``,
    read-only and required to exist (the plots and tables are redrawn from it)."""
    from pathlib import Path

    path = Path(path)
    if cached_only and not resume:
        raise ValidationError("cached_only reports from the cache of a previous run: it cannot start over")
    if cached_only and not path.is_file():
        raise ValidationError(f"{path}: no cache of a previous run to report from")
    if not resume and path.exists():
        path.unlink()
    return ResultCache(path, frozen=cached_only)


def number(value: Any) -> float:
    """A record's number back from JSON (``"inf"``/``"nan"`` strings, ``None`` -> nan)."""
    if value is None or value == "":
        return math.nan
    return float(value)


def tuning_note(tuned: Tuned) -> str:
    """Why a tuned record is flagged: eps_tight off target, and what ended the search."""
    if tuned.converged:
        return ""
    note = f"eps_tight {tuned.eps_tight:.4g} not within {tuned.rtol:g} of target"
    return note + (f" (search ended by: {tuned.stopped_by})" if tuned.stopped_by else "")


def flags(record: dict[str, Any]) -> str:
    """Marks of a summary cell: `` (!)`` tuning not converged, `` (EM)`` ConstOPTMech returned
    the exponential mechanism (its LP candidates lost to it at that nominal eps)."""
    flag = "" if record.get("converged") else " (!)"
    return flag + (" (EM)" if record.get("winner") == "exponential" else "")


def write_csv(path: Any, records: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """Write ``records`` (dicts) as CSV with exactly ``columns``, atomically."""
    import csv

    from ..io import atomic_write

    with atomic_write(path, "w") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for rec in records:
            writer.writerow(["" if rec.get(c) is None else _cell(rec.get(c)) for c in columns])


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return value


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A small markdown table (numbers to 4 significant digits)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def is_timeout(exc: BaseException) -> bool:
    """Whether a builder's error is its deadline passing (:class:`~metricdp.errors.SolverTimeLimitError`)."""
    return isinstance(exc, SolverTimeLimitError)
