"""ConstOPTMech's fast formulation (:mod:`metricdp.mechanisms.constopt.fast`): column and
row generation reach the reference formulation's LP optima; the warm-start seed and scaling.
"""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.mechanisms.constopt import constopt
from metricdp.spaces import MetricSpace
from tests.helpers import assert_private, random_space


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_column_generation_reaches_the_full_lp_optimum(seed: int) -> None:
    # n = 60: the fast model starts from 20 outputs and prices the others in
    space = random_space(seed, 60, dim=3, clustered=seed == 1)
    fast = constopt(space, 1.0, neighbours=4)
    full = constopt(space, 1.0, neighbours=4, formulation="full")
    assert fast.info["lp"]["outputs_in_model"] < 60 <= full.info["lp"]["outputs_in_model"]
    for lam, entry in fast.info["paper"].items():
        assert entry["objective"] == pytest.approx(full.info["paper"][lam]["objective"], rel=1e-7)
    assert fast.worst_case_loss() <= full.worst_case_loss() * (1 + 1e-7)
    assert fast.info["normalised"]["certified"] and full.info["normalised"]["certified"]


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 3.0, 10.0])
def test_fast_equal_or_better_across_epsilon(epsilon: float) -> None:
    """Across the privacy range the fast paper fit is as good as the reference
    (equal or lower worst-case loss), and both pass the naive audit."""
    space = random_space(int(epsilon * 10), 9)
    fast = constopt(space, epsilon, neighbours=3, fit="paper")
    full = constopt(space, epsilon, neighbours=3, fit="paper", formulation="full")
    assert fast.worst_case_loss() <= full.worst_case_loss() * (1 + 1e-8)
    for mech in (fast, full):
        assert_private(mech)


@pytest.mark.slow
@pytest.mark.parametrize(("epsilon", "seed"), [(0.5, 0), (3.0, 0), (3.0, 1)])
def test_sides_seeds_and_dense_regime_reach_the_full_lp_optimum(epsilon: float, seed: int) -> None:
    """n = 60, so the fast model prices blocks in (and, at eps = 3 on seed 0,
    switches to every block at once); every lambda's LP optimum equals the reference's
    (measured <= 3e-14 relative) and the returned loss is equal or lower."""
    space = random_space(seed, 60, dim=3, clustered=seed == 1)
    fast = constopt(space, epsilon, neighbours=4, fit="paper")
    full = constopt(space, epsilon, neighbours=4, fit="paper", formulation="full")
    for lam, entry in fast.info["paper"].items():
        assert entry["objective"] == pytest.approx(full.info["paper"][lam]["objective"], rel=1e-9)
    assert fast.worst_case_loss() <= full.worst_case_loss() * (1 + 1e-8)
    if (epsilon, seed) == (3.0, 0):
        assert fast.info["lp"]["outputs_in_model"] == 60  # the dense regime
    else:
        assert fast.info["lp"]["outputs_in_model"] < 60
    assert_private(fast)


def _fast_model(space: MetricSpace, epsilon: float, neighbours: int):  # type: ignore[no-untyped-def]
    from metricdp.lp.deadline import Deadline
    from metricdp.mechanisms.constopt.cone import build_cone
    from metricdp.mechanisms.constopt.fast import FastModel
    from metricdp.mechanisms.constopt.replacement import free_mask
    from metricdp.mechanisms.constopt.stats import FitStats

    cone = build_cone(space.distances, free_mask(space, None, neighbours), epsilon / 2)
    return FastModel(cone, Deadline(None), FitStats())


def test_fast_model_seeds_the_next_lambda_with_its_blocks_and_sides() -> None:
    space = random_space(2, 60, dim=3)
    model = _fast_model(space, 1.0, 4)
    r = model.paper(0.001)
    assert model.present.all()  # the dense regime: the only one that seeds the next lambda
    assert r.status == 0 and model.seed is not None
    blocks, up = model.seed
    x = model.point(r.x)
    used = np.flatnonzero(x[: space.n] > 0)
    assert set(used.tolist()) <= set(blocks.tolist())
    assert not up[~model.cone.bounded].any()
    # an entry is on the upper side iff the optimum put it nearer its row (25)
    f = np.flatnonzero(model.cone.bounded & (x[model.cone.fw] > 0))
    y = x[model.cone.fw[f]]
    nearer = x[space.n + f] - model.c26[f] * y > 0.5 * model.width[f] * y
    assert np.array_equal(up[f], nearer)
    model.paper(0.1)  # a fresh model on the seed: it starts from every seeded block
    assert model.present[blocks].all()
    # both sides describe the same point: T maps the model's variables back to (Y, z)
    z = model.point(model.lp.highs.getSolution().col_value)[space.n :]  # type: ignore[union-attr]
    yw = model.point(model.lp.highs.getSolution().col_value)[model.cone.fw]  # type: ignore[union-attr]
    b = model.cone.bounded
    assert np.all(z[b] >= model.c26[b] * yw[b] * (1 - 1e-7) - 1e-9)
    assert np.all(z[b] <= model.c25[b] * yw[b] * (1 + 1e-7) + 1e-9)


