"""benchmarks/bench_calibrate.py --quick calibrates every family, checks each answer from outside, and puts
user-centric beside each at equal expected loss."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_calibrate.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_calibrate", SCRIPT)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.slow
def test_quick_run_meets_every_target(tmp_path, capsys):
    out = _bench().main(["--quick", "--out", str(tmp_path)])
    assert [r["family"] for r in out["calibrate"]] == ["exponential", "planar-laplace", "optimal"]
    for row in out["calibrate"]:
        assert row["status"] == "ok", row
        assert row["meets"] and row["witness_fails"], row  # AE >= 150 at eps, < 150 at eps x 1.05
        assert row["adversary_error"] >= 150.0 > row["witness_error"]
        assert row["witness_epsilon"] == pytest.approx(row["epsilon"] * 1.05, rel=1e-12)
    assert [u["rival"] for u in out["user_centric"]] == ["exponential", "planar-laplace", "optimal"]
    for u in out["user_centric"]:
        assert u["status"] == "ok", u
        assert u["certified"] and u["bound_at_least_rival"] and u["no_lower"] and u["within_quality"], u
    text = capsys.readouterr().out
    assert "| optimal |" in text and "| user-centric vs |" in text


def test_a_command_that_fails_is_a_row_not_a_crash(tmp_path):
    """A family the command refuses (here: unknown) is reported with its error line; nothing is checked."""
    bench = _bench()
    bench.write_inputs(tmp_path, 2, 250.0, 0)
    row = bench.calibrate("no-such-family", tmp_path, 100.0, 60.0, None)
    assert row["status"].startswith("exit 2: error: unknown mechanism 'no-such-family'"), row
    assert "meets" not in row


def test_inputs_are_the_grid_and_a_prior(tmp_path):
    bench = _bench()
    bench.write_inputs(tmp_path, 3, 250.0, 0)
    lines = (tmp_path / "grid.csv").read_text().splitlines()
    assert lines[:3] == ["label,x,y", "c0,0,0", "c1,250,0"] and lines[-1] == "c8,500,500"
    probs = [float(line.split(",")[1]) for line in (tmp_path / "prior.csv").read_text().splitlines()[1:]]
    assert len(probs) == 9 and abs(sum(probs) - 1) < 1e-12 and min(probs) > 0
