"""The HTML report: content, self-containment, and rendering in headless Chromium."""

from __future__ import annotations

import re
import subprocess
from importlib import resources

import numpy as np
import pytest

from metricdp.errors import ValidationError
from metricdp.io import read_points
from metricdp.mechanisms.exponential import exponential
from metricdp.mechanisms.krr import krr
from metricdp.report import default_inputs, render_report, write_report
from metricdp.spaces import MetricSpace
from tests.helpers import needs, program

CAPITALS = resources.files("metricdp") / "data" / "examples" / "europe-capitals.csv"
CHROMIUM = program("chromium")


@pytest.fixture(scope="module")
def geo_mech():
    return exponential(read_points(CAPITALS), 0.01)


@pytest.fixture(scope="module")
def word_mech():
    words = ["cat", "dog", "mouse", "horse", "cow", "sheep<&>"]
    pts = np.random.default_rng(0).random((len(words), 5))
    return krr(MetricSpace.from_points(pts, labels=words), 2.0)


def _self_contained(text: str) -> None:
    assert "<script" not in text.lower()
    assert not re.search(r"(src|href)=\"(?!data:)", text)
    assert "http://" not in text and "https://" not in text


@pytest.mark.slow
@needs("plot")
def test_geo_report_content(geo_mech):
    text = render_report(geo_mech, prior=np.full(geo_mech.n, 1 / geo_mech.n))
    _self_contained(text)
    assert "epsilon (audited)" in text and "passes" in text
    assert "eps_tight" in text and "Where releases go" in text
    assert "km" in text  # the unit is carried
    assert "Adversary" in text
    assert text.count("data:image/png;base64,") == 4  # eps_tight, losses, true vs released, map
    # a zero quantile bound is explained
    assert "A lower bound of 0 means" in text


@pytest.mark.slow
@needs("plot")
def test_word_report_has_a_table_of_most_likely_releases(word_mech):
    text = render_report(word_mech, top=3)
    _self_contained(text)
    assert "Most likely releases" in text and "Where releases go" not in text
    assert "sheep&lt;&amp;&gt;" in text and "sheep<&>" not in text  # escaped
    # krr: each word's most likely release is itself
    row = re.search(r"<tr><th>dog</th><td class=\"num\">([0-9.]+)</td><td>(\w+) ", text)
    assert row is not None and row.group(2) == "dog"
    assert float(row.group(1)) == pytest.approx(word_mech.matrix[1, 1], abs=1e-3)


def test_default_inputs_are_spread(geo_mech):
    idx = default_inputs(geo_mech)
    assert len(set(idx.tolist())) == 4


@needs("plot")
def test_bad_arguments(geo_mech):
    with pytest.raises(ValidationError, match="inputs"):
        render_report(geo_mech, inputs=[999])
    with pytest.raises(ValidationError, match="deltas"):
        render_report(geo_mech, deltas=[2.0])
    with pytest.raises(ValidationError, match="prior"):
        render_report(geo_mech, prior=[1.0])


def _render(html_path, png_path, profile):
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={profile}", f"--screenshot={png_path}", "--window-size=1000,1600",
         html_path.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.returncode, console


def _blank(png_path) -> bool:
    import matplotlib.image as mpimg

    img = mpimg.imread(png_path)[..., :3]
    non_white = (img < 0.95).any(axis=2).mean()
    return non_white < 0.01 or float(img.std()) < 0.02


@pytest.mark.slow
@needs("plot", "chromium")
def test_report_renders_in_headless_chromium(geo_mech, word_mech, tmp_path):
    for name, mech in (("geo", geo_mech), ("words", word_mech)):
        page = tmp_path / f"{name}.html"
        write_report(mech, page)
        shot = tmp_path / f"{name}.png"
        code, console = _render(page, shot, tmp_path / f"profile-{name}")
        assert code == 0
        assert console == [], console
        assert shot.is_file() and not _blank(shot)


@pytest.mark.slow
@needs("plot", "chromium")
def test_the_rendering_checks_can_fail(tmp_path):
    """Negative controls: a console error is seen, a white page is blank."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom")</script></body></html>')
    code, console = _render(bad, tmp_path / "bad.png", tmp_path / "profile")
    assert code == 0 and any("boom" in line for line in console)
    assert _blank(tmp_path / "bad.png")


def test_a_rectangular_mechanism_is_refused_clearly():
    from metricdp.mechanisms.exponential import exponential
    from metricdp.outputs import OutputSet
    from metricdp.report import render_report
    from metricdp.spaces import MetricSpace

    space = MetricSpace.grid(2, 2)
    mech = exponential(space, 1.0, outputs=OutputSet.from_points(space, [[0.5, 0.5]]))
    with pytest.raises(ValidationError, match="separate output set"):
        render_report(mech)


def test_match_rows_pairs_by_key_and_counts_the_withheld() -> None:
    from metricdp.report import match_rows

    t, r, left = match_rows(["a", "b", "c", "d"], [10, 11, 12, 13], ["d", "b"], [1, 2])
    assert (t.tolist(), r.tolist(), left) == ([13, 11], [1, 2], 2)
    with pytest.raises(ValidationError, match="released rows' key 'b' is not unique"):
        match_rows(["a", "b"], [0, 1], ["b", "b"], [0, 1])
    with pytest.raises(ValidationError, match="true rows' key 'a' is not unique"):
        match_rows(["a", "a"], [0, 1], ["a"], [0])
    with pytest.raises(ValidationError, match="no true row"):
        match_rows(["a"], [0], ["z"], [0])
    with pytest.raises(ValidationError, match="key is empty in row 1"):
        match_rows([""], [0], [""], [0])
    with pytest.raises(ValidationError, match="no released row"):
        match_rows(["a"], [0], [], [])
