"""``metricdp bench privatize-points --quick``: real commands, the table, flatness, and refusals."""

from __future__ import annotations

from metricdp.experiments.bench_points import PointsRow, flatness, make_points
from tests.cli_helpers import assert_one_line_error, run


def test_bench_points_quick(tmp_path):
    out = tmp_path / "r.md"
    result = run("bench", "privatize-points", "--quick", "--workdir", tmp_path / "w", "--out", out)
    assert result.exit_code == 0, result.output
    table = out.read_text()
    for fmt in ("csv", "parquet"):
        for n in ("2,000", "20,000"):
            assert f"| {fmt} | {n} | exact |" in table
    assert table.count("| ok |") == 4 and "load average" in table
    assert "peak RSS largest / smallest over the row counts (csv, exact)" in table
    assert_one_line_error(run("bench", "privatize-points", "--formats", "orc", "--workdir", tmp_path / "w"), "orc")


def test_inputs_are_made_once_with_the_asked_rows(tmp_path):
    p = make_points(tmp_path, 1234, "csv")
    assert p.read_text().count("\n") == 1235
    mtime = p.stat().st_mtime_ns
    assert make_points(tmp_path, 1234, "csv").stat().st_mtime_ns == mtime


def test_flatness_ratio():
    rows = [PointsRow("csv", n, "exact", 1.0, 1.0, rss) for n, rss in ((10, 100.0), (100, 150.0))]
    assert flatness(rows) == {("csv", "exact"): 1.5}
