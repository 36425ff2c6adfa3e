"""PEM heavy hitters (metricdp.ldp.heavy_hitters): rounds, per-report law, error against the exact-domain OLH."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import chisquare

from metricdp.errors import PrivacyLeakWarning, ValidationError
from metricdp.ldp import OLH, PrefixExtendingMethod
from metricdp.ldp.heavy_hitters import MAX_BITS


def population(bits: int, heavy: dict[int, int], background: int, seed: int) -> np.ndarray:
    """The heavy items repeated, plus ``background`` users on uniform other items, shuffled."""
    g = np.random.default_rng(seed)
    rest = g.integers(0, 1 << bits, size=2 * background)
    rest = rest[~np.isin(rest, list(heavy))][:background]
    x = np.concatenate([np.repeat(list(heavy), list(heavy.values())), rest])
    return g.permutation(x)


def test_rounds_by_hand() -> None:
    # top 4: start = ceil(log2 4) + 3 = 5 bits, then 8, then the last (shorter) step to 10
    pem = PrefixExtendingMethod(10, 1.0, top=4, step=3)
    assert pem.lengths == (5, 8, 10) and pem.groups == 3
    assert [pem.oracle(j).k for j in range(3)] == [32, 256, 1024]
    assert PrefixExtendingMethod(3, 1.0, top=32).lengths == (3,)  # the whole item at once
    assert PrefixExtendingMethod(12, 1.0, top=2, step=4, start=2).lengths == (2, 6, 10, 12)


def test_margin_by_hand() -> None:
    # bits 4, step 2, top 1, start 2: round 1 has 4 candidates, round 2 one kept prefix x 4 = 4; C = 8
    pem = PrefixExtendingMethod(4, 1.0, top=1, step=2, start=2)
    tau = pem.margin((100, 400), beta=0.1)
    for n, o, t in zip((100, 400), (pem.oracle(0), pem.oracle(1)), tau, strict=True):
        assert t == pytest.approx(math.sqrt(math.log(2 * 8 / 0.1) / (2 * n)) / (o.p_star - o.q_star), rel=1e-12)
    with pytest.raises(ValidationError, match="group_sizes"):
        pem.margin((100,))


def test_group_is_independent_of_the_item() -> None:
    # the group of each report is uniform on 0..G-1 whatever the item (the privacy proof's first step)
    pem = PrefixExtendingMethod(12, 1.0, top=4, step=4)
    for item in (0, 4095, 1234):
        groups = pem.sample(np.full(9000, item), rng=item)[:, 0]
        counts = np.bincount(groups, minlength=pem.groups)
        assert chisquare(counts).pvalue > 1e-4


def test_each_group_reports_its_prefix_through_olh() -> None:
    # within group j a report supports the item's l_j-bit prefix with probability p*, another prefix with q*
    pem = PrefixExtendingMethod(12, 1.0, top=4, step=4)
    item = 0b1011_0110_0101
    r = pem.sample(np.full(30_000, item), rng=5)
    for j, length in enumerate(pem.lengths):
        o, rows = pem.oracle(j), r[r[:, 0] == j, 1:]
        prefix = item >> (12 - length)
        s = o.support_of(rows, np.array([prefix, prefix ^ 1]))
        n = len(rows)
        assert abs(s[0] / n - o.p_star) <= 5 * math.sqrt(o.p_star * (1 - o.p_star) / n)
        assert abs(s[1] / n - o.q_star) <= 5 * math.sqrt(o.q_star * (1 - o.q_star) / n)


def test_support_of_is_support_at_the_values() -> None:
    o = OLH(40, 1.0)
    r = o.sample(np.arange(500) % 40, rng=1)
    vals = np.array([3, 0, 39, 3])
    np.testing.assert_array_equal(o.support_of(r, vals), o.support(r)[vals])
    assert o.support_of(r, np.array([], dtype=np.int64)).shape == (0,)
    with pytest.raises(ValidationError, match="value 40 is not a category"):
        o.support_of(r, np.array([1, 40]))


def test_error_against_the_exact_domain_olh() -> None:
    # 12-bit items (4,096: the exact-domain OLH runs too), 40,000 users, eps 2. Tolerances: every heavy item
    # is found, each PEM estimate lies within 5 of its standard errors of the true frequency, as does the
    # exact-domain estimate within 5 of its own; PEM's standard error is sqrt(G) times the exact one's, to
    # 15 % (its last group holds about N / G users); and the mean absolute errors compare likewise.
    bits, eps = 12, 2.0
    heavy = {17: 6000, 4000: 4000, 2222: 3000, 1023: 2500}
    x = population(bits, heavy, 24_500, seed=7)
    n = x.size
    pem = PrefixExtendingMethod(bits, eps, top=8, step=4)
    hh = pem.identify(pem.sample(x, rng=8))
    exact = OLH(1 << bits, eps)
    full = exact.estimate(exact.support(exact.sample(x, rng=9)), n)
    items = list(heavy)
    assert set(items) <= set(hh.items[: len(heavy)].tolist())
    truth = np.array([heavy[i] / n for i in items])
    at = np.array([int(np.flatnonzero(hh.items == i)[0]) for i in items])
    pem_err = np.abs(hh.estimates[at] - truth)
    assert (pem_err <= 5 * hh.stderr[at]).all()
    sd_exact = np.sqrt([exact.variance(n, f) for f in truth])
    exact_err = np.abs(full[items] - truth)
    assert (exact_err <= 5 * sd_exact).all()
    ratio = hh.stderr[at] / sd_exact
    assert np.all(np.abs(ratio / math.sqrt(pem.groups) - 1) <= 0.15), ratio
    assert pem_err.mean() <= 5 * math.sqrt(pem.groups) * sd_exact.mean()


def test_items_above_the_margin_are_found() -> None:
    # guarantee (3): an item whose prefixes each beat every other prefix of its group by 2 tau_j is found
    # (probability >= 1 - beta = 0.99 for any seed; this seed is one draw)
    bits, eps = 20, 4.0
    pem = PrefixExtendingMethod(bits, eps, top=4, step=4)
    x = population(bits, {123_456: 20_000, 987_654: 15_000}, 25_000, seed=3)
    r = pem.sample(x, rng=4)
    sizes = tuple(int((r[:, 0] == j).sum()) for j in range(pem.groups))
    tau = pem.margin(sizes, beta=0.01)
    for j, length in enumerate(pem.lengths):  # the theorem's hypothesis, on the true group frequencies
        prefixes = x[r[:, 0] == j] >> (bits - length)
        freq = np.bincount(prefixes, minlength=1 << length) / prefixes.size
        for v in (123_456, 987_654):
            others = np.sort(np.delete(freq, v >> (bits - length)))[::-1]
            assert freq[v >> (bits - length)] > others[pem.top - 1] + 2 * tau[j]
    hh = pem.identify(r)
    assert {123_456, 987_654} <= set(hh.items[:2].tolist())
    assert hh.group_sizes == sizes


def test_privatize_is_secure_by_default_and_warns_when_seeded() -> None:
    pem = PrefixExtendingMethod(8, 1.0, top=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pem.privatize(np.arange(10)).shape == (10, 4)
    with pytest.warns(PrivacyLeakWarning):
        pem.privatize(np.arange(10), rng=1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"bits": MAX_BITS + 1}, "bits"), ({"bits": 0}, "bits"), ({"top": 0}, "top"), ({"step": 0}, "step"),
     ({"epsilon": -1.0}, "epsilon"), ({"start": 25, "bits": 30}, "start")],
)
def test_bad_parameters(kwargs, match) -> None:
    args = {"bits": 10, "epsilon": 1.0, **kwargs}
    with pytest.raises(ValidationError, match=match):
        PrefixExtendingMethod(**args)


def test_bad_items_and_reports_one_error() -> None:
    pem = PrefixExtendingMethod(8, 1.0, top=2, step=3)
    with pytest.raises(ValidationError, match="item 256 is not a 8-bit integer"):
        pem.sample(np.array([3, 256]))
    with pytest.raises(ValidationError, match="1-d array of integers"):
        pem.sample(np.array([0.5]))
    r = pem.sample(np.arange(200), rng=1)
    with pytest.raises(ValidationError, match="shape"):
        pem.identify(r[:, :3])
    bad = r.copy()
    bad[5, 0] = pem.groups
    with pytest.raises(ValidationError, match=f"report 5 names group {pem.groups}"):
        pem.identify(bad)
    with pytest.raises(ValidationError, match="group 1 has no reports"):
        pem.identify(r[r[:, 0] != 1])
    bad = r.copy()
    bad[0, 3] = 99  # y beyond g
    with pytest.raises(ValidationError, match="not a valid"):
        pem.identify(bad)
