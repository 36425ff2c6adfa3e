"""LDP frequency oracles (metricdp.ldp): laws, eps-LDP audits, support probabilities, estimates, memo."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

import metricdp.estimation as est
from metricdp import _ibu_kernels
from metricdp.accounting.ledger import Ledger
from metricdp.audit import audit
from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.estimation import ibu, matrix_inversion
from metricdp.ldp import GRR, OLH, OUE, HadamardResponse, SubsetSelection, discrete_metric, privatize_longitudinal
from metricdp.ldp._base import coins, word_coins
from metricdp.ldp.memo import from_codes, to_codes
from metricdp.ldp.oracles import _below
from metricdp.mechanisms.krr import krr_matrix


def small_oracles() -> list:
    """Oracles whose full channel is a small matrix."""
    return [
        GRR(4, 1.0),
        OUE(4, 1.0),
        OUE(3, 0.3),
        SubsetSelection(5, 0.7),
        SubsetSelection(5, 0.7, d=3),
        HadamardResponse(5, 1.0),
        HadamardResponse(3, 2.0),
        OLH(3, 1.0, prime=5),
        OLH(4, 0.5, g=3, prime=7),
    ]


def column_reports(o) -> list:
    """The report of every column of ``o.matrix()`` (decoded independently of report_index)."""
    n_cols = o.matrix().shape[1]
    if isinstance(o, OUE | SubsetSelection):
        return [np.array([[(j >> b) & 1 for b in range(o.k)]], dtype=np.uint8) for j in range(n_cols)]
    if isinstance(o, OLH):
        out = []
        for j in range(n_cols):
            y, ab = j % o.g, j // o.g
            out.append(np.array([[ab // o.prime + 1, ab % o.prime, y]]))
        return out
    return [np.array([j]) for j in range(n_cols)]


@pytest.mark.parametrize("o", small_oracles(), ids=repr)
def test_audit_is_exactly_epsilon(o) -> None:
    m = o.matrix()
    assert np.allclose(m.sum(axis=1), 1.0, atol=1e-12)
    assert audit(m, discrete_metric(o.k)).epsilon == pytest.approx(o.epsilon, rel=1e-9)


@pytest.mark.parametrize("o", small_oracles(), ids=repr)
def test_support_probabilities_match_the_channel(o) -> None:
    # S[j, v] = 1 when the report of column j supports v, by the oracle's own support()
    s = np.stack([o.support(r) for r in column_reports(o)])
    assert set(np.unique(s)) <= {0.0, 1.0}
    pr = o.matrix() @ s  # Pr[support v | x]
    expected = np.full((o.k, o.k), o.q_star)
    np.fill_diagonal(expected, o.p_star)
    assert np.allclose(pr, expected, atol=1e-12)


@pytest.mark.parametrize("o", small_oracles(), ids=repr)
def test_law_by_chi_square(o) -> None:
    m = o.matrix()
    n = 60 * m.shape[1]
    for x in range(o.k):
        reports = o.sample(np.full(n, x), rng=1000 + x)
        counts = np.bincount(o.report_index(reports), minlength=m.shape[1])
        assert counts.size == m.shape[1]
        zero = m[x] == 0
        assert counts[zero].sum() == 0, "a report of probability 0"
        p = chisquare(counts[~zero], n * m[x, ~zero] / m[x, ~zero].sum()).pvalue
        assert p > 1e-4, (o, x, p)


def test_report_index_matches_the_columns() -> None:
    for o in small_oracles():
        idx = np.concatenate([o.report_index(r) for r in column_reports(o)])
        assert idx.tolist() == list(range(o.matrix().shape[1]))


def test_grr_is_krr() -> None:
    assert np.allclose(GRR(6, 0.8).matrix(), krr_matrix(6, 0.8), atol=1e-15)


@pytest.mark.parametrize("make", [GRR, OUE, SubsetSelection, HadamardResponse, OLH])
def test_unbiased_estimate(make) -> None:
    k, n = 10, 60_000
    o = make(k, 1.0)
    truth = np.arange(1, k + 1) / (k * (k + 1) / 2)
    x = np.repeat(np.arange(k), (truth * n).astype(int))
    x = np.concatenate([x, np.zeros(n - x.size, dtype=int)])
    f = np.bincount(x, minlength=k) / n
    e = o.estimate(o.support(o.sample(x, rng=7)), n)
    z = (e - f) / np.sqrt([o.variance(n, fi) for fi in f])
    assert np.abs(z).max() < 4.5, z
    assert abs(e.sum() - 1) < 0.2
    # the support channel reaches the same answer through IBU and inversion
    s = o.support(o.sample(x, rng=8))
    for estimate in (ibu(s, o.channel()).estimate, matrix_inversion(s, o.channel())):
        assert np.abs(estimate - f).max() < 0.05


def test_unbiased_on_average_over_repetitions() -> None:
    # mean of the estimate over many independent small collections: the bias is 0
    o = OUE(4, 1.0)
    x = np.repeat(np.arange(4), [50, 30, 15, 5])
    reps = 400
    est_all = np.stack([o.estimate(o.support(o.sample(x, rng=s)), x.size) for s in range(reps)])
    sd = np.sqrt([o.variance(x.size, f) for f in (0.5, 0.3, 0.15, 0.05)]) / math.sqrt(reps)
    assert np.all(np.abs(est_all.mean(axis=0) - [0.5, 0.3, 0.15, 0.05]) < 4.5 * sd)


def test_hadamard_fast_transform_support() -> None:
    o = HadamardResponse(11, 1.0)
    r = o.sample(np.arange(11).repeat(5), rng=3)
    brute = np.zeros(o.k)
    for v in range(o.k):
        brute[v] = sum(bin((v + 1) & int(y)).count("1") % 2 == 0 for y in r)
    assert o.support(r).tolist() == brute.tolist()


def test_olh_support_brute_force() -> None:
    o = OLH(6, 1.0)
    r = o.sample(np.arange(6).repeat(4), rng=3)
    brute = [sum(((int(a) * v + int(b)) % o.prime) % o.g == int(y) for a, b, y in r) for v in range(6)]
    assert o.support(r).tolist() == brute


def test_privatize_is_secure_by_default_and_warns_when_seeded() -> None:
    o = OUE(5, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = o.privatize([0, 1, 4])
    assert out.shape == (3, 5)
    with pytest.warns(PrivacyLeakWarning):
        o.privatize([0, 1], rng=3)


@pytest.mark.parametrize("bad", [[0, 5], [-1], [[0, 1]], ["a"]])
def test_bad_values_one_error(bad) -> None:
    with pytest.raises(ValidationError):
        GRR(5, 1.0).sample(bad, rng=1)


def test_bad_parameters() -> None:
    with pytest.raises(ValidationError, match="prime"):
        OLH(10, 1.0, prime=7)
    with pytest.raises(ValidationError, match="prime"):
        OLH(3, 1.0, prime=9)
    with pytest.raises(ValidationError):
        SubsetSelection(5, 1.0, d=5)
    with pytest.raises(ValidationError, match="too large"):
        OUE(20, 1.0).matrix()


# ----------------------------------------------------------------------------- IBU speed paths
def _ibu_paths(counts, m, monkeypatch) -> list:
    out = [ibu(counts, m, tol=1e-13, max_iter=400)]
    with monkeypatch.context() as mp:
        mp.setattr(est, "IBU_THREADS_MIN_ENTRIES", 0)  # the dense update on two threads, whatever the size
        mp.setattr(est.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
        out.append(ibu(counts, m, tol=1e-13, max_iter=400))
        mp.setattr(_ibu_kernels, "KERNELS", None)
        out.append(ibu(counts, m, tol=1e-13, max_iter=400))  # numpy, structured where it applies
        mp.setattr(est, "krr_structure", lambda _m: None)
        out.append(ibu(counts, m, tol=1e-13, max_iter=400))  # numpy dense: the reference
    return out


@pytest.mark.parametrize("kind", ["krr", "oue", "dense", "zeros"])
def test_ibu_fast_paths_equal_the_dense_reference(kind, monkeypatch) -> None:
    g = np.random.default_rng(5)
    k = 30
    if kind == "krr":
        m = krr_matrix(k, 0.7)
    elif kind == "oue":
        m = OUE(k, 0.7).channel()
    else:
        m = g.random((k, k + 5)) ** 3
        m /= m.sum(axis=1, keepdims=True)
    counts = g.integers(0, 50, size=(3, m.shape[1])).astype(float)
    if kind == "zeros":
        counts[:, :7] = 0  # unobserved outputs
    fast, threaded, numpy_fast, dense = _ibu_paths(counts, m, monkeypatch)
    for r in (fast, threaded, numpy_fast):
        assert np.abs(r.estimate - dense.estimate).max() <= 1e-12
        assert np.abs(np.asarray(r.iterations) - dense.iterations).max() <= 1
    single = _ibu_paths(counts[0], m, monkeypatch)
    assert all(np.abs(r.estimate - single[3].estimate).max() <= 1e-12 for r in single)
    assert np.abs(single[3].estimate - dense.estimate[0]).max() <= 1e-12


@pytest.mark.parametrize("shape", [(1, 3), (3, 5), (4, 4), (5, 9), (8, 3), (13, 13), (37, 70), (64, 64)])
def test_ibu_dense_kernel_equals_the_reference_on_any_shape(shape, monkeypatch) -> None:
    # the compiled pass takes rows in blocks of four: fewer rows than a block, whole blocks only,
    # blocks and a remainder; a column never released, and a row whose only output is unobserved
    # (its estimate is 0 after one update: a zero weight in the pass)
    n_in, n_out = shape
    g = np.random.default_rng(n_in * 100 + n_out)
    m = g.random(shape) ** 3
    m[:, -1] = 0.0
    zero = n_in // 2 if n_in > 1 else None
    if zero is not None:
        m[zero] = 0.0
        m[zero, 0] = 1.0
    m /= m.sum(axis=1, keepdims=True)
    counts = g.integers(1, 50, size=(3, n_out)).astype(float)
    counts[:, [0, -1]] = 0.0
    counts[2] = counts[0]
    fast, threaded, numpy_fast, dense = _ibu_paths(counts, m, monkeypatch)
    for r in (fast, threaded, numpy_fast):
        assert np.abs(r.estimate - dense.estimate).max() <= 1e-12
        assert np.abs(np.asarray(r.iterations) - dense.iterations).max() <= 1
    if zero is not None:
        assert np.all(fast.estimate[:, zero] == 0.0)
        assert np.all(threaded.estimate[:, zero] == 0.0)
    if _ibu_kernels.KERNELS is not None:  # the compiled passes (the fast extra): same data, same bits
        assert np.array_equal(fast.estimate[2], fast.estimate[0])
        assert np.array_equal(threaded.estimate[2], threaded.estimate[0])


@pytest.mark.skipif(_ibu_kernels.KERNELS is None, reason="numba not installed")
@pytest.mark.parametrize("shape", [(1, 3), (5, 9), (13, 13), (37, 70)])
@pytest.mark.parametrize("cut", ["none", "even", "odd", "empty-first", "empty-last", "three"])
def test_ibu_dense_team_equals_the_reference_on_any_split(shape, cut, monkeypatch) -> None:
    # rows cut anywhere (on a block of four or not, a block of no rows, three blocks): every split agrees with the
    # numpy reference to 1e-12, gives the same bits on every run, and with no cut is the one-thread kernel
    n_in, n_out = shape
    g = np.random.default_rng(n_in * 100 + n_out + 1)
    m = g.random(shape) ** 3
    m /= m.sum(axis=1, keepdims=True)
    q = g.integers(1, 50, size=n_out).astype(float)
    q[0] = 0.0
    q /= q.sum()
    bounds = {
        "none": (),
        "even": _ibu_kernels.row_blocks(n_in, 2),
        "odd": (n_in // 2 + (n_in // 2) % 2 - 1,) if n_in > 1 else (1,),
        "empty-first": (0,),
        "empty-last": (n_in,),
        "three": (min(1, n_in), min(5, n_in)),
    }[cut]
    p = np.full(n_in, 1.0 / n_in)
    with _ibu_kernels.DenseTeam(m, bounds) as team:
        runs = [team.run(p, q, 1e-13, est.IBU_FLOOR, 400) for _ in range(2)]
    for _ in range(4):  # new teams: new working vectors, at other addresses
        with _ibu_kernels.DenseTeam(m, bounds) as team:
            runs.append(team.run(p, q, 1e-13, est.IBU_FLOOR, 400))
    assert np.all(p == 1.0 / n_in)  # the start is not modified
    for r in runs[1:]:
        assert np.array_equal(r[0], runs[0][0]) and r[1:] == runs[0][1:]
    monkeypatch.setattr(_ibu_kernels, "KERNELS", None)
    monkeypatch.setattr(est, "krr_structure", lambda _m: None)
    ref = ibu(q, m, tol=1e-13, max_iter=400)
    assert np.abs(runs[0][0] - ref.estimate).max() <= 1e-12
    assert abs(runs[0][1] - ref.iterations) <= 1
    if cut == "none":
        one = _ibu_kernels.ibu_dense(p.copy(), q, m, 1e-13, est.IBU_FLOOR, 400)
        assert np.abs(one[0] - runs[0][0]).max() <= 1e-15 and one[1:] == runs[0][1:]


@pytest.mark.skipif(_ibu_kernels.KERNELS is None, reason="numba not installed")
def test_ibu_dense_team_refuses_bounds_out_of_order() -> None:
    m = np.full((8, 2), 0.5)
    with pytest.raises(ValueError, match=r"non-decreasing within 0\.\.8, got \(5, 3\)"):
        _ibu_kernels.DenseTeam(m, (5, 3))
    with pytest.raises(ValueError, match="non-decreasing"):
        _ibu_kernels.DenseTeam(m, (9,))


def test_row_blocks_cut_on_blocks_of_four() -> None:
    assert _ibu_kernels.row_blocks(10, 1) == ()
    assert _ibu_kernels.row_blocks(10, 2) == (4,)
    assert _ibu_kernels.row_blocks(1000, 2) == (500,)
    assert _ibu_kernels.row_blocks(1001, 2) == (500,)
    assert _ibu_kernels.row_blocks(3, 2) == (0,)  # too few rows for two blocks of four: the caller does them all
    assert _ibu_kernels.row_blocks(1000, 3) == (332, 668)


def test_structure_detection() -> None:
    assert est.krr_structure(krr_matrix(4, 1.0)) is not None
    m = krr_matrix(4, 1.0)
    m[1, 2] += 1e-17 if m[1, 2] + 1e-17 != m[1, 2] else 1e-16
    assert est.krr_structure(m) is None
    assert est.krr_structure(np.ones((2, 3)) / 3) is None


# ----------------------------------------------------------------------------- memo
@pytest.mark.parametrize(
    "o", [OUE(40, 1.0), SubsetSelection(9, 1.0), OLH(7, 1.0), HadamardResponse(6, 1.0), GRR(5, 1.0)], ids=repr
)
def test_codes_round_trip(o) -> None:
    r = o.sample(np.arange(o.k) % o.k, rng=2)
    assert np.array_equal(from_codes(o, to_codes(o, r)), np.asarray(r))


@pytest.mark.parametrize("o", [OUE(12, 1.0), OLH(9, 1.0), HadamardResponse(12, 1.0)], ids=repr)
def test_longitudinal_memo_repeats_the_first_report(o, tmp_path) -> None:
    users = np.array(["u1", "u2", "u3"])
    with Ledger(tmp_path / "l.db", budget=5.0) as ledger, warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        first, plan = privatize_longitudinal(o, [3, 4, 5], users, ledger, rng=1)
        plan.commit()
        again, plan2 = privatize_longitudinal(o, [3, 4, 6], users, ledger, rng=2)
        plan2.commit()
        assert np.array_equal(first[:2], again[:2])  # same (user, value): same report, free
        assert ledger.spent(users).tolist() == pytest.approx([1.0, 1.0, 2.0])
        # an aborted run's reports are not reused
        _, plan3 = privatize_longitudinal(o, [7], ["u1"], ledger, rng=3)
        plan3.abort()
        assert ledger.spent(["u1"]).tolist() == pytest.approx([1.0])


# ----------------------------------------------------------------------------- coins
class Words:
    """A word source replaying given 64-bit words."""

    def __init__(self, words) -> None:
        self.left = [int(w) for w in words]

    def random(self, size=None):
        raise AssertionError("coins must use words only")

    def words(self, count):
        out, self.left = self.left[:count], self.left[count:]
        return np.array(out, dtype=np.uint64)


def test_coin_byte_threshold_and_tie() -> None:
    # weights (2, 1): p = 1/3, 256 p = 85 + 1/3: a byte below 85 is True, above False; a byte of 85
    # goes to the word coin with p' = 1/3, whose threshold is t = floor(2**64 / 3) (2**64 p' = t + 1/3)
    t = 2**64 // 3
    bytes_word = int.from_bytes(bytes([84, 86, 85, 0, 0, 0, 0, 0]), "little")
    assert coins(2.0, 1.0, 3, Words([bytes_word, t - 1])).tolist() == [True, False, True]
    assert coins(2.0, 1.0, 1, Words([85, t + 1])).tolist() == [False]
    assert coins(2.0, 1.0, 1, Words([85, t, t, t + 5])).tolist() == [False]  # two word ties, then above
    assert coins(2.0, 1.0, 1, Words([85, t, t - 1])).tolist() == [True]  # a word tie, then below
    assert coins(0.0, 1.0, 4, Words([])).all() and not coins(1.0, 0.0, 2, Words([])).any()  # no draw
    with pytest.raises(ValidationError):
        coins(-1.0, 1.0, 1, Words([0]))


def test_word_coins_threshold_and_tie() -> None:
    t = 2**64 // 3
    draws = word_coins(Fraction(1, 3), 3, Words([t - 1, t + 1, t, t - 1]))
    assert draws.tolist() == [True, False, True]  # the tie is finished by the 4th word: t - 1 < t


def test_uniform_below_rejects_the_top_words() -> None:
    # bound 3: words >= 3 * floor(2**32 / 3) = 2**32 - 1 are replaced (by the top half of a fresh word)
    w = np.array([2**32 - 1, 7, 2**32 - 2], dtype=np.uint32)
    assert _below(w, 3, Words([5 << 32])).tolist() == [2, 1, (2**32 - 2) % 3]
    assert _below(np.array([2**32 - 1], dtype=np.uint32), 3, Words([(2**32 - 1) << 32, 4 << 32])).tolist() == [1]
    assert _below(np.array([2**32 - 1], dtype=np.uint32), 2**32, Words([])).tolist() == [2**32 - 1]


@pytest.mark.parametrize("k", [50, 5000])
def test_subset_selection_support_on_large_domains(k) -> None:
    # Floyd's steps over many categories: the true category is in the report with probability p*, each
    # other with q*; means over n users within 5 standard errors; every report has exactly d categories
    o = SubsetSelection(k, 1.0)
    n = 4000 if k == 50 else 400
    x = np.arange(n) % k
    r = o.sample(x, rng=11)
    assert (r.sum(axis=1) == o.d).all()
    hit = r[np.arange(n), x].mean()
    assert abs(hit - o.p_star) <= 5 * math.sqrt(o.p_star * (1 - o.p_star) / n)
    others = (r.sum() - r[np.arange(n), x].sum()) / (n * (k - 1))
    assert abs(others - o.q_star) <= 5 * math.sqrt(o.q_star / (n * (k - 1)))
    first = r[x != 0][:, 0].mean()  # one fixed other category
    assert abs(first - o.q_star) <= 5 * math.sqrt(o.q_star * (1 - o.q_star) / (x != 0).sum())


def test_coin_law() -> None:
    n = 200_000
    for w0, w1 in ((1.0, 1.0), (math.e, 1.0), (3.0, 0.25)):
        k = int(coins(w0, w1, n, np.random.default_rng(int(w0 * 10))).sum())
        p = w1 / (w0 + w1)
        assert chisquare([k, n - k], [n * p, n * (1 - p)]).pvalue > 1e-4
