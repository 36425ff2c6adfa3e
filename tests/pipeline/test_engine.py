"""The engine of a release: its option rule (parameters named, never flags) and one entry per kind on every engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metricdp import MetricSpace, ValidationError
from metricdp.mechanisms.base import certify
from metricdp.mechanisms.numeric import NumericGrid, number_mechanism
from metricdp.pipeline.engine import Engine, check_engine, cluster_seed
from metricdp.pipeline.run import ReleaseStats
from metricdp.streaming.files import privatize_file
from metricdp.streaming.numbers import privatize_numbers_file
from metricdp.streaming.points import privatize_points_file
from tests.helpers import missing

AGES = number_mechanism(NumericGrid(0, 9, 1), 0.5)


def _labels():
    space = MetricSpace.from_points([[0.0], [1.0]], ["a", "b"])
    m = np.exp(-0.8 * np.asarray(space.distances) / 2)
    return certify(m / m.sum(axis=1, keepdims=True), space, 0.8, "exponential")


def test_the_local_engine_takes_the_local_options_only():
    assert check_engine("local", chunk_rows=5, local_only=[(True, "a plot")]) is Engine.local
    with pytest.raises(ValidationError, match=r"^the parameter 'scheduler' is for engine='dask'$"):
        check_engine("local", scheduler="tcp://x:1")
    with pytest.raises(ValidationError, match=r"^the parameter 'master' is for engine='spark'$"):
        check_engine("dask", master="local[1]")
    with pytest.raises(ValidationError, match=r"^engine must be one of local, dask, spark, got 'ray'$"):
        check_engine("ray")


@pytest.mark.skipif(bool(missing("dask")), reason="dask is not installed")
def test_a_cluster_refuses_the_local_options_naming_parameters():
    with pytest.raises(ValidationError, match=r"^the parameter 'chunk_rows' is for engine='local' \(engines"):
        check_engine("dask", chunk_rows=5)
    with pytest.raises(ValidationError, match=r"^a plot is for engine='local'$"):
        check_engine("dask", local_only=[(False, "a map"), (True, "a plot")])
    assert check_engine("dask", scheduler="tcp://x:1") is Engine.dask


def test_a_cluster_seed_is_none_or_an_int():
    assert cluster_seed(None) is None and cluster_seed(7) == 7
    for bad in (True, np.random.default_rng(1), 1.5):
        with pytest.raises(ValidationError, match="rng must be None or an int"):
            cluster_seed(bad)


def test_every_entry_refuses_another_engines_option_before_reading(tmp_path: Path):
    src = tmp_path / "missing.csv"  # never read: the option is refused first
    for call in (lambda: privatize_file(_labels(), src, "c", tmp_path / "o.csv", scheduler="tcp://x:1"),
                 lambda: privatize_numbers_file(AGES, src, "c", tmp_path / "o.csv", master="local[1]")):
        with pytest.raises(ValidationError, match="is for engine="):
            call()


@pytest.mark.skipif(bool(missing("dask")), reason="dask is not installed")
def test_a_release_function_runs_on_the_local_engine_only(tmp_path: Path):
    src = tmp_path / "in.csv"
    src.write_text("lat,lon\n1,2\n")
    with pytest.raises(ValidationError, match="give the release's PointSettings, not a function"):
        privatize_points_file(src, "lat", "lon", tmp_path / "o.csv", lambda p, _r: p, engine="dask")
    with pytest.raises(ValidationError, match=r"an output in geojson .* is for engine='local'"):
        privatize_points_file(src, "lat", "lon", tmp_path / "o.geojson", lambda p, _r: p, engine="dask")


@pytest.mark.skipif(bool(missing("dask")), reason="dask is not installed")
def test_one_stats_type_for_every_engine(tmp_path: Path):
    """The same call on the local engine and on Dask: the same rows, column plan and format, one stats type."""
    src = tmp_path / "in.csv"
    src.write_text("id,c,n\n1,a,3\n2,b,4\n3,a,5\n")
    for engine in ("local", "dask"):
        labels = privatize_file(_labels(), src, "c", tmp_path / f"l-{engine}.csv", drop=["n"], keep=["id"],
                                engine=engine)
        numbers = privatize_numbers_file(AGES, src, "n", tmp_path / f"n-{engine}.csv", keep=["id"], drop=["c"],
                                         engine=engine)
        for stats, out, header in ((labels, "l", "id,c"), (numbers, "n", "id,n")):
            assert type(stats) is ReleaseStats and stats.rows == 3 and stats.format == "csv"
            assert stats.columns.kept == ("id",) and stats.accounting is None
            assert (tmp_path / f"{out}-{engine}.csv").read_text().splitlines()[0] == header
