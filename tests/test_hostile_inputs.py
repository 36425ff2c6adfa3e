"""Inputs that ended in a traceback: each is now one typed error or a correct result.

Found by running every command with extreme parameters, unusual file shapes and hostile
region files; each test below is one such input, checked at the depth where it is fixed
(the library raises a :class:`~metricdp.errors.ValidationError` naming the culprit; the
CLI prints it as one line).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.data.embeddings import read_vec, read_word2vec_binary
from metricdp.errors import ValidationError
from metricdp.location.region import Region, parse_region
from metricdp.mechanisms import build
from metricdp.spaces import MetricSpace
from tests.cli_helpers import assert_one_line_error, run
from tests.helpers import import_or_skip, needs, skip_unless

GRID_2X2 = "label,x,y\na,0,0\nb,1,0\nc,0,1\nd,1,1\n"


# ------------------------------------------------------------------ report on a symmetric space
@pytest.mark.parametrize("metric", ["euclidean", "manhattan"])
def test_report_on_a_symmetric_space(tmp_path, metric):
    """Every element of a 2 x 2 grid has the same loss up to rounding: the histogram still draws."""
    skip_unless("plot")
    (tmp_path / "g.csv").write_text(GRID_2X2)
    mech = tmp_path / "g.npz"
    assert run("build", tmp_path / "g.csv", "-m", "exponential", "-e", "1", "--metric", metric,
               "--out", mech).exit_code == 0
    out = tmp_path / "r.html"
    result = run("report", mech, "--out", out)
    assert result.exit_code == 0, result.output
    assert out.read_text().count("data:image/png;base64,") == 4  # eps_tight, losses, true vs released, map


def test_hist_range_widens_only_rounding_spans():
    from metricdp._figure import hist_range

    losses = np.array([0.7550813375255987, 0.7550813375255988, 0.7550813375255987])
    lo, hi = hist_range(losses)
    assert lo < losses.min() and hi > losses.max()
    assert np.histogram(losses, bins=5, range=(lo, hi))[0].sum() == 3
    assert hist_range([0.0, 1.0]) is None
    assert hist_range([0.0, 0.0]) == (-1e-6, 1e-6)
    assert hist_range([np.nan]) is None


@needs("plot")
def test_report_refuses_a_bad_quantile(tmp_path):
    (tmp_path / "g.csv").write_text(GRID_2X2)
    assert run("build", tmp_path / "g.csv", "-m", "exponential", "-e", "1", "--out", tmp_path / "g.npz").exit_code == 0
    for q in ("nan", "0", "2"):
        assert_one_line_error(run("report", tmp_path / "g.npz", "--quantile", q, "--out", tmp_path / "r.html"),
                              "quantile")
    assert not (tmp_path / "r.html").exists()


# ------------------------------------------------------------------ embedding headers
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("3 1000000000000\na 1 2\nb 3 4\nc 5 6\n", "announces dimension 1000000000000"),
        ("2 99\na 1 2\nb 3 4\n", "announces dimension 99, more values per line than the file's 17 bytes"),
        ("2 5\na 1 2\nb 3 4\n", "line 2 has 2 values after the word, expected 5"),
    ],
)
def test_vec_header_with_a_huge_dimension(tmp_path, content, message):
    p = tmp_path / "e.vec"
    p.write_text(content)
    with pytest.raises(ValidationError, match=message):
        read_vec(p)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"3 1000000000000\n", "cannot hold one vector of that dimension"),
        (b"100000000000000 2\n", "announces 100000000000000 words but the file ends after 1"),
    ],
)
def test_word2vec_header_larger_than_the_file(tmp_path, header, message):
    """The allocation follows what the file can hold, never the header's announcement."""
    p = tmp_path / "e.bin"
    p.write_bytes(header + b"a " + np.zeros(2, "<f4").tobytes())
    with pytest.raises(ValidationError, match=message):
        read_word2vec_binary(p)


def test_data_vec_huge_dimension_is_one_line(tmp_path):
    p = tmp_path / "e.vec"
    p.write_text("3 1000000000000\na 1 2\nb 3 4\nc 5 6\n")
    assert_one_line_error(run("data", "vec", p, "--size", "2", "--out", tmp_path / "o.csv"), "dimension")


# ------------------------------------------------------------------ extreme epsilons
@pytest.mark.parametrize("family", ["geometric", "constopt"])
def test_denormal_epsilon_builds(family):
    """eps = 1e-308: the lattice radius of geometric overflowed a float, and constopt's rows
    underflowed to empty; both now give the (uniform) mechanism, audited at that epsilon."""
    space = MetricSpace.from_points(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), list("abcd"))
    mech = build(family, space, 1e-308)
    np.testing.assert_allclose(np.asarray(mech.matrix), 0.25, rtol=1e-12)
    assert mech.audit().epsilon <= 1e-308


