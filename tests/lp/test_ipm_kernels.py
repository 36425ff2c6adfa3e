"""The compiled passes of the interior-point method (lp._ipm_kernels) against the numpy reference.

Oracle: the numpy code of lp.ipm (the same formulas written with einsum and broadcasting),
run by setting ``ipm_newton.KERNELS`` to None; and, for the whole method, the numpy run's result.
"""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.lp import ipm, ipm_newton
from metricdp.lp._ipm_kernels import KERNELS

pytestmark = pytest.mark.skipif(KERNELS is None, reason="numba not installed")
ipm.load_kernels()


def test_kernels_are_loaded_on_the_first_solve_and_used():
    # the comparisons below are only meaningful when lp.ipm really runs the kernels
    assert ipm_newton.KERNELS is KERNELS


def _instance(seed: int, n: int, m: int, level: float = 0.7, worst: bool = False):
    g = np.random.default_rng(seed)
    pts = g.random((n, 2))
    d = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=2))
    allowed = g.random((n, n)) < 0.8  # some pairs not imposed: the mask matters
    loss = g.random((n, m))
    prior = g.dirichlet(np.full(n, 0.5))
    return ipm._LP(d, level, allowed, loss, None if worst else prior), g


@pytest.fixture
def numpy_only(monkeypatch):
    def run(fn, *args):
        monkeypatch.setattr(ipm_newton, "KERNELS", None)
        try:
            return fn(*args)
        finally:
            monkeypatch.setattr(ipm_newton, "KERNELS", KERNELS)

    return run


@pytest.mark.parametrize(("seed", "n", "m"), [(0, 5, 5), (1, 9, 9), (2, 7, 4), (3, 6, 11)])
def test_products_match_numpy(seed, n, m, numpy_only):
    lp, g = _instance(seed, n, m)
    x = g.random((n, m))
    q = g.standard_normal((m, n, n)) * lp.mask
    np.testing.assert_allclose(lp.gx(x), numpy_only(lp.gx, x), rtol=0, atol=1e-14)
    np.testing.assert_allclose(lp.gtz(q), numpy_only(lp.gtz, q), rtol=0, atol=1e-13)
    # a zero outside the kept rows, whatever q holds there
    q2 = q + g.standard_normal((m, n, n)) * lp.unmask
    np.testing.assert_allclose(lp.gtz(q2), numpy_only(lp.gtz, q), rtol=0, atol=1e-13)
    assert np.all(lp.gx(x)[:, ~lp.keep] == 0)


@pytest.mark.parametrize(("seed", "n", "m"), [(4, 5, 5), (5, 8, 8), (6, 6, 3)])
def test_block_solve_and_operator_match_numpy(seed, n, m, numpy_only):
    lp, g = _instance(seed, n, m)
    d = (g.random((m, n, n)) + 0.1) * lp.mask  # z / s: 0 on the rows left out
    dx = g.random((n, m)) + 0.1
    fac = numpy_only(ipm._Factor, lp, d, dx, np.zeros(0))
    f = g.standard_normal((n, m))
    np.testing.assert_allclose(fac.hop(f), numpy_only(fac.hop, f), rtol=1e-12, atol=1e-12)
    h = fac.hinv(f)
    np.testing.assert_allclose(h, numpy_only(fac.hinv, f), rtol=1e-10, atol=1e-12)
    # hinv inverts the (regularised) operator: H (H^-1 f) = f up to the regularisation
    np.testing.assert_allclose(fac.hop(h), f, rtol=0, atol=1e-8 * np.abs(f).max())


