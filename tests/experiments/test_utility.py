"""``metricdp experiment utility``: the quick mode end to end, and what its numbers must satisfy."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from metricdp.bounds import lower_bound_quantile
from metricdp.cli.paper_experiments import register
from metricdp.experiments import _records as rs
from metricdp.experiments import _tuning as tu
from metricdp.experiments import utility
from tests.cli_helpers import make_app
from tests.helpers import skip_unless

pytestmark = pytest.mark.slow  # CI runs it in the full phase (.ci/full)

PNG = b"\x89PNG\r\n\x1a\n"


def _app() -> typer.Typer:
    return make_app(register, "experiment")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, str]], str]:
    skip_unless("plot", "glove", "geo")
    out = tmp_path_factory.mktemp("utility")
    res = CliRunner().invoke(_app(), ["experiment", "utility", "--quick", "--out", str(out)])
    assert res.exit_code == 0, res.output
    with (out / "utility.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == utility.COLUMNS
        rows = list(reader)
    return out, rows, res.stdout


def test_quick_writes_files(quick: tuple[Path, list[dict[str, str]], str]) -> None:
    out, _, stdout = quick
    cfg = utility.QUICK
    for ds in cfg.datasets:
        for n in cfg.sizes:
            assert (out / f"utility_{ds}_{n}.png").read_bytes()[:8] == PNG
    assert (out / "utility.png").read_bytes()[:8] == PNG
    md = (out / "utility.md").read_text(encoding="utf-8")
    assert stdout == md + "\n"  # the summary is printed and written
    for ds in cfg.datasets:
        assert f"## {ds}, n = {cfg.sizes[0]}" in md
    assert "## Findings" in md and "Madlib is placed at its proven eps" in md


def test_quick_series(quick: tuple[Path, list[dict[str, str]], str]) -> None:
    _, rows, _ = quick
    cfg = utility.QUICK
    for ds in cfg.datasets:
        for n in cfg.sizes:
            mine = [r for r in rows if r["dataset"] == ds and r["n"] == str(n)]
            names = {r["mechanism"] for r in mine}
            expected = {"EM", f"ConstOPTMech (r={min(10, n - 1)})", "SpannerMech", "lower bound", "uniform"}
            expected |= {"Madlib"} if ds == "text" else set()
            expected |= {"OPTMech"} if n <= cfg.optimal_max_n else set()
            assert names == expected
            for label in expected - {"lower bound", "uniform"}:
                series = [r for r in mine if r["mechanism"] == label]
                assert len(series) == cfg.points + 1  # the probe and the grid
                assert all(r["status"] == "ok" for r in series), series
            assert len([r for r in mine if r["mechanism"] == "lower bound"]) == cfg.bound_points


def test_quick_numbers(quick: tuple[Path, list[dict[str, str]], str]) -> None:
    _, rows, _ = quick
    for r in rows:
        if r["status"] != "ok" or r["mechanism"] in ("uniform", "lower bound"):
            continue
        eps, nominal = float(r["eps_tight"]), float(r["nominal_eps"])
        lq, lmax = float(r["loss_q"]), float(r["loss_max"])
        assert 0 <= lq <= lmax
        if r["mechanism"] == "Madlib":
            assert r["eps_kind"] == "proven" and eps == nominal
        else:
            # eps_tight(delta) <= audited eps <= nominal eps for an exact mechanism
            assert r["eps_kind"] == "tight" and eps <= nominal * (1 + 1e-9)


def test_optmech_above_lower_bound(quick: tuple[Path, list[dict[str, str]], str]) -> None:
    """OPTMech at its nominal eps is eps-mDP: its L_q is at least the packing bound there."""
    _, rows, _ = quick
    opt = [r for r in rows if r["mechanism"] == "OPTMech" and r["status"] == "ok"]
    assert opt
    spaces = {}
    for r in opt:
        key = (r["dataset"], int(r["n"]))
        if key not in spaces:
            spaces[key] = rs.dataset_space(key[0], key[1], seed=0)
        bound = lower_bound_quantile(spaces[key], float(r["nominal_eps"]), 0.95).value
        assert bound <= float(r["loss_q"]) * (1 + 1e-9)


def test_resume_uses_the_cache(quick: tuple[Path, list[dict[str, str]], str], monkeypatch) -> None:
    """A second run reuses every finished build; only failed ones (errors) are retried."""
    out, rows, _ = quick
    rebuilt: list[tuple[int, str]] = []
    real = tu.make_builder

    def spy(spec: tu.MechanismSpec, space: object, **kwargs: object) -> object:
        rebuilt.append((space.n, spec.label))
        return real(spec, space, **kwargs)

    monkeypatch.setattr(tu, "make_builder", spy)
    again = utility.run_utility(out, utility.QUICK)
    failed = {(int(r["n"]), r["mechanism"]) for r in rows if r["status"] == "error"}
    assert set(rebuilt) <= failed
    built = [r for r in again.records if r["mechanism"] not in ("lower bound", "uniform")]
    by_key = {(r["dataset"], str(r["n"]), r["mechanism"], r["point"]): r for r in built}
    assert len(by_key) == len([r for r in rows if r["mechanism"] not in ("lower bound", "uniform")])
    for r in rows:
        if r["status"] == "ok" and r["mechanism"] not in ("lower bound", "uniform"):
            mine = by_key[(r["dataset"], r["n"], r["mechanism"], r["point"])]
            assert float(r["loss_q"]) == rs.number(mine["loss_q"])


def test_config_errors() -> None:
    from metricdp import ValidationError

    with pytest.raises(ValidationError, match="datasets"):
        utility.UtilityConfig(datasets=("fasttext",))
    with pytest.raises(ValidationError, match="mechanisms"):
        utility.UtilityConfig(mechanisms=("laplace",))
    with pytest.raises(ValidationError, match="eps_range"):
        utility.UtilityConfig(eps_range=(2.0, 1.0))
    res = CliRunner().invoke(_app(), ["experiment", "utility", "--quick", "--out", "x", "--eps-range", "1"])
    assert res.exit_code == 2 and "--eps-range" in res.stderr
    assert math.isfinite(utility.QUICK.time_limit)
