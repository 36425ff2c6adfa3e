"""1-Diffractor: its lists as its definition builds them, its law (chi-square), its proven and audited levels."""

from __future__ import annotations

import numpy as np
import pytest

from metricdp.audit import audit
from metricdp.errors import ValidationError
from metricdp.mechanisms import registry
from metricdp.pointspace import PointSpace
from metricdp.text.build import build, proven_epsilon
from metricdp.text.diffractor import DiffractorText, diffractor_matrix, embedding_epsilon, word_lists
from tests.text.conftest import chi_square_p


def _chain_by_brute_force(points: np.ndarray, first: int) -> list[int]:
    """The nearest-unlisted-word chain from ``first``, by a full scan per step (ties: smaller index)."""
    d = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=2)
    order, listed = [first], {first}
    while len(order) < len(points):
        row = d[order[-1]].copy()
        row[list(listed)] = np.inf
        order.append(int(np.argmin(row)))
        listed.add(order[-1])
    return order


def test_lists_follow_the_nearest_unlisted_word_from_the_farthest_words() -> None:
    g = np.random.default_rng(3)
    pts = g.normal(size=(60, 3))
    space = PointSpace.from_points(pts)
    lists = word_lists(space, 2)
    norms = np.linalg.norm(pts - pts.mean(axis=0), axis=1)
    starts = np.argsort(-norms, kind="stable")[:2]
    for li in range(2):
        assert sorted(lists[li].tolist()) == list(range(60))  # a permutation
        assert lists[li].tolist() == _chain_by_brute_force(pts, int(starts[li]))


def test_hand_computed_list_and_law() -> None:
    space = PointSpace.from_points([[0.0], [1.0], [3.0], [7.0]], list("abcd"))
    mech = DiffractorText(space, np.log(2.0))  # a = 1/2
    assert mech.lists.tolist() == [[3, 2, 1, 0]]  # d (farthest from the mean 2.75), c, b, a
    m = diffractor_matrix(mech.lists, np.log(2.0))
    # from "a" (position 3 of 4): G(3|3) = (1-a)/(1+a) = 1/3 is not the end: the end takes a^0/(1+a) = 2/3
    assert np.allclose(m[0], [2 / 3, 1 / 6, 1 / 12, 1 / 12])  # columns a, b, c, d: positions 3, 2, 1, 0
    assert np.allclose(m.sum(axis=1), 1.0)


@pytest.mark.parametrize("count", [1, 2])
def test_releases_follow_the_exact_law(vocab, count) -> None:
    _, points = vocab
    eps = 0.7
    mech = DiffractorText(points, eps, lists=count)
    words = [0, 17, 250]
    inputs = np.repeat(words, 4000)
    out = mech.sample(inputs, rng=2024)
    law = diffractor_matrix(mech.lists, eps)
    for w in words:
        assert chi_square_p(out[inputs == w], law[w]) > 1e-3
    wrong = diffractor_matrix(mech.lists, 1.4 * eps)  # power: another eps is rejected
    assert chi_square_p(out[inputs == 0], wrong[0]) < 1e-6


def test_exact_for_the_list_distance_not_for_the_embedding(vocab) -> None:
    _, points = vocab
    eps = 1.0
    mech = DiffractorText(points, eps, lists=2)
    law = diffractor_matrix(mech.lists, eps)
    d_list = np.max(np.abs(mech.positions[:, :, None] - mech.positions[:, None, :]), axis=0).astype(float)
    assert audit(law, d_list).epsilon == pytest.approx(eps, rel=1e-9)
    assert embedding_epsilon(mech, np.arange(300)) > 10 * eps  # far from eps for the Euclidean distance
    with pytest.raises(ValidationError):
        embedding_epsilon(mech, [3])


def test_registry_entry() -> None:
    family = registry.get_sampler("diffractor")
    assert family.find("lists") is not None and proven_epsilon("diffractor", 2.0) == 2.0
    space = PointSpace.from_points([[0.0], [1.0], [3.0]])
    mech = build("diffractor", space, 50.0, lists=1)
    assert mech.sample([0, 1, 2], rng=0).tolist() == [0, 1, 2]  # eps 50: the word itself
    with pytest.raises(ValidationError):
        build("diffractor", space, 1.0, lists=0)


@pytest.mark.parametrize("eps", [0.05, 1.5])
def test_table_and_loop_samplers_release_the_same_law(vocab, eps) -> None:
    # the vectorised tables (eps >= 1e-6) against the exact law; the per-token loop (forced) too
    _, points = vocab
    mech = DiffractorText(points, eps)
    law = diffractor_matrix(mech.lists, eps, [7])[0]
    out = mech.sample(np.full(20_000, 7), rng=2024)
    assert chi_square_p(out, law) > 1e-3
    mech._geometric = None
    out = mech.sample(np.full(4_000, 7), rng=2024)
    assert chi_square_p(out, law) > 1e-3


def test_numpy_tables_draw_what_the_compiled_kernel_draws() -> None:
    pytest.importorskip("numba")
    from fractions import Fraction

    from metricdp.mechanisms.lattice_batch import Geometric

    for eps in (0.05, 1.0, 30.0):
        compiled = Geometric(Fraction(eps)).laplace(50_000, np.random.default_rng(4))
        plain = Geometric(Fraction(eps), compiled=False).laplace(50_000, np.random.default_rng(4))
        assert np.array_equal(compiled, plain)


def test_a_release_starts_no_compiled_kernels() -> None:
    # the first release pays no numba start: the geometric tables are walked by numpy
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from metricdp.pointspace import PointSpace\n"
            "from metricdp.text.diffractor import DiffractorText\n"
            "space = PointSpace.from_points(np.random.default_rng(0).normal(size=(40, 3)))\n"
            "DiffractorText(space, 1.0, lists=2).sample(np.arange(40).repeat(50), rng=0)\n"
            "assert 'metricdp.mechanisms._lattice_kernels' not in sys.modules\n"
            "assert 'numba' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