def test_lattice_radius_at_tiny_alpha_is_an_error():
    from metricdp.mechanisms.geometric import lattice_truncation_radius

    with pytest.raises(ValidationError, match="too small"):
        lattice_truncation_radius(1e-308)


# ------------------------------------------------------------------ label,value files
@pytest.mark.parametrize(
    ("content", "message"),
    # the file layer's reader: one line naming the option, the file, the line and the byte
    [(bytes(range(256)) * 4, "line 1"), (b"a,0.5\n\xff\xfe,1\n", "line 2: not valid UTF-8 at byte offset 6")],
)
def test_prior_file_that_is_not_text(tmp_path, content, message):
    (tmp_path / "g.csv").write_text(GRID_2X2)
    assert run("build", tmp_path / "g.csv", "-m", "exponential", "-e", "1", "--out", tmp_path / "g.npz").exit_code == 0
    prior = tmp_path / "prior.csv"
    prior.write_bytes(content)
    assert_one_line_error(run("evaluate", tmp_path / "g.npz", "--prior", prior), "--prior", message)
    assert_one_line_error(run("build", tmp_path / "g.csv", "-m", "weighted-exponential", "-e", "1",
                              "--weights", prior, "--out", tmp_path / "w.npz"), "--weights", message)


# ------------------------------------------------------------------ hostile regions
_HOSTILE_REGIONS = {
    "coordinates a number": ('{"type":"Polygon","coordinates":5}', "'coordinates' must be a list"),
    "coordinates an object": ('{"type":"Polygon","coordinates":{"a":1}}', "'coordinates' must be a list"),
    "multipolygon of numbers": ('{"type":"MultiPolygon","coordinates":[1,2]}', "polygon 0: no rings"),
    "features a number": ('{"type":"FeatureCollection","features":5}', "'features' must be a list"),
    "features a string": ('{"type":"FeatureCollection","features":"abc"}', "'features' must be a list"),
    "geometries an object": ('{"type":"GeometryCollection","geometries":{}}', "'geometries' must be a list"),
    "type a list": ('{"type":["Polygon"]}', "'type' must be a string"),
    "ring a number": ('{"type":"Polygon","coordinates":[7]}', "a ring must be a list"),
    "integer beyond a float": ('{"type":"Polygon","coordinates":[[[0,0],[1' + "0" * 400 + ',0],[1,1],[0,0]]]}',
                               "a ring must be a list of [lon, lat] positions"),
    "NaN position": ('{"type":"Polygon","coordinates":[[[0,0],[1,NaN],[1,1],[0,0]]]}', "not a (lat, lon)"),
    "brackets nested deep": ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    "collections nested deep": ('{"type":"GeometryCollection","geometries":[' * 40 + "]}" * 40,
                                "nested more than 16 deep"),
}


@pytest.mark.parametrize("name", sorted(_HOSTILE_REGIONS))
def test_hostile_region_file(tmp_path, name):
    text, message = _HOSTILE_REGIONS[name]
    p = tmp_path / "r.geojson"
    p.write_text(text)
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        parse_region(p)


def test_hostile_region_through_the_cli(tmp_path):
    (tmp_path / "pts.csv").write_text("id,lat,lon\n1,48.85,2.35\n")
    region = tmp_path / "r.geojson"
    region.write_text('{"type":"Polygon","coordinates":5}')
    out = tmp_path / "o.csv"
    assert_one_line_error(run("privatize-points", tmp_path / "pts.csv", "--lat", "lat", "--lon", "lon", "-e", "1",
                              "--region", region, "--out", out), "r.geojson", "'coordinates' must be a list")
    assert not out.exists()


# ------------------------------------------------------------------ the even-odd test (no matplotlib)
_coord = st.floats(-60, 60, allow_nan=False, allow_infinity=False)


