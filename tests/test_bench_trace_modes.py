"""benchmarks/bench_trace_modes.py: every mechanism within the per-vessel budget, and its managers are the library's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from metricdp.accounting.composition import to_units
from metricdp.location.predictive import AdaptiveRate

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_trace_modes.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_trace_modes", SCRIPT)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    return bench


def _vessels(bench, lengths):
    """Vessels of ``lengths`` fixes each, at two places 3 km apart in New York harbour (stays of 5 fixes)."""
    n = np.asarray(lengths)
    rows = [np.array([40.70, -74.0]) + np.array([0.027, 0.0]) * ((np.arange(k) // 5) % 2)[:, None] for k in n]
    return bench.Vessels(np.array([f"v{i}" for i in range(n.size)]), np.concatenate(rows),
                         np.r_[0, np.cumsum(n)[:-1]].astype(np.intp), n.astype(np.intp))


def test_share_never_passes_the_budget():
    bench = _bench()
    for budget, parts in ((100.0, 705), (25.0, 3), (1600.0, 5670), (0.3, 7)):
        e = bench.share(budget, parts)
        assert parts * to_units(e) <= to_units(budget, budget=True) < (parts + 1) * to_units(e) + parts


def test_adaptive_manager_splits_as_adaptive_rate_per_vessel():
    bench = _bench()
    data = _vessels(bench, [10, 40, 300])
    m = bench.adaptive_manager(data, 100.0, 0.2, 1.0)
    tests, passed = np.array([0, 8, 30]), np.array([0, 7, 3])
    m.at = np.arange(3)
    test_u, noise_u = m.split(tests, passed)
    for v, n in enumerate((10, 40, 300)):
        want = AdaptiveRate(budget=100.0, horizon=n, threshold_km=1.0, test_share=0.2).split(tests[v:v + 1],
                                                                                             passed[v:v + 1])
        assert (test_u[v], noise_u[v]) == (want[0][0], want[1][0])


def test_matched_epsilon_meets_the_displacement_bound_within_the_cap():
    bench = _bench()
    # independent eps 1 and 0.5 displace by 2 and 4 km; 1.5x that minus a 1 km offset leaves 2 and 5 km of noise
    eps, ok = bench.matched_epsilon(np.array([1.0, 0.5, 1.0, 1.0]), 1.0, np.array([2.0, 2.0, 0.5, 2.0]))
    assert eps[:3].tolist() == pytest.approx([1.0, 0.4, 0.5]) and ok.tolist()[:3] == [True, True, False]
    eps, ok = bench.matched_epsilon(np.array([1.0]), 3.5, np.array([2.0]))  # the offset alone passes 3 km
    assert eps.tolist() == [2.0] and ok.tolist() == [False]


def test_per_place_matched_spends_its_matched_eps_per_place():
    bench = _bench()
    data = _vessels(bench, [7, 60, 23])
    grid = bench.CellGrid.over(bench.REGION, 0.05)
    r = bench.per_place_matched(data, 1000.0, grid, np.random.default_rng(0))
    # 1.5 x 2 / (B / n) - 0.05 / sqrt 2 km: below zero for 7 fixes (the cap, B / 2 per place), else 2 / it
    want = [bench.share(1000.0, 2), *(2.0 / (3.0 / bench.share(1000.0, n) - 0.05 / np.sqrt(2)) for n in (60, 23))]
    assert want[1:] == pytest.approx([2.0 / (3.0 * n / 1000 - 0.05 / np.sqrt(2)) for n in (60, 23)])
    assert r.matched.tolist() == [False, True, True] and r.fresh.tolist() == [2, 2, 2]
    assert r.spent_units.tolist() == [2 * to_units(e) for e in want]
    assert r.fresh_eps.tolist() == pytest.approx(want)
    m = bench.measure(data, r, 1000.0)
    assert m["within_budget"] and m["matched_vessels"] == 2
    assert m["spent_fraction_max"] == pytest.approx(1.0) and m["spent_fraction_min"] < 0.1


def test_matched_fixed_manager_draws_at_the_independent_eps_over_one_and_a_half():
    bench = _bench()
    data = _vessels(bench, [10, 40])
    m = bench.matched_fixed_manager(data, 100.0, 0.5, 2.0)
    assert m.rungs[:, 0].tolist() == [to_units(10.0 / 1.5), to_units(2.5 / 1.5)]
    assert m.test.tolist() == [to_units(5.0), to_units(1.25)]
    assert m.threshold.tolist() == pytest.approx([2.0 * 2 * 1.5 / 10, 2.0 * 2 * 1.5 / 2.5])


@pytest.mark.parametrize("which", ["independent", "per-place", "adaptive", "fixed", "per-place-matched",
                                   "fixed-matched"])
def test_every_vessel_spends_at_most_its_budget(which):
    bench = _bench()
    data = _vessels(bench, [7, 60, 23])
    rng = np.random.default_rng(0)
    if which == "independent":
        r = bench.independent(data, 10.0, rng)
    elif which == "per-place":
        r = bench.per_place(data, 10.0, bench.CellGrid.over(bench.REGION, 1.0), rng)
        assert r.fresh.tolist() == [2, 2, 2] and r.reused.tolist() == [5, 58, 21]  # two places each, drawn once
    elif which == "adaptive":
        r = bench.predictive(data, 10.0, bench.adaptive_manager(data, 10.0, 0.2, 1.0), rng)
    elif which == "fixed":
        r = bench.predictive(data, 10.0, bench.fixed_manager(data, 10.0, 0.5, 16.0, 5), rng)
    elif which == "per-place-matched":
        r = bench.per_place_matched(data, 10.0, bench.CellGrid.over(bench.REGION, 1.0), rng)
    else:
        r = bench.predictive(data, 10.0, bench.matched_fixed_manager(data, 10.0, 0.5, 1.0), rng)
    assert (r.spent_units <= to_units(10.0, budget=True)).all()
    assert (r.fresh + r.reused).tolist() == [7, 60, 23]
    if which in ("independent", "per-place"):  # the whole budget, to the grid's rounding
        assert (r.spent_units > to_units(10.0, budget=True) - data.n).all()
    m = bench.measure(data, r, 10.0)
    assert m["within_budget"] and m["attacked_vessels"] == 3 and m["displacement_mean_km"] > 0


def test_quick_run_compares_every_mechanism_with_the_independent_release(capsys):
    pytest.importorskip("tracktable_data")
    rows = _bench().main(["--quick"])
    assert {r["mechanism"] for r in rows} == {"independent", "per-place", "predictive"}
    assert all(r["within_budget"] and r["budget"] == 100.0 for r in rows)
    assert rows[0]["mechanism"] == "independent" and rows[0]["attack_vs_independent"] == 1.0
    assert "| 100 | per-place |" in capsys.readouterr().out


def test_matched_only_runs_the_matched_rows_beside_the_independent_release(capsys):
    pytest.importorskip("tracktable_data")
    rows = _bench().main(["--quick", "--matched-only"])
    assert rows[0]["mechanism"] == "independent" and rows[0]["matched_vessels"] == -1
    assert {r["mechanism"] for r in rows[1:]} == {"per-place", "predictive"}
    assert all("displacement matched" in r["setting"] for r in rows[1:])
    assert all(r["within_budget"] and r["spent_fraction_max"] <= 1.0 for r in rows)
    assert "displacement matched" in capsys.readouterr().out


def test_matched_epsilon_at_a_tighter_factor_leaves_less_room_for_noise():
    bench = _bench()
    # independent eps 1 displaces by 2 km; 1.4x that minus a 0.8 km offset leaves 2 km of noise: eps 1
    eps, ok = bench.matched_epsilon(np.array([1.0]), 0.8, np.array([2.0]), factor=1.4)
    assert eps.tolist() == pytest.approx([1.0]) and ok.tolist() == [True]


def test_preregistered_rows_read_every_seed_against_its_own_independent_release(capsys):
    bench = _bench()
    data = _vessels(bench, [40, 60, 25])
    rows = bench.run(data, [10.0], [11, 12], bench.preregistered())
    assert [r["mechanism"] for r in rows] == ["independent", "per-place", "predictive"]
    assert rows[1]["setting"] == "0.05 km cells, displacement matched to 1.4x"
    assert all(o["attack_x"] == 1.0 and o["displacement_x"] == 1.0 for o in rows[0]["per_seed"])
    for r in rows[1:]:
        assert [o["seed"] for o in r["per_seed"]] == [11, 12]
        assert r["target_every_seed"] == all(o["target"] for o in r["per_seed"])
        xs = sorted(o["attack_x"] for o in r["per_seed"])
        assert r["attack_x_median"] == pytest.approx((xs[0] + xs[1]) / 2)
        assert all(o["within_budget"] and o["spent_fraction_max"] <= 1.0 for o in r["per_seed"])
    table = bench.seed_table(rows)
    assert "| seed 11 | seed 12 |" in table and table.count("\n| 10 |") == 2


def test_holds_needs_three_times_the_attack_error_within_one_and_a_half_times_the_displacement():
    holds = _bench().holds
    assert holds(3.0, 1.5) and not holds(2.99, 1.0) and not holds(4.0, 1.51)
