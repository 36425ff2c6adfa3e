"""``metricdp report`` end to end."""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest
import typer
from typer.testing import CliRunner

from metricdp.cli.report import register
from metricdp.io import read_points
from metricdp.mechanisms.exponential import exponential
from tests.cli_helpers import assert_one_line_error, make_app
from tests.helpers import needs

#: ``report`` checks for ``plot`` before anything else (tests/cli/test_extras.py: the error without it).
pytestmark = needs("plot")
runner = CliRunner()
CAPITALS = resources.files("metricdp") / "data" / "examples" / "europe-capitals.csv"


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return make_app(register)


@pytest.fixture
def mech_file(tmp_path):
    path = tmp_path / "m.npz"
    exponential(read_points(CAPITALS), 0.01).save(path)
    return path


@pytest.mark.slow
def test_report_writes_html(app, mech_file, tmp_path):
    out = tmp_path / "r.html"
    prior = tmp_path / "prior.csv"
    space = read_points(CAPITALS)
    prior.write_text("label,prior\n" + "".join(f"{lab},{i + 1}\n" for i, lab in enumerate(space.labels)))
    args = ["report", str(mech_file), "--out", str(out), "--inputs", "Paris,Rome", "--prior", str(prior)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.stdout
    text = out.read_text()
    assert "Adversary" in text and text.startswith("<!DOCTYPE html>")
    sha = hashlib.sha256(mech_file.read_bytes()).hexdigest()
    for where in (r.stdout, text):  # the settings block, on the terminal and on the page
        assert "mechanism:    exponential" in where and "epsilon:      0.01 per km" in where
        assert "prior:        prior.csv" in where and "input:        m.npz" in where and sha in where


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--inputs", "Atlantis"], "Atlantis"),
        (["--out-suffix"], "html"),
    ],
)
def test_errors(app, mech_file, tmp_path, args, fragment):
    out = tmp_path / ("r.txt" if args == ["--out-suffix"] else "r.html")
    extra = [] if args == ["--out-suffix"] else args
    r = runner.invoke(app, ["report", str(mech_file), "--out", str(out), *extra])
    assert_one_line_error(r, fragment)
    assert not out.exists()


def test_not_a_mechanism_file(app, tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_text("nope")
    assert_one_line_error(runner.invoke(app, ["report", str(bad), "--out", str(tmp_path / "r.html")]), "x.npz")


def test_a_rectangular_mechanism_is_refused_and_nothing_is_written(app, tmp_path):
    from metricdp.outputs import OutputSet

    space = read_points(CAPITALS)
    path = tmp_path / "r.npz"
    exponential(space, 0.01, outputs=OutputSet.from_points(space, [[48.0, 5.0]], ["hub"])).save(path)
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(path), "--out", str(out)])
    assert_one_line_error(r, "separate output set")
    assert not out.exists()


@pytest.mark.parametrize("label", ["$x$", "a$b", r"\frac$", r"$\notacommand{$"])
def test_a_label_with_dollars_is_drawn_as_written(app, tmp_path, label):
    """matplotlib's mathtext read '$...$' in a label as a formula (a ParseException traceback)."""
    from metricdp import MetricSpace

    space = MetricSpace.from_points([[48.85, 2.35], [45.76, 4.84], [43.3, 5.37]], [label, "Lyon", "Marseille"],
                                    metric="haversine")
    path = tmp_path / "m.npz"
    exponential(space, 0.01).save(path)
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(path), "--out", str(out), "--inputs", label])
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.stdout and out.read_text().startswith("<!DOCTYPE html>")