@given(
    ring=st.lists(st.tuples(_coord, _coord), min_size=3, max_size=9, unique=True),
    hole=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_inside_matches_matplotlib(ring, hole, seed):
    """The numpy even-odd rule agrees with matplotlib's crossing test (the previous
    implementation) on random, possibly self-intersecting rings with a hole, away from edges."""
    mpath = import_or_skip("matplotlib.path", "plot")
    outer = np.asarray(ring, dtype=np.float64)  # (lat, lon)
    rings = [outer]
    if hole:
        rings.append(outer.mean(axis=0) + 0.3 * (outer - outer.mean(axis=0)))
    if any(len(np.unique(r, axis=0)) < 3 for r in rings):
        return
    sv = np.linalg.svd(outer - outer.mean(axis=0), compute_uv=False)
    if sv[1] <= 1e-9 * sv[0]:  # collinear: refused as enclosing no area (tests/location/test_region.py)
        return
    geo = {"type": "Polygon", "coordinates": [[[lon, lat] for lat, lon in r] for r in rings]}
    region = Region.from_geojson(json.loads(json.dumps(geo)))
    pts = np.random.default_rng(seed).uniform(-70, 70, size=(400, 2))
    far = region.boundary_distance_km(pts) > 1e-3  # the two tests may differ exactly on an edge
    expected = np.zeros(len(pts), dtype=bool)
    for r in region.polygons[0]:
        expected ^= mpath.Path(r[:, ::-1], closed=False).contains_points(pts[:, ::-1])
    np.testing.assert_array_equal(region._inside(pts)[far], expected[far])


# ------------------------------------------------------------------ sizes beyond any memory
def test_denormal_cell_is_refused_before_int64_keys_overflow():
    from metricdp.data.geo import cells_from_points

    with pytest.raises(ValidationError, match="more than 1e\\+15 cells"):
        cells_from_points([48.8], [2.3], region="paris", cell=1e-308, size=2)


@pytest.mark.parametrize("huge", [10**12, 10**30])
def test_text_sizes_beyond_memory(huge):
    from metricdp.errors import ResourceLimitError
    from metricdp.pointspace import PointSpace
    from metricdp.text.exponential import ExponentialText
    from metricdp.text.stats import plausible_deniability
    from metricdp.text.subsampled import SubsampledText

    space = PointSpace.from_points([[0.0], [1.0], [9.0]])
    with pytest.raises(ResourceLimitError, match=f"candidates = {huge}"):
        SubsampledText(space, 1.0, candidates=huge)
    mech = ExponentialText(space, 1.0)
    with pytest.raises(ResourceLimitError, match=f"draws = {huge}"):
        plausible_deniability(lambda i: mech.sample(i, rng=0), space, np.arange(3), huge)


# ------------------------------------------------------------------ benchmarks: arguments checked before any run
def test_bench_arguments_checked_before_running(tmp_path):
    from metricdp.experiments.bench_privatize import run_privatize_bench
    from metricdp.experiments.bench_text import run_text_bench

    with pytest.raises(ValidationError, match="tokens must be >= 1"):
        run_text_bench(["exponential"], -1)  # ran the benchmark and reported -1,775 tokens/s
    with pytest.raises(ValidationError, match="epsilon"):
        run_text_bench(["exponential"], 10, epsilon=float("nan"))
    for rows, timeout in (([0], 10.0), ([-1], 10.0), ([5], float("nan"))):
        with pytest.raises(ValidationError):
            run_privatize_bench(rows, ["csv"], ["local"], tmp_path / "w", timeout=timeout)
    assert not (tmp_path / "w").exists()


# ------------------------------------------------------------------ found by the second sweep
@pytest.mark.parametrize(("option", "value"), [("--certify", "inf"), ("--certify", "nan"), ("--time-limit", "1e308")])
def test_bench_lp_time_limits_beyond_a_deadline(option, value):
    assert_one_line_error(run("bench", "lp", "--quick", "--data", "gaussian", option, value),
                          option.lstrip("-").replace("-", "_"))


def test_bench_privatize_infinite_timeout(tmp_path):
    from metricdp.experiments.bench_privatize import run_privatize_bench

    with pytest.raises(ValidationError, match="timeout"):
        run_privatize_bench([5], ["csv"], ["local"], tmp_path / "w", timeout=float("inf"))


def test_exponential_choice_with_an_overflowing_exponent():
    """eps * score gap overflows to -inf: a weight that would never be drawn here and could be from a
    neighbouring dataset (an unbounded privacy loss) is refused in one error, never rounded to 0."""
    from metricdp.mechanisms.selection import exponential_choice

    with pytest.raises(ValidationError, match="exceeds the float range"):
        exponential_choice(np.array([0.0, -1.0, -2.0]), 1e308, np.random.default_rng(0))
    # a huge but finite exponent is still drawn exactly (the log-domain Bernoulli)
    picks = [int(exponential_choice(np.array([0.0, -1.0]), 1e300, np.random.default_rng(s))) for s in range(5)]
    assert picks == [0] * 5


def test_checkins_file_that_is_not_text(tmp_path):
    from metricdp.data.checkins import read_checkins

    p = tmp_path / "c.csv"
    p.write_bytes(b"\x93NUMPY" + bytes(range(256)))
    with pytest.raises(ValidationError, match="not a UTF-8 text file"):
        read_checkins(p)
