"""benchmarks/bench_ledger_reserve.py --quick reserves 20,000 persons twice, on Arrow and numpy ids, and reports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "bench_ledger_reserve.py"


@pytest.mark.parametrize("mode", [[], ["--numpy"]])
def test_quick_reserve(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: list[str]) -> None:
    pytest.importorskip("pyarrow")
    spec = importlib.util.spec_from_file_location("bench_ledger_reserve", SCRIPT)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["--quick", "--workdir", str(tmp_path), *mode])
    assert 19_900 <= out["persons"] <= 20_000  # distinct among 20,000 random ids
    for step in ("hash", "first", "second"):
        assert out[f"{step}_wall_s"] > 0 and out[f"{step}_cpu_s"] >= 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == out
    assert list(tmp_path.iterdir()) == []  # the ledger and its key lived in a temporary folder
