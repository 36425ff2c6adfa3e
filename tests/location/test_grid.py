"""The public cell grid, streaming binning of CSV / Parquet rows, and the DP histogram prior."""

from __future__ import annotations

import csv
import io
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.location.binning import bin_file
from metricdp.location.grid import CellGrid, private_prior, write_prior
from metricdp.location.projection import TangentPlane
from metricdp.location.region import Region
from metricdp.spaces import MetricSpace

BOX = Region.box(56.90, 24.00, 56.95, 24.10)  # about 5.6 km x 6.1 km (Riga)


@pytest.fixture(scope="module")
def grid() -> CellGrid:
    return CellGrid.over(BOX, 1.0)


def test_tiling_is_the_tangent_plane_lattice(grid):
    # the centre of the projection is the middle of the bounding box; cell x{i}y{j} spans [i, i+1) x [j, j+1) km
    assert (grid.plane.lat0, grid.plane.lon0) == pytest.approx((56.925, 24.05))
    xy = TangentPlane(56.925, 24.05).forward(grid.centres)
    assert np.allclose(xy, grid.ij + 0.5, atol=1e-9)
    assert grid.labels == tuple(f"x{i}y{j}" for i, j in grid.ij.tolist())
    # 5.56 km of latitude and 6.08 km of longitude (cos 56.9): cells with a corner or centre in the box
    assert grid.ij[:, 1].min() == -3 and grid.ij[:, 1].max() == 2
    assert grid.ij[:, 0].min() == -4 and grid.ij[:, 0].max() == 3
    assert grid.n == 48
    # the space of the centres: neighbours 1 km apart on the sphere, up to the projection's distortion
    space = MetricSpace.from_points(grid.centres, grid.labels, metric="haversine")
    assert space.d_min == pytest.approx(1.0, rel=1e-5)


def test_locate_and_nearest(grid):
    assert (grid.locate(grid.centres) == np.arange(grid.n)).all()
    plane = grid.plane
    # a point 0.3 km east and 0.9 km north of the centre is in x0y0; one 2.5 km west, 1.2 km south in x-3y-2
    pts = plane.inverse([[0.3, 0.9], [-2.5, -1.2], [200.0, 0.0]])
    idx = grid.locate(pts)
    assert [grid.labels[i] for i in idx[:2]] == ["x0y0", "x-3y-2"]
    assert idx[2] == -1
    # 200 km east: nearest is on the east edge, in the middle row band
    east = grid.labels[grid.nearest(pts[2:])[0]]
    assert east.startswith("x3y")
    assert grid.locate([[0.0, 0.0]])[0] == -1  # null island


@settings(max_examples=40, deadline=None)
@given(st.floats(-2.9, 2.9), st.floats(-2.7, 2.7))
def test_locate_matches_floor_in_the_plane(x, y):
    g = CellGrid.over(BOX, 1.0)
    ll = g.plane.inverse([[x, y]])
    i, j = math.floor(x), math.floor(y)
    if abs(x - round(x)) < 1e-6 or abs(y - round(y)) < 1e-6:
        return  # on a cell edge: the float round trip decides
    assert g.labels[g.locate(ll)[0]] == f"x{i}y{j}"


def test_grid_refuses_too_many_cells_and_bad_sides():
    with pytest.raises(ValidationError, match="candidate cells"):
        CellGrid.over(Region.box(40, 0, 60, 30), 0.01)  # 2,200 km x 2,300 km in 10 m cells
    for side in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValidationError, match="positive"):
            CellGrid.over(BOX, side)


# ----------------------------------------------------------------------------------- prior
def test_prior_noise_follows_the_two_sided_geometric_law():
    """Counts 0: the clamped noise max(Z, 0) with P(Z = z) = (1-p)/(1+p) p^|z|, p = e^-eps (chi-square)."""
    eps, n = 0.7, 3000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        _, noisy = private_prior(np.zeros(n, dtype=np.int64), "0.7", rng=20261125)
    p = math.exp(-eps)
    probs = [1 / (1 + p)] + [(1 - p) / (1 + p) * p**k for k in range(1, 6)]
    probs.append(1 - sum(probs))
    observed = [int((noisy == k).sum()) for k in range(6)] + [int((noisy >= 6).sum())]
    assert stats.chisquare(observed, np.array(probs) * n).pvalue > 1e-4
    # and a count of 10 is moved symmetrically: mean of the (unclamped) noise near 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        _, big = private_prior(np.full(n, 10, dtype=np.int64), 0.7, rng=1)
    assert abs(float(big.mean()) - 10) < 0.15


