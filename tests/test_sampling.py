"""Sampling from a mechanism: against its matrix, secure default, exactness of the inverse CDF."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metricdp import MetricSpace, ValidationError
from metricdp.audit import audit_epsilon
from metricdp.mechanisms import registry
from metricdp.mechanisms.base import Mechanism, sample_from_matrix

TWO_53 = 2.0**53


def _mechanism(n: int = 6, seed: int = 0) -> Mechanism:
    g = np.random.default_rng(seed)
    space = MetricSpace.from_points(g.normal(size=(n, 2)), [f"w{i}" for i in range(n)])
    m = g.random((n, n)) ** 3
    m[:, 1] = 0.0  # an impossible output must never be drawn
    m /= m.sum(axis=1, keepdims=True)
    return Mechanism.from_matrix(m, space, audit_epsilon(m, space.distances) * (1 + 1e-12), "test")


class Fixed:
    """A RandomSource returning prescribed uniforms."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float64)

    def random(self, size=None):
        assert size == len(self.values)
        return self.values


def _chi_square(mech: Mechanism, row: int, draws: np.ndarray) -> float:
    counts = np.bincount(draws, minlength=mech.n)
    p = mech.matrix[row]
    assert counts[p == 0].sum() == 0
    return stats.chisquare(counts[p > 0], p[p > 0] * len(draws)).pvalue


@pytest.mark.parametrize("row", [0, 2, 5])
def test_sample_matches_matrix_chi_square(row):
    mech = _mechanism()
    draws = mech.sample(np.full(50_000, row), rng=123 + row)
    assert _chi_square(mech, row, draws) > 0.001


def test_mixed_inputs_keep_their_order():
    mech = _mechanism()
    inputs = np.tile(np.arange(mech.n), 20_000)
    np.random.default_rng(0).shuffle(inputs)
    out = mech.sample(inputs, rng=5)
    assert out.shape == inputs.shape
    for row in range(mech.n):
        assert _chi_square(mech, row, out[inputs == row]) > 0.001


def test_seeded_sampling_is_reproducible():
    mech = _mechanism()
    inputs = np.arange(mech.n).repeat(10)
    np.testing.assert_array_equal(mech.sample(inputs, rng=9), mech.sample(inputs, rng=9))
    assert not np.array_equal(mech.sample(inputs, rng=9), mech.sample(inputs, rng=10))


def test_secure_default_works():
    mech = _mechanism()
    draws = mech.sample(np.full(30_000, 3))  # rng=None: os.urandom
    # unseeded, hence a tiny alpha; a broken sampler fails by orders of magnitude
    assert _chi_square(mech, 3, draws) > 1e-6
    single = mech.sample(3)
    assert np.ndim(single) == 0
    assert 0 <= int(single) < mech.n


def test_privatize_labels():
    mech = _mechanism()
    out = mech.privatize(["w1", "w4", "w1"], rng=0)
    assert len(out) == 3
    assert set(out) <= set(mech.labels)
    with pytest.raises(ValidationError, match=r"1 value\(s\) not in the space's labels: 'nope'"):
        mech.privatize(["w1", "nope"])


@pytest.mark.parametrize(
    ("inputs", "pattern"),
    [([0, 6], "index 6 is outside 0..5"), ([-1], "index -1 is outside"), ([0.5], "integer indices")],
)
def test_bad_inputs(inputs, pattern):
    with pytest.raises(ValidationError, match=pattern):
        _mechanism().sample(np.asarray(inputs), rng=0)


# ----------------------------------------------------------------------------- exactness
def test_tiny_mass_is_neither_inflated_nor_deflated():
    # Row (0.5, 1e-12, 0.5 - 1e-12): with uniforms k / 2**53, output 1 must get exactly the
    # grid points in [c0, c1) / c2, i.e. about 1e-12 * 2**53 = 9007.2 of them.
    row = np.array([0.5, 1e-12, 0.5 - 1e-12])
    cdf = np.cumsum(row)[None, :]
    k0 = 2**52  # 0.5 * 2**53
    ks = np.arange(k0 - 1000, k0 + 12_000, dtype=np.float64)
    out = sample_from_matrix(cdf, np.zeros(len(ks), dtype=np.intp), Fixed(ks / TWO_53))
    hits = int((out == 1).sum())
    assert abs(hits - 1e-12 * TWO_53) <= 2
    # and they are contiguous: below the block output 0, above it output 2
    first = int(np.argmax(out == 1))
    assert (out[:first] == 0).all()
    assert (out[first + hits :] == 2).all()


def test_boundaries_of_the_inverse_cdf():
    row = np.array([0.25, 0.0, 0.75, 0.0])
    cdf = np.cumsum(row)[None, :]
    u = [0.0, 0.25 - 2**-53, 0.25, 1 - 2**-53]
    out = sample_from_matrix(cdf, np.zeros(4, dtype=np.intp), Fixed(u))
    # zero-probability outputs 1 and 3 are never drawn, even at the edges of [0, 1)
    np.testing.assert_array_equal(out, [0, 0, 2, 2])


def test_row_sum_off_by_rounding_is_not_pushed_to_the_last_column():
    # a row whose float sum is 1 - 3e-10 (allowed by the 1e-9 check): scaling by the row's own
    # sum keeps the last output at its share; without it, u in [c[-1], 1) would land past the end.
    row = np.array([0.5, 0.5 - 3e-10, 0.0])
    cdf = np.cumsum(row)[None, :]
    u = [1 - 2**-53, 1 - 1e-10]
    out = sample_from_matrix(cdf, np.zeros(2, dtype=np.intp), Fixed(u))
    np.testing.assert_array_equal(out, [1, 1])


# ----------------------------------------------------------------------------- estimated mechanisms
def always_one(mechanism, inputs, rng):
    """A true sampler for the test family below: always output 1."""
    rng.random(len(inputs))
    return np.ones(len(inputs), dtype=np.intp)


def test_estimated_mechanism_uses_its_true_sampler(monkeypatch):
    space = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
    estimate = np.array([[1.0, 0.0], [0.0, 1.0]])  # an estimate; sampling it would be wrong
    family = registry.Family("test-always-one", "tests.test_sampling:always_one", "a test family",
                             exact=False, sampler="tests.test_sampling:always_one")
    monkeypatch.setitem(registry.FAMILIES, family.name, family)
    mech = Mechanism(estimate, space, 1.0, "test-always-one", {"epsilon": 1.0}, exact=False)
    np.testing.assert_array_equal(mech.sample(np.array([0, 0, 1]), rng=0), [1, 1, 1])
    # a family the registry does not know is exact: it cannot call itself estimated
    with pytest.raises(ValidationError, match="not a claim a mechanism can make"):
        Mechanism(estimate, space, 1.0, "test-unregistered", exact=False)

