r"""Numbers in a text released as numbers: the two-sided geometric mechanism on each number's grid.

A number token (:data:`metricdp.text.tokens.NUMBER`: ``2004``, ``-1,250``, ``3.50``) with
``k`` decimals is a point of the grid :math:`10^{-k}\mathbb{Z}` under :math:`d(x, x') = |x - x'|`
(``epsilon`` is per unit of the value, as for the numeric columns of
:mod:`metricdp.mechanisms.numeric`). It is released as

.. math:: y = x + 10^{-k} Z, \qquad \Pr[Z = z] \propto e^{-\varepsilon 10^{-k} |z|},

and written in the input's shape (same decimals, thousands separators, explicit ``+``,
leading zeros: :func:`metricdp.text.tokens.format_number`).

**Privacy (exact).** For x, x' on the same grid (ranks i, i') and every integer k,
:math:`\Pr[i + Z = k] / \Pr[i' + Z = k] = e^{\varepsilon 10^{-k}(|k - i'| - |k - i|)} \le
e^{\varepsilon 10^{-k}|i - i'|} = e^{\varepsilon |x - x'|}` (triangle inequality): each number is
:math:`\varepsilon`-mDP for :math:`|x - x'|`, and a document's numbers together are
:math:`\varepsilon \sum_j |x_j - x'_j|`-indistinguishable (sequential composition). Z is drawn
exactly from random bits (Canonne, Kamath, Steinke, NeurIPS 2020, Algorithm 2:
:func:`metricdp.mechanisms.lattice_laplace.discrete_laplace`, with the rational
:math:`\varepsilon 10^{-k}` the float eps is exactly): no float in the law, so no Mironov-type
gap. The grid (the count of decimals) and the shape are those of the input, like a word's
case pattern: they leave as they are, and the guarantee is between numbers of the same shape.

Numbers are never released as words nor words as numbers: this module only ever sees number
tokens, and the word mechanisms only word tokens (:mod:`.rewrite`). Under a per-person budget
a person's numbers are charged as a line of their own, ``(numbers released) x epsilon`` per
unit of the value, against a budget and a ledger of their own (:mod:`.accounted`;
``docs/proofs/composition.md``, Section 2.2): never added to the words' eps, which is per unit
of the embedding's distance.
"""

from __future__ import annotations

import unicodedata
from fractions import Fraction

from .._random import RandomSource, check_rng
from .._validation import check_epsilon
from ..errors import ValidationError
from ..mechanisms.lattice_laplace import BitStream, discrete_laplace
from .tokens import format_number, parse_number, visible

__all__ = ["MAX_DIGITS", "MIN_EPSILON", "NumberRelease"]

#: Numbers with more digits than this are not released (they are kept and counted): the noise of
#: a grid of step 10^-k needs about k + log10(1/eps) digits, and Python's int-to-text conversion
#: is capped at 4,300 digits.
MAX_DIGITS = 1000
#: The smallest epsilon per unit: below it the noise alone would pass the same cap.
MIN_EPSILON = 1e-100


def _plain(piece: str) -> str:
    return piece if piece.isascii() else unicodedata.normalize("NFKC", visible(piece))


class NumberRelease:
    """Release number tokens by the two-sided geometric mechanism (module docstring).

    Parameters
    ----------
    epsilon : float
        Per unit of the value (a number x is eps-mDP for :math:`|x - x'|`), in
        ``[MIN_EPSILON, inf)``.
    rng : None, int or numpy Generator
        None: the OS secure source.

    Examples
    --------
    >>> rel = NumberRelease(1e6, rng=0)  # a huge eps: the noise is 0 with overwhelming probability
    >>> rel.release_token("1,250.50"), rel.release_token("2004")
    ('1,250.50', '2004')
    """

    def __init__(self, epsilon: float, *, rng: RandomSource | int | None = None) -> None:
        epsilon = check_epsilon(epsilon, "the parameter 'epsilon'")
        if epsilon < MIN_EPSILON:
            raise ValidationError(
                f"the parameter 'epsilon' must be >= {MIN_EPSILON:g} per unit of the value, got {epsilon!r} "
                "(the noise would have thousands of digits)"
            )
        self.epsilon = epsilon
        self._eps = Fraction(epsilon)  # the float eps, exactly
        self._bits = BitStream(check_rng(rng))

    def __repr__(self) -> str:
        return f"NumberRelease(epsilon={self.epsilon!r})"

    def releasable(self, piece: str) -> bool:
        """Whether ``piece`` is a number token this mechanism releases (at most :data:`MAX_DIGITS` digits,
        read without format characters and in NFKC: ``20\u200b04`` and fullwidth digits are numbers)."""
        return len(piece) <= MAX_DIGITS and parse_number(_plain(piece)) is not None

    def release_token(self, piece: str) -> str:
        """The release of one number token, written in its shape (ASCII digits, no format characters)."""
        piece = _plain(piece) if len(piece) <= MAX_DIGITS else piece
        parsed = parse_number(piece) if len(piece) <= MAX_DIGITS else None
        if parsed is None:
            raise ValidationError(f"{piece[:40]!r} is not a number token of at most {MAX_DIGITS} digits")
        units, decimals = parsed
        noise = discrete_laplace(self._bits, self._eps / 10**decimals)
        return format_number(units + noise, decimals, piece)
