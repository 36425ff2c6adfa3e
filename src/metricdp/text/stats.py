r"""Plausible-deniability statistics of a word-level mechanism (Feyisetan, Balle, Drake,
Diethe, WSDM 2020, Section 5.2): for a word w and k releases of w,

* :math:`N_w` -- the fraction of releases equal to w (the paper counts them; a fraction
  does not depend on k): how often the word is *not* replaced;
* :math:`S_w` -- the number of distinct words among the k releases: how many words w
  hides among.

Both are estimated by sampling the true mechanism (the only way for Madlib-style
mechanisms, whose matrix has no closed form); with the mean embedding distance of the
releases (the utility loss) they let a user pick epsilon by looking (docs/text.md).

:func:`corpus_composition` describes a text before any release: what share of its tokens
are words, numbers and punctuation, how many words the vocabulary holds (the ones a
mechanism releases) and how many come back in their own case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike

import numpy as np
from numpy.typing import NDArray

from .._progress import Progress, report
from .._resources import check_allocation
from .._validation import check_int
from ..pointspace import PointSpace
from .rewrite import RewriteStats, Vocabulary, rewrite_texts
from .tokens import case_pattern, is_numeric, split

__all__ = ["QUANTILES", "CorpusComposition", "DeniabilityStats", "corpus_composition", "plausible_deniability",
           "plot_deniability"]

#: Quantiles reported by ``metricdp text stats``.
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


@dataclass(frozen=True)
class DeniabilityStats:
    """Per word: ``n_w`` (fraction unchanged), ``s_w`` (distinct releases), ``loss`` (mean distance)."""

    words: NDArray[np.intp]
    draws: int
    n_w: NDArray[np.float64]
    s_w: NDArray[np.int64]
    loss: NDArray[np.float64]

    def quantiles(self, qs: Sequence[float] = QUANTILES) -> dict[str, list[float]]:
        """``{"N_w": [...], "S_w": [...], "loss": [...]}`` at the quantiles ``qs``."""
        return {
            name: np.quantile(v, qs).tolist() for name, v in (("N_w", self.n_w), ("S_w", self.s_w), ("loss", self.loss))
        }


def plausible_deniability(
    sample: Callable[[NDArray[np.intp]], NDArray[np.intp]],
    space: PointSpace,
    words: NDArray[np.intp],
    draws: int,
    *,
    progress: Progress | None = None,
) -> DeniabilityStats:
    """Draw ``draws`` releases of each word through ``sample`` and summarise them.

    Examples
    --------
    >>> from metricdp.text.exponential import ExponentialText
    >>> space = PointSpace.from_points([[0.0], [1.0], [9.0]])
    >>> st = plausible_deniability(lambda i: ExponentialText(space, 30.0).sample(i, rng=0), space, np.arange(3), 50)
    >>> st.n_w.tolist(), st.s_w.tolist()
    ([1.0, 1.0, 1.0], [1, 1, 1])
    """
    words = np.asarray(words, dtype=np.intp)
    draws = check_int(draws, "draws", minimum=1)
    # one word's draws (indices, vectors, differences) are the smallest block allocated below
    check_allocation(8.0 * draws * (2 * space.dim + 3), f"draws = {draws}: one word's {draws} releases")
    per = max(1, 200_000 // draws)
    n_w = np.empty(len(words))
    s_w = np.empty(len(words), dtype=np.int64)
    loss = np.empty(len(words))
    for s in range(0, len(words), per):
        block = words[s : s + per]
        inputs = np.repeat(block, draws)
        out = sample(inputs).reshape(len(block), draws)
        n_w[s : s + len(block)] = (out == block[:, None]).mean(axis=1)
        s_w[s : s + len(block)] = [len(np.unique(row)) for row in out]
        diff = space.vectors[out] - space.vectors[block][:, None, :]
        loss[s : s + len(block)] = np.sqrt(np.einsum("wkd,wkd->wk", diff, diff)).mean(axis=1)
        report(progress, s + len(block), len(words), f"{s + len(block)} of {len(words)} words")
    return DeniabilityStats(words, draws, n_w, s_w, loss)


def plot_deniability(stats: DeniabilityStats, path: str | PathLike[str], title: str = "") -> None:
    """Histograms of N_w and S_w side by side, written as a PNG (atomically)."""
    from .._figure import new_figure, save_png

    fig = new_figure(9.0, 3.6)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.hist(stats.n_w, bins=20, range=(0.0, 1.0), color="tab:blue")
    ax1.set_xlabel("N_w (fraction of releases equal to the word)")
    ax1.set_ylabel("words")
    ax2.hist(stats.s_w, bins=min(30, max(1, int(stats.s_w.max()))), color="tab:orange")
    ax2.set_xlabel(f"S_w (distinct releases in {stats.draws} draws)")
    if title:
        fig.suptitle(title)
    save_png(fig, path, dpi=100)


@dataclass(frozen=True)
class CorpusComposition:
    """The tokens of a text by kind, with the vocabulary's reach (:func:`corpus_composition`).

    ``words``: word tokens that are not numbers; ``numbers``: number tokens (``2004``,
    ``-1,250.5``; kept by default); ``punctuation``: runs of non-space characters between
    tokens (``), ``"`` and ``...``: one each); ``in_vocabulary``: words a mechanism releases
    (found in the vocabulary by their normal form, as ``text privatize`` looks them up);
    ``case_kept``: of those, the ones written back in their own case pattern (lower, Title,
    UPPER; mixed case such as ``iPhone`` takes the vocabulary's spelling); ``cases``: word
    tokens per case pattern; ``normalised``: tokens whose normal form differs from their text
    (format characters, fullwidth forms).
    """

    documents: int
    words: int
    numbers: int
    punctuation: int
    in_vocabulary: int
    case_kept: int
    normalised: int
    cases: dict[str, int] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Words, numbers and punctuation together."""
        return self.words + self.numbers + self.punctuation

    def shares(self) -> dict[str, float | None]:
        """Words, numbers and punctuation as shares of the tokens; in-vocabulary as a share of the
        words; case kept as a share of the in-vocabulary words (None when there is nothing to share)."""

        def part(a: int, b: int) -> float | None:
            return a / b if b else None

        return {
            "words": part(self.words, self.tokens), "numbers": part(self.numbers, self.tokens),
            "punctuation": part(self.punctuation, self.tokens), "in_vocabulary": part(self.in_vocabulary, self.words),
            "case_kept": part(self.case_kept, self.in_vocabulary),
        }

    def as_dict(self) -> dict[str, object]:
        """Counts and shares (JSON)."""
        return {"documents": self.documents, "tokens": self.tokens, "words": self.words, "numbers": self.numbers,
                "punctuation": self.punctuation, "in_vocabulary": self.in_vocabulary, "case_kept": self.case_kept,
                "normalised": self.normalised, "cases": dict(self.cases), "shares": self.shares()}


def corpus_composition(texts: Iterable[str], labels: Sequence[str]) -> CorpusComposition:
    """Count the tokens of ``texts`` (one document each) by kind against the vocabulary ``labels``.

    The words a mechanism releases and their case are read off ``text privatize``'s own
    rewrite (:func:`metricdp.text.rewrite.rewrite_texts` with the default token policy and a
    release that returns every word itself), so the counts are the ones a release would see.

    Examples
    --------
    >>> c = corpus_composition(["The cat saw 2 NASA iPhones, (xyzzy)."], ["the", "cat", "saw", "nasa", "iphones"])
    >>> c.words, c.numbers, c.punctuation, c.in_vocabulary, c.case_kept, c.cases["mixed"]
    (6, 1, 3, 5, 4, 1)
    """
    docs = list(texts)
    stats = RewriteStats()
    out = rewrite_texts(docs, Vocabulary(labels), lambda idx: idx, stats=stats)
    words = numbers = punctuation = changed = 0
    cases: dict[str, int] = {"lower": 0, "title": 0, "upper": 0, "mixed": 0}
    for before, after in zip(docs, out, strict=True):
        pieces = split(before)
        for piece, is_word in pieces:
            if not is_word:
                punctuation += len(piece.split())
            elif is_numeric(piece):
                numbers += 1
            else:
                words += 1
                cases[case_pattern(piece)] += 1
        released = [p for p, w in split(after) if w]
        original = [p for p, w in pieces if w]
        changed += sum(case_pattern(a) != case_pattern(b) for a, b in zip(original, released, strict=False))
    return CorpusComposition(len(docs), words, numbers, punctuation, stats.replaced, stats.replaced - changed,
                             stats.normalised, cases)