def test_prior_is_a_distribution_and_uniform_when_all_zero(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        prior, noisy = private_prior(np.array([0, 0, 0]), 1000, rng=3)  # noise 0 with prob ~1
    assert noisy.tolist() == [0, 0, 0] and prior.tolist() == [1 / 3] * 3
    with pytest.warns(PrivacyLeakWarning):
        private_prior(np.array([1]), 1.0, rng=3)
    for bad in ([], [-1], [1.5]):
        with pytest.raises(ValidationError):
            private_prior(np.array(bad), 1.0)
    for eps in (0, -1, "x", float("nan")):
        with pytest.raises(ValidationError):
            private_prior(np.array([1]), eps)
    write_prior(tmp_path / "p.csv", ["a", "b"], [0.25, 0.75])
    assert (tmp_path / "p.csv").read_text() == "label,probability\na,0.25\nb,0.75\n"


# --------------------------------------------------------------------------------- binning
def _rows(grid: CellGrid, rng: np.random.Generator, k: int) -> np.ndarray:
    xy = rng.uniform(-5.0, 5.0, size=(k, 2))  # some inside the grid, some outside
    return grid.plane.inverse(xy)


def _oracle(grid: CellGrid, text: str, unknown: str) -> str:
    """The labelled CSV by Python's csv module and the grid's own locate/nearest."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    out = [rows[0] + ["cell"]]
    for r in rows[1:]:
        k = int(grid.locate([[float(r[1]), float(r[2])]])[0])
        if k < 0 and unknown == "drop":
            continue
        if k < 0:
            k = int(grid.nearest([[float(r[1]), float(r[2])]])[0])
        out.append([*r, grid.labels[k]])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(out)
    return buf.getvalue()


@pytest.mark.parametrize("unknown", ["drop", "nearest"])
def test_bin_csv_against_the_csv_module(grid, tmp_path, unknown):
    latlon = _rows(grid, np.random.default_rng(5), 400)
    text = "id,lat,lon\n" + "".join(f"r{i},{a!r},{b!r}\n" for i, (a, b) in enumerate(latlon.tolist()))
    src = tmp_path / "in.csv"
    src.write_text(text)
    out = tmp_path / "out.csv"
    st_ = bin_file(grid, src, "lat", "lon", out, unknown=unknown, chunk_rows=37)
    assert out.read_text() == _oracle(grid, text, unknown)
    inside = int((grid.locate(latlon) >= 0).sum())
    assert st_.rows == 400 and st_.written == (inside if unknown == "drop" else 400)
    assert (st_.dropped, st_.nearest) == ((400 - inside, 0) if unknown == "drop" else (0, 400 - inside))
    assert st_.counts.sum() == st_.written


def test_bin_csv_keeps_every_input_byte(grid, tmp_path):
    a, b = grid.centres[0].tolist(), grid.centres[5].tolist()
    text = (f'\ufeffname,"lat",lon,note\r\n"x, y",{a[0]},{a[1]},"say ""hi"""\r\n'
            f'\r\nz,"{b[0]}",{b[1]},\r\nlast,{a[0]},{a[1]},end')
    src = tmp_path / "in.csv"
    src.write_bytes(text.encode())
    out = tmp_path / "out.csv"
    bin_file(grid, src, "lat", "lon", out)
    want = (f'\ufeffname,"lat",lon,note,cell\r\n"x, y",{a[0]},{a[1]},"say ""hi""",{grid.labels[0]}\r\n'
            f'\r\nz,"{b[0]}",{b[1]},,{grid.labels[5]}\r\nlast,{a[0]},{a[1]},end,{grid.labels[0]}')
    assert out.read_bytes() == want.encode()


def test_bin_refuses_with_lines_and_writes_nothing(grid, tmp_path):
    inside = grid.centres[0].tolist()
    src = tmp_path / "in.csv"
    src.write_text(f"lat,lon\n{inside[0]},{inside[1]}\n0,0\n{inside[0]},{inside[1]}\n1,1\n")
    out = tmp_path / "out.csv"
    out.write_text("keep me")
    with pytest.raises(ValidationError, match=r"2 row\(s\) outside the grid .*first at line\(s\) 3, 5"):
        bin_file(grid, src, "lat", "lon", out, chunk_rows=1)
    assert out.read_text() == "keep me"
    for body, what in [("48.1,x\n", "line 2: column 'lon' is not a number: 'x'"),
                       ("95,2\n", "line 2: (lat, lon) = (95.0, 2.0)"),
                       ("1_0,2\n", "not a number: '1_0'"),
                       ('"nan",2\n', "(lat, lon) = (nan, 2.0)"),
                       ("48.1,\n", "not a number: ''"),
                       ("inf,2\n", "(lat, lon) = (inf, 2.0)")]:
        src.write_text("lat,lon\n" + body)
        with pytest.raises(ValidationError) as info:
            bin_file(grid, src, "lat", "lon", out)
        assert what in str(info.value)
        assert out.read_text() == "keep me"
    src.write_text("lat,lon,cell\n1,2,x\n")
    with pytest.raises(ValidationError, match="'cell' already exists"):
        bin_file(grid, src, "lat", "lon", out)
    with pytest.raises(ValidationError, match="no column 'latitude'"):
        bin_file(grid, src, "latitude", "lon", out)
    with pytest.raises(ValidationError, match=r"has the input's format \(csv\); name it .csv"):
        bin_file(grid, src, "lat", "lon", tmp_path / "out.parquet")


