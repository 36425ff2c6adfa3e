"""benchmarks/bench_location_route.py --quick runs the whole route and reports every step."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_location_route.py"


@pytest.mark.slow
def test_quick_route(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_location_route", SCRIPT)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    steps = bench.main(["--quick", "--out", str(tmp_path)])
    assert steps["rows"] == 20_000
    for name in ("grid", "build", "privatize"):
        assert steps[name]["seconds"] > 0 and steps[name]["peak_rss_mib"] > 0
    lines = (tmp_path / "released.csv").read_text().splitlines()
    assert lines[0] == "id,cell" and len(lines) == 20_001  # every row released (nearest cell), lat/lon gone
    assert '"privatize"' in capsys.readouterr().out
