"""benchmarks/bench_lp_grid.py --quick builds the 4 x 4 grid with each formulation, certified."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_lp_grid.py"


def test_quick_bench(capsys):
    spec = importlib.util.spec_from_file_location("bench_lp_grid", SCRIPT)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| 16 ")]
    assert [r[3].strip() for r in rows] == ["column-generation", "dantzig-wolfe"]
    header = [c.strip() for c in next(line for line in out.splitlines() if line.startswith("| n |")).split("|")[1:-1]]
    for row in rows:
        cell = dict(zip(header, (c.strip() for c in row), strict=True))
        assert cell["status"] == "ok" and cell["audited eps"] == "0.3"
        assert 0 <= float(cell["certified gap"]) <= 1e-9
    objectives = {dict(zip(header, (c.strip() for c in r), strict=True))["objective"] for r in rows}
    assert len(objectives) == 1  # the same optimum to the table's 9 digits
