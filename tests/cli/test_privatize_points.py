"""``metricdp privatize-points`` end to end: CSV and Parquet, untouched columns, region, snap, plot, errors."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import typer
from scipy import stats
from typer.testing import CliRunner

from metricdp.cli.privatize_points import register
from metricdp.location.projection import TangentPlane
from metricdp.location.region import parse_region
from tests.cli_helpers import assert_one_line_error, make_app
from tests.helpers import needs

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return make_app(register)


def _write_csv(path, n=400, lat=48.8566, lon=2.3522):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["user", "when", "latitude", "longitude", "note"])
        for i in range(n):
            w.writerow([f"u{i % 7}", f"2024-01-{i % 28 + 1:02d}", lat, lon, "a, quoted \"note\""])


def _read(path):
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def _invoke(app, *args):
    args = [str(a) for a in args]
    if not {"--origin", "--region", "--sampler"} & set(args):  # the exact default needs a public lattice origin
        args += ["--origin", "48.5,2.3"]
    return runner.invoke(app, ["privatize-points", *args])


def test_csv_release_law_and_untouched_columns(app, tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_csv(src, n=1500)
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--epsilon", "0.5", "--out", out, "--seed", "7")
    assert r.exit_code == 0, r.output
    assert "warning: --seed" in r.stderr
    assert "released by planar Laplace at epsilon=0.5 per km" in r.stdout
    header, rows = _read(out)
    h0, rows0 = _read(src)
    assert header == h0
    for a, b in zip(rows, rows0, strict=True):
        assert (a[0], a[1], a[4]) == (b[0], b[1], b[4])
        assert len(a[2].split(".")[1]) == 6  # --digits 6
    z = np.array([[float(a[2]), float(a[3])] for a in rows])
    rho = np.hypot(*TangentPlane(48.8566, 2.3522).forward(z).T)
    assert stats.kstest(rho, stats.gamma(a=2, scale=1 / 0.5).cdf).pvalue > 1e-3


def test_parquet_round_trip_keeps_schema_and_other_columns(app, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    table = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "lat": [48.0, 48.1, 48.2], "lon": [2.0, 2.1, 2.2],
                      "tag": ["a", None, "c"]})
    pq.write_table(table, src)
    r = _invoke(app, src, "--lat", "lat", "--lon", "lon", "--epsilon", "2", "--out", out, "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["rows"] == 3 and summary["seeded"] is False
    back = pq.read_table(out)
    assert back.column_names == table.column_names
    assert back.column("id").equals(table.column("id")) and back.column("tag").equals(table.column("tag"))
    assert not np.array_equal(back.column("lat").to_numpy(), table.column("lat").to_numpy())


@pytest.mark.parametrize("truncate", ["nearest", "reject"])
def test_region_keeps_every_release_inside(app, tmp_path, truncate):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_csv(src, n=300, lat=48.86, lon=2.34)
    box = "48.85,2.33,48.87,2.36"
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--epsilon", "1", "--out", out,
                "--region", box, "--truncate", truncate)
    assert r.exit_code == 0, r.output
    _, rows = _read(out)
    z = np.array([[float(a[2]), float(a[3])] for a in rows])
    assert parse_region(box).contains(z, tolerance_km=1e-6).all()  # after rounding to --digits 6 too


@needs("plot")
def test_geojson_region_and_snap_and_plot(app, tmp_path):
    src, out, png = tmp_path / "in.csv", tmp_path / "out.csv", tmp_path / "p.png"
    _write_csv(src, n=200)
    gj = tmp_path / "r.geojson"
    ring = [[2.2, 48.7], [2.5, 48.7], [2.5, 49.0], [2.2, 49.0]]
    gj.write_text(json.dumps({"type": "Polygon", "coordinates": [ring]}))
    poi = tmp_path / "poi.csv"
    poi.write_text("label,lat,lon\na,48.85,2.35\nb,48.9,2.3\nc,48.8,2.4\n")
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--epsilon", "1", "--out", out,
                "--region", gj, "--snap-to", poi, "--plot", png)
    assert r.exit_code == 0, r.output
    _, rows = _read(out)
    assert {(a[2], a[3]) for a in rows} <= {("48.85", "2.35"), ("48.9", "2.3"), ("48.8", "2.4")}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--lat", "nope", "--lon", "longitude", "--epsilon", "1"], "no column 'nope'"),
        (["--lat", "latitude", "--lon", "longitude", "--epsilon", "0"], "--epsilon"),
        (["--lat", "latitude", "--lon", "latitude", "--epsilon", "1"], "same column"),
        (["--lat", "latitude", "--lon", "longitude", "--epsilon", "1", "--truncate", "clip"], "--truncate"),
        (["--lat", "latitude", "--lon", "longitude", "--epsilon", "1", "--region", "9,9"], "region"),
    ],
)
def test_errors_are_one_line_and_write_nothing(app, tmp_path, extra, fragment):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_csv(src, n=3)
    r = _invoke(app, src, *extra, "--out", out)
    assert_one_line_error(r, fragment)
    assert not out.exists()


def test_bad_coordinate_names_the_row_and_keeps_the_old_output(app, tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("latitude,longitude\n48.0,2.0\n95.0,2.0\n")
    out.write_text("precious\n")
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--epsilon", "1", "--out", out)
    assert_one_line_error(r, "data row 2", "(95.0, 2.0) is not a (lat, lon)")
    assert out.read_text() == "precious\n"
    src.write_text("latitude,longitude\n48.0,2.0\nx,2.0\n")
    assert_one_line_error(_invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--epsilon", "1",
                                  "--out", out), "data row 2", "'x'")


def test_refuses_to_overwrite_the_input(app, tmp_path):
    src = tmp_path / "in.csv"
    _write_csv(src, n=3)
    before = src.read_text()
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--epsilon", "1", "--out", src)
    assert_one_line_error(r, "input file")
    assert src.read_text() == before


def test_rounding_never_leaves_a_slanted_region(app, tmp_path):
    """On a triangle, boundary points have no 6-decimal representation inside; those rows stay exact."""
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_csv(src, n=400, lat=48.9, lon=2.5)  # outside: every release is projected onto the boundary
    gj = tmp_path / "tri.geojson"
    gj.write_text(json.dumps({"type": "Polygon", "coordinates": [[[2.3, 48.8], [2.4, 48.8], [2.3, 48.87123]]]}))
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--epsilon", "2", "--out", out, "--region", gj)
    assert r.exit_code == 0, r.output
    _, rows = _read(out)
    z = np.array([[float(a[2]), float(a[3])] for a in rows])
    region = parse_region(str(gj))
    assert region.contains(z, tolerance_km=1e-6).all()
    # the check bites: plain rounding would have left some releases outside
    assert (~region.contains(np.round(z, 6), tolerance_km=1e-6)).any()


# ----------------------------------------------------------------------------- what leaves
def _raw(path, text):
    path.write_bytes(text)
    return path


@pytest.mark.parametrize(
    ("header", "fragments"),
    [
        ("id,lat,lon,lat,lon", ["the released column 'lat' appears more than once"]),
        ("id,lat,lon,Lat", ["column 'Lat' is named like the released column 'lat'", "--keep or --drop it"]),
        ("id,lat,lon,lat2", ["column(s) 'lat2' look like the released coordinates ('lat', 'lon')"]),
        ("id,lat,lon,home_lat,home_lon", ["'home_lat', 'home_lon' look like the released coordinates"]),
        ("id,lat,lon,latitude", ["'latitude' look like"]),
    ],
)
def test_a_second_coordinate_pair_is_refused(app, tmp_path, header, fragments):
    """A second pair was written with its TRUE values beside the noisy first one."""
    n = header.count(",") + 1
    src = _raw(tmp_path / "in.csv", (f"{header}\n" + ",".join(["1"] + ["48.5"] * (n - 1)) + "\n").encode())
    out = tmp_path / "out.csv"
    r = _invoke(app, src, "--lat", "lat", "--lon", "lon", "--epsilon", "1", "--out", out)
    assert_one_line_error(r, str(src), *fragments)
    assert not out.exists()


def test_drop_and_keep_the_other_columns(app, tmp_path):
    src = _raw(tmp_path / "in.csv", b"id,lat,lon,lat2,city\n1,48.5,2.3,48.5,Paris\n2,48.6,2.4,48.6,Lyon\n")
    out = tmp_path / "out.csv"
    r = _invoke(app, src, "--lat", "lat", "--lon", "lon", "--epsilon", "1", "--out", out, "--drop", "lat2",
                "--drop", "city", "--keep", "id", "--json", "--seed", "3")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["columns"] == {"released": ["lat", "lon"], "unreleased": ["id"], "unacknowledged": [],
                              "dropped": ["lat2", "city"]}
    header, rows = _read(out)
    assert header == ["id", "lat", "lon"] and [r[0] for r in rows] == ["1", "2"]
    assert "dropped (--drop): 'lat2', 'city'" in r.stderr
    # no flag: the city leaves with its true value, and a warning names it
    r = _invoke(app, src, "--lat", "lat", "--lon", "lon", "--epsilon", "1", "--out", out, "--keep", "lat2")
    assert r.exit_code == 0, r.output
    assert "'id', 'city' are written UNRELEASED" in r.stderr
    assert _read(out)[0] == ["id", "lat", "lon", "lat2", "city"]


def test_parquet_drop_and_duplicate_pair(app, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"id": [1, 2], "lat": [48.0, 48.1], "lon": [2.0, 2.1], "Lon": [2.0, 2.1]}), src)
    r = _invoke(app, src, "--lat", "lat", "--lon", "lon", "--epsilon", "2", "--out", out)
    assert_one_line_error(r, "'Lon' is named like the released column 'lon'")
    r = _invoke(app, src, "--lat", "lat", "--lon", "lon", "--epsilon", "2", "--out", out, "--drop", "Lon")
    assert r.exit_code == 0, r.output
    assert pq.read_table(out).column_names == ["id", "lat", "lon"]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"id,lat,lon\r1,48.5,2.3\r", "line 1: a carriage return"),
        (b"id,lat,lon\n1,48.5,2.3,\n", "line 2 has 4 fields, expected 3"),
        (b"id,lat,lon\n1,48.5,2.3\n\xef\xbb\xbf2,48.5,2.3\n", "line 3: a byte-order mark"),
        (b"id,lat,lon\n1,48.5,2.3\x00\n", "line 2: a NUL byte"),
    ],
)
def test_hostile_csv_is_one_error(app, tmp_path, data, fragment):
    src, out = _raw(tmp_path / "in.csv", data), tmp_path / "out.csv"
    r = _invoke(app, src, "--lat", "lat", "--lon", "lon", "--epsilon", "1", "--out", out)
    assert_one_line_error(r, f"{src}: {fragment}", "byte offset")
    assert not out.exists()


@needs("plot")
def test_geojson_out_and_plot_with_units(app, tmp_path):
    src, out, png = tmp_path / "in.csv", tmp_path / "out.geojson", tmp_path / "p.png"
    _write_csv(src, n=50)
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "-e", "2/km", "--out", out, "--plot", png,
                "--drop", "note", "--keep", "user", "--keep", "when")
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert len(doc["features"]) == 50 and set(doc["features"][0]["properties"]) == {"user", "when"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "-e", "1", "--out", tmp_path / "o.txt")
    assert_one_line_error(r, "--out")


def test_units_level_radius_and_sampler_float(app, tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_csv(src, n=20)
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--level", "2", "--radius", "500m", "--out", out,
                "--json", "--keep", "user", "--keep", "when", "--keep", "note")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["epsilon_per_km"] == 4.0 and doc["sampler"] == "exact" and doc["lattice"]["cell_km"] == 0.001
    assert "Mironov" not in r.stderr
    r = _invoke(app, src, "--lat", "latitude", "--lon", "longitude", "-e", "0.004/m", "--out", out, "--sampler",
                "float", "--json", "--keep", "user", "--keep", "when", "--keep", "note")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["epsilon_per_km"] == 4.0 and "Mironov" in r.stderr
    for extra, fragment in ((["--level", "2"], "--level and --radius go together"),
                            (["-e", "1/parsec"], "--epsilon"),
                            (["-e", "1", "--sampler", "float", "--origin", "48,2"], "are for --sampler exact"),
                            (["-e", "1", "--origin", "48"], "--origin must be LAT,LON"),
                            (["-e", "1", "--sampler", "exact"], "needs a public lattice origin")):
        assert_one_line_error(_invoke(app, src, "--lat", "latitude", "--lon", "longitude", "--out", out, *extra),
                              fragment)


def test_rows_beyond_the_extent_are_refused_by_row(app, tmp_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("lat,lon\n48.85,2.35\n51.5,-0.12\n")
    r = _invoke(app, src, "--lat", "lat", "--lon", "lon", "-e", "1", "--out", out, "--origin", "48.85,2.35",
                "--extent", "100km")
    assert_one_line_error(r, "data row 2", "beyond the extent 100 km")
    assert not out.exists()


def test_the_library_rules_are_said_in_flags(app, tmp_path):
    """The engine's and the settings' rules are the library's; the command names its own flags."""
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_csv(src, n=5)
    base = ["--lat", "latitude", "--lon", "longitude", "-e", "1", "--origin", "48.85,2.35"]
    for extra, fragment in ((["--engine", "dask", "--plot", str(tmp_path / "p.png")], "--plot is for --engine local"),
                            (["--scheduler", "tcp://127.0.0.1:9"], "--scheduler is for --engine dask"),
                            (["--cell", "10km", "--extent", "1km"], "the lattice of --origin, --cell and --extent: ")):
        r = _invoke(app, src, *base, "--out", out, *extra)
        assert_one_line_error(r, fragment)
        assert "parameter" not in r.stderr and "engine='" not in r.stderr
    assert not out.exists()
