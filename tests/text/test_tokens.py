"""Tokenisation keeps the text byte for byte; case patterns restored."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metricdp.text.tokens import case_pattern, normal, restore_case, split


@pytest.mark.slow
@given(st.text())
def test_split_covers_the_text_exactly(text: str) -> None:
    pieces = split(text)
    assert "".join(p for p, _ in pieces) == text
    assert all(p for p, _ in pieces)


def test_words_and_separators() -> None:
    assert [p for p, w in split("e-mail, don't\tstop!") if w] == ["e-mail", "don't", "stop"]
    assert [p for p, w in split("a_b") if not w] == ["_"]


def test_case_patterns() -> None:
    assert restore_case("london", "PARIS") == "LONDON"
    assert restore_case("london", "Paris") == "London"
    assert restore_case("london", "paris") == "london"
    assert restore_case("london", "pAris") == "london"
    assert case_pattern("I") == "title" and case_pattern("U.S") == "upper"


def test_a_decomposed_accent_belongs_to_its_word():
    # e + U+0301 (NFD) is one word token, looked up as the composed word: the release replaces the accent
    # with the rest of the word instead of leaving it on the replacement ("the" + U+0301)
    assert split("cafe\u0301 and Cafe\u0301s") == [("cafe\u0301", True), (" ", False), ("and", True),
                                                      (" ", False), ("Cafe\u0301s", True)]
    assert normal("Cafe\u0301") == "caf\u00e9"
    assert "".join(p for p, _ in split("x\u0301y \u0301a 2\u0301")) == "x\u0301y \u0301a 2\u0301"
