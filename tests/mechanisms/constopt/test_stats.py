"""ConstOPTMech's LP statistics (:mod:`metricdp.mechanisms.constopt.stats`): the paper's row
and variable counts (Theorem 1 proof, Corollary 1) counted independently of the library.
"""

from __future__ import annotations

import numpy as np

from metricdp.mechanisms.constopt import constopt
from metricdp.spaces import MetricSpace
from tests.helpers import random_space


def test_lp_counts_match_the_paper_on_a_line() -> None:
    # positions 0, 1, 3, 7, 15 (gaps double): the nearest neighbour of k >= 1 is k - 1, of 0
    # is 1. With r = 1: I(0) = {1}, I(1) = {0, 2}, I(2) = {3}, I(3) = {4}, I(4) = {}.
    space = MetricSpace.from_points([[0.0], [1.0], [3.0], [7.0], [15.0]])
    sizes = np.array([1, 2, 1, 1, 0])
    n = 5
    mech = constopt(space, 1.0, neighbours=1, fit="paper", lambdas=[0.1], formulation="full")
    lp = mech.info["lp"]
    expected = {
        "variables": n + int(sizes.sum()) + 1,  # Y, the free entries, k (Theorem 1)
        "free_entries": int(sizes.sum()),
        "rows_18": n,
        "rows_20": n,
        "rows_22": int((sizes * (sizes - 1)).sum()),  # ordered pairs within a column: 2
        "rows_25": int(sizes.sum()),  # every column has a fixed entry (its diagonal)
        "rows_26": int(sizes.sum()),
    }
    assert lp["paper_counts"] == expected
    # the full formulation solves exactly that LP
    assert lp["variables"] == expected["variables"]
    assert lp["constraints"] == 2 * n + expected["rows_22"] + 2 * expected["rows_25"]
    assert lp["lps_solved"] == 1


def test_lp_counts_follow_corollary_1_for_nearest_neighbours() -> None:
    # I_NN,r: sum_v |I(v)| = n r; (22) has sum_v |I(v)| (|I(v)| - 1) rows; |I(v)| counted
    # here independently of the library, from a plain argsort.
    space = random_space(11, 12, clustered=True)
    n, r = 12, 3
    order = np.argsort(space.distances, axis=1, kind="stable")[:, 1 : r + 1]
    sizes = np.bincount(order.ravel(), minlength=n)
    lp = constopt(space, 1.0, neighbours=r, fit="paper", lambdas=[0.1]).info["lp"]
    assert lp["paper_counts"]["variables"] == n + n * r + 1
    assert lp["paper_counts"]["rows_22"] == int((sizes * (sizes - 1)).sum())
    assert lp["paper_counts"]["rows_25"] == lp["paper_counts"]["rows_26"] == n * r
    # the fast model leaves out implied rows (22) and solves fewer
    assert lp["rows_22_solved"] <= lp["paper_counts"]["rows_22"] - lp["rows_22_implied"]



def test_merge_adds_a_forked_models_statistics_as_if_recorded_after() -> None:
    """FitStats.merge: sums, maxima, the last
    model's counts, a failure kept; the fork reports to the same callback."""
    from metricdp.lp._solve import SolveResult
    from metricdp.mechanisms.constopt.stats import FitStats

    calls: list[str] = []
    ok = SolveResult(True, 0, "Optimal", "Optimal", np.zeros(1), 1.0, 0.5, 10, 20, 30, iterations=7)
    bad = SolveResult(False, 1, "limit", "Time limit reached", None, None, 0.25, 40, 5, 6, iterations=3)
    main = FitStats(progress=lambda done, total, message: calls.append(message))
    main.record(ok)
    main.rows22, main.blocks = 1, 2
    twin = main.fork()
    assert twin.progress is main.progress and twin.lock is main.lock and twin.lps == 0
    twin.record(bad)
    twin.record(ok)
    twin.rounds, twin.rows22, twin.blocks = 4, 8, 9
    main.merge(twin)
    assert (main.lps, main.optimal, main.iterations, main.rounds) == (3, 2, 17, 4)
    assert main.seconds == 1.25
    assert (main.variables, main.constraints, main.nonzeros) == (40, 20, 30)
    assert (main.status, main.highs_status, main.failure) == (1, "Time limit reached", bad)
    assert (main.rows22, main.blocks) == (8, 9)
    assert len(calls) == 3
    empty = FitStats()
    main.merge(empty)  # a fork that solved nothing changes nothing
    assert (main.lps, main.rows22, main.blocks, main.status) == (3, 8, 9, 1)