@pytest.mark.parametrize("residuals", [True, False])
def test_direction_matches_numpy(residuals, numpy_only):
    lp, g = _instance(7, 7, 7)
    n, m = lp.n, lp.m
    s = np.where(lp.mask > 0, g.random((m, n, n)) + 0.05, 1.0)
    z = (g.random((m, n, n)) + 0.05) * lp.mask
    p = ipm._Point(g.random((n, m)) + 0.05, s, g.standard_normal(n), z, g.random((n, m)) + 0.05, 0.0,
                   np.zeros(0), np.zeros(0))
    r = ipm._residuals(lp, p)
    fac = ipm._Factor(lp, p.z / p.s, p.zx / p.x, np.zeros(0))
    rc = g.standard_normal((m, n, n)) * 1e-2 * lp.mask
    rcx = g.standard_normal((n, m)) * 1e-2
    got = ipm._direction(lp, p, r, fac, rc, rcx, np.zeros(0), residuals=residuals)
    want = numpy_only(lambda: ipm._direction(lp, p, r, fac, rc, rcx, np.zeros(0), residuals=residuals))
    for a, b in ((got.x, want.x), (got.s, want.s), (got.z, want.z), (got.zx, want.zx), (got.y, want.y)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    # the kernel's ratio tests are the numpy ones
    zpad = p.z + lp.unmask
    assert got.lows is not None
    assert ipm._lengths(p, zpad, got) == pytest.approx(ipm._lengths(p, zpad, ipm._Step(
        got.x, got.s, got.y, got.z, got.zx, got.t, got.sl, got.zl)), rel=1e-12)


@pytest.mark.parametrize("prior", [True, False])
def test_whole_method_matches_numpy(prior, numpy_only):
    g = np.random.default_rng(8)
    n = 7
    pts = g.random((n, 2))
    d = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=2))
    pi = g.dirichlet(np.full(n, 0.5)) if prior else None
    allowed = ~np.eye(n, dtype=bool)
    got = ipm.solve_ipm(d, 2.0, allowed, d, pi, tol=1e-9)
    want = numpy_only(lambda: ipm.solve_ipm(d, 2.0, allowed, d, pi, tol=1e-9))
    assert got.converged and want.converged
    assert got.objective == pytest.approx(want.objective, rel=1e-8)


def test_factor_blocks_and_corrector_match_numpy(numpy_only):
    lp, g = _instance(9, 6, 6)
    n, m = lp.n, lp.m
    s = np.where(lp.mask > 0, g.random((m, n, n)) + 0.05, 1.0)
    z = (g.random((m, n, n)) + 0.05) * lp.mask
    p = ipm._Point(g.random((n, m)) + 0.05, s, g.standard_normal(n), z, g.random((n, m)) + 0.05, 0.0,
                   np.zeros(0), np.zeros(0))
    d, dx = p.z / p.s, p.zx / p.x
    fac = ipm._Factor(lp, d, dx, np.zeros(0))
    ref = numpy_only(ipm._Factor, lp, d, dx, np.zeros(0))
    np.testing.assert_allclose(fac.cinv, ref.cinv, rtol=1e-10, atol=1e-12)
    r = ipm._residuals(lp, p)
    step = numpy_only(lambda: ipm._direction(lp, p, r, ref, -p.s * p.z, -p.x * p.zx, np.zeros(0)))
    zpad = p.z + lp.unmask
    got = ipm._gondzio(lp, p, zpad, r, fac, step, 0.3, 0.4, 1e-2)
    want = numpy_only(ipm._gondzio, lp, p, zpad, r, ref, step, 0.3, 0.4, 1e-2)
    for a, b in ((got[0].s, want[0].s), (got[0].z, want[0].z), (got[0].x, want[0].x)):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-11)
    assert got[1:] == pytest.approx(want[1:], rel=1e-10)


