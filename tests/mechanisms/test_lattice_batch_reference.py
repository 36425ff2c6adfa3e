"""The vectorised lattice Laplace sampler against the bit-by-bit reference: its law, its random source, its refusals."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from metricdp.errors import ValidationError
from metricdp.location.lattice import LatticePlane, release_lattice
from metricdp.mechanisms import lattice_batch
from metricdp.mechanisms.lattice_batch import LatticeSampler
from metricdp.mechanisms.lattice_laplace import lattice_laplace_offsets


def _bins(k: np.ndarray, inner: int, edges: np.ndarray) -> np.ndarray:
    """Each point of the window |k| <= inner a bin; the rest pooled in rings of the radius."""
    in_box = (np.abs(k) <= inner).all(axis=1)
    cells = np.bincount((k[in_box, 0] + inner) * (2 * inner + 1) + k[in_box, 1] + inner,
                        minlength=(2 * inner + 1) ** 2)
    rings = np.bincount(np.searchsorted(edges, np.hypot(*k[~in_box].T), side="right"), minlength=len(edges) + 1)
    return np.concatenate([cells, rings])


@pytest.mark.parametrize("kernels", [True, False])
@pytest.mark.parametrize(("alpha", "seed"), [(Fraction(4, 5), 1), (Fraction(7, 3), 2)])
def test_same_law_as_the_bit_by_bit_reference(alpha, seed, kernels, monkeypatch):
    """Chi-square test of homogeneity: the vectorised sampler (compiled or numpy) vs the reference.

    The two use different proposals (their beta differ), so agreement is a test of the law,
    not of a shared code path.
    """
    if not kernels:
        monkeypatch.setattr(lattice_batch, "_KERNELS", None)
    ref = lattice_laplace_offsets(alpha, 3_000, np.random.default_rng(seed))
    fast = LatticeSampler(alpha).offsets(60_000, np.random.default_rng(seed + 100))
    edges = np.array([3, 4, 5, 7, 10, 1e9]) / float(alpha) * 0.8
    table = np.vstack([_bins(ref, 2, edges), _bins(fast, 2, edges)])
    table = table[:, table.sum(axis=0) * 3_000 / 63_000 > 5]  # expected count of the small sample > 5
    assert table.shape[1] >= 15
    assert stats.chi2_contingency(table).pvalue > 1e-4
    # and the origin's mass, by hand: Pr[K = 0] = 1 / sum_j e^{-alpha |j|} on a window holding all but e^-50
    cap = int(60 / float(alpha))
    ax = np.arange(-cap, cap + 1)
    z = np.exp(-float(alpha) * np.hypot(*np.meshgrid(ax, ax))).sum()
    p0 = 1 / z
    hits = int((fast == 0).all(axis=1).sum())
    assert stats.binomtest(hits, len(fast), p0).pvalue > 1e-4


def test_default_source_is_the_os(monkeypatch):
    """rng=None reads os.urandom (and two releases differ); a seeded Generator does not touch it."""
    from metricdp import _random

    calls, real = [], os.urandom

    def spy(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(_random.os, "urandom", spy)
    plane = LatticePlane(48.8566, 2.3522, cell_km=0.001, extent_km=50.0)
    pts = [[48.86, 2.35]] * 200
    a = release_lattice(pts, 0.5, plane)
    assert calls and sum(calls) >= 8 * 200  # at least one word per row
    assert not np.array_equal(a, release_lattice(pts, 0.5, plane))
    calls.clear()
    release_lattice(pts, 0.5, plane, rng=np.random.default_rng(0))
    assert calls == []


def test_a_sampler_of_another_epsilon_is_refused():
    """A prebuilt sampler is trusted to match (epsilon, plane): one at eps where eps/2 is due doubled the loss."""
    from metricdp.location.region import Region

    plane = LatticePlane(48.8566, 2.3522, cell_km=0.001, extent_km=50.0)
    box = Region.box(48.8, 2.3, 48.9, 2.4)
    pts = [[48.86, 2.35]]
    ok = LatticeSampler(plane.alpha(0.5))
    assert release_lattice(pts, 0.5, plane, sampler=ok, rng=0).shape == (1, 2)
    with pytest.raises(ValidationError, match="alpha"):
        release_lattice(pts, 0.25, plane, sampler=ok, rng=0)
    with pytest.raises(ValidationError, match="alpha"):  # reject into a region: the noise is due at eps / 2
        release_lattice(pts, 0.5, plane, sampler=ok, region=box, truncation="reject", rng=0)
    half = LatticeSampler(plane.alpha(0.25))
    assert release_lattice(pts, 0.5, plane, sampler=half, region=box, truncation="reject", rng=0).shape == (1, 2)


def test_a_cell_too_small_for_the_extent_is_refused():
    """Indices past 2**63 were cast to INT64_MIN (every far input one garbage point); past 2**53, inexact."""
    with pytest.raises(ValidationError, match="too small"):
        LatticePlane(48.8566, 2.3522, cell_km=1e-17, extent_km=500.0)
    plane = LatticePlane(48.8566, 2.3522, cell_km=1e-13, extent_km=400.0)  # 4e15 cells: fine
    assert plane.snap([[48.8566, 2.3522]]).tolist() == [[0, 0]]
