"""Mechanism and certify with a separate output set: shapes, pickling, losses, refusals."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from metricdp.errors import PrivacyViolationError, ValidationError
from metricdp.mechanisms.base import Mechanism, certify
from metricdp.outputs import OutputSet
from metricdp.spaces import MetricSpace

SPACE = MetricSpace.from_points([[0.0], [1.0]], ["a", "b"])
YS = OutputSet.from_points(SPACE, [[0.0], [0.5], [1.0]], ["lo", "mid", "hi"])
M = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])  # level log(2.5) / 1


def test_losses_use_the_cross_distances():
    mech = Mechanism.from_matrix(M, SPACE, 1.0, outputs=YS)
    # L(a) = 0.5*0 + 0.3*0.5 + 0.2*1 = 0.35, L(b) the same by symmetry
    np.testing.assert_allclose(mech.element_losses(), [0.35, 0.35])
    assert mech.worst_case_loss() == pytest.approx(0.35) and mech.expected_loss([1.0, 0.0]) == pytest.approx(0.35)
    np.testing.assert_allclose(mech.uniform_losses(), [0.5, 0.5])
    assert mech.n == 2 and mech.m == 3 and not mech.square and mech.loss_distances is YS.distances
    assert mech.distances is SPACE.distances and "m=3" in repr(mech)
    assert mech.metadata["outputs"] == {"m": 3, "metric": "euclidean"}
    assert mech.epsilon_tight(0.0) == pytest.approx(np.log(2.5))


def test_certify_audits_over_the_inputs():
    with pytest.raises(PrivacyViolationError, match=r"only 0\.916"):
        certify(M, SPACE, 0.5, "custom", outputs=YS)
    with pytest.raises(ValidationError, match=r"must be a square matrix, got shape \(2, 3\)"):
        certify(M, SPACE, 1.0, "custom")
    with pytest.raises(ValidationError, match=r"expected \(2, 3\)"):
        certify(np.full((2, 2), 0.5), SPACE, 1.0, "custom", outputs=YS)
    with pytest.raises(ValidationError, match="without a separate output set"):
        Mechanism(M, SPACE, 1.0, "krr", outputs=YS)


def test_pickling_carries_the_outputs_and_audits_again():
    mech = Mechanism.from_matrix(M, SPACE, 1.0, outputs=YS)
    back = pickle.loads(pickle.dumps(mech))
    assert back.output_labels == ("lo", "mid", "hi")
    np.testing.assert_array_equal(back.matrix, mech.matrix)
    np.testing.assert_array_equal(back.loss_distances, YS.distances)
    restore, args = mech.__reduce__()
    assert args[-1] is YS
    with pytest.raises(PrivacyViolationError):  # the unpickler is the auditing constructor
        restore(args[0], args[1], 0.5, *args[3:])


def test_privatize_releases_output_labels():
    mech = Mechanism.from_matrix(M, SPACE, 1.0, outputs=YS)
    out = mech.privatize(["a", "b", "a"], rng=None)
    assert len(out) == 3 and set(out) <= {"lo", "mid", "hi"}
    with pytest.raises(ValidationError, match="not in the space"):
        mech.privatize(["lo"])
