"""OPTMech's plan: sizes by hand, the memory refusal with a suggestion, the estimate said before a build."""

from __future__ import annotations

import pytest

from metricdp.errors import ResourceLimitError
from metricdp.lp.ipm import ipm_bytes
from metricdp.mechanisms.lp_plan import BYTES_PER_ROW, check_plan, plan_optimal
from tests.cli_helpers import assert_one_line_error, run


def test_sizes_by_hand():
    p = plan_optimal(10)
    assert (p.formulation, p.variables, p.privacy_rows) == ("fast", 100, 900)
    assert p.bytes == BYTES_PER_ROW * 900 + 8.0 * 16 * 100
    e = plan_optimal(40, objective="expected")
    assert e.formulation == "block-ipm" and e.bytes == ipm_bytes(40, 40)
    assert plan_optimal(40, 5).privacy_rows == 40 * 39 * 5 and plan_optimal(40, 5).formulation == "fast"
    assert plan_optimal(100, objective="expected").seconds == pytest.approx(85.0)
    assert plan_optimal(200).seconds == pytest.approx(85.0 * 2**3.5)
    assert "variables" in p.summary() and "up to" in p.summary()


def test_refusal_names_size_and_suggestion(monkeypatch):
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "1GiB")
    check_plan(plan_optimal(100))  # ~95 MB: fits
    with pytest.raises(ResourceLimitError, match=r"optimal on 625 points needs up to .* the limit is .*; use X"):
        check_plan(plan_optimal(625), "use X")


def test_cli_build_optimal_says_the_plan_and_refuses_what_cannot_fit(tmp_path, monkeypatch):
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "4GiB")
    src = tmp_path / "in.csv"
    src.write_text("lat,lon\n56.91,24.01\n")
    small, big = tmp_path / "small.csv", tmp_path / "big.csv"
    assert run("grid", src, "--cell", "4km", "--region", "56.90,24.00,57.03,24.25", "--out", small).exit_code == 0
    r = run("build", small, "-m", "optimal", "--epsilon", "1", "--out", tmp_path / "o.npz")
    assert r.exit_code == 0, r.output
    assert r.stderr == ""  # a quick build: no plan line
    mid = tmp_path / "mid.csv"
    assert run("grid", src, "--cell", "1200m", "--region", "56.90,24.00,57.03,24.25", "--out", mid).exit_code == 0
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "1MiB")  # refused, but after the plan is known
    r = run("build", mid, "-m", "optimal", "--epsilon", "1", "--out", tmp_path / "m.npz")
    assert_one_line_error(r, "optimal on ", "privacy rows")
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "4GiB")
    assert run("grid", src, "--cell", "500m", "--region", "56.90,24.00,57.03,24.25", "--out", big).exit_code == 0
    r = run("build", big, "-m", "optimal", "--epsilon", "1", "--out", tmp_path / "b.npz")
    assert_one_line_error(r, "needs up to", "--mechanism planar-laplace")
    assert not (tmp_path / "b.npz").exists()
