"""ConstOPTMech's builder :func:`~metricdp.mechanisms.constopt.constopt`: argument checks, the
audit property on random spaces, calibration, time limits and the GloVe acceptance test.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metricdp.errors import SolverError, ValidationError
from metricdp.mechanisms.constopt import constopt
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, random_space

from .conftest import glove_space
from .oracles import em_matrix, loss, quantile95


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"fit": "exact"}, "fit"),
        ({"formulation": "plain"}, "formulation"),
        ({"lambdas": [0.1, -1.0]}, "lambda"),
        ({"lambdas": [float("nan")]}, "lambda"),
        ({"lambdas": "abc"}, "lambdas"),
        ({"lambdas": [], "fit": "paper"}, "at least one lambda"),
        ({"quantile": 1.5}, "quantile"),
        ({"neighbours": 2.5}, "neighbours"),
        ({"neighbours": -1}, "neighbours"),
        ({"calibrate": "yes"}, "calibrate"),
        ({"time_limit": 0}, "time_limit"),
        ({"replacement": np.ones((5, 5))}, "boolean"),
        ({"replacement": np.ones((4, 4), dtype=bool)}, r"shape \(5, 5\)"),
        ({"replacement": ([0, 1], [1])}, "differ in length"),
        ({"replacement": ([0, 7], [1, 2])}, r"entry 1 = \(7, 2\)"),
        ({"replacement": ([0.5], [1.0])}, "integer"),
        ({"replacement": "nn"}, "replacement must be"),
    ],
)
def test_bad_arguments_name_the_culprit(kwargs: dict, match: str) -> None:
    space = random_space(0, 5)
    args = {"epsilon": 1.0, **kwargs}
    eps = args.pop("epsilon")
    with pytest.raises(ValidationError, match=match):
        constopt(space, eps, **args)


def test_space_must_be_a_metric_space() -> None:
    with pytest.raises(ValidationError, match="MetricSpace"):
        constopt(np.eye(3), 1.0)  # type: ignore[arg-type]


@pytest.mark.slow
@settings(max_examples=30)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 8),
    eps=st.floats(0.2, 3.0),
    r=st.integers(0, 7),
    fit=st.sampled_from(["paper", "normalised"]),
    clustered=st.booleans(),
)
def test_audit_passes_and_never_worse_than_em(
    seed: int, n: int, eps: float, r: int, fit: str, clustered: bool
) -> None:
    space = random_space(seed, n, dim=3, clustered=clustered)
    mech = constopt(space, eps, neighbours=min(r, n - 1), fit=fit)
    assert_private(mech)
    assert mech.audit().epsilon <= eps * (1 + 1e-9)
    em = loss(em_matrix(space.distances, eps), space.distances).max()
    assert mech.worst_case_loss() <= em * (1 + 1e-12)


def test_calibrate_passes_the_audit_and_does_not_lose() -> None:
    space = random_space(8, 8, clustered=True)
    plain = constopt(space, 1.0, neighbours=3)
    cal = constopt(space, 1.0, neighbours=3, calibrate=True)
    assert_private(cal)
    assert cal.worst_case_loss() <= plain.worst_case_loss() * (1 + 1e-12)
    info = cal.info["calibration"]
    assert 0.5 <= info["inner_epsilon"] <= 1.0 and info["epsilon_audit"] <= 1.0
    assert cal.params["calibrate"] is True


def test_time_limit_without_any_optimal_lp_is_a_solver_error() -> None:
    space = random_space(9, 120, dim=5)
    for fit in ("paper", "normalised"):
        with pytest.raises(SolverError, match="no LP reached optimality") as err:
            constopt(space, 1.0, fit=fit, time_limit=1e-6)
        assert err.value.status == "limit"
    with pytest.raises(SolverError, match="no LP reached optimality"):
        constopt(space, 1.0, lambdas=[], time_limit=1e-6)


def test_huge_epsilon_times_diameter_is_refused() -> None:
    space = MetricSpace.from_points([[0.0], [1.0], [800.0]])
    with pytest.raises(ValidationError, match="underflows"):
        constopt(space, 1.0)


@pytest.mark.slow
def test_glove_200_beats_the_exponential_mechanism_with_both_fits(glove200: MetricSpace) -> None:
    d = glove200.distances
    em = loss(em_matrix(d, 1.0), d)
    paper = constopt(glove200, 1.0, neighbours=10, fit="paper")
    normalised = constopt(glove200, 1.0, neighbours=10)
    for mech in (paper, normalised):
        assert mech.audit().epsilon <= 1.0
        assert mech.worst_case_loss() < em.max()
        assert mech.quantile_loss(0.95) < quantile95(em)
    assert normalised.worst_case_loss() <= paper.worst_case_loss()
    # the solver returns exact zeros (whole columns with Y_w = 0); the result is private anyway
    assert (normalised.matrix.max(axis=0) == 0).any()
    assert normalised.info["normalised"]["certified"]


def test_glove_sampler_is_deterministic_and_clustered() -> None:
    a, b = glove_space(30, seed=3), glove_space(30, seed=3)
    assert a.labels == b.labels and len(set(a.labels)) == 30
    assert a.labels != glove_space(30, seed=4).labels

