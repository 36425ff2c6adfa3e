"""benchmarks/bench_predictive.py --quick releases its synthetic traces and reports the outcomes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_predictive.py"


@pytest.mark.parametrize("manager", ["fixed", "adaptive"])
def test_quick_bench(manager, capsys):
    spec = importlib.util.spec_from_file_location("bench_predictive", SCRIPT)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.main(["--quick", "--manager", manager])
    assert result["fixes"] == 20_000 and result["fixes_per_s"] > 0
    assert result["fresh"] + result["passed"] + result["exhausted"] == pytest.approx(1.0)
    assert result["passed"] > 0.05  # stays of 5 fixes: predictions pass within a stay
    assert 0 < result["mean_eps_per_person"] <= 10.0  # the budget is 10 per person
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == result
