"""Structured audits: each bound is never below the dense audit's exact level, and tampering fails them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metricdp.mechanisms.exponential as ex
import metricdp.mechanisms.planar_laplace as pl
import metricdp.remap as rm
from metricdp.audit import audit
from metricdp.audit_structured import (
    StructuredAudit,
    chain_cells,
    chain_reach,
    kernel_audit,
    lattice_chain_audit,
    lattice_steps,
    postprocessing_audit,
    structure_record,
)
from metricdp.errors import ValidationError
from metricdp.spaces import MetricSpace


def _structured_planar(n_rows: int, n_cols: int, epsilon: float) -> tuple[MetricSpace, np.ndarray, np.ndarray]:
    """A grid's planar-Laplace matrix (normalised) and its box matrix, as the builder makes them."""
    space = MetricSpace.grid(n_rows, n_cols, 1.0)
    raw, _, box = pl._discretised_matrix(space, epsilon, 1e-12, True)
    assert box is not None and box[1].tolist() == list(range(n_rows * n_cols))  # a full rectangle: every cell
    return space, raw / raw.sum(axis=1, keepdims=True), box[0]


def _chain(space: MetricSpace, matrix: np.ndarray, box: np.ndarray) -> float:
    rows, cols, n_rows, n_cols = pl.lattice_cells(space)
    return lattice_chain_audit(matrix, space.distances, box, (n_rows, n_cols), rows, cols, 1.0).epsilon


def test_lattice_steps_hand_counted() -> None:
    steps, stretch = lattice_steps(1)  # (0, 1), (1, -1), (1, 0), (1, 1): gaps of 45 degrees
    assert sorted(map(tuple, steps.tolist())) == [(0, 1), (1, -1), (1, 0), (1, 1)]
    assert stretch == pytest.approx(1 / math.cos(math.pi / 8), rel=1e-12)
    assert stretch >= 1 / math.cos(math.pi / 8)
    steps6, stretch6 = lattice_steps(6)
    assert len(steps6) == 48 and 1.0034 < stretch6 < 1.0035


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 6), st.integers(2, 6), st.floats(0.05, 3.0))
def test_lattice_chain_bounds_the_dense_level(n_rows: int, n_cols: int, epsilon: float) -> None:
    space, matrix, box = _structured_planar(n_rows, n_cols, epsilon)
    exact = audit(matrix, space.distances, normalize=True).epsilon
    bound = _chain(space, matrix, box)
    _, stretch = lattice_steps(6)
    assert exact <= bound <= exact * stretch * (1 + 1e-9) + 1e-12


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 15), st.integers(0, 15), st.floats(-3.0, 3.0))
def test_a_bumped_entry_never_gets_past_the_lattice_chain(u: int, w: int, log_factor: float) -> None:
    space, matrix, box = _structured_planar(4, 4, 0.8)
    tampered = matrix.copy()
    tampered[u, w] *= math.exp(log_factor)
    exact = audit(tampered, space.distances, normalize=True).epsilon
    assert _chain(space, tampered, box) >= exact


def test_a_non_private_bump_fails_the_lattice_chain() -> None:
    space, matrix, box = _structured_planar(5, 5, 0.8)
    tampered = matrix.copy()
    tampered[1, 4] *= 1.05  # beyond 1 from 0 on their line: 5% puts the pair (1, 0) above epsilon
    assert audit(tampered, space.distances, normalize=True).epsilon > 0.8
    assert _chain(space, tampered, box) > 0.8
    assert _chain(space, matrix, box) <= 0.8 * lattice_steps(6)[1] * (1 + 1e-9)


def test_the_builder_uses_the_lattice_chain_above_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pl, "DENSE_MAX_N", 10)
    space = MetricSpace.grid(4, 5, 100.0)
    mech = pl.planar_laplace(space, 0.01)
    assert mech.info["audit"] == "lattice-chain"
    assert mech.info["structure"] == {"version": 1, "proof": "lattice-chain", "order": 6, "box": [4, 5],
                                      "cell": 100.0, "cells": list(range(20))}
    assert audit(mech.matrix, space.distances, normalize=True).epsilon <= mech.info["epsilon_audit"] <= 0.01
    small = pl.planar_laplace(MetricSpace.grid(3, 3, 100.0), 0.01)
    assert small.info["audit"] == "dense" and "structure" not in small.info


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_post_processing_bounds_the_remapped_level(seed: int) -> None:
    space, matrix, _ = _structured_planar(3, 4, 1.0)
    base = audit(matrix, space.distances, normalize=True).epsilon
    targets = np.random.default_rng(seed).integers(0, space.n, space.n)
    remapped = np.zeros_like(matrix)
    np.add.at(remapped.T, targets, matrix.T)
    exact = audit(remapped, space.distances, normalize=True).epsilon
    bound = postprocessing_audit(remapped, space.distances, matrix, base, targets).epsilon
    assert exact <= bound <= base * (1 + 1e-12)


