"""benchmarks/bench_bounding.py --quick times every contender, and its reference keeps K rows per person."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_bounding.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_bounding", SCRIPT)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_quick_run_times_each_contender(capsys):
    out = _bench().main(["--quick", "--k", "3"])
    assert out["rows"] == 20_000 and out["rounds"] == 2
    for name in ("metricdp", "metricdp-seeded", "reference"):
        assert len(out["rounds_s"][name]) == 2 and out["median"][name]["wall_s"] > 0
    assert '"median"' in capsys.readouterr().out


def test_reference_keeps_k_rows_per_person():
    ids = np.array([4, 4, 4, 2, 4, 2, 9])
    mask = _bench().reference(ids, 2)
    assert sorted(ids[mask].tolist()) == [2, 2, 4, 4, 9]
