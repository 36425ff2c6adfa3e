"""Subsampled exponential mechanism over a PointSpace vs its exact matrix (enumeration)."""

from __future__ import annotations

import numpy as np

from metricdp.audit import audit
from metricdp.mechanisms.subsampled import subsampled_exponential_exact
from metricdp.text.subsampled import SubsampledText, zipf_base
from tests.text.conftest import chi_square_p


def test_frequencies_match_the_exact_matrix(vocab) -> None:
    dense, _points = vocab
    rows = np.arange(8)
    small = dense.subspace(rows)
    from metricdp.pointspace import PointSpace

    pspace = PointSpace.from_points(small.points, small.labels)
    base = zipf_base(8)
    exact = subsampled_exponential_exact(small, 2.0, 3, base)
    assert audit(exact, small.distances).satisfies(2.0, 1e-9)
    mech = SubsampledText(pspace, 2.0, candidates=3, base="zipf")
    inputs = np.repeat([0, 4, 7], 20_000)
    out = mech.sample(inputs, rng=8)
    for w in (0, 4, 7):
        assert chi_square_p(out[inputs == w], exact[w]) > 1e-3
    uniform = subsampled_exponential_exact(small, 2.0, 3)
    assert chi_square_p(out[inputs == 0], uniform[0]) < 1e-6


def test_large_vocabulary_cost_is_m_distances(vocab) -> None:
    _, points = vocab
    out = SubsampledText(points, 3.0, candidates=20).sample(np.arange(300), rng=1)
    assert out.shape == (300,) and out.min() >= 0 and out.max() < 300