def test_a_tampered_remap_fails_post_processing() -> None:
    space, matrix, _ = _structured_planar(3, 4, 1.0)
    base = audit(matrix, space.distances, normalize=True).epsilon
    targets = np.arange(space.n)
    targets[1] = 0
    remapped = np.zeros_like(matrix)
    np.add.at(remapped.T, targets, matrix.T)
    bumped = remapped.copy()
    bumped[2, 0] *= 1.5
    assert postprocessing_audit(bumped, space.distances, matrix, base, targets).epsilon > 1.0
    moved = remapped.copy()
    moved[:, 1] = moved[:, 0] / 2  # mass in a column no output is mapped to
    assert postprocessing_audit(moved, space.distances, matrix, base, targets).epsilon == math.inf


def test_remap_uses_post_processing_above_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rm, "DENSE_MAX_N", 5)
    mech = pl.planar_laplace(MetricSpace.grid(3, 4, 1.0), 0.9)
    prior = np.linspace(1.0, 2.0, 12)
    remapped = rm.bayesian_remap(mech, prior / prior.sum())
    assert remapped.info["audit"] == "post-processing"
    assert audit(remapped.matrix, mech.space.distances, normalize=True).epsilon <= remapped.info["epsilon_audit"]


_COORDS = st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), min_size=3, max_size=12, unique=True)


@settings(max_examples=20, deadline=None)
@given(_COORDS, st.sampled_from(["euclidean", "manhattan"]), st.floats(0.1, 4.0))
def test_kernel_bounds_the_exponential_level(coords: list[tuple[float, float]], metric: str, epsilon: float) -> None:
    space = MetricSpace.from_points(np.array(coords) / 10.0, metric=metric)
    matrix = ex.exponential_matrix(space.distances, epsilon)
    if not np.all(matrix > 0):
        return
    exact = audit(matrix, space.distances, normalize=True).epsilon
    bound = kernel_audit(matrix, space.distances, epsilon).epsilon
    assert exact <= bound <= epsilon * (1 + 1e-9)


def test_a_bumped_kernel_entry_fails_and_provenance_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    space = MetricSpace.grid(3, 3, 1.0)
    matrix = ex.exponential_matrix(space.distances, 1.0)
    bumped = matrix.copy()
    bumped[0, 8] *= 1.001
    assert kernel_audit(bumped, space.distances, 1.0).epsilon > 1.0
    assert ex.proven_metric(space)
    assert not ex.proven_metric(MetricSpace.from_distances(np.asarray(space.distances)))
    monkeypatch.setattr(ex, "DENSE_MAX_N", 4)
    mech = ex.exponential(space, 1.0)
    assert mech.info["audit"] == "kernel" and mech.info["epsilon_audit"] <= 1.0 * (1 + 1e-9)
    assert ex.exponential(MetricSpace.from_distances(np.asarray(space.distances)), 1.0).info["audit"] == "dense"


def test_the_compiled_step_check_matches_numpy_to_the_bit() -> None:
    from metricdp._chain_kernels import KERNELS
    from metricdp.audit_structured import _step_gap

    if KERNELS is None:
        pytest.skip("numba is not installed")
    _, _, box = _structured_planar(5, 6, 0.9)
    log_rows = np.log(box)
    index = np.arange(30).reshape(5, 6)
    holed = index.copy()
    holed[2, 1:4] = -1  # box cells without a row are skipped alike
    for a, b in lattice_steps(3)[0]:
        for grid in (index, holed):
            assert _step_gap(log_rows, grid, int(a), int(b), 2, KERNELS) == _step_gap(log_rows, grid, int(a), int(b), 2)


