"""The cone of ConstOPTMech's family (:mod:`metricdp.mechanisms.constopt.cone`): negligible
terms dropped without touching privacy, and the fixed-entry-only cone (no free entries).
"""

from __future__ import annotations

import pytest

from metricdp.mechanisms.constopt import constopt
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, random_space

from .oracles import em_matrix, loss


@pytest.mark.parametrize("fit", ["paper", "normalised"])
def test_negligible_terms_are_dropped_without_touching_privacy(fit: str) -> None:
    # a grid at a large epsilon: exp(-eps' d) < 1e-9 beyond about two cells
    space = MetricSpace.grid(5, 5)
    mech = constopt(space, 20.0, neighbours=4, fit=fit)
    assert mech.info["lp"]["dropped_terms"] > 0
    assert_private(mech)
    assert mech.worst_case_loss() <= loss(em_matrix(space.distances, 20.0), space.distances).max() * (1 + 1e-12)


def test_no_free_entries_is_a_weighted_exponential_mechanism() -> None:
    space = random_space(6, 8, clustered=True)
    mech = constopt(space, 1.0, neighbours=0)
    assert mech.info["lp"]["paper_counts"]["free_entries"] == 0
    assert_private(mech)
    assert mech.worst_case_loss() <= loss(em_matrix(space.distances, 1.0), space.distances).max()

