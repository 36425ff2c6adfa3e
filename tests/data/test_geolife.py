"""Geolife .plt loader and Imola et al.'s bin pipeline, on fixture files written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metricdp.data.geolife import geolife_bins, plt_files, read_plt
from metricdp.errors import ValidationError

HEADER = "Geolife trajectory\nWGS 84\nAltitude is in Feet\nReserved 3\n0,2,255,My Track,0,0,2,8421376\n0\n"

# A small box in Beijing with cells of 0.01 degrees: cell (r, c) spans
# lat 39.9 + [r, r+1) * 0.01, lon 116.3 + [c, c+1) * 0.01.
BOX = (39.9, 116.3, 40.0, 116.4)
CELL = 0.01


def centre(r: int, c: int) -> tuple[float, float]:
    return 39.9 + (r + 0.5) * CELL, 116.3 + (c + 0.5) * CELL


def write_plt(path: Path, points, trailing: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(
        f"{lat!r},{lon!r},0,492,39744.1201851852,2008-10-23,02:53:{k % 60:02d}\n"
        for k, (lat, lon) in enumerate(points)
    )
    path.write_text(HEADER + body + trailing, encoding="utf-8")
    return path


def visits(*cells_and_counts: tuple[tuple[int, int], int]) -> list[tuple[float, float]]:
    return [centre(*rc) for rc, k in cells_and_counts for _ in range(k)]


def test_read_plt_round_trip(tmp_path):
    pts = [(39.984702, 116.318417), (39.984683, 116.31845), (40.0, -73.5)]
    p = write_plt(tmp_path / "a.plt", pts, trailing="\n")
    got = read_plt(p)
    assert got.shape == (3, 2) and got.dtype == np.float64
    np.testing.assert_array_equal(got, pts)


def test_read_plt_empty_trace(tmp_path):
    assert read_plt(write_plt(tmp_path / "e.plt", [])).shape == (0, 2)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("39.9,116.3,0,1,2,d,t\n39.9\n", "line 8 has 1 field"),
        ("39.9,116.3,0,1,2,d,t\n39.9,116.3,0,1,2,d,t\nabc,116.3,0\n", "line 9: latitude/longitude 'abc'"),
        ("39.9,nan,0\n", "line 7 is not finite"),
    ],
)
def test_read_plt_errors_name_the_line(tmp_path, body, message):
    p = tmp_path / "bad.plt"
    p.write_text(HEADER + body, encoding="utf-8")
    with pytest.raises(ValidationError, match=message) as info:
        read_plt(p)
    assert "bad.plt" in str(info.value)


def test_read_plt_rejects_non_plt_files(tmp_path):
    p = tmp_path / "short.plt"
    p.write_text("only\ntwo lines\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="expected 6 header lines"):
        read_plt(p)
    with pytest.raises(ValidationError, match="no such file"):
        read_plt(tmp_path / "missing.plt")
    b = tmp_path / "binary.plt"
    b.write_bytes(b"\xff\xfe" * 10)
    with pytest.raises(ValidationError, match="not a text file"):
        read_plt(b)


@pytest.fixture
def geolife(tmp_path) -> Path:
    """Three users' traces: the histogram over top-2 cells is X:1, Y:2, Z:2, W:0."""
    root = tmp_path / "Data"
    X, Y, Z, W = (1, 1), (2, 3), (5, 5), (8, 2)
    write_plt(root / "000/Trajectory/a.plt", [*visits((X, 5), (Y, 3), (Z, 1)), (10.0, 10.0)])  # top 2: X, Y
    write_plt(root / "000/Trajectory/b.plt", visits((Y, 4), (Z, 2), (W, 1)))  # top 2: Y, Z
    write_plt(root / "001/Trajectory/c.plt", visits((Z, 10)))  # top 2: Z
    write_plt(root / "002/Trajectory/d.plt", [(31.2, 121.5)] * 4)  # Shanghai: outside the box
    (root / "002/Trajectory/notes.txt").write_text("not a trace")
    return root


def test_geolife_bins_by_hand(geolife):
    cells = geolife_bins(geolife, region=BOX, cell=CELL, top_regions=2, size=3)
    assert cells.available == 3  # W is in no trace's top 2
    got = dict(zip(cells.space.labels, cells.weights.tolist(), strict=True))
    assert got == {"cell_1_1": 1.0, "cell_2_3": 2.0, "cell_5_5": 2.0}
    assert cells.space.labels[-1] == "cell_1_1" and np.all(np.diff(cells.weights) <= 0)
    np.testing.assert_array_equal(cells.counts, cells.weights)
    i = cells.space.labels.index("cell_2_3")
    np.testing.assert_allclose(cells.space.points[i], centre(2, 3), atol=1e-12)
    assert cells.space.metric == "haversine"
    space, weights = cells
    assert space.n == 3 and weights.tolist() == cells.weights.tolist()


def test_geolife_top_regions_and_size(geolife):
    # with the top 3 cells per trace, W counts (trace b) and Z gets a third trace (a)
    cells = geolife_bins(geolife, region=BOX, cell=CELL, top_regions=3, size=4)
    got = dict(zip(cells.space.labels, cells.weights.tolist(), strict=True))
    assert got == {"cell_1_1": 1.0, "cell_2_3": 2.0, "cell_5_5": 3.0, "cell_8_2": 1.0}
    assert cells.space.labels[0] == "cell_5_5"
    with pytest.raises(ValidationError, match="only 3 cells"):
        geolife_bins(geolife, region=BOX, cell=CELL, top_regions=2, size=4)


def test_geolife_inputs_folder_list_and_file_agree(geolife):
    files = plt_files(geolife)
    assert [f.name for f in files] == ["a.plt", "b.plt", "c.plt", "d.plt"]
    a = geolife_bins(geolife, region=BOX, cell=CELL, top_regions=2, size=2)
    b = geolife_bins([str(f) for f in reversed(files)], region=BOX, cell=CELL, top_regions=2, size=2)
    assert a.space.labels == b.space.labels
    # one file: trace c visits only Z
    with pytest.raises(ValidationError, match=r"the 1 Geolife trace.* has only 1 cells"):
        geolife_bins(files[2], region=BOX, cell=CELL, size=2)


def test_geolife_default_region_and_the_global_grid(geolife):
    # the default region is the Beijing municipality; 0.005 degree bins as in the paper
    cells = geolife_bins(geolife, size=3, top_regions=2)
    assert cells.cell == 0.005 and cells.available == 3
    world = geolife_bins(geolife, region=None, size=4, top_regions=2)
    assert world.available == 4  # Shanghai counts on the global grid
    r, c = int((31.2 + 90) / 0.005), int((121.5 + 180) / 0.005)
    assert f"cell_{r}_{c}" in world.space.labels


def test_geolife_errors(tmp_path, geolife):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValidationError, match=r"no \.plt files"):
        geolife_bins(tmp_path / "empty")
    with pytest.raises(ValidationError, match=r"no \.plt files given"):
        geolife_bins([])
    with pytest.raises(ValidationError, match="none of the 4 trace"):
        geolife_bins(geolife, region=(0, 0, 1, 1))
    with pytest.raises(ValidationError, match="no such file or folder"):
        geolife_bins(tmp_path / "nope")
    with pytest.raises(ValidationError, match="top_regions must be >= 1"):
        geolife_bins(geolife, top_regions=0)
