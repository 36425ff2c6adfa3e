"""``metricdp bench lp`` end to end on a tiny app assembled from ``register``."""

from __future__ import annotations

import csv

import pytest
import typer
from typer.testing import CliRunner

from metricdp.cli.bench import parse_sizes, register
from metricdp.experiments.bench_lp import COLUMNS
from tests.cli_helpers import assert_one_line_error, make_app, run
from tests.helpers import needs

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return make_app(register)


def _table(stdout: str) -> list[dict[str, str]]:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in ln.strip("|").split("|")), strict=True)) for ln in lines[2:]]


@pytest.mark.slow
@needs("glove")
def test_bench_lp_quick(app: typer.Typer, tmp_path) -> None:
    out, csv_out = tmp_path / "RESULTS.md", tmp_path / "rows.csv"
    res = runner.invoke(app, ["bench", "lp", "--quick", "--out", str(out), "--csv", str(csv_out)])
    assert res.exit_code == 0, res.output
    rows = _table(res.stdout)
    assert list(rows[0]) == [h for h, _ in COLUMNS]
    got = {(r["mechanism"], r["formulation"]) for r in rows}
    assert got == {("optimal", "fast"), ("optimal", "full"), ("constopt r=10", "fast"),
                   ("constopt r=10", "full"), ("spanner", "default")}
    assert all(r["n"] == "20" and r["status"] == "ok" for r in rows), res.stdout
    opt = {r["formulation"]: r for r in rows if r["mechanism"] == "optimal"}
    # the fast and the full formulation reach the same optimum
    fast, full = float(opt["fast"]["objective"]), float(opt["full"]["objective"])
    assert fast == pytest.approx(full, rel=1e-9)
    con = {r["formulation"]: r for r in rows if r["mechanism"] == "constopt r=10"}
    assert float(con["fast"]["worst-case loss"]) <= float(con["full"]["worst-case loss"]) * (1 + 1e-6)
    for r in rows:
        assert float(r["audited eps"]) <= 1.0 + 1e-9
        assert float(r["peak MiB"]) > 10 and float(r["seconds"]) > 0
    text = out.read_text(encoding="utf-8")
    assert "Machine: " in text and "| n | mechanism |" in text
    with csv_out.open(newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == len(rows)


def test_bench_lp_errors(app: typer.Typer, tmp_path) -> None:
    for args, match in (
        (["--mechanisms", "simplex"], "mechanism must be one of"),
        (["--sizes", "ten"], "--sizes takes integers"),
        (["--formulations", "fastest"], "formulations"),
        (["--time-limit", "0"], "--time-limit"),
        (["--epsilons", "1,x"], "--epsilons takes numbers"),
        (["--epsilons", "1,-2"], "epsilon"),
        (["--out", str(tmp_path / "missing" / "R.md")], "does not exist"),
    ):
        res = runner.invoke(app, ["bench", "lp", "--data", "gaussian", "--sizes", "5", *args])
        assert res.exit_code == 2, (args, res.output)
        assert match in res.stderr and res.stderr.count("error:") == 1 and "Traceback" not in res.output
    assert not (tmp_path / "missing").exists()


def test_parse_sizes() -> None:
    assert parse_sizes(["50, 100"]) == [50, 100]
    assert parse_sizes(["optimal=50,100", "constopt=400", "20"]) == {
        "optimal": [50, 100], "constopt": [400], "*": [20]}


@pytest.mark.slow
def test_bench_privatize_small(tmp_path):
    """`metricdp bench privatize` measures real commands and writes its table (tiny sizes)."""
    out = tmp_path / "r.md"
    result = run("bench", "privatize", "--rows", "2000", "--formats", "csv,parquet", "--engines", "local",
                 "--points", 20, "--workdir", tmp_path / "w", "--out", out)
    assert result.exit_code == 0, result.output
    table = out.read_text()
    assert "| csv | 2,000 | local |" in table and "| parquet | 2,000 | local |" in table
    assert table.count("| ok |") == 2 and "load average" in table
    assert_one_line_error(run("bench", "privatize", "--engines", "flink", "--workdir", tmp_path / "w"), "flink")


@pytest.mark.slow
@needs("plot")
def test_bench_lp_epsilon_sweep_checkpoint_and_plot(app: typer.Typer, tmp_path) -> None:
    out, plot = tmp_path / "R.md", tmp_path / "s.png"
    res = runner.invoke(app, ["bench", "lp", "--data", "gaussian", "--sizes", "8", "--mechanisms", "optimal",
                              "--epsilons", "0.5,2", "--out", str(out), "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    rows = _table(res.stdout)
    assert [(r["eps"], r["formulation"]) for r in rows] == [("0.5", "full"), ("0.5", "fast"), ("2", "full"),
                                                            ("2", "fast")]
    assert len((tmp_path / "R.jsonl").read_text(encoding="utf-8").splitlines()) == 4
    assert plot.read_bytes()[:4] == b"\x89PNG" and "epsilons = 0.5, 2" in out.read_text(encoding="utf-8")