def test_the_structure_record_of_each_proof() -> None:
    chain = StructuredAudit(0.9, "lattice-chain", {"order": 6, "box": [3, 4], "stretch": 1.0034}, {"cells": [0, 5]})
    assert structure_record(chain) == {"version": 1, "proof": "lattice-chain", "order": 6, "box": [3, 4],
                                       "cells": [0, 5]}
    kernel = StructuredAudit(0.9, "kernel", {"inner_epsilon": 0.5, "tau": 1e-12})
    assert structure_record(kernel) == {"version": 1, "proof": "kernel", "inner_epsilon": 0.5}
    remap = StructuredAudit(0.9, "post-processing", {"deviation": 0.0})
    assert structure_record(remap, structure_record(kernel)) == {
        "version": 1, "proof": "post-processing", "base": {"version": 1, "proof": "kernel", "inner_epsilon": 0.5}}
    assert structure_record(remap)["base"] is None


def test_chain_reach_and_cells_hand_counted() -> None:
    assert chain_reach(1) == 0.5  # consecutive steps (1, 0), (1, 1): |a - b| = 1
    assert chain_reach(6) == pytest.approx(math.sqrt(41) / 2)  # (1, 1) after (6, 5): |a - b| = |(5, 4)|
    r, c = np.divmod(np.arange(121), 11)
    triangle = r + c <= 10  # hull: the triangle r + c <= 10; kept: r + c <= 10 + reach * sqrt(2)
    assert chain_cells(r[triangle], c[triangle], (11, 11), 1).sum() == 66  # r + c <= 10.7
    assert chain_cells(r[triangle], c[triangle], (11, 11), 6).sum() == 121 - 21  # r + c <= 14.5
    assert chain_cells(np.zeros(11, int), np.arange(11), (8, 11), 6).all()  # one line: the whole box


def _subset_planar(keep: list[int], n_rows: int, n_cols: int, epsilon: float):
    pts = np.asarray(MetricSpace.grid(n_rows, n_cols, 1.0).points)[keep]
    space = MetricSpace.from_points(pts)
    raw, _, box = pl._discretised_matrix(space, epsilon, 1e-12, True)
    assert box is not None
    return space, raw / raw.sum(axis=1, keepdims=True), box


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.1, 2.0))
def test_lattice_chain_on_a_lattice_subset_bounds_the_dense_level(seed: int, epsilon: float) -> None:
    rng = np.random.default_rng(seed)
    keep = sorted(rng.choice(36, size=int(rng.integers(4, 20)), replace=False).tolist())
    space, matrix, (box, cells) = _subset_planar(keep, 6, 6, epsilon)
    if space.cell is None:
        return
    rows, cols, n_rows, n_cols = pl.lattice_cells(space)
    exact = audit(matrix, space.distances, normalize=True).epsilon
    bound = lattice_chain_audit(matrix, space.distances, box, (n_rows, n_cols), rows, cols, float(space.cell),
                                box_cells=cells).epsilon
    assert exact <= bound


def test_lattice_chain_refuses_box_rows_that_miss_a_cell_of_a_path() -> None:
    keep = [i for i in range(36) if i // 6 == i % 6 or abs(i // 6 - i % 6) == 1]  # a diagonal band
    space, matrix, (box, cells) = _subset_planar(keep, 6, 6, 1.0)
    rows, cols, n_rows, n_cols = pl.lattice_cells(space)
    hull_only = ~np.isin(cells, rows * n_cols + cols)
    drop = int(np.flatnonzero(hull_only)[0])  # a cell next to the band, not an input's
    with pytest.raises(ValidationError, match="a cell a chain path between two inputs can visit has no box row"):
        lattice_chain_audit(matrix, space.distances, np.delete(box, drop, axis=0), (n_rows, n_cols), rows, cols,
                            1.0, box_cells=np.delete(cells, drop))


def test_a_band_beyond_half_its_rectangle_takes_the_lattice_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pl, "DENSE_MAX_N", 10)
    keep = [i for i in range(400) if abs(i // 20 - i % 20) <= 4]  # 164 of a 20 x 20 box's 400 cells
    space = MetricSpace.from_points(np.asarray(MetricSpace.grid(20, 20, 1.0).points)[keep])
    rows, cols, n_rows, n_cols = pl.lattice_cells(space)
    assert n_rows * n_cols > 2 * space.n and chain_cells(rows, cols, (20, 20), 6).sum() <= 2 * space.n
    mech = pl.planar_laplace(space, 0.5)
    assert mech.info["audit"] == "lattice-chain" and mech.info["audit_details"]["box_rows"] < 400
    assert audit(mech.matrix, space.distances, normalize=True).epsilon <= mech.info["epsilon_audit"] <= 0.5
