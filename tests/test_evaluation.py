"""The evaluation report: a mechanism with a separate output set says its bounds are not available."""

from __future__ import annotations

import pytest

from metricdp.evaluation import RECTANGULAR_BOUND_NOTE, evaluate_mechanism
from metricdp.mechanisms.exponential import exponential
from metricdp.outputs import OutputSet
from metricdp.spaces import MetricSpace


def test_rectangular_evaluation():
    space = MetricSpace.grid(3, 3)
    ys = OutputSet.from_points(space, [[0.5, 0.5], [1.5, 1.5]])
    mech = exponential(space, 1.0, outputs=ys)
    out = evaluate_mechanism(mech)
    assert out["outputs"] == 2 and out["n"] == 9
    assert out["lower_bound_note"] == RECTANGULAR_BOUND_NOTE and "lower_bound" not in out
    assert out["loss_max"] == pytest.approx(mech.worst_case_loss())
    assert out["loss_uniform_max"] == pytest.approx(float(ys.distances.mean(axis=1).max()))
    assert out["epsilon_audit"] <= 1.0
    square = evaluate_mechanism(exponential(space, 1.0))
    assert "outputs" not in square and "lower_bound" in square


def test_rectangular_progress_names_the_matrix_shape():
    space = MetricSpace.grid(3, 3)
    mech = exponential(space, 1.0, outputs=OutputSet.from_points(space, [[0.5, 0.5], [1.5, 1.5]]))
    seen: list[str] = []
    evaluate_mechanism(mech, progress=lambda done, total, message: seen.append(message))
    assert "auditing 9 x 2 matrix" in seen
