"""CusText: output sets as its mapping function builds them, its law (chi-square), DP inside a set."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.audit import audit
from metricdp.errors import ValidationError
from metricdp.pointspace import PointSpace
from metricdp.text.build import build, proven_epsilon
from metricdp.text.custext import CusTextText, custext_weights, output_sets, set_members
from tests.text.conftest import chi_square_p


def _sets_by_brute_force(points: np.ndarray, size: int) -> list[int]:
    d = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=2)
    group = [-1] * len(points)
    count = 0
    for w in range(len(points)):
        if group[w] >= 0:
            continue
        free = [j for j in np.argsort(d[w], kind="stable") if group[j] < 0 and j != w][: size - 1]
        for j in [w, *free]:
            group[j] = count
        count += 1
    return group


@pytest.mark.parametrize("size", [1, 2, 4, 43])
def test_output_sets_follow_the_mapping_function(size) -> None:
    pts = np.random.default_rng(7).normal(size=(43, 3))
    space = PointSpace.from_points(pts)
    assert output_sets(space, size).tolist() == _sets_by_brute_force(pts, size)


def test_hand_computed_sets_and_weights() -> None:
    space = PointSpace.from_points([[0.0], [1.0], [3.0], [10.0], [11.0]], list("abcde"))
    mech = CusTextText(space, 2.0, size=2)
    assert mech.group.tolist() == [0, 0, 1, 1, 2]  # a+b, then c with its nearest free word d, e alone
    w, idx = custext_weights(space, mech.group, 2.0)
    assert idx[0].tolist() == [0, 1] and np.allclose(w[0], [1.0, np.exp(-1.0)])  # d/d_max = 1 for b
    assert idx[4].tolist() == [4, -1] and w[4].tolist() == [1.0, 0.0]
    assert mech.sample([4, 4, 4], rng=0).tolist() == [4, 4, 4]


def test_releases_follow_the_exact_law_and_dp_inside_a_set(vocab) -> None:
    _, points = vocab
    eps = 3.0
    mech = CusTextText(points, eps, size=20)
    w, idx = custext_weights(points, mech.group, eps)
    words = [0, 17, 250]
    inputs = np.repeat(words, 5000)
    out = mech.sample(inputs, rng=11)
    for word in words:
        law = np.zeros(points.n)
        law[idx[word][idx[word] >= 0]] = w[word][idx[word] >= 0] / w[word].sum()
        assert chi_square_p(out[inputs == word], law) > 1e-3
        assert set(out[inputs == word]) <= set(idx[word][idx[word] >= 0])  # never outside its set
    members, starts = set_members(mech.group)
    one = members[starts[0] : starts[1]]
    matrix = np.zeros((len(one), len(one)))
    for r, word in enumerate(one):  # the set's law on its own outputs (rows: its words)
        matrix[r, np.searchsorted(one, idx[word][idx[word] >= 0])] = w[word][idx[word] >= 0]
    assert audit(matrix, 1.0 - np.eye(len(one)), normalize=True).epsilon <= eps * (1 + 1e-9)
    assert proven_epsilon("custext", eps) == eps


def test_registry_entry() -> None:
    space = PointSpace.from_points([[0.0], [1.0], [3.0]])
    assert build("custext", space, 80.0, size=3).sample([0, 1, 2], rng=0).tolist() == [0, 1, 2]
    with pytest.raises(ValidationError):
        build("custext", space, 1.0, size=0)