@pytest.mark.parametrize(("seed", "n", "m", "worst"), [(10, 6, 6, False), (11, 7, 4, True), (12, 5, 9, False)])
def test_blocks_from_z_and_s_and_the_residual_pass_match_numpy(seed, n, m, worst, numpy_only):
    # the compiled block build divides z by s as it reads; the numpy one is given z / s
    lp, g = _instance(seed, n, m, worst=worst)
    s = np.where(lp.mask > 0, g.random((m, n, n)) + 0.05, 1.0)
    z = (g.random((m, n, n)) + 0.05) * lp.mask
    dx = g.random((n, m)) + 0.05
    dl = g.random(n) + 0.1 if worst else np.zeros(0)
    fac = ipm._Factor(lp, z, dx, dl, slack=s)
    ref = numpy_only(ipm._Factor, lp, z / s, dx, dl)
    np.testing.assert_allclose(fac.cinv, ref.cinv, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(fac.d, z / s)  # formed on demand, for the refinement
    ref2 = numpy_only(lambda: ipm._Factor(lp, z, dx, dl, slack=s))  # numpy given z and s: divides first
    np.testing.assert_array_equal(ref2.cinv, ref.cinv)
    f, e = g.standard_normal((n, m)), g.standard_normal(n)
    g4, g5 = (g.standard_normal(n), 0.2) if worst else (np.zeros(0), 0.0)
    for a, b in zip(fac.solve(f, e, g4, g5), ref.solve(f, e, g4, g5), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    # the residual pass: r = G x + s, s z, max |r| and sum s z as numpy computes them
    p = ipm._Point(g.random((n, m)) + 0.05, s, g.standard_normal(n), z, g.random((n, m)) + 0.05, 0.3,
                   g.random(n) + 0.1 if worst else np.zeros(0), g.random(n) + 0.1 if worst else np.zeros(0))
    got, want = ipm._residuals(lp, p), numpy_only(ipm._residuals, lp, p)
    for a, b in ((got.ri, want.ri), (got.sz, want.sz), (got.rd, want.rd), (got.re, want.re), (got.ril, want.ril)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert got.ri_max == pytest.approx(float(np.abs(want.ri).max()), rel=1e-14)
    assert got.sz_sum == pytest.approx(float((s * z).sum()), rel=1e-12)
    assert np.all(got.ri[:, ~lp.keep] == 0) and np.all(got.sz[:, ~lp.keep] == 0)


@pytest.mark.parametrize(("seed", "n", "m", "worst"), [(13, 6, 6, False), (14, 7, 4, True), (15, 5, 8, False)])
def test_mehrotra_passes_match_the_directions_with_their_targets_formed(seed, n, m, worst, numpy_only):
    # the fused passes recompute r, s z and the targets; the oracle forms them as cubes and
    # runs the numpy direction, then the numpy step, trial sum and residuals at the new point
    lp, g = _instance(seed, n, m, worst=worst)
    s = np.where(lp.mask > 0, g.random((m, n, n)) + 0.05, 1.0)
    z = (g.random((m, n, n)) + 0.05) * lp.mask
    dl = g.random(n) + 0.1 if worst else np.zeros(0)
    p = ipm._Point(g.random((n, m)) + 0.05, s, g.standard_normal(n), z, g.random((n, m)) + 0.05, 0.3,
                   g.random(n) + 0.1 if worst else np.zeros(0), dl)
    r = ipm._residuals(lp, p)
    fac = ipm._Factor(lp, p.z / p.s, p.zx / p.x, p.zl / p.sl if worst else np.zeros(0))
    rcx, rcl = -p.x * p.zx, -p.sl * p.zl
    aff = ipm._mehrotra(lp, p, r, fac, None, 0.0, rcx, rcl)
    want = numpy_only(lambda: ipm._direction(lp, p, r, fac, -p.s * p.z, rcx, rcl))
    for a, b in ((aff.x, want.x), (aff.s, want.s), (aff.z, want.z), (aff.zx, want.zx), (aff.y, want.y)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    zpad = p.z + lp.unmask
    assert ipm._lengths(p, zpad, aff) == pytest.approx(numpy_only(ipm._lengths, p, zpad, want), rel=1e-12)
    plain = ipm._Step(aff.x, aff.s, aff.y, aff.z, aff.zx, aff.t, aff.sl, aff.zl)  # no sums: numpy's dot products
    assert aff.dots is not None
    assert ipm._trial_mu_sum(p, r.sz_sum, aff, 0.4, 0.7) == pytest.approx(
        numpy_only(ipm._trial_mu_sum, p, r.sz_sum, plain, 0.4, 0.7), rel=1e-12)
    smu = 0.02
    rcx2, rcl2 = smu - p.x * p.zx - aff.x * aff.zx, smu - p.sl * p.zl - aff.sl * aff.zl
    bufs = (np.full_like(p.s, np.nan), np.full_like(p.s, np.nan))  # every entry must be written
    cor = ipm._mehrotra(lp, p, r, fac, aff, smu, rcx2, rcl2, bufs)
    assert cor.s is bufs[0] and cor.z is bufs[1]
    rc = (smu - p.s * p.z - aff.s * aff.z) * lp.mask
    want = numpy_only(lambda: ipm._direction(lp, p, r, fac, rc, rcx2, rcl2))
    for a, b in ((cor.x, want.x), (cor.s, want.s), (cor.z, want.z), (cor.zx, want.zx), (cor.y, want.y)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    assert np.all(cor.s[:, ~lp.keep] == 0) and np.all(cor.z[:, ~lp.keep] == 0)
    # the advance pass: the new slacks and duals, and the residual summary at the new point
    x2 = p.x + 0.4 * cor.x
    s2, z2 = np.full_like(p.s, np.nan), np.full_like(p.z, np.nan)  # every entry must be written
    top, total, gz = KERNELS["advance_state"](lp.a, lp.maskf, np.ascontiguousarray(x2.T), p.s, cor.s, p.z, cor.z,
                                              0.4, 0.7, s2, z2)
    np.testing.assert_allclose(s2, p.s + 0.4 * cor.s, rtol=1e-15, atol=1e-16)  # (a fused multiply-add)
    np.testing.assert_allclose(z2, p.z + 0.7 * cor.z, rtol=1e-15, atol=1e-16)
    p2 = ipm._Point(x2, s2, p.y, z2, p.zx, p.t, p.sl, p.zl)
    full = numpy_only(ipm._residuals, lp, p2)
    lean = ipm._residuals(lp, p2, (float(top), float(total), gz.T))
    assert lean.ri_max == pytest.approx(float(np.abs(full.ri).max()), rel=1e-12)
    assert lean.sz_sum == pytest.approx(full.sz_sum, rel=1e-12)
    for a, b in ((lean.rd, full.rd), (lean.re, full.re), (lean.ril, full.ril)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("worst", [False, True])
def test_blocks_factored_in_threads_equal_one_thread(worst, monkeypatch):
    # the block ranges of the threads cover every block once and their Gram sums add up
    lp, g = _instance(16, 6, 19, worst=worst)
    n, m = lp.n, lp.m
    s = np.where(lp.mask > 0, g.random((m, n, n)) + 0.05, 1.0)
    z = (g.random((m, n, n)) + 0.05) * lp.mask
    dx, dl = g.random((n, m)) + 0.05, (g.random(n) + 0.1 if worst else np.zeros(0))
    monkeypatch.setattr(ipm_newton, "FACTOR_THREADS", 1)
    one = ipm._Factor(lp, z, dx, dl, slack=s)
    monkeypatch.setattr(ipm_newton, "FACTOR_THREADS", 2)
    two = ipm._Factor(lp, z, dx, dl, slack=s, blocks=np.full((m, n, n), np.nan))
    np.testing.assert_array_equal(two.cinv, one.cinv)
    np.testing.assert_allclose(two._gram, one._gram, rtol=1e-13, atol=1e-13)
    # C_w^T C_w inverts the block: C_w H_w C_w^T = I (H_w rebuilt by the numpy reference)
    d = z / s
    da = d * lp.a[None, :, :]
    h = -(da + da.transpose(0, 2, 1))
    idx = np.arange(n)
    h[:, idx, idx] += (da * lp.a[None, :, :]).sum(axis=2) + d.sum(axis=1) + dx.T
    eye = np.broadcast_to(np.eye(n), (m, n, n))
    np.testing.assert_allclose(two.cinv @ h @ two.cinv.transpose(0, 2, 1), eye, atol=1e-9)


@pytest.mark.parametrize("threads", [1, 2])
def test_block_inversion_by_hand_and_a_block_that_is_not_positive_definite(threads, monkeypatch):
    monkeypatch.setattr(ipm_newton, "FACTOR_THREADS", threads)
    h = np.stack([np.diag([1.0 + w, 2.0, 4.0]) for w in range(16)])
    cinv = np.empty_like(h)
    gram = ipm_newton._invert_blocks(h, cinv, None)
    assert gram is not None  # sum of the inverses: diag(sum 1/(1+w), 16/2, 16/4)
    np.testing.assert_allclose(gram, np.diag([sum(1.0 / (1.0 + w) for w in range(16)), 8.0, 4.0]), rtol=1e-14)
    np.testing.assert_allclose(cinv[5], np.diag([1 / np.sqrt(6.0), 1 / np.sqrt(2.0), 0.5]), rtol=1e-14)
    bad = h.copy()
    bad[13, 1, 1] = -1.0  # in the second thread's range
    assert ipm_newton._invert_blocks(bad, cinv, None) is None
