"""The Vickrey mechanism against its definition: exact two-nearest search, Madlib at t = 0, the law."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metricdp.errors import ValidationError
from metricdp.mechanisms.madlib import madlib_polar
from metricdp.pointspace import PointSpace
from metricdp.text.build import build, proven_epsilon
from metricdp.text.madlib import MadlibText
from metricdp.text.vickrey import VickreyText, two_nearest


def _brute(points: np.ndarray, noisy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nearest and second nearest point of each noisy vector (ties to the lower index), and their distance ratio.

    Every distance by its definition, ``|noisy - point|``, in blocks of rows (the whole
    difference tensor is rows x points x dim floats); ``argmin`` returns the first of equal
    minima, so the lower index wins a tie, and masking the winner gives the runner-up.
    """
    d = np.empty((len(noisy), len(points)))
    for s in range(0, len(noisy), 256):
        d[s:s + 256] = np.linalg.norm(noisy[s:s + 256, None, :] - points[None, :, :], axis=2)
    rows = np.arange(len(noisy))
    first = np.argmin(d, axis=1)
    d1 = d[rows, first]
    d[rows, first] = np.inf
    second = np.argmin(d, axis=1)
    return first, second, d1 / d[rows, second]


@pytest.mark.parametrize("eps", [0.5, 5.0, 80.0])
def test_two_nearest_equals_brute_force(vocab, eps) -> None:
    _, points = vocab
    rng = np.random.default_rng(1)
    inputs = rng.integers(0, points.n, 400).astype(np.intp)
    direction, gamma = madlib_polar(points.dim, eps, len(inputs), rng)
    w1, w2, ratio = two_nearest(points, inputs, direction, gamma, eps)
    noisy = points.vectors[inputs] + (gamma / eps)[:, None] * direction
    b1, b2, br = _brute(points.vectors, noisy)
    assert np.array_equal(w1, b1) and np.array_equal(w2, b2)
    assert np.allclose(ratio, br, rtol=1e-9)


def test_threshold_zero_is_madlib_and_huge_eps_keeps_words(vocab) -> None:
    _, points = vocab
    inputs = np.arange(0, 300, 3)
    assert np.array_equal(VickreyText(points, 3.0, threshold=0.0).sample(inputs, rng=9),
                          MadlibText(points, 3.0).sample(inputs, rng=9))
    space = PointSpace.from_points([[0.0], [10.0], [20.0]])
    assert VickreyText(space, 100.0, threshold=0.5).sample([0, 1, 2], rng=0).tolist() == [0, 1, 2]


def test_releases_follow_the_definition(vocab) -> None:
    # the law has no closed form: releases against a brute-force run of the definition (independent
    # seed), by a chi-square test of homogeneity, with power against another threshold
    _, points = vocab
    eps, word, count = 6.0, 17, 6000
    out = VickreyText(points, eps, threshold=0.75).sample(np.full(count, word), rng=4)
    g = np.random.default_rng(5)
    direction, gamma = madlib_polar(points.dim, eps, count, g)
    noisy = points.vectors[word] + (gamma / eps)[:, None] * direction
    b1, b2, ratio = _brute(points.vectors, noisy)

    def reference(t: float) -> np.ndarray:
        return np.where(g.random(count) < t * ratio / (t * ratio + 1 - t), b2, b1)

    def homogeneity_p(a: np.ndarray, b: np.ndarray) -> float:
        labels = np.union1d(a, b)
        table = np.array([[np.sum(a == v) for v in labels], [np.sum(b == v) for v in labels]])
        keep = table.sum(axis=0) >= 10
        table = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)])
        return float(stats.chi2_contingency(table[:, table.sum(axis=0) > 0]).pvalue)

    assert homogeneity_p(out, reference(0.75)) > 1e-3
    assert homogeneity_p(out, reference(0.0)) < 1e-6  # power: Madlib's releases differ


def test_registry_entry_and_refusals() -> None:
    space = PointSpace.from_points([[0.0], [1.0], [3.0]])
    assert proven_epsilon("vickrey", 3.0, threshold=0.2) == 3.0
    assert build("vickrey", space, 50.0, threshold=0.3).params["threshold"] == 0.3
    with pytest.raises(ValidationError):
        build("vickrey", space, 1.0, threshold=1.5)
