r"""Tokenisation that keeps a text byte for byte, and capitalisation patterns.

:func:`split` cuts a text into alternating runs: words (letters, digits, inner
apostrophes or hyphens: ``don't``, ``e-mail``) and everything else (whitespace,
punctuation) kept as they were, so ``"".join(split(t)) == t``. Only words are looked up
in the vocabulary (case-insensitively); :func:`restore_case` gives a replacement the
original's pattern: ``lower``, ``UPPER``, ``Title``, else the vocabulary's spelling.
"""

from __future__ import annotations

import re

__all__ = ["WORD", "case_pattern", "restore_case", "split"]

#: A word token: letters/digits with inner apostrophes or hyphens.
WORD = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*")


def split(text: str) -> list[tuple[str, bool]]:
    """``(piece, is_word)`` pairs covering ``text`` exactly.

    Examples
    --------
    >>> split("Hi, Bob's  cat.")
    [('Hi', True), (', ', False), ("Bob's", True), ('  ', False), ('cat', True), ('.', False)]
    >>> "".join(p for p, _ in split(" a-b\\t!")) == " a-b\\t!"
    True
    """
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in WORD.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], False))
        out.append((m.group(), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def case_pattern(word: str) -> str:
    """``lower``, ``upper`` (two or more cased letters, all upper), ``title`` or ``mixed``.

    Examples
    --------
    >>> [case_pattern(w) for w in ("cat", "NASA", "Paris", "iPhone", "A", "42")]
    ['lower', 'upper', 'title', 'mixed', 'title', 'lower']
    """
    if word.islower() or not any(c.isalpha() for c in word):
        return "lower"
    if word.isupper():
        return "upper" if sum(c.isalpha() for c in word) > 1 else "title"
    if word[:1].isupper() and word[1:] == word[1:].lower():
        return "title"
    return "mixed"


def restore_case(replacement: str, original: str) -> str:
    """``replacement`` in ``original``'s case pattern (``mixed`` keeps the replacement).

    Examples
    --------
    >>> restore_case("dog", "CAT"), restore_case("dog", "Cat"), restore_case("dog", "cAt")
    ('DOG', 'Dog', 'dog')
    """
    pattern = case_pattern(original)
    if pattern == "upper":
        return replacement.upper()
    if pattern == "title":
        return replacement[:1].upper() + replacement[1:]
    return replacement
