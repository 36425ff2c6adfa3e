"""``metricdp experiment kmedian``: quick mode end to end, accounting, cache and --cached-only."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from metricdp.cli.paper_experiments import register
from metricdp.errors import ValidationError
from metricdp.experiments import kmedian as ex
from tests.cli_helpers import make_app
from tests.helpers import needs, skip_unless

pytestmark = pytest.mark.slow  # CI runs it in the full phase (.ci/full)


def _app() -> typer.Typer:
    return make_app(register, "experiment")


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "kmedian.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == ex.COLUMNS
        return list(reader)


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, str]], str]:
    skip_unless("plot")
    out = tmp_path_factory.mktemp("kmedian")
    res = CliRunner().invoke(_app(), ["experiment", "kmedian", "--quick", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out, _rows(out), res.stdout


def test_quick_files(quick: tuple[Path, list[dict[str, str]], str]) -> None:
    out, rows, stdout = quick
    for name in ("uniform", "gaussian", "vs_m"):
        assert (out / f"kmedian_cost_{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "kmedian_time.png").read_bytes()[:4] == b"\x89PNG"
    assert "## uniform, n = 40, s = 12 (2 replicates)" in stdout and "## cost / reference against m" in stdout
    assert (out / "kmedian.md").read_text(encoding="utf-8") == stdout.rstrip("\n") + "\n" or "Privacy" in stdout
    cfg = ex.QUICK
    plan = [p for p in ex._plan(cfg) if p[8]]
    assert len(rows) == len(plan)


def test_quick_accounting_and_costs(quick: tuple[Path, list[dict[str, str]], str]) -> None:
    _, rows, _ = quick
    methods = set()
    for r in rows:
        assert r["status"] == "ok", r
        eps, spent = float(r["eps"]), float(r["epsilon_spent"])
        methods.add(r["method"])
        if r["method"].startswith("random"):
            assert spent == 0.0
        else:
            assert eps * (1 - 1e-12) <= spent <= eps
        assert float(r["cost"]) >= float(r["ref_cost"]) * (1 - 1e-12)  # the reference is the optimum here
        assert r["ref_how"] == "enumeration"
        assert float(r["seconds"]) >= 0
        if r["method"] in ("ssem-auto", "ssem-k++") and r["variant"] != "m-sweep":
            assert int(r["m"]) == ex.auto_candidates(int(r["n"]), int(r["k"]))
    assert methods == {*ex.QUICK.methods, "ssem"}
    gupta = [r for r in rows if r["method"] == "gupta" and r["n"] == "80" and r["variant"] == "uniform"]
    assert {r["replicate"] for r in gupta} == {"0"}  # gupta_replicates = (2, 1)


def test_cached_only_redraws_without_computing(quick: tuple[Path, list[dict[str, str]], str], tmp_path: Path) -> None:
    out, rows, _ = quick
    res = CliRunner().invoke(_app(), ["experiment", "kmedian", "--quick", "--out", str(out), "--cached-only"])
    assert res.exit_code == 0, res.output
    assert _rows(out) == rows
    # an eps never run is reported as "not run", nothing is computed
    res = CliRunner().invoke(_app(), ["experiment", "kmedian", "--quick", "--out", str(out), "--cached-only",
                                      "--eps", "1,5"])
    assert res.exit_code == 0, res.output
    new = _rows(out)
    assert {r["status"] for r in new if r["eps"] == "5.0"} == {"not run"}
    res = CliRunner().invoke(_app(), ["experiment", "kmedian", "--quick", "--out", str(tmp_path), "--cached-only"])
    assert res.exit_code != 0 and "no cache" in res.output


@needs("plot")
def test_resume_uses_the_cache_and_same_seeds(tmp_path: Path) -> None:
    cfg = ex.KMedianConfig(sizes=(30,), replicates=(2,), gupta_replicates=(1,), restarts=(2,), ks=(2,),
                           epsilons=(1.0,), gaussian_size=None, m_size=None)
    first = ex.run_kmedian(tmp_path / "a", cfg)
    lines = (tmp_path / "a" / "kmedian.jsonl").read_text(encoding="utf-8").count("\n")
    again = ex.run_kmedian(tmp_path / "a", cfg)
    assert (tmp_path / "a" / "kmedian.jsonl").read_text(encoding="utf-8").count("\n") == lines
    fresh = ex.run_kmedian(tmp_path / "b", cfg)
    key = [(r["method"], r["replicate"], r["cost"]) for r in first.records]
    assert key == [(r["method"], r["replicate"], r["cost"]) for r in again.records]
    assert key == [(r["method"], r["replicate"], r["cost"]) for r in fresh.records]


@needs("plot")
def test_refusal_and_time_out_are_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import metricdp.kmedian as km

    monkeypatch.setattr(ex, "MAX_SUBSETS", 10)
    monkeypatch.setattr(km, "MAX_SUBSETS", 10)
    cfg = ex.KMedianConfig(sizes=(20,), replicates=(1,), gupta_replicates=(1,), restarts=(2,), ks=(3,),
                           epsilons=(1.0,), methods=("em", "gupta"), gupta_time_limit=1e-9,
                           gaussian_size=None, m_size=None)
    res = ex.run_kmedian(tmp_path, cfg)
    status = {r["method"]: r["status"] for r in res.records}
    assert status == {"em": "refused", "gupta": "time-out"}
    assert "refused" in res.summary and "time-out" in res.summary


def test_config_errors() -> None:
    with pytest.raises(ValidationError, match="one entry per size"):
        ex.KMedianConfig(sizes=(10, 20))
    with pytest.raises(ValidationError, match="plain ssem"):
        ex.KMedianConfig(methods=("ssem",))
    res = CliRunner().invoke(_app(), ["experiment", "kmedian", "--quick", "--out", "/tmp/x", "--replicates", "1,2,3"])
    assert res.exit_code != 0 and "--replicates" in res.output