def test_fast_model_scales_only_moderate_rooms_and_normalises_rows_22() -> None:
    space = random_space(5, 30, dim=2)
    moderate = _fast_model(space, 1.0, 4)
    assert moderate.scaled
    capped = _fast_model(space, 80.0 / space.diameter, 4)  # eps' d beyond LOG_CAP: rooms e^20
    assert not capped.scaled
    pairs = np.flatnonzero(~moderate.cone.implied)
    rows = moderate._pairs(pairs)
    assert rows.shape[0] == len(pairs) > 0
    assert np.allclose(abs(rows).max(axis=1).toarray().ravel(), 1.0)



def test_solve_papers_gives_the_same_models_on_one_thread_or_several() -> None:
    """The first lambda and its nearest neighbour (warm) on one model, the others
    on unseeded forks beside them, so the number of threads changes nothing (bitwise the
    same points and counts), and every one is the reference formulation's LP optimum (one
    plain HiGHS model, :func:`paper_lp`) to 1e-9."""
    from metricdp.lp.deadline import Deadline
    from metricdp.mechanisms.constopt.fast_fits import solve_papers
    from metricdp.mechanisms.constopt.reference import paper_lp
    from metricdp.mechanisms.constopt.stats import FitStats

    space = random_space(2, 60, dim=3)
    lams = (0.001, 0.1, 1.0)
    runs = []
    for workers in (1, 3):
        model = _fast_model(space, 1.0, 4)
        runs.append((model, solve_papers(model, lams, workers=workers)))
    (one, out1), (three, out3) = runs
    assert one.seed is not None and one.lam == 0.1  # the dense regime; the model ends on the warm neighbour
    for lam, (r1, x1, _), (r3, x3, _) in zip(lams, out1, out3, strict=True):
        assert r1.status == r3.status == 0 and x1 is not None and x3 is not None
        assert r1.objective == r3.objective and np.array_equal(x1, x3)
        _, ref = paper_lp(one.cone, lam, Deadline(None), FitStats())
        assert r1.objective == pytest.approx(ref.objective, rel=1e-9)
    s1, s3 = one.stats, three.stats
    assert (s1.lps, s1.optimal, s1.iterations, s1.rounds, s1.blocks) == (
        s3.lps, s3.optimal, s3.iterations, s3.rounds, s3.blocks)
    assert s1.lps >= 3 and s1.optimal == s1.lps
    assert solve_papers(_fast_model(space, 1.0, 4), ()) == []


def test_a_near_lambda_is_solved_warm_from_the_dense_optimum() -> None:
    """From a dense-regime optimum, a new lambda changes only the n coefficients of
    the rows (18) and the dual simplex goes on from the basis (no interior point, no new
    model); it reaches the reference optimum to 1e-9. Outside the dense regime it is a fresh
    solve, the same as :meth:`paper`."""
    from metricdp.lp.deadline import Deadline
    from metricdp.mechanisms.constopt.reference import paper_lp
    from metricdp.mechanisms.constopt.stats import FitStats

    space = random_space(2, 60, dim=3)
    model = _fast_model(space, 1.0, 4)
    model.paper(0.001)
    assert model.present.all()
    h = model.lp.highs  # type: ignore[union-attr]
    lps = model.stats.lps
    r = model.paper_warm(0.1)
    assert model.lp.highs is h and model.lam == 0.1 and model.stats.lps == lps + 1  # type: ignore[union-attr]
    assert h.getInfo().ipm_iteration_count == 0 and r.status == 0
    _, ref = paper_lp(model.cone, 0.1, Deadline(None), FitStats())
    assert r.objective == pytest.approx(ref.objective, rel=1e-9)
    assert model.seed is not None and np.array_equal(model.seed[1], model.sides(r.x)[1])  # seeds on

    sparse = _fast_model(random_space(0, 60, dim=3), 0.5, 4)  # few outputs released: not dense
    first = sparse.paper(0.001)
    assert first.status == 0 and not sparse.present.all()
    r = sparse.paper_warm(0.1)
    _, ref = paper_lp(sparse.cone, 0.1, Deadline(None), FitStats())
    assert r.status == 0 and r.objective == pytest.approx(ref.objective, rel=1e-9)
    again = _fast_model(random_space(0, 60, dim=3), 0.5, 4)
    assert again.paper(0.1).objective == r.objective  # the fresh solve, bitwise


