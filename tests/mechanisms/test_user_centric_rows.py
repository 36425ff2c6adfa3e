"""user_centric_rows: the row-generation solve against the dense LP, its certificate from the active rows alone,
and memory bounded by the active rows."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.errors import ResourceLimitError, SolverTimeLimitError
from metricdp.lp import solve_lp
from metricdp.lp._solve import LOG_CAP
from metricdp.lp.certificate import ranged_bound
from metricdp.lp.deadline import Deadline
from metricdp.mechanisms import build
from metricdp.mechanisms.user_centric import user_centric, user_centric_lp
from metricdp.mechanisms.user_centric_rows import OPTIONS, certificate, solve_rows
from metricdp.spaces import MetricSpace

#: The agreement asked of the two solves: relative, on the LP optimum.
AGREE = 1e-9


def _case(k: int, seed: int, eps_per_cell: float | None) -> tuple[np.ndarray, np.ndarray, float, float | None]:
    """A k x k grid of 250 m cells, a Dirichlet(0.5) prior of ``seed`` and Q: 1.1 x EM's expected loss at eps (feasible:
    EM is eps-mDP) or, without eps, 0.4 x the blind guess's error."""
    space = MetricSpace.grid(k, k, cell=250.0)
    pi = np.random.default_rng(seed).dirichlet(np.full(space.n, 0.5))
    d = space.distances
    if eps_per_cell is None:
        return d, pi, 0.4 * float((pi @ d).min()), None
    eps = eps_per_cell / 250.0
    return d, pi, 1.1 * build("exponential", space, eps).expected_loss(pi), eps


def _dense(d: np.ndarray, pi: np.ndarray, q: float, level: float | None):
    lp = user_centric_lp(d, pi, q, level, cap=LOG_CAP)
    result = solve_lp(lp.c, lp.a, lp.row_lo, lp.row_hi, lp.col_lo, lp.col_hi, options=OPTIONS)
    assert result.status == 0, result.message
    return lp, result


@pytest.mark.parametrize("eps_per_cell", [None, 0.6, 2.0], ids=["no-eps", "eps-0.6", "eps-2"])
@pytest.mark.parametrize(("k", "seed"), [(3, 0), (3, 1), (4, 2)])
def test_row_generation_equals_the_dense_lp(k: int, seed: int, eps_per_cell: float | None) -> None:
    d, pi, q, level = _case(k, seed, eps_per_cell)
    lp, dense = _dense(d, pi, q, level)
    rows = solve_rows(d, pi, q, level, deadline=Deadline(None))
    assert rows.result.objective == pytest.approx(dense.objective, rel=AGREE)
    n = len(pi)
    x = np.r_[rows.matrix.ravel(), rows.z]
    ax = lp.a @ x  # the row-generation optimum meets every row of the FULL LP
    assert np.all(ax <= lp.row_hi + 1e-9) and np.all(ax >= lp.row_lo - 1e-9)
    held = n + 1 + len(rows.rows.order)
    assert held < lp.a.shape[0]  # fewer rows than the full LP: the point of it
    # the certificate from the active rows (duals of every other row zero) is the full LP's bound
    bound = certificate(d, pi, q, level, rows)
    assert -dense.objective * (1 - AGREE) <= bound <= -dense.objective * (1 + AGREE)
    dense_bound = -ranged_bound(lp.c, lp.a, lp.row_lo, lp.row_hi, lp.col_lo, lp.col_hi, dense.row_dual)
    assert bound == pytest.approx(dense_bound, rel=AGREE)


def test_certificate_is_a_bound_whatever_the_duals() -> None:
    """Weak duality does not trust the solver: scaled or zeroed duals still bound the optimum from above."""
    d, pi, q, level = _case(3, 4, 1.0)
    _, dense = _dense(d, pi, q, level)
    rows = solve_rows(d, pi, q, level, deadline=Deadline(None))
    for scale in (0.0, 0.5, 2.0):
        perturbed = type(rows)(rows.matrix, rows.z, _with_duals(rows.result, rows.result.row_dual * scale),
                               rows.rows, rows.rounds)
        assert certificate(d, pi, q, level, perturbed) >= -dense.objective * (1 - 1e-12)


def _with_duals(result, row_dual):
    import dataclasses

    return dataclasses.replace(result, row_dual=row_dual)


def test_random_priors_and_spaces_build_with_a_certified_gap() -> None:
    rng = np.random.default_rng(7)
    for _ in range(3):
        space = MetricSpace.from_points(rng.uniform(0, 3, size=(int(rng.integers(4, 8)), 2)))
        pi = rng.dirichlet(np.full(space.n, 0.7))
        eps = float(rng.uniform(0.5, 3.0))
        q = 1.2 * build("exponential", space, eps).expected_loss(pi)
        m = user_centric(space, eps, quality=q, prior=pi)
        _, dense = _dense(space.distances, pi, q, eps * (1 - m.info["lp"]["eta"]))
        assert m.info["certificate"]["adversary_error_bound"] >= -dense.objective * (1 - 1e-12)
        assert m.info["certificate"]["gap"] <= AGREE


def test_memory_is_checked_on_the_active_rows(monkeypatch) -> None:
    d, pi, q, level = _case(4, 0, 0.6)
    monkeypatch.setenv("METRICDP_MEMORY_LIMIT", "1KiB")
    with pytest.raises(ResourceLimitError, match=r"user-centric LP's first \d+ rows"):
        solve_rows(d, pi, q, level, deadline=Deadline(None))


def test_a_spent_deadline_is_a_time_limit_error() -> None:
    d, pi, q, level = _case(3, 0, 0.6)
    deadline = Deadline(1e-9)
    with pytest.raises(SolverTimeLimitError, match="time limit"):
        solve_rows(d, pi, q, level, deadline=deadline)


def test_each_round_is_reported() -> None:
    space = MetricSpace.grid(3, 3, cell=1.0)
    seen: list[tuple[int, str]] = []
    m = build("user-centric", space, 1.0, quality=0.9, progress=lambda done, total, line: seen.append((done, line)))
    assert [done for done, _ in seen] == list(range(1, m.info["lp"]["rounds"] + 1))
    assert all("rows held, objective" in line for _, line in seen)
