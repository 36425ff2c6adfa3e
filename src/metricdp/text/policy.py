r"""Token policies: which word tokens are never replaced, and which words may be released.

**What is kept** (``keep``, never replaced: their true text leaves, which is why each is
opt-in and counted in the statistics):

* ``stopwords``: the English function words of :data:`STOPWORDS` (case-insensitive);
* ``numbers`` (the default): tokens with a digit that are not numbers (``3rd``, ``1990s``, ``v2``).
  Numbers themselves (``1990``, ``-1,250.50``, :func:`.tokens.is_numeric`) are never word
  tokens: they are kept, or released as numbers (:mod:`.numbers`), whatever ``keep`` says;
* ``names``: capitalised tokens (``Title`` or ``UPPER`` case) that do not start a sentence, a
  heuristic for proper names (no named-entity model: ``I`` and sentence-initial names are
  not recognised, acronyms are);
* ``punctuation``: accepted for completeness; punctuation and whitespace are never word
  tokens, so they are always kept as they are.

Keeping a token is not a release: the guarantee of every other token is unchanged, and the
kept tokens carry no protection at all.

**What may be released** (``outputs``):

* ``alphabetic`` (the default for word tokens): releases are words of letters with inner
  apostrophes or hyphens (:func:`alphabetic_mask`). A mechanism samples over the whole
  vocabulary as it always does, and a release outside the allowed words is then replaced by
  the allowed word nearest to it (ties: the smaller index; :class:`OutputFilter`).
* ``any``: every vocabulary word, punctuation tokens of GloVe (``,``, ``.``, ``--``) included.
* ``words`` (the default with a mechanism file, whose labels were chosen by its builder): every
  label with a letter or a digit that is not a number (:func:`word_mask`): no word token is
  ever released as punctuation or as a number (``u.s.`` and ``3rd`` stay releasable). Same
  filter, same proof. Under ``any`` a word may be released as a vocabulary number: the
  user's explicit choice.

*Proof that the filter keeps the guarantee.* The filter is a fixed function f of the
released word, built from public data only (the vocabulary, its vectors or distances, the
allowed set): for inputs x, x' and any allowed word a,
:math:`P(f(M(x)) = a) = \sum_{y: f(y) = a} P(M(x) = y) \le e^{\varepsilon d(x,x')}
\sum_{y: f(y)=a} P(M(x') = y) = e^{\varepsilon d(x,x')} P(f(M(x')) = a)`: post-processing.
This is why the restriction is applied *after* sampling: restricting the candidates before
sampling would be a different mechanism, with its own proof.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..errors import ValidationError
from ..pointspace import PointSpace
from ..spaces import MetricSpace
from .tokens import is_numeric, visible

__all__ = [
    "KEEP_CATEGORIES", "OUTPUTS", "STOPWORDS", "OutputFilter", "TokenPolicy", "alphabetic_mask", "output_mask",
    "word_mask",
]

#: Categories of word tokens that ``keep`` can name.
KEEP_CATEGORIES = ("stopwords", "numbers", "names", "punctuation")
#: What may be released: ``alphabetic`` words only, ``any`` vocabulary word, or ``words`` (a letter or a digit).
OUTPUTS = ("alphabetic", "any", "words")

#: English function words (articles, pronouns, auxiliaries, prepositions, conjunctions).
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves""".split()
)

_ALPHABETIC = re.compile(r"[^\W\d_]+(?:['\u2019\-][^\W\d_]+)*")
_DIGIT = re.compile(r"\d")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
_SENTENCE_END = re.compile(r"[.!?]")


def alphabetic_mask(labels: Sequence[str]) -> NDArray[np.bool_]:
    """True for the labels made of letters with inner apostrophes or hyphens (``don't``, ``e-mail``)."""
    return np.fromiter((_ALPHABETIC.fullmatch(lab) is not None for lab in labels), dtype=bool, count=len(labels))


def word_mask(labels: Sequence[str]) -> NDArray[np.bool_]:
    """True for the labels with a letter or a digit that are not numbers (``cat``, ``u.s.``, ``3rd``), False
    for punctuation and numbers (``1990``, :func:`.tokens.is_numeric`)."""
    return np.fromiter((_LETTER_OR_DIGIT.search(lab) is not None and not is_numeric(lab) for lab in labels),
                       dtype=bool, count=len(labels))


