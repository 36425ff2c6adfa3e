"""bound_contributions' law: every K-subset of a person's rows equally likely (exact and statistical)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from metricdp.accounting import accountant
from metricdp.accounting.accountant import _shuffled, bound_contributions

#: a tiny file: person 7 has rows 0, 2, 3, 5; person 1 has rows 1, 4 (interleaved, not sorted)
IDS = np.array([7, 1, 7, 7, 1, 7])


class WordsOnly:
    """A seeded source that is not a numpy Generator: the shuffle by sorted words runs."""

    def __init__(self, seed: int, span: int = 2**64) -> None:
        self.g = np.random.default_rng(seed)
        self.span = span

    def words(self, count: int) -> NDArray[np.uint64]:
        return self.g.integers(0, self.span, size=count, dtype=np.uint64, endpoint=False)

    def random(self, size: int | None = None) -> NDArray[np.float64]:
        return self.g.random(size)


def old_bound(ids: NDArray[np.int64], k: int, rng: np.random.Generator) -> NDArray[np.bool_]:
    """The former law, as the oracle: independent keys, rows sorted by (person, key), rank < k."""
    _, inverse = np.unique(ids, return_inverse=True)
    keys = rng.integers(0, 2**64, size=ids.size, dtype=np.uint64)
    order = np.lexsort((keys, inverse))
    grouped = inverse[order]
    rank = np.arange(ids.size) - np.searchsorted(grouped, grouped, side="left")
    keep = np.zeros(ids.size, dtype=bool)
    keep[order] = rank < k
    return keep


def kept_subsets(mask: NDArray[np.bool_]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    rows = np.flatnonzero(mask).tolist()
    return tuple(r for r in rows if IDS[r] == 7), tuple(r for r in rows if IDS[r] == 1)


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 5])
def test_exact_law_over_every_permutation(monkeypatch: pytest.MonkeyPatch, k: int) -> None:
    """Fed each of the 6! permutations once, every k-subset of each person comes out equally often."""
    perms = iter(itertools.permutations(range(IDS.size)))
    monkeypatch.setattr(accountant, "_shuffled", lambda n, rng: np.array(next(perms), dtype=np.intp))
    first, second = Counter(), Counter()
    for _ in range(math.factorial(IDS.size)):
        a, b = kept_subsets(bound_contributions(IDS, k, rng=0))
        first[a] += 1
        second[b] += 1
    for counts, rows in ((first, (0, 2, 3, 5)), (second, (1, 4))):
        subsets = list(itertools.combinations(rows, min(k, len(rows))))
        assert set(counts) == set(subsets)
        assert len(set(counts.values())) == 1  # each exactly 6! / C(c, k) times


@pytest.mark.parametrize("source", ["generator", "words", "tied words"])
def test_every_k_subset_equally_likely(source: str) -> None:
    """Chi-square over 6,000 draws (fixed seed): the 6 pairs of person 7's rows, the 2 rows of person 1."""
    rng = {"generator": np.random.default_rng(5), "words": WordsOnly(5), "tied words": WordsOnly(5, span=3)}[source]
    first, second = Counter(), Counter()
    for _ in range(6000):
        a, b = kept_subsets(bound_contributions(IDS, 2, rng=rng))
        first[a] += 1
        second[b] += 1
    assert set(first) == set(itertools.combinations((0, 2, 3, 5), 2)) and set(second) == {(1, 4)}
    assert stats.chisquare(list(first.values())).pvalue > 1e-3


@pytest.mark.parametrize("span", [2**64, 2])
def test_shuffle_is_uniform(span: int) -> None:
    """All 24 orders of 4 rows, also when most words tie (a source of 1-bit words)."""
    rng = WordsOnly(11, span=span)
    counts = Counter(tuple(_shuffled(4, rng).tolist()) for _ in range(12000))
    assert len(counts) == 24
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3


def test_same_law_as_the_former_implementation() -> None:
    """Two-sample chi-square: the kept subsets of both implementations, 4,000 draws each, one contingency table."""
    ids = np.array([3, 3, 9, 3, 9, 9, 3, 9, 3])  # person 3: 5 rows; person 9: 4 rows
    new, old = Counter(), Counter()
    g_new, g_old = np.random.default_rng(1), np.random.default_rng(2)
    for _ in range(4000):
        new[tuple(np.flatnonzero(bound_contributions(ids, 2, rng=g_new)).tolist())] += 1
        old[tuple(np.flatnonzero(old_bound(ids, 2, g_old)).tolist())] += 1
    cells = sorted(set(new) | set(old))
    assert len(cells) == math.comb(5, 2) * math.comb(4, 2)
    table = np.array([[new[c] for c in cells], [old[c] for c in cells]])
    assert stats.chi2_contingency(table).pvalue > 1e-3


def test_kept_rows_per_person_and_caps_per_person() -> None:
    ids = np.random.default_rng(0).zipf(1.5, 5000) % 300
    mask = bound_contributions(ids, 3, rng=np.random.default_rng(1))
    uniq, counts = np.unique(ids, return_counts=True)
    _, kept = np.unique(np.r_[ids[mask], uniq], return_counts=True)
    assert np.array_equal(kept - 1, np.minimum(counts, 3))
    caps = np.arange(uniq.size) % 4
    mask = bound_contributions(ids, caps, rng=None)
    _, kept = np.unique(np.r_[ids[mask], uniq], return_counts=True)
    assert np.array_equal(kept - 1, np.minimum(counts, caps))


def test_empty_and_text_ids() -> None:
    assert bound_contributions(np.array([], dtype=np.int64), 2).size == 0
    mask = bound_contributions(["b", "a", "b", "b"], 1, rng=3)
    assert mask[1] and mask[[0, 2, 3]].sum() == 1
