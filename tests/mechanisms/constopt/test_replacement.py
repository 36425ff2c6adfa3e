"""ConstOPTMech's replacement function (:mod:`metricdp.mechanisms.constopt.replacement`):
the nearest-neighbour sets on hand-checked lines and user-given sets as mask or pairs.
"""

from __future__ import annotations

import importlib

import numpy as np

from metricdp.mechanisms.constopt import constopt
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, random_space

from .oracles import em_matrix, loss

co = importlib.import_module("metricdp.mechanisms.constopt")


def test_nearest_neighbour_replacement_on_a_line() -> None:
    # positions 0, 1, 3, 7: nearest of 0 is 1; of 1 is 0 (d=1 < 2); of 3 is 1; of 7 is 3
    space = MetricSpace.from_points([[0.0], [1.0], [3.0], [7.0]])
    rows, cols = co.nearest_neighbour_replacement(space, 1)
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == [(0, 1), (1, 0), (2, 1), (3, 2)]
    rows, cols = co.nearest_neighbour_replacement(space, 2)
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == [
        (0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1), (3, 1), (3, 2)
    ]


def test_nearest_neighbour_ties_break_by_index() -> None:
    space = MetricSpace.from_points([[0.0], [-1.0], [1.0]])  # 1 and 2 tie for point 0
    rows, cols = co.nearest_neighbour_replacement(space, 1)
    assert cols[rows == 0].tolist() == [1]


def test_user_replacement_mask_and_pairs_agree() -> None:
    space = random_space(3, 7)
    rows, cols = co.nearest_neighbour_replacement(space, 2)
    mask = np.zeros((7, 7), dtype=bool)
    mask[rows, cols] = True
    a = constopt(space, 1.0, replacement=mask, fit="paper")
    b = constopt(space, 1.0, replacement=(rows, cols), fit="paper")
    c = constopt(space, 1.0, neighbours=2, fit="paper")
    assert np.array_equal(a.matrix, b.matrix) and np.array_equal(a.matrix, c.matrix)
    assert a.params["replacement"] == "user" and c.params["replacement"] == "nearest_neighbours"


def test_user_replacement_with_free_diagonal_and_free_column_is_private() -> None:
    space = random_space(4, 6)
    mask = np.zeros((6, 6), dtype=bool)
    mask[:, 0] = True  # column 0 entirely free: no fixed entry, no Y_0
    mask[2, 2] = mask[3, 4] = True  # a free diagonal entry
    for fit in ("paper", "normalised"):
        mech = constopt(space, 0.7, replacement=mask, fit=fit)
        assert_private(mech)
        assert mech.worst_case_loss() <= loss(em_matrix(space.distances, 0.7), space.distances).max() + 1e-9

