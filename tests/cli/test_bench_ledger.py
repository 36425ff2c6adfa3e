"""`metricdp bench privatize --persons P`: the ledger variant of the privatize benchmark."""

from __future__ import annotations

from pathlib import Path

import pytest

from metricdp.experiments.bench_ledger import LedgerRow, markdown_table
from tests.cli_helpers import assert_one_line_error, run


def test_table_gives_the_ratios() -> None:
    table = markdown_table([LedgerRow("csv", 2_000_000, 100_000, 10.0, 13.0, 200.0, 300.0)])
    assert "| csv | 2,000,000 | 100,000 | 10.0 | 13.0 | 1.30 | 200 | 300 | 1.50 | ok |" in table


@pytest.mark.slow
def test_quick_run_measures_both_commands(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    res = run("bench", "privatize", "--quick", "--workdir", tmp_path / "w", "--out", out)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "| csv | 20,000 | 1,000 |" in text and "| ok |" in text and "load average" in text
    assert not (tmp_path / "w" / "bench.db").with_suffix(".csv").exists()


def test_bad_format_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(run("bench", "privatize", "--persons", "10", "--formats", "orc", "--workdir", tmp_path),
                          "--formats: unknown orc")
