"""privatize-points on the engines: the local engine's file path, piece by piece (slow: CI's full phase)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.integrations._points import privatize_points_engine
from metricdp.location.lattice import LatticePlane
from metricdp.location.release import PointSettings
from tests.integrations.conftest import dask_unavailable, spark_unavailable

pytestmark = pytest.mark.slow

SETTINGS = PointSettings(1.0, LatticePlane(48.85, 2.35))


def _csv(path, n=600):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "lat", "note", "lon"])
        for i in range(n):
            w.writerow([i, 48.8 + (i % 10) / 100, "a, b" if i % 3 else "", 2.3 + (i % 7) / 100])


@pytest.mark.skipif(dask_unavailable is not None, reason=str(dask_unavailable))
def test_dask_pieces_keep_other_bytes_and_replay_with_a_seed(tmp_path):
    src, out, again = tmp_path / "in.csv", tmp_path / "out.csv", tmp_path / "again.csv"
    _csv(src)
    with pytest.warns(Warning):
        rows, plan = privatize_points_engine("dask", src, "lat", "lon", out, SETTINGS, seed=5, keep=["id", "note"],
                                             piece_bytes=2000)
    assert rows == 600 and plan.as_dict()["unreleased"] == ["id", "note"]
    with pytest.warns(Warning):
        privatize_points_engine("dask", src, "lat", "lon", again, SETTINGS, seed=5, keep=["id", "note"],
                                piece_bytes=2000)
    assert out.read_bytes() == again.read_bytes()  # per-piece SeedSequence children: reproducible
    a, b = (list(csv.reader(p.read_text().splitlines())) for p in (src, out))
    assert [r[0] for r in a] == [r[0] for r in b] and [r[2] for r in a] == [r[2] for r in b]
    moved = np.array([[float(x[1]), float(x[3])] for x in b[1:]]) - np.array([[float(x[1]), float(x[3])]
                                                                               for x in a[1:]])
    assert np.abs(moved).max() > 0.001


@pytest.mark.skipif(dask_unavailable is not None, reason=str(dask_unavailable))
def test_dask_errors_name_the_row_and_publish_nothing(tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("lat,lon\n" + "48.8,2.3\n" * 300 + "x,2.3\n")
    with pytest.raises(ValidationError, match=r"data row 301 \(line 302\): column 'lat' is 'x'"):
        privatize_points_engine("dask", src, "lat", "lon", out, SETTINGS, piece_bytes=1000)
    assert not out.exists()
    src.write_text("lat,lon\n48.8,2.3\n60.0,2.3\n")
    with pytest.raises(ValidationError, match=r"data row 2 .* beyond the extent"):
        privatize_points_engine("dask", src, "lat", "lon", out, PointSettings(1.0, LatticePlane(48.85, 2.35,
                                                                                                 extent_km=100.0)))
    with pytest.raises(ValidationError, match="local engine only"):
        privatize_points_engine("dask", src, "lat", "lon", tmp_path / "o.geojson", SETTINGS)


@pytest.mark.skipif(spark_unavailable is not None, reason=str(spark_unavailable))
def test_spark_parquet_in_pieces(tmp_path, spark):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    table = pa.table({"id": list(range(50)), "lat": [48.8] * 50, "lon": [2.3] * 50})
    pq.write_table(table, src, row_group_size=10)
    rows, _ = privatize_points_engine("spark", src, "lat", "lon", out, SETTINGS, keep=["id"])
    back = pq.read_table(out)
    assert rows == 50 and back.column("id").equals(table.column("id"))
    assert not np.array_equal(back.column("lat").to_numpy(), table.column("lat").to_numpy())
