"""The report's location section: true vs released heat maps and displacements, from the matrix and from rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from metricdp.location.cells import planar_laplace_cells
from metricdp.location.grid import CellGrid
from metricdp.spaces import MetricSpace
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import skip_unless

skip_unless("plot")


@pytest.fixture(scope="module")
def mech():
    g = CellGrid.over("56.90,24.00,56.93,24.05", 1.0)
    return planar_laplace_cells(MetricSpace.from_points(g.centres, g.labels, metric="haversine"), 2.0)


def _number(page: str, name: str) -> float:
    m = re.search(re.escape(name) + r"</th><td class=\"num\">([0-9.e+-]+)", page)
    assert m, name
    return float(m.group(1))


def test_displacement_from_the_matrix_by_hand(mech):
    from metricdp.report import _location_section

    prior = np.arange(1, mech.n + 1, dtype=float)
    prior /= prior.sum()
    page = _location_section(mech, "km", prior, None)
    d, m = np.asarray(mech.distances), np.asarray(mech.matrix)
    mean = float((prior[:, None] * m * d).sum())
    assert _number(page, "mean displacement (matrix)") == pytest.approx(mean, rel=1e-5)
    tv = 0.5 * np.abs(prior - prior @ m).sum()
    assert _number(page, "total variation, true vs released heat map (matrix)") == pytest.approx(tv, rel=1e-3)
    assert "Axes in km" in page and page.count("data:image/png;base64,") == 1


def test_observed_rows(mech, monkeypatch):
    from metricdp import report
    from metricdp.report import _location_section, render_report

    t = np.array([0, 1, 2, 2])
    r = np.array([0, 2, 2, 5])
    page = _location_section(mech, "km", None, (t, r))
    d = np.asarray(mech.distances)
    assert _number(page, "mean displacement (observed rows)") == pytest.approx(float(d[t, r].mean()), rel=1e-5)
    # render_report checks `observed` after drawing the privacy and loss figures: what is asserted here is the
    # refusal, so those figures are not drawn (the full page with observed rows: test_cli_true_and_released)
    monkeypatch.setattr(report, "_fig_uri", lambda fig: "data:image/png;base64,")
    with pytest.raises(ValueError, match="observed"):
        render_report(mech, observed=(t, r[:2]))


@pytest.mark.slow
def test_cli_true_and_released(tmp_path: Path, mech):
    mfile = tmp_path / "m.npz"
    mech.save(mfile)
    labels = mech.labels
    (tmp_path / "t.csv").write_text("id,cell\n" + "".join(f"{i},{labels[i]}\n" for i in range(4)))
    (tmp_path / "r.csv").write_text("id,cell\n" + "".join(f'{i},"{labels[(i + 1) % 4]}"\n' for i in range(4)))
    r = run("report", mfile, "--out", tmp_path / "r.html", "--true", tmp_path / "t.csv", "--released",
            tmp_path / "r.csv")
    assert r.exit_code == 0, r.output
    assert "TRUE locations" in r.stderr
    assert "mean displacement (observed rows)" in (tmp_path / "r.html").read_text()
    r = run("report", mfile, "--out", tmp_path / "x.html", "--true", tmp_path / "t.csv")
    assert_one_line_error(r, "--true and --released go together")
    (tmp_path / "bad.csv").write_text("id,cell\n0,nowhere\n")
    r = run("report", mfile, "--out", tmp_path / "x.html", "--true", tmp_path / "t.csv", "--released",
            tmp_path / "bad.csv")
    assert_one_line_error(r, "bad.csv: line 2: column 'cell' has 'nowhere'")
    (tmp_path / "short.csv").write_text("id,cell\n0," + labels[0] + "\n")
    r = run("report", mfile, "--out", tmp_path / "x.html", "--true", tmp_path / "t.csv", "--released",
            tmp_path / "short.csv")
    assert_one_line_error(r, "has 4 rows")
    assert not (tmp_path / "x.html").exists()


def test_cli_true_and_released_paired_by_key(tmp_path: Path, mech):
    """A release that withheld rows 0 and 2: by position the rows cannot be paired; --key id pairs 3 -> label 0 and
    1 -> label 1, so the mean displacement is (d(3, 0) + d(1, 1)) / 2 = d(3, 0) / 2."""
    mfile = tmp_path / "m.npz"
    mech.save(mfile)
    labels = mech.labels
    (tmp_path / "t.csv").write_text("id,cell\n" + "".join(f"r{i},{labels[i]}\n" for i in range(4)))
    (tmp_path / "r.csv").write_text(f"id,cell\nr3,{labels[0]}\nr1,{labels[1]}\n")
    base = ("report", mfile, "--out", tmp_path / "r.html", "--true", tmp_path / "t.csv", "--released",
            tmp_path / "r.csv")
    assert_one_line_error(run(*base), "has 4 rows", "--key COL")
    r = run(*base, "--key", "id")
    assert r.exit_code == 0, r.output
    assert "2 rows of" in r.stderr and "withheld" in r.stderr
    page = (tmp_path / "r.html").read_text()
    d = np.asarray(mech.distances)
    assert _number(page, "mean displacement (observed rows)") == pytest.approx(d[3, 0] / 2, rel=1e-5)
    for rows, says in (("id,cell\nr3,{0}\nr3,{0}\n", "key 'r3' is not unique (rows 1 and 2)"),
                       ("id,cell\nr9,{0}\n", "1 released rows have a key with no true row (first 'r9')"),
                       ("who,cell\nr3,{0}\n", "has no column 'id'")):
        (tmp_path / "bad.csv").write_text(rows.format(labels[0]))
        r = run("report", mfile, "--out", tmp_path / "x.html", "--true", tmp_path / "t.csv", "--released",
                tmp_path / "bad.csv", "--key", "id")
        assert_one_line_error(r, "--key", says)
    assert_one_line_error(run("report", mfile, "--out", tmp_path / "x.html", "--key", "id"), "give both")
    assert not (tmp_path / "x.html").exists()
