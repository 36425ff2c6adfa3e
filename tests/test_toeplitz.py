"""Channels on a line or a grid (metricdp._toeplitz): detection, FFT products, IBU on them."""

from __future__ import annotations

import numpy as np
import pytest

import metricdp._toeplitz as toeplitz
import metricdp.estimation as estimation
from metricdp import _ibu_kernels
from metricdp._toeplitz import LatticeProducts, lattice_structure
from metricdp.estimation import ibu
from metricdp.mechanisms.krr import krr_matrix


def lattice_channel(a: int, b: int, skew: float = 0.0) -> np.ndarray:
    """Row-normalised exp(-|di|/2 - |dj|/3 + skew * max(dj, 0)) on an a x b grid (row-major)."""
    gi, gj = (v.ravel() for v in np.meshgrid(np.arange(a), np.arange(b), indexing="ij"))
    di, dj = np.subtract.outer(gi, gi), np.subtract.outer(gj, gj)
    m = np.exp(-np.abs(di) / 2 - np.abs(dj) / 3 + skew * np.maximum(-dj, 0))
    return m / m.sum(axis=1, keepdims=True)


@pytest.fixture(autouse=True)
def small_lattices(monkeypatch):
    monkeypatch.setattr(toeplitz, "LATTICE_MIN_K", 2)


@pytest.mark.parametrize(("a", "b", "skew"), [(1, 30, 0.0), (1, 30, 0.4), (5, 5, 0.0), (4, 7, 0.3), (6, 2, 0.0)])
def test_detects_the_lattice_shape(a, b, skew) -> None:
    assert lattice_structure(lattice_channel(a, b, skew)) == (a, b)


def test_refuses_what_is_not_a_lattice_channel(monkeypatch) -> None:
    g = np.random.default_rng(0)
    m = g.random((30, 30))
    assert lattice_structure(m / m.sum(axis=1, keepdims=True)) is None
    m = lattice_channel(5, 6)
    m[7, 9] *= 1 + 1e-9  # one entry off by far more than the tolerance
    assert lattice_structure(m) is None
    m = lattice_channel(1, 12)
    m[3, 3] = 0.0  # D must be invertible
    assert lattice_structure(m) is None
    assert lattice_structure(krr_matrix(12, 1.0)) == (1, 12)  # a I + b J is Toeplitz too (ibu takes the O(k) form)
    monkeypatch.setattr(toeplitz, "LATTICE_MIN_K", 31)
    assert lattice_structure(lattice_channel(1, 30)) is None  # below the size where FFTs pay


@pytest.mark.parametrize(("a", "b", "skew"), [(1, 30, 0.4), (5, 5, 0.0), (4, 7, 0.3)])
def test_fft_products_equal_the_dense_ones(a, b, skew) -> None:
    m = lattice_channel(a, b, skew)
    prod = LatticeProducts.build(m, (a, b))
    g = np.random.default_rng(1)
    p, r = g.random((3, a * b)), g.random((3, a * b))
    np.testing.assert_allclose(prod.forward(p), p @ m, rtol=0, atol=1e-14 * np.abs(p @ m).max())
    np.testing.assert_allclose(prod.backward(r), r @ m.T, rtol=0, atol=1e-14 * np.abs(r @ m.T).max())


@pytest.mark.parametrize(("a", "b", "skew"), [(1, 40, 0.4), (6, 6, 0.0), (4, 7, 0.3)])
def test_ibu_on_a_lattice_equals_the_dense_reference(a, b, skew, monkeypatch) -> None:
    m = lattice_channel(a, b, skew)
    g = np.random.default_rng(2)
    counts = g.integers(0, 40, size=(2, a * b)).astype(float)
    counts[:, :5] = 0  # unobserved outputs
    fast = ibu(counts, m, tol=1e-13, max_iter=2000)
    monkeypatch.setattr(estimation, "lattice_structure", lambda _m: None)
    monkeypatch.setattr(_ibu_kernels, "KERNELS", None)
    dense = ibu(counts, m, tol=1e-13, max_iter=2000)
    assert np.abs(fast.estimate - dense.estimate).max() <= 1e-10
    assert (fast.estimate >= 0).all() and np.allclose(fast.estimate.sum(axis=1), 1.0)
    assert np.abs(np.asarray(fast.iterations) - dense.iterations).max() <= 2