def output_mask(outputs: str, labels: Sequence[str]) -> NDArray[np.bool_] | None:
    """The labels ``outputs`` allows (None for ``any``: no filter)."""
    if outputs == "alphabetic":
        return alphabetic_mask(labels)
    if outputs == "words":
        return word_mask(labels)
    if outputs == "any":
        return None
    raise ValidationError(f"outputs must be one of {', '.join(OUTPUTS)}, got {outputs!r}")


@dataclass(frozen=True)
class TokenPolicy:
    """What is never replaced (``keep``, categories of :data:`KEEP_CATEGORIES`) and what may be
    released (``outputs``, one of :data:`OUTPUTS`)."""

    keep: frozenset[str] = frozenset({"numbers"})
    outputs: str = "alphabetic"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.keep) - set(KEEP_CATEGORIES))
        if unknown:
            raise ValidationError(
                f"keep: unknown categor{'y' if len(unknown) == 1 else 'ies'} {', '.join(map(repr, unknown))}; "
                f"choose from {', '.join(KEEP_CATEGORIES)}"
            )
        if self.outputs not in OUTPUTS:
            raise ValidationError(f"outputs must be one of {', '.join(OUTPUTS)}, got {self.outputs!r}")
        object.__setattr__(self, "keep", frozenset(self.keep))

    @classmethod
    def parse(cls, keep: str | None = None, outputs: str = "alphabetic") -> TokenPolicy:
        """From a comma-separated ``keep`` list (``"stopwords,numbers"``; None: the default, ``numbers``)."""
        if keep is None:
            return cls(outputs=outputs)
        items = frozenset(k.strip() for k in keep.split(",") if k.strip())
        return cls(items, outputs)

    def kept_as(self, low: str, piece: str, sentence_start: bool) -> str | None:
        """The category that keeps this word token (``low``: its normal form), or None when it is to be released."""
        if "stopwords" in self.keep and low in STOPWORDS:
            return "stopwords"
        if "numbers" in self.keep and _DIGIT.search(piece):
            return "numbers"
        if "names" in self.keep and not sentence_start and visible(piece)[:1].isupper():
            return "names"
        return None

    @staticmethod
    def ends_sentence(piece: str) -> bool:
        """Whether a non-word piece (punctuation and spaces) closes a sentence."""
        return _SENTENCE_END.search(piece) is not None


class OutputFilter:
    """Post-processing to the allowed words: each released word outside ``allowed`` becomes the
    allowed word nearest to it (see the module docstring for the proof); memoized per word.

    ``space``: a :class:`~metricdp.pointspace.PointSpace` or a
    :class:`~metricdp.spaces.MetricSpace` over the mechanism's outputs, in label order.
    """

    def __init__(self, space: PointSpace | MetricSpace, allowed: NDArray[np.bool_]) -> None:
        allowed = np.asarray(allowed, dtype=bool)
        n = len(space.labels)
        if allowed.shape != (n,):
            raise ValidationError(f"allowed must have one entry per word ({n}), got shape {allowed.shape}")
        if not allowed.any():
            raise ValidationError("no word of the vocabulary may be released under this output policy")
        self.space = space
        self.allowed = allowed
        self._keys = np.empty(0, dtype=np.intp)  # sorted words already mapped
        self._values = np.empty(0, dtype=np.intp)  # their allowed replacements

    def _nearest_allowed(self, words: NDArray[np.intp]) -> NDArray[np.intp]:
        if isinstance(self.space, PointSpace):
            step = self.space.block_size(len(self.allowed))  # rows per block
            out = np.empty(len(words), dtype=np.intp)
            for start in range(0, len(words), step):
                d = self.space.distances_from(words[start : start + step])
                d[:, ~self.allowed] = np.inf
                out[start : start + step] = d.argmin(axis=1)  # first minimum: the smaller index
            return out
        d = np.array(self.space.distances[words], dtype=np.float64)
        d[:, ~self.allowed] = np.inf
        return d.argmin(axis=1).astype(np.intp)

    def __call__(self, released: NDArray[np.intp]) -> NDArray[np.intp]:
        released = np.asarray(released, dtype=np.intp)
        bad = ~self.allowed[released]
        if not bad.any():
            return released
        words = released[bad]
        todo = np.setdiff1d(words, self._keys)
        if todo.size:
            keys = np.concatenate([self._keys, todo])
            values = np.concatenate([self._values, self._nearest_allowed(todo)])
            order = np.argsort(keys, kind="stable")
            self._keys, self._values = keys[order], values[order]
        out = released.copy()
        out[bad] = self._values[np.searchsorted(self._keys, words)]
        return out
