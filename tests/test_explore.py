"""The trade-off across epsilon and families: hand-checked figures, equality with evaluate, failures kept."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metricdp.adversary import adversary_report
from metricdp.errors import SolverError, ValidationError
from metricdp.evaluation import evaluate_mechanism
from metricdp.explore import FIGURES, epsilon_grid, explore
from metricdp.mechanisms import registry
from metricdp.spaces import MetricSpace


def _line(*xs: float) -> MetricSpace:
    return MetricSpace.from_points([[x] for x in xs], labels=[f"p{i}" for i in range(len(xs))])


def test_epsilon_grid_is_log_spaced_with_exact_ends():
    assert epsilon_grid(0.1, 10, 3) == (0.1, 1.0, 10.0)
    grid = epsilon_grid(0.1, 10, 20)
    assert len(grid) == 20 and grid[0] == 0.1 and grid[-1] == 10.0
    ratios = np.diff(np.log(grid))
    assert np.allclose(ratios, ratios[0])
    assert epsilon_grid(2, 2, 1) == (2.0,)
    for args, match in (((1, 0.5, 3), "below the lowest"), ((0, 1, 3), "lowest epsilon"),
                        ((1, 2, 0), "number of epsilons"), ((1, 2, 1), "cannot span"), ((1, 2, 201), "at most")):
        with pytest.raises(ValidationError, match=match):
            epsilon_grid(*args)


def test_krr_on_two_points_by_hand():
    """k-RR on two points at distance 1, eps = 1: keep with e/(1+e); the adversary guesses what it sees."""
    ex = explore(_line(0.0, 1.0), ["krr"], [1.0])
    f = ex.figures["krr"]
    keep = math.e / (1 + math.e)
    assert f["loss_expected"][0] == pytest.approx(1 - keep)
    assert f["loss_max"][0] == pytest.approx(1 - keep)
    assert f["adversary_expected_error"][0] == pytest.approx(1 - keep)
    assert f["adversary_reidentification"][0] == pytest.approx(keep)
    assert f["epsilon_audit"][0] == pytest.approx(1.0)
    assert ex.failures["krr"] == [None]
    assert ex.matrices["krr"][0] == pytest.approx(np.array([[keep, 1 - keep], [1 - keep, keep]]))


def test_figures_equal_evaluate_and_the_adversary_report():
    space = _line(0.0, 1.0, 3.0, 4.5)
    prior = np.array([0.4, 0.3, 0.2, 0.1])
    eps = (0.5, 2.0)
    ex = explore(space, ["exponential", "krr"], eps, prior=prior, quantile=0.75)
    assert ex.prior and ex.quantile == 0.75
    for name in ("exponential", "krr"):
        for i, e in enumerate(eps):
            mech = registry.build(name, space, e)
            ev = evaluate_mechanism(mech, quantile=0.75)
            adv = adversary_report(mech, prior)
            got = {k: ex.figures[name][k][i] for k in FIGURES}
            assert got == {
                "epsilon_audit": pytest.approx(ev["epsilon_audit"]), "loss_expected": ev["loss_expected"],
                "loss_max": ev["loss_max"], "loss_quantile": ev["loss_quantile"],
                "adversary_expected_error": adv["adversary_expected_error"],
                "adversary_reidentification": adv["adversary_reidentification"],
            }
            assert ex.lower_bound[i] == ev["lower_bound"]
            assert ex.lower_bound_quantile[i] == ev["lower_bound_quantile"]


def test_the_uniform_prior_is_the_default():
    space = _line(0.0, 1.0, 3.0)
    a, b = explore(space, ["exponential"], [1.0]), explore(space, ["exponential"], [1.0], prior=[1 / 3] * 3)
    assert a.figures == b.figures and not a.prior and a.as_dict()["prior"] == "uniform"


def test_a_family_that_cannot_be_built_is_reported_not_dropped():
    space = _line(0.0, 1.0, 3.0)

    def build(name, sp, e):
        if e > 1:
            raise SolverError("the solver gave up")
        return registry.build(name, sp, e)

    ex = explore(space, ["weighted-exponential", "exponential"], [0.5, 2.0], build=build)
    assert "weights" in ex.failures["weighted-exponential"][0]  # it needs a parameter
    assert all(v is None for k in FIGURES for v in ex.figures["weighted-exponential"][k])
    assert ex.failures["exponential"] == [None, "SolverError: the solver gave up"]
    assert ex.figures["exponential"]["loss_max"][0] is not None and ex.figures["exponential"]["loss_max"][1] is None
    out = ex.as_dict()
    assert {(f["family"], f["epsilon"]) for f in out["failures"]} == {
        ("weighted-exponential", 0.5), ("weighted-exponential", 2.0), ("exponential", 2.0)}
    assert "matrices" not in out


def test_other_exceptions_are_not_swallowed():
    def build(name, sp, e):
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        explore(_line(0.0, 1.0), ["krr"], [1.0], build=build)


def test_progress_is_told_each_family_and_epsilon():
    ticks = []
    explore(_line(0.0, 1.0), ["krr", "exponential"], [0.5, 1.0, 2.0], progress=lambda d, t, m: ticks.append((d, t, m)))
    assert [d for d, _, _ in ticks] == [0, 1, 2, 3, 4, 5, 6] and {t for _, t, _ in ticks} == {6}
    assert ticks[0][2] == "krr at epsilon 0.5" and ticks[5][2] == "exponential at epsilon 2"


def test_bad_arguments_are_refused_by_name():
    space = _line(0.0, 1.0)
    for kwargs, match in ((dict(families=["nope"], epsilons=[1.0]), "unknown mechanism 'nope'"),
                          (dict(families=["krr", "krr"], epsilons=[1.0]), "listed twice: krr"),
                          (dict(families=[], epsilons=[1.0]), "at least one mechanism"),
                          (dict(families=["krr"], epsilons=[]), "at least one epsilon"),
                          (dict(families=["krr"], epsilons=[2.0, 1.0]), "must increase"),
                          (dict(families=["krr"], epsilons=[0.0]), "epsilon"),
                          (dict(families=["krr"], epsilons=[1.0], prior=[1.0]), "prior")):
        with pytest.raises(ValidationError, match=match):
            explore(space, **kwargs)


def test_an_optimal_lp_too_large_for_memory_is_refused_before_it_starts(monkeypatch):
    from metricdp.mechanisms import lp_plan

    monkeypatch.setattr(lp_plan, "memory_limit", lambda: 1)
    ex = explore(_line(0.0, 1.0, 3.0), ["optimal", "krr"], [1.0])
    assert ex.failures["optimal"][0].startswith("ResourceLimitError: optimal on 3 points needs")
    assert ex.failures["krr"] == [None]
