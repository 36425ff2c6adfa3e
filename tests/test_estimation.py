"""Estimators (IBU, inversion), the simplex projection and EMD.

The E_d calibration is tested in tests/mechanisms/test_distance_calibration.py.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import wasserstein_distance

import metricdp.estimation as estimation
from metricdp.errors import ValidationError
from metricdp.estimation import (
    counts_from_indices,
    emd,
    expected_emd,
    ibu,
    matrix_inversion,
    project_simplex,
)
from metricdp.mechanisms.exponential import exponential_matrix
from metricdp.mechanisms.krr import krr
from metricdp.spaces import MetricSpace
from tests.helpers import random_space

# A 2-point symmetric channel: Pr[y = x] = 3/4.
M2 = np.array([[0.75, 0.25], [0.25, 0.75]])
LINE = MetricSpace.from_points([[0.0], [1.0], [3.0]])  # d = |i - j| on {0, 1, 3}


def test_doctests() -> None:
    assert doctest.testmod(estimation).failed == 0


# ----------------------------------------------------------------------------- IBU
def test_ibu_recovers_known_distribution_from_expected_counts() -> None:
    # Exponential mechanism on a 4-point line, a distribution with every mass > 0.
    d = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
    m = exponential_matrix(d, 2.0)
    truth = np.array([0.1, 0.4, 0.2, 0.3])
    res = ibu(750 * truth @ m, m, tol=1e-14, max_iter=100_000)
    assert res.converged
    np.testing.assert_allclose(res.estimate, truth, atol=1e-6)


@given(seed=st.integers(0, 10_000), n=st.integers(2, 6))
def test_ibu_recovers_random_distributions(seed: int, n: int) -> None:
    space = random_space(seed, n)
    g = np.random.default_rng(seed)
    truth = g.dirichlet(np.ones(n)) * 0.9 + 0.1 / n  # bounded away from the boundary
    m = exponential_matrix(space.distances, 6.0 / space.d_min)
    res = ibu(truth @ m, m, tol=1e-15, max_iter=200_000)
    np.testing.assert_allclose(res.estimate, truth, atol=1e-6)


def test_ibu_two_point_closed_form_on_the_boundary() -> None:
    # The MLE of pi_0 for this channel is clip((q_0 - 1/4) / (1/2), 0, 1): q_0 = 0.1 gives
    # 0 (the unbiased inversion would be -0.3). Near pi_0 = 0 an update multiplies pi_0 by
    # 3 q_0 + q_1 / 3 = 0.6, so IBU converges linearly.
    res = ibu([10.0, 90.0], M2, tol=1e-14)
    assert res.converged
    np.testing.assert_allclose(res.estimate, [0.0, 1.0], atol=1e-12)
    # Interior: q_0 = 0.6 -> pi_0 = 0.7.
    np.testing.assert_allclose(ibu([60, 40], M2, tol=1e-14).estimate, [0.7, 0.3], atol=1e-10)


def test_ibu_batch_equals_rows_and_stays_in_simplex() -> None:
    g = np.random.default_rng(3)
    space = random_space(3, 6)
    m = exponential_matrix(space.distances, 2.0)
    counts = g.integers(0, 20, size=(5, 6)).astype(float)
    counts[:, 0] += 1
    batch = ibu(counts, m, tol=1e-10)
    assert batch.estimate.shape == (5, 6) and batch.iterations.shape == (5,)
    for row, est, it in zip(counts, batch.estimate, batch.iterations, strict=True):
        single = ibu(row, m, tol=1e-10)
        np.testing.assert_allclose(est, single.estimate, atol=1e-14)
        assert single.iterations == it
    assert np.all(batch.estimate >= 0)
    np.testing.assert_allclose(batch.estimate.sum(axis=1), 1.0, atol=1e-12)


def test_ibu_iteration_cap_reports_not_converged() -> None:
    res = ibu([10.0, 90.0], M2, tol=1e-300, max_iter=7)
    assert res.iterations == 7 and res.converged is False


def test_ibu_accepts_a_mechanism() -> None:
    mech = krr(LINE, ldp_epsilon=1.0)
    a = ibu([3, 5, 2], mech, tol=1e-12).estimate
    b = ibu([3, 5, 2], mech.matrix, tol=1e-12).estimate
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("counts", "matrix", "match"),
    [
        ([1.0, -1.0], M2, "counts must be finite and non-negative"),
        ([1.0, np.nan], M2, "counts must be finite"),
        ([0.0, 0.0], M2, "counts has no reports"),
        ([1.0, 2.0, 3.0], M2, r"counts must have shape \(2,\)"),
        ([1.0, 1.0], [[1.0, 0.0], [1.0, 0.0]], "output 1 was reported but the mechanism never releases it"),
        ([1.0, 1.0], [[0.5, 0.6], [0.5, 0.5]], "row 0 of matrix sums to"),
        ([1.0, 1.0], [[1.5, -0.5], [0.5, 0.5]], r"matrix has a negative probability at \(0, 1\): -0.5"),
    ],
)
def test_ibu_bad_input_names_the_culprit(counts, matrix, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        ibu(counts, matrix)


def test_ibu_bad_tolerance() -> None:
    with pytest.raises(ValidationError, match="tol"):
        ibu([1, 1], M2, tol=0.0)
    with pytest.raises(ValidationError, match="max_iter"):
        ibu([1, 1], M2, max_iter=0)
    for huge in (2**62 + 1, 10**29, 1e30):  # past the compiled loop's int64 counter: one error, not a crash
        with pytest.raises(ValidationError, match=r"max_iter must be <= 4611686018427387904"):
            ibu([1, 1], M2, max_iter=huge)


# ----------------------------------------------------------------------------- inversion
def test_matrix_inversion_recovers_expected_counts_and_projects() -> None:
    d = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
    m = exponential_matrix(d, 1.0)
    truth = np.array([0.1, 0.4, 0.2, 0.3])
    np.testing.assert_allclose(matrix_inversion(100 * truth @ m, m), truth, atol=1e-12)
    # q = (0.1, 0.9): q M^-1 = (-0.3, 1.3), projected to (0, 1).
    np.testing.assert_allclose(matrix_inversion([1.0, 9.0], M2), [0.0, 1.0], atol=1e-15)


def test_matrix_inversion_refuses_singular_and_rectangular() -> None:
    with pytest.raises(ValidationError, match="singular"):
        matrix_inversion([1.0, 1.0], [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ValidationError, match="square"):
        matrix_inversion([1.0, 1.0], [[0.5, 0.5]])


def test_project_simplex_hand_computed() -> None:
    # theta = (0.8 + 0.5 - 1) / 2 = 0.15.
    np.testing.assert_allclose(project_simplex([0.5, 0.8, -0.1]), [0.35, 0.65, 0.0], atol=1e-15)
    np.testing.assert_allclose(project_simplex([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5], atol=1e-15)
    np.testing.assert_allclose(project_simplex([5.0, 0.0]), [1.0, 0.0])


@given(seed=st.integers(0, 10_000), n=st.integers(1, 8))
def test_project_simplex_is_the_closest_point(seed: int, n: int) -> None:
    g = np.random.default_rng(seed)
    v = g.normal(0, 2, size=n)
    w = project_simplex(v)
    assert np.all(w >= 0) and math.isclose(w.sum(), 1.0, abs_tol=1e-12)
    others = g.dirichlet(np.ones(n), size=200)
    assert np.all(np.linalg.norm(others - v, axis=1) >= np.linalg.norm(w - v) - 1e-12)


# ----------------------------------------------------------------------------- EMD
@pytest.mark.parametrize(
    ("p", "q", "value"),
    [
        # 1-D: EMD = integral of |F_p - F_q|; on {0, 1, 3} the gaps are 1 and 2.
        ([0.5, 0.5, 0.0], [0.0, 0.5, 0.5], 0.5 * 1 + 0.5 * 2),
        ([1.0, 0.0, 0.0], [0.0, 0.0, 1.0], 3.0),
        ([0.2, 0.5, 0.3], [0.6, 0.1, 0.3], 0.4 * 1 + 0.0 * 2),
        ([0.2, 0.5, 0.3], [0.2, 0.5, 0.3], 0.0),
    ],
)
def test_emd_hand_computed_on_a_three_point_line(p, q, value: float) -> None:
    assert emd(p, q, LINE) == pytest.approx(value, abs=1e-12)
    assert emd(p, q, LINE.distances) == pytest.approx(value, abs=1e-12)


@given(seed=st.integers(0, 10_000), n=st.integers(2, 12))
def test_emd_matches_the_one_dimensional_formula(seed: int, n: int) -> None:
    g = np.random.default_rng(seed)
    x = np.sort(g.normal(size=n))
    p, q = g.dirichlet(np.ones(n)), g.dirichlet(np.ones(n))
    d = np.abs(np.subtract.outer(x, x))
    assert emd(p, q, d) == pytest.approx(wasserstein_distance(x, x, p, q), rel=1e-9, abs=1e-12)


def test_emd_rectangular_ground_cost() -> None:
    # Two sources at 0 and 1 to one sink at 3.
    assert emd([0.5, 0.5], [1.0], [[3.0], [2.0]]) == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("p", "q", "d", "match"),
    [
        ([0.5, 0.5], [0.5, 0.5, 0.0], LINE.distances, r"p must have shape \(3,\)"),
        ([0.5, 0.5, 0.0], [0.5, 0.6, 0.0], LINE.distances, "q sums to"),
        ([0.5, 0.5, 0.0], [1.5, -0.5, 0.0], LINE.distances, "q is negative at index 1"),
        ([0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [[0.0, -1.0, 1.0]] * 3, r"distances must be finite and >= 0"),
        ([0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 1.0, 2.0], "distances must be a numeric 2-d matrix"),
    ],
)
def test_emd_bad_input_names_the_culprit(p, q, d, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        emd(p, q, d)


def test_expected_emd_is_seeded_and_orders_mechanisms() -> None:
    space = MetricSpace.grid(3, 3, 1.0)
    data = np.array([0, 0, 1, 4, 4, 4, 8, 2, 2, 5] * 5)
    noisy, sharp = krr(space, ldp_epsilon=0.5), krr(space, ldp_epsilon=8.0)
    a = expected_emd(noisy, data, repetitions=6, rng=1)
    b = expected_emd(noisy, data, repetitions=6, rng=1)
    np.testing.assert_array_equal(a.values, b.values)
    assert a.mean == pytest.approx(a.values.mean()) and a.stderr > 0
    c = expected_emd(sharp, data, repetitions=6, rng=1)
    assert c.mean < a.mean
    inv = expected_emd(sharp, data, repetitions=2, rng=2, method="inversion")
    assert inv.values.shape == (2,) and np.all(inv.values >= 0)
    with pytest.raises(ValidationError, match="method"):
        expected_emd(sharp, data, repetitions=2, rng=2, method="magic")


@pytest.mark.slow
@pytest.mark.parametrize("m", [2, 12])
def test_expected_emd_with_a_separate_output_set(m: int) -> None:
    """Reports are output indices in 0..m-1: m > n was a raw numpy reshape error (and rows of the
    repetitions were mixed), m < n a counts-shape error."""
    import warnings

    from metricdp.errors import PrivacyLeakWarning
    from metricdp.mechanisms.exponential import exponential
    from metricdp.outputs import OutputSet

    space = MetricSpace.from_points(np.random.default_rng(0).random((5, 2)))
    outs = OutputSet.from_points(space, np.random.default_rng(1).random((m, 2)))
    mech = exponential(space, 1.0, outputs=outs)
    data = np.array([0, 1, 2, 3, 4, 0, 0])
    got = expected_emd(mech, data, repetitions=3, rng=7)
    # the same pipeline by hand: one batch of draws, per-repetition counts over the m outputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        reports = mech.sample(np.tile(data, 3), np.random.default_rng(7))
    truth = np.bincount(data, minlength=5) / data.size
    for r in range(3):
        counts = np.bincount(reports[r * data.size : (r + 1) * data.size], minlength=m).astype(np.float64)
        assert got.values[r] == pytest.approx(emd(ibu(counts, mech.matrix).estimate, truth, space.distances), abs=1e-9)


def test_counts_from_indices() -> None:
    np.testing.assert_array_equal(counts_from_indices(np.array([0, 2, 2]), 4), [1, 0, 2, 0])
    with pytest.raises(ValidationError, match=r"report index 4 is outside 0\.\.3"):
        counts_from_indices(np.array([4]), 4)


def test_ibu_runs_the_numpy_dense_products_on_one_blas_thread(monkeypatch):
    # without numba, inside the loop every BLAS pool is limited to IBU_BLAS_THREADS (from 2 here);
    # afterwards they are given back
    import threadpoolctl

    from metricdp import _ibu_kernels

    seen: list[int] = []
    original = estimation._ibu_numpy

    def spy(*args, **kwargs):
        seen.extend(p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas")
        return original(*args, **kwargs)

    monkeypatch.setattr(_ibu_kernels, "KERNELS", None)
    monkeypatch.setattr(estimation, "_ibu_numpy", spy)
    m = np.array([[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]])
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        res = estimation.ibu([30.0, 40.0, 30.0], m)
        after = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    assert before and set(before) == {2}
    assert seen and set(seen) == {estimation.IBU_BLAS_THREADS} == {1}
    assert after == before
    assert res.converged


def test_ibu_on_a_krr_channel_leaves_the_blas_pools_alone(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(estimation, "blas_threads", lambda limit: calls.append(limit))
    m = np.full((3, 3), 0.25)
    np.fill_diagonal(m, 0.5)
    estimation.ibu([30.0, 40.0, 30.0], m)
    assert calls == []


def test_compiled_dense_ibu_calls_no_blas(monkeypatch):
    # the compiled dense kernel reads M in its own loop: no BLAS pool to bound (and no threadpoolctl call)
    from metricdp import _ibu_kernels

    if _ibu_kernels.KERNELS is None:
        pytest.skip("numba not installed")
    calls: list[int] = []
    monkeypatch.setattr(estimation, "blas_threads", lambda limit: calls.append(limit))
    m = np.array([[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]])
    res = estimation.ibu([30.0, 40.0, 30.0], m)
    assert calls == [] and res.converged


def test_ibu_flushes_subnormal_iterates_on_every_path(monkeypatch):
    # a distance channel whose reports all sit at one end: the far categories' mass falls geometrically and
    # passes the smallest normal double within a few thousand updates; both loops set it to exactly 0
    # (never a subnormal) and agree to 1e-12
    from metricdp import _ibu_kernels

    x = np.arange(30.0)
    m = np.exp(-np.abs(x[:, None] - x[None, :]) / 8)
    m /= m.sum(axis=1, keepdims=True)
    counts = np.zeros(30)
    counts[:10] = np.arange(10, 0, -1)  # without the floor: 3 to 5 subnormal entries after 2,000 to 5,000 updates
    runs = [ibu(counts, m, tol=1e-300, max_iter=3000)]
    monkeypatch.setattr(_ibu_kernels, "KERNELS", None)
    runs.append(ibu(counts, m, tol=1e-300, max_iter=3000))
    for r in runs:
        est = r.estimate
        assert not ((est > 0) & (est < estimation.IBU_FLOOR)).any()
        assert (est == 0).any()
    assert np.abs(runs[0].estimate - runs[1].estimate).max() <= 1e-12


def test_ibu_threads_follow_the_cap_the_cores_and_the_crossover(monkeypatch):
    monkeypatch.setattr(estimation.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3}, raising=False)
    big = estimation.IBU_THREADS_MIN_ENTRIES
    assert estimation._ibu_threads(big - 1) == 1
    assert estimation._ibu_threads(big) == estimation.IBU_THREADS == 2
    monkeypatch.setattr(estimation.os, "sched_getaffinity", lambda _pid: {3}, raising=False)
    assert estimation._ibu_threads(big) == 1  # one core available: no second thread
    monkeypatch.setattr(estimation.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(estimation, "IBU_THREADS", 1)
    assert estimation._ibu_threads(10 * big) == 1


def test_idle_ibu_helper_threads_cost_no_cpu_and_stop():
    # between updates a helper blocks on a lock: a team that waits costs no CPU, and leaving it stops its threads
    import threading
    import time

    from metricdp import _ibu_kernels

    if _ibu_kernels.KERNELS is None:
        pytest.skip("numba not installed")
    m = np.random.default_rng(1).random((12, 12))
    m /= m.sum(axis=1, keepdims=True)
    q = np.random.default_rng(2).random(12)
    q /= q.sum()
    with _ibu_kernels.DenseTeam(m, (4, 8)) as team:
        assert team.run(np.full(12, 1 / 12), q, 1e-9, estimation.IBU_FLOOR, 50)[1] > 1
        assert sum(t.name == "metricdp-ibu" for t in threading.enumerate()) == 2
        cpu = time.process_time()
        time.sleep(0.3)
        assert time.process_time() - cpu < 0.03  # two spinning threads would take about 0.6 s
    assert not any(t.name == "metricdp-ibu" for t in threading.enumerate())


def test_dense_ibu_runs_on_two_threads_from_the_crossover_and_agrees_with_one(monkeypatch):
    from metricdp import _ibu_kernels

    if _ibu_kernels.KERNELS is None:
        pytest.skip("numba not installed")
    teams: list[tuple[int, ...]] = []
    team_class = _ibu_kernels.DenseTeam

    def spy(m, bounds=()):
        teams.append(bounds)
        return team_class(m, bounds)

    g = np.random.default_rng(3)
    m = g.random((60, 60)) ** 2
    m /= m.sum(axis=1, keepdims=True)
    counts = g.integers(0, 30, size=(2, 60)).astype(float)
    monkeypatch.setattr(_ibu_kernels, "DenseTeam", spy)
    monkeypatch.setattr(estimation.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(estimation, "IBU_THREADS_MIN_ENTRIES", 3601)
    one = ibu(counts, m, tol=1e-13, max_iter=300)
    assert teams == []  # below the crossover: the one-thread kernel
    monkeypatch.setattr(estimation, "IBU_THREADS_MIN_ENTRIES", 3600)
    two = ibu(counts, m, tol=1e-13, max_iter=300)
    assert teams == [(32,)]  # one team for the batch, two blocks
    assert np.abs(two.estimate - one.estimate).max() <= 1e-12
    assert np.array_equal(ibu(counts, m, tol=1e-13, max_iter=300).estimate, two.estimate)
