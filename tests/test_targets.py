"""calibrate_to_target: hand-computed answers, the right side for each kind, figures that are not monotone."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import ResourceLimitError, ValidationError
from metricdp.mechanisms import registry
from metricdp.mechanisms.base import Mechanism, certify
from metricdp.mechanisms.exponential import exponential_matrix
from metricdp.mechanisms.registry import Family
from metricdp.spaces import MetricSpace, check_space
from metricdp.targets import Target, calibrate_to_target, parse_target, search_builds

TWO = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
LN3 = math.log(3.0)


def test_krr_reidentification_ceiling_is_the_largest_ldp_epsilon() -> None:
    # two points, uniform prior: RI = e^a / (1 + e^a) <= 3/4  iff  a <= ln 3
    r = calibrate_to_target("krr", TWO, parse_target("reidentification=0.75"))
    assert r.parameter_name == "ldp_epsilon"
    assert LN3 / 1.001 <= r.parameter <= LN3
    assert r.figures["reidentification"] <= 0.75
    assert r.neighbour is not None and r.neighbour[0] == pytest.approx(r.parameter * 1.05) and not r.neighbour[2]
    assert "fails" in r.neighbour_note and r.search["monotone_on_grid"]


def test_exponential_expected_loss_is_the_smallest_epsilon() -> None:
    # EL = t / (1 + t), t = e^{-eps/2}: EL <= 1/4  iff  eps >= 2 ln 3
    r = calibrate_to_target("exponential", TWO, parse_target("expected-loss=0.25"))
    assert 2 * LN3 <= r.parameter <= 2 * LN3 * 1.001
    assert r.figures["expected_loss"] <= 0.25
    assert r.neighbour is not None and r.neighbour[0] == pytest.approx(r.parameter / 1.05) and not r.neighbour[2]


def test_exponential_adversary_error_floor_is_the_largest_epsilon() -> None:
    # on two points the adversary guesses the output: AE = t / (1 + t) >= 1/4  iff  eps <= 2 ln 3
    r = calibrate_to_target("exponential", TWO, parse_target("adversary-error=0.25"))
    assert 2 * LN3 / 1.001 <= r.parameter <= 2 * LN3
    assert r.figures["adversary_error"] >= 0.25
    assert r.mechanism.epsilon == r.parameter and r.figures["epsilon_audit"] <= r.parameter


def test_level_radius_is_built_without_search() -> None:
    r = calibrate_to_target("exponential", TWO, parse_target("level=2,radius=4"))
    assert r.parameter == 0.5 and r.probes == () and r.mechanism.epsilon == 0.5


def test_unreachable_target_names_the_best_figure() -> None:
    with pytest.raises(ValidationError, match=r"no epsilon in .* meets adversary-error=0.6; the best adversary_error"):
        calibrate_to_target("exponential", TWO, parse_target("adversary-error=0.6"))


def test_prior_moves_the_answer() -> None:
    # prior (0.9, 0.1): AE = min(0.9 M[0,w], 0.1 M[1,w]) summed; a blind guess errs 0.1, so AE >= 0.1 is never met
    with pytest.raises(ValidationError, match="no epsilon"):
        calibrate_to_target("exponential", TWO, parse_target("adversary-error=0.1001"), [0.9, 0.1])


@pytest.mark.parametrize(
    ("text", "unit", "kind", "value"),
    [("expected-loss=500m", "km", "expected-loss", 0.5), ("worst-loss=2km", "m", "worst-loss", 2000.0),
     ("adversary-error=1.5", "", "adversary-error", 1.5), ("reidentification=0.2", "km", "reidentification", 0.2),
     ("level=1,radius=200m", "km", "level", 5.0)],
)
def test_parse_target_units(text: str, unit: str, kind: str, value: float) -> None:
    t = parse_target(text, unit)
    assert t.kind == kind and t.value == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize(
    ("text", "unit", "message"),
    [("loss=3", "", "unknown kind 'loss'"), ("expected-loss", "", "write KIND=VALUE"),
     ("expected-loss=500m", "", "has a unit"), ("reidentification=1.5", "", r"in \(0, 1\]"),
     ("level=1", "km", "level=L,radius=R"), ("worst-loss=-1", "", "not a length")],
)
def test_parse_target_errors(text: str, unit: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_target(text, unit)


# ------------------------------------------------------------- a family whose figures are not monotone in eps
#: eps ranges where "dip" releases at eps' = 0.05 (far more privacy than asked): islands of a passing AE.
ISLANDS = ((1.0, 2.3), (2.4, 3.0))


def dip(space: MetricSpace, epsilon: float) -> Mechanism:
    """The exponential mechanism at eps, or at 0.05 inside ISLANDS: eps-mDP either way."""
    space = check_space(space)
    inner = 0.05 if any(a <= epsilon <= b for a, b in ISLANDS) else epsilon
    return certify(exponential_matrix(space.distances, inner), space, epsilon, "dip")


@pytest.fixture
def dip_family(monkeypatch):
    entry = Family("dip", "tests.test_targets:dip", "non-monotone test family")
    monkeypatch.setitem(registry.FAMILIES, "dip", entry)
    return entry


def test_non_monotone_figure_search_goes_past_the_gap(dip_family) -> None:
    # AE >= 0.45 holds for small eps and inside both islands; the largest such eps is 3.0.
    # The grid over [0.01, 10] passes at 1 and 1.78 and fails at 3.16; the first bisection
    # point (2.37) falls in the gap (2.3, 2.4), so the bisection converges to 2.3; its
    # neighbour 2.3 * 1.05 passes, and the search resumes there up to 3.0.
    r = calibrate_to_target("dip", TWO, Target("adversary-error", 0.45), bracket=(0.01, 10.0))
    assert 3.0 / 1.001 <= r.parameter <= 3.0
    assert not r.search["monotone_on_grid"]
    assert any("not monotone there" in n for n in r.notes)
    assert r.neighbour is not None and not r.neighbour[2]
    stages = [p.stage for p in r.probes]
    assert stages.count("neighbour") == 2


def test_non_monotone_without_resume_keeps_a_passing_answer(dip_family) -> None:
    r = calibrate_to_target("dip", TWO, Target("adversary-error", 0.45), bracket=(0.01, 10.0), rounds=1)
    assert r.target.meets(r.figures)
    assert r.neighbour is not None and r.neighbour[2]  # the witness passed: said, not hidden
    assert "still met the target" in r.neighbour_note


def test_every_answer_meets_its_target_and_is_the_family_build() -> None:
    space = MetricSpace.grid(3, 3, cell=1.0)
    pi = np.random.default_rng(0).dirichlet(np.full(9, 0.5))
    for name in ("exponential", "planar-laplace", "geometric"):
        for text in ("adversary-error=0.8", "reidentification=0.4", "expected-loss=0.8", "worst-loss=1.2"):
            r = calibrate_to_target(name, space, parse_target(text), pi)
            assert r.target.meets(r.figures), (name, text, r.figures)
            rebuilt = registry.build(name, space, r.parameter)
            np.testing.assert_array_equal(rebuilt.matrix, r.mechanism.matrix)


def test_bad_arguments() -> None:
    with pytest.raises(ValidationError, match="estimated"):
        calibrate_to_target("madlib", TWO, Target("adversary-error", 0.1))
    with pytest.raises(ValidationError, match="bracket"):
        calibrate_to_target("exponential", TWO, Target("adversary-error", 0.1), bracket=(2.0, 1.0))
    with pytest.raises(ValidationError, match="target must be a Target"):
        calibrate_to_target("exponential", TWO, "adversary-error=0.1")  # type: ignore[arg-type]


@settings(max_examples=8, deadline=None)
@given(
    n=st.integers(2, 5),
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(["adversary-error", "expected-loss", "worst-loss", "reidentification"]),
    share=st.floats(0.3, 0.9),
)
def test_exponential_answers_meet_and_the_witness_fails(n: int, seed: int, kind: str, share: float) -> None:
    # the exponential mechanism's figures are monotone in eps: the answer meets, the witness beside it fails
    rng = np.random.default_rng(seed)
    space = MetricSpace.from_points(rng.uniform(0, 5, size=(n, 2)))
    pi = rng.dirichlet(np.ones(n))
    top = calibrate_to_target("exponential", space, Target("level", 1e-3 / space.diameter), pi).figures
    value = share * top["reidentification"] + (1 - share) if kind == "reidentification" else share * top[
        {"adversary-error": "adversary_error", "expected-loss": "expected_loss", "worst-loss": "worst_loss"}[kind]]
    r = calibrate_to_target("exponential", space, Target(kind, value), pi)  # type: ignore[arg-type]
    assert r.target.meets(r.figures)
    assert r.neighbour is not None and not r.neighbour[2], r.neighbour_note


@pytest.mark.parametrize("kind, value, message", [
    ("expected-loss", float("nan"), "must be finite and > 0"), ("expected-loss", -1.0, "must be finite and > 0"),
    ("worst-loss", 0.0, "must be finite and > 0"), ("reidentification", 1.5, r"probability is in \(0, 1\]"),
    ("nope", 1.0, "unknown kind 'nope'"), ("expected-loss", "x", "must be a number"),
])
def test_a_target_built_by_hand_is_checked_like_a_parsed_one(kind: str, value: object, message: str) -> None:
    """A Python caller gets the checks of parse_target: no KeyError, no target nothing can meet."""
    with pytest.raises(ValidationError, match=message):
        Target(kind, value)  # type: ignore[arg-type]


def test_search_builds_counts_grid_bisection_and_witness() -> None:
    # a step of ln(1000) / 2 = 3.45 halved down to ln(1.001): 12 halvings
    assert search_builds(1.0, 1000.0, 3, 1e-3) == 3 + 12 + 1
    assert search_builds(1.0, 1.0001, 2, 1e-3) == 2 + 0 + 1  # the step is already below rtol


def test_a_search_over_the_time_limit_is_refused_before_any_build(monkeypatch) -> None:
    """optimal on a 4 x 4 grid: the plan prices 24 builds (module docstring of lp_plan); a 0.05 s limit refuses."""
    from metricdp.mechanisms.lp_plan import plan_optimal

    space = MetricSpace.grid(4, 4, cell=250.0)
    built: list[float] = []
    plan = plan_optimal(16)
    builds = search_builds(1e-3 / space.diameter, 50.0 / space.d_min, 13, 1e-3)
    assert builds * plan.seconds > 0.05  # the premise: the estimate is over the limit
    with pytest.raises(ResourceLimitError, match=(
            rf"calibrating optimal on 16 points would take about .*: {builds} builds of about .* each "
            r"\(optimal \(fast\) on 16 x 16.*over the time limit of 0.05 s; a space of at most \d+ points would fit")):
        calibrate_to_target("optimal", space, parse_target("adversary-error=100"), time_limit=0.05,
                            build=lambda eps: built.append(eps) or registry.build("optimal", space, eps))
    assert built == []  # refused before the first build
    # the same search admitted by a limit above the estimate (and by no limit): it runs
    admitted = search_builds(1e-3 / space.diameter, 50.0 / space.d_min, 3, 1e-3) * plan.seconds * 1.01
    r = calibrate_to_target("optimal", space, parse_target("adversary-error=100"), time_limit=admitted,
                            build=lambda eps: built.append(eps) or registry.build("optimal", space, eps), grid=3)
    assert built and r.target.meets(r.figures)
    with pytest.raises(ValidationError, match="time_limit"):
        calibrate_to_target("optimal", space, parse_target("adversary-error=100"), time_limit=0.0)


def test_families_without_an_lp_plan_are_not_priced() -> None:
    r = calibrate_to_target("exponential", TWO, parse_target("adversary-error=0.25"), time_limit=1e-9)
    assert r.figures["adversary_error"] >= 0.25
