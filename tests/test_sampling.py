"""Sampling from a mechanism: against its matrix, secure default, exactness of the inverse CDF."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metricdp import MetricSpace, PrivacyLeakWarning, ValidationError
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
    # unseeded, hence alpha = 1e-9 (a false alarm at most 1e-9 a run); a broken sampler fails by
    # orders of magnitude: the same draws against row 2's law (p = 0 to double precision)
    assert _chi_square(mech, 3, draws) > 1e-9
    assert _chi_square(mech, 2, draws) < 1e-9
    single = mech.sample(3)
    assert np.ndim(single) == 0
    assert 0 <= int(single) < mech.n


def test_privatize_labels():
    mech = _mechanism()
    with pytest.warns(PrivacyLeakWarning, match="NOT private"):  # a seeded release warns
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


# ============================================================================= exact sampler
# metricdp.sampling: the realized distribution is the row's exact rationals, shown by
# enumerating every word string the sampler can consume (same code, words of a few bits).
from collections import defaultdict  # noqa: E402
from fractions import Fraction  # noqa: E402

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from metricdp._random import check_rng  # noqa: E402
from metricdp.audit import audit  # noqa: E402
from metricdp.sampling import ExactTable, sample_exact  # noqa: E402


class _NeedMore(Exception):
    pass


class Replay:
    """A deterministic bit source: replays ``prefix`` word by word, then asks for more."""

    def __init__(self, prefix):
        self.prefix = np.array(prefix, dtype=np.uint64)
        self.used = 0

    def words(self, count):
        start = self.used
        self.used += count
        if self.used > len(self.prefix):
            raise _NeedMore
        return self.prefix[start : self.used]

    def random(self, size=None):
        raise AssertionError("the exact sampler must not read float uniforms")


def enumerate_row(table: ExactTable, row: int, max_nodes: int = 100_000) -> dict[int, Fraction]:
    """Exact output law of one attempt, conditioned on acceptance, over every word string."""
    base = 1 << table.word_bits
    mass: dict[int, Fraction] = defaultdict(Fraction)
    stack: list[tuple[int, ...]] = [()]
    nodes = 0
    while stack:
        prefix = stack.pop()
        nodes += 1
        assert nodes <= max_nodes, "enumeration tree larger than expected"
        source = Replay(prefix)
        try:
            out = int(table.sample([row], source, _rounds=1)[0])
        except _NeedMore:
            stack.extend((*prefix, w) for w in range(base))
            continue
        assert source.used == len(prefix)
        mass[out] += Fraction(1, base ** len(prefix))
    assert sum(mass.values()) == 1  # the tree is complete: every string decides
    reject = mass.pop(-1, Fraction(0))
    assert reject < 1
    return {k: v / (1 - reject) for k, v in mass.items() if v}


def enumerate_states(table: ExactTable, row: int, max_nodes: int = 400_000) -> dict[int, Fraction]:
    """As :func:`enumerate_row`, walking the exact finish by its states instead of replaying.

    The first word goes through the real ``sample``; an undecided one continues from
    R's interval [X 2**G, (X + 1) 2**G) through the table's own ``_decide``/``_refine``,
    every next word value weighted 2**-word_bits: linear in the tree, not quadratic.
    """
    base = 1 << table.word_bits
    mass: dict[int, Fraction] = defaultdict(Fraction)
    low, _ = table._exact_row(row)
    gap = int(table.scale[row]) - low
    stack: list[tuple[int, int, int]] = []
    for word in range(base):
        try:
            out = int(table.sample([row], Replay((word,)), _rounds=1)[0])
        except _NeedMore:
            x = word % int(table.total[row])
            stack.append((x << gap, gap, 1))
            continue
        mass[out] += Fraction(1, base)
    nodes = 0
    while stack:
        lo, left, depth = stack.pop()
        nodes += 1
        assert nodes <= max_nodes, "enumeration tree larger than expected"
        k = table._decide(row, lo, left)
        if k is None:
            stack.extend((*table._refine(lo, left, word), depth + 1) for word in range(base))
        else:
            mass[-1 if k == table.n else k] += Fraction(1, base**depth)
    assert sum(mass.values()) == 1
    reject = mass.pop(-1, Fraction(0))
    return {k: v / (1 - reject) for k, v in mass.items() if v}


def exact_law(row) -> dict[int, Fraction]:
    weights = [Fraction(float(p)) for p in row]
    total = sum(weights)
    return {k: w / total for k, w in enumerate(weights) if w}


EXTREME_ROWS = [
    [0.5, 0.25, 0.25],  # dyadic, nothing truncated: the fast path decides every draw
    [0.0, 0.3, 0.0, 0.7],  # zeros are never drawn
    [0.1] * 10,  # float sum is not 1
    [0.7, 1e-30, 0.3],
    [1e-300, 0.999, 1e-30],
    [5e-324, 1.0],  # the smallest subnormal beside 1
    [1.0 - 2**-53, 2.2250738585072014e-308, 1e-310],  # min normal and a subnormal
]


@pytest.mark.slow
@pytest.mark.parametrize("row", EXTREME_ROWS)
@pytest.mark.parametrize(("word_bits", "precision"), [(4, 2), (6, 4)])
def test_enumeration_realizes_exact_rationals(row, word_bits, precision):
    table = ExactTable.from_matrix(np.array([row]), word_bits=word_bits, precision=precision)
    assert enumerate_states(table, 0) == exact_law(row)


@pytest.mark.slow
@pytest.mark.parametrize("row", [[0.7, 1e-30, 0.3], [0.1] * 10, [2**-60, 0.5, 0.5]])
def test_enumeration_replaying_every_word_string(row):
    """End to end through ``sample``: every word string, replayed (quadratic, so short rows)."""
    table = ExactTable.from_matrix(np.array([row]), word_bits=4, precision=2)
    assert enumerate_row(table, 0) == exact_law(row) == enumerate_states(table, 0)


@pytest.mark.parametrize("row", [[1.0], [0.75, 0.25], [1e-30, 1.0]])
def test_enumeration_two_bit_words(row):
    table = ExactTable.from_matrix(np.array([row]), word_bits=2, precision=1)
    assert enumerate_row(table, 0) == exact_law(row)


@pytest.mark.parametrize("row", [[0.5, 0.25, 0.25], [0.7, 1e-12, 0.3], [0.2, 0.3, 0.5, 1e-5]])
def test_enumeration_with_byte_words(row):
    table = ExactTable.from_matrix(np.array([row]), word_bits=8, precision=6)
    assert enumerate_states(table, 0) == exact_law(row)


def test_enumeration_covers_both_paths():
    """The small-range row is decided by one word; the extreme row needs the exact finish."""
    exact = ExactTable.from_matrix(np.array([[0.5, 0.25, 0.25]]), word_bits=8, precision=6)
    assert not exact.truncated[0]
    for w in range(256):
        out = exact.sample([0], Replay((w,)), _rounds=1)  # never asks for a second word
        assert out[0] in (0, 1, 2, -1)
    extreme = ExactTable.from_matrix(np.array([[5e-324, 1.0]]), word_bits=8, precision=6)
    assert extreme.truncated[0]
    # the word that lands on the boundary of the subnormal's interval needs more words
    with pytest.raises(_NeedMore):
        extreme.sample([0], Replay((0,)), _rounds=1)


_ENTRY = st.one_of(
    st.sampled_from([0.0, 5e-324, 1e-310, 1e-300, 1e-30, 1e-16, 0.5, 1.0]),
    st.floats(min_value=1e-60, max_value=1.0),
)


@pytest.mark.slow
@given(st.lists(_ENTRY, min_size=1, max_size=4).filter(lambda r: sum(r) > 0))
def test_enumeration_property_random_rows(row):
    table = ExactTable.from_matrix(np.array([row]), word_bits=4, precision=2)
    assert enumerate_states(table, 0) == exact_law(row)


def test_table_bounds_the_exact_prefix_sums():
    """H_k <= C_k / 2**G <= H_k + kappa_k, on rows of a random matrix (production sizes)."""
    g = np.random.default_rng(3)
    m = g.random((20, 50)) ** 8
    m[:, ::7] *= 1e-250
    m[3, 4] = 0.0
    table = ExactTable.from_matrix(m)
    for row in range(20):
        low, cums = table._exact_row(row)
        unit = 2 ** (int(table.scale[row]) - low)
        for k in range(51):
            h = int(table.prefix[row, k])
            kappa = k if table.truncated[row] else 0
            assert h * unit <= cums[k] <= (h + kappa) * unit
        assert int(table.total[row]) * unit >= cums[-1]
    assert table.nbytes < 1.1 * m.nbytes


def test_chi_square_large_row_fixed_seed():
    n = 2_000
    x = np.linspace(0, 1, n)
    row = np.exp(-40 * np.abs(x - 0.3))
    row /= row.sum()
    table = ExactTable.from_matrix(row[None, :])
    draws = table.sample(np.zeros(400_000, dtype=np.intp), check_rng(2024))
    counts = np.bincount(draws, minlength=n)
    # pool outputs into 40 bins of equal expected mass
    edges = np.searchsorted(np.cumsum(row), np.linspace(0, 1, 41)[1:-1])
    observed = np.add.reduceat(counts, np.r_[0, edges])
    expected = np.add.reduceat(row, np.r_[0, edges]) * len(draws)
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_exact_sampler_mixed_rows_chi_square_and_order():
    mech = _mechanism(n=6)
    inputs = np.tile(np.arange(mech.n), 20_000)
    np.random.default_rng(1).shuffle(inputs)
    out = mech.sample(inputs, rng=77)
    for row in range(mech.n):
        assert _chi_square(mech, row, out[inputs == row]) > 0.001
    assert (out[inputs == 0] != 1).all()  # the zero entry


def test_exact_sampler_tiny_entries_are_drawn_at_their_rate():
    # 1e-12 beside 0.5: the float path would give it the 2**-53 grid's share; the exact one
    # draws it with probability exactly 1e-12 / sum. Seen at a scale we can test: 1e-3.
    row = np.array([[0.5, 1e-3, 0.5 - 1e-3]])
    draws = sample_exact(row, np.zeros(200_000, dtype=np.intp), check_rng(5))
    assert stats.binomtest(int((draws == 1).sum()), len(draws), 1e-3).pvalue > 1e-3


def test_exact_sampler_reads_only_words_from_the_source():
    mech = _mechanism(n=4)

    class Words:
        def __init__(self):
            self.g = np.random.default_rng(0)

        def words(self, count):
            return self.g.integers(0, 2**64, size=count, dtype=np.uint64)

        def random(self, size=None):
            raise AssertionError("no floats")

    out = mech.sample(np.arange(4).repeat(5), rng=Words())
    assert out.shape == (20,)
    assert mech.sample(np.arange(4), rng=0, exact=False).shape == (4,)


def test_exact_table_rejects_bad_rows():
    with pytest.raises(ValidationError, match="row 1 has no positive entry"):
        ExactTable.from_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValidationError, match="finite and non-negative"):
        ExactTable.from_matrix(np.array([[1.0, -0.5]]))
    with pytest.raises(ValidationError, match="finite and non-negative"):
        ExactTable.from_matrix(np.array([[1.0, np.nan]]))
    with pytest.raises(ValidationError, match="precision < word_bits"):
        ExactTable.from_matrix(np.array([[1.0]]), word_bits=8, precision=8)
    with pytest.raises(ValidationError, match="row index outside"):
        sample_exact(np.array([[1.0]]), [1], check_rng(0))


# ----------------------------------------------------------------------------- the truncated geometric, exactly
def _truncated_geometric(n: int, epsilon: float) -> np.ndarray:
    """Ghosh, Roughgarden, Sundararajan (STOC 2009): exactly eps-DP on the line 0..n-1."""
    a = np.exp(-epsilon)
    k = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    m = (1 - a) / (1 + a) * a**k
    m[:, 0] = a ** np.arange(n) / (1 + a)
    m[:, -1] = a ** (n - 1 - np.arange(n)) / (1 + a)
    return m


def _float_sampler_law(m: np.ndarray) -> np.ndarray:
    """The float inverse-CDF sampler's exact law: every one of the 2**53 uniforms, by bisection.

    ``sample_from_matrix`` is monotone in its uniform, so output >= j on an interval of
    k / 2**53; its first k is found by bisection, running the real sampler.
    """
    n = m.shape[0]
    cdf = np.cumsum(m, axis=1)
    law = np.zeros_like(m)
    for u in range(n):
        lo = np.zeros(n + 1, dtype=np.int64)
        hi = np.full(n + 1, 2**53, dtype=np.int64)  # first k with output >= j (2**53: none)
        lo[0] = hi[0] = 0
        for _ in range(54):
            mid = (lo + hi) // 2
            out = sample_from_matrix(cdf[u : u + 1], np.zeros(n + 1, dtype=np.intp), Fixed(mid / TWO_53))
            ge = out >= np.arange(n + 1)
            hi = np.where(ge & (lo < hi), mid, hi)
            lo = np.where(~ge & (lo < hi), mid + 1, lo)
        law[u] = np.diff(hi) / TWO_53
    return law


@pytest.mark.parametrize("n", [30, 38, 60])
def test_truncated_geometric_is_exact(n):
    eps = 1.0
    m = _truncated_geometric(n, eps)
    d = np.abs(np.subtract.outer(np.arange(n), np.arange(n))).astype(float)
    # the float sampler's realized law fails the audit (infinitely from n = 60)
    realized_float = audit(_float_sampler_law(m), d).epsilon
    assert realized_float > eps * (1 + 1e-9)
    if n == 60:
        assert realized_float == np.inf
    # the exact sampler realizes m / (exact row sums): audited at eps
    assert audit(m, d, normalize=True).epsilon <= eps * (1 + 1e-9)


def test_enumeration_detects_a_wrong_table():
    """The oracle can fail: one unit moved between two prefix sums changes the law."""
    row = [0.5, 0.25, 0.25]
    table = ExactTable.from_matrix(np.array([row]), word_bits=6, precision=4)
    assert not table.prefix.flags.writeable  # read-only once built
    with pytest.raises(ValueError):
        table.prefix.setflags(write=True)  # for good: the wrong table is a new one
    prefix = table.prefix.copy()
    prefix[0, 1] += np.uint64(1)
    table = ExactTable(table.matrix, prefix, table.scale, table.truncated, table.total, table.limit, table.word_bits)
    assert enumerate_states(table, 0) != exact_law(row)


def test_certify_audits_the_rows_the_sampler_realizes():
    """A float matrix tight at eps whose row 0 sums to 1 - 5e-10: its releases are not eps-mDP."""
    from metricdp.errors import PrivacyViolationError
    from metricdp.mechanisms.base import certify

    space = MetricSpace.from_distances([[0.0, 1.0], [1.0, 0.0]])
    eps, p = 0.01, 0.01
    m = np.array([[np.exp(eps) * p, 1 - np.exp(eps) * p - 5e-10], [p, 1 - p]])
    assert audit(m, space.distances).satisfies(eps)  # the floats as given pass
    # realized: M[0,0] / S_0 over M[1,0] / S_1 = e^eps (1 + 5e-10): level eps + 5e-10
    assert audit(m, space.distances, normalize=True).epsilon == pytest.approx(eps + 5e-10, rel=1e-6)
    with pytest.raises(PrivacyViolationError, match="refusing to return it"):
        certify(m, space, eps, "test")
    ok = certify(np.array([[np.exp(eps) * p, 1 - np.exp(eps) * p], [p, 1 - p]]), space, eps, "test")
    assert ok.info["epsilon_audit"] <= eps * (1 + 1e-9)


def test_a_pickled_mechanism_is_rebuilt_through_the_audit():
    import pickle

    mech = _mechanism()
    back = pickle.loads(pickle.dumps(mech))
    np.testing.assert_array_equal(back.matrix, mech.matrix)
    assert back.epsilon == mech.epsilon and back.labels == mech.labels
    # a tampered payload meets the constructor's audit on the way in
    payload = pickle.dumps(mech).replace(b"test", b"tes2")
    assert pickle.loads(payload).name == "tes2"
    reduced = mech.__reduce__()
    restore, args = reduced[0], list(reduced[1])
    args[2] = mech.epsilon / 100  # a claim the matrix does not meet
    with pytest.raises(Exception, match="refusing to return it"):
        restore(*args)


# ----------------------------------------------------------------------------- matrix-free samplers (review)
def test_clamped_distances_keep_every_weight_positive_and_normal():
    from metricdp.sampling import DISTANCE_EXPONENT_CAP, clamp_distances

    d = np.array([0.0, 2.2, 73.7, 1492.0, 1e300])
    w = np.exp(-0.5 * 1.0 * clamp_distances(d, 1.0))
    assert np.all(w >= np.finfo(float).tiny) and w[0] == 1.0
    assert clamp_distances(d, 1.0).max() == 2 * DISTANCE_EXPONENT_CAP


def test_text_exponential_releases_every_word_with_positive_probability():
    # review: words at 0, 2.2 and 73.7 with eps = 1 -- the float inverse CDF could never release
    # the far word from the first (cdf[-1] == cdf[-2]) but could from the second
    from metricdp.pointspace import PointSpace
    from metricdp.text.ball import pair_distances
    from metricdp.text.exponential import ExponentialText

    mech = ExponentialText(PointSpace.from_points([[0.0], [2.2], [73.7]]), 1.0)
    for word in range(3):
        inside, _exact, bound = mech._make(np.array([word]))[0]
        weights = mech._weights(pair_distances(mech.space, np.full(3, word, dtype=np.intp), np.arange(3)))
        assert np.all(weights > 0)  # inside the ball from the exact table, outside by rejection against the bound
        assert len(inside) == 3 or bound[0] > 0


def test_uniform_below_is_exactly_uniform_by_chi_square():
    from metricdp.sampling import uniform_below

    draws = uniform_below(np.full(60_000, 7), np.random.default_rng(5))
    counts = np.bincount(draws, minlength=7)
    assert stats.chisquare(counts).pvalue > 1e-3 and draws.min() == 0 and draws.max() == 6
    with pytest.raises(ValidationError):
        uniform_below([0], np.random.default_rng(0))


def test_ssem_choice_on_the_review_space_has_no_zero_weight():
    # review: points 0, 4 and 1492 on a line, eps = 1, m = 6: 2.95-mDP realized against 1.0
    from metricdp.mechanisms.subsampled import subsampled_exponential_exact

    space = MetricSpace.from_points([[0.0], [4.0], [1492.0]])
    exact = subsampled_exponential_exact(space, 1.0, 3, base=[1 - 2**-14, 0.0, 2**-14])
    assert audit_epsilon(exact, space.distances) <= 1.0 * (1 + 1e-9)


def test_a_row_of_a_table_is_that_row_s_table():
    m = np.array([[0.5, 0.25, 0.25], [1e-300, 1.0, 0.0], [0.1, 0.2, 0.7]])
    block = ExactTable.from_matrix(m)
    for i in range(3):
        alone = ExactTable.from_matrix(m[i : i + 1])
        row = block.row(i)
        np.testing.assert_array_equal(row.prefix, alone.prefix)
        np.testing.assert_array_equal(row.limit, alone.limit)
        assert row.sample(np.zeros(50, dtype=np.intp), np.random.default_rng(i)).tolist() == \
            alone.sample(np.zeros(50, dtype=np.intp), np.random.default_rng(i)).tolist()


# ----------------------------------------------------------------------------- a separate output set
def test_rectangular_sample_matches_matrix_chi_square():
    from metricdp.outputs import OutputSet

    g = np.random.default_rng(7)
    space = MetricSpace.from_points(g.normal(size=(5, 2)))
    outputs = OutputSet.from_points(space, g.normal(size=(3, 2)), ["p", "q", "r"])
    m = g.random((5, 3)) + 0.05
    m /= m.sum(axis=1, keepdims=True)
    mech = Mechanism.from_matrix(m, space, audit_epsilon(m, space.distances) * (1 + 1e-12), outputs=outputs)
    inputs = np.tile(np.arange(5), 10_000)
    for exact in (True, False):
        out = mech.sample(inputs, rng=11, exact=exact)
        assert out.min() >= 0 and out.max() <= 2
        for row in range(5):
            counts = np.bincount(out[inputs == row], minlength=3)
            assert stats.chisquare(counts, m[row] * counts.sum()).pvalue > 0.001
    with pytest.warns(PrivacyLeakWarning):
        released = mech.privatize(["0", "4", "4"], rng=3)
    assert set(released) <= {"p", "q", "r"}


# ---------------------------------------------------------------- the table build against its oracle
from metricdp.sampling import _fill_block, _fill_block_reference  # noqa: E402

_ENTRY = st.one_of(
    st.just(0.0),
    st.floats(min_value=5e-324, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.integers(-1074, 1000).map(lambda e: float(np.ldexp(1.0, e))),
)


@given(
    st.lists(st.lists(_ENTRY, min_size=1, max_size=12), min_size=1, max_size=4).filter(
        lambda rows: len({len(r) for r in rows}) == 1
    ),
    st.sampled_from([56, 12, 3]),
)
def test_fill_block_equals_integer_shift_reference(rows, precision):
    # the float-scaling build (floor of p / 2**sigma) is the mantissa-shift build, bit for bit:
    # prefix sums, scales and truncation flags (subnormals, 2**-1074, huge sums, zeros)
    m = np.array(rows, dtype=np.float64)
    with np.errstate(over="ignore"):
        if not np.isfinite(m.sum(axis=1)).all():
            return
    a = np.zeros((m.shape[0], m.shape[1] + 1), dtype=np.uint64)
    b = np.zeros_like(a)
    s1, c1 = _fill_block(m, a, precision)
    s2, c2 = _fill_block_reference(m, b, precision)
    assert np.array_equal(s1, s2) and np.array_equal(c1, c2) and np.array_equal(a, b)


def test_fill_block_flags_entries_scaled_to_nothing():
    # a row sum of 2**1000 puts sigma = 944: an entry 2**-1074 scales below every float and is truncated
    m = np.array([[2.0**1000, 2.0**-1074]])
    prefix = np.zeros((1, 3), dtype=np.uint64)
    _, cut = _fill_block(m, prefix, 56)
    assert cut.tolist() == [True] and prefix[0, 2] == prefix[0, 1]
