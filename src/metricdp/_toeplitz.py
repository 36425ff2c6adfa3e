r"""Channels on a line or a grid: a row scaling of a (block-)Toeplitz matrix, multiplied by FFT.

A mechanism whose row x is :math:`M[x, y] \propto w(y - x)` for a weight w of the offset
between points of an evenly spaced line or of a regular a x b grid (numbered row-major), each
row normalised -- the exponential mechanism or a discretised Laplace on such a space -- is

.. math:: M = D\,T, \qquad D = \operatorname{diag}(M[x, x]), \qquad T[x, y] = g(y - x),

with :math:`g(0) = 1` and the offset taken on the lattice: T is Toeplitz on a line, block
Toeplitz with Toeplitz blocks on a grid. :func:`lattice_structure` finds the form from the
matrix alone (``R = M / diag(M)``: three of its rows must repeat along the lattice offsets,
then the FFT products must equal the dense ones on random vectors, Freivalds' check);
:class:`LatticeProducts` then computes the two products of an IBU update,

.. math:: p M = (p \circ D)\,T, \qquad M r = D \circ (T r),

as 2-d convolutions of the grid-shaped vectors with the generator
:math:`G[d_i + a - 1, d_j + b - 1] = g(d_i, d_j)` by real FFTs of a padded size: O(k log k)
per product instead of O(k^2). Rounding in the FFT is absolute (about 1e-16 times the
largest term), so a product entry whose exact value is below that may come out slightly
negative or zero; IBU treats a non-positive expectation as "contributes nothing" and clips
the update at 0, and the tests compare the estimates with the dense loop's to 1e-10.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["LATTICE_MIN_K", "LatticeProducts", "lattice_structure"]

#: Smallest channel that :func:`lattice_structure` examines: below about a thousand categories
#: the compiled dense update (one pass over k^2 cells) costs less than the numpy loop around
#: four FFTs of the padded grid.
LATTICE_MIN_K = 1000
_RTOL = 1e-12
#: Entries below this are compared absolutely: subnormal doubles carry fewer significant bits.
_ATOL = 1e-290


def _shapes(k: int) -> list[tuple[int, int]]:
    """Lattice shapes (a, b), a * b = k, to try: the line, then grids from the squarest."""
    sides = sorted((a for a in range(2, k // 2 + 1) if k % a == 0), key=lambda a: (abs(a - k // a), -a))
    return [(1, k), *((a, k // a) for a in sides)]


def _close(x: NDArray[np.float64], y: NDArray[np.float64]) -> bool:
    """x equals y to a relative _RTOL, or absolutely to _ATOL (both finite)."""
    return bool((np.abs(x - y) <= _ATOL + _RTOL * np.abs(y)).all())


def _neighbours_agree(m: NDArray[np.float64], d: NDArray[np.float64], a: int, b: int) -> bool:
    """Rows (0, 1) and (1, 0) of ``R = m / d[:, None]`` are row (0, 0) shifted by one column and by one
    block row (as a x b grids): O(k), and a wrong shape fails here."""

    def row(x: int) -> NDArray[np.float64]:
        return (m[x] / d[x]).reshape(a, b)

    if b > 1 and not _close(row(1)[:, 1:], row(0)[:, :-1]):
        return False
    return a == 1 or _close(row(b)[1:, :], row(0)[:-1, :])


def _products_agree(m: NDArray[np.float64], shape: tuple[int, int]) -> bool:
    """Freivalds' check: the FFT products equal the dense ones on random vectors, to 1e-12 of their largest entry.

    If M is not ``D T`` for the generator read from its four corner rows, ``(M - D T) u`` is
    non-zero for all u outside a set of measure zero, so two random positive vectors find the
    difference (both ways: ``u M`` and ``M u``) unless it is below the tolerance, i.e. below
    what the FFT's own rounding may change. Two passes over M, where checking every entry took
    several; the vectors are no privacy noise (estimation is post-processing).
    """
    from ._threads import blas_threads

    u = np.random.default_rng(0).random((2, m.shape[0])) + 0.5
    fft = LatticeProducts.build(m, shape)
    with blas_threads(1):
        fwd, bwd = u @ m, u @ m.T
    return all(
        bool((np.abs(got - want) <= 1e-12 * np.abs(want).max(axis=1, keepdims=True)).all())
        for got, want in ((fft.forward(u), fwd), (fft.backward(u), bwd))
    )


def lattice_structure(m: NDArray[np.float64]) -> tuple[int, int] | None:
    """The lattice shape (a, b) on which the square channel m is ``D T`` (module docstring), else None.

    Only from :data:`LATTICE_MIN_K` categories on, and only with a positive diagonal (D must be
    invertible); the line (1, k) is tried first, then the grids a x b from the squarest. A shape
    must pass :func:`_neighbours_agree` (three rows) and :func:`_products_agree` (Freivalds).
    """
    k = m.shape[0]
    if k < LATTICE_MIN_K or m.shape[1] != k:
        return None
    d = np.diagonal(m)
    if not (d > 0).all():
        return None
    for a, b in _shapes(k):
        if _neighbours_agree(m, d, a, b) and _products_agree(m, (a, b)):
            return a, b
    return None


@dataclass(frozen=True)
class LatticeProducts:
    """The IBU products ``p @ M`` and ``r @ M.T`` of a lattice channel, by FFT (module docstring)."""

    shape: tuple[int, int]
    diag: NDArray[np.float64]
    fft_size: tuple[int, int]
    forward_kernel: NDArray[np.complex128]
    backward_kernel: NDArray[np.complex128]

    @classmethod
    def build(cls, m: NDArray[np.float64], shape: tuple[int, int]) -> LatticeProducts:
        """From the channel and its shape (:func:`lattice_structure`)."""
        from scipy.fft import next_fast_len, rfft2

        a, b = shape
        d = np.diagonal(m).copy()

        def row(i: int, j: int) -> NDArray[np.float64]:  # R at x = (i, j), as an a x b grid
            x = i * b + j
            return (m[x] / d[x]).reshape(a, b)

        g = np.zeros((2 * a - 1, 2 * b - 1))
        # g(di, dj) is R[x, y] for y - x = (di, dj): from x = (0, 0) for offsets >= 0, (a-1, b-1) for < 0,
        # the mixed signs from (0, b-1) and (a-1, 0); four rows of R, never all of it
        g[a - 1:, b - 1:] = row(0, 0)
        g[:a, :b] = row(a - 1, b - 1)
        g[a - 1:, :b] = row(0, b - 1)
        g[:a, b - 1:] = row(a - 1, 0)
        size = (next_fast_len(3 * a - 2, real=True), next_fast_len(3 * b - 2, real=True))
        return cls(shape, d, size, rfft2(g, size), rfft2(g[::-1, ::-1], size))

    def _convolve(self, x: NDArray[np.float64], kernel: NDArray[np.complex128]) -> NDArray[np.float64]:
        from scipy.fft import irfft2, rfft2

        a, b = self.shape
        grid = x.reshape(-1, a, b)
        full = irfft2(rfft2(grid, self.fft_size) * kernel, self.fft_size)
        return np.ascontiguousarray(full[:, a - 1:2 * a - 1, b - 1:2 * b - 1]).reshape(x.shape)

    def forward(self, p: NDArray[np.float64]) -> NDArray[np.float64]:
        """``p @ M`` for each row p: out[y] = sum_x p[x] D[x] g(y - x)."""
        return self._convolve(p * self.diag, self.forward_kernel)

    def backward(self, r: NDArray[np.float64]) -> NDArray[np.float64]:
        """``r @ M.T`` for each row r: out[x] = D[x] sum_y g(y - x) r[y]."""
        return self._convolve(r, self.backward_kernel) * self.diag
