"""``metricdp bench privatize-numbers --quick``: real commands, the table, the load, one-line errors."""

from __future__ import annotations

from metricdp.experiments.bench_numbers import NumbersRow, markdown_table
from tests.cli_helpers import assert_one_line_error, run


def test_bench_privatize_numbers_quick(tmp_path):
    out = tmp_path / "r.md"
    result = run("bench", "privatize-numbers", "--quick", "--workdir", tmp_path / "w", "--out", out)
    assert result.exit_code == 0, result.output
    table = out.read_text()
    for fmt in ("csv", "parquet"):
        for mech in ("clamped-geometric", "discrete-laplace"):
            assert f"| {fmt} | 2,000 | {mech} |" in table
    assert table.count("| ok |") == 4 and "load average" in table
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["ages-2000.csv", "ages-2000.parquet"]


def test_bench_errors_and_target_column(tmp_path):
    assert_one_line_error(run("bench", "privatize-numbers", "--quick", "--mechanisms", "laplace",
                              "--workdir", tmp_path / "w"), "unknown laplace")
    assert_one_line_error(run("bench", "privatize-numbers", "--formats", "orc", "--workdir", tmp_path / "w"), "orc")
    fast = NumbersRow("csv", 10, "clamped-geometric", 1e-6, 1e7, 1.0)
    slow = NumbersRow("csv", 10, "clamped-geometric", 1.0, 10.0, 1.0)
    assert "| met |" in markdown_table([fast]) and "| not met |" in markdown_table([slow])
