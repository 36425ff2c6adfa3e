r"""Tokenisation that keeps a text byte for byte, numbers, normal forms and capitalisation patterns.

:func:`split` cuts a text into alternating runs: words (letters, digits, inner
apostrophes or hyphens: ``don't``, ``e-mail``; numbers with their sign, thousands
separators and decimals: ``-1,234.5``, :data:`NUMBER`) and everything else (whitespace,
punctuation) kept as they were, so ``"".join(split(t)) == t``. Format characters
(Unicode category Cf: the zero-width space U+200B, the soft hyphen U+00AD, ...) inside or
around a word belong to it, so ``par\u200bis`` is one token, not two.

Words are looked up in the vocabulary by their :func:`normal` form (format characters
removed, NFKC, case folded): ``pa\u00adris``, ``\uff50\uff41\uff52\uff49\uff53`` and ``PARIS`` are
all ``paris``. :func:`restore_case` gives a replacement the original's pattern: ``lower``,
``UPPER``, ``Title``, else (mixed case: ``iPhone``) the vocabulary's spelling.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal

__all__ = [
    "FORMAT_CHARS", "NUMBER", "WORD", "case_pattern", "format_number", "has_hidden_form", "is_numeric", "normal",
    "parse_number", "restore_case", "split", "visible",
]

#: The format characters (Unicode category Cf) of the Basic Multilingual Plane as a regex class body
#: (Unicode 14); :func:`normal` removes every Cf character whatever the plane.
FORMAT_CHARS = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
)
_CF = f"[{FORMAT_CHARS}]"
#: Combining marks (a decomposed accent, ``e`` + U+0301) continue the word they follow: NFKC composes them
#: for the lookup, and the release replaces them with the rest of the word.
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_ALNUM = f"(?:[^\\W_]|{_CF}|[{_MARKS}])"
#: A number: optional sign (only where no word character precedes it), digits with optional
#: thousands separators (``1,234``) and decimals (``2.50``); not glued to a letter (``3rd`` is a word).
NUMBER = re.compile(
    r"(?<![\w.,])(?:[+\-\u2212](?=\d))?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+\-\u2212]?\d{1,4})?"
    r"(?![\w\u00ad\u200b-\u200d\u2060]|[.,]\d)"
)
#: The exponent of a number in scientific notation (``1e5``, ``1.5E-3``).
_EXPONENT = re.compile(r"[eE]([+\-\u2212]?)(\d{1,4})$")
#: A word token: letters/digits (format characters included) with inner apostrophes or hyphens.
WORD = re.compile(f"{_CF}*[^\\W_]{_ALNUM}*(?:['\u2019\\-]{_ALNUM}+)*")
_TOKEN = re.compile(f"{NUMBER.pattern}|{WORD.pattern}")


def split(text: str) -> list[tuple[str, bool]]:
    """``(piece, is_word)`` pairs covering ``text`` exactly.

    Examples
    --------
    >>> split("Hi, Bob's  cat.")
    [('Hi', True), (', ', False), ("Bob's", True), ('  ', False), ('cat', True), ('.', False)]
    >>> "".join(p for p, _ in split(" a-b\\t!")) == " a-b\\t!"
    True
    >>> [p for p, w in split("Version 2.0, -1,250 and 3rd") if w]
    ['Version', '2.0', '-1,250', 'and', '3rd']
    """
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in _TOKEN.finditer(text):
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
    >>> [case_pattern(w) for w in ("cat", "NASA", "Paris", "iPhone", "A", "42", "\\u200bPar\\u00adis")]
    ['lower', 'upper', 'title', 'mixed', 'title', 'lower', 'title']
    """
    word = visible(word)
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


def visible(piece: str) -> str:
    """``piece`` without its format characters (category Cf): the letters a reader sees.

    Examples
    --------
    >>> visible("\\u200bPa\\u00adris")
    'Paris'
    """
    if piece.isascii():
        return piece
    return "".join(c for c in piece if unicodedata.category(c) != "Cf")