@pytest.mark.parametrize("lams", [(0.0, 0.05, 1.0), (1.0, 0.0, 0.001, 0.5)])
def test_solve_papers_warm_neighbour_from_or_to_a_zero_penalty(lams: tuple[float, ...]) -> None:
    """A penalty 0 leaves its coefficients out of the model; the warm start adds or removes
    them (n coefficient changes), in any order of the lambdas: each result is the
    reference optimum to 1e-9 and comes back in the order asked."""
    from metricdp.lp.deadline import Deadline
    from metricdp.mechanisms.constopt.fast_fits import solve_papers
    from metricdp.mechanisms.constopt.reference import paper_lp
    from metricdp.mechanisms.constopt.stats import FitStats

    model = _fast_model(random_space(2, 60, dim=3), 1.0, 4)
    out = solve_papers(model, lams)
    assert len(out) == len(lams)
    for lam, (r, x, _) in zip(lams, out, strict=True):
        _, ref = paper_lp(model.cone, lam, Deadline(None), FitStats())
        assert r.status == 0 and x is not None and r.objective == pytest.approx(ref.objective, rel=1e-9)


def test_dense_regime_models_are_solved_by_interior_point_and_crossover_to_a_vertex() -> None:
    """A model with every block (here seeded by the previous lambda) is solved by
    IPX and its crossover, not the dual simplex; the result is a basic solution (HiGHS holds
    a valid basis) at the reference formulation's optimum."""
    from metricdp.lp.deadline import Deadline
    from metricdp.mechanisms.constopt.reference import paper_lp
    from metricdp.mechanisms.constopt.stats import FitStats

    space = random_space(2, 60, dim=3)
    model = _fast_model(space, 1.0, 4)
    model.paper(0.001)
    assert model.seed is not None
    r = model.paper(0.1)
    h = model.lp.highs  # type: ignore[union-attr]
    assert r.status == 0 and model.present.all()
    assert h.getInfo().ipm_iteration_count > 0
    assert h.getBasis().valid
    _, ref = paper_lp(model.cone, 0.1, Deadline(None), FitStats())
    assert r.objective == pytest.approx(ref.objective, rel=1e-9)


def test_fork_shares_the_coefficients_and_owns_its_state() -> None:
    from metricdp.mechanisms.constopt.stats import FitStats

    model = _fast_model(random_space(3, 20, dim=2), 1.0, 3)
    model.paper(0.1)
    twin = model.fork(FitStats())
    assert twin.dza is model.dza and twin.cone is model.cone and twin.seed is model.seed
    assert twin.lp is None and twin.kind == "" and not twin.present.any() and (twin.hcol == -1).all()
    for name in ("up", "rcz", "in_model", "present", "hcol"):
        assert not np.shares_memory(getattr(twin, name), getattr(model, name)), name
    assert model.lp is not None and model.present.any()  # the original is untouched


def test_a_failed_interior_point_falls_back_to_the_dual_simplex(monkeypatch: pytest.MonkeyPatch) -> None:
    """IPX stopped short (here: one iteration, no crossover) is not a failed LP:
    the dense model is solved again by the dual simplex, to the reference optimum."""
    from metricdp.lp.deadline import Deadline
    from metricdp.mechanisms.constopt import fast
    from metricdp.mechanisms.constopt.reference import paper_lp
    from metricdp.mechanisms.constopt.stats import FitStats

    monkeypatch.setattr(fast, "DENSE_OPTIONS", {"solver": "ipm", "run_crossover": "off", "ipm_iteration_limit": 1})
    model = _fast_model(random_space(2, 60, dim=3), 1.0, 4)
    model.paper(0.001)
    r = model.paper(0.1)  # seeded: every block from the start, so the interior point first
    h = model.lp.highs  # type: ignore[union-attr]
    assert r.status == 0 and model.present.all() and model.stats.failure is None
    assert h.getInfo().simplex_iteration_count > 0
    _, ref = paper_lp(model.cone, 0.1, Deadline(None), FitStats())
    assert r.objective == pytest.approx(ref.objective, rel=1e-9)


def test_concurrent_models_follow_the_cpus_the_count_and_the_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    from metricdp.mechanisms.constopt import fast_fits

    model = _fast_model(random_space(3, 20, dim=2), 1.0, 3)
    per_model = fast_fits.MODEL_BYTES_PER_NONZERO * (model.dza.nnz + model.dzb.nnz)
    monkeypatch.setattr(fast_fits, "memory_limit", lambda: 4.0 * 3 * per_model)  # a quarter holds 3 models
    assert fast_fits.concurrent_models(model, 2, 8) == 2  # the count
    assert fast_fits.concurrent_models(model, 5, 2) == 2  # the workers asked for
    assert fast_fits.concurrent_models(model, 5, 8) == 3  # the memory
    monkeypatch.setattr(fast_fits, "memory_limit", lambda: 1.0)
    assert fast_fits.concurrent_models(model, 5, 8) == 1  # never below one
