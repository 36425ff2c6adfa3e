"""The row pool of the worst-case constraint generation (:mod:`metricdp.lp.rowpool`):
the per-output selection by hand, and the pool's drops against HiGHS's own basis and the full LP."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.lp import core, rowpool
from metricdp.lp._solve import LPModel
from metricdp.lp.rowpool import RowPool, most_violated
from metricdp.spaces import MetricSpace


def test_most_violated_keeps_the_largest_relative_violations_per_output() -> None:
    # M for 3 inputs, 2 outputs; pairs (0,1), (1,0), (2,0) with factor 1 (rows M[u,w] <= M[v,w])
    p = np.array([[0.2, 0.8], [0.6, 0.4], [0.9, 0.1]])
    factor = np.ones((3, 3))
    pu, pv = np.array([0, 1, 2]), np.array([1, 0, 0])
    # violated rows: (1,0,w=0): (0.6-0.2)/0.6 = 2/3; (2,0,w=0): (0.9-0.2)/0.9 = 7/9; (0,1,w=1): (0.8-0.4)/0.8 = 1/2
    k, w = np.array([1, 2, 0]), np.array([0, 0, 1])
    kk, ww = most_violated(p, factor, pu, pv, k, w, 1)
    assert kk.tolist() == [2, 0] and ww.tolist() == [0, 1]  # per output: the largest, outputs in order
    kk, ww = most_violated(p, factor, pu, pv, k, w, 2)
    assert kk.tolist() == [2, 1, 0] and ww.tolist() == [0, 0, 1]  # most violated first within w = 0
    empty = np.zeros(0, np.intp)
    assert most_violated(p, factor, pu, pv, empty, empty, 3)[0].size == 0


def test_row_pool_records_adds_and_refuses_bad_deletes() -> None:
    pu, pv = np.array([0, 1]), np.array([1, 0])
    pool = RowPool(pu, pv, np.zeros((2, 2), dtype=bool), fixed=2)
    pool.add(np.array([1, 0]), np.array([0, 1]))
    assert len(pool) == 2 and pool.in_model[1, 0] and pool.in_model[0, 1]
    assert [t.tolist() for t in pool.triples()] == [[1, 0], [0, 1], [0, 1]]
    lp = LPModel()
    with pytest.raises(Exception, match="out of range"):
        lp.delete_rows([0])  # an empty model has no row 0


@pytest.mark.parametrize(("seed", "eps"), [(0, 0.3), (1, 0.7), (2, 1.5)])
def test_drops_only_basic_rows_and_reaches_the_full_optimum(
    monkeypatch: pytest.MonkeyPatch, seed: int, eps: float
) -> None:
    """With one row per output a round and drops after one slack optimum (the pool's rules at
    their most aggressive): every deleted row was basic in HiGHS's basis, no row is dropped
    twice, the rows reported are the model's, and the optimum is the full LP's to 1e-9."""
    import highspy

    space = MetricSpace.from_points(np.random.default_rng(seed).standard_normal((9, 2)))
    allowed = ~np.eye(space.n, dtype=bool)

    def raw(formulation: str):  # type: ignore[no-untyped-def]
        return core.solve_raw(space, eps, 0.0, allowed, space.distances, None, formulation=formulation,
                              time_limit=None, what="t", tiebreak=core.TIEBREAK)

    full = raw("full").result.objective
    monkeypatch.setattr(core, "ROWS_PER_OUTPUT", 1)
    monkeypatch.setattr(rowpool, "DROP_AFTER", 1)
    deleted: list[int] = []
    real = LPModel.delete_rows
    models: list[LPModel] = []

    def spy(self: LPModel, rows: np.ndarray) -> None:
        status = self.highs.getBasis().row_status
        assert all(status[int(r)] == highspy.HighsBasisStatus.kBasic for r in rows)  # the real basis
        deleted.append(len(rows))
        models.append(self)
        real(self, rows)

    monkeypatch.setattr(LPModel, "delete_rows", spy)
    fast = raw("fast")
    assert sum(deleted) > 0  # the rule was exercised
    assert fast.result.objective == pytest.approx(full, rel=1e-9)
    u, v, w = fast.rows
    assert len(u) == fast.privacy_rows == models[-1].num_rows - 2 * space.n  # the model's rows, in order
    assert len(set(zip(u.tolist(), v.tolist(), w.tolist(), strict=True))) == len(u)
    m = fast.matrix  # every privacy row holds (the scan found none violated)
    factor = np.exp(eps * space.distances)
    assert (m[:, None, :] <= factor[:, :, None] * m[None, :, :] + 1e-9).all()


def test_a_row_is_dropped_once_and_only_after_its_slack_rounds() -> None:
    class Stub:
        def __init__(self) -> None:
            self.deleted: list[list[int]] = []

        def delete_rows(self, rows: np.ndarray) -> None:
            self.deleted.append(rows.tolist())

    # one pair (0, 1), factor 2, outputs 0 and 1; M[0] = (0.1, 0.9), M[1] = (0.5, 0.5)
    p = np.array([[0.1, 0.9], [0.5, 0.5]])
    factor = np.full((2, 2), 2.0)
    pool = RowPool(np.array([0]), np.array([1]), np.zeros((1, 2), dtype=bool), fixed=1)
    pool.add(np.array([0, 0]), np.array([0, 1]))
    # row (0,1,w=0): slack 2*0.5 - 0.1 > 0; row (0,1,w=1): 2*0.5 - 0.9 = 0.1 > 0 but a nonzero dual
    dual = np.array([0.3, 0.0, -0.2])  # the fixed row, then the pool's two rows
    lp = Stub()
    assert pool.drop_slack(lp, dual, p, factor, after=2) == 0  # one slack optimum: aged, kept
    assert pool.drop_slack(lp, dual, p, factor, after=2) == 1  # two: the w = 0 row goes (model row 1)
    assert lp.deleted == [[1]] and not pool.in_model[0, 0] and pool.in_model[0, 1]
    pool.add(np.array([0]), np.array([0]))  # violated again later: back in the model
    dual = np.array([0.3, -0.2, 0.0])
    for _ in range(3):
        assert pool.drop_slack(lp, dual, p, factor, after=1) == 0  # never dropped twice
    assert len(pool) == 2