def normal(piece: str) -> str:
    """The lookup form of a token: format characters (category Cf) removed, NFKC, case folded.

    Examples
    --------
    >>> [normal(w) for w in ("par\\u200bis", "pa\\u00adris", "\\uff30\\uff41\\uff52\\uff49\\uff53", "PARIS")]
    ['paris', 'paris', 'paris', 'paris']
    """
    if piece.isascii():
        return piece.lower()
    return unicodedata.normalize("NFKC", visible(piece)).casefold()


def has_hidden_form(piece: str) -> bool:
    """Whether ``piece`` holds format characters or compatibility forms (its NFKC form differs).

    Examples
    --------
    >>> [has_hidden_form(w) for w in ("Paris", "par\\u200bis", "\\uff50aris", "caf\\u00e9")]
    [False, True, True, False]
    """
    if piece.isascii():
        return False
    return any(unicodedata.category(c) == "Cf" for c in piece) or unicodedata.normalize("NFKC", piece) != piece


def is_numeric(piece: str) -> bool:
    """Whether a word token is a number (:data:`NUMBER`) or digits without a letter (``1.2.3``'s parts).

    Examples
    --------
    >>> [is_numeric(w) for w in ("2004", "-1,250.5", "3rd", "e-mail", "\\uff12\\uff10")]
    [True, True, False, False, True]
    """
    if not piece.isascii():  # read as a reader sees it: circled, fullwidth or superscript digits are digits
        piece = unicodedata.normalize("NFKC", visible(piece))
    return NUMBER.fullmatch(piece) is not None or (
        any(c.isdigit() for c in piece) and not any(c.isalpha() for c in piece)
    )


def parse_number(piece: str) -> tuple[int, int] | None:
    """``(units, decimals)`` of a number token: its value is ``units / 10**decimals``; None if not a number.

    Examples
    --------
    >>> parse_number("-1,250.50"), parse_number("2004"), parse_number("3rd")
    ((-125050, 2), (2004, 0), None)
    """
    if NUMBER.fullmatch(piece) is None:
        return None
    exponent = _EXPONENT.search(piece)
    shift = 0
    if exponent is not None:  # m x 10^e: the grid of the digits shown, 10^(e - decimals of m)
        shift = int(exponent.group(2)) * (-1 if exponent.group(1) in ("-", "\u2212") else 1)
        piece = piece[: exponent.start()]
    sign = -1 if piece[:1] in ("-", "\u2212") else 1
    body = piece.lstrip("+-\u2212").replace(",", "")
    whole, _, frac = body.partition(".")
    digits = "".join(str(unicodedata.digit(c)) for c in whole + frac)
    units, decimals = sign * int(Decimal(digits)), len(frac) - shift
    return (units * 10 ** -decimals, 0) if decimals < 0 else (units, decimals)


def format_number(units: int, decimals: int, like: str) -> str:
    """``units / 10**decimals`` written like the token ``like``: its decimals, its thousands
    separators, its explicit ``+`` and its leading zeros (digit count), in ASCII digits.

    Examples
    --------
    >>> format_number(-99, 0, "2004"), format_number(123456, 2, "1,000.00"), format_number(7, 0, "+007")
    ('-99', '1,234.56', '+007')
    """
    exponent = _EXPONENT.search(like)
    if exponent is not None:  # written with the input's exponent: every digit of the release, nothing rounded
        shift = int(exponent.group(2)) * (-1 if exponent.group(1) in ("-", "\u2212") else 1)
        mantissa = format(Decimal(units).scaleb(-decimals - shift), "f")
        return ("+" if like[:1] == "+" and units >= 0 else "") + mantissa + exponent.group()
    sign = "-" if units < 0 else ("+" if like[:1] == "+" else "")
    digits = str(abs(units)).rjust(decimals + 1, "0")
    whole, frac = (digits[:-decimals], digits[-decimals:]) if decimals else (digits, "")
    body = like.lstrip("+-\u2212").partition(".")[0]
    if "," in body:
        whole = f"{int(whole):,}"
    else:
        whole = whole.rjust(len(body), "0") if body[:1] in ("0", "\uff10") and len(body) > 1 else whole
    return sign + whole + ("." + frac if decimals else "")