def test_bin_parquet(grid, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    latlon = _rows(grid, np.random.default_rng(8), 300)
    table = pa.table({"id": list(range(300)), "lat": latlon[:, 0], "lon": latlon[:, 1]})
    src = tmp_path / "in.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out.parquet"
    stats_ = bin_file(grid, src, "lat", "lon", out, unknown="drop", chunk_rows=64)
    got = pq.read_table(out)
    idx = grid.locate(latlon)
    assert got.column("id").to_pylist() == np.flatnonzero(idx >= 0).tolist()
    assert got.column("cell").to_pylist() == [grid.labels[k] for k in idx[idx >= 0]]
    assert stats_.dropped == int((idx < 0).sum())
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"lat": [1.0, None], "lon": [2.0, 3.0]}), bad)
    with pytest.raises(ValidationError, match="row 2: column 'lat' is null"):
        bin_file(grid, bad, "lat", "lon", tmp_path / "o2.parquet")
    assert not (tmp_path / "o2.parquet").exists()


def test_bin_parquet_names_data_rows_and_refuses_a_column_by_its_type(grid, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    inside = grid.centres[0].tolist()
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"lat": [inside[0], 0.0, inside[0], 1.0], "lon": [inside[1], 0.0, inside[1], 1.0]}), src)
    with pytest.raises(ValidationError, match=r"2 row\(s\) outside the grid .*first at row\(s\) 2, 4"):
        bin_file(grid, src, "lat", "lon", tmp_path / "out.parquet", chunk_rows=1)
    pq.write_table(pa.table({"lat": [1.0], "lon": ["2"]}), src)
    with pytest.raises(ValidationError, match="column 'lon' has type string; coordinates must be numbers"):
        bin_file(grid, src, "lat", "lon", None)
    pq.write_table(pa.table({"lat": [95.0], "lon": [2]}), src)
    with pytest.raises(ValidationError, match=r"row 1: \(lat, lon\) = \(95.0, 2.0\)"):
        bin_file(grid, src, "lat", "lon", None)
    assert not (tmp_path / "out.parquet").exists()


def test_counts_only(grid, tmp_path):
    src = tmp_path / "in.csv"
    c = grid.centres
    src.write_text("lat,lon\n" + "".join(f"{a},{b}\n" for a, b in c[[0, 0, 3]].tolist()))
    st_ = bin_file(grid, src, "lat", "lon", None)
    assert st_.counts[0] == 2 and st_.counts[3] == 1 and st_.counts.sum() == 3
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["in.csv"]


_TEXT = st.text(alphabet=st.sampled_from('ab ,"x'), max_size=6)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 47), st.booleans(), _TEXT, st.sampled_from(["\n", "\r\n"])),
             min_size=1, max_size=30),
    st.booleans(), st.integers(1, 7),
)
def test_bin_csv_fuzz_against_a_line_oracle(rows, last_eol, chunk_rows):
    """Random quoting, CRLF/LF, commas and quotes in a text column, chunk sizes: the output is every
    input line with ``,label`` before its line break (an oracle that needs no CSV parser: no field
    holds a line break)."""
    import tempfile

    g = CellGrid.over(BOX, 1.0)
    lines = []
    for k, quote, text, eol in rows:
        lat, lon = g.centres[k].tolist()
        field = f'"{lat}"' if quote else f"{lat}"
        note = '"' + text.replace('"', '""') + '"'
        lines.append((f"{note},{field},{lon}", eol))
    lines[-1] = (lines[-1][0], lines[-1][1] if last_eol else "")
    src_text = "note,lat,lon\n" + "".join(a + e for a, e in lines)
    labelled = [f"{a},{g.labels[row[0]]}{e}" for (a, e), row in zip(lines, rows, strict=True)]
    want = "note,lat,lon,cell\n" + "".join(labelled)
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "in.csv", Path(d) / "out.csv"
        src.write_bytes(src_text.encode())
        bin_file(g, src, "lat", "lon", out, chunk_rows=chunk_rows)
        assert out.read_bytes() == want.encode()
