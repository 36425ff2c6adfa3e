"""``metricdp experiment ablation``: quick mode end to end (Table 3's rows at fixed eps_tight)."""

from __future__ import annotations

import csv

import pytest
import typer
from typer.testing import CliRunner

from metricdp import ValidationError
from metricdp.cli.paper_experiments import register
from metricdp.experiments import ablation
from tests.cli_helpers import assert_one_line_error, make_app
from tests.helpers import needs


def _app() -> typer.Typer:
    return make_app(register, "experiment")


@pytest.mark.slow
@needs("plot", "glove")
def test_quick_end_to_end(tmp_path) -> None:
    res = CliRunner().invoke(_app(), ["experiment", "ablation", "--quick", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    cfg = ablation.QUICK
    assert (tmp_path / "ablation.png").read_bytes()[:4] == b"\x89PNG"
    md = (tmp_path / "ablation.md").read_text(encoding="utf-8")
    assert "## r (lambda = 50)" in md and "## lambda (r = 5)" in md and "eps_tight = 2" in md
    with (tmp_path / "ablation.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == ablation.COLUMNS
        rows = list(reader)
    assert len(rows) == len(cfg.targets) * (len(cfg.r_values) + len(cfg.lambdas))
    for r in rows:
        assert r["status"] == "ok", r
        target = float(r["target_eps_tight"])
        assert r["converged"] == "True" and abs(float(r["eps_tight"]) - target) <= cfg.rtol * target
        assert float(r["loss_q"]) <= float(r["loss_max"]) and int(r["nonzeros"]) > 0
        assert r["winner"] == "paper"  # the fit itself (exponential_candidate=False), never EM
    for target in cfg.targets:
        # r = 5, lambda = 50 is in both sweeps: built once, reported twice
        both = [r for r in rows if float(r["target_eps_tight"]) == target and r["r"] == "5"
                and float(r["lambda"]) == 50.0]
        assert {r["sweep"] for r in both} == {"r", "lambda"}
        assert both[0]["loss_q"] == both[1]["loss_q"]
        sweep_r = [r for r in rows if r["sweep"] == "r" and float(r["target_eps_tight"]) == target]
        assert [int(r["r"]) for r in sweep_r] == list(cfg.r_values)


    # --cached-only redraws the same outputs from the cache; a unit missing from it is "not run"
    lines = (tmp_path / "ablation.jsonl").read_text(encoding="utf-8").splitlines()
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "ablation.jsonl").write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    for where, missing in ((tmp_path, 0), (partial, 1)):
        again = CliRunner().invoke(_app(), ["experiment", "ablation", "--quick", "--cached-only", "--out", str(where)])
        assert again.exit_code == 0, again.output
        with (where / "ablation.csv").open(newline="", encoding="utf-8") as fh:
            redrawn = list(csv.DictReader(fh))
        assert len(redrawn) == len(rows)
        assert sum(r["status"] == "not run" for r in redrawn) == missing
        assert [r["loss_q"] for r in redrawn if r["status"] == "ok"] == [
            r["loss_q"] for r, s in zip(rows, redrawn, strict=True) if s["status"] == "ok"]
    assert (partial / "ablation.jsonl").read_text(encoding="utf-8").splitlines() == lines[1:]  # read only


@needs("plot")
def test_cached_only_needs_a_cache(tmp_path) -> None:
    for extra, match in (([], "no cache of a previous run"), (["--restart"], "cannot start over")):
        res = CliRunner().invoke(
            _app(), ["experiment", "ablation", "--quick", "--cached-only", *extra, "--out", str(tmp_path)])
        assert_one_line_error(res, match)
    assert not (tmp_path / "ablation.csv").exists()


def test_config_errors() -> None:
    with pytest.raises(ValidationError, match="r"):
        ablation.AblationConfig(n=10, r_values=(1, 12))
    with pytest.raises(ValidationError, match="lambda"):
        ablation.AblationConfig(lambdas=(0.0,))
    with pytest.raises(ValidationError, match="dataset"):
        ablation.AblationConfig(dataset="fasttext")
