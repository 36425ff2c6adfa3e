"""``metricdp estimate``: the CSV equals the library's estimate, the EMD is reported, errors write nothing."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from metricdp import MetricSpace
from metricdp.estimation import emd, ibu, matrix_inversion
from metricdp.mechanisms.krr import krr
from tests.cli_helpers import assert_one_line_error, run

LABELS = ["a", "b", "c", "d"]






@pytest.fixture
def setup(tmp_path: Path):
    space = MetricSpace.from_points([[0.0], [1.0], [3.0], [6.0]], LABELS)
    mech = krr(space, ldp_epsilon=2.0)
    mech_file = tmp_path / "krr.npz"
    mech.save(mech_file)
    g = np.random.default_rng(5)
    true_idx = g.choice(4, size=200, p=[0.1, 0.2, 0.3, 0.4])
    released_idx = mech.sample(true_idx, rng=6)
    for name, idx in (("true.csv", true_idx), ("released.csv", released_idx)):
        with (tmp_path / name).open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["user", "place"])
            w.writerows([f"u{i}", LABELS[k]] for i, k in enumerate(idx))
    counts = np.bincount(released_idx, minlength=4).astype(float)
    truth = np.bincount(true_idx, minlength=4) / len(true_idx)
    return mech, mech_file, tmp_path / "released.csv", tmp_path / "true.csv", counts, truth


def _parse(text: str) -> tuple[list[str], np.ndarray]:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["label", "probability"]
    return [r[0] for r in rows[1:]], np.array([float(r[1]) for r in rows[1:]])


def test_estimate_prints_the_ibu_estimate_and_the_emd(setup) -> None:
    mech, mech_file, released, true, counts, truth = setup
    result = run("estimate", mech_file, released, "--column", "place", "--true", true)
    assert result.exit_code == 0, result.output
    labels, p = _parse(result.stdout)
    expected = ibu(counts, mech).estimate
    assert labels == LABELS
    np.testing.assert_array_equal(p, expected)  # repr round-trips floats exactly
    assert result.stderr.strip() == f"emd {emd(expected, truth, mech.space)!r}"


def test_estimate_inversion_to_a_file(setup, tmp_path: Path) -> None:
    mech, mech_file, released, true, counts, truth = setup
    out = tmp_path / "est.csv"
    result = run("estimate", mech_file, released, "-c", "place", "--true", true, "--true-column", "place",
                 "--method", "inversion", "--out", out)
    assert result.exit_code == 0, result.output
    labels, p = _parse(out.read_text(encoding="utf-8"))
    assert labels == LABELS
    expected = matrix_inversion(counts, mech)
    np.testing.assert_array_equal(p, expected)
    assert f"wrote {out}" in result.stdout
    assert f"emd {emd(expected, truth, mech.space)!r}" in result.stdout


def test_estimate_warns_when_ibu_hits_the_cap(setup) -> None:
    _, mech_file, released, *_ = setup
    result = run("estimate", mech_file, released, "-c", "place", "--max-iter", "2", "--tol", "1e-300")
    assert result.exit_code == 0, result.output
    assert "warning: IBU hit the cap of 2 iterations" in result.stderr


def test_estimate_errors_are_one_line_and_write_nothing(setup, tmp_path: Path) -> None:
    _, mech_file, released, true, *_ = setup
    out = tmp_path / "never.csv"
    assert_one_line_error(run("estimate", mech_file, released, "-c", "city", "--out", out),
                          "no column 'city'", "'user', 'place'")
    bad = tmp_path / "bad.csv"
    bad.write_text("place\na\nzz\n", encoding="utf-8")
    assert_one_line_error(run("estimate", mech_file, bad, "-c", "place", "--out", out), "'zz'")
    assert_one_line_error(run("estimate", mech_file, released, "-c", "place", "--method", "mle"),
                          "--method must be 'ibu' or 'inversion'")
    assert_one_line_error(run("estimate", mech_file, released, "-c", "place", "--true", true,
                              "--true-column", "nope"), "no column 'nope' (--true-column)")
    assert_one_line_error(run("estimate", tmp_path / "missing.npz", released, "-c", "place"), "no such file")
    assert not out.exists()


def test_estimate_reads_releases_as_output_labels(tmp_path):
    from metricdp.mechanisms.exponential import exponential
    from metricdp.outputs import OutputSet
    from metricdp.spaces import MetricSpace

    space = MetricSpace.from_points([[0.0], [1.0], [2.0]], ["a", "b", "c"])
    path = tmp_path / "r.npz"
    exponential(space, 1.0, outputs=OutputSet.from_points(space, [[0.0], [2.0]], ["lo", "hi"])).save(path)
    released = tmp_path / "rel.csv"
    released.write_text("v\n" + "lo\n" * 60 + "hi\n" * 40)
    result = run("estimate", path, released, "-c", "v")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "label,probability" and [x.split(",")[0] for x in lines[1:]] == ["a", "b", "c"]
    assert sum(float(x.split(",")[1]) for x in lines[1:]) == pytest.approx(1.0)
    bad = tmp_path / "bad.csv"
    bad.write_text("v\na\n")  # an input label is not a release
    assert_one_line_error(run("estimate", path, bad, "-c", "v"), "not among the output labels")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"user,place\ru1,a\ru2,b\r", "line 1: a carriage return"),  # the csv module read 3 records
        (b"user,place\nu1,a\ru2,b\n", "line 2: a carriage return"),
        (b"user,place\nu1,a,\n", "line 2 has 3 fields, expected 2 as in the header (a trailing ','"),
        (b"user,place\nu1,a\n\xef\xbb\xbfu2,b\n", "line 3: a byte-order mark"),
        (b"user,place\nu1,a\x00\n", "line 2: a NUL byte"),
        (b"user,place,place\nu1,a,b\n", "line 1: column 'place' appears more than once"),
    ],
)
@pytest.mark.parametrize("which", ["released", "true"])
def test_hostile_csv_is_one_error(setup, tmp_path, data, fragment, which) -> None:
    """Estimate's column reader is the file layer's CSV record definition."""
    _mech, mech_file, released, true, _counts, _truth = setup
    bad = tmp_path / "bad.csv"
    bad.write_bytes(data)
    args = [bad, "--true", true] if which == "released" else [released, "--true", bad]
    out = tmp_path / "est.csv"
    assert_one_line_error(run("estimate", mech_file, *args, "--column", "place", "--out", out),
                          f"bad.csv: {fragment}")
    assert not out.exists()


def test_released_file_must_be_csv(setup, tmp_path) -> None:
    _mech, mech_file, released, _true, _counts, _truth = setup
    tsv = tmp_path / "r.tsv"
    tsv.write_bytes(released.read_bytes())
    assert_one_line_error(run("estimate", mech_file, tsv, "--column", "place"), "must be .csv, got .tsv")


@pytest.mark.parametrize(("text", "says"), [
    ("1e30", "must be in [1, 4611686018427387904]"), ("100000000000000000000000000000", "must be in [1"),
    ("9223372036854775808", "must be in [1"), ("0", "must be in [1"), ("2.5", "whole number"),
    ("abc", "whole number"), ("nan", "whole number"), ("inf", "whole number")])
def test_max_iter_out_of_range_is_one_error(setup, text: str, says: str) -> None:
    _, mech_file, released, *_ = setup
    result = run("estimate", mech_file, released, "-c", "place", "--max-iter", text)
    assert_one_line_error(result, "--max-iter", says, repr(text))


def test_max_iter_in_exponent_form_is_the_whole_number(setup) -> None:
    mech, mech_file, released, _, counts, _ = setup
    result = run("estimate", mech_file, released, "-c", "place", "--max-iter", "1e1", "--tol", "1e-300")
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(_parse(result.stdout)[1], ibu(counts, mech, tol=1e-300, max_iter=10).estimate)
    assert "cap of 10 iterations" in result.stderr


@pytest.mark.parametrize("method", ["ibu", "inversion"])
def test_estimate_with_intervals_adds_the_library_bands_and_bounds(setup, tmp_path: Path, method: str) -> None:
    from metricdp.intervals import ibu_intervals, inversion_intervals

    mech, mech_file, released, _, counts, _ = setup
    out = tmp_path / "est.csv"
    result = run("estimate", mech_file, released, "-c", "place", "--method", method, "--intervals", "0.9",
                 "--draws", "50", "--seed", "3", "--out", out)
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[0] == ["label", "probability", "lower", "upper"]
    table = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    f = ibu_intervals if method == "ibu" else inversion_intervals
    want = f(counts, mech, level=0.9, draws=50, rng=3)
    np.testing.assert_array_equal(table.T, [want.point, want.lower, want.upper])
    kind = "bootstrap" if method == "ibu" else "normal"
    assert f"tv to the truth <= {want.tv!r} (90 % confidence, {kind})" in result.stdout
    assert f"emd to the truth <= {want.emd!r} (90 % confidence, {kind})" in result.stdout


def test_estimate_intervals_out_of_range_is_one_error(setup) -> None:
    _, mech_file, released, *_ = setup
    assert_one_line_error(run("estimate", mech_file, released, "-c", "place", "--intervals", "95"), "level")
    assert_one_line_error(run("estimate", mech_file, released, "-c", "place", "--seed", "3"), "--intervals LEVEL")


def test_estimate_json_and_plot_carry_the_intervals(setup, tmp_path: Path) -> None:
    import json

    pytest.importorskip("matplotlib")
    from metricdp.intervals import inversion_intervals

    mech, mech_file, released, true, counts, truth = setup
    png = tmp_path / "est.png"
    result = run("estimate", mech_file, released, "-c", "place", "--method", "inversion", "--true", true,
                 "--intervals", "0.95", "--draws", "50", "--seed", "4", "--json", "--plot", png)
    assert result.exit_code == 0, result.output
    obj = json.loads(result.stdout)
    want = inversion_intervals(counts, mech, draws=50, rng=4)
    assert obj["labels"] == LABELS and obj["level"] == 0.95 and obj["interval_method"] == "normal"
    np.testing.assert_array_equal([obj["probability"], obj["lower"], obj["upper"]],
                                  [want.point, want.lower, want.upper])
    assert obj["tv_bound"] == want.tv and obj["emd_bound"] == want.emd
    assert obj["emd"] == emd(want.point, truth, mech.space)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_estimate_json_without_intervals_has_no_bands(setup) -> None:
    import json

    _, mech_file, released, *_ = setup
    obj = json.loads(run("estimate", mech_file, released, "-c", "place", "--json").stdout)
    assert set(obj) == {"labels", "probability"}
