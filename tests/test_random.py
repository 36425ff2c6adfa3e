"""Randomness: the secure source, rng normalisation, uniforms in (0, 1), Box-Muller normals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metricdp import ValidationError
from metricdp._random import (
    RandomSource,
    SecureRandom,
    check_release_rng,
    check_rng,
    is_secure,
    random_words,
    standard_normal,
    uniform_open,
)
from metricdp.errors import PrivacyLeakWarning


def test_secure_random_shapes_and_range():
    src = SecureRandom()
    assert np.shape(src.random()) == ()
    assert src.random(5).shape == (5,)
    assert src.random((2, 3)).shape == (2, 3)
    assert src.random(0).shape == (0,)
    u = src.random(100_000)
    assert u.dtype == np.float64
    assert u.min() >= 0.0
    assert u.max() < 1.0
    # every value is on the 2**-53 grid (exact k / 2**53)
    k = u * 2.0**53
    np.testing.assert_array_equal(k, np.floor(k))
    assert repr(src) == "SecureRandom(os.urandom)"


def test_secure_random_is_uniform_chi_square():
    u = SecureRandom().random(200_000)
    counts = np.bincount((u * 50).astype(int), minlength=50)
    # The source is unseeded: alpha = 1e-9 makes a false alarm negligible (at most 1e-9 a run)
    # while a biased source (e.g. a constant bit) fails by hundreds of standard deviations.
    assert stats.chisquare(counts).pvalue > 1e-9
    # the test can fail: the same draws bent by u -> u**1.05 (bins off by a few %) give p ~ 1e-70
    assert stats.chisquare(np.bincount((u**1.05 * 50).astype(int), minlength=50)).pvalue < 1e-9
    # the low bits are random too (a source that drops them would fail here)
    low = (u * 2.0**53).astype(np.uint64) & np.uint64(0xFF)
    assert stats.chisquare(np.bincount(low.astype(int), minlength=256)).pvalue > 1e-9
    stuck = low & np.uint64(0xFE)  # the lowest bit stuck at 0: half of the bins empty
    assert stats.chisquare(np.bincount(stuck.astype(int), minlength=256)).pvalue < 1e-9


def test_secure_random_draws_differ():
    src = SecureRandom()
    assert not np.array_equal(src.random(8), src.random(8))


def test_check_rng_normalisation():
    assert isinstance(check_rng(None), SecureRandom)
    a, b = check_rng(7), check_rng(np.int64(7))
    assert isinstance(a, np.random.Generator)
    np.testing.assert_array_equal(a.random(4), b.random(4))  # int seeds are reproducible
    g = np.random.default_rng(1)
    assert check_rng(g) is g
    s = SecureRandom()
    assert check_rng(s) is s
    seq = np.random.SeedSequence(3)
    expected = np.random.default_rng(np.random.SeedSequence(3)).random(3)
    np.testing.assert_array_equal(check_rng(seq).random(3), expected)

    class Fixed:
        def random(self, size=None):
            return np.full(size, 0.25)

    fixed = Fixed()
    assert isinstance(fixed, RandomSource)
    checked = check_rng(fixed)  # user sources are wrapped: every uniform is checked
    assert checked.inner is fixed
    np.testing.assert_array_equal(checked.random(3), [0.25, 0.25, 0.25])
    assert check_rng(checked) is checked


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        (True, "rng must be None, an int seed or a numpy Generator, got True"),
        (-1, "rng seed must be >= 0, got -1"),
        ("42", "got str"),
        (1.5, "got float"),
    ],
)
def test_check_rng_errors(value, pattern):
    with pytest.raises(ValidationError, match=pattern):
        check_rng(value)


def test_uniform_open_never_zero():
    class Zeros:
        def random(self, size=None):
            return np.zeros(size)

    u = uniform_open(Zeros(), 4)
    assert (u > 0).all()
    np.testing.assert_array_equal(u, 0.5 / 2.0**53)
    assert np.isfinite(np.log(u)).all()
    v = uniform_open(np.random.default_rng(0), (3, 2))
    assert v.shape == (3, 2)


def test_standard_normal_ks_fixed_seed():
    z = standard_normal(np.random.default_rng(2024), 20_001)  # odd size: one pair cut
    assert z.shape == (20_001,)
    assert stats.kstest(z, "norm").pvalue > 0.01
    assert standard_normal(np.random.default_rng(0), (4, 5)).shape == (4, 5)


def test_standard_normal_secure_default():
    z = standard_normal(check_rng(None), 100_000)
    # unseeded: alpha = 1e-9 (a false alarm at most 1e-9 a run); the power of 100,000 draws:
    # a law 10 % wider, sqrt(n) * D ~ 7, gives p ~ 1e-40
    assert stats.kstest(z, "norm").pvalue > 1e-9
    assert stats.kstest(z, stats.norm(scale=1.1).cdf).pvalue < 1e-9


# ----------------------------------------------------------------------------- seeded releases
def test_legacy_random_state_is_refused():
    with pytest.raises(ValidationError, match="legacy numpy RandomState is refused"):
        check_rng(np.random.RandomState(0))


class _Constant:
    def __init__(self, value):
        self.value = value

    def random(self, size=None):
        return np.full(size, self.value) if size is not None else self.value


@pytest.mark.parametrize("value", [2.0, 1.0, -0.1, np.nan, np.inf, -np.inf])
def test_uniforms_outside_unit_interval_are_an_error(value):
    source = check_rng(_Constant(value))
    with pytest.raises(ValidationError, match="outside \\[0, 1\\); refusing to sample"):
        source.random(4)
    with pytest.raises(ValidationError, match="outside"):
        random_words(source, 2)
    with pytest.raises(ValidationError, match="outside"):
        uniform_open(source, 3)


def test_bad_shapes_and_words_from_user_sources():
    class Short:
        def random(self, size=None):
            return np.zeros(1)

    with pytest.raises(ValidationError, match="returned shape"):
        check_rng(Short()).random(3)

    class BadWords:
        def random(self, size=None):
            return np.zeros(size)

        def words(self, count):
            return np.zeros(count, dtype=np.int64)

    with pytest.raises(ValidationError, match="must return 2 uint64 words"):
        random_words(check_rng(BadWords()), 2)


def test_privatize_with_a_bad_source_raises_instead_of_releasing():
    from metricdp.mechanisms.exponential import exponential
    from metricdp.spaces import MetricSpace

    mech = exponential(MetricSpace.from_points(np.arange(4.0)[:, None]), 1.0)
    for value in (2.0, np.nan):
        with pytest.raises(ValidationError, match="outside"):
            mech.sample(np.arange(4), rng=_Constant(value))
        with pytest.raises(ValidationError, match="outside"):
            mech.sample(np.arange(4), rng=_Constant(value), exact=False)


def test_random_words():
    words = random_words(SecureRandom(), 10_000)
    assert words.dtype == np.uint64
    assert words.shape == (10_000,)
    bits = np.unpackbits(words.view(np.uint8))
    assert abs(bits.mean() - 0.5) < 0.01  # 640,000 bits: sd 0.0006
    g1, g2 = check_rng(3), check_rng(3)
    np.testing.assert_array_equal(random_words(g1, 5), random_words(g2, 5))
    # from a user source's uniforms: the top 53 bits of one, the next 11 of another
    half = check_rng(_Constant(0.5))
    np.testing.assert_array_equal(random_words(half, 2), [2**63 + 2**10] * 2)
    assert random_words(check_rng(_Constant(0.5)), 0).shape == (0,)


def test_release_rng_warns_unless_secure():
    assert is_secure(check_release_rng(None))
    for rng in (42, np.random.default_rng(0), _Constant(0.5)):
        with pytest.warns(PrivacyLeakWarning, match="NOT private"):
            source = check_release_rng(rng)
        assert not is_secure(source)
