"""``metricdp bench sample``: the harness runs and reports every measurement."""

from __future__ import annotations

from metricdp.experiments.bench_sample import SampleBench, markdown, run
from tests.cli_helpers import run as cli


def test_run_small_reports_every_measurement():
    rows = run(n_small=50, n_large=80, draws=2_000, repeats=1)
    names = [r.name for r in rows]
    assert any("exact releases/s" in n for n in names)
    assert any("table build" in n for n in names)
    assert any("table size / matrix" in n for n in names)
    assert sum("privatize exact / float" in n for n in names) == 2
    size = next(r for r in rows if "table size" in r.name)
    assert 0.9 < size.value < 1.2  # one uint64 per entry, plus a column and four per-row arrays
    assert all(r.value > 0 for r in rows)


def test_markdown_marks_missed_targets():
    text = markdown([SampleBench("a", 2e6, "1/s", ">= 1e6", True), SampleBench("b", 40.0, "s", "< 30", False)])
    assert "| a | 2,000,000 1/s | >= 1e6 | yes |" in text
    assert "| b | 40 s | < 30 | NO |" in text


def test_cli_bench_sample_quick():
    result = cli("bench", "sample", "--quick")
    assert result.exit_code == 0, result.output
    assert "exact releases/s" in result.stdout
