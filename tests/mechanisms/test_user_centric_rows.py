"""user_centric_rows: the row-generation solve against the dense LP, its certificate from the active rows alone,
and memory bounded by the active rows."""

from __future__ import annotations

import dataclasses

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


def _case(k: int, seed: int, eps_per_cell: float | None, below: float | None = None
          ) -> tuple[np.ndarray, np.ndarray, float, float | None]:
    """A k x k grid of 250 m cells, a Dirichlet(0.5) prior of ``seed`` and Q: ``below`` x the blind guess's error E0
    when given, else 1.1 x EM's expected loss at eps (feasible: EM is eps-mDP) or, without eps, 0.4 x E0."""
    space = MetricSpace.grid(k, k, cell=250.0)
    pi = np.random.default_rng(seed).dirichlet(np.full(space.n, 0.5))
    d = space.distances
    eps = None if eps_per_cell is None else eps_per_cell / 250.0
    if below is not None or eps is None:
        return d, pi, (0.4 if below is None else below) * float((pi @ d).min()), eps
    return d, pi, 1.1 * build("exponential", space, eps).expected_loss(pi), eps


def _dense(d: np.ndarray, pi: np.ndarray, q: float, level: float | None):
    lp = user_centric_lp(d, pi, q, level, cap=LOG_CAP)
    result = solve_lp(lp.c, lp.a, lp.row_lo, lp.row_hi, lp.col_lo, lp.col_hi, options=OPTIONS)
    assert result.status == 0, result.message
    return lp, result


#: Cases whose Q is below the blind guess's error E0 with eps (the generation's rounds; at 1.1 x EM's loss, eps 0.6
#: per cell, every grid above has E0 <= Q and is solved by the blind guess in one round).
BELOW_E0 = [(4, 2, 0.6, 0.8), (3, 0, 2.0, 0.5), (4, 2, 2.0, 0.5), (3, 1, 2.0, 0.95)]


@pytest.mark.parametrize(
    ("k", "seed", "eps_per_cell", "below"),
    [(k, seed, eps, None) for eps in (None, 0.6, 2.0) for k, seed in [(3, 0), (3, 1), (4, 2)]] + BELOW_E0,
)
@pytest.mark.parametrize("substitute", [True, False], ids=["substituted", "plain"])
def test_row_generation_equals_the_dense_lp(k: int, seed: int, eps_per_cell: float | None, below: float | None,
                                            substitute: bool) -> None:
    d, pi, q, level = _case(k, seed, eps_per_cell, below)
    lp, dense = _dense(d, pi, q, level)
    rows = solve_rows(d, pi, q, level, deadline=Deadline(None), substitute=substitute)
    blind = q >= float((pi @ d).min())  # the constant mechanism, no substitution (test below)
    assert (rows.kernel is not None) == (substitute and level is not None and not blind)
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
    d, pi, q, level = _case(3, 4, 1.0, below=0.7)
    _, dense = _dense(d, pi, q, level)
    for substitute in (True, False):
        rows = solve_rows(d, pi, q, level, deadline=Deadline(None), substitute=substitute)
        for scale in (0.0, 0.5, 2.0, -1.0):
            perturbed = dataclasses.replace(
                rows, result=dataclasses.replace(rows.result, row_dual=rows.result.row_dual * scale))
            assert certificate(d, pi, q, level, perturbed) >= -dense.objective * (1 - 1e-12)


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


@pytest.mark.parametrize("eps_per_cell", [None, 0.6])
def test_quality_at_the_blind_error_gives_the_constant_mechanism_in_one_round(eps_per_cell: float | None) -> None:
    """Q = E0 exactly: the constant mechanism on the blind guess is optimal (AE <= E0 always) and one solve certifies
    it; just below E0 the generation runs its rounds and the optimum is Q (AE <= Q), the dense LP's in both cases."""
    d, pi, e0, level = _case(4, 3, eps_per_cell, below=1.0)
    blind = int(np.argmin(pi @ d))
    at = solve_rows(d, pi, e0, level, deadline=Deadline(None))
    assert at.rounds == 1
    assert np.array_equal(at.matrix, np.eye(len(pi))[[blind] * len(pi)])  # every row: the blind guess
    assert at.z.sum() == pytest.approx(e0, rel=1e-15)
    assert certificate(d, pi, e0, level, at) == pytest.approx(e0, rel=AGREE)
    assert -_dense(d, pi, e0, level)[1].objective == pytest.approx(e0, rel=AGREE)
    q = e0 * (1 - 1e-3)
    below = solve_rows(d, pi, q, level, deadline=Deadline(None))
    assert not np.allclose(below.matrix, at.matrix)
    assert below.result.objective == pytest.approx(_dense(d, pi, q, level)[1].objective, rel=AGREE)


def test_two_points_at_the_blind_error() -> None:
    """Hand case: two points 1 apart, prior (0.7, 0.3): the blind guess is point 0 with E0 = 0.3; at Q = 0.3 every
    mechanism has AE <= 0.3 and reporting point 0 always attains it (0-mDP, so any eps)."""
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    pi = np.array([0.7, 0.3])
    m = user_centric(MetricSpace.from_distances(d), 0.5, quality=0.3, prior=pi)
    assert np.array_equal(m.matrix, [[1.0, 0.0], [1.0, 0.0]])
    assert m.info["adversary_error"] == pytest.approx(0.3, rel=1e-15)
    assert m.info["certificate"]["adversary_error_bound"] == pytest.approx(0.3, rel=1e-9)
    assert m.info["lp"]["rounds"] == 1
