"""Token policies: what is kept, what may be released, and the output filter's post-processing."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metricdp.errors import ValidationError
from metricdp.pointspace import PointSpace
from metricdp.spaces import MetricSpace
from metricdp.text.exponential import ExponentialText
from metricdp.text.policy import STOPWORDS, OutputFilter, TokenPolicy, alphabetic_mask
from metricdp.text.rewrite import RewriteStats, Vocabulary, rewrite_texts


def test_alphabetic_mask_by_hand() -> None:
    labels = ["the", ",", "don't", "e-mail", "u.s.", "1990", "3rd", "--", "café", "'s"]
    assert alphabetic_mask(labels).tolist() == [True, False, True, True, False, False, False, False, True, False]


def test_policy_parsing_and_refusals() -> None:
    p = TokenPolicy.parse("stopwords, numbers", "any")
    assert p.keep == frozenset({"stopwords", "numbers"}) and p.outputs == "any"
    with pytest.raises(ValidationError, match="unknown category 'verbs'"):
        TokenPolicy.parse("verbs")
    with pytest.raises(ValidationError, match="outputs must be one of alphabetic, any"):
        TokenPolicy(outputs="letters")


def test_kept_categories_by_hand() -> None:
    p = TokenPolicy.parse("stopwords,numbers,names")
    assert p.kept_as("the", "The", sentence_start=True) == "stopwords"
    assert p.kept_as("3rd", "3rd", sentence_start=False) == "numbers"
    assert p.kept_as("paris", "Paris", sentence_start=False) == "names"
    assert p.kept_as("paris", "Paris", sentence_start=True) is None  # a sentence's first word is not a name
    assert p.kept_as("cat", "cat", sentence_start=False) is None
    assert TokenPolicy().kept_as("the", "the", sentence_start=False) is None  # stopwords are not kept by default
    assert TokenPolicy().kept_as("3rd", "3rd", sentence_start=False) == "numbers"  # tokens with digits are
    assert TokenPolicy.parse("").kept_as("3rd", "3rd", sentence_start=False) is None
    assert "the" in STOPWORDS and "cat" not in STOPWORDS


def test_rewrite_keeps_by_category_and_tracks_sentences() -> None:
    vocab = Vocabulary(["the", "cat", "paris", "saw", "1990", "a"])
    identity_plus = lambda idx: (idx + 1) % 6  # noqa: E731 -- every released word differs from its input
    st = RewriteStats()
    text = "The cat saw Paris in 1990. Paris saw a cat."
    out = list(rewrite_texts([text], vocab, identity_plus, policy=TokenPolicy.parse("stopwords,numbers,names"),
                             stats=st))
    # kept: The, in, a (stopwords), 1990 (number), the first Paris (a name mid-sentence);
    # the second Paris starts a sentence, so it is released
    assert st.kept_by == {"stopwords": 3, "names": 1, "numbers": 1}
    assert out[0].startswith("The ") and "Paris in 1990. " in out[0] and not out[0].endswith("Paris saw a cat.")
    assert st.replaced == 5 and st.oov == 0


def _space() -> PointSpace:
    labels = ["a", ",", "b", ".", "c"]
    return PointSpace.from_points([[0.0], [0.4], [1.0], [2.9], [3.0]], labels)


def test_output_filter_maps_to_the_nearest_allowed_word() -> None:
    space = _space()
    filt = OutputFilter(space, alphabetic_mask(space.labels))
    assert filt(np.array([0, 1, 2, 3, 4, 1, 3])).tolist() == [0, 0, 2, 4, 4, 0, 4]
    # the same through a dense MetricSpace (a mechanism file's space)
    dense = MetricSpace.from_points([[0.0], [0.4], [1.0], [2.9], [3.0]], space.labels)
    assert OutputFilter(dense, alphabetic_mask(space.labels))(np.array([1, 3])).tolist() == [0, 4]
    with pytest.raises(ValidationError, match="no word of the vocabulary"):
        OutputFilter(space, np.zeros(5, dtype=bool))


def test_output_filter_law_is_the_post_processed_law() -> None:
    # the filtered exponential mechanism releases a with P(a) + P(,), c with P(.) + P(c): chi-square
    space = _space()
    mech = ExponentialText(space, 2.0)
    filt = OutputFilter(space, alphabetic_mask(space.labels))
    d = np.abs(np.array([0.0, 0.4, 1.0, 2.9, 3.0]) - 1.0)
    w = np.exp(-d)  # e^{-eps d / 2}, eps = 2, input b
    p = w / w.sum()
    expected = np.array([p[0] + p[1], p[2], p[3] + p[4]])
    draws = filt(mech.sample(np.full(20_000, 2), rng=np.random.default_rng(7)))
    counts = np.array([(draws == k).sum() for k in (0, 2, 4)])
    assert counts.sum() == 20_000
    assert stats.chisquare(counts, expected * 20_000).pvalue > 1e-4


def test_word_mask_and_output_mask_by_hand() -> None:
    from metricdp.text.policy import output_mask, word_mask

    labels = ["the", ",", "1990", "--", "u.s.", "''", "café"]
    assert word_mask(labels).tolist() == [True, False, False, False, True, False, True]  # no number for a word
    assert output_mask("any", labels) is None
    assert output_mask("alphabetic", labels).tolist() == alphabetic_mask(labels).tolist()
    with pytest.raises(ValidationError, match="outputs must be one of"):
        output_mask("letters", labels)
