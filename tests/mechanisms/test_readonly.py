"""A Mechanism's arrays cannot be made writable: ``em.matrix.base.setflags(write=True)``
made an audited matrix writable again and the releases followed the edited matrix."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import numpy as np
import pytest

import metricdp.mechanisms.base as base_module
from metricdp import MetricSpace
from metricdp._readonly import frozen, is_frozen
from metricdp.mechanisms import build
from metricdp.mechanisms.base import Mechanism
from metricdp.mechanisms.file import load_mechanism
from metricdp.outputs import OutputSet
from metricdp.sampling import ExactTable

LABELS = ["a", "b", "c", "d"]
POINTS = [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]


def _chain(a: np.ndarray) -> list[np.ndarray]:
    """``a`` and every ndarray on its ``.base`` chain."""
    out = []
    b: object = a
    while isinstance(b, np.ndarray):
        out.append(b)
        b = b.base
    return out


def _exposed(mech: Mechanism) -> dict[str, np.ndarray]:
    mech.sample([0, 1, 2], rng=None)  # builds the exact sampler's tables
    arrays = {"matrix": mech.matrix, "distances": mech.distances, "space.distances": mech.space.distances,
              "loss_distances": mech.loss_distances, "_cdf": mech._cdf}
    if mech.space.points is not None:
        arrays["space.points"] = mech.space.points
    if mech.outputs is not None:
        arrays["outputs.distances"] = mech.outputs.distances
        if mech.outputs.points is not None:
            arrays["outputs.points"] = mech.outputs.points
    table = mech.__dict__["_exact_table"]
    for name in ("matrix", "prefix", "scale", "truncated", "total", "limit"):
        arrays[f"table.{name}"] = getattr(table, name)
    return arrays


def _assert_frozen_for_good(arrays: dict[str, np.ndarray]) -> None:
    for name, a in arrays.items():
        assert is_frozen(a), name
        for level, b in enumerate(_chain(a)):
            with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
                b.setflags(write=True)
            assert not b.flags.writeable, (name, level)
            if b.size:
                with pytest.raises(ValueError, match="read-only"):
                    b.flat[0] = 0.5
        assert isinstance(_chain(a)[-1].base, bytes), name


@pytest.fixture
def space() -> MetricSpace:
    return MetricSpace.from_points(POINTS, LABELS)


@pytest.mark.parametrize("family", ["exponential", "krr", "geometric-like"])
def test_every_exposed_array_and_its_bases_refuse_writes(space: MetricSpace, family: str) -> None:
    if family == "geometric-like":
        mech = Mechanism.from_matrix(np.full((4, 4), 0.25), space, 1.0)
    elif family == "krr":
        mech = build("krr", space, ldp_epsilon=1.0)
    else:
        mech = build(family, space, 1.0)
    _assert_frozen_for_good(_exposed(mech))


def test_a_separate_output_set_is_frozen_too(space: MetricSpace) -> None:
    outputs = OutputSet.from_points(space, [[0.5, 0.5], [2.0, 2.0]], ["mid", "far"])
    mech = build("exponential", space, 1.0, outputs=outputs)
    _assert_frozen_for_good(_exposed(mech))
    given = OutputSet.from_distances(space, np.ones((4, 1)), ["o"])
    _assert_frozen_for_good({"from_distances": given.distances})


def test_the_issue_31_attack_fails_and_releases_follow_the_audited_matrix(space: MetricSpace) -> None:
    mech = build("exponential", space, 1.0)
    audited = mech.matrix.copy()
    with pytest.raises(ValueError):
        mech.matrix.base.setflags(write=True)
    assert isinstance(mech.matrix.base.base, bytes)  # the end of the chain: immutable
    with pytest.raises(ValueError, match="read-only"):
        np.frombuffer(mech.matrix.base.base, dtype=np.float64)[0] = 1.0
    np.testing.assert_array_equal(mech.matrix, audited)


def test_arrays_handed_in_stay_the_callers_and_cannot_reach_the_mechanism(space: MetricSpace) -> None:
    """A space built directly from writable arrays: the Mechanism audits and keeps a frozen copy."""
    d = np.array(space.distances)  # writable
    pts = np.array(POINTS)
    loose = MetricSpace(d, tuple(LABELS), "euclidean", pts)
    matrix = np.full((4, 4), 0.25)
    mech = Mechanism.from_matrix(matrix, loose, 1.0)
    d[0, 1] = d[1, 0] = 1e-9
    pts[0] = [5.0, 5.0]
    matrix[0] = [1.0, 0.0, 0.0, 0.0]
    assert mech.distances[0, 1] == 1.0 and mech.space.points[0, 0] == 0.0 and mech.matrix[0, 0] == 0.25
    _assert_frozen_for_good(_exposed(mech))


def test_pickling_and_loading_go_through_the_audited_constructor(space: MetricSpace, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    mech = build("exponential", space, 1.0)
    audits = []
    real = base_module._check_audit
    monkeypatch.setattr(base_module, "_check_audit", lambda *a: audits.append(1) or real(*a))
    for make in (lambda: pickle.loads(pickle.dumps(mech)), lambda: copy.deepcopy(mech), lambda: copy.copy(mech)):
        again = make()
        assert audits == [1], "the copy skipped the audit"
        audits.clear()
        np.testing.assert_array_equal(again.matrix, mech.matrix)
        _assert_frozen_for_good(_exposed(again))
    mech.save(tmp_path / "m.npz")
    _assert_frozen_for_good(_exposed(load_mechanism(tmp_path / "m.npz")))


def test_frozen_helper() -> None:
    a = np.arange(6.0).reshape(2, 3)
    f = frozen(a)
    assert is_frozen(f) and not is_frozen(a) and frozen(f) is f
    a[0, 0] = 99.0
    assert f[0, 0] == 0.0  # a copy
    view = a.view()
    view.setflags(write=False)
    assert not is_frozen(view)  # read-only, but its base can be made writable
    assert is_frozen(frozen(np.zeros((0, 3))))
    assert frozen([1, 2], np.float64).dtype == np.float64
    with pytest.raises(TypeError):
        frozen(np.array([object()]))
    table = ExactTable.from_matrix(np.array([[0.5, 0.5]]))
    assert all(is_frozen(getattr(table, k)) for k in ("matrix", "prefix", "scale", "truncated", "total", "limit"))
    assert is_frozen(table.row(0).prefix)  # views of frozen arrays stay frozen
